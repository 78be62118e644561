"""Does FlashInfer's MLA decode install, build and agree with the reference here? Checks the
peer (portable.peers.FlashInferMLA) on ragged, causal (q_len 4), paged and h = 128 bf16
batches, says where its LSE differs, then times it beside mla_decode on the issue's two bf16
goal shapes.

    python bench/peer_probe.py [--out DIR]          (the wheels: bench/peer_wheels.sh)
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch

import portable
from portable import peers
from portable.bench import _time_peer, _time_rotating
from portable.kernels.mla_decode.reference import make_mla_inputs, mla_reference
from portable.kernels.mla_decode import compare

CHECKS = [  # (kv_lens, q_len, h, page_size)
    ([1, 63, 64, 65, 4097, 8192], 1, 16, None),
    ([1, 63, 64, 65, 4097, 8192], 4, 16, None),
    ([65, 4097, 300], 2, 128, None),
    ([100, 4097, 64], 1, 32, 64),
]
TIMED = [{"B": 128, "L": 8192, "q_len": 1, "h": 16}, {"B": 64, "L": 4096, "q_len": 1, "h": 128}]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args()
    import flashinfer
    report = {"flashinfer": flashinfer.__version__, "checks": [], "timed": []}
    t0 = time.time()
    peer = peers.FlashInferMLA()
    for kv_lens, n, h, page in CHECKS:
        inp = make_mla_inputs(kv_lens, n, h, "bf16", seed=torch.seed() % (1 << 31), page_size=page, device="cuda")
        want_out, want_lse = mla_reference(**inp, out_dtype=torch.float32)
        out, lse = peer(inp)
        torch.cuda.synchronize()
        row = {"kv_lens": kv_lens, "q_len": n, "h": h, "page_size": page, "check": compare(out, lse, want_out, want_lse)}
        bad = ~torch.isclose(lse.float(), want_lse.float(), atol=1e-3, rtol=1e-3)
        row["lse_mismatches"] = int(bad.sum())
        row["of_them_reference_minus_inf"] = int((bad & torch.isinf(want_lse)).sum())
        row["peer_lse_there"] = sorted({str(v) for v in lse[bad].flatten()[:8].tolist()})
        print(row, f"{time.time() - t0:.0f}s", flush=True)
        report["checks"].append(row)
    for shape in TIMED:
        k = portable.load("mla_decode", kv_format="bf16")
        sets = [k.make_inputs(shape, 0) for _ in range(2)]
        theirs = _time_peer(k, peer, sets, 30)          # prepared, checked, then timed as `portable bench` does
        row = {"shape": shape, "mla_decode_us": statistics.median(_time_rotating(k.run, sets, 30)),
               "flashinfer_us": statistics.median(theirs["times_us"]) if theirs["times_us"] else None,
               "flashinfer_error": theirs.get("error")}
        print(row, flush=True)
        report["timed"].append(row)
    json.dump(report, open(os.path.join(args.out, "peer_probe.json"), "w"), indent=1, default=str)


if __name__ == "__main__":
    main()
