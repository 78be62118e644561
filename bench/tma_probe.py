"""How fast the copy engine (tensor copies, cp.async.bulk.tensor) reads an MLA cache when it does
nothing else (CUDA only; issue 40): each block streams one sequence's 64-row tiles through a
ring of `stages` tiles, one thread asking for each tile as its stage frees, as mla_decode's
heads loops do, with no work between. The tile is read in boxes of 64 rows x the box width, as
the loops' tensor maps do (the fp8 cache: nine 64-byte boxes; the bf16 cache: nine 128-byte
ones); "fp8 128+64" reads the fp8 row in four 128-byte boxes and one 64-byte one. Each line is
the read rate against a torch copy of the same bytes timed in the same run.

    python bench/tma_probe.py [--batch 128] [--rows 8192] [--stages 2,3,4,5,6]
"""
from __future__ import annotations

import argparse

import torch

from portable.backends import cuda_driver, nvrtc
from portable.timing import time_gpu

SOURCE = r"""
struct __align__(64) tmap_t { unsigned long long v[16]; };

__device__ __forceinline__ void box(unsigned dst, const tmap_t* map, int x, int y, unsigned bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                 :: "r"(dst), "l"(map), "r"(x), "r"(y), "r"(bar) : "memory");
}

// block b streams rows 64 tiles b.. of the cache: tile t (64 rows) into stage t % stages, the
// stage asked for again as soon as its tile landed; `wide` boxes of wide_bytes, then `narrow`
// boxes of narrow_bytes across a row
extern "C" __global__ void __launch_bounds__(32) probe(const __grid_constant__ tmap_t wide_map, const __grid_constant__ tmap_t narrow_map,
                                                      int tiles, int stages, int wide, int wide_bytes, int narrow, int narrow_bytes) {
    extern __shared__ __align__(1024) unsigned char smem[];
    if (threadIdx.x != 0) return;
    const unsigned base = (unsigned)__cvta_generic_to_shared(smem), bars = base, data = base + 1024;
    const unsigned tile_bytes = 64u * (wide * wide_bytes + narrow * narrow_bytes);
    for (int s = 0; s < stages; ++s)
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(bars + 8 * s) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    auto ask = [&](int t) {
        const int s = t % stages, row = (blockIdx.x * tiles + t) * 64;
        const unsigned bar = bars + 8 * s, dst = data + s * tile_bytes;
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(tile_bytes) : "memory");
        for (int i = 0; i < wide; ++i) box(dst + i * 64 * wide_bytes, &wide_map, i * wide_bytes, row, bar);
        for (int i = 0; i < narrow; ++i)
            box(dst + 64 * (wide * wide_bytes + i * narrow_bytes), &narrow_map, wide * wide_bytes + i * narrow_bytes, row, bar);
    };
    for (int t = 0; t < stages && t < tiles; ++t) ask(t);
    for (int t = 0; t < tiles; ++t) {
        const unsigned bar = bars + 8 * (t % stages), parity = (t / stages) & 1;
        asm volatile("{\n\t.reg .pred done;\nWAIT_%=:\n\tmbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n\t@!done bra WAIT_%=;\n\t}"
                     :: "r"(bar), "r"(parity) : "memory");
        if (t + stages < tiles) ask(t + stages);
    }
}
"""
# name: row bytes, (wide boxes, their bytes), (narrow boxes, their bytes)
LAYOUTS = {"fp8 9 x 64": (576, (9, 64), (0, 64)), "fp8 128+64": (576, (4, 128), (1, 64)),
           "bf16 9 x 128": (1152, (9, 128), (0, 128))}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=128, help="sequences: one block each")
    ap.add_argument("--rows", type=int, default=8192, help="KV rows a sequence (a multiple of 64)")
    ap.add_argument("--stages", default="2,3,4,5,6")
    ap.add_argument("--layouts", default=",".join(LAYOUTS))
    args = ap.parse_args()
    fn = cuda_driver.get_function(cuda_driver.load(nvrtc.compile(SOURCE, "sm_90a", {}).code, 0), "probe")
    go = cuda_driver.launcher(fn, ("tmap", "tmap", "i32", "i32", "i32", "i32", "i32", "i32"))
    smem_limit = torch.cuda.get_device_properties(0).shared_memory_per_block_optin
    lines = []
    for name in args.layouts.split(","):
        row_bytes, (wide, wide_bytes), (narrow, narrow_bytes) = LAYOUTS[name]
        rows = args.batch * args.rows
        cache = torch.randint(0, 255, (rows, row_bytes), dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(cache)
        copy_us = time_gpu(lambda: dst.copy_(cache))["median_us"]
        maps = [cuda_driver.tensor_map_2d(cache.data_ptr(), rows, row_bytes, 64, w, swizzle=w) for w in (wide_bytes, narrow_bytes)]
        for stages in map(int, args.stages.split(",")):
            smem = 1024 + stages * 64 * row_bytes
            if smem > smem_limit:
                continue
            cuda_driver.set_max_dynamic_smem(fn, smem)

            def run():
                err = go(args.batch, 1, 1, 32, 1, 1, smem, torch.cuda.current_stream().cuda_stream,
                         *maps, args.rows // 64, stages, wide, wide_bytes, narrow, narrow_bytes)
                cuda_driver.raise_for(err, "probe")
            us = time_gpu(run)["median_us"]
            tb = rows * row_bytes / us / 1e6
            lines.append(f"{name:13s} stages {stages}  {stages * 64 * row_bytes // 1024:4d} KB in flight  {us:7.1f} us  "
                         f"{tb:.3f} TB/s  {tb / (2 * rows * row_bytes / copy_us / 1e6):.2f} of the copy")
            print(lines[-1], flush=True)
        del cache, dst
    print(f"\nB{args.batch} x {args.rows} rows, one block a sequence:")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
