// The patterns issue 39 found missed or misreported on real code, written for `portable audit`'s
// tests (same marker rule as hazards.cu: every line ending in an "expect:" comment is reported
// with exactly those kinds, and no other line is).
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>                                  // expect: no-hip-equivalent
#include <mma.h>                                                        // expect: vendor-library
#include <cudnn.h>                                                      // expect: vendor-library
#include <cute/tensor.hpp>                                              // expect: vendor-library

namespace cg = cooperative_groups;

#define WARP_SIZE 32U                                                   // expect: warp-size

// ---- cooperative groups HIP lacks, and tiles larger than a wave
__device__ float tile_sum(cg::thread_block block, float v) {
    auto tile = cg::tiled_partition<32>(block);                         // 32 lanes: fine on both
    return cg::reduce(tile, v, cg::plus<float>());                      // expect: no-hip-equivalent
}

__global__ void big_tiles(float* out) {
    __shared__ cg::experimental::block_tile_memory<256> scratch;        // expect: no-hip-equivalent
    auto block = cg::experimental::this_thread_block(scratch);
    auto tile = cg::tiled_partition<128>(block);                        // expect: warp-size
    out[threadIdx.x] = tile.thread_rank();
}

// ---- an architecture guard hipcc never takes: the body compiles to nothing there
__global__ void scale(float* x, float s, int n) {
#if __CUDA_ARCH__ >= 700                                                // expect: arch-guard
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= s;
#endif
}

// a guard with a working #else is fine, and so is one around a hint
__device__ float load(const float* p) {
#if __CUDA_ARCH__ >= 800
    float v;
    asm volatile("ld.global.nc.f32 %0, [%1];" : "=f"(v) : "l"(p));
    return v;
#else
    return *p;
#endif
}

__global__ void pdl(float* x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
    x[threadIdx.x] = 0.0f;
}

// ---- lanes counted with warpSize feeding a reduction that stops at offset 16
__device__ float warp_reduce(float v) {
    for (int offset = WARP_SIZE / 2; offset > 0; offset /= 2)          // expect: shuffle-reduction
        v += __shfl_down_sync(0xffffffffffffffffull, v, offset);
    return v;
}

__global__ void block_sum(const float* in, float* out) {
    __shared__ float partial[1024 / 32];                                // expect: warp-size
    int lane = threadIdx.x % warpSize, warp = threadIdx.x / warpSize;
    float v = warp_reduce(in[blockIdx.x * blockDim.x + threadIdx.x]);
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    if (threadIdx.x < blockDim.x / 32) out[blockIdx.x] += partial[threadIdx.x];    // expect: warp-size
}

// ---- texture fetches (gfx942/gfx950 have no image support), cache-hint stores, managed memory
__global__ void sample2d(cudaTextureObject_t tex, float* out, float u, float v) {
    out[0] = tex2D<float>(tex, u, v);                                   // expect: unavailable-on-target
    out[1] = tex2DLod<float>(tex, u, v, 0.0f);                          // expect: unavailable-on-target
    __stcs(out + 2, 1.0f);                                              // expect: no-hip-equivalent
}

void host(float** p, size_t n) {
    cudaMallocManaged(p, n * sizeof(float));                            // expect: managed-memory
}

// ---- Hopper MMA and TMA through CuTe: wgmma is sm_90a-only, TMA NVIDIA-only
using Atom = cute::SM90_64x128x16_F32BF16BF16_SS<cute::GMMA::Major::K, cute::GMMA::Major::K>;  // expect: matrix-unavailable
using Load = cute::SM90_TMA_LOAD;                                       // expect: unavailable-on-target

// ---- answers that used to be wrong
__device__ void copy16(unsigned dst, const void* src) {
    asm volatile("cp.async.cg.shared.global.L2::128B [%0], [%1], 16;" :: "r"(dst), "l"(src));  // expect: inline-asm
}
const unsigned kFullMask = 0xffffffffu;                                 // expect: lane-mask
__device__ float bcast(float v) { return __shfl_sync(kFullMask, v, 0, 32); }       // expect: lane-mask
