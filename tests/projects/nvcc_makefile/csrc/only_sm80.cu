// Built for sm_80 alone on purpose, as projects do for architecture-specific kernels.
__global__ void scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}

extern "C" int only_sm80_version(void) { return 1; }
