"""MXFP4 on fp8x2 products, B128 L8192 q4 h32: one decoding warpgroup as built, the same kernel
with its registers capped at what decoders=2 leaves the MMA warpgroups (__maxnreg__(232)), and
decoders=2, each checked against the fp32 reference and timed (issue 40; bench/NOTES.md).

    python bench/mla_regcap_probe.py            # on a GPU
    python bench/mla_regcap_probe.py --static   # registers and spills of the first two, no GPU
"""
import sys

import torch

import portable
from portable.kernels.mla_decode import compare
from portable.kernels.mla_decode.reference import make_mla_inputs, mla_reference
from portable.timing import time_gpu

import source_edits


def cap(registers):
    """The launch bounds replaced by a register cap (NVRTC takes one of the two); None: as built."""
    source_edits.edit([("__launch_bounds__(256, 1)", f"__maxnreg__({registers})")] if registers else [])


VARIANTS = ((None, 1), (232, 1), (None, 2))     # (register cap, decoders)

if __name__ == "__main__":
    if "--static" in sys.argv:
        for registers, _ in VARIANTS[:2]:
            cap(registers)
            r = portable.load("mla_decode", kv_format="mxfp4", mma="fp8x2").report("sm_90a")
            print(f"cap {registers}: {r['registers']} registers, {r['spill_bytes']} bytes spilled")
        sys.exit()
    inputs = make_mla_inputs([8192] * 128, 4, 32, "mxfp4", seed=1, device="cuda")
    want = mla_reference(**inputs, out_dtype=torch.float32)
    for registers, decoders in VARIANTS:
        cap(registers)
        k = portable.load("mla_decode", kv_format="mxfp4", mma="fp8x2", tuning={"decoders": decoders})
        plan = k.plan(inputs["qo_indptr"], inputs["kv_indptr"], 32)
        run = lambda: k(**inputs, plan=plan, return_lse=True)
        ok, detail = compare(*run(), *want, atol=1e-2, rtol_l2=5e-2)
        print(f"cap {registers} decoders {decoders}: {time_gpu(run)['median_us']:.1f} us  {'ok' if ok else 'BAD'} {detail}", flush=True)
