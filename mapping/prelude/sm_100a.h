// Target prelude for sm_100a ONLY (B200 / GB200, Blackwell datacenter): OCP MXFP4 block-scaled
// matrix product on the 5th-generation tensor cores through tcgen05, fp32 accumulator in tensor
// memory (TMEM). Pasted after mapping/prelude/cuda.h; uses its smem_addr() and nothing else.
// tcgen05 exists on sm_100a/sm_101a/sm_103a only: sm_90a (wgmma) and sm_120a (mma.sync
// kind::mxf4) have no tensor memory. Everything below is a template, so a source that includes
// this header without instantiating umma_* compiles to no code on any target.
//
// One 128 x N x BK step, all 128 threads of the block (4 warps) calling in uniform control flow:
//   1. the block copies the row-major tiles into `scratch` in the canonical no-swizzle K-major
//      layout the shared-memory matrix descriptors describe, and the UE8M0 scales into the
//      32 x 16-byte blocks tcgen05.cp.32x128b.warpx4 broadcasts into each 32-lane quarter of TMEM;
//   2. fence.proxy.async.shared::cta + barrier; thread 0 issues tcgen05.cp (scales) and
//      BK / 64 tcgen05.mma.kind::mxf4.block_scale.block32 (M = 128, K = 64 each), then
//      tcgen05.commit to an mbarrier that every thread waits on.
// References (PTX ISA 9.x, chapter 9.7.16 "TensorCore 5th Generation Family Instructions"):
//   9.7.16.4.1 shared memory descriptor, 9.7.16.4.2 instruction descriptor, 9.7.16.3 canonical
//   shared-memory layouts, 9.7.16.7.x alloc / cp / mma / commit / ld, 9.7.16.6 memory consistency.
//   Cross-checked against CUTLASS include/cute/arch/mma_sm100_desc.hpp (SmemDescriptor,
//   InstrDescriptorBlockScaled) and the DeepGEMM sm100 fp4 kernels (UTCCP scale layout).
//
// TMEM plan (address = lane << 16 | column, 32-bit cells, 128 lanes):
//   columns [0, N)                 fp32 accumulator: lane m = row m of C, column n = C[m][n]
//   columns [N, N + 4*KC)          A scales, KC = ceil(BK / 128): 4 columns per 4 scale bytes
//   next 4*KC*RB columns           B scales, RB = ceil(N / 128)
//   allocated: next power of two >= 32 of the sum (N=64: 128, N=128: 256, N=256: 512).
// Scale layout (what tcgen05.cp.32x128b.warpx4 produces from the 512-byte block built in step 1):
//   lane q*32 + i (every quarter q the same), column base + 4*kb + c, byte b
//     = scale of row 32*c + i (+128 per B row block), K block 4*kb + b (32 values each).
//   The MMA for K slice kk (64 values) reads bytes 2*(kk%2), 2*(kk%2)+1 of column group kb = kk/2,
//   selected by the scale-factor ids of the instruction descriptor.

enum { umma_m = 128,   // rows of A = TMEM lanes
       umma_k = 64 };  // E2M1 values per tcgen05.mma.kind::mxf4 (dense)

