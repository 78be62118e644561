// Target prelude for sm_90a (H100/H200): warpgroup MMA (wgmma) with the A operand in registers,
// cp.async into shared memory, and the fp8 pair converter to f16. Used by mla_decode's
// "wgmma" loop (templates/mla_decode_fragments.j2). PTX ISA 9.7.15 'wgmma', 9.7.9.25 'cp.async'.
//
// wgmma.m64nNk16, A from registers: warp w of the warpgroup holds A rows 16w..16w+15 in the
// mma.sync m16n8k16 A layout (g = lane / 4, c = lane % 4): x[0] = (g, 2c..2c+1),
// x[1] = (g+8, 2c..), x[2] = (g, 2c+8..), x[3] = (g+8, 2c+8..). D (fp32) rows likewise, columns
// 8j + 2c + {0, 1}: d[4j + i] = (g, 8j + 2c + i), d[4j + 2 + i] = (g+8, 8j + 2c + i).
// B comes from shared memory, K-major, no swizzle: a core matrix is 8 rows (N) of 16 contiguous
// bytes (8 K values); LBO = bytes between the two core matrices adjacent in K, SBO = bytes
// between core matrices 8 rows apart in N (the same canonical layout as sm_100a.h's descriptor).

// Shared memory matrix descriptor for sm_90 (PTX ISA 9.7.15.5.1): bits 0-13 address >> 4,
// 16-29 LBO >> 4, 32-45 SBO >> 4, 49-51 base offset (0), 62-63 swizzle (0 = none).
__device__ __forceinline__ unsigned long long wg_desc(unsigned addr, unsigned lbo, unsigned sbo) {
    return (unsigned long long)((addr & 0x3FFFFu) >> 4)
         | ((unsigned long long)((lbo >> 4) & 0x3FFFu) << 16)
         | ((unsigned long long)((sbo >> 4) & 0x3FFFu) << 32);
}
// The same for a K-major tile in the 128-byte swizzle: 8-row atoms of 128-byte rows (64 bf16),
// 16-byte chunk c of row r stored at chunk c ^ (r % 8); atoms 8 rows apart are SBO = 1024 bytes
// apart, the leading offset is unused (one K step stays inside a row). Atoms must start on
// 1024-byte boundaries; a K step's start moves 32 bytes along the row.
__device__ __forceinline__ unsigned long long wg_desc_sw128(unsigned addr) {
    return wg_desc(addr, 16, 1024) | (1ull << 62);
}
// The same atoms read N-major (a B operand whose K runs down the tile's rows): 8 K rows x 64 N
// values an atom, atoms along N LBO bytes apart, along K SBO = 1024 (PTX ISA 9.7.15.5.1.2,
// canonical layouts: MN-major, 128B swizzling).
__device__ __forceinline__ unsigned long long wg_desc_sw128_mn(unsigned addr, unsigned lbo) {
    return wg_desc(addr, lbo, 1024) | (1ull << 62);
}
// A descriptor moved off bytes along shared memory (off a multiple of 16): addresses stay below
// 256 KB, so the add never carries out of the 14-bit address field.
__device__ __forceinline__ unsigned long long wg_desc_add(unsigned long long d, unsigned off) {
    return d + (off >> 4);
}
// Orders register accesses before a wgmma that reads them (A fragments, accumulators).
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wg_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory"); }
// A warpgroup's registers a thread moved to N (setmaxnreg; every warp of the warpgroup calls it).
template <int N>
__device__ __forceinline__ void wg_maxnreg_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" :: "n"(N)); }
template <int N>
__device__ __forceinline__ void wg_maxnreg_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" :: "n"(N)); }
// Ties an accumulator to the asm stream so the compiler keeps its reads and writes on the
// right side of wg_fence / wg_wait (the wgmma writes it asynchronously).
template <int R>
__device__ __forceinline__ void wg_fence_acc(float (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i]) :: "memory");
}
// d (64 x 16 fp32, 8 a thread) += A (64 x 16, registers) x B (16 x 16, descriptor), f16 or bf16
#define WG_MMA_N16(NAME, TYPE)                                                                           \
template <int R>                                                                                         \
__device__ __forceinline__ void NAME(float (&d)[R], const unsigned (&a)[4], unsigned long long b) {      \
    static_assert(R >= 8, "64 x 16 fp32 needs 8 accumulators a thread");                                 \
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %13, 0;\n\t"                                            \
                 "wgmma.mma_async.sync.aligned.m64n16k16.f32." TYPE "." TYPE " "                         \
                 "{%0,%1,%2,%3,%4,%5,%6,%7}, {%8,%9,%10,%11}, %12, p, 1, 1, 0; }"                        \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]) \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1) : "memory");               \
}
WG_MMA_N16(wg_mma_f16_n16, "f16")
WG_MMA_N16(wg_mma_bf16_n16, "bf16")
// d (64 x N fp32, the first N / 2 of a thread's accumulators) += A (64 x 16, registers, the
// layout above) x B (16 x N, K-major descriptor), bf16 or f16: mxfp4_moe's "warpgroup_rs" tiles
// (weights decoded straight into A, the tile's activations as B, N the tile's rows rounded up).
#define WG_MMA_N32(NAME, TYPE)                                                                           \
template <int R>                                                                                         \
__device__ __forceinline__ void NAME(float (&d)[R], const unsigned (&a)[4], unsigned long long b) {      \
    static_assert(R >= 16, "64 x 32 fp32 needs 16 accumulators a thread");                               \
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %21, 0;\n\t"                                            \
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32." TYPE "." TYPE " "                         \
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, {%16,%17,%18,%19}, %20, p, 1, 1, 0; }" \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]) \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1) : "memory");               \
}
WG_MMA_N32(wg_mma_bf16_n32, "bf16")
WG_MMA_N32(wg_mma_f16_n32, "f16")
// (SHAPE the instruction's shape and types, TAIL its scale (and, 16-bit types only, transpose)
// immediates: e4m3 takes A's 32 K values a row as four bytes a register, the mma.m16n8k32 layout)
#define WG_MMA_N64(NAME, SHAPE, TAIL)                                                                    \
template <int R>                                                                                         \
__device__ __forceinline__ void NAME(float (&d)[R], const unsigned (&a)[4], unsigned long long b) {      \
    static_assert(R >= 32, "64 x 64 fp32 needs 32 accumulators a thread");                               \
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %37, 0;\n\t"                                            \
                 "wgmma.mma_async.sync.aligned." SHAPE " "                                               \
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, {%32,%33,%34,%35}, %36, p, " TAIL "; }" \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]) \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1) : "memory");               \
}
WG_MMA_N64(wg_mma_bf16_n64, "m64n64k16.f32.bf16.bf16", "1, 1, 0")
WG_MMA_N64(wg_mma_f16_n64, "m64n64k16.f32.f16.f16", "1, 1, 0")
WG_MMA_N64(wg_mma_e4m3_n64, "m64n64k32.f32.e4m3.e4m3", "1, 1")
#define WG_MMA_N128(NAME, TYPE)                                                                          \
template <int R>                                                                                         \
__device__ __forceinline__ void NAME(float (&d)[R], const unsigned (&a)[4], unsigned long long b) {      \
    static_assert(R >= 64, "64 x 128 fp32 needs 64 accumulators a thread");                              \
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %69, 0;\n\t"                                            \
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32." TYPE "." TYPE " "                        \
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, {%64,%65,%66,%67}, %68, p, 1, 1, 0; }" \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]) \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1) : "memory");               \
}
WG_MMA_N128(wg_mma_bf16_n128, "bf16")
WG_MMA_N128(wg_mma_f16_n128, "f16")
#define WG_MMA_N256(NAME, TYPE)                                                                          \
template <int R>                                                                                         \
__device__ __forceinline__ void NAME(float (&d)[R], const unsigned (&a)[4], unsigned long long b) {      \
    static_assert(R >= 128, "64 x 256 fp32 needs 128 accumulators a thread");                            \
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %133, 0;\n\t"                                           \
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32." TYPE "." TYPE " "                        \
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127}, {%128,%129,%130,%131}, %132, p, 1, 1, 0; }" \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127]) \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1) : "memory");               \
}
WG_MMA_N256(wg_mma_bf16_n256, "bf16")
WG_MMA_N256(wg_mma_f16_n256, "f16")
// d (64 x N fp32, N / 2 a thread) += A (64 x 16 bf16) x B (16 x N bf16), both from shared memory;
// warp w of the warpgroup holds D rows 16w.. in the layout above. B is K-major, except in the
// _mn form: N-major (the tile's rows run along K; mla_decode's heads loop reads V this way from
// the K tile it shares, FlashMLA's arrangement), its descriptor from wg_desc_sw128_mn.
template <int TA>   // imm-trans-a: 0 K-major A, 1 M-major
__device__ __forceinline__ void wg_mma_ss_bf16_n16_ta(float (&d)[8], unsigned long long a, unsigned long long b) {
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %10, 0;\n\t"
                 "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 "
                 "{%0,%1,%2,%3,%4,%5,%6,%7}, %8, %9, p, 1, 1, %11, 0; }"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
                 : "l"(a), "l"(b), "r"(1), "n"(TA) : "memory");
}
__device__ __forceinline__ void wg_mma_ss_bf16_n16(float (&d)[8], unsigned long long a, unsigned long long b) {
    wg_mma_ss_bf16_n16_ta<0>(d, a, b);
}
__device__ __forceinline__ void wg_mma_ss_bf16_n16_tn(float (&d)[8], unsigned long long a, unsigned long long b) {
    wg_mma_ss_bf16_n16_ta<1>(d, a, b);
}
// d (64 x 32 fp32, 16 a thread) += A x B, both from shared memory (K-major descriptors); SHAPE
// the instruction's shape and types, TAIL its scale (and, 16-bit types only, transpose) immediates
#define WG_MMA_SS_N32(NAME, SHAPE, TAIL)                                                                 \
__device__ __forceinline__ void NAME(float (&d)[16], unsigned long long a, unsigned long long b) {      \
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %18, 0;\n\t"                                           \
                 "wgmma.mma_async.sync.aligned." SHAPE " "                                               \
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, %16, %17, p, " TAIL "; }" \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]) \
                 : "l"(a), "l"(b), "r"(1) : "memory");                                                  \
}
WG_MMA_SS_N32(wg_mma_ss_bf16_n32, "m64n32k16.f32.bf16.bf16", "1, 1, 0, 0")
// d (64 x 64 fp32, 32 a thread) += A x B from shared memory; SHAPE and TAIL as WG_MMA_SS_N32's
#define WG_MMA_SS_N64(NAME, SHAPE, TAIL)                                                                 \
__device__ __forceinline__ void NAME(float (&d)[32], unsigned long long a, unsigned long long b) {      \
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %34, 0;\n\t"                                           \
                 "wgmma.mma_async.sync.aligned." SHAPE " "                                               \
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, " TAIL "; }" \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]) \
                 : "l"(a), "l"(b), "r"(1) : "memory");                                                  \
}
WG_MMA_SS_N64(wg_mma_ss_bf16_n64, "m64n64k16.f32.bf16.bf16", "1, 1, 0, 0")
// d (64 x 128 fp32, 64 a thread) += A x B from shared memory; SHAPE and TAIL as WG_MMA_SS_N32's
#define WG_MMA_SS_N128(NAME, SHAPE, TAIL)                                                                \
__device__ __forceinline__ void NAME(float (&d)[64], unsigned long long a, unsigned long long b) {      \
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %66, 0;\n\t"                                           \
                 "wgmma.mma_async.sync.aligned." SHAPE " "                                               \
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, %64, %65, p, " TAIL "; }" \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]) \
                 : "l"(a), "l"(b), "r"(1) : "memory");                                                  \
}
WG_MMA_SS_N128(wg_mma_ss_bf16_n128, "m64n128k16.f32.bf16.bf16", "1, 1, 0, 0")
// d (64 x 256 fp32, 128 a thread) += A x B from shared memory; SHAPE and TAIL as WG_MMA_SS_N32's
// (bf16's last immediate: 0 K-major B, 1 N-major)
#define WG_MMA_SS_N256(NAME, SHAPE, TAIL)                                                                \
__device__ __forceinline__ void NAME(float (&d)[128], unsigned long long a, unsigned long long b) {     \
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %130, 0;\n\t"                                          \
                 "wgmma.mma_async.sync.aligned." SHAPE " "                                               \
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127}, %128, %129, p, " TAIL "; }" \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127]) \
                 : "l"(a), "l"(b), "r"(1) : "memory");                                                  \
}
WG_MMA_SS_N256(wg_mma_ss_bf16_n256, "m64n256k16.f32.bf16.bf16", "1, 1, 0, 0")
WG_MMA_SS_N256(wg_mma_ss_bf16_n256_mn, "m64n256k16.f32.bf16.bf16", "1, 1, 0, 1")
// ---- fp8 products (mla_decode's heads loop, mma="fp8" and "fp8x2"): e4m3 A and B both from shared
// memory. 8-bit operands are read K-major only (no imm-trans), 32 K values (32 bytes) a step.
// A K-major tile in the 64-byte swizzle: 8-row atoms of 64-byte rows, 16-byte chunk c of row r
// stored at chunk c ^ ((r % 8) / 2); atoms 8 rows apart are SBO = 512 bytes apart (512-byte
// aligned), the leading offset unused; a K step moves the start 32 bytes along the row
// (PTX ISA 9.7.15.5.1: swizzle mode 2 in bits 62-63).
__device__ __forceinline__ unsigned long long wg_desc_sw64(unsigned addr) {
    return wg_desc(addr, 16, 512) | (2ull << 62);
}
// d (64 x N fp32) += A (64 x 32 e4m3) x B (32 x N e4m3), N = 16, 32, 64, 128, 256
__device__ __forceinline__ void wg_mma_ss_e4m3_n16(float (&d)[8], unsigned long long a, unsigned long long b) {
    asm volatile("{ .reg .pred p; setp.ne.b32 p, %10, 0;\n\t"
                 "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 "
                 "{%0,%1,%2,%3,%4,%5,%6,%7}, %8, %9, p, 1, 1; }"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
                 : "l"(a), "l"(b), "r"(1) : "memory");
}
WG_MMA_SS_N32(wg_mma_ss_e4m3_n32, "m64n32k32.f32.e4m3.e4m3", "1, 1")
WG_MMA_SS_N64(wg_mma_ss_e4m3_n64, "m64n64k32.f32.e4m3.e4m3", "1, 1")
WG_MMA_SS_N128(wg_mma_ss_e4m3_n128, "m64n128k32.f32.e4m3.e4m3", "1, 1")
WG_MMA_SS_N256(wg_mma_ss_e4m3_n256, "m64n256k32.f32.e4m3.e4m3", "1, 1")
// ---- MXFP4 decode to e4m3 (mla_decode's fp8 products on the MXFP4 cache). A block's codes
// times 2^shift (shift = code - emax + 6 against its row's largest E8M0 code emax, so the
// largest magnitude 6 x 2^6 = 384 fits e4m3's 448) through an 8-byte table of the magnitudes
// 0, .5, 1, 1.5, 2, 3, 4, 6 times 2^shift: codes 0-3 in lo, 4-7 in hi (prmt's two table words).
// One table a shift from -14 (every magnitude rounds to 0 there) to 6, and one of NaN bytes for
// code 255, built once a block by the converter: exact down to shift -8 (e4m3 subnormals step
// by 2^-9), that is for every block within 14 binades of its row's largest, rounded below.
struct e4m3_table { unsigned lo, hi; };
__device__ __forceinline__ e4m3_table* e4m3_tables_smem() { __shared__ __align__(8) e4m3_table t[22]; return t; }
// threads 0-21 store one table each; a barrier, then e4m3_table_for in every thread
__device__ __forceinline__ void e4m3_tables_store(unsigned thread) {
    if (thread < 22u) {
        e4m3_table t;
        if (thread == 21u) {
            t.lo = t.hi = 0x7f7f7f7fu;
        } else {
            const float f = __uint_as_float((113u + thread) << 23);      // 2^(thread - 14)
            t.lo = f32x2_to_e4m3x2(0.f, 0.5f * f) | (f32x2_to_e4m3x2(f, 1.5f * f) << 16);
            t.hi = f32x2_to_e4m3x2(2.f * f, 3.f * f) | (f32x2_to_e4m3x2(4.f * f, 6.f * f) << 16);
        }
        e4m3_tables_smem()[thread] = t;
    }
}
__device__ __forceinline__ e4m3_table e4m3_table_for(unsigned code, int emax) {
    const int shift = min(max((int)code - emax + 6, -14), 6);
    return e4m3_tables_smem()[code == 255u ? 21 : shift + 14];
}
// Eight E2M1 codes (a word, lowest nibble first) -> eight e4m3 bytes in order (o0: codes 0-3):
// the magnitudes by two table permutes, the signs as in e2m1x8_to_bf16x8 (9 instructions). The
// table prmt reads the selector's low 16 bits, whose sign bits the one mask already cleared
// (__byte_perm masked each half again: a 10th instruction).
__device__ __forceinline__ void e2m1x8_e4m3(unsigned w, const e4m3_table& t, unsigned& o0, unsigned& o1) {
    const unsigned sel = w & 0x77777777u, w4 = w << 4;
    unsigned neg0, neg1, mag0, mag1;
    asm("prmt.b32 %0, %1, %2, 0xd9c8;" : "=r"(neg0) : "r"(w4), "r"(w));
    asm("prmt.b32 %0, %1, %2, 0xfbea;" : "=r"(neg1) : "r"(w4), "r"(w));
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(mag0) : "r"(t.lo), "r"(t.hi), "r"(sel));
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(mag1) : "r"(t.lo), "r"(t.hi), "r"(sel >> 16));
    o0 = mag0 | (neg0 & 0x80808080u);
    o1 = mag1 | (neg1 & 0x80808080u);
}
// Four 8 x 8 b16 matrices to shared memory from the mma fragment layout: r[i] of each lane goes
// to matrix i; lane l gives the shared address of row l % 8 of matrix l / 8 (16 bytes a row).
__device__ __forceinline__ void stmatrix_x4(unsigned addr, const unsigned (&r)[4]) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};"
                 :: "r"(addr), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]) : "memory");
}
// Four 8 x 8 b16 matrices from shared memory, transposed: lane l gives the address of row l % 8 of
// matrix l / 8; r[i] of lane (g, c) = (lane / 4, lane % 4) holds matrix i's rows 2c, 2c + 1 of column g.
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned addr, unsigned (&r)[4]) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr) : "memory");
}
// Generic-proxy shared stores (st.shared) made visible to the async proxy that wgmma reads by.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// 16 bytes global -> shared without a register stage; bytes = 0 writes zeros (no read). An L2 miss
// fetches the aligned 256 bytes: the copied streams (KV tiles, weight rows) read their neighbours next
// (bench/NOTES.md mla_decode v15: B128 L8192 h16 bf16 419.3 -> 407.3 us).
__device__ __forceinline__ void cp_async16(unsigned dst, const void* src, unsigned bytes) {
    asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;" :: "r"(dst), "l"(src), "r"(bytes) : "memory");
}
// 4 bytes (both addresses 4-byte aligned); reads only the first `bytes` (0..4), zero-fills the rest.
__device__ __forceinline__ void cp_async4(unsigned dst, const void* src, unsigned bytes) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" :: "r"(dst), "l"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// this thread's cp.async copies issued so far hold the mbarrier's current phase until they land
__device__ __forceinline__ void cp_async_mbarrier_track(unsigned bar) {
    asm volatile("cp.async.mbarrier.arrive.shared::cta.b64 [%0];" :: "r"(bar) : "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory"); }

