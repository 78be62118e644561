"""When each block of an mla_decode call reached the points of the bf16 "regs" heads loop (CUDA
only; issue 40): a measurement build (bench/source_edits.py) whose kernel records %globaltimer
per block at its start, Q in the scorer's registers, tiles 0, 1, 2 and the middle one landed
(as the scorer sees them), the end of the scorer's loop, the end of the O warpgroups' loop and
the last warp's exit. Prints, per point, the blocks' median / p90 / max from the first block's
start, and the steady rate a tile, so a fixed cost (launch, prologue, epilogue) shows apart
from the loop.

    python bench/mla_timeline.py [--shape B,L,Q_LEN,H ...]

The marks add a few instructions a block, so times are close to, not equal to, the untimed
kernel's.
"""
from __future__ import annotations

import argparse

import numpy as np
import torch

import portable
from portable.kernels.mla_decode.reference import make_mla_inputs

import source_edits
from moe_trace import SPIN_CYCLES, read, zero

SLOTS = 4096
POINTS = ("start", "Q in registers", "tile 0 landed", "tile 1 landed", "tile 2 landed", "middle tile landed",
          "scorer's loop done", "O loop done", "last warp out")
TRACER = f"""
__device__ unsigned long long ptrace_t[{len(POINTS)}][{SLOTS}];
__device__ __forceinline__ unsigned long long ptrace_now() {{
    unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t;
}}
__device__ __forceinline__ void ptrace_mark(int p) {{ if (blockIdx.x < {SLOTS}) ptrace_t[p][blockIdx.x] = ptrace_now(); }}
"""
LANDED = "mbarrier_wait_parity(full + 8 * slot, (it / 3) & 1);      // tile it landed\n"
MARKS = [
    ("const int wg = __shfl_sync(0xffffffffu, tid >> 7, 0);\n",
     "const int wg = __shfl_sync(0xffffffffu, tid >> 7, 0);\n    if (tid == 0) ptrace_mark(0);\n"),
    ("named_barrier_arrive(10, 384);\n", "named_barrier_arrive(10, 384);\n        if (tid == 0) ptrace_mark(1);\n"),
    (LANDED, LANDED + "            if (tid == 0 && (it < 3 || it == ntiles / 2)) ptrace_mark(it < 3 ? 2 + it : 5);\n"),
    ("if (c == 0) { sL[rows[0]] = l_run[0];", "if (tid == 0) ptrace_mark(6);\n        if (c == 0) { sL[rows[0]] = l_run[0];"),
    ("named_barrier(9, 384);                   // warpgroup 0's sums",
     "if (tid == 128) ptrace_mark(7);\n        named_barrier(9, 384);"),
]
LAST = "    if ((tid & 31) == 0 && blockIdx.x < SLOTS) atomicMax(&ptrace_t[8][blockIdx.x], ptrace_now());\n".replace("SLOTS", str(SLOTS))


def traced(source: str) -> str:
    """The tracer ahead of the first kernel, the last-warp mark before mla_decode's closing brace."""
    close = source.rindex("}", 0, source_edits.kernel_end(source, source.index("void mla_decode(")))
    return source_edits.with_device_code(source[:close] + LAST + source[close:], TRACER)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", action="append", default=[], help="B,L,Q_LEN,H (repeatable; default: B64 L1024/4096 h128)")
    args = ap.parse_args()
    shapes = [tuple(map(int, s.split(","))) for s in args.shape] or [(64, 1024, 1, 128), (64, 4096, 1, 128)]
    source_edits.edit(MARKS, then=traced)
    for B, L, q_len, h in shapes:
        inputs = make_mla_inputs([L] * B, q_len, h, "bf16", seed=1, device="cuda")
        k = portable.load("mla_decode", kv_format="bf16")
        plan = k.plan(inputs["qo_indptr"], inputs["kv_indptr"], h)
        kernel = k.for_plan(plan)
        for _ in range(10):
            kernel(**inputs, plan=plan)
        torch.cuda.synchronize()
        zero(kernel.launcher_at(0).module, ("ptrace_t",))
        torch.cuda._sleep(SPIN_CYCLES)
        kernel(**inputs, plan=plan)
        torch.cuda.synchronize()
        t = read(kernel.launcher_at(0).module, "ptrace_t", np.uint64, (len(POINTS), SLOTS)).astype(np.int64)[:, :plan.n_items]
        t0 = t[0].min()
        rel = (t - t0) / 1e3
        ntiles = -(-int((plan.work[:, 4] - plan.work[:, 3]).max()) // 64)
        print(f"\n== B{B} L{L} q{q_len} h{h}: {plan.n_items} blocks, {ntiles} tiles the longest; us from the first block's start")
        for p, name in enumerate(POINTS):
            r = rel[p][t[p] > 0]
            if len(r):
                print(f"  {name:22s} median {np.median(r):7.1f}  p10 {np.percentile(r, 10):7.1f}  p90 {np.percentile(r, 90):7.1f}  max {r.max():7.1f}")
        mid = ntiles // 2
        if mid > 2:
            rate = (rel[5] - rel[2]) / mid
            tail = (rel[6] - rel[5]) / (ntiles - mid)
            print(f"  a tile, tiles 0..{mid}: median {np.median(rate):.2f} us; tiles {mid}..{ntiles}: {np.median(tail):.2f} us")


if __name__ == "__main__":
    main()