template <int N, int BK> struct umma_cfg {
    static_assert(N % 16 == 0 && N >= 16 && N <= 256, "M = 128 tcgen05.mma needs N % 16 == 0, 16 <= N <= 256");
    static_assert(BK % 64 == 0 && BK >= 64, "BK must be a multiple of the MMA K (64)");
    static constexpr int KC = (BK + 127) / 128;          // 4-byte scale groups per row
    static constexpr int RB = (N + 127) / 128;           // 128-row blocks of B
    static constexpr int CH = BK / 32;                   // 16-byte (32-value) chunks per row
    static constexpr int A_BYTES = umma_m * BK / 2;
    static constexpr int B_BYTES = N * BK / 2;
    static constexpr int OFF_B = A_BYTES;
    static constexpr int OFF_SFA = OFF_B + B_BYTES;
    static constexpr int OFF_SFB = OFF_SFA + KC * 512;
    static constexpr int OFF_BAR = OFF_SFB + KC * RB * 512;   // 8-byte mbarrier
    static constexpr int OFF_TMEM = OFF_BAR + 8;               // 4-byte TMEM base from tcgen05.alloc
    static constexpr int BYTES = OFF_BAR + 16;
    static constexpr int COL_SFA = N;
    static constexpr int COL_SFB = N + 4 * KC;
    static constexpr int USED_COLS = COL_SFB + 4 * KC * RB;
    static constexpr int COLS = USED_COLS <= 32 ? 32 : USED_COLS <= 64 ? 64 : USED_COLS <= 128 ? 128
                              : USED_COLS <= 256 ? 256 : 512;
    static_assert(USED_COLS <= 512, "tensor memory has 512 columns");
};

// Shared memory the caller reserves for `scratch`, 128-byte aligned at least (1024 is fine):
// 64*BK (A) + N*BK/2 (B) + 512*ceil(BK/128)*(1 + ceil(N/128)) (scales) + 16 (mbarrier, TMEM slot).
// N=64: BK=128 13328, BK=256 26640; N=128: 17424, 34832; N=256: 26128 (BK=128), 52240 (BK=256).
// The last 16 bytes, from OFF_BAR, stay live from umma_init to the end of umma_release: PTX ISA
// (mbarrier) lets no other use touch a valid mbarrier's memory until mbarrier.inval. The bytes
// before OFF_BAR are dead once a step returns, so a caller may lay its output tile (umma_store's
// sC) over them, never over the last 16.
template <int N, int BK> __host__ __device__ constexpr int umma_scratch_bytes() { return umma_cfg<N, BK>::BYTES; }
// Tensor-memory columns umma_init allocates (a power of two >= 32). At most 512 per SM: blocks
// beyond 512 / umma_tmem_cols on one SM wait in tcgen05.alloc until another block releases.
template <int N, int BK> __host__ __device__ constexpr int umma_tmem_cols() { return umma_cfg<N, BK>::COLS; }

struct umma_state {
    unsigned tmem;      // TMEM base address (lane 0, first allocated column)
    unsigned ncols;     // allocated columns
    unsigned bar;       // shared address of the mbarrier
    unsigned phase;     // parity the next wait expects
    unsigned scratch;   // shared address of scratch
};

// ---- PTX wrappers ----------------------------------------------------------------------------

// Shared memory matrix descriptor (PTX ISA 9.7.16.4.1, "Shared memory descriptor"), 64 bits:
//   bits  0-13 start address >> 4 (matrix-descriptor-encode(x) = (x & 0x3FFFF) >> 4)
//   bits 16-29 leading dimension byte offset >> 4
//   bits 32-45 stride dimension byte offset >> 4
//   bits 46-48 fixed constant 0b001 (descriptor version for sm_100; CUTLASS version_ = 1)
//   bits 49-51 matrix base offset: 0 (only meaningful with swizzling)
//   bit  52    leading-dimension stride mode: 0 = relative byte offset
//   bits 53-60 fixed 0
//   bits 61-63 swizzle mode: 0 = no swizzle (1 = 128B base32B, 2 = 128B, 4 = 64B, 6 = 32B)
// K-major, no swizzle, canonical layout in 16-byte units ((8,m),(2)) : ((1,SBO),(LBO)) (PTX ISA
// 9.7.16.3 canonical layouts; CUTLASS make_umma_desc "INTERLEAVE"): a core matrix is 8 rows of
// 16 contiguous bytes (128 contiguous bytes); SBO = bytes between core matrices 8 rows apart
// (M/N direction); LBO = bytes between the two core matrices adjacent in K.
__device__ __forceinline__ unsigned long long umma_smem_desc(unsigned addr, unsigned lbo, unsigned sbo) {
    return (unsigned long long)((addr & 0x3FFFFu) >> 4)
         | ((unsigned long long)((lbo >> 4) & 0x3FFFu) << 16)
         | ((unsigned long long)((sbo >> 4) & 0x3FFFu) << 32)
         | (1ull << 46);
}

