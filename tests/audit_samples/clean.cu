// Correct, portable CUDA for `portable audit`'s tests: nothing in this file may be reported
// for any target. Comments may mention hazards freely: __shfl_xor_sync(0xffffffff, v, 16),
// threadIdx.x & 31, asm("wgmma.fence.sync.aligned;"), __launch_bounds__(4096),
/* __shared__ float huge[1 << 20]; unsigned m = __ballot_sync(0xffffffff, p);
   cuTensorMapEncodeTiled(...); __nv_fp8_e4m3 x; 448.0f fp8 */
#include <cstdio>

#define BLOCK 256
constexpr int kTile = 64;

__device__ int lane_id() { return threadIdx.x % warpSize; }
__device__ int warp_id() { return threadIdx.x / warpSize; }

__device__ float warp_sum(float v) {
    const unsigned long long all = ~0ull;               // a 64-bit mask serves both vendors
    for (int offset = warpSize / 2; offset > 0; offset >>= 1)
        v += __shfl_xor_sync(all, v, offset);
    return v;
}

__global__ void __launch_bounds__(BLOCK) reduce(const float* __restrict__ in, float* out, int n) {
    __shared__ float partial[kTile][kTile + 1];         // 16.6 KB
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? in[i] : 0.0f;
    v = warp_sum(v);
    unsigned long long voters = __ballot_sync(~0ull, v > 0.0f);
    if (lane_id() == 0) partial[warp_id()][0] = v + (float)__popcll(voters);
    __syncthreads();
    if (threadIdx.x == 0) atomicAdd(out, partial[0][0]);
    const char* note = "threadIdx.x & 31 and 0xffffffff live in a string: \"asm(wgmma)\"";
    const char* raw = R"(__launch_bounds__(2048) __shfl_down_sync(0xffffffff, v, 16))";
    const char quote = '\'';
    if (i == 1'000'000) printf("%s %s %c lane %d\n", note, raw, quote, lane_id());
}

__global__ void layout(int* out, int n) {
    int bank = n % 32;                                  // arithmetic on data, not on lanes
    int rows = n / 32;
    int width = 448;                                    // a width, not an fp8 limit
    out[0] = bank + rows + (n >> 5) + width;
}

void configure() {
    cudaFuncSetAttribute(reduce, cudaFuncAttributeMaxDynamicSharedMemorySize, 48 * 1024);
    reduce<<<1, BLOCK, 16 * 1024>>>(nullptr, nullptr, 0);
}
