"""MLA decode (issue 4): fp32 reference, ragged input maker, paging, cost model, torch peer.

DeepSeek absorbed form: one shared latent KV head. Keys are the 576-dim KV rows (512 latent
+ 64 rope), values the first 512 dims of the same rows.

KV storage, chosen by kv's dtype (rows are always 2-D, one row per token slot):
    bf16   kv (rows, 576) bfloat16,         kv_scale None
    fp8    kv (rows, 576) float8_e4m3fn,    kv_scale one fp32 per tensor (value = fp8 * scale)
    mxfp4  kv (rows, 288) uint8 (E2M1 x2),  kv_scale (rows, 18) uint8 E8M0
Batching: sequence b owns queries qo_indptr[b]..qo_indptr[b+1] and has
L_b = kv_indptr[b+1] - kv_indptr[b] KV tokens. Without a page table those are rows
kv_indptr[b].. of kv; with kv_indices (B, max_pages) int32 and page_size P, token t of
sequence b is row kv_indices[b, t // P] * P + t % P (kv then holds num_pages * P rows).
Causal: query i of n sees the first L_b - (n - 1 - i) tokens (none if that is <= 0).
LSE is the natural log of sum(exp(sm_scale * q.k)) over the visible tokens.
"""
from __future__ import annotations

import math

import torch

from ...errors import InputError
from ...formats import MX_BLOCK, dequantize_fp8, dequantize_mxfp4, quantize_fp8_e4m3, quantize_mxfp4

