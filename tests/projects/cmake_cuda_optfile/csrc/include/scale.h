// A header found through the include folder CMake puts in includes_CUDA.rsp.
#define SCALE 2.0f
