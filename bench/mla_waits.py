"""Where each warpgroup of a heads loop waits (CUDA only; issue 40): a measurement build whose
mla_decode has every wait (named barriers, block barriers, mbarrier waits, warpgroup-MMA waits,
cp.async waits) timed with clock64 by one thread a warpgroup and summed over the blocks. Prints,
per warpgroup, its cycles from start to exit and, per wait site (its source line), the cycles it
spent there, both a (block, KV tile): a warpgroup that waits little is the one that sets the pace.

    python bench/mla_waits.py [--shape B,L,Q_LEN,H] [--case FORMAT/MMA[/KNOB=VALUE...] ...] [--calls NAME,...]
                              [--cut SET:NAME] [--out DIR]

--calls also times each call of the source's functions or lambdas of those names (e.g.
decode,issue,transpose): where a warpgroup that seldom waits spends its time. --cut times the loop
with one of bench/mla_ablation.py's cuts applied (SET regs, mxfp4 or mxregs, as that script takes
them; e.g. "mxregs:no decode"); its results are then wrong.

The lines are those of the untimed source, which --out writes as DIR/waits_<case>.cu.

Defaults: B128 L8192 q4 h32, the cases bf16/auto, fp8/fp8 and mxfp4/auto. The timing adds a few
instructions and two atomics a wait, so the loop runs a little slower than untimed.
"""
from __future__ import annotations

import argparse
import os
import re

import numpy as np
import torch

import portable
from portable.kernels.mla_decode.reference import make_mla_inputs
from portable.signature import balanced_end

import source_edits
from mla_ablation import CUTS
from mla_products import parse_case
from moe_trace import SPIN_CYCLES, read, zero

SITES = 64
TRACER = f"""
__device__ unsigned long long pwait_c[4][{SITES}];   // [warpgroup][site] cycles, summed over blocks
__device__ unsigned long long pwait_life[4];         // [warpgroup] cycles from its start to its exit
#define PW(site, call) do {{ const long long _t = clock64(); call; \\
    if ((threadIdx.x & 127) == 0) atomicAdd(&pwait_c[threadIdx.x >> 7][site], (unsigned long long)(clock64() - _t)); }} while (0)
struct PLife {{
    long long t = clock64();
    __device__ ~PLife() {{ if ((threadIdx.x & 127) == 0) atomicAdd(&pwait_life[threadIdx.x >> 7], (unsigned long long)(clock64() - t)); }}
}};
"""
WAITS = r"named_barrier|__syncthreads|mbarrier_wait_parity|cluster_sync|wg_wait<\d+>|cp_async_wait<\d+>"


def timed(source: str, calls: tuple[str, ...] = ()) -> tuple[str, list[str]]:
    """mla_decode's waits (and calls of `calls`) wrapped in PW(site, ...) and a PLife at its top;
    the sites' lines."""
    wait = re.compile(r"\b(" + "|".join([WAITS, *map(re.escape, calls)]) + r")\s*\(")
    start = source.index("void mla_decode(")
    body = source.index("{", balanced_end(source, source.index("(", start)))
    end = source_edits.kernel_end(source, body)
    out, sites, at = [], [], body + 1
    for m in wait.finditer(source, body + 1, end):
        if m.start() < at:
            continue
        stop = balanced_end(source, m.end() - 1)
        line = source.count("\n", 0, m.start()) + 1
        sites.append(f"line {line}: {source[m.start():stop]}")
        out += [source[at:m.start()], f"PW({len(sites) - 1}, {source[m.start():stop]})"]
        at = stop
    assert len(sites) <= SITES
    text = source[:body + 1] + " PLife _plife;" + "".join(out) + source[at:]
    return source_edits.with_device_code(text, TRACER), sites


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="128,8192,4,32", help="B,L,Q_LEN,H")
    ap.add_argument("--case", action="append", default=[], help="FORMAT/MMA[/KNOB=VALUE...] (repeatable)")
    ap.add_argument("--calls", default="", help="function or lambda names whose calls are timed too, comma-separated")
    ap.add_argument("--cut", default="", help="SET:NAME, a cut of bench/mla_ablation.py applied first (SET: regs, mxfp4, mxregs)")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args()
    calls = tuple(n for n in args.calls.split(",") if n)
    cut_set, _, cut = args.cut.partition(":")
    cuts = CUTS[cut_set][cut] if args.cut else []
    B, L, q_len, h = map(int, args.shape.split(","))
    source_edits.edit(cuts, then=lambda source: timed(source, calls)[0])
    for case in args.case or ["bf16/auto", "fp8/fp8", "mxfp4/auto"]:
        fmt, mma, knobs = parse_case(case)
        inputs = make_mla_inputs([L] * B, q_len, h, fmt, seed=1, device="cuda")
        k = portable.load("mla_decode", kv_format=fmt, mma=mma, tuning=knobs)
        plan = k.plan(inputs["qo_indptr"], inputs["kv_indptr"], h)
        kernel = k.for_plan(plan)
        kernel(**inputs, plan=plan)
        torch.cuda.synchronize()
        module = kernel.launcher_at(0).module
        zero(module, ("pwait_c", "pwait_life"))
        torch.cuda._sleep(SPIN_CYCLES)
        kernel(**inputs, plan=plan)
        torch.cuda.synchronize()
        c = read(module, "pwait_c", np.uint64, (4, SITES)).astype(np.float64)
        life = read(module, "pwait_life", np.uint64, (4,)).astype(np.float64)
        target = kernel.launcher_at(0).target
        source = source_edits.unedited(kernel, target)
        for old, new in cuts:
            source = source.replace(old, new)
        sites = timed(source, calls)[1]
        with open(os.path.join(args.out, f"waits_{case.replace('/', '_')}.cu"), "w") as f:
            f.write(source)
        tiles = sum(-(-int(hi - lo) // 64) for lo, hi in plan.work[:, 3:5].tolist())
        print(f"\n== B{B} L{L} q{q_len} h{h} {case}: {plan.n_items} blocks, {tiles} (block, tile)s; cycles a (block, tile)")
        for wg in range(4):
            if life[wg] == 0:
                continue
            print(f"  warpgroup {wg}: {life[wg] / tiles:7.0f} alive")
            for s in np.argsort(-c[wg]):
                if c[wg][s] / tiles >= 20:
                    print(f"      {c[wg][s] / tiles:7.0f}  {sites[s]}")


if __name__ == "__main__":
    main()
