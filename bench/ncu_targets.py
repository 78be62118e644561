"""One launch of each kernel configuration worth profiling, for Nsight Compute:

    ncu --clock-control none --section SpeedOfLight --section WarpStateStats ... \
        python3 bench/ncu_targets.py [mla] [heads] [fp8] [products] [twin] [moe] [moe_skinny] [moe_m64] [moe_large] [moe_e33m64] [moe_e33m64_tma] [moe_rs]

Inputs are built and each kernel compiled before its one profiled call; no timing here (ncu
replays each launch and reports its own duration and counters).
"""
from __future__ import annotations

import sys

import torch

import portable
from portable.kernels import KERNELS
from portable.kernels.mxfp4_moe import SHAPES as MOE_SHAPES

TARGETS = {
    "mla": [("mla_decode", {"kv_format": f}, {"B": 128, "L": 8192, "q_len": 1, "h": 16}) for f in ("bf16", "fp8", "mxfp4")]
    + [("mla_decode", {"kv_format": "bf16"}, {"B": 64, "L": 4096, "q_len": 1, "h": 128})],
    "heads": [("mla_decode", {"kv_format": "bf16"}, {"B": 64, "L": 4096, "q_len": 1, "h": 128})],
    "fp8": [("mla_decode", {"kv_format": "fp8"}, {"B": 128, "L": 8192, "q_len": 1, "h": 16})],
    # the heads loop on bf16 products and the fp8 cache on fp8 products (issue 40)
    "products": [("mla_decode", {"kv_format": f, "mma": m}, {"B": 64, "L": 4096, "q_len": 1, "h": 128})
                 for f, m in (("bf16", "auto"), ("fp8", "fp8"))],
    "twin": [("mla_decode", {"kv_format": "mxfp4", "loop": "twin"}, {"B": 128, "L": 8192, "q_len": 1, "h": 16})],
    "moe": [("mxfp4_moe", {"mode": "a16w4"}, MOE_SHAPES[i]) for i in (0, 5)],
    "moe_skinny": [("mxfp4_moe", {"mode": "a16w4", "overlap": 0}, MOE_SHAPES[0])],     # plain launches: no waits in the profile
    "moe_m64": [("mxfp4_moe", {"mode": "a16w4", "overlap": 0}, MOE_SHAPES[1])],        # R1 E257 M64: skinny, gemm2 from shared memory
    "moe_large": [("mxfp4_moe", {"mode": "a16w4"}, MOE_SHAPES[5])],
    "moe_e33m64": [("mxfp4_moe", {"mode": "a16w4", "overlap": 0}, MOE_SHAPES[3])],    # R1 E33 M64: medium warpgroup_rs tiles
    "moe_e33m64_tma": [("mxfp4_moe", {"mode": "a16w4", "overlap": 0, "wfetch": "tma"}, MOE_SHAPES[3])],   # the same, weights by TMA
    "moe_rs": [("mxfp4_moe", {"mode": "a16w4", "overlap": 0, "tiles": "large", "mma": "warpgroup_rs"}, MOE_SHAPES[5])],
}


def main(which):
    for group in which:
        for name, params, shape in TARGETS[group]:
            declared = KERNELS[name].PARAMS         # the rest are tuning knobs
            k = portable.load(name, **{p: v for p, v in params.items() if p in declared},
                              tuning={p: v for p, v in params.items() if p not in declared})
            inputs = k.make_inputs(shape, 0)
            print(name, params, shape, flush=True)
            k.run(inputs)
            torch.cuda.synchronize()
            del inputs


if __name__ == "__main__":
    main(sys.argv[1:] or list(TARGETS))
