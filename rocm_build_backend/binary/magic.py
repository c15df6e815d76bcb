"""The magic bytes that open each device-code container, named once: the dispatch in ``audit``
and the first-pass scan in ``lookahead`` compare with them. Constants only; each reader
re-exports its own; nothing is imported or read here."""

BUNDLE = b"__CLANG_OFFLOAD_BUNDLE__"  # clang offload bundle
CCOB = b"CCOB"  # compressed offload bundle
OFFLOAD = b"\x10\xff\x10\xad"  # LLVM OffloadBinary
FATBIN = b"\x50\xed\x55\xba"  # NVIDIA fatbin container
