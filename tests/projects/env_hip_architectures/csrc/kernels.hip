// One kernel and one host function: enough for a code object per GPU target.
#include <hip/hip_runtime.h>

__global__ void add_one(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}

extern "C" int launch_add_one(float* x, int n) {
  hipLaunchKernelGGL(add_one, dim3((n + 255) / 256), dim3(256), 0, 0, x, n);
  return (int)hipGetLastError();
}
