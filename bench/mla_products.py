"""mla_decode's products side by side on the compute-bound shapes (issue 40): the bf16 cache,
the fp8 cache on bf16 products (Q bf16, the cache decoded to bf16) and on fp8 products
(mma="fp8": Q and P rounded to e4m3, both products on the fp8 matrix path; "fp8x2": Q as two
e4m3 parts), and the MXFP4 cache on bf16, fp8 and fp8x2 products (decoded to e4m3), each
checked against the fp32 reference (largest error printed) and timed, interleaved, median of 20.

    python bench/mla_products.py [--out DIR] [--stages 2[,3]] [--cases CASES] [--shapes N,...]

CASES replaces the list: FORMAT/MMA[/KNOB=VALUE...] entries, comma-separated, the first the
baseline (e.g. bf16/auto,bf16/auto/scores=halves); --shapes picks SHAPES by index; --shape
B,L,Q_LEN,H (repeatable) adds a shape of one's own.
"""
from __future__ import annotations

import argparse
import json
import os

import torch

import portable
from portable.kernels.mla_decode import compare
from portable.timing import time_gpu

SHAPES = [{"B": 128, "L": 8192, "q_len": 4, "h": 32}, {"B": 128, "L": 8192, "q_len": 4, "h": 16},
          {"B": 32, "L": 8192, "q_len": 4, "h": 32}, {"B": 64, "L": 4096, "q_len": 1, "h": 128},
          {"B": 128, "L": 8192, "q_len": 1, "h": 128}, {"B": 128, "L": 8192, "q_len": 1, "h": 32},
          {"B": 4, "L": 8192, "q_len": 4, "h": 32}, {"B": 128, "L": 1024, "q_len": 4, "h": 32},
          {"B": 128, "L": 8192, "q_len": 1, "h": 16}, {"B": 4, "L": 1024, "q_len": 4, "h": 32},
          # (10..16: shorter chunks, where the loops' prologues count)
          {"B": 32, "L": 1024, "q_len": 4, "h": 16}, {"B": 32, "L": 1024, "q_len": 4, "h": 32},
          {"B": 4, "L": 8192, "q_len": 4, "h": 16}, {"B": 32, "L": 8192, "q_len": 4, "h": 16},
          {"B": 4, "L": 1024, "q_len": 1, "h": 16}, {"B": 32, "L": 1024, "q_len": 1, "h": 16},
          {"B": 128, "L": 1024, "q_len": 1, "h": 32}, {"B": 4, "L": 8192, "q_len": 1, "h": 16}]


def label(shape: dict) -> str:
    return "B{B} L{L} q{q_len} h{h}".format(**shape)


def parse_knobs(items) -> dict:
    """KNOB=VALUE strings -> tuning knobs (digits as ints)."""
    return {k: (int(v) if v.isdigit() else v) for k, v in (kv.split("=") for kv in items if kv)}


def parse_case(text: str) -> tuple:
    fmt, mma, *knobs = text.split("/")
    return fmt, mma, parse_knobs(knobs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--stages", default="2", help="the fp8 products' KV ring depths to time")
    ap.add_argument("--cases", default="", help="FORMAT/MMA[/KNOB=VALUE...], comma-separated, the first the baseline")
    ap.add_argument("--shapes", default="", help="indices into SHAPES, comma-separated (default: all)")
    ap.add_argument("--shape", action="append", default=[], help="B,L,Q_LEN,H: one more shape (repeatable)")
    args = ap.parse_args()
    cases = [("bf16", "auto", {}), ("fp8", "bf16", {})]
    cases += [("fp8", m, {"stages": int(s)}) for m in ("fp8", "fp8x2") for s in args.stages.split(",")]
    cases += [("mxfp4", m, {}) for m in ("bf16", "fp8", "fp8x2")]
    if args.cases:
        cases = [parse_case(c) for c in args.cases.split(",")]
    shapes = [SHAPES[int(i)] for i in args.shapes.split(",")] if args.shapes else ([] if args.shape else SHAPES)
    shapes += [dict(zip(("B", "L", "q_len", "h"), map(int, s.split(",")))) for s in args.shape]
    rows = []
    for shape in shapes:
        timed = []
        for fmt, mma, knobs in cases:
            k = portable.load("mla_decode", kv_format=fmt, mma=mma, tuning=knobs)
            inputs = k.make_inputs(shape, 0)
            out, lse = k.run(inputs)
            want_out, want_lse = k.reference(**{n: v for n, v in inputs.items() if n != "plan"}, out_dtype=torch.float32)
            atol, rtol_l2 = k.error_bars(inputs["plan"])        # verify's check, on the one reference
            ok, detail = compare(out, lse, want_out, want_lse, atol=atol, rtol_l2=rtol_l2)
            err = (out.float() - want_out).abs().max().item()
            timed.append((fmt, mma, knobs, k, inputs, ok, detail, err))
        times = {i: [] for i in range(len(timed))}
        for _ in range(3):                                   # interleaved rounds
            for i, (*_, k, inputs, ok, detail, err) in enumerate(timed):
                times[i].append(time_gpu(lambda: k.run(inputs), repeats=20)["median_us"])
        base = min(times[0])
        for i, (fmt, mma, knobs, k, inputs, ok, detail, err) in enumerate(timed):
            us = min(times[i])
            cost = k.cost_of(shape)
            rows.append({"shape": label(shape), "fmt": fmt, "mma": mma, "knobs": knobs, "ok": ok, "max_err": err,
                         "us": us, "x_bf16": base / us, "tflops": cost.get("flops", 0) / us / 1e6,
                         "detail": "" if ok else detail})
            print(f"{label(shape):<22} {fmt:<5} mma={mma:<4} {str(knobs):<14} {'ok ' if ok else 'BAD'} err {err:.2e} "
                  f"{us:8.1f} us  {base / us:5.2f}x bf16  {rows[-1]['tflops']:6.1f} TFLOP/s", flush=True)
    with open(os.path.join(args.out, "mla_products.json"), "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
