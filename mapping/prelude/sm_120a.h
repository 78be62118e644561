// Target prelude for sm_120a (RTX PRO 6000 Blackwell): block-scaled FP4 on the warp MMA.
// mma.sync m16n8k64 kind::mxf4 block_scale scale_vec::2X: A 16 x 64 and B 64 x 8 OCP E2M1
// values with one UE8M0 scale per 32 K values; C is the m16n8 fp32 fragment of mma_bf16.
// Operands come from row-major shared tiles: fp4 bytes [row][k/2] (low nibble = even k) and
// scale bytes [row][k/32]. g = lane / 4, t = lane % 4.
//   A regs: row g bytes 4t..4t+3 and 16+4t.. of the 32-byte K slab; row g+8 the same.
//   B regs: column g bytes 4t.. and 16+4t...
//   Scales (selectors byte-id 0, thread-id 0): lane t == 0 of each quad holds row g's two
//   scales in bytes 0-1, t == 1 holds row g+8's; for B, t == 0 holds column g's two.

#define MMA4_K 64
struct frag_a4 { unsigned x[4]; unsigned scale; };
struct frag_b4 { unsigned x[2]; unsigned scale; };

__device__ __forceinline__ unsigned mx4_scale_pair(const unsigned char* s) {
    return (unsigned)s[0] | ((unsigned)s[1] << 8) | 0x7f7f0000u;
}
__device__ __forceinline__ frag_a4 mma4_load_a(const unsigned char* s, int ld, const unsigned char* sc, int ldsc, int k0) {
    const int l = mma_lane(), g = l >> 2, t = l & 3;
    const unsigned char* p = s + g * ld + k0 / 2 + 4 * t;
    frag_a4 a;
    a.x[0] = *reinterpret_cast<const unsigned*>(p);
    a.x[1] = *reinterpret_cast<const unsigned*>(p + 8 * ld);
    a.x[2] = *reinterpret_cast<const unsigned*>(p + 16);
    a.x[3] = *reinterpret_cast<const unsigned*>(p + 8 * ld + 16);
    a.scale = t < 2 ? mx4_scale_pair(sc + (g + 8 * t) * ldsc + k0 / 32) : 0x7f7f7f7fu;
    return a;
}
__device__ __forceinline__ frag_b4 mma4_load_b(const unsigned char* s, int ld, const unsigned char* sc, int ldsc, int n0, int k0) {
    const int l = mma_lane(), g = l >> 2, t = l & 3;
    const unsigned char* p = s + (n0 + g) * ld + k0 / 2 + 4 * t;
    frag_b4 b;
    b.x[0] = *reinterpret_cast<const unsigned*>(p);
    b.x[1] = *reinterpret_cast<const unsigned*>(p + 16);
    b.scale = t == 0 ? mx4_scale_pair(sc + (n0 + g) * ldsc + k0 / 32) : 0x7f7f7f7fu;
    return b;
}
__device__ __forceinline__ void mma_mxf4(frag_c& c, const frag_a4& a, const frag_b4& b) {
    asm volatile("mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3}, %10, {0, 0}, %11, {0, 0};"
                 : "+f"(c.v[0]), "+f"(c.v[1]), "+f"(c.v[2]), "+f"(c.v[3])
                 : "r"(a.x[0]), "r"(a.x[1]), "r"(a.x[2]), "r"(a.x[3]), "r"(b.x[0]), "r"(b.x[1]),
                   "r"(a.scale), "r"(b.scale));
}