// Instruction descriptor for .kind::mxf4 (PTX ISA 9.7.16.4.2, table "Instruction descriptor
// format for .kind::mxf8f6f4, .kind::mxf4 and .kind::mxf4nvf4"; CUTLASS InstrDescriptorBlockScaled):
//   bits  0-1  sparsity selector 0; bit 2 dense = 0; bit 3 reserved 0
//   bits  4-5  matrix B scale-factor data id (byte of the TMEM column the B scales start at)
//   bit   6    reserved 0
//   bits  7-9  atype: E2M1 = 1 under .kind::mxf4 (MXF4Format; the value 5 is .kind::mxf8f6f4's)
//   bits 10-12 btype: E2M1 = 1
//   bits 13-14 negate A / B: 0
//   bits 15-16 transpose (major) A / B: 0 = K-major (the only one .kind::mxf4 allows)
//   bits 17-22 N >> 3
//   bit  23    scale-factor type: UE8M0 = 1 (UE4M3 = 0, only for .kind::mxf4nvf4)
//   bits 24-28 M >> 4
//   bits 29-30 matrix A scale-factor data id
//   bit  31    K dimension: 0 = dense K 64 (1 = K 96 variant, not used)
// The D type is implicitly F32 for the block-scaled kinds (no dtype field).
template <int N>
__device__ __forceinline__ unsigned umma_idesc_mxf4(unsigned sf_id) {
    return (sf_id << 4) | (1u << 7) | (1u << 10) | ((unsigned)(N >> 3) << 17) | (1u << 23)
         | ((unsigned)(umma_m >> 4) << 24) | (sf_id << 29);
}

