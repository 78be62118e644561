"""MXFP4 mixture of experts (issue 5): fp32 reference, input maker, cost model, torch peer.

Per token i and chosen expert j (routing given):
    g = x W_gate_j^T,  u = x W_up_j^T,  h = SiLU(g) * u,  y = h W_down_j^T,  out_i = sum_j w_ij y_j

Storage (E experts, stored widths Dh >= d_hidden and De >= d_expert, both multiples of 32):
    w13 (E, 2*De, Dh/2) uint8 + w13_scale (E, 2*De, Dh/32) uint8: rows [0, De) gate, [De, 2*De) up
    w2  (E, Dh, De/2)   uint8 + w2_scale  (E, Dh, De/32)   uint8
Only the first d_expert rows of each half of w13 and the first d_hidden/d_expert columns are
real; the rest is padding (zero weights) that the reference ignores.

Modes: "a16w4" keeps activations in bf16; "a4w4" rounds x and h through MXFP4 (per 1x32
block along the GEMM's K) before each GEMM, as FP4-native matrix units consume them.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ...errors import InputError
from ...formats import MX_BLOCK, dequantize_mxfp4, qdq_mxfp4, quantize_mxfp4

MODES = ("a16w4", "a4w4")


def moe_reference(hidden_states, w13, w13_scale, w2, w2_scale, topk_weights, topk_ids, *,
                  d_hidden: int | None = None, d_expert: int | None = None, mode: str = "a16w4") -> torch.Tensor:
    """fp32 reference -> bf16 (M, hidden_states.shape[1]); columns >= d_hidden are zero.

    hidden_states may be given at the true width d_hidden or the stored width Dh; anything
    in its padding columns is ignored (it would otherwise move the a4w4 block scales).
    A token that picks an expert twice gets that expert's output twice, once per weight.

    a4w4 is touchy: one FP4 step is 1/6 to 1/3 of a value, so h must be quantized from fp32.
    Rounding h to bf16 first flips ~0.6% of the roundings and moves the output ~3% (relative
    L2) away from this reference, beyond issue 5's 2e-2; fp32 accumulation order does not.
    """
    s = _check(hidden_states, w13, w13_scale, w2, w2_scale, topk_weights, topk_ids, d_hidden, d_expert, mode)
    x = hidden_states[:, :s.d_hidden].float()
    if mode == "a4w4":
        x = qdq_mxfp4(x)     # quantized once per token, shared by all its experts
    out = torch.zeros_like(x)
    k = topk_ids.shape[1]
    flat_ids = topk_ids.reshape(-1).long()
    flat_w = topk_weights.reshape(-1)
    for e in torch.unique(flat_ids).tolist():
        pairs = torch.nonzero(flat_ids == e).squeeze(1)      # (token, slot) pairs routed to e
        tokens = pairs // k
        gate, up, down = _expert(w13, w13_scale, w2, w2_scale, e, s, torch.float32)
        xs = x[tokens]
        h = F.silu(xs @ gate.T) * (xs @ up.T)
        if mode == "a4w4":
            h = qdq_mxfp4(h)
        out.index_add_(0, tokens, (h @ down.T) * flat_w[pairs, None])
    return _widen(out.to(torch.bfloat16), hidden_states.shape[1])


def moe_torch_bf16(hidden_states, w13, w13_scale, w2, w2_scale, topk_weights, topk_ids, *,
                   d_hidden: int | None = None, d_expert: int | None = None) -> torch.Tensor:
    """The torch path a user would write (the benchmark peer, a16w4 semantics): dequantize the
    touched experts to bf16 in one go, sort the (token, slot) pairs by expert, one bf16 matmul
    pair per expert, weighted combine accumulated in fp32 (index_add_ in bf16 would round at
    every add). There is no a4w4 variant: quantizing a bf16-rounded h flips enough FP4 roundings
    to miss the a4w4 reference by ~3% relative L2 (see moe_reference), so a user's bf16 path is
    the peer for both modes' timings, and is checked against the a16w4 reference."""
    s = _check(hidden_states, w13, w13_scale, w2, w2_scale, topk_weights, topk_ids, d_hidden, d_expert, "a16w4")
    x = hidden_states[:, :s.d_hidden]
    k = topk_ids.shape[1]
    flat_ids = topk_ids.reshape(-1).long()
    touched, counts = torch.unique(flat_ids, return_counts=True)
    order = torch.argsort(flat_ids, stable=True)
    w13_bf16 = dequantize_mxfp4(w13[touched], w13_scale[touched], torch.bfloat16)
    w2_bf16 = dequantize_mxfp4(w2[touched], w2_scale[touched], torch.bfloat16)
    De = w13.shape[1] // 2
    out = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    start = 0
    for i, n in enumerate(counts.tolist()):
        pairs = order[start:start + n]
        start += n
        tokens = pairs // k
        gu = x[tokens] @ w13_bf16[i, :, :s.d_hidden].T
        h = F.silu(gu[:, :s.d_expert]) * gu[:, De:De + s.d_expert]
        y = h @ w2_bf16[i, :s.d_hidden, :s.d_expert].T
        out.index_add_(0, tokens, y.float() * topk_weights.reshape(-1)[pairs, None])
    return _widen(out.to(torch.bfloat16), hidden_states.shape[1])


