// Portability hazards for `portable audit`, written for its tests.
// Every line that ends in an "expect:" comment must be reported with exactly those hazard
// kinds, and no other line may be reported. The markers sit in comments, which the audit
// never reads, so they cannot trigger anything themselves.
#include <cuda_fp8.h>
#include <cooperative_groups.h>
#include <cuda/barrier>

#define WARP_SIZE 32                                                    // expect: warp-size
#define TILE 128
constexpr int kRows = 256;
const unsigned FULL_MASK = 0xffffffffu;                                 // expect: lane-mask

// ---- lane and warp arithmetic that assumes 32 lanes, in a file that also counts warps with
// warpSize (64 on gfx942/gfx950): the two disagree there. (32-lane groups used consistently are
// correct on a 64-lane wave: virtual_warps.cu.)
__global__ void per_wave(float* out) { out[threadIdx.x / warpSize] = 0.0f; }

__global__ void lane_math(float* out) {
    int lane = threadIdx.x & 31;                                        // expect: warp-size
    int warp = threadIdx.x / 32;                                        // expect: warp-size
    int lane2 = threadIdx.x % 32;                                       // expect: warp-size
    int warp2 = threadIdx.x >> 5;                                       // expect: warp-size
    out[warp * 32 + lane] = float(lane2 + warp2);                       // expect: warp-size
}

// ---- reductions that start at offset 16
__device__ float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1)                     // expect: shuffle-reduction
        v += __shfl_xor_sync(0xffffffff, v, offset);                    // expect: lane-mask
    return v;
}

__device__ float warp_max(float v) {
    v = fmaxf(v, __shfl_down_sync(FULL_MASK, v, 16));                   // expect: lane-mask, shuffle-reduction
    v = fmaxf(v, __shfl_down_sync(FULL_MASK, v, 8));                    // expect: lane-mask
    return v;
}

// ---- ballots kept in 32 bits, __activemask, __syncwarp
__global__ void votes(const int* in, int* out) {
    unsigned ballot = __ballot_sync(__activemask(), in[threadIdx.x] > 0);   // expect: ballot-width, warp-sync-semantics
    out[0] = __popc(__ballot_sync(~0u, in[threadIdx.x] > 1));           // expect: ballot-width, lane-mask
    __syncwarp();                                                       // expect: warp-sync-semantics
    out[1] = ballot;
}

// ---- inline PTX, including matrix instructions that some NVIDIA targets lack
__device__ unsigned sm_id() {
    unsigned id;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(id));                    // expect: inline-asm
    return id;
}

__device__ void hopper_fence() {
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");            // expect: inline-asm, matrix-unavailable
}

__device__ void blackwell_fence() {
    asm volatile("tcgen05.fence::before_thread_sync;");                 // expect: inline-asm, matrix-unavailable
}

// ---- CUDA APIs with no HIP equivalent, and features a target lacks
__global__ void __cluster_dims__(2, 1, 1) clustered(float* x) {         // expect: no-hip-equivalent
    __shared__ cuda::barrier<cuda::thread_scope_block> bar;             // expect: no-hip-equivalent
    x[0] = 0.0f;
}

__global__ void sampled(cudaTextureObject_t tex, float* out) {
    out[threadIdx.x] = tex1Dfetch<float>(tex, threadIdx.x);             // expect: unavailable-on-target
}

void make_map(CUtensorMap* map, void* base) {
    cuTensorMapEncodeTiled(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, base, 0, 0, 0, 0,  // expect: no-hip-equivalent
                           CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                           CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

// ---- shared memory beyond a target's LDS / shared-memory limit
__global__ void tile_64k(float* out) {
    __shared__ float a[TILE][TILE];          // 64 KB: exactly the gfx942 LDS, still fits
    __shared__ float b[kRows];                                          // expect: shared-memory
    out[threadIdx.x] = a[0][threadIdx.x] + b[threadIdx.x];
}

__global__ void tile_192k(__nv_bfloat16* out) {
    __shared__ __nv_bfloat16 c[96 * 1024];                              // expect: shared-memory
    out[threadIdx.x] = c[threadIdx.x];
}

void configure() {
    cudaFuncSetAttribute(tile_64k, cudaFuncAttributeMaxDynamicSharedMemorySize, 100 * 1024);  // expect: shared-memory
    tile_64k<<<1, 256, 200 * 1024>>>(nullptr);                          // expect: shared-memory
}

// ---- fp8 formats that differ on gfx942
__device__ float decode(__nv_fp8_e4m3 x) { return float(x); }           // expect: fp8-format
__device__ float fp8_scale(float amax) { return 448.0f / amax; }        // expect: fp8-format
using fp8_amd = __hip_fp8_e4m3_fnuz;                                    // expect: fp8-format

// ---- launch bounds
__global__ void __launch_bounds__(2048) too_wide(float* x) { x[0] = 1.0f; }             // expect: launch-bounds
__global__ void __launch_bounds__(256, 2) occupancy_hint(float* x) { x[0] = 1.0f; }     // expect: launch-bounds
__global__ void __launch_bounds__(256, 2, 4) cluster_hint(float* x) { x[0] = 1.0f; }    // expect: launch-bounds
