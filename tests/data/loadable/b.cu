#define TID ((int)(blockIdx.x * blockDim.x + threadIdx.x))
#define HOST_CHECK host_check_b
#define poly poly_b
#include "kernels.inc"
