"""Where a heads loop's time goes (issue 40): the loop as built, then the same kernel with one
part taken out (timing only: the results of the cut kernels are wrong), through
bench/source_edits.py.

    python bench/mla_ablation.py regs    # the bf16 cache's scores="regs" loop (and "one", and
                                         # "regs" on cp.async) at h = 128 (B64 L4096: two
                                         # 64-row blocks a sequence) and h = 64 (B128 L4096: one
                                         # block a sequence, the same KV bytes read once)
    python bench/mla_ablation.py mxfp4   # the MXFP4 cache on fp8 products' two-warpgroup loop
                                         # (scores="one": one Q part, two decoding
                                         # warpgroups) at B128 L8192 q4 h32 and
                                         # B64 L4096 h128, beside bf16 and the fp8 cache's
                                         # one-Q-part loop (which has no decode)
    python bench/mla_ablation.py mxregs  # MXFP4 on the regs loop unpaired (scores="regs",
                                         # pairs=1: a fourth, decoding warpgroup) at the
                                         # same shapes
    python bench/mla_ablation.py fp8h16  # the fp8 cache at 16 query rows a sequence (B128 q1
                                         # h16, L 8192 and 1024; two Q parts): the regs loop
                                         # (48 of the block's 64 rows padding) and its "swap"
                                         # scorer, beside bf16 and the fragments loop

Each line: the call's time and the time a (block, KV tile), the blocks' tiles spread over the SMs.
"""
import sys

import torch

import portable
from portable.kernels.mla_decode.reference import make_mla_inputs
from portable.timing import time_gpu

import source_edits

NO_EXP2 = [("ex2_approx(s[4 * j + 2 * h] * s_log2 - m_new)", "(s[4 * j + 2 * h] * s_log2 - m_new)"),
           ("ex2_approx(s[4 * j + 2 * h + 1] * s_log2 - m_new)", "(s[4 * j + 2 * h + 1] * s_log2 - m_new)")]
REGS_CUTS = {
    "as built": [],
    "no P V": [("wg_mma_ss_bf16_n256_mn(o,", "if (false) wg_mma_ss_bf16_n256_mn(o,")],
    "no S": [("wg_mma_bf16_n64(s, qf[kk]", "if (false) wg_mma_bf16_n64(s, qf[kk]"),
             ("wg_mma_ss_bf16_n64(s,", "if (false) wg_mma_ss_bf16_n64(s,")],
    # (tensor copies: the waits for tiles that never come go too)
    "no copies after the first 3": [("if (it + 3 < ntiles) issue(", "if (false) issue("),
                                    ("mbarrier_wait_parity(full + 8 * slot, (it / 3) & 1)",
                                     "if (it < 3) mbarrier_wait_parity(full + 8 * slot, (it / 3) & 1)")],
    "no exp2": NO_EXP2,
}
NO_DECODE = [("decode(t, wg - 1);", "if (false) decode(t, wg - 1);")]
NO_VT = [("transpose(((", "if (false) transpose(((")]
MX_CUTS = {
    "as built": [],
    "no decode": NO_DECODE,
    "no V^T": NO_VT,
    "no decode, no V^T": NO_DECODE + NO_VT,
    "no S": [("wg_mma_ss_e4m3_n64(s,", "if (false) wg_mma_ss_e4m3_n64(s,")],
    "no P V": [("wg_mma_ss_e4m3_n256(o,", "if (false) wg_mma_ss_e4m3_n256(o,")],
    "no copies after the first 2": [("if (t + 2 < ntiles) issue(", "if (false) issue(")],
    "no exp2": [("ex2_approx(s[4 * j + 2 * h + i] - m_new)", "(s[4 * j + 2 * h + i] - m_new)")],
}
MXREGS_CUTS = {
    "as built": [],
    # (tensor copies: the waits for tiles that never come go too)
    "no copies after the first 3": [("if (t + 3 < ntiles) refill(", "if (false) refill("),
                                    ("landed(t);", "if (t < 3) landed(t);")],
    "no decode": [("decode(t, 0);", "if (false) decode(t, 0);"), ("decode(t, 1);", "if (false) decode(t, 1);")],
    "no V^T": [("transpose(t % 2,", "if (false) transpose(t % 2,")],
    "no S": [("wg_mma_e4m3_n64(s,", "if (false) wg_mma_e4m3_n64(s,")],
    "no P V": [("wg_mma_ss_e4m3_n128(", "if (false) wg_mma_ss_e4m3_n128(")],
}
FP8REGS_CUTS = {
    "as built": [],
    "no S": [("wg_mma_e4m3_n64(s,", "if (false) wg_mma_e4m3_n64(s,"), ("wg_mma_ss_e4m3_n64(s,", "if (false) wg_mma_ss_e4m3_n64(s,")],
    "no P V": [("wg_mma_ss_e4m3_n256(o,", "if (false) wg_mma_ss_e4m3_n256(o,")],
    "no V^T": [("transpose(t % 3,", "if (false) transpose(t % 3,")],
    # (the waits for tiles that never come go too)
    "no copies after the first 3": [("if (it + 3 < ntiles) issue(", "if (false) issue("),
                                    ("landed(it);", "if (it < 3) landed(it);"), ("landed(t);", "if (t < 3) landed(t);")],
    "no exp2": [("ex2_approx(s[4 * j + 2 * h + i] - m_new)", "(s[4 * j + 2 * h + i] - m_new)")],
}
FP8REGS_CUTS["only the copies"] = FP8REGS_CUTS["no S"] + FP8REGS_CUTS["no P V"] + FP8REGS_CUTS["no V^T"]
SWAP_CUTS = {                   # (the fp8 cache's "swap" scorer, fp8x2: S^T on 64 x 32 MMAs)
    "as built": [],
    "no S": [("wg_mma_ss_e4m3_n32(s,", "if (false) wg_mma_ss_e4m3_n32(s,")],
    "no P V": [("wg_mma_ss_e4m3_n16(*reinterpret_cast<float (*)[8]>(o", "if (false) wg_mma_ss_e4m3_n16(*reinterpret_cast<float (*)[8]>(o")],
    "no V^T": FP8REGS_CUTS["no V^T"],
    "no copies after the first 3": [("if (it + 4 < ntiles) issue(", "if (false) issue("), ("if (3 < ntiles) issue(", "if (false) issue("),
                                    ("landed(it);", "if (it < 3) landed(it);"), ("landed(t);", "if (t < 3) landed(t);")],
}
SWAP_CUTS["only the copies"] = SWAP_CUTS["no S"] + SWAP_CUTS["no P V"] + SWAP_CUTS["no V^T"]
CUTS = {"regs": REGS_CUTS, "mxfp4": MX_CUTS, "mxregs": MXREGS_CUTS, "fp8h16": FP8REGS_CUTS, "swap": SWAP_CUTS}     # (by the names the command line takes)