D_QK = 576      # 512 latent + 64 rope
D_V = 512
KV_FORMATS = ("bf16", "fp8", "mxfp4")
KV_ROW_BYTES = {"bf16": D_QK * 2, "fp8": D_QK, "mxfp4": D_QK // 2 + D_QK // MX_BLOCK}


def kv_format_of(kv: torch.Tensor) -> str:
    """'bf16', 'fp8' or 'mxfp4' from the cache tensor's dtype."""
    formats = {torch.bfloat16: "bf16", torch.float8_e4m3fn: "fp8", torch.uint8: "mxfp4"}
    if not isinstance(kv, torch.Tensor) or kv.dtype not in formats:
        got = kv.dtype if isinstance(kv, torch.Tensor) else type(kv).__name__
        raise InputError(f"kv: expected dtype bfloat16, float8_e4m3fn or uint8 (packed MXFP4), got {got}")
    return formats[kv.dtype]


def dequantize_kv(kv: torch.Tensor, kv_scale=None, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """KV rows in any storage format -> (rows, 576) in `dtype`."""
    fmt = kv_format_of(kv)
    if fmt == "bf16":
        return kv.to(dtype)
    if fmt == "fp8":
        if kv_scale is None:
            raise InputError("kv_scale: expected the per-tensor fp32 scale of an fp8 KV cache, got None")
        return dequantize_fp8(kv, kv_scale, dtype)
    if not isinstance(kv_scale, torch.Tensor):
        raise InputError(f"kv_scale: expected uint8 E8M0 scales (rows, {D_QK // MX_BLOCK}) for an MXFP4 KV cache, "
                         f"got {type(kv_scale).__name__}")
    return dequantize_mxfp4(kv, kv_scale, dtype)


def mla_reference(q, kv, qo_indptr, kv_indptr, *, kv_scale=None, kv_indices=None, page_size: int = 1,
                  sm_scale: float | None = None, out_dtype: torch.dtype = torch.bfloat16) -> tuple[torch.Tensor, torch.Tensor]:
    """fp32 reference on the dequantized cache -> (out (total_q, h, 512) in out_dtype, lse fp32 (total_q, h)).
    Compare a kernel's bf16 output with out_dtype=torch.float32: rounding the reference to bf16
    too would double the rounding error being measured.

    A query that sees no KV token (KV length 0, or fewer tokens than the causal offset) gets
    zeros and LSE -inf, never NaN.
    """
    sm_scale = _check(q, kv, qo_indptr, kv_indptr, kv_scale, kv_indices, page_size, sm_scale)
    total_q, h, _ = q.shape
    out = torch.zeros(total_q, h, D_V, device=q.device)
    lse = torch.full((total_q, h), -math.inf, device=q.device)
    qo, kvp = qo_indptr.tolist(), kv_indptr.tolist()
    for b in range(len(qo) - 1):
        n, L = qo[b + 1] - qo[b], kvp[b + 1] - kvp[b]
        if n == 0 or L == 0:
            continue
        rows = _kv_rows(kv_indptr, kv_indices, page_size, b, L)
        keys = _gather_dequant(kv, kv_scale, rows, torch.float32)          # (L, 576)
        scores = torch.einsum("nhd,ld->nhl", q[qo[b]:qo[b + 1]].float(), keys) * sm_scale
        visible = _causal_mask(n, L, q.device)                            # (n, L)
        scores = scores.masked_fill(~visible[:, None, :], -math.inf)
        seq_lse = torch.logsumexp(scores, dim=-1)                         # -inf where nothing is visible
        # where() keeps the exp(-inf - -inf) = NaN of fully masked rows out of the result
        p = torch.where(visible[:, None, :], torch.exp(scores - seq_lse[..., None]), 0.0)
        out[qo[b]:qo[b + 1]] = torch.einsum("nhl,ld->nhd", p, keys[:, :D_V])
        lse[qo[b]:qo[b + 1]] = seq_lse
    return out.to(out_dtype), lse


def mla_torch_bf16(q, kv, qo_indptr, kv_indptr, *, kv_scale=None, kv_indices=None, page_size: int = 1,
                   sm_scale: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The obvious padded-batched torch path a user would write (the benchmark peer): gather the
    cache into a (B, L_max, 576) bf16 tensor (dequantizing fp8/MXFP4 to bf16 on the way), one bf16
    bmm for the scores, masked fp32 softmax, one bf16 bmm for the output."""
    sm_scale = _check(q, kv, qo_indptr, kv_indptr, kv_scale, kv_indices, page_size, sm_scale)
    total_q, h, _ = q.shape
    dev = q.device
    q_lens = (qo_indptr[1:] - qo_indptr[:-1]).long()
    kv_lens = (kv_indptr[1:] - kv_indptr[:-1]).long()
    B = q_lens.numel()
    n_max, L_max = int(q_lens.max()) if B else 0, int(kv_lens.max()) if B else 0
    out = torch.zeros(total_q, h, D_V, dtype=torch.bfloat16, device=dev)
    lse = torch.full((total_q, h), -math.inf, device=dev)
    if n_max == 0 or L_max == 0:
        return out, lse

    t = torch.arange(L_max, device=dev)
    kv_valid = t < kv_lens[:, None]                                        # (B, L_max)
    if kv_indices is None:
        rows = kv_indptr[:-1, None].long() + t
    else:
        rows = kv_indices.long().gather(1, (t // page_size).clamp(max=kv_indices.shape[1] - 1).expand(B, -1))
        rows = rows * page_size + t % page_size
    keys = _gather_dequant(kv, kv_scale, torch.where(kv_valid, rows, 0).reshape(-1), torch.bfloat16)
    keys = keys.reshape(B, L_max, D_QK)

    i = torch.arange(n_max, device=dev)
    q_valid = i < q_lens[:, None]                                          # (B, n_max)
    q_rows = torch.where(q_valid, qo_indptr[:-1, None].long() + i, 0)
    qp = q[q_rows.reshape(-1)].reshape(B, n_max * h, D_QK)

    scores = torch.bmm(qp, keys.transpose(1, 2)).float() * sm_scale        # (B, n_max*h, L_max)
    # causal: query i sees the first L - (n - 1 - i) tokens
    seen = kv_lens[:, None] - (q_lens[:, None] - 1 - i)                    # (B, n_max)
    mask = t[None, None, :] < seen[:, :, None]                             # (B, n_max, L_max)
    mask = mask.repeat_interleave(h, dim=1)
    scores = scores.masked_fill(~mask, -math.inf)
    seq_lse = torch.logsumexp(scores, dim=-1)
    p = torch.softmax(scores, dim=-1).nan_to_num(0.0).to(torch.bfloat16)  # fully masked rows -> 0
    o = torch.bmm(p, keys[:, :, :D_V]).reshape(B, n_max, h, D_V)
    sel = q_rows[q_valid]
    out[sel] = o[q_valid]
    lse[sel] = seq_lse.reshape(B, n_max, h)[q_valid]
    return out, lse


def mla_cost(qo_indptr, kv_indptr, h: int, kv_format: str = "bf16", with_lse: bool = False) -> dict:
    """FLOPs and bytes that must move for one decode call.

    bytes = every sequence's KV rows once (not per head) in the storage format, scales included
            (+ 4 for fp8's per-tensor scale), + bf16 q (h x 576) and bf16 output (h x 512) per
            query, + fp32 LSE per (query, head) if with_lse.
    flops = 2 * h * (576 + 512) per (query, visible KV token): QK^T plus PV, causal mask applied.
    """
    if kv_format not in KV_FORMATS:
        raise InputError(f"kv_format: expected one of {', '.join(KV_FORMATS)}, got {kv_format!r}")
    qo, kvp = _as_list("qo_indptr", qo_indptr), _as_list("kv_indptr", kv_indptr)
    if len(qo) != len(kvp):
        raise InputError(f"kv_indptr: expected {len(qo)} entries like qo_indptr, got {len(kvp)}")
    visible = 0
    for b in range(len(qo) - 1):
        n, L = qo[b + 1] - qo[b], kvp[b + 1] - kvp[b]
        visible += sum(max(L - (n - 1 - i), 0) for i in range(n))
    total_q, total_kv = qo[-1] - qo[0], kvp[-1] - kvp[0]
    bytes_ = total_kv * KV_ROW_BYTES[kv_format] + (4 if kv_format == "fp8" else 0)
    bytes_ += total_q * h * (D_QK * 2 + D_V * 2 + (4 if with_lse else 0))
    return {"flops": 2 * h * (D_QK + D_V) * visible, "bytes": bytes_}


def make_mla_inputs(kv_lens, q_lens=1, h: int = 16, kv_format: str = "bf16", seed: int = 0, *,
                    page_size: int | None = None, sm_scale: float | None = None, device="cpu") -> dict:
    """Ragged random batch; keys match mla_reference's arguments.

    kv_lens: one KV length per sequence (0 allowed); q_lens: an int for all sequences or one per
    sequence. q and the KV latents are N(0, 1) before quantization, so with the default
    sm_scale the scores have unit spread. page_size: store the cache paged (see page_kv).
    """
    if kv_format not in KV_FORMATS:
        raise InputError(f"kv_format: expected one of {', '.join(KV_FORMATS)}, got {kv_format!r}")
    kv_lens = list(kv_lens)
    q_lens = [q_lens] * len(kv_lens) if isinstance(q_lens, int) else list(q_lens)
    if len(q_lens) != len(kv_lens) or min(q_lens + kv_lens, default=0) < 0:
        raise InputError(f"q_lens: expected one non-negative length per sequence ({len(kv_lens)}), got {q_lens}")
    gen = torch.Generator(device=device).manual_seed(seed)
    qo_indptr = torch.tensor([0] + q_lens, device=device).cumsum(0).to(torch.int32)
    kv_indptr = torch.tensor([0] + kv_lens, device=device).cumsum(0).to(torch.int32)
    q = torch.randn(sum(q_lens), h, D_QK, generator=gen, device=device).to(torch.bfloat16)
    latents = torch.randn(sum(kv_lens), D_QK, generator=gen, device=device)
    if kv_format == "bf16":
        kv, kv_scale = latents.to(torch.bfloat16), None
    elif kv_format == "fp8":
        kv, kv_scale = quantize_fp8_e4m3(latents)
    else:
        kv, kv_scale = quantize_mxfp4(latents)
    kv_indices = None
    if page_size is not None:
        kv, kv_scale, kv_indices = page_kv(kv, kv_scale, kv_indptr, page_size, seed=seed + 1)
    return {"q": q, "kv": kv, "qo_indptr": qo_indptr, "kv_indptr": kv_indptr, "kv_scale": kv_scale,
            "kv_indices": kv_indices, "page_size": page_size or 1,
            "sm_scale": 1 / math.sqrt(D_QK) if sm_scale is None else sm_scale}


def page_kv(kv, kv_scale, kv_indptr, page_size: int, seed: int = 0, spare_pages: int = 2):
    """A contiguous cache -> (paged kv, paged kv_scale, kv_indices (B, max_pages) int32).

    Pages are handed out in random order with `spare_pages` unused ones, and every slot no
    token owns (page tails, spare pages) holds NaN (bf16/fp8 NaN, E8M0 scale 0xFF), so a
    kernel that reads past a sequence's length poisons its output instead of passing.
    Table entries past a sequence's last page are 0: a valid page, never to be read.
    """
    fmt = kv_format_of(kv)
    if not (isinstance(page_size, int) and page_size >= 1):
        raise InputError(f"page_size: expected an int >= 1, got {page_size!r}")
    lens = (kv_indptr[1:] - kv_indptr[:-1]).tolist()
    pages = [_ceil(L, page_size) for L in lens]
    num_pages = sum(pages) + spare_pages
    gen = torch.Generator().manual_seed(seed)
    order = torch.randperm(num_pages, generator=gen).tolist()
    kv_indices = torch.zeros(len(lens), max(pages, default=0) or 1, dtype=torch.int32)
    src, dst, next_page = [], [], 0
    for b, (L, start) in enumerate(zip(lens, kv_indptr[:-1].tolist())):
        for j in range(pages[b]):
            kv_indices[b, j] = order[next_page]
            next_page += 1
        t = torch.arange(L)
        src.append(start + t)
        dst.append(kv_indices[b, t // page_size].long() * page_size + t % page_size)
    none = [torch.zeros(0, dtype=torch.long)]
    src, dst = torch.cat(src + none).to(kv.device), torch.cat(dst + none).to(kv.device)

    def scatter(rows, nan_bits, as_dtype):
        # copy through an integer view: float8 tensors support few ops, and NaN is a bit pattern
        rows = rows.view(as_dtype)
        paged = torch.full((num_pages * page_size, rows.shape[1]), nan_bits, dtype=as_dtype, device=kv.device)
        paged[dst] = rows[src]
        return paged

    kv_indices = kv_indices.to(kv.device)
    if fmt == "bf16":       # 0x7FC0: bf16 quiet NaN
        return scatter(kv, 0x7FC0, torch.int16).view(torch.bfloat16), None, kv_indices
    if fmt == "fp8":        # 0x7F: e4m3fn NaN
        return scatter(kv, 0x7F, torch.uint8).view(torch.float8_e4m3fn), kv_scale, kv_indices
    return scatter(kv, 0, torch.uint8), scatter(kv_scale, 0xFF, torch.uint8), kv_indices


# --- helpers -----------------------------------------------------------------------------------

def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _causal_mask(n: int, L: int, device) -> torch.Tensor:
    """(n, L) bool: query i of n sees the first L - (n - 1 - i) tokens."""
    seen = L - (n - 1 - torch.arange(n, device=device))
    return torch.arange(L, device=device)[None, :] < seen[:, None]


def _kv_rows(kv_indptr, kv_indices, page_size: int, b: int, L: int) -> torch.Tensor:
    """Storage rows of sequence b's tokens 0..L-1."""
    t = torch.arange(L, device=kv_indptr.device)
    if kv_indices is None:
        return int(kv_indptr[b]) + t
    return kv_indices[b, t // page_size].long() * page_size + t % page_size


def _gather_dequant(kv, kv_scale, rows, dtype):
    """Gather storage rows (as raw bytes, which every dtype supports) and dequantize them."""
    fmt = kv_format_of(kv)
    raw = kv.view(torch.uint8)[rows]
    if fmt == "bf16":
        return raw.view(torch.bfloat16).to(dtype)
    if fmt == "fp8":
        return dequantize_fp8(raw.view(torch.float8_e4m3fn), kv_scale, dtype)
    return dequantize_mxfp4(raw, kv_scale[rows], dtype)


def _as_list(name, indptr) -> list[int]:
    values = indptr.tolist() if isinstance(indptr, torch.Tensor) else list(indptr)
    if not values or values[0] != 0 or any(b < a for a, b in zip(values, values[1:])):
        raise InputError(f"{name}: expected a non-decreasing offsets array starting at 0 (B+1 entries), got {values[:8]}")
    return values


def _check(q, kv, qo_indptr, kv_indptr, kv_scale, kv_indices, page_size, sm_scale) -> float:
    if not isinstance(q, torch.Tensor) or q.dtype is not torch.bfloat16 or q.dim() != 3 or q.shape[2] != D_QK:
        got = f"{q.dtype} {tuple(q.shape)}" if isinstance(q, torch.Tensor) else type(q).__name__
        raise InputError(f"q: expected bfloat16 (total_q, h, {D_QK}), got {got}")
    fmt = kv_format_of(kv)
    width = D_QK // 2 if fmt == "mxfp4" else D_QK
    if kv.dim() != 2 or kv.shape[1] != width:
        raise InputError(f"kv: expected {fmt} rows of shape (rows, {width}), got {tuple(kv.shape)}")
    if fmt == "mxfp4":
        want = (kv.shape[0], D_QK // MX_BLOCK)
        if not isinstance(kv_scale, torch.Tensor) or kv_scale.dtype is not torch.uint8 or tuple(kv_scale.shape) != want:
            got = f"{kv_scale.dtype} {tuple(kv_scale.shape)}" if isinstance(kv_scale, torch.Tensor) else kv_scale
            raise InputError(f"kv_scale: expected uint8 E8M0 scales of shape {want} for an MXFP4 cache, got {got}")
    elif fmt == "fp8" and (kv_scale is None or torch.as_tensor(kv_scale).numel() != 1):
        raise InputError(f"kv_scale: expected one fp32 per-tensor scale for an fp8 cache, got {kv_scale!r}")
    for name, t in (("qo_indptr", qo_indptr), ("kv_indptr", kv_indptr)):
        if not isinstance(t, torch.Tensor) or t.dtype is not torch.int32 or t.dim() != 1:
            raise InputError(f"{name}: expected a 1-D int32 tensor of B+1 offsets")
    qo = _as_list("qo_indptr", qo_indptr)
    kvp = _as_list("kv_indptr", kv_indptr)
    if len(qo) != len(kvp):
        raise InputError(f"kv_indptr: expected {len(qo)} entries like qo_indptr, got {len(kvp)}")
    if qo[-1] != q.shape[0]:
        raise InputError(f"qo_indptr: expected its last entry to equal total_q = {q.shape[0]}, got {qo[-1]}")
    if kv_indices is None:
        if kvp[-1] > kv.shape[0]:
            raise InputError(f"kv_indptr: last entry {kvp[-1]} exceeds the cache's {kv.shape[0]} rows")
    else:
        B = len(qo) - 1
        if not (isinstance(page_size, int) and page_size >= 1) or kv.shape[0] % page_size:
            raise InputError(f"page_size: expected an int >= 1 dividing the cache's {kv.shape[0]} rows, got {page_size!r}")
        if kv_indices.dtype is not torch.int32 or kv_indices.dim() != 2 or kv_indices.shape[0] != B:
            raise InputError(f"kv_indices: expected int32 (B={B}, max_pages), got {kv_indices.dtype} {tuple(kv_indices.shape)}")
        pages = [_ceil(kvp[b + 1] - kvp[b], page_size) for b in range(B)]
        need = max(pages, default=0)
        if kv_indices.shape[1] < need:
            raise InputError(f"kv_indices: expected at least {need} pages per row for the longest sequence, "
                             f"got {kv_indices.shape[1]}")
        used = torch.cat([kv_indices[b, :pages[b]] for b in range(B)] + [kv_indices.new_zeros(0)])
        num_pages = kv.shape[0] // page_size
        if used.numel() and not (0 <= int(used.min()) and int(used.max()) < num_pages):
            raise InputError(f"kv_indices: expected page ids in [0, {num_pages}), got [{int(used.min())}, {int(used.max())}]")
    return scores_scale(sm_scale)


def scores_scale(sm_scale) -> float:
    """sm_scale checked (a positive finite number: the kernels take each row's maximum of the
    unscaled scores, which only a positive scale keeps), or the default 1/sqrt(576)."""
    if sm_scale is None:
        return 1 / math.sqrt(D_QK)
    if isinstance(sm_scale, bool) or not (isinstance(sm_scale, (int, float)) and 0 < sm_scale < math.inf):
        raise InputError(f"sm_scale: expected a positive finite number (the scores' scale), got {sm_scale!r}")
    return float(sm_scale)
