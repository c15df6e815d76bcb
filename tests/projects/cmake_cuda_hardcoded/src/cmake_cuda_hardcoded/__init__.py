"""A CMake CUDA library with its own target list."""
