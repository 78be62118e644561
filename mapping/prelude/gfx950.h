// Target prelude for gfx950 (MI355X, CDNA4): block-scaled FP4 on the MFMA unit.
// v_mfma_scale_f32_16x16x128_f8f6f4 with both operands in format 4 (E2M1): 16 x 128 A and
// 128 x 16 B, one E8M0 scale per lane; C is the 16 x 16 fp32 fragment of mma_bf16.
// Lane l holds row (A) or column (B) l % 16, K values 32 * (l / 16) .. + 31 of the 128-slab:
// 16 bytes of fp4 (the operand's first four dwords; the other four are unused for fp4) and
// exactly one 32-value MX block, so its scale byte is the block's own.

#define MMA4_K 128
typedef int mma_i32x8 __attribute__((ext_vector_type(8)));
struct frag_a4 { mma_i32x8 x; int scale; };
typedef frag_a4 frag_b4;

__device__ __forceinline__ frag_a4 mx4_load_rows(const unsigned char* s, int ld, const unsigned char* sc, int ldsc, int r0, int k0) {
    const int q = mma_lane() >> 4, r = r0 + (mma_lane() & 15);
    const u32x4 v = *reinterpret_cast<const u32x4*>(s + r * ld + k0 / 2 + 16 * q);
    frag_a4 a;
    a.x = (mma_i32x8){(int)v.x, (int)v.y, (int)v.z, (int)v.w, 0, 0, 0, 0};
    a.scale = sc[r * ldsc + k0 / 32 + q];
    return a;
}
__device__ __forceinline__ frag_a4 mma4_load_a(const unsigned char* s, int ld, const unsigned char* sc, int ldsc, int k0) {
    return mx4_load_rows(s, ld, sc, ldsc, 0, k0);
}
__device__ __forceinline__ frag_b4 mma4_load_b(const unsigned char* s, int ld, const unsigned char* sc, int ldsc, int n0, int k0) {
    return mx4_load_rows(s, ld, sc, ldsc, n0, k0);
}
__device__ __forceinline__ void mma_mxf4(frag_c& c, const frag_a4& a, const frag_b4& b) {
    // cbsz = blgp = 4: E2M1 A and B; op_sel 0: the scale is the low byte of each lane's VGPR
    c.v = __builtin_amdgcn_mfma_scale_f32_16x16x128_f8f6f4(a.x, b.x, c.v, 4, 4, 0, a.scale, 0, b.scale);
}
