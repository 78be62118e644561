"""mxfp4_moe settings side by side on any shapes (those moe_sweep.py does not list): each set
(`mode` and tuning knobs in one dict) checked against the reference first, then timed (median of
--repeats, input sets rotated).

    python bench/moe_ab.py --shapes '[{"model": "gpt-oss", "M": 416, "E": 128, "d_hidden": 2880,
        "d_expert": 2880, "topk": 4, "shared": 0}]' --params '[{"tiles": "skinny_wide", "mt2": 2},
        {"tiles": "skinny_wide", "mt2": 1}]'
"""
from __future__ import annotations

import argparse
import json
import statistics

import portable
from portable.bench import _time_rotating
from portable.kernels.mxfp4_moe import MXFP4MoE


def load(settings: dict):
    """mxfp4_moe with `settings`: its parameters (mode) as such, the rest as tuning knobs."""
    return portable.load("mxfp4_moe", **{k: v for k, v in settings.items() if k in MXFP4MoE.PARAMS},
                         tuning={k: v for k, v in settings.items() if k not in MXFP4MoE.PARAMS})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", required=True, help="JSON list of mxfp4_moe shapes (the keys of SHAPES' entries)")
    ap.add_argument("--params", required=True, help="JSON list of settings (mode and tuning knobs)")
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()
    for shape in json.loads(args.shapes):
        base = portable.load("mxfp4_moe")
        sets = [base.make_inputs(shape, 0) for _ in range(2)]
        for params in json.loads(args.params):
            k = load(params)
            ok, detail = k.verify(sets[0], k.run(sets[0]))
            t = statistics.median(_time_rotating(k.run, sets, args.repeats)) if ok else float("nan")
            print(f'{shape["model"]} M={shape["M"]} {params} {"ok" if ok else detail} {t:.1f} us', flush=True)


if __name__ == "__main__":
    main()
