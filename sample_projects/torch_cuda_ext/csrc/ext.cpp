// rocm_sample_torch_cuda._C.add_one(t): t + 1, computed by a CUDA kernel (csrc/kernels.cu).
#include <torch/extension.h>

at::Tensor add_one_cuda(const at::Tensor& x);

static torch::Tensor add_one(const torch::Tensor& x) {
  TORCH_CHECK(x.is_cuda(), "add_one expects a CUDA tensor");
  return add_one_cuda(x.contiguous());
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("add_one", &add_one, "x + 1 on the GPU");
}
