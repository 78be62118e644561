"""How fast a grid of mxfp4_moe's skinny-GEMM shape can read its weights when it does nothing
else (CUDA only): the bytes of R1 E257 M4's gemm1 (34 experts x 512 rows x 3584 bytes), read in
the skinny loop's pattern or contiguously, with a chosen number of 64-byte K slices a warp has
in flight and blocks an SM, each timed beside a torch copy of the same bytes. It bounds what a
change to the skinny GEMMs' loads can gain before any is written (bench/NOTES.md mxfp4_moe v22).

    python bench/load_probe.py [--rows 17408] [--row-bytes 3584]

Patterns: "skinny" is gemm1's: a block takes 16 rows, its 4 warps every 4th 64-byte slice of
them, lane (g, t) rows g and g + 8 at bytes 16 t of the slice; "rows" gives each warp 4 whole
rows (lane l: bytes 16 l of a 512-byte piece); "flat" reads the block's rows as one run, 512
contiguous bytes a warp load; "async" is "skinny" by cp.async into a ring of `depth` slices a
warp; "async_all", "bulk_all" and "ldg_sts_all" stage a block's 16 rows whole in shared memory
(moe_gemm2_shared's form) by 16-byte cp.async, one bulk copy, or loads and stores (depth 1 only);
"stream" is a persistent grid (blocks-per-SM x SMs blocks), each block streaming a contiguous
share of 64-row x 256-byte steps through a cp.async ring of `depth` stages and consuming each
in the skinny pattern from shared memory (the one-kernel design of bench/NOTES.md mxfp4_moe v30).
`--work N` gives "skinny" and "stream" a decode-sized load of instructions per 16-byte piece
(N LOP3 + PRMT pairs a word, then 8 mma.sync a slice; 2-3 issue about the skinny gemm1's 205
instructions a slice, 9 about the MLA twin loop's instructions a byte), so a pattern's read rate
can be seen with the ALU busy, not only alone.
`depth` slices (pieces) are loaded before any is used, as far as ptxas keeps them so: in
the register patterns it is free to issue a load's first use right after it.
"""
from __future__ import annotations

import argparse

import torch

from portable.backends import cuda_driver, nvrtc
from portable.timing import time_gpu

