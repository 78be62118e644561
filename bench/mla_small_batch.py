"""mla_decode at small batches (issue 40: B = 4 against FlashInfer), on the bf16 cache: each B4
shape's time (input sets rotated past the L2, as `portable bench` does), the same with the KV
split into fewer or more chunks (the plan's SM count scaled), on the tile loop, and
FlashInfer's time; then the kernels of one call and their GPU times (torch.profiler) for three
shapes. With --caches: the fp8 and MXFP4 caches at the same shapes on "auto" and on the heads
loop with bf16 and fp8x2 products, against the bf16 cache's "auto" in the same run.

    python bench/mla_small_batch.py [--out DIR] [--caches] [--shapes N,...]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics

import torch

import portable
from portable import peers
from portable.bench import L2_FLUSH_BYTES, _time_rotating
from portable.kernels.mla_decode import MLADecode
from mla_call_profile import kernel_times

SHAPES = [{"B": 4, "L": L, "q_len": n, "h": h} for L in (1024, 8192) for n in (1, 4) for h in (16, 32)]
SPLITS = (0.5, 1, 2, 4)          # the plan's SM count scaled: KV chunks a sequence about follow it


def label(shape: dict) -> str:
    return "B{B} L{L} q{q_len} h{h}".format(**shape)


def input_sets(k, shape: dict) -> list:
    per_set = shape["B"] * shape["L"] * 1152
    return [k.make_inputs(shape, 0) for _ in range(max(1, min(64, L2_FLUSH_BYTES // per_set + 1)))]


def replanned(k, sets: list, split: float) -> list:
    original = MLADecode.work_list
    MLADecode.work_list = lambda self, qo, kvp, heads, target, sms: original(self, qo, kvp, heads, target, max(1, int(sms * split)))
    try:
        return [{**s, "plan": k.plan(s["qo_indptr"], s["kv_indptr"], s["q"].shape[1])} for s in sets]
    finally:
        MLADecode.work_list = original


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--caches", action="store_true", help="time the quantized caches' loop choices instead")
    ap.add_argument("--shapes", default="", help="indices into SHAPES, comma-separated (default: all)")
    args = ap.parse_args()
    shapes = [SHAPES[int(i)] for i in args.shapes.split(",")] if args.shapes else SHAPES
    if args.caches:
        return caches(args.out)
    k = portable.load("mla_decode", kv_format="bf16")
    tile = portable.load("mla_decode", kv_format="bf16", tuning={"loop": "tile"})
    fi = peers.FlashInferMLA() if peers.available("flashinfer") else None
    rows = []
    for shape in shapes:
        sets = input_sets(k, shape)
        row = {"shape": label(shape), "loop": k.for_plan(sets[0]["plan"]).tiles("sm_90a")["loop"]}
        for split in SPLITS:
            s = sets if split == 1 else replanned(k, sets, split)
            row[f"split x{split}"] = statistics.median(_time_rotating(k.run, s, 30))
            row[f"chunks x{split}"] = s[0]["plan"].chunks
        tsets = [{**s, "plan": tile.plan(s["qo_indptr"], s["kv_indptr"], shape["h"])} for s in sets]
        row["tile loop"] = statistics.median(_time_rotating(tile.run, tsets, 30))
        if fi:
            for s in sets:
                fi.prepare(s)
            row["flashinfer"] = statistics.median(_time_rotating(fi, sets, 30))
        rows.append(row)
        print(" ".join(f"{key}={v:.1f}" if isinstance(v, float) else f"{key}={v}" for key, v in row.items()), flush=True)
    for shape in (SHAPES[7], SHAPES[4], SHAPES[0]):
        kernels = kernel_times(k, k.make_inputs(shape, 0))
        print(label(shape), "a call:", "  ".join(f"{name} {us:.1f} us" for name, us in sorted(kernels.items())), flush=True)
    with open(os.path.join(args.out, "mla_small_batch.json"), "w") as f:
        json.dump(rows, f, indent=1)


def caches(out: str):
    choices = [("bf16", "auto", {}), ("fp8", "auto", {}), ("fp8", "bf16", {"loop": "heads"}), ("fp8", "fp8x2", {"loop": "heads"}),
               ("mxfp4", "auto", {}), ("mxfp4", "bf16", {"loop": "heads"})]
    rows = []
    for shape in SHAPES:
        times = {}
        for fmt, mma, knobs in choices:
            k = portable.load("mla_decode", kv_format=fmt, mma=mma, tuning=knobs)
            sets = input_sets(k, shape)
            name = f"{fmt} {mma}" + (f" {knobs['loop']}" if knobs else f" ({k.for_plan(sets[0]['plan']).tiles('sm_90a')['loop']})")
            times[name] = statistics.median(_time_rotating(k.run, sets, 30))
        base = times["bf16 auto (heads)"] if "bf16 auto (heads)" in times else next(iter(times.values()))
        rows.append({"shape": label(shape), **times})
        print(label(shape), " ".join(f"{n}={t:.1f} ({base / t:.3f})" for n, t in times.items()), flush=True)
    with open(os.path.join(out, "mla_small_batch_caches.json"), "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
