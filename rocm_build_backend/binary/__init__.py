"""Readers for GPU device code in host binaries (ELF sections, clang offload bundles, CCOB,
AMDGPU code objects, OffloadBinary, CUDA fatbins and cubins) and the audit built on them.

Pure Python over bounded reads: no external tool runs here.
"""
