"""A CMake CUDA library behind its own option."""
