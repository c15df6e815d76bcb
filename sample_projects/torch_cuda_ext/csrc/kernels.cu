// The kernel, for every floating type, on PyTorch's current stream. A launch without code for
// the device raises "CUDA error: no kernel image is available for execution on the device".
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

template <typename T>
__global__ void add_one_kernel(const T* in, T* out, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] + T(1);
}

// The launch lives outside AT_DISPATCH: the commas of <<<...>>> would split the macro's arguments.
template <typename T>
static void launch_add_one(const T* in, T* out, int64_t n, cudaStream_t stream) {
  const int threads = 256;
  const int blocks = (int)((n + threads - 1) / threads);
  add_one_kernel<T><<<blocks, threads, 0, stream>>>(in, out, n);
}

at::Tensor add_one_cuda(const at::Tensor& x) {
  auto out = at::empty_like(x);
  const int64_t n = x.numel();
  if (n == 0) return out;
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "add_one", [&] {
    launch_add_one<scalar_t>(x.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), n, stream);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}
