"""Two CUDA libraries built by a Makefile-style setup.py."""
