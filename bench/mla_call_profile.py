"""One mla_decode call's kernels and their GPU times (torch.profiler, 20 calls, the L2 warm),
case by case at mla_products.py's shapes: where a change's time goes (mla_decode or mla_combine).

    python bench/mla_call_profile.py --shapes 17,6 --cases bf16/auto/partials=fp32,bf16/auto/partials=bf16
"""
from __future__ import annotations

import argparse

import torch

import portable
from mla_products import SHAPES, label, parse_case


def kernel_times(k, inputs: dict, calls: int = 20) -> dict:
    """name -> GPU microseconds a call of each kernel `k.run(inputs)` launches (after 5 warm-up calls)."""
    for _ in range(5):
        k.run(inputs)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            k.run(inputs)
        torch.cuda.synchronize()
    return {e.key: e.device_time_total / e.count for e in prof.key_averages() if e.device_time_total > 0}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    ap.add_argument("--shapes", required=True, help="indices into mla_products.SHAPES, comma-separated")
    ap.add_argument("--cases", required=True, help="FORMAT/MMA[/KNOB=VALUE...], comma-separated")
    args = ap.parse_args()
    for i in args.shapes.split(","):
        shape = SHAPES[int(i)]
        for case in args.cases.split(","):
            fmt, mma, knobs = parse_case(case)
            k = portable.load("mla_decode", kv_format=fmt, mma=mma, tuning=knobs)
            kernels = kernel_times(k, k.make_inputs(shape, 0))
            print(f"{label(shape):20s} {case:40s} " + "  ".join(f"{name} {us:6.1f} us" for name, us in sorted(kernels.items())), flush=True)


if __name__ == "__main__":
    main()