__device__ __forceinline__ void umma_fence_before() { asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory"); }
__device__ __forceinline__ void umma_fence_after() { asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory"); }
// Generic-proxy shared stores -> visible to the async proxy (tensor core, tcgen05.cp).
__device__ __forceinline__ void umma_fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// D[tmem] (+)= A[adesc] x B[bdesc]^T with per-32 UE8M0 scales at [sfa], [sfb] (PTX ISA 9.7.16.7.x
// tcgen05.mma, .block_scale: .block32 is the PTX 8.8+ spelling of .scale_vec::2X for mxf4).
__device__ __forceinline__ void umma_mma_mxf4(unsigned d, unsigned long long adesc, unsigned long long bdesc,
                                              unsigned idesc, unsigned sfa, unsigned sfb, unsigned accumulate) {
    asm volatile("{\n\t.reg .pred p;\n\t"
                 "setp.ne.b32 p, %4, 0;\n\t"
                 "tcgen05.mma.cta_group::1.kind::mxf4.block_scale.block32 [%0], %1, %2, %3, [%5], [%6], p;\n\t}"
                 :: "r"(d), "l"(adesc), "l"(bdesc), "r"(idesc), "r"(accumulate), "r"(sfa), "r"(sfb) : "memory");
}

// 32 rows x 128 bits from shared memory into lanes [32q, 32q + 32) of 4 columns, for every
// quarter q (PTX ISA tcgen05.cp, shape .32x128b with .warpx4 multicast).
__device__ __forceinline__ void umma_cp_32x128b_warpx4(unsigned taddr, unsigned long long sdesc) {
    asm volatile("tcgen05.cp.cta_group::1.32x128b.warpx4 [%0], %1;" :: "r"(taddr), "l"(sdesc) : "memory");
}

__device__ __forceinline__ void umma_ld_shared_v4(unsigned a, unsigned& x, unsigned& y, unsigned& z, unsigned& w) {
    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];" : "=r"(x), "=r"(y), "=r"(z), "=r"(w) : "r"(a) : "memory");
}
__device__ __forceinline__ void umma_st_shared_v4(unsigned a, unsigned x, unsigned y, unsigned z, unsigned w) {
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" :: "r"(a), "r"(x), "r"(y), "r"(z), "r"(w) : "memory");
}
__device__ __forceinline__ unsigned umma_ld_shared_b32(unsigned a) {
    unsigned v;
    asm volatile("ld.shared.b32 %0, [%1];" : "=r"(v) : "r"(a) : "memory");
    return v;
}
__device__ __forceinline__ unsigned umma_ld_shared_u8(unsigned a) {
    unsigned short v;
    asm volatile("ld.shared.u8 %0, [%1];" : "=h"(v) : "r"(a) : "memory");
    return v;
}
__device__ __forceinline__ void umma_st_shared_b32(unsigned a, unsigned v) {
    asm volatile("st.shared.b32 [%0], %1;" :: "r"(a), "r"(v) : "memory");
}

// ---- staging: row-major tiles -> canonical layouts in scratch ----------------------------------

// 16 bytes of a row from shared address a; ALIGN = the alignment the caller's pointer and row
// stride guarantee (16, 4 or 1).
template <int ALIGN>
__device__ __forceinline__ void umma_load16(unsigned a, unsigned& x, unsigned& y, unsigned& z, unsigned& w) {
    if (ALIGN == 16) {
        umma_ld_shared_v4(a, x, y, z, w);
    } else if (ALIGN == 4) {
        x = umma_ld_shared_b32(a); y = umma_ld_shared_b32(a + 4);
        z = umma_ld_shared_b32(a + 8); w = umma_ld_shared_b32(a + 12);
    } else {
        unsigned v[4];
#pragma unroll
        for (int j = 0; j < 4; ++j)
            v[j] = umma_ld_shared_u8(a + 4 * j) | (umma_ld_shared_u8(a + 4 * j + 1) << 8)
                 | (umma_ld_shared_u8(a + 4 * j + 2) << 16) | (umma_ld_shared_u8(a + 4 * j + 3) << 24);
        x = v[0]; y = v[1]; z = v[2]; w = v[3];
    }
}

// ROWS x (CH * 16) bytes row-major at src (stride ld) -> core-matrix layout at dst:
// 16-byte chunk c of row r goes to dst + ((c * ROWS/8 + r/8) * 8 + r%8) * 16, i.e. K chunk c is a
// contiguous column of ROWS/8 core matrices. Descriptor: SBO = 128, LBO = ROWS * 16.
template <int ROWS, int CH, int ALIGN>
__device__ __forceinline__ void umma_stage_operand_aligned(unsigned dst, unsigned src, int ld) {
#pragma unroll 4
    for (int idx = threadIdx.x; idx < ROWS * CH; idx += 128) {
        const int c = idx / ROWS, r = idx % ROWS;
        unsigned x, y, z, w;
        umma_load16<ALIGN>(src + (unsigned)(r * ld + c * 16), x, y, z, w);
        umma_st_shared_v4(dst + (unsigned)idx * 16u, x, y, z, w);
    }
}
template <int ROWS, int CH>
__device__ __forceinline__ void umma_stage_operand(unsigned dst, const unsigned char* p, int ld) {
    const unsigned src = smem_addr(p);
    const unsigned al = src | (unsigned)ld;
    if ((al & 15u) == 0) umma_stage_operand_aligned<ROWS, CH, 16>(dst, src, ld);
    else if ((al & 3u) == 0) umma_stage_operand_aligned<ROWS, CH, 4>(dst, src, ld);
    else umma_stage_operand_aligned<ROWS, CH, 1>(dst, src, ld);
}

// Scales of ROWS rows (ld bytes apart, NB = BK/32 bytes per row) -> for each 4-byte K group kb
// and 128-row block rb a 512-byte block at dst + (kb * RB + rb) * 512 holding 32 rows of 16 bytes:
// row i = the 4 scale bytes (K blocks 4kb..4kb+3) of rows rb*128 + i, +32, +64, +96. Rows past
// ROWS and K blocks past NB are zero (never read by the MMA).
template <int ROWS, int NB, int KC, int RB>
__device__ __forceinline__ void umma_stage_scales(unsigned dst, const unsigned char* p, int ld) {
    const unsigned src = smem_addr(p);
    const int i = threadIdx.x & 31, c = threadIdx.x >> 5;
#pragma unroll
    for (int kb = 0; kb < KC; ++kb) {
#pragma unroll
        for (int rb = 0; rb < RB; ++rb) {
            const int row = rb * 128 + c * 32 + i;
            unsigned word = 0;
            if (row < ROWS) {
#pragma unroll
                for (int b = 0; b < 4; ++b)
                    if (kb * 4 + b < NB)
                        word |= umma_ld_shared_u8(src + (unsigned)(row * ld + kb * 4 + b)) << (8 * b);
            }
            umma_st_shared_b32(dst + (unsigned)((kb * RB + rb) * 512 + i * 16 + c * 4), word);
        }
    }
}

// ---- interface ---------------------------------------------------------------------------------

// All 128 threads, once per kernel (umma_release gives up the allocation permit): mbarrier init
// (thread 0), TMEM allocation (warp 0). Blocks launched with 128 threads exactly.
template <int N, int BK>
__device__ void umma_init(umma_state& st, unsigned char* scratch) {
    typedef umma_cfg<N, BK> C;
    const unsigned base = smem_addr(scratch);
    const unsigned bar = base + C::OFF_BAR, slot = base + C::OFF_TMEM;
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(bar) : "memory");
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    if ((threadIdx.x >> 5) == 0) {
        // PTX ISA tcgen05.alloc: one whole warp, nCols a power of two >= 32, the base address is
        // written to shared memory [slot].
        asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;"
                     :: "r"(slot), "r"((unsigned)C::COLS) : "memory");
    }
    umma_fence_before();
    __syncthreads();
    umma_fence_after();
    st.tmem = umma_ld_shared_b32(slot);
    st.ncols = C::COLS;
    st.bar = bar;
    st.phase = 0;
    st.scratch = base;
}

