// One kernel, compiled without HIP headers (-nogpuinc): the declarations it needs.
#include <stddef.h>
#define __global__ __attribute__((global))
struct dim3 { unsigned x, y, z; };
typedef struct ihipStream_t* hipStream_t;
extern "C" int hipLaunchKernel(const void*, dim3, dim3, void**, size_t, hipStream_t);

__global__ void add_one(float* x, int n) {
  int i = (int)__builtin_amdgcn_workitem_id_x();
  if (i < n) x[i] += 1.0f;
}

extern "C" int kernels_version(void) { return 1; }