def moe_cost(M: int, E: int, d_hidden: int, d_expert: int, topk_ids: torch.Tensor) -> dict:
    """FLOPs and bytes that must move for one call, counting only the experts the batch touches.

    bytes = per touched expert, FP4 bytes + E8M0 scale bytes of w13 (2*d_expert rows of
    d_hidden) and w2 (d_hidden rows of d_expert), + bf16 activations in and out (M x d_hidden each).
    flops = 2 * (2*d_expert*d_hidden + d_hidden*d_expert) per routed (token, slot) pair: a token
    that repeats an expert is counted once per slot, as a kernel computes it.
    Pass stored (padded) sizes to count what a kernel reads, true sizes for the useful work.
    """
    if not isinstance(topk_ids, torch.Tensor) or topk_ids.dim() != 2 or topk_ids.shape[0] != M:
        got = tuple(topk_ids.shape) if isinstance(topk_ids, torch.Tensor) else type(topk_ids).__name__
        raise InputError(f"topk_ids: expected a tensor of shape ({M}, k), got {got}")
    if topk_ids.numel() and not (0 <= int(topk_ids.min()) and int(topk_ids.max()) < E):
        raise InputError(f"topk_ids: expected expert ids in [0, {E}), got [{int(topk_ids.min())}, {int(topk_ids.max())}]")
    touched = int(torch.unique(topk_ids).numel())
    pairs = topk_ids.numel()
    w13 = 2 * d_expert * (_ceil(d_hidden, 2) + _ceil(d_hidden, MX_BLOCK))
    w2 = d_hidden * (_ceil(d_expert, 2) + _ceil(d_expert, MX_BLOCK))
    return {"flops": 2 * pairs * 3 * d_expert * d_hidden,
            "bytes": touched * (w13 + w2) + 2 * M * d_hidden * 2,
            "experts_touched": touched}


