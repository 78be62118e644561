"""mla_decode's tile loops side by side ("tile": shared bf16 tile + mma.sync; "fragments": swap-AB
warpgroup MMA on fragments decoded from a cp.async ring; "heads": 64 query rows a block on
warpgroup MMA, every format): each checked against the reference, then timed (median of 20),
with the bf16 cache on the tile loop as the baseline.

    python bench/mla_loops.py [--out DIR]
"""
from __future__ import annotations

import argparse
import json
import os

import torch

import portable
from portable.bench import sweep_table
from portable.kernels.mla_decode.reference import make_mla_inputs, mla_reference
from portable.timing import time_gpu

ALL = ("bf16", "fp8", "mxfp4")
SHAPES = [({"B": 128, "L": 8192, "q_len": 1, "h": 16}, ALL), ({"B": 32, "L": 8192, "q_len": 1, "h": 16}, ALL),
          ({"B": 128, "L": 1024, "q_len": 4, "h": 16}, ALL), ({"B": 64, "L": 4096, "q_len": 1, "h": 128}, ALL),
          ({"B": 128, "L": 8192, "q_len": 1, "h": 16, "page": 64}, ALL),     # the cache in 64-row pages, random order
          ({"B": 128, "L": 8192, "q_len": 1, "h": 32}, ALL)]                 # 32 rows: the heads loop half full
CASES = [("bf16", "tile", {}), ("bf16", "heads", {}), ("fp8", "tile", {}), ("fp8", "fragments", {}), ("fp8", "heads", {}),
         ("mxfp4", "tile", {}), ("mxfp4", "fragments", {}), ("mxfp4", "heads", {}), ("mxfp4", "twin", {})]


def small_case_errors(fmt: str, loop: str) -> str:
    """Where a small two-sequence case goes wrong: the worst heads and 16-dim blocks."""
    inputs = make_mla_inputs([64, 200], 1, 16, fmt, seed=1, device="cuda")
    out, lse = portable.load("mla_decode", kv_format=fmt, tuning={"loop": loop})(**inputs, return_lse=True)
    want, want_lse = mla_reference(**inputs, out_dtype=torch.float32)
    err = (out.float() - want).abs()                                  # (total_q, h, 512)
    by_head = err.amax(dim=(0, 2))
    by_block = err.amax(dim=(0, 1)).reshape(32, 16).amax(dim=1)
    lse_err = (lse - want_lse).abs().amax().item()
    return (f"max {err.max().item():.3g}, lse {lse_err:.3g}; by head {[round(v, 3) for v in by_head.tolist()]}; "
            f"by 16-dim block {[round(v, 3) for v in by_block.tolist()]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args()
    for fmt, loop in (("fp8", "fragments"), ("mxfp4", "fragments"), ("mxfp4", "twin")):
        print(f"{loop} loop, small {fmt} case:", small_case_errors(fmt, loop), flush=True)
    rows = []
    for shape, formats in SHAPES:
        for fmt, loop, extra in CASES:
            k = portable.load("mla_decode", kv_format=fmt, tuning={"loop": loop, **extra})
            if fmt not in formats:
                continue
            inputs = k.make_inputs(shape, 0)
            ok, detail = k.verify(inputs, k.run(inputs))
            t = time_gpu(lambda: k.run(inputs), repeats=20)["median_us"]
            cost = k.cost_of(shape)
            rows.append({"shape": "B{B} L{L} q{q_len} h{h}".format(**shape) + (f" page{shape['page']}" if "page" in shape else ""), "fmt": fmt, "loop": loop + "".join(f" {k}={v}" for k, v in extra.items()), "ok": ok,
                         "detail": "" if ok else str(detail)[:60], "us": t, "tbps": cost["bytes"] / t / 1e6,
                         "regs": k.for_heads(shape["h"], "sm_90a", shape["q_len"]).report("sm_90a")["registers"]})
            del inputs
            torch.cuda.empty_cache()
    json.dump(rows, open(os.path.join(args.out, "mla_loops.json"), "w"), indent=1)
    print(sweep_table(rows, ["shape", "fmt", "loop", "ok", "us", "tbps", "regs", "detail"]))


if __name__ == "__main__":
    main()
