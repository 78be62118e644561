"""One launch of each kernel configuration worth profiling, for Nsight Compute:

    ncu --clock-control none --section SpeedOfLight --section WarpStateStats ... \
        python3 bench/ncu_targets.py [mla] [moe]

Inputs are built and each kernel compiled before its one profiled call; no timing here (ncu
replays each launch and reports its own duration and counters).
"""
from __future__ import annotations

import sys

import torch

import portable
from portable.kernels.mxfp4_moe import SHAPES as MOE_SHAPES

MLA = [({"B": 128, "L": 8192, "q_len": 1, "h": 16}, f) for f in ("bf16", "fp8", "mxfp4")] \
    + [({"B": 64, "L": 4096, "q_len": 1, "h": 128}, "bf16")]
MOE = [(MOE_SHAPES[0], "a16w4"), (MOE_SHAPES[5], "a16w4")]


def main(which):
    if "mla" in which:
        for shape, fmt in MLA:
            k = portable.load("mla_decode", kv_format=fmt)
            inputs = k.make_inputs(shape, 0)
            print("mla_decode", fmt, shape, flush=True)
            k.run(inputs)
            torch.cuda.synchronize()
            del inputs
    if "moe" in which:
        for shape, mode in MOE:
            k = portable.load("mxfp4_moe", mode=mode)
            inputs = k.make_inputs(shape, 0)
            print("mxfp4_moe", mode, shape, flush=True)
            k.run(inputs)
            torch.cuda.synchronize()
            del inputs


if __name__ == "__main__":
    main(sys.argv[1:] or ["mla", "moe"])