def make_moe_inputs(M: int, E: int, d_hidden: int, d_expert: int, topk: int, seed: int = 0, *,
                    shared_experts: int = 0, active_experts: int | None = None, repeat_experts: bool = False,
                    pad_to: int | None = None, device="cpu") -> dict:
    """Fresh random MXFP4 experts and routing; keys match moe_reference's arguments.

    Weights are Gaussian with std 1/sqrt(fan_in), then quantized, so outputs are O(1).
    Routing: each token picks `topk` distinct routed experts among experts 0..E-shared_experts-1
    (weights: softmax of random logits), then every shared expert (the last `shared_experts`
    ids) is appended as a column with weight 1.0, so topk_ids is (M, topk + shared_experts).
      active_experts: route only among this many randomly chosen routed experts, so the others
                      receive no token (routing at small M leaves some empty anyway).
      repeat_experts: every even-indexed token's last routed slot repeats its first one.
      pad_to:         store d_hidden and d_expert rounded up to this multiple (of 32), with
                      zero weights and zero hidden-state columns; the true sizes are returned.
    """
    routed = E - shared_experts
    pool_size = routed if active_experts is None else active_experts
    if not 0 <= shared_experts < E:
        raise InputError(f"shared_experts: expected 0 <= shared_experts < E = {E}, got {shared_experts}")
    if not topk <= pool_size <= routed:
        raise InputError(f"active_experts: expected topk = {topk} <= active_experts <= {routed} routed experts, got {pool_size}")
    if repeat_experts and topk < 2:
        raise InputError(f"repeat_experts: needs topk >= 2 to repeat an expert within a token, got topk = {topk}")
    Dh, De = _padded(d_hidden, pad_to, "d_hidden"), _padded(d_expert, pad_to, "d_expert")
    gen = torch.Generator(device=device).manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=gen, device=device)

    w13 = torch.empty(E, 2 * De, Dh // 2, dtype=torch.uint8, device=device)
    w13_scale = torch.empty(E, 2 * De, Dh // MX_BLOCK, dtype=torch.uint8, device=device)
    w2 = torch.empty(E, Dh, De // 2, dtype=torch.uint8, device=device)
    w2_scale = torch.empty(E, Dh, De // MX_BLOCK, dtype=torch.uint8, device=device)
    for e in range(E):      # one expert at a time: the big shapes would not fit as fp32 all at once
        dense = torch.zeros(2 * De, Dh, device=device)
        dense[:d_expert, :d_hidden] = randn(d_expert, d_hidden) / d_hidden ** 0.5
        dense[De:De + d_expert, :d_hidden] = randn(d_expert, d_hidden) / d_hidden ** 0.5
        w13[e], w13_scale[e] = quantize_mxfp4(dense)
        dense = torch.zeros(Dh, De, device=device)
        dense[:d_hidden, :d_expert] = randn(d_hidden, d_expert) / d_expert ** 0.5
        w2[e], w2_scale[e] = quantize_mxfp4(dense)

    hidden = torch.zeros(M, Dh, device=device)
    hidden[:, :d_hidden] = randn(M, d_hidden)
    ids, weights = make_routing(M, E, topk, gen, shared_experts=shared_experts, active_experts=active_experts,
                                repeat_experts=repeat_experts)
    return {"hidden_states": hidden.to(torch.bfloat16), "w13": w13, "w13_scale": w13_scale,
            "w2": w2, "w2_scale": w2_scale, "topk_weights": weights, "topk_ids": ids,
            "d_hidden": d_hidden, "d_expert": d_expert}


def make_routing(M: int, E: int, topk: int, gen: torch.Generator, *, shared_experts: int = 0,
                 active_experts: int | None = None, repeat_experts: bool = False):
    """(topk_ids int32, topk_weights fp32), both (M, topk + shared_experts), on gen's device:
    make_moe_inputs's routing (see there) on its own."""
    device = gen.device
    routed = E - shared_experts
    pool_size = routed if active_experts is None else active_experts
    pool = torch.randperm(routed, generator=gen, device=device)[:pool_size]
    ids = pool[torch.rand(M, pool_size, generator=gen, device=device).argsort(dim=1)[:, :topk]]
    if repeat_experts:
        ids[::2, topk - 1] = ids[::2, 0]
    weights = torch.softmax(torch.randn(M, topk, generator=gen, device=device), dim=1)
    if shared_experts:
        shared = torch.arange(routed, E, device=device).expand(M, -1)
        ids = torch.cat([ids, shared], dim=1)
        weights = torch.cat([weights, torch.ones(M, shared_experts, device=device)], dim=1)
    return ids.to(torch.int32).contiguous(), weights.float().contiguous()


# --- helpers -----------------------------------------------------------------------------------

class _Sizes:
    def __init__(self, E, Dh, De, d_hidden, d_expert):
        self.E, self.Dh, self.De, self.d_hidden, self.d_expert = E, Dh, De, d_hidden, d_expert


def _expert(w13, w13_scale, w2, w2_scale, e: int, s: _Sizes, dtype):
    """Dequantized (gate, up, down) of expert e at the true sizes."""
    w = dequantize_mxfp4(w13[e], w13_scale[e], dtype)
    down = dequantize_mxfp4(w2[e], w2_scale[e], dtype)
    return (w[:s.d_expert, :s.d_hidden], w[s.De:s.De + s.d_expert, :s.d_hidden],
            down[:s.d_hidden, :s.d_expert])


def _widen(out: torch.Tensor, width: int) -> torch.Tensor:
    return F.pad(out, (0, width - out.shape[1])) if width > out.shape[1] else out


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _padded(n: int, pad_to: int | None, name: str) -> int:
    if pad_to is None:
        if n % MX_BLOCK:
            raise InputError(f"{name}: expected a multiple of {MX_BLOCK} (or pass pad_to), got {n}")
        return n
    if pad_to <= 0 or pad_to % MX_BLOCK:
        raise InputError(f"pad_to: expected a positive multiple of {MX_BLOCK}, got {pad_to}")
    return _ceil(n, pad_to) * pad_to


def _tensor(name, t, dtype, dim):
    if not isinstance(t, torch.Tensor):
        raise InputError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if t.dtype is not dtype:
        raise InputError(f"{name}: expected dtype {dtype}, got {t.dtype}")
    if t.dim() != dim:
        raise InputError(f"{name}: expected {dim} dims, got shape {tuple(t.shape)}")


def _shape(name, t, want):
    if tuple(t.shape) != tuple(want):
        raise InputError(f"{name}: expected shape {tuple(want)}, got {tuple(t.shape)}")


def _check(hidden_states, w13, w13_scale, w2, w2_scale, topk_weights, topk_ids, d_hidden, d_expert, mode,
           check_ids: bool = True) -> _Sizes:
    """Types, shapes and devices; with check_ids also the ids' range (a host read: a device sync)."""
    if mode not in MODES:
        raise InputError(f"mode: expected one of {', '.join(MODES)}, got {mode!r}")
    _tensor("hidden_states", hidden_states, torch.bfloat16, 2)
    for name, t in (("w13", w13), ("w13_scale", w13_scale), ("w2", w2), ("w2_scale", w2_scale)):
        _tensor(name, t, torch.uint8, 3)
    _tensor("topk_weights", topk_weights, torch.float32, 2)
    _tensor("topk_ids", topk_ids, torch.int32, 2)
    E, two_De, half_Dh = w13.shape
    Dh, De = half_Dh * 2, two_De // 2
    if two_De % 2 or De % MX_BLOCK or Dh % MX_BLOCK:
        raise InputError(f"w13: expected shape (E, 2*De, Dh/2) with De and Dh multiples of {MX_BLOCK}, "
                         f"got {tuple(w13.shape)}")
    _shape("w13_scale", w13_scale, (E, 2 * De, Dh // MX_BLOCK))
    _shape("w2", w2, (E, Dh, De // 2))
    _shape("w2_scale", w2_scale, (E, Dh, De // MX_BLOCK))
    d_hidden = Dh if d_hidden is None else d_hidden
    d_expert = De if d_expert is None else d_expert
    if not 0 < d_hidden <= Dh:
        raise InputError(f"d_hidden: expected 0 < d_hidden <= stored width {Dh}, got {d_hidden}")
    if not 0 < d_expert <= De:
        raise InputError(f"d_expert: expected 0 < d_expert <= stored width {De}, got {d_expert}")
    M, width = hidden_states.shape
    if width not in (d_hidden, Dh):
        raise InputError(f"hidden_states: expected shape ({M}, {d_hidden}) or padded ({M}, {Dh}), got {(M, width)}")
    _shape("topk_weights", topk_weights, topk_ids.shape)
    if topk_ids.shape[0] != M:
        raise InputError(f"topk_ids: expected {M} rows like hidden_states, got shape {tuple(topk_ids.shape)}")
    if check_ids and topk_ids.numel() and not (0 <= int(topk_ids.min()) and int(topk_ids.max()) < E):
        raise InputError(f"topk_ids: expected expert ids in [0, {E}), got [{int(topk_ids.min())}, {int(topk_ids.max())}]")
    for name, t in (("w13", w13), ("w13_scale", w13_scale), ("w2", w2), ("w2_scale", w2_scale),
                    ("topk_weights", topk_weights), ("topk_ids", topk_ids)):
        if t.device != hidden_states.device:
            raise InputError(f"{name}: expected a tensor on {hidden_states.device} like hidden_states, got {t.device}")
    return _Sizes(E, Dh, De, d_hidden, d_expert)
