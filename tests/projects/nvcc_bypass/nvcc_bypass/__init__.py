"""A CUDA library built around the pinned nvcc, and a prebuilt fatbin."""
