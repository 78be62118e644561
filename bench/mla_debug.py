"""Where does mla_decode disagree with the reference? Prints, per failing case, the worst
rows (token, head), the plan's chunking, and whether the inputs or the reference hold NaN.

    python bench/mla_debug.py [--out DIR]
"""
from __future__ import annotations

import argparse
import os

import torch

import portable
from portable.kernels.mla_decode import compare
from portable.refs.mla import make_mla_inputs, mla_reference

CASES = [("mxfp4", [1, 63, 64, 65, 4097, 8192, 0], 4, 16), ("mxfp4", [1, 63, 64, 65, 4097, 8192, 0], 1, 128),
         ("mxfp4", [300], 1, 16), ("fp8", [1, 63, 64, 65, 4097, 8192, 0], 4, 16), ("bf16", [4097, 65], 4, 128)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.parse_args()
    for fmt, lens, q_len, h in CASES:
        inputs = make_mla_inputs(lens, q_len, h, fmt, seed=1234, device="cuda")
        if fmt == "mxfp4":
            print(f"  scales == 0xFF: {(inputs['kv_scale'] == 255).sum().item()}")
        out, lse = portable.load("mla_decode", kv_format=fmt)(**inputs, return_lse=True)
        want, want_lse = mla_reference(**inputs)
        ok, detail = compare(out, lse, want, want_lse)
        print(f"{fmt} lens={lens} q_len={q_len} h={h}: {'ok' if ok else 'FAIL'} {detail}; "
              f"ref NaN {torch.isnan(want.float()).any().item()}")
        if not ok:
            bad = (torch.isnan(out.float()) | ((out.float() - want.float()).abs() > 1e-2)).any(dim=-1)
            rows = bad.nonzero().tolist()
            print(f"  bad (token, head) rows: {len(rows)}, first {rows[:12]}")
            print(f"  lse ours {lse[bad][:6].tolist()} ref {want_lse[bad][:6].tolist()}")


if __name__ == "__main__":
    main()
