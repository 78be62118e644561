// Dialect prelude for HIP targets: helpers whose bodies differ by vendor. hipRTC's runtime
// header is the only one on the path.

// Two fp32 -> packed bf16x2 (lo in bits 0-15), round to nearest even. clang's __bf16
// conversion is v_cvt_pk_bf16_f32 on gfx950 and an exact integer sequence on gfx942.
__device__ __forceinline__ unsigned f32x2_to_bf16x2_rn(float lo, float hi) {
    return (unsigned)__builtin_bit_cast(unsigned short, (__bf16)lo)
         | ((unsigned)__builtin_bit_cast(unsigned short, (__bf16)hi) << 16);
}

// ---- wave-level matrix multiply: v_mfma_f32_16x16x16_bf16, fp32 accumulate ----
// A 16x16, B 16x16, C 16x16 per instruction; 64 lanes. q = lane / 16, r = lane % 16.
// A: lane holds A[r][4q..4q+3]; B: lane holds B[4q..4q+3][r]; C: lane holds C[4q+i][r], i = 0..3.
typedef short mma_bf16x4 __attribute__((ext_vector_type(4)));
typedef float mma_f32x4 __attribute__((ext_vector_type(4)));
struct frag_a { mma_bf16x4 x; };
struct frag_b { mma_bf16x4 x; };
struct frag_c { mma_f32x4 v; };

// mem.tensor_map_param: AMD has no tensor-map copy engine; kernels whose signature carries a
// map take these 128 bytes and leave them unread
struct __attribute__((aligned(64))) tensor_map { unsigned long long v[16]; };

// mem.load16_l2_256: HIP C++ has no prefetch-size hint; a plain 16-byte load
template <class V>
__device__ __forceinline__ V load16_l2_256(const void* p) { return *reinterpret_cast<const V*>(p); }

// mem.store_l2_keep / mem.discard_l2: HIP C++ has no L2 eviction priority: a plain store, no discard
__device__ __forceinline__ void store_l2_keep(void* p, unsigned v) { *reinterpret_cast<unsigned*>(p) = v; }
template <class V>
__device__ __forceinline__ void store_l2_keep(void* p, V v) { *reinterpret_cast<V*>(p) = v; }
__device__ __forceinline__ void discard_l2(void*) {}

__device__ __forceinline__ unsigned mma_lane() { return __lane_id(); }
__device__ __forceinline__ frag_c mma_zero() { frag_c c; c.v = (mma_f32x4){0.f, 0.f, 0.f, 0.f}; return c; }
__device__ __forceinline__ int mma_c_row(int i) { return 4 * (int)(mma_lane() >> 4) + i; }
__device__ __forceinline__ int mma_c_col(int i) { return (int)(mma_lane() & 15u); }

__device__ __forceinline__ frag_a mma_load_a(const unsigned short* s, int ld, int k0) {
    const int q = mma_lane() >> 4, r = mma_lane() & 15;
    frag_a a;
    a.x = *reinterpret_cast<const mma_bf16x4*>(s + r * ld + k0 + 4 * q);
    return a;
}
__device__ __forceinline__ frag_b mma_load_b_nk(const unsigned short* s, int ld, int n0, int k0) {
    const int q = mma_lane() >> 4, r = mma_lane() & 15;
    frag_b b;
    b.x = *reinterpret_cast<const mma_bf16x4*>(s + (n0 + r) * ld + k0 + 4 * q);
    return b;
}
__device__ __forceinline__ frag_b mma_load_b_kn(const unsigned short* s, int ld, int k0, int n0) {
    const int q = mma_lane() >> 4, r = mma_lane() & 15;
    const unsigned short* p = s + (k0 + 4 * q) * ld + n0 + r;
    frag_b b;
    b.x = (mma_bf16x4){(short)p[0], (short)p[ld], (short)p[2 * ld], (short)p[3 * ld]};
    return b;
}
__device__ __forceinline__ void mma_bf16(frag_c& c, const frag_a& a, const frag_b& b) {
    c.v = __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(a.x, b.x, c.v, 0, 0, 0);
}

