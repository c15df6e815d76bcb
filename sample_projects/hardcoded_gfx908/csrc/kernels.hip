// rocm_sample_hardcoded._kernels: one kernel, always compiled for gfx908 only.
// Built without the HIP headers (-nogpuinc), so the attribute is spelled out.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define __global__ __attribute__((global))
typedef struct { unsigned x, y, z; } dim3;
typedef struct ihipStream_t* hipStream_t;
extern "C" int hipLaunchKernel(const void*, dim3, dim3, void**, unsigned long, hipStream_t);

__global__ void fill_kernel(float* x, float value, int n) {
  int i = __builtin_amdgcn_workitem_id_x();
  if (i < n) x[i] = value;
}

static PyObject* built_for(PyObject*, PyObject*) { return PyUnicode_FromString("gfx908"); }

static PyMethodDef methods[] = {
    {"built_for", built_for, METH_NOARGS, "The one GPU target this build hard-codes."},
    {nullptr, nullptr, 0, nullptr},
};

static PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kernels", nullptr, -1, methods};

PyMODINIT_FUNC PyInit__kernels(void) { return PyModule_Create(&module); }
