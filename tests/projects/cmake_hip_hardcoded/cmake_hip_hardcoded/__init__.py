"""A CMake HIP library with its own target list."""