// ---- wave-level fp8 matrix multiply: v_mfma_f32_16x16x32_fp8_fp8, fp32 accumulate ----
// gfx942 reads its operands as e4m3fnuz (bias 8, 0x80 the one NaN, max 240), gfx950 as OCP
// e4m3fn (bias 7, max 448), and the conversions below write and read the same format.
// A 16 x 32 and B 32 x 16 bytes, C the 16 x 16 fragment of mma_bf16; q = lane / 16,
// r = lane % 16: a lane holds A[r][8q..8q+7] and B[8q..8q+7][r] as one 64-bit register,
// bytes in K order (LLVM BuiltinsAMDGPU.def; AMD CDNA3 ISA guide, MFMA fp8 operands).
#if defined(__gfx950__)
#define E4M3_MAX 448.f
#define E4M3_OCP_UNIT 1.f
#else
#define E4M3_MAX 240.f
#define E4M3_OCP_UNIT 2.f       // an OCP byte read as fnuz is half its value
#endif
struct frag_a8 { long x; };
struct frag_b8 { long x; };
__device__ __forceinline__ frag_a8 mma8_load_a(const unsigned char* s, int ld, int k0) {
    const int q = mma_lane() >> 4, r = mma_lane() & 15;
    frag_a8 a;
    a.x = *reinterpret_cast<const long*>(s + r * ld + k0 + 8 * q);
    return a;
}
__device__ __forceinline__ frag_b8 mma8_load_b_nk(const unsigned char* s, int ld, int n0, int k0) {
    const int q = mma_lane() >> 4, r = mma_lane() & 15;
    frag_b8 b;
    b.x = *reinterpret_cast<const long*>(s + (n0 + r) * ld + k0 + 8 * q);
    return b;
}
__device__ __forceinline__ void mma_e4m3(frag_c& c, const frag_a8& a, const frag_b8& b) {
    c.v = __builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8(a.x, b.x, c.v, 0, 0, 0);
}
// Two fp32 -> two of this target's e4m3 bytes (lo in bits 0-7), round to nearest even; the
// callers keep |x| <= E4M3_MAX.
__device__ __forceinline__ unsigned f32x2_to_e4m3x2(float lo, float hi) {
    return (unsigned)__builtin_amdgcn_cvt_pk_fp8_f32(lo, hi, 0, false) & 0xffffu;
}
// Two of this target's e4m3 bytes (the low 16 bits, low byte first) -> two fp32, exact.
__device__ __forceinline__ void e4m3x2_to_f32x2_exact(unsigned v, float& lo, float& hi) {
    const auto f = __builtin_amdgcn_cvt_pk_f32_fp8((int)v, false);
    lo = f[0];
    hi = f[1];
}
// Four OCP e4m3fn bytes as this target's e4m3 operand bytes (worth E4M3_OCP_UNIT of it each):
// gfx950 reads OCP; on gfx942 0x80 (OCP -0, the fnuz NaN) becomes +0, the rest is half the value.
__device__ __forceinline__ unsigned e4m3x4_from_ocp(unsigned w) {
#if defined(__gfx950__)
    return w;
#else
    const unsigned t = w ^ 0x80808080u;
    const unsigned nonzero = (((t & 0x7f7f7f7fu) + 0x7f7f7f7fu) | t) & 0x80808080u;
    return w & ~(~nonzero & 0x80808080u);
#endif
}

// ---- skinny (swap-AB) operands: weight rows are the A rows, built in registers (see cuda.h for
// the K order). A lane holds one A row (r) and one B column (r); its K quarter is q.
#define SK_ROWS 1
__device__ __forceinline__ int sk_quad() { return (int)(mma_lane() >> 4); }
__device__ __forceinline__ int sk_col() { return (int)(mma_lane() & 15u); }
__device__ __forceinline__ int sk_row(int j) { return (int)(mma_lane() & 15u) + 16 * j; }
__device__ __forceinline__ frag_a sk_frag_a(const unsigned (&slot0)[SK_ROWS], const unsigned (&slot1)[SK_ROWS]) {
    frag_a a;
    a.x = (mma_bf16x4){(short)(slot0[0] & 0xffffu), (short)(slot0[0] >> 16), (short)(slot1[0] & 0xffffu), (short)(slot1[0] >> 16)};
    return a;
}
__device__ __forceinline__ frag_b sk_frag_b(unsigned slot0, unsigned slot1) {
    frag_b b;
    b.x = (mma_bf16x4){(short)(slot0 & 0xffffu), (short)(slot0 >> 16), (short)(slot1 & 0xffffu), (short)(slot1 >> 16)};
    return b;
}
// GEMM1's gate/up rows meet in accumulator elements i and i + 2 of a lane: rows 4q + i and
// 4q + i + 2, so bit 1 of the row says up, the others the feature.
__device__ __forceinline__ int sk_up(int row) { return (row >> 1) & 1; }
__device__ __forceinline__ int sk_feature(int row) { return ((row >> 2) << 1) | (row & 1); }