def regs_runs():
    heads = {"loop": "heads"}
    runs = [("bf16", "auto", {**heads, "scores": "one"}, [], "one")]
    runs += [("bf16", "auto", {**heads, "scores": "regs", "copies": "cp.async"}, REGS_CUTS[n], f"regs on cp.async, {n}")
             for n in ("as built", "no copies after the first 3")]
    runs += [("bf16", "auto", {**heads, "scores": "regs", "copies": "tensor"}, c, f"regs, {n}") for n, c in REGS_CUTS.items()]
    return ((64, 4096, 1, 128), (128, 4096, 1, 64)), runs


def mxfp4_runs():
    runs = [("bf16", "auto", {}, [], "bf16"), ("fp8", "fp8", {}, [], "fp8 cache, one Q part")]
    runs += [("mxfp4", "auto", {"scores": "one"}, c, f"MXFP4, {n}") for n, c in MX_CUTS.items()]
    return ((128, 8192, 4, 32), (64, 4096, 1, 128)), runs


def mxregs_runs():
    runs = [("bf16", "auto", {}, [], "bf16"), ("mxfp4", "auto", {"scores": "one"}, [], "MXFP4 scores one")]
    runs += [("mxfp4", "fp8", {"scores": "regs", "pairs": 1}, c, f"MXFP4 regs, {n}") for n, c in MXREGS_CUTS.items()]
    return ((128, 8192, 4, 32), (64, 4096, 1, 128)), runs


def fp8h16_runs():
    runs = [("bf16", "auto", {}, [], "bf16"), ("fp8", "auto", {"loop": "fragments"}, [], "fp8 fragments loop"),
            ("fp8", "fp8", {"scores": "regs"}, [], "fp8 regs, one Q part")]
    runs += [("fp8", "auto", {"scores": "regs"}, c, f"fp8 regs, {n}") for n, c in FP8REGS_CUTS.items()]
    runs += [("fp8", "auto", {"scores": "swap"}, c, f"fp8 swap, {n}") for n, c in SWAP_CUTS.items()]
    return ((128, 8192, 1, 16), (128, 1024, 1, 16)), runs


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "regs"
    shapes, runs = {"regs": regs_runs, "mxfp4": mxfp4_runs, "mxregs": mxregs_runs, "fp8h16": fp8h16_runs}[which]()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for B, L, q_len, h in shapes:
        tile_blocks = B * max(1, q_len * h // 64) * (L // 64)
        for fmt, mma, knobs, cuts, name in runs:
            source_edits.edit(cuts)
            inputs = make_mla_inputs([L] * B, q_len, h, fmt, seed=1, device="cuda")
            k = portable.load("mla_decode", kv_format=fmt, mma=mma, tuning=knobs)
            plan = k.plan(inputs["qo_indptr"], inputs["kv_indptr"], h)
            us = time_gpu(lambda: k(**inputs, plan=plan))["median_us"]
            print(f"B{B} L{L} q{q_len} h{h}  {name:36s} {us:8.1f} us  {us * sms / tile_blocks:.2f} us a tile", flush=True)