SOURCE = r"""
// 16 bytes global -> shared by cp.async (L1 bypassed), and a 16-byte shared read
__device__ __forceinline__ void cp_async16(unsigned dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(dst), "l"(src));
}
__device__ __forceinline__ uint4 lds16(unsigned addr) {
    uint4 v;
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr));
    return v;
}

// a lane's two 16-byte pieces of a slice (rows g and g + 8): folded into acc, and with WORK > 0
// first put through 8 independent chains of WORK dependent LOP3 + PRMT pairs and 8 bf16
// mma.sync on the results (WORK 2-3: about the instructions the skinny gemm1 issues a slice)
__device__ __forceinline__ void consume(unsigned& acc, uint4 a, uint4 b) {
#if WORK > 0
    unsigned v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
    for (int i = 0; i < WORK; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) v[j] = __byte_perm(v[j] ^ 0x9e3779b9u, 0x7f4a7c15u, v[j]);
    float c[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int i = 0; i < 8; ++i)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(v[i]), "r"(v[(i + 1) & 7]), "r"(v[(i + 2) & 7]), "r"(v[(i + 3) & 7]), "r"(v[(i + 4) & 7]), "r"(v[(i + 5) & 7]));
    acc ^= __float_as_uint(c[0]) ^ __float_as_uint(c[1]) ^ __float_as_uint(c[2]) ^ __float_as_uint(c[3]);
#else
    acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w;
#endif
}

extern "C" __global__ void __launch_bounds__(128) probe(const uint4* __restrict__ w, long long row_bytes,
                                                         unsigned* out, long long rows) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const char* base = reinterpret_cast<const char*>(w) + (long long)blockIdx.x * 16 * row_bytes;
    unsigned acc = 0;
#if PATTERN == 0        // skinny: slices warp, warp + 4, ...; 2 loads a slice (rows g, g + 8)
    const int slices = row_bytes / 64;
    const char* p0 = base + g * row_bytes + 16 * t;
    const char* p1 = p0 + 8 * row_bytes;
    for (int s0 = warp; s0 < slices; s0 += 4 * DEPTH) {
        uint4 r[DEPTH][2];
#pragma unroll
        for (int d = 0; d < DEPTH; ++d) {
            const int s = s0 + 4 * d;
            if (s < slices) {
                r[d][0] = __ldg(reinterpret_cast<const uint4*>(p0 + 64 * s));
                r[d][1] = __ldg(reinterpret_cast<const uint4*>(p1 + 64 * s));
            } else {
                r[d][0] = r[d][1] = make_uint4(0, 0, 0, 0);
            }
        }
#pragma unroll
        for (int d = 0; d < DEPTH; ++d) consume(acc, r[d][0], r[d][1]);
    }
#elif PATTERN == 7      // stream: a persistent grid, block b taking steps [b S / G, (b + 1) S / G) of the
    // S = rows / 64 x row_bytes / 256 steps (64 rows x 256 bytes, 16 KB, a row group's K chunks in
    // turn), each copied by cp.async (16 threads a row: 256 contiguous bytes) into a ring of DEPTH
    // stages; warp w consumes its 16 rows of a stage in the skinny pattern (4 slices of 64 bytes,
    // lane (g, t): rows g, g + 8 at bytes 16 t; a row's odd pieces swapped by 4: conflict-free)
    extern __shared__ __align__(128) unsigned char ring[];
    const unsigned sb = (unsigned)__cvta_generic_to_shared(ring);
    const int nchunks = row_bytes / 256;
    const long long total = rows / 64 * nchunks;
    const long long s0 = total * blockIdx.x / gridDim.x, s1 = total * (blockIdx.x + 1) / gridDim.x;
    auto issue = [&](long long s) {     // step s into stage s % DEPTH; past s1 an empty group
        if (s < s1) {
            const char* src = reinterpret_cast<const char*>(w) + (s / nchunks) * 64 * row_bytes + 256 * (s % nchunks);
            const unsigned st = sb + (unsigned)(s % DEPTH) * STAGE;
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                const int r = threadIdx.x / 16 + 8 * i, p = threadIdx.x % 16;
                cp_async16(st + r * 256 + ((p ^ ((r & 1) << 2)) << 4), src + r * row_bytes + 16 * p);
            }
        }
        asm volatile("cp.async.commit_group;");
    };
    for (int d = 0; d < DEPTH - 1; ++d) issue(s0 + d);
    for (long long s = s0; s < s1; ++s) {
        asm volatile("cp.async.wait_group %0;" :: "n"(DEPTH - 2) : "memory");
        __syncthreads();                // step s landed for all; step s - 1's stage read by all
        issue(s + DEPTH - 1);           // into that stage
        const unsigned st = sb + (unsigned)(s % DEPTH) * STAGE;
#pragma unroll
        for (int sl = 0; sl < 4; ++sl) {
            const int r0 = 16 * warp + g, r1 = r0 + 8, p = 4 * sl + t;
            consume(acc, lds16(st + r0 * 256 + ((p ^ ((r0 & 1) << 2)) << 4)),
                    lds16(st + r1 * 256 + ((p ^ ((r1 & 1) << 2)) << 4)));
        }
    }
#elif PATTERN == 3      // skinny by cp.async: a ring of DEPTH slices a warp in shared memory, one group a slice
    extern __shared__ __align__(16) unsigned char ring[];
    const int slices = row_bytes / 64;
    const char* p0 = base + g * row_bytes + 16 * t;
    const char* p1 = p0 + 8 * row_bytes;
    const unsigned sb = (unsigned)__cvta_generic_to_shared(ring) + (warp * DEPTH * 32 + lane) * 32;
    auto issue = [&](int k) {           // the warp's k-th slice into slot k % DEPTH
        const int s = warp + 4 * k;
        if (s < slices) {
            cp_async16(sb + (k % DEPTH) * 1024, p0 + 64 * s);
            cp_async16(sb + (k % DEPTH) * 1024 + 16, p1 + 64 * s);
        }
        asm volatile("cp.async.commit_group;");
    };
    const int mine = (slices - warp + 3) / 4;
    for (int k = 0; k < DEPTH; ++k) issue(k);
    for (int k = 0; k < mine; ++k) {
        asm volatile("cp.async.wait_group %0;" :: "n"(DEPTH - 1));
        const uint4 a = lds16(sb + (k % DEPTH) * 1024), b = lds16(sb + (k % DEPTH) * 1024 + 16);
        consume(acc, a, b);
        issue(k + DEPTH);               // the slot just read (its own lane's bytes: no barrier)
    }
#elif PATTERN >= 4      // the block's 16 rows, one contiguous run, staged whole in shared memory, then read
    // back: by 16-byte cp.async a lane, one group (4), by one bulk copy on an mbarrier (5), or by
    // loads and shared stores (6): moe_gemm2_shared's staging, nothing else
    extern __shared__ __align__(128) unsigned char ring[];
    const int n = 16 * row_bytes / 16;          // 16-byte chunks
    const unsigned sb = (unsigned)__cvta_generic_to_shared(ring);
#if PATTERN == 4
    for (int i = threadIdx.x; i < n; i += 128)
        cp_async16(sb + 16 * i, base + 16 * i);
    asm volatile("cp.async.commit_group;\n\tcp.async.wait_group 0;" ::: "memory");
    __syncthreads();
#elif PATTERN == 5
    __shared__ __align__(8) unsigned long long bar;
    const unsigned ba = (unsigned)__cvta_generic_to_shared(&bar);
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared.b64 [%0], 1;" :: "r"(ba));
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;" :: "r"(ba), "r"(16 * n) : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                     :: "r"(sb), "l"(base), "r"(16 * n), "r"(ba) : "memory");
    }
    asm volatile("{\n\t.reg .pred p;\n\tW: mbarrier.try_wait.parity.shared.b64 p, [%0], 0;\n\t@!p bra W;\n\t}" :: "r"(ba) : "memory");
#else
    for (int i0 = threadIdx.x; i0 < n; i0 += 128 * 8) {
        uint4 r[8];
#pragma unroll
        for (int d = 0; d < 8; ++d)
            if (i0 + 128 * d < n) r[d] = __ldg(reinterpret_cast<const uint4*>(base) + i0 + 128 * d);
#pragma unroll
        for (int d = 0; d < 8; ++d)
            if (i0 + 128 * d < n) reinterpret_cast<uint4*>(ring)[i0 + 128 * d] = r[d];
    }
    __syncthreads();
#endif
    for (int i = threadIdx.x; i < n; i += 128) {
        const uint4 a = reinterpret_cast<const uint4*>(ring)[i];
        acc ^= a.x ^ a.y ^ a.z ^ a.w;
    }
#else                   // rows (1): warp w's rows 4 w .. 4 w + 3 one after the other; flat (2): the block's 16 rows as one run
    const long long n = PATTERN == 1 ? 4 * row_bytes / 512 : 16 * row_bytes / 512;
    const char* p = base + (PATTERN == 1 ? 4 * warp * row_bytes : 512 * warp) + 16 * lane;
    const int step = PATTERN == 1 ? 1 : 4;
    for (long long i0 = 0; i0 < (PATTERN == 1 ? n : n / 4); i0 += 2 * DEPTH) {
        uint4 r[2 * DEPTH];
#pragma unroll
        for (int d = 0; d < 2 * DEPTH; ++d) {
            const long long i = i0 + d;
            r[d] = i < (PATTERN == 1 ? n : n / 4) ? __ldg(reinterpret_cast<const uint4*>(p + 512 * step * i)) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int d = 0; d < 2 * DEPTH; ++d) acc ^= r[d].x ^ r[d].y ^ r[d].z ^ r[d].w;
    }
#endif
    if (acc == 0x9e3779b9u) out[0] = acc;     // never true for these inputs: keeps the loads
}
"""
PATTERNS = {"skinny": 0, "rows": 1, "flat": 2, "async": 3, "async_all": 4, "bulk_all": 5, "ldg_sts_all": 6, "stream": 7}
STREAM_STAGE = 16384        # the stream pattern's stage: 64 rows x 256 bytes


