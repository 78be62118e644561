"""mla_decode tiling sweep (the "tile" loop; bench/mla_loops.py compares the loops) on the memory-bound shape (B=128, L=8192, h=16) and the h=128 shape:
every tiling is checked against the reference first, then timed (median of 20).

    python bench/mla_sweep.py [--out DIR]
"""
from __future__ import annotations

import argparse
import json
import os

import torch

import portable
from portable.bench import sweep_table
from portable.kernels.mla_decode import MLADecode
from portable.timing import time_gpu

SHAPES = [{"B": 128, "L": 8192, "q_len": 1, "h": 16}, {"B": 64, "L": 4096, "q_len": 1, "h": 128}]
# (kv_tile, row_groups, warps, min_blocks, score_split); score_split 0: the template's default
TILINGS = [(32, 1, 8, 2, 0), (32, 1, 8, 2, 4), (32, 1, 8, 2, 8), (64, 1, 8, 1, 0), (64, 1, 8, 1, 4),
           (64, 2, 8, 1, 0), (64, 2, 8, 1, 4), (32, 2, 8, 1, 0), (32, 2, 8, 1, 4)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args()
    rows = []
    for shape in SHAPES:
        for fmt in ("bf16", "fp8", "mxfp4") if shape["h"] == 16 else ("bf16",):
            inputs = None
            for kv_tile, rg, warps, min_blocks, split in TILINGS:
                if shape["h"] == 16 and rg > 1:
                    continue
                k = portable.load("mla_decode", kv_format=fmt, tuning={"loop": "tile", "kv_tile": kv_tile, "row_groups": rg, "warps": warps,
                                                                   "min_blocks": min_blocks, "score_split": split})
                try:
                    inputs = inputs or k.make_inputs(shape, 0)
                    inputs["plan"] = k.plan(inputs["qo_indptr"], inputs["kv_indptr"], shape["h"])   # per tiling
                    ok, detail = k.verify(inputs, k.run(inputs))
                    t = time_gpu(lambda: k.run(inputs), repeats=20)["median_us"]
                except portable.PortableError as e:
                    rows.append({"shape": shape, "fmt": fmt, "tiling": (kv_tile, rg, warps, min_blocks, split), "error": str(e)[:80]})
                    continue
                cost = k.cost_of(shape)
                rows.append({"shape": shape, "fmt": fmt, "tiling": (kv_tile, rg, warps, min_blocks, split), "ok": ok, "us": t,
                             "tbps": cost["bytes"] / t / 1e6, "tflops": cost["flops"] / t / 1e6,
                             "regs": k.report("sm_90a")["registers"]})
            del inputs
            torch.cuda.empty_cache()
    # the [.wide] tiling chosen for heads % 32 == 0 against one 16-head group a block
    for shape in ({"B": 128, "L": 8192, "q_len": 1, "h": 32}, {"B": 64, "L": 4096, "q_len": 1, "h": 128}):
        for fmt in ("bf16", "fp8", "mxfp4"):
            for label, k in (("auto", portable.load("mla_decode", kv_format=fmt)),
                             ("1 group", portable.load("mla_decode", kv_format=fmt, tuning={"row_groups": 1}))):
                inputs = k.make_inputs(shape, 0)
                ok, _ = k.verify(inputs, k.run(inputs))
                t = time_gpu(lambda: k.run(inputs), repeats=20)["median_us"]
                rows.append({"shape": shape, "fmt": fmt, "tiling": label, "ok": ok, "us": t,
                             "tbps": k.cost_of(shape)["bytes"] / t / 1e6, "tflops": k.cost_of(shape)["flops"] / t / 1e6,
                             "regs": k.for_heads(shape["h"], "sm_90a").report("sm_90a")["registers"]})
                del inputs
    json.dump(rows, open(os.path.join(args.out, "mla_sweep.json"), "w"), indent=1)
    shown = [{**r, "shape": "B{B} L{L} q{q_len} h{h}".format(**r["shape"]), "tiling": str(r["tiling"])} for r in rows]
    print(sweep_table(shown, ["shape", "fmt", "tiling", "ok", "us", "tbps", "tflops", "regs", "error"]))


if __name__ == "__main__":
    main()
