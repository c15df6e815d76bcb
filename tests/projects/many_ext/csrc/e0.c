#include <Python.h>

static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "_e0", NULL, -1, NULL};

PyMODINIT_FUNC PyInit__e0(void) { return PyModule_Create(&def); }
