"""The magic bytes that open each device-code container, so that a file is sent to its reader
without importing every reader first. Constants only; the readers re-export theirs."""

BUNDLE = b"__CLANG_OFFLOAD_BUNDLE__"  # clang offload bundle
CCOB = b"CCOB"  # compressed offload bundle
OFFLOAD = b"\x10\xff\x10\xad"  # LLVM OffloadBinary
FATBIN = b"\x50\xed\x55\xba"  # NVIDIA fatbin container
