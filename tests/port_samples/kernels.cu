// A sample written for tests/test_port.py: a CUDA file with host and device code.
// cudaMalloc in this comment stays as it is; so does "cudaMemcpy" in a string below.
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cooperative_groups.h>
#include <cuda_pipeline.h>
#include <cstdio>
#include "tree/util.cuh"

#define FULL_MASK 0xffffffff
#define CHECK(call) do { cudaError_t e = (call); if (e != cudaSuccess) \
    printf("cuda error %s: %s\n", #call, cudaGetErrorString(e)); } while (0)

namespace cg = cooperative_groups;

__device__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffff, v, o);
    return v;
}

__device__ float spellings(float v, int lane) {
    v += __shfl_down_sync(FULL_MASK, v, 1);
    v += __shfl_up_sync(~0u, v, 1);
    v += __shfl_sync(uint32_t(-1), v, 0, 16);
    v += __shfl_xor_sync(0x0000ffff, v, 1);
    return v;
}

__device__ int votes(int pred, int lane) {
    unsigned mask = __ballot_sync(0xffffffff, pred);
    int below = __popc(mask & ((1u << lane) - 1));
    int all = __popc(__ballot_sync(FULL_MASK, pred));
    if (__any_sync(0xffffffff, pred)) all += 1;
    record(__ballot_sync(0xffffffff, pred));
    return below + all;
}

__device__ float streaming(const float* p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    return __ldcg(p);
#else
    return p[0];
#endif
}

template <typename T, int N>
__global__ void scale(T* x, T a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}

__global__ void fill(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = warp_sum(1.0f);
}

void run(float* host, int n) {
    float* dev = nullptr;
    cudaStream_t stream;
    cudaStreamCreate(&stream);
    CHECK(cudaMalloc(&dev, n * sizeof(float)));
    int mycudaMalloc = 0, cudaMalloc_count = 1;
    fill<<<(n + 255) / 256, 256>>>(dev, n);
    scale<float, 4><<<dim3((n + 255) / 256), dim3(256), 0, stream>>>(dev,
                                                                     2.0f, n);
    cudaMemcpyAsync(host, dev, n * sizeof(float), cudaMemcpyDeviceToHost, stream);
    cudaStreamSynchronize(stream);
    printf("cudaMemcpy done: %d %d\n", mycudaMalloc, cudaMalloc_count);
    cudaFree(dev);
}
