"""Where the bf16 heads loop's time goes (issue 40): scores="regs" (its tensor copies, and on
cp.async) and "one" as built, and the "regs" kernel with one part taken out (timing only: the
results of those are wrong), at
h = 128 (B64 L4096: two 64-row blocks a sequence) and h = 64 (B128 L4096: one block a
sequence, the same tiles a block and twice the blocks, so the same KV bytes read once).

    python bench/mla_regs_ablation.py        # on a GPU with warpgroup MMA

Each line: the call's time and the time a (block, KV tile), the blocks' tiles spread over the SMs.
"""
import torch

import portable
from portable.kernels.mla_decode import MLADecode
from portable.kernels.mla_decode.reference import make_mla_inputs
from portable.timing import time_gpu

CUTS = {"as built": [],
        "no P V": [("wg_mma_ss_bf16_n256_mn(o,", "if (false) wg_mma_ss_bf16_n256_mn(o,")],
        "no S": [("wg_mma_bf16_n64(s, qf[kk]", "if (false) wg_mma_bf16_n64(s, qf[kk]"),
                 ("wg_mma_ss_bf16_n64(s,", "if (false) wg_mma_ss_bf16_n64(s,")],
        # (tensor copies: the waits for tiles that never come go too)
        "no copies after the first 3": [("if (it + 3 < ntiles) issue(", "if (false) issue("),
                                        ("mbarrier_wait_parity(full + 8 * slot, (it / 3) & 1)",
                                         "if (it < 3) mbarrier_wait_parity(full + 8 * slot, (it / 3) & 1)")],
        "no softmax exp": [("ex2_approx(s[4 * j + 2 * h] * s_log2 - m_new)", "(s[4 * j + 2 * h] * s_log2 - m_new)"),
                           ("ex2_approx(s[4 * j + 2 * h + 1] * s_log2 - m_new)", "(s[4 * j + 2 * h + 1] * s_log2 - m_new)")]}
CUT = {"value": []}
_source = MLADecode.source


def _cut(self, target):
    src = _source(self, target)
    for n, (a, b) in enumerate(CUT["value"]):
        assert a in src or n > 0, a           # (a cut's later pieces are where the loop has them)
        src = src.replace(a, b)
    return src


MLADecode.source = _cut

if __name__ == "__main__":
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for B, L, h in ((64, 4096, 128), (128, 4096, 64)):
        inputs = make_mla_inputs([L] * B, 1, h, "bf16", seed=1, device="cuda")
        tile_blocks = B * (h // 64) * (L // 64)
        runs = [("one", "", [], "one")] + [("regs", "cp.async", CUTS[n], f"regs on cp.async, {n}") for n in ("as built", "no copies after the first 3")]
        runs += [("regs", "tensor", c, f"regs, {n}") for n, c in CUTS.items()]
        for scores, copies, cuts, name in runs:
            CUT["value"] = cuts
            knobs = {"loop": "heads", "scores": scores, **({"copies": copies} if copies else {})}
            k = portable.load("mla_decode", kv_format="bf16", tuning=knobs)
            plan = k.plan(inputs["qo_indptr"], inputs["kv_indptr"], h)
            us = time_gpu(lambda: k(**inputs, plan=plan))["median_us"]
            print(f"B{B} L{L} h{h}  {name:48s} {us:8.1f} us  {us * sms / tile_blocks:.2f} us a tile", flush=True)
