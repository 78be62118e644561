// Dialect prelude for CUDA targets: helpers whose bodies differ by vendor. Rendered sources
// include no headers (NVRTC from the pip wheel has none of cuda_bf16.h / cuda_fp8.h).

// Two fp32 -> packed bf16x2 (lo in bits 0-15), round to nearest even: one F2FP instruction.
__device__ __forceinline__ unsigned f32x2_to_bf16x2_rn(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

// 2^x on the special-function unit (MUFU.EX2, ~2 ulp, flushes denormals; 2^-inf = 0).
__device__ __forceinline__ float ex2_approx(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// ---- warp-level matrix multiply: mma.sync m16n8k16, bf16 in, fp32 accumulate ----
// A 16x16 tile, B 16x8, C 16x8 per instruction; 32 lanes. g = lane / 4, t = lane % 4.
// A regs: (g, 2t..2t+1) (g+8, 2t..) (g, 2t+8..) (g+8, 2t+8..); B regs: (k 2t..2t+1, n g) (k 2t+8.., n g)
// C: v[0..1] = (g, 2t..2t+1), v[2..3] = (g+8, 2t..2t+1).
struct frag_a { unsigned x[4]; };
struct frag_b { unsigned x[2]; };
struct frag_c { float v[4]; };

__device__ __forceinline__ unsigned mma_lane() { return threadIdx.x & 31u; }
__device__ __forceinline__ frag_c mma_zero() { frag_c c; c.v[0] = c.v[1] = c.v[2] = c.v[3] = 0.f; return c; }
// row / column inside the 16 x 8 C tile of accumulator element i (0..3) held by this lane
__device__ __forceinline__ int mma_c_row(int i) { return (int)(mma_lane() >> 2) + 8 * (i >> 1); }
__device__ __forceinline__ int mma_c_col(int i) { return 2 * (int)(mma_lane() & 3u) + (i & 1); }

// A barrier for n threads (whole warps) of the block under id (0 is __syncthreads()'s).
__device__ __forceinline__ void named_barrier(unsigned id, unsigned n) { asm volatile("bar.sync %0, %1;" :: "r"(id), "r"(n) : "memory"); }
// Counts this warp toward barrier id's n threads and goes on (the waiting side: named_barrier).
__device__ __forceinline__ void named_barrier_arrive(unsigned id, unsigned n) { asm volatile("bar.arrive %0, %1;" :: "r"(id), "r"(n) : "memory"); }
// A generic pointer into shared memory -> its 32-bit shared-window address (ldmatrix, cp.async,
// descriptors). Inline cvta, not the compiler builtin __cvta_generic_to_shared: measured side by
// side, the builtin made mla_decode 1-2% slower and the gemm example's default path no faster
// (bench/NOTES.md, "smem_addr").
__device__ __forceinline__ unsigned smem_addr(const void* p) {
    unsigned a;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
    return a;
}
// A stored row-major [m][k] (bf16 bits), leading dimension ld elements; rows 0..15, cols k0..k0+15.
// ldmatrix.x4: lanes 0-15 address rows 0-15 at k0, lanes 16-31 the same rows at k0 + 8.
__device__ __forceinline__ frag_a mma_load_a(const unsigned short* s, int ld, int k0) {
    const int l = mma_lane();
    frag_a a;
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(a.x[0]), "=r"(a.x[1]), "=r"(a.x[2]), "=r"(a.x[3])
                 : "r"(smem_addr(s + (l & 15) * ld + k0 + (l >> 4) * 8)));
    return a;
}
// B stored as [n][k] (each output column's K values contiguous): cols n0..n0+7, k0..k0+15.
// ldmatrix.x2: lanes 0-7 address rows n0..n0+7 at k0, lanes 8-15 at k0 + 8.
__device__ __forceinline__ frag_b mma_load_b_nk(const unsigned short* s, int ld, int n0, int k0) {
    const int l = mma_lane() & 15;
    frag_b b;
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];"
                 : "=r"(b.x[0]), "=r"(b.x[1]) : "r"(smem_addr(s + (n0 + (l & 7)) * ld + k0 + (l >> 3) * 8)));
    return b;
}
// B stored as [k][n] (row-major K x N): cols n0..n0+7, k0..k0+15. ldmatrix.x2.trans: lanes 0-15
// address rows k0..k0+15 at n0; the transpose hands each lane (k 2t..2t+1, n g).
__device__ __forceinline__ frag_b mma_load_b_kn(const unsigned short* s, int ld, int k0, int n0) {
    const int l = mma_lane() & 15;
    frag_b b;
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                 : "=r"(b.x[0]), "=r"(b.x[1]) : "r"(smem_addr(s + (k0 + l) * ld + n0)));
    return b;
}
__device__ __forceinline__ void mma_bf16(frag_c& c, const frag_a& a, const frag_b& b) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c.v[0]), "+f"(c.v[1]), "+f"(c.v[2]), "+f"(c.v[3])
                 : "r"(a.x[0]), "r"(a.x[1]), "r"(a.x[2]), "r"(a.x[3]), "r"(b.x[0]), "r"(b.x[1]));
}

