// Consistent 32-lane "virtual warps", as real kernels write them: warp = tid / 32, lane = tid % 32,
// reductions from offset 16 inside each group, a shared slot per group. On a 64-lane wave each
// wave holds two such groups and every step stays inside its own group, so this is correct on
// wave64 and `portable audit` must report nothing here for any target (the masks are 64-bit).
#define THREADS 256
constexpr int kGroup = 32;

__device__ float group_sum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1)
        v += __shfl_xor_sync(~0ull, v, offset);
    return v;
}

__global__ void row_sums(const float* in, float* out) {
    __shared__ float partial[THREADS / 32];
    const int lane = threadIdx.x % 32, group = threadIdx.x / 32;
    float v = group_sum(in[blockIdx.x * THREADS + threadIdx.x]);
    if (lane == 0) partial[group] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        float s = 0.0f;
        for (int g = 0; g < THREADS / kGroup; ++g) s += partial[g];
        out[blockIdx.x] = s;
    }
}

__device__ float group_broadcast(float v) {
    return __shfl_sync(~0ull, v, 0, 32);             // width 32: lane 0 of each 32-lane group
}