// All 128 threads: C (+)= A x B^T over one BK slice (accumulate = false overwrites C). The tiles
// must be complete (caller's __syncthreads) on entry; on return the MMAs have completed, so the
// caller may overwrite sA4/sAs/sB4/sBs and call umma_store or the next step.
template <int N, int BK>
__device__ void umma_mxf4_step(umma_state& st, const unsigned char* sA4, int lda, const unsigned char* sAs, int ldas,
                               const unsigned char* sB4, int ldb, const unsigned char* sBs, int ldbs, bool accumulate) {
    typedef umma_cfg<N, BK> C;
    const unsigned base = st.scratch;
    umma_stage_operand<umma_m, C::CH>(base, sA4, lda);
    umma_stage_operand<N, C::CH>(base + C::OFF_B, sB4, ldb);
    umma_stage_scales<umma_m, BK / 32, C::KC, 1>(base + C::OFF_SFA, sAs, ldas);
    umma_stage_scales<N, BK / 32, C::KC, C::RB>(base + C::OFF_SFB, sBs, ldbs);
    umma_fence_async_smem();   // every writer, before the barrier that hands the data to thread 0
    umma_fence_before();       // orders earlier tcgen05.ld (umma_store) before this step's MMAs
    __syncthreads();
    if (threadIdx.x == 0) {
        umma_fence_after();
        // scales -> TMEM; tcgen05.cp and tcgen05.mma issued by one thread execute in order
#pragma unroll
        for (int kb = 0; kb < C::KC; ++kb) {
            umma_cp_32x128b_warpx4(st.tmem + C::COL_SFA + 4 * kb,
                                   umma_smem_desc(base + C::OFF_SFA + kb * 512, 0, 128));
#pragma unroll
            for (int rb = 0; rb < C::RB; ++rb)
                umma_cp_32x128b_warpx4(st.tmem + C::COL_SFB + 4 * (kb * C::RB + rb),
                                       umma_smem_desc(base + C::OFF_SFB + (kb * C::RB + rb) * 512, 0, 128));
        }
#pragma unroll
        for (int kk = 0; kk < BK / umma_k; ++kk) {
            // K slice kk = 16-byte chunks 2kk, 2kk+1: LBO apart in the staged layout
            const unsigned long long ad = umma_smem_desc(base + 2 * kk * (umma_m * 16), umma_m * 16, 128);
            const unsigned long long bd = umma_smem_desc(base + C::OFF_B + 2 * kk * (N * 16), N * 16, 128);
            const int kb = kk >> 1;
            const unsigned sf_id = (unsigned)(kk & 1) * 2;   // scale bytes 2(kk%2), 2(kk%2)+1
            umma_mma_mxf4(st.tmem, ad, bd, umma_idesc_mxf4<N>(sf_id),
                          st.tmem + C::COL_SFA + 4 * kb, st.tmem + C::COL_SFB + 4 * C::RB * kb,
                          (kk > 0 || accumulate) ? 1u : 0u);
        }
        // arrives once on the mbarrier when every tcgen05 op this thread issued has completed
        asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];"
                     :: "r"(st.bar) : "memory");
    }
    asm volatile("{\n\t.reg .pred done;\n"
                 "UMMA_WAIT_%=:\n\t"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n\t"
                 "@!done bra UMMA_WAIT_%=;\n\t}"
                 :: "r"(st.bar), "r"(st.phase) : "memory");
    st.phase ^= 1u;
    umma_fence_after();
}