// ---- warp-level fp8 matrix multiply: mma.sync m16n8k32, OCP e4m3 in, fp32 accumulate ----
// Native (QMMA) on sm_120a; sm_90a, sm_100a and sm_103a accept it and run each as two f16
// HMMA.16816 (their fp8 rate is the warpgroup's / tcgen05's). A 16 x 32 and B 32 x 8 bytes,
// C the 16 x 8 fragment of mma_bf16. g = lane / 4, t = lane % 4 (PTX ISA 'Matrix Fragments
// for mma.m16n8k32'): A regs (g, 4t..4t+3) (g+8, 4t..) (g, 16+4t..) (g+8, 16+4t..);
// B regs (k 4t..4t+3, n g) (k 16+4t.., n g), bytes in K order.
#define E4M3_MAX 448.f          // the largest OCP e4m3fn value
#define E4M3_OCP_UNIT 1.f       // an OCP e4m3 byte read as this target's e4m3 means this much of it
struct frag_a8 { unsigned x[4]; };
struct frag_b8 { unsigned x[2]; };
// A stored row-major [m][k] bytes (ld a multiple of 4): rows 0..15, k0..k0+31.
__device__ __forceinline__ frag_a8 mma8_load_a(const unsigned char* s, int ld, int k0) {
    const int l = mma_lane();
    const unsigned char* p = s + (l >> 2) * ld + k0 + 4 * (l & 3);
    frag_a8 a;
    a.x[0] = *reinterpret_cast<const unsigned*>(p);
    a.x[1] = *reinterpret_cast<const unsigned*>(p + 8 * ld);
    a.x[2] = *reinterpret_cast<const unsigned*>(p + 16);
    a.x[3] = *reinterpret_cast<const unsigned*>(p + 8 * ld + 16);
    return a;
}
// B stored as [n][k] bytes (each output column's K values contiguous): cols n0..n0+7, k0..k0+31.
__device__ __forceinline__ frag_b8 mma8_load_b_nk(const unsigned char* s, int ld, int n0, int k0) {
    const int l = mma_lane();
    const unsigned char* p = s + (n0 + (l >> 2)) * ld + k0 + 4 * (l & 3);
    frag_b8 b;
    b.x[0] = *reinterpret_cast<const unsigned*>(p);
    b.x[1] = *reinterpret_cast<const unsigned*>(p + 16);
    return b;
}
__device__ __forceinline__ void mma_e4m3(frag_c& c, const frag_a8& a, const frag_b8& b) {
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c.v[0]), "+f"(c.v[1]), "+f"(c.v[2]), "+f"(c.v[3])
                 : "r"(a.x[0]), "r"(a.x[1]), "r"(a.x[2]), "r"(a.x[3]), "r"(b.x[0]), "r"(b.x[1]));
}
// Four OCP e4m3fn bytes as this target's e4m3 operand bytes: NVIDIA reads OCP itself.
__device__ __forceinline__ unsigned e4m3x4_from_ocp(unsigned w) { return w; }

