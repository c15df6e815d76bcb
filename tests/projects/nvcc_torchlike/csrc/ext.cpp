// The host side of the extension (compiled by the C++ compiler, as torch does for .cpp files).
extern "C" int kernels_version(void);
extern "C" int ext_version(void) { return kernels_version(); }
