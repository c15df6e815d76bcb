// extension 1: a module with no torch headers (quick to compile); built by torch's BuildExtension with ninja
#include <Python.h>
static struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "e1", 0, -1, 0};
PyMODINIT_FUNC PyInit_e1(void) { return PyModule_Create(&m); }