// ---- skinny (swap-AB) operands: weight rows are the A rows, built in registers, so FP4 weights
// go global -> registers -> matrix unit with no shared-memory pass. Over a 128-deep K block a
// lane holds the 32 consecutive K values (one MX block) at 32 * sk_quad() of each of its SK_ROWS
// A rows; k-step s takes pairs 2s (slot 0) and 2s + 1 (slot 1) of them. The B operand (the
// activations) uses the same K order: the lane's column sk_col(), K values 32 * quad + 4s .. +3.
#define SK_ROWS 2
__device__ __forceinline__ int sk_quad() { return (int)(mma_lane() & 3u); }
__device__ __forceinline__ int sk_col() { return (int)(mma_lane() >> 2); }
__device__ __forceinline__ int sk_row(int j) { return (int)(mma_lane() >> 2) + 8 * j; }
__device__ __forceinline__ frag_a sk_frag_a(const unsigned (&slot0)[SK_ROWS], const unsigned (&slot1)[SK_ROWS]) {
    frag_a a;
    a.x[0] = slot0[0]; a.x[1] = slot0[1]; a.x[2] = slot1[0]; a.x[3] = slot1[1];
    return a;
}
__device__ __forceinline__ frag_b sk_frag_b(unsigned slot0, unsigned slot1) {
    frag_b b;
    b.x[0] = slot0; b.x[1] = slot1;
    return b;
}
// GEMM1 puts gate and up rows of one feature where accumulator elements i and i + 2 of a lane
// meet: rows g (gate) and g + 8 (up) of the 16-row tile.
__device__ __forceinline__ int sk_up(int row) { return row >> 3; }
__device__ __forceinline__ int sk_feature(int row) { return row & 7; }

// Two fp32 -> two OCP e4m3fn bytes (lo in bits 0-7), round to nearest even, saturated to +-448.
__device__ __forceinline__ unsigned f32x2_to_e4m3x2(float lo, float hi) {
    unsigned short r;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
    return r;
}
// Two OCP e4m3fn bytes (the low 16 bits, low byte first) -> two fp32, exact.
__device__ __forceinline__ void e4m3x2_to_f32x2_exact(unsigned v, float& lo, float& hi) {
    unsigned short l, h;
    asm("{ .reg .b16 t; .reg .b32 r; cvt.u16.u32 t, %2; cvt.rn.f16x2.e4m3x2 r, t; mov.b32 {%0, %1}, r; }"
        : "=h"(l), "=h"(h) : "r"(v));
    asm("cvt.f32.f16 %0, %1;" : "=f"(lo) : "h"(l));
    asm("cvt.f32.f16 %0, %1;" : "=f"(hi) : "h"(h));
}
// Four OCP e4m3fn bytes -> four bf16 (lo: bytes 0-1, hi: bytes 2-3), exact: the fp8 pair
// converter (sm_89+) to f16x2, then through f32 to packed bf16.
__device__ __forceinline__ void fp8x4_to_bf16x4(unsigned w, unsigned& lo, unsigned& hi) {
    asm("{\n\t.reg .b16 p0, p1, a, b, c, d;\n\t.reg .b32 h0, h1;\n\t.reg .f32 f0, f1, f2, f3;\n\t"
        "mov.b32 {p0, p1}, %2;\n\t"
        "cvt.rn.f16x2.e4m3x2 h0, p0;\n\tcvt.rn.f16x2.e4m3x2 h1, p1;\n\t"
        "mov.b32 {a, b}, h0;\n\tmov.b32 {c, d}, h1;\n\t"
        "cvt.f32.f16 f0, a;\n\tcvt.f32.f16 f1, b;\n\tcvt.f32.f16 f2, c;\n\tcvt.f32.f16 f3, d;\n\t"
        "cvt.rn.bf16x2.f32 %0, f1, f0;\n\tcvt.rn.bf16x2.f32 %1, f3, f2;\n\t}"
        : "=r"(lo), "=r"(hi) : "r"(w));
}