// All 128 threads: warp w reads TMEM lanes [32w, 32w + 32) = rows of C, 16 columns at a time
// (tcgen05.ld.32x32b.x16 + tcgen05.wait::ld). Ends with __syncthreads: sC is complete on return.
template <int N>
__device__ void umma_store(umma_state& st, float* sC, int ldc) {
    const int w = threadIdx.x >> 5, row = threadIdx.x;
    const unsigned taddr = st.tmem + ((unsigned)(w * 32) << 16);
    umma_fence_after();
#pragma unroll 1
    for (int c0 = 0; c0 < N; c0 += 16) {
        unsigned v[16];
        asm volatile("tcgen05.ld.sync.aligned.32x32b.x16.b32 "
                     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, [%16];\n\t"
                     "tcgen05.wait::ld.sync.aligned;"
                     : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]), "=r"(v[4]), "=r"(v[5]), "=r"(v[6]), "=r"(v[7]),
                       "=r"(v[8]), "=r"(v[9]), "=r"(v[10]), "=r"(v[11]), "=r"(v[12]), "=r"(v[13]), "=r"(v[14]), "=r"(v[15])
                     : "r"(taddr + (unsigned)c0) : "memory");
        float* out = sC + row * ldc + c0;
#pragma unroll
        for (int j = 0; j < 16; ++j) out[j] = __uint_as_float(v[j]);
    }
    umma_fence_before();
    __syncthreads();
}

// All 128 threads: free the tensor memory (warp 0, which allocated it) and the mbarrier.
template <int N>
__device__ void umma_release(umma_state& st) {
    umma_fence_before();
    __syncthreads();
    if ((threadIdx.x >> 5) == 0) {
        umma_fence_after();
        asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;" :: "r"(st.tmem), "r"(st.ncols) : "memory");
        asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;" ::: "memory");
    }
    if (threadIdx.x == 0) asm volatile("mbarrier.inval.shared::cta.b64 [%0];" :: "r"(st.bar) : "memory");
}