// Four OCP e4m3fn bytes -> four bf16 (lo: bytes 0-1, hi: bytes 2-3), exact.
__device__ __forceinline__ void fp8x4_to_bf16x4(unsigned w, unsigned& lo, unsigned& hi) {
#if defined(__gfx950__)
    // CDNA4 converts OCP fp8 in hardware
    const auto a = __builtin_amdgcn_cvt_scalef32_pk_f32_fp8(w, 1.0f, false);
    const auto b = __builtin_amdgcn_cvt_scalef32_pk_f32_fp8(w, 1.0f, true);
    lo = f32x2_to_bf16x2_rn(a[0], a[1]);
    hi = f32x2_to_bf16x2_rn(b[0], b[1]);
#else
    // CDNA3 converts e4m3fnuz (bias 8): an OCP byte means twice the fnuz value, and 0x80
    // (OCP -0) is the fnuz NaN, so those bytes become +0 first (exact per-byte zero test).
    w = e4m3x4_from_ocp(w);
    const auto a = __builtin_amdgcn_cvt_pk_f32_fp8((int)w, false);
    const auto b = __builtin_amdgcn_cvt_pk_f32_fp8((int)w, true);
    lo = f32x2_to_bf16x2_rn(2.0f * a[0], 2.0f * a[1]);
    hi = f32x2_to_bf16x2_rn(2.0f * b[0], 2.0f * b[1]);
#endif
}

// ---- MXFP4 decode (interface as in cuda.h): each code's sign and magnitude bits go where fp32
// keeps them (value x 2^-126, exact), then two multiplies and one pack; exact.
__device__ __forceinline__ unsigned e8m0_to_bf16x2(unsigned code) {
    const unsigned b = code == 255u ? 0x7fc0u : code == 0u ? 0x0040u : code << 7;
    return b | (b << 16);
}
__device__ __forceinline__ void e2m1x4_to_bf16x4(unsigned h, unsigned scale2, unsigned& w0, unsigned& w1) {
    const float scale = __uint_as_float(scale2 << 16);
    float v[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const unsigned c = h >> (4 * i);
        v[i] = __uint_as_float(((c & 0x8u) << 28) | ((c & 0x7u) << 22)) * 0x1p126f * scale;
    }
    w0 = f32x2_to_bf16x2_rn(v[0], v[1]);
    w1 = f32x2_to_bf16x2_rn(v[2], v[3]);
}

// Eight codes a call (interface as in cuda.h): two four-code calls; this decode has no tables.
struct e2m1_tables { unsigned hi, lo; };
__device__ __forceinline__ void e2m1_tables_store() {}
__device__ __forceinline__ e2m1_tables e2m1_tables_load() { return {0u, 0u}; }
__device__ __forceinline__ void e2m1x8_to_bf16x8(unsigned w, unsigned scale2, const e2m1_tables&,
                                                 unsigned& o0, unsigned& o1, unsigned& o2, unsigned& o3) {
    e2m1x4_to_bf16x4(w, scale2, o0, o1);
    e2m1x4_to_bf16x4(w >> 16, scale2, o2, o3);
}

// Programmatic dependent launch has no HIP counterpart: a HIP stream runs its kernels one after
// another, so both are no-ops (backends/hip_runtime.launch_overlapped launches plainly).
__device__ __forceinline__ void grid_dependency_wait() {}
__device__ __forceinline__ void grid_launch_dependents() {}

// A load with acquire semantics at agent (device) scope.
__device__ __forceinline__ unsigned load_acquire_gpu(const unsigned* p) {
    return __hip_atomic_load(p, __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_AGENT);
}