// ---- MXFP4 decode: four E2M1 codes (the low 16 bits of h, lowest nibble first) times their
// block scale -> two packed bf16x2 (codes 0, 1 in w0; 2, 3 in w1), exact. Two byte permutes
// look the magnitudes up in 8-entry tables (high and low bytes of the bf16 values 0 .. 6); a
// third, in prmt's sign-replicate mode, turns each code's sign bit into a byte of ones or
// zeros that one logic op ORs into the high bytes; two more interleave the bytes into pairs,
// and one bf16x2 FMA applies the scale (E8M0 fits bf16's exponent; bf16 fma keeps subnormals,
// so the two smallest scales, 2^-127 and 2^-126, stay exact: test_smallest_block_scales on
// the H100). ~11 instructions for 4 values.
__device__ __forceinline__ unsigned e8m0_to_bf16x2(unsigned code) {
    const unsigned b = code == 255u ? 0x7fc0u : code == 0u ? 0x0040u : code << 7;
    return b | (b << 16);
}
__device__ __forceinline__ void e2m1x4_to_bf16x4(unsigned h, unsigned scale2, unsigned& w0, unsigned& w1) {
    const unsigned sel = h & 0x7777u;
    const unsigned hi = __byte_perm(0x3f3f3f00u, 0x40404040u, sel);   // 0, .5, 1, 1.5 | 2, 3, 4, 6
    const unsigned lo = __byte_perm(0xc0800000u, 0xc0804000u, sel);
    // byte i = 0xff where code i is negative: the sign bits 3, 7, 11, 15 are the top bits of
    // bytes 0, 1 of h << 4 and of h (selector nibbles 8 + byte index)
    unsigned neg;
    asm("prmt.b32 %0, %1, %2, 0xd9c8;" : "=r"(neg) : "r"(h << 4), "r"(h));
    const unsigned hs = hi | (neg & 0x80808080u);
    const unsigned a = __byte_perm(lo, hs, 0x5140u), b = __byte_perm(lo, hs, 0x7362u);
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(w0) : "r"(a), "r"(scale2), "r"(0x80008000u));
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(w1) : "r"(b), "r"(scale2), "r"(0x80008000u));
}