// Two OCP e4m3fn bytes (low byte first) -> f16x2, exact (every e4m3 value is an f16).
__device__ __forceinline__ unsigned e4m3x2_to_f16x2(unsigned v) {
    unsigned r;
    asm("{ .reg .b16 t; cvt.u16.u32 t, %1; cvt.rn.f16x2.e4m3x2 %0, t; }" : "=r"(r) : "r"(v));
    return r;
}
// Two f16 times two f16, round to nearest even (subnormals kept).
__device__ __forceinline__ unsigned f16x2_mul(unsigned a, unsigned b) {
    unsigned r;
    asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
    return r;
}
// Two fp32 -> f16x2 (lo in bits 0-15), round to nearest even.
__device__ __forceinline__ unsigned f32x2_to_f16x2_rn(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

// ---- MXFP4 decode to f16 (mxfp4_moe's warpgroup_rs gemm1). An E2M1 code's sign and magnitude
// bits placed as an f16's sign and its lowest exponent bits and top mantissa bit read as the
// code's value x 2^-14 exactly, subnormal code 0.5 included. Placed a byte at a time (the high
// bytes of f16s), the even codes of a word need one shift pattern and the odd ones another, so
// eight codes take 7 logic ops and shifts, 4 byte permutes (each byte into an f16's high byte, a
// zero low byte) and 4 f16x2 multiplies by the block scale: 15 instructions where the bf16 table
// decode takes 19, 11 of them on the integer pipe against 15 (bench/NOTES.md mxfp4_moe v23).
// o0 holds codes (0, 2), o1 (4, 6), o2 (1, 3), o3 (5, 7): the K order mxfp4_moe's
// store_rs_order_f16 writes the activations in.
__device__ __forceinline__ void e2m1x8_f16(unsigned w, unsigned scale2, unsigned& o0, unsigned& o1,
                                                unsigned& o2, unsigned& o3) {
    // each byte: the code's sign at bit 7, its magnitude bits at 1-3 (odd codes: high nibbles)
    const unsigned odd = (w & 0x80808080u) | ((w >> 3) & 0x0e0e0e0eu);
    const unsigned even = ((w << 4) & 0x80808080u) | ((w << 1) & 0x0e0e0e0eu);
    const unsigned p0 = __byte_perm(even, 0u, 0x1404u), p1 = __byte_perm(even, 0u, 0x3424u);
    const unsigned p2 = __byte_perm(odd, 0u, 0x1404u), p3 = __byte_perm(odd, 0u, 0x3424u);
    asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(o0) : "r"(p0), "r"(scale2));
    asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(o1) : "r"(p1), "r"(scale2));
    asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(o2) : "r"(p2), "r"(scale2));
    asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(o3) : "r"(p3), "r"(scale2));
}
// The multiplier of e2m1x8_f16 for a block of a row whose largest E8M0 code is emax (at most
// 254): 2^(code - emax + 15) as two f16, so the row's decoded values are its true ones times
// 2^(128 - emax), at most 12 in magnitude, exact down to blocks 2^23 below the row's largest
// (f16 subnormals round below that; from 2^40 below a block reads as zero); code 255 gives NaN.
__device__ __forceinline__ unsigned e8m0_f16x2_rel(unsigned code, int emax) {
    const int k = (int)code - emax + 142;                      // the f32 exponent field of 2^(code - emax + 15)
    const float m = __uint_as_float(code == 255u ? 0x7fc00000u : k > 0 ? (unsigned)k << 23 : 0u);
    return f32x2_to_f16x2_rn(m, m);
}