def compile_probe(pattern: str, depth: int, work: int = 0):
    return nvrtc.compile(SOURCE, "sm_90a", {"defines": {"PATTERN": PATTERNS[pattern], "DEPTH": depth, "WORK": work,
                                                             "STAGE": STREAM_STAGE}})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=34 * 512)
    ap.add_argument("--row-bytes", type=int, default=3584)
    ap.add_argument("--depths", default="1,2,4,7")
    ap.add_argument("--blocks-per-sm", default="4,8,16")
    ap.add_argument("--patterns", default=",".join(PATTERNS))
    ap.add_argument("--work", default="0", help="LOP3 + PRMT pairs a word before its MMAs (skinny and stream); 2-3 ~ the skinny gemm1")
    args = ap.parse_args()
    if args.row_bytes % 128 or args.rows % 16:
        ap.error(f"--row-bytes must be a multiple of 128 and --rows of 16 (the patterns' pieces); got {args.row_bytes}, {args.rows}")
    if "stream" in args.patterns.split(",") and (args.row_bytes % 256 or args.rows % 64):
        ap.error(f"stream: --row-bytes must be a multiple of 256 and --rows of 64 (its steps); got {args.row_bytes}, {args.rows}")
    nbytes = args.rows * args.row_bytes
    # two copies of the weights, alternated, so the 50 MB L2 does not serve one call from the last
    bufs = [torch.randint(1, 255, (nbytes,), dtype=torch.uint8, device="cuda") for _ in range(2)]
    out = torch.zeros(4, dtype=torch.int32, device="cuda")
    dst = torch.empty_like(bufs[0])
    turn = [0]

    def rotate(i):
        turn[0] = i & 1

    def time_us(fn):
        return time_gpu(fn, rotate=rotate)["median_us"]

    copy_us = time_us(lambda: dst.copy_(bufs[turn[0]]))
    print(f"torch copy of {nbytes / 1e6:.1f} MB: {copy_us:.1f} us = {2 * nbytes / copy_us / 1e6:.3f} TB/s (read + write)")
    props = torch.cuda.get_device_properties(0)
    smem_sm = props.shared_memory_per_multiprocessor
    rows = []
    for name in args.patterns.split(","):
        pat = PATTERNS[name]
        for work in map(int, args.work.split(",")) if pat in (0, 7) else [0]:
            for depth in map(int, args.depths.split(",")):
                if pat == 7 and depth < 2:
                    continue
                mod = cuda_driver.load(compile_probe(name, depth, work).code, 0)
                fn = cuda_driver.get_function(mod, "probe")
                go = cuda_driver.launcher(fn, ("ptr", "i64", "ptr", "i64"))
                for bps in map(int, args.blocks_per_sm.split(",")):
                    smem = smem_sm // bps - 2048 - 256    # room for bps blocks, each with its reserved and static shared bytes
                    if (pat == 3 and smem < 4 * depth * 1024 or pat in (4, 5, 6) and (smem < 16 * args.row_bytes or depth > 1)
                            or pat == 7 and smem < depth * STREAM_STAGE):
                        continue
                    cuda_driver.set_max_dynamic_smem(fn, smem)
                    grid = props.multi_processor_count * bps if pat == 7 else args.rows // 16

                    def run():
                        w = bufs[turn[0]]
                        err = go(grid, 1, 1, 128, 1, 1, smem, torch.cuda.current_stream().cuda_stream,
                                 w.data_ptr(), args.row_bytes, out.data_ptr(), args.rows)
                        cuda_driver.raise_for(err, "probe")
                    us = time_us(run)
                    rows.append((name, work, depth, bps, us, nbytes / us / 1e6))
                    print(f"{name:7s} work {work:2d} depth {depth:2d} blocks/SM {bps:2d}: {us:7.1f} us  {nbytes / us / 1e6:.3f} TB/s", flush=True)
    print("\npattern  work  depth  blocks/SM      us   TB/s (read)")
    for r in rows:
        print(f"{r[0]:7s} {r[1]:5d} {r[2]:6d} {r[3]:10d} {r[4]:7.1f} {r[5]:6.3f}")


if __name__ == "__main__":
    main()
