"""Numerics of an fp8 matrix path for MLA decode (issue 40), emulated in torch on the CPU.

    python bench/mla_fp8_numerics.py [--B 4] [--L 8192] [--q-len 4] [--heads 32] [--seeds 3] [--format fp8]

The fp8 cache (e4m3fn, one fp32 scale per tensor) is multiplied as it is stored; what an fp8
path adds is the rounding of Q and of P to e4m3 before their products. Each variant is the
exact arithmetic of such a kernel (fp8 operands, fp32 products and sums, softmax in fp32),
compared with mla_reference (fp32 on the dequantized cache), on make_mla_inputs' inputs
(the style of the issue: N(0, 1) q and latents, sm_scale 1/sqrt(576)):
  bf16 Q, bf16 P        what the kernels do today on the fp8 cache (decoded to bf16)
  fp8 Q per token+head  Q scaled by each (token, head) row's amax / 448; P in bf16 (only
                        S = QK^T on fp8) or as below
  fp8 Q per tensor      one scale for all of Q
  fp8x2 Q               per (token, head) row as two e4m3 parts, hi = e4m3(q / scale) and
                        lo = e4m3(q / scale - hi), both times the one scale (mma="fp8x2")
  P to e4m3             P = exp(s - running max) in [0, 1], times 448 before the cast (so the
                        row's largest weight lands on e4m3's largest value), the row sum taken
                        over the unrounded P in fp32, as FlashAttention-3's fp8 path does
Prints the largest absolute error of the output and of the LSE against the reference, the
output's relative L2 error, and the output's largest magnitude (the tests' bar is 1e-2 absolute
on the output). The last two columns compare with what the user asked for instead: fp32
attention over the latents before they were quantized into the cache (--format fp8 or mxfp4,
the MXFP4 cache decoded exactly, as the kernels decode it to e4m3): the cache format's own
error, to which each path adds its roundings.
"""
from __future__ import annotations

import argparse
import math

import torch

from portable.formats import FP8_E4M3FN_MAX
from portable.kernels.mla_decode.reference import D_V, dequantize_kv, make_mla_inputs, mla_reference


def e4m3(x: torch.Tensor) -> torch.Tensor:
    return x.clamp(-FP8_E4M3FN_MAX, FP8_E4M3FN_MAX).to(torch.float8_e4m3fn).to(torch.float32)


def quantize_q(q: torch.Tensor, mode: str) -> torch.Tensor:
    """q (n, h, 576) fp32 -> its fp8 rounding times its scale (what the kernel multiplies with)."""
    if mode == "bf16":
        return q.to(torch.bfloat16).float()
    amax = q.abs().amax(dim=-1, keepdim=True) if mode in ("token", "token2") else q.abs().amax()
    scale = torch.where(amax > 0, amax / FP8_E4M3FN_MAX, torch.ones_like(amax))
    hi = e4m3(q / scale)
    return (hi + e4m3(q / scale - hi) if mode == "token2" else hi) * scale


def attend(q, keys, sm_scale, q_mode: str, p_mode: str):
    """One sequence -> (out, lse); query i of n sees the first L - (n - 1 - i) tokens."""
    qq = quantize_q(q.float(), q_mode)
    s = torch.einsum("nhd,ld->nhl", qq, keys) * sm_scale
    n, L = q.shape[0], keys.shape[0]
    at = torch.arange(max(n, L), device=q.device)
    visible = at[None, :L] < (L - (n - 1 - at[:n]))[:, None]
    s = s.masked_fill(~visible[:, None, :], -math.inf)
    m = s.amax(dim=-1, keepdim=True)
    p = torch.exp(s - m)
    l = p.sum(dim=-1, keepdim=True)
    pq = p if p_mode == "fp32" else p.to(torch.bfloat16).float() if p_mode == "bf16" else e4m3(p * FP8_E4M3FN_MAX) / FP8_E4M3FN_MAX
    out = torch.einsum("nhl,ld->nhd", pq, keys[:, :D_V]) / l
    return out, (m + torch.log(l)).squeeze(-1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--B", type=int, default=4)
    ap.add_argument("--L", type=int, default=8192)
    ap.add_argument("--q-len", type=int, default=4)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--format", default="fp8", choices=("fp8", "mxfp4"))
    args = ap.parse_args()
    variants = {"bf16 Q, bf16 P (today)": ("bf16", "bf16"), "bf16 Q, e4m3 P": ("bf16", "e4m3"),
                "fp8 Q per token+head, bf16 P": ("token", "bf16"),
                "fp8 Q per token+head, e4m3 P": ("token", "e4m3"), "fp8 Q per tensor, e4m3 P": ("tensor", "e4m3"),
                "fp8x2 Q per token+head, e4m3 P": ("token2", "e4m3")}
    worst = {name: [0.0, 0.0, 0.0, 0.0, 0.0] for name in variants}
    out_max = 0.0
    for seed in range(args.seeds):
        inp = make_mla_inputs([args.L] * args.B, args.q_len, args.heads, args.format, seed=seed)
        gen = torch.Generator().manual_seed(seed)              # make_mla_inputs' draws: q, then the latents
        torch.randn(inp["q"].shape, generator=gen)
        latents = torch.randn(args.B * args.L, inp["q"].shape[-1], generator=gen)
        ref, ref_lse = mla_reference(inp["q"], inp["kv"], inp["qo_indptr"], inp["kv_indptr"],
                                     kv_scale=inp["kv_scale"], sm_scale=inp["sm_scale"], out_dtype=torch.float32)
        out_max = max(out_max, ref.abs().max().item())
        keys_all = dequantize_kv(inp["kv"], inp["kv_scale"])
        rows = [(slice(b * args.q_len, (b + 1) * args.q_len), slice(b * args.L, (b + 1) * args.L)) for b in range(args.B)]
        truths = [attend(inp["q"][qs], latents[ks], inp["sm_scale"], "bf16", "fp32")[0] for qs, ks in rows]
        for name, (q_mode, p_mode) in variants.items():
            for (qs, ks), truth in zip(rows, truths):
                out, lse = attend(inp["q"][qs], keys_all[ks], inp["sm_scale"], q_mode, p_mode)
                worst[name][0] = max(worst[name][0], (out - ref[qs]).abs().max().item())
                worst[name][1] = max(worst[name][1], (lse - ref_lse[qs]).abs().max().item())
                worst[name][2] = max(worst[name][2], ((out - ref[qs]).norm() / ref[qs].norm()).item())
                worst[name][3] = max(worst[name][3], (out - truth).abs().max().item())
                worst[name][4] = max(worst[name][4], ((out - truth).norm() / truth.norm()).item())
    print(f"MLA decode {args.format} cache, B {args.B} L {args.L} q_len {args.q_len} h {args.heads}, {args.seeds} seeds; "
          f"largest |reference output| {out_max:.4f}")
    print(f"{'variant':34s} {'max |out err|':>14s} {'max |lse err|':>14s} {'rel L2 (worst)':>15s}"
          f" {'vs latents: max':>16s} {'rel L2':>8s}")
    for name, (o, s, r, to, tr) in worst.items():
        print(f"{name:34s} {o:14.2e} {s:14.2e} {r:15.2e} {to:16.2e} {tr:8.2e}")


if __name__ == "__main__":
    main()
