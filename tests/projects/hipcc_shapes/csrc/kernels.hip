// One kernel and one host function: enough for a code object per GPU target.
#ifdef KERNELS_WITHOUT_HIP_HEADERS
// For compilers used with -nogpuinc (no HIP runtime headers): the two declarations a
// kernel definition needs.
#include <stddef.h>
#define __global__ __attribute__((global))
struct dim3 { unsigned x, y, z; };
typedef struct ihipStream_t* hipStream_t;
extern "C" int hipLaunchKernel(const void*, dim3, dim3, void**, size_t, hipStream_t);
#define THREAD_INDEX ((int)__builtin_amdgcn_workitem_id_x())
#else
#include <hip/hip_runtime.h>
#define THREAD_INDEX ((int)(blockIdx.x * blockDim.x + threadIdx.x))
#endif

__global__ void add_one(float* x, int n) {
  int i = THREAD_INDEX;
  if (i < n) x[i] += 1.0f;
}

extern "C" int kernels_version(void) { return 1; }
