// Dialect prelude for CUDA targets: helpers whose bodies differ by vendor. Rendered sources
// include no headers (NVRTC from the pip wheel has none of cuda_bf16.h / cuda_fp8.h).

// Two fp32 -> packed bf16x2 (lo in bits 0-15), round to nearest even: one F2FP instruction.
__device__ __forceinline__ unsigned f32x2_to_bf16x2_rn(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
