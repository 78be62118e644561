"""mxfp4_moe tiling sweep on the issue's two goal shapes (R1 E257 d_expert 256 M=4: memory-bound;
R1 E33 d_expert 2048 M=1024: matrix-bound), R1 E257 M=64, gpt-oss M=1 and the other large-tile
shapes (E33 M256, gpt-oss M1024: warpgroup MMA against mma.sync): every tiling is
checked against the reference first, then timed (median of 20, input sets rotated past the
L2); then each kernel's GPU time in one call, from the profiler (default tiling and PROFILE_ALSO).

    python bench/moe_sweep.py [--out DIR] [--modes a16w4,a4w4] [--shapes 0,1,4,5,6,8]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics

import torch

import portable
from portable.bench import L2_FLUSH_BYTES, _time_rotating, sweep_table
from portable.calibrate import measure
from portable.kernels.mxfp4_moe import SHAPES

# tiling overrides (tuning knobs) per shape index (knobs left out take the tiling's own value)
SK = "skinny"
G2 = [{"ahead2": 1, "mt2": 2, "min_blocks2": 3}, {"ahead2": 1, "mt2": 4, "min_blocks2": 2}]    # gemm2 row tiles a warp
B64 = {"tiles": "large", "bm": 64, "warps": 4, "bn": 64, "bn2": 128}     # one warpgroup of 64 rows a block
SWEEP = {
    0: [{"tiles": SK}, {"tiles": SK, "overlap": 0}, *({"tiles": SK, **g} for g in G2), {"tiles": SK, "ahead": 2}, {"tiles": "small"}],
    1: [{"tiles": SK}, {"tiles": SK, "overlap": 0}, *({"tiles": SK, **g} for g in G2), {"tiles": "small"}],
    4: [{"tiles": "large"}, B64, {**B64, "ahead": 1}, {"tiles": "large", "mma": "sync"}],
    5: [{"tiles": "large"}, {"tiles": "large", "overlap": 0}, {"tiles": "large", "ahead": 1, "bn2": 128}, {"tiles": "large", "mma": "sync"}],
    8: [{"tiles": "large"}, B64, {**B64, "ahead": 1}, {"tiles": "large", "mma": "sync"}],
    6: [{"tiles": SK}, {"tiles": SK, "overlap": 0}, *({"tiles": SK, **g} for g in G2), {"tiles": "small"}],
    7: [{"tiles": SK}, {"tiles": SK, "overlap": 0}],
}
PROFILE_ALSO = {0: G2}      # per-kernel profiles of these tilings too (a16w4)


def profile(shape, sets, modes=("a16w4", "a4w4"), **over) -> list:
    """Each kernel's GPU time in one call (the default tiling unless `over`), from the profiler's kernel
    records. Plain launches unless `over` says otherwise: an overlapped kernel's time includes its wait."""
    out = []
    over = {"overlap": 0, **over}
    for mode in modes:
        k = portable.load("mxfp4_moe", mode=mode, tuning=over)
        k.run(sets[0])
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for i in range(10):
                k.run(sets[i % len(sets)])
            torch.cuda.synchronize()
        times = {}
        for e in prof.events():
            if e.name.startswith("moe_"):
                times[e.name] = times.get(e.name, 0.0) + getattr(e, "device_time", getattr(e, "cuda_time", 0.0)) / 10
        label = " ".join(f"{k}={v}" for k, v in over.items())
        out.append({"shape": shape["model"] + f" M{shape['M']}" + (f" [{label}]" if label else ""), "mode": mode,
                    "kernels_us": times})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--modes", default="a16w4,a4w4")
    ap.add_argument("--shapes", default=",".join(map(str, SWEEP)), help="SHAPES indices to sweep")
    ap.add_argument("--extra", default="[]", help='JSON list of tilings also tried (and profiled, a16w4) on every '
                    'shape, e.g. \'[{"tiles": "skinny", "warps": 8, "min_blocks": 2}]\'')
    ap.add_argument("--extra-only", action="store_true", help="the default tiling and --extra only, not SWEEP's")
    args = ap.parse_args()
    extra = json.loads(args.extra)
    ceilings = measure(0)
    print("ceilings", json.dumps(ceilings))
    rows, profiles = [], []
    for index in map(int, args.shapes.split(",")):
        shape = SHAPES[index]
        tilings = ([{}] if args.extra_only else SWEEP.get(index, [])) + extra
        base = portable.load("mxfp4_moe")
        cost = base.cost_of(shape)
        sets = [base.make_inputs(shape, 0) for _ in range(max(1, min(4, -(-L2_FLUSH_BYTES // cost["bytes"]))))]
        for mode in args.modes.split(","):
            for over in tilings:
                label = " ".join(f"{k}={v}" for k, v in over.items())
                try:
                    k = portable.load("mxfp4_moe", mode=mode, tuning=over)
                    ok, detail = k.verify(sets[0], k.run(sets[0]))
                    t = statistics.median(_time_rotating(k.run, sets, 20))
                    rep = k.reports("sm_90a")
                except portable.PortableError as e:
                    rows.append({"shape": shape["model"] + f" M{shape['M']}", "mode": mode, "tiling": label, "error": str(e)[:90]})
                    continue
                rows.append({"shape": shape["model"] + f" M{shape['M']}", "mode": mode, "tiling": label, "ok": ok,
                             "detail": detail, "us": t, "tbps": cost["bytes"] / t / 1e6, "tflops": cost["flops"] / t / 1e6,
                             "regs": [r["registers"] for r in rep]})
        profiles += profile(shape, sets)
        for over in ([] if args.extra_only else PROFILE_ALSO.get(index, [])) + extra:
            profiles += profile(shape, sets, ("a16w4",), **over)     # the tiling the row ran
        del sets
        torch.cuda.empty_cache()
    json.dump({"ceilings": ceilings, "rows": rows, "profiles": profiles},
              open(os.path.join(args.out, "moe_sweep.json"), "w"), indent=1)
    for p in profiles:
        print(p["shape"], p["mode"], "  ".join(f"{name} {us:.1f}us" for name, us in p["kernels_us"].items()))
    print(sweep_table(rows, ["shape", "mode", "tiling", "ok", "us", "tbps", "tflops", "regs", "error"]))


if __name__ == "__main__":
    main()
