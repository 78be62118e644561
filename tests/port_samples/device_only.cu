// A sample for tests/test_port.py: a device-only CUDA file that ports to HIP and compiles
// offline for gfx942 (hipRTC's runtime header stands in for the HIP headers).
#include <cuda_runtime.h>
#include <cuda_fp16.h>

#define WARP_MASK 0xffffffffu

__device__ __forceinline__ float reduce_sum(float v) {
    for (int offset = warpSize / 2; offset > 0; offset >>= 1)
        v += __shfl_xor_sync(WARP_MASK, v, offset);
    return v;
}

extern "C" __global__ void row_sum(const __half* __restrict__ x, float* __restrict__ out, int cols) {
    const __half* row = x + (size_t)blockIdx.x * cols;
    float acc = 0.0f;
    for (uint32_t c = threadIdx.x; c < (uint32_t)cols; c += blockDim.x)   // uint32_t: from the runtime header
        acc += __half2float(row[c]);
    acc = reduce_sum(acc);
    __syncwarp();
    if (threadIdx.x % warpSize == 0)
        atomicAdd(out + blockIdx.x, acc);
}

extern "C" __global__ void count_positive(const float* x, int* count, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int votes = __ballot_sync(0xffffffff, i < n && x[i] > 0.0f);
    if (threadIdx.x % warpSize == 0)
        atomicAdd(count, __popc(votes));
    __syncwarp(0xffffffff);
}
