"""NVIDIA CUDA: code targets and their spellings, the loader's rules, GPU detection (NVML,
``nvidia-smi``), the build knobs, a pinned ``nvidia-smi`` and the ``nvcc`` check.

Every module here is pure or takes its probes as arguments; nothing runs at import time.
"""
