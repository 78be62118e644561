// Dialect prelude for HIP targets: helpers whose bodies differ by vendor. hipRTC's runtime
// header is the only one on the path.

// Two fp32 -> packed bf16x2 (lo in bits 0-15), round to nearest even. clang's __bf16
// conversion is v_cvt_pk_bf16_f32 on gfx950 and an exact integer sequence on gfx942.
__device__ __forceinline__ unsigned f32x2_to_bf16x2_rn(float lo, float hi) {
    return (unsigned)__builtin_bit_cast(unsigned short, (__bf16)lo)
         | ((unsigned)__builtin_bit_cast(unsigned short, (__bf16)hi) << 16);
}
