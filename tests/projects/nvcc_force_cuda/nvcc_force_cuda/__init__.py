"""A CUDA library behind a FORCE_CUDA switch."""
