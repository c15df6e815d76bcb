// HIP without HIP's headers or device libraries (clang-19 -x hip -nogpuinc -nogpulib)
#define __global__ __attribute__((global))
typedef struct { unsigned x, y, z; } dim3;
typedef struct ihipStream_t *hipStream_t;
extern "C" int hipLaunchKernel(const void *, dim3, dim3, void **, unsigned long, hipStream_t);
#define TID ((int)(__builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x()))
#define HOST_CHECK host_check_a
#include "kernels.inc"
