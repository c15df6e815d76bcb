// rocm_sample_skbuild_cuda._kernels: add_one(values) adds 1 to each value on the GPU.
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <cuda_runtime.h>

#include <vector>

__global__ void add_one_kernel(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}

// Errors name the CUDA error number too (209: no kernel image for this device).
#define CUDA_CHECK(call)                                                       \
  do {                                                                         \
    cudaError_t err_ = (call);                                                 \
    if (err_ != cudaSuccess) {                                                 \
      cudaFree(dev);                                                           \
      return PyErr_Format(PyExc_RuntimeError, "CUDA error %d: %s", (int)err_,  \
                          cudaGetErrorString(err_));                           \
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
    CUDA_CHECK(cudaMalloc(&dev, bytes));
    CUDA_CHECK(cudaMemcpy(dev, host.data(), bytes, cudaMemcpyHostToDevice));
    add_one_kernel<<<(n + 255) / 256, 256>>>(dev, n);
    CUDA_CHECK(cudaGetLastError());
    CUDA_CHECK(cudaMemcpy(host.data(), dev, bytes, cudaMemcpyDeviceToHost));
    cudaFree(dev);
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