// Eight codes (a word, lowest nibble first) at once: o0..o3 hold codes (0, 1) .. (6, 7). The
// two halves share the mask, the shift for the sign bytes and their permutes (19 instructions
// for 8 values where two e2m1x4_to_bf16x4 take 21), and the table words come from registers the
// caller loaded once with e2m1_tables_load: prmt takes one table word from a register, and a
// constant one was copied into a fresh register before every prmt (139 moves a twin-loop tile).
struct e2m1_tables { unsigned hi, lo; };
// one copy a lane in shared memory: the lanes of one warp store it, and after a barrier every
// thread loads its lane's copy (a lane-dependent load keeps the words in vector registers)
__device__ __forceinline__ unsigned* e2m1_tables_smem() { __shared__ __align__(8) unsigned t[64]; return t; }   // ld.shared.v2 needs 8
__device__ __forceinline__ void e2m1_tables_store() {
    const unsigned l = mma_lane();
    e2m1_tables_smem()[2 * l] = 0x3f3f3f00u;
    e2m1_tables_smem()[2 * l + 1] = 0xc0800000u;
}
__device__ __forceinline__ e2m1_tables e2m1_tables_load() {
    e2m1_tables t;
    asm volatile("ld.shared.v2.b32 {%0, %1}, [%2];" : "=r"(t.hi), "=r"(t.lo) : "r"(smem_addr(e2m1_tables_smem() + 2 * mma_lane())));
    return t;
}
__device__ __forceinline__ void e2m1x8_to_bf16x8(unsigned w, unsigned scale2, const e2m1_tables& t,
                                                 unsigned& o0, unsigned& o1, unsigned& o2, unsigned& o3) {
    const unsigned sel = w & 0x77777777u, sel_hi = sel >> 16, w4 = w << 4;
    unsigned hi0, lo0, hi1, lo1, neg0, neg1;
    asm("prmt.b32 %0, %1, 0x40404040, %2;" : "=r"(hi0) : "r"(t.hi), "r"(sel));
    asm("prmt.b32 %0, %1, 0xc0804000, %2;" : "=r"(lo0) : "r"(t.lo), "r"(sel));
    asm("prmt.b32 %0, %1, 0x40404040, %2;" : "=r"(hi1) : "r"(t.hi), "r"(sel_hi));
    asm("prmt.b32 %0, %1, 0xc0804000, %2;" : "=r"(lo1) : "r"(t.lo), "r"(sel_hi));
    // sign bytes: codes 0-3 from bytes 0-1 of w << 4 and w (as in e2m1x4_to_bf16x4), 4-7 from bytes 2-3
    asm("prmt.b32 %0, %1, %2, 0xd9c8;" : "=r"(neg0) : "r"(w4), "r"(w));
    asm("prmt.b32 %0, %1, %2, 0xfbea;" : "=r"(neg1) : "r"(w4), "r"(w));
    const unsigned hs0 = hi0 | (neg0 & 0x80808080u), hs1 = hi1 | (neg1 & 0x80808080u);
    const unsigned p0 = __byte_perm(lo0, hs0, 0x5140u), p1 = __byte_perm(lo0, hs0, 0x7362u);
    const unsigned p2 = __byte_perm(lo1, hs1, 0x5140u), p3 = __byte_perm(lo1, hs1, 0x7362u);
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(o0) : "r"(p0), "r"(scale2), "r"(0x80008000u));
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(o1) : "r"(p1), "r"(scale2), "r"(0x80008000u));
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(o2) : "r"(p2), "r"(scale2), "r"(0x80008000u));
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(o3) : "r"(p3), "r"(scale2), "r"(0x80008000u));
}

