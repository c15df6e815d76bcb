// extension 2: a module with no torch headers (quick to compile); built by torch's BuildExtension with ninja
#include <Python.h>
static struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "e2", 0, -1, 0};
PyMODINIT_FUNC PyInit_e2(void) { return PyModule_Create(&m); }
