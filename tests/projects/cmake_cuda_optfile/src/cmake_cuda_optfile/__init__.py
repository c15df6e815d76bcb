"""A CMake CUDA library built with the "Unix Makefiles" generator and its own target list."""
