// HIP hazards for `portable audit`, written for its tests: matrix builtins that exist on one
// gfx target only, and AMD-only builtins audited against NVIDIA targets. Same marker rule as
// hazards.cu.
typedef float v4f __attribute__((ext_vector_type(4)));
typedef float v16f __attribute__((ext_vector_type(16)));
typedef float v2f __attribute__((ext_vector_type(2)));
typedef int v8i __attribute__((ext_vector_type(8)));

__global__ void scaled_mma(const v8i* a, const v8i* b, v16f* c, int sa, int sb) {
    v16f acc = c[threadIdx.x];
    acc = __builtin_amdgcn_mfma_scale_f32_32x32x64_f8f6f4(a[0], b[0], acc, 0, 0, 0, sa, 0, sb);  // expect: matrix-unavailable
    c[threadIdx.x] = acc;
}

__global__ void xf32_mma(const v2f* a, const v2f* b, v4f* c) {
    v4f acc = c[threadIdx.x];
    acc = __builtin_amdgcn_mfma_f32_16x16x8_xf32(a[0], b[0], acc, 0, 0, 0);   // expect: matrix-unavailable
    c[threadIdx.x] = acc;
}

// correct wave64 code: nothing below may be reported
__device__ float wave_sum(float v) {
    for (int o = warpSize / 2; o > 0; o >>= 1)
        v += __shfl_xor(v, o);
    unsigned long long lanes = __ballot(v > 0.0f);
    return v + (float)__popcll(lanes);
}
