#define TID ((int)(blockIdx.x * blockDim.x + threadIdx.x))
#define HOST_CHECK host_check_a
#include "kernels.inc"
