// demo_hip_switch._kernels: add_one(values) adds 1 to each value on the GPU.
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <hip/hip_runtime.h>

#include <vector>

__global__ void add_one_kernel(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}

#define HIP_CHECK(call)                                                        \
  do {                                                                         \
    hipError_t err_ = (call);                                                  \
    if (err_ != hipSuccess) {                                                  \
      hipFree(dev);                                                            \
      return PyErr_Format(PyExc_RuntimeError, "HIP: %s", hipGetErrorString(err_)); \
    }                                                                          \
  } while (0)

static PyObject* add_one(PyObject*, PyObject* arg) {
  PyObject* seq = PySequence_Fast(arg, "add_one() expects a sequence of numbers");
  if (!seq) return nullptr;
  const int n = (int)PySequence_Fast_GET_SIZE(seq);
  std::vector<float> host(n);
  for (int i = 0; i < n; ++i) {
    host[i] = (float)PyFloat_AsDouble(PySequence_Fast_GET_ITEM(seq, i));
  }
  Py_DECREF(seq);
  if (PyErr_Occurred()) return nullptr;

  float* dev = nullptr;
  if (n > 0) {
    const size_t bytes = n * sizeof(float);
    HIP_CHECK(hipMalloc(&dev, bytes));
    HIP_CHECK(hipMemcpy(dev, host.data(), bytes, hipMemcpyHostToDevice));
    hipLaunchKernelGGL(add_one_kernel, dim3((n + 255) / 256), dim3(256), 0, 0, dev, n);
    HIP_CHECK(hipGetLastError());
    HIP_CHECK(hipMemcpy(host.data(), dev, bytes, hipMemcpyDeviceToHost));
    hipFree(dev);
  }
  PyObject* result = PyList_New(n);
  for (int i = 0; result && i < n; ++i) {
    PyList_SET_ITEM(result, i, PyFloat_FromDouble(host[i]));
  }
  return result;
}

static PyMethodDef methods[] = {
    {"add_one", add_one, METH_O, "Return the values plus one, computed on the GPU."},
    {nullptr, nullptr, 0, nullptr},
};

static PyModuleDef module = {PyModuleDef_HEAD_INIT, "_kernels", nullptr, -1, methods};

PyMODINIT_FUNC PyInit__kernels(void) { return PyModule_Create(&module); }