// ---- mem.load16_l2_256: a read-only 16-byte load whose L2 miss fetches the aligned 256 bytes
// (V: the 16-byte vector type; a template, so the prelude compiles without it)
template <class V>
__device__ __forceinline__ V load16_l2_256(const void* p) {
    V r;
    asm("ld.global.nc.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
    return r;
}

// ---- mem.store_l2_keep: 4 or 16 bytes stored with an L2 evict_last policy, so the lines stay
// while other data streams through the L2 (data the same call reads back); mem.discard_l2 ends them
// (a kept line outlives the call and pushes out a later kernel's data otherwise)
__device__ __forceinline__ unsigned long long l2_evict_last_policy() {
    unsigned long long pol;
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(pol));
    return pol;
}
__device__ __forceinline__ void store_l2_keep(void* p, unsigned v) {
    asm volatile("st.global.L2::cache_hint.b32 [%0], %1, %2;" :: "l"(p), "r"(v), "l"(l2_evict_last_policy()) : "memory");
}
template <class V>
__device__ __forceinline__ void store_l2_keep(void* p, V v) {
    asm volatile("st.global.L2::cache_hint.v4.b32 [%0], {%1, %2, %3, %4}, %5;"
                 :: "l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "l"(l2_evict_last_policy()) : "memory");
}
// ---- mem.discard_l2: the 128-byte line at p (aligned) leaves the L2 without a write-back
__device__ __forceinline__ void discard_l2(void* p) { asm volatile("discard.global.L2 [%0], 128;" :: "l"(p) : "memory"); }

// ---- TMA (sm_90+): a tensor map (the driver's 128-byte descriptor of a 2-D array, made on the
// host) names the array; one thread copies a box of it global -> shared with one instruction, and
// an mbarrier counts the bytes landed. A kernel takes the map as a __grid_constant__ parameter,
// so no device buffer holds it (a CUDA graph captures it with the launch).
struct __align__(64) tensor_map { unsigned long long v[16]; };
__device__ __forceinline__ void mbarrier_init1(unsigned bar) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n\tfence.mbarrier_init.release.cluster;" :: "r"(bar) : "memory");
}
// (N arrivals a phase: several threads arrive, e.g. beside cp_async_mbarrier_track)
__device__ __forceinline__ void mbarrier_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n\tfence.mbarrier_init.release.cluster;" :: "r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbarrier_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory");
}
__device__ __forceinline__ void mbarrier_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbarrier_wait_parity(unsigned bar, unsigned parity) {
    asm volatile("{\n\t.reg .pred done;\n"
                 "MBAR_WAIT_%=:\n\t"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n\t"
                 "@!done bra MBAR_WAIT_%=;\n\t}" :: "r"(bar), "r"(parity) : "memory");
}
// box at (x, y) (x: the contiguous dimension, in elements) -> shared dst (128-byte aligned);
// elements past the array's edges arrive as zeros and count as bytes landed
__device__ __forceinline__ void tensor_box_load_2d(unsigned dst, const tensor_map* map, int x, int y, unsigned bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                 :: "r"(dst), "l"(map), "r"(x), "r"(y), "r"(bar) : "memory");
}

// ---- thread-block clusters (sm_90+): the blocks of a cluster (__cluster_dims__) run at once on
// one GPC and reach each other's shared memory. cluster_map turns a shared address of this block
// into the same place in block `rank`'s (a shared::cluster address). A remote arrive counts on a
// peer's mbarrier (release at CTA scope: no membar; what it orders is this block's reads before
// the peer's next writes). A bulk copy moves bytes from this block's shared memory to a peer's
// by the copy engine (the async proxy), counted as they land on an mbarrier of the peer's, as
// a tensor copy's are: no store instruction and no fence in the writing threads.
__device__ __forceinline__ unsigned cluster_ctarank() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}
__device__ __forceinline__ unsigned cluster_map(unsigned addr, unsigned rank) {
    unsigned r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(addr), "r"(rank));
    return r;
}
__device__ __forceinline__ void mbarrier_arrive_remote(unsigned cluster_bar) {
    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" :: "r"(cluster_bar) : "memory");
}
// bytes (a multiple of 16, both addresses 16-byte aligned) from this block's src to dst in a
// peer's, completing on the peer's mbarrier bar (both shared::cluster addresses of the peer)
__device__ __forceinline__ void bulk_copy_to_peer(unsigned dst, unsigned src, unsigned bytes, unsigned bar) {
    asm volatile("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 :: "r"(dst), "r"(src), "r"(bytes), "r"(bar) : "memory");
}
// the bulk copies issued so far by this thread form a group; wait until every group has read its source
__device__ __forceinline__ void bulk_copy_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
__device__ __forceinline__ void bulk_copy_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); }
// every thread of every block of the cluster (e.g. after mbarrier_init, before remote arrivals)
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// ---- programmatic dependent launch (sm_90+): a kernel launched overlapped waits here for the
// kernel before it in the stream to end (its writes visible); the other lets the next overlapped
// kernel start its blocks once every block of this one has passed it. No-ops on a plain launch.
__device__ __forceinline__ void grid_dependency_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void grid_launch_dependents() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }

// A load with acquire semantics at GPU scope: what the writer released before its flag is
// visible to this thread's later reads (and to its block's after a barrier), no full fence.
__device__ __forceinline__ unsigned load_acquire_gpu(const unsigned* p) {
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}
