"""The MoE and MLA references against naive loops, the torch peers against the references,
and the cost models against numbers worked out by hand. CPU only, small shapes."""
import math

import pytest
import torch

from portable.errors import InputError
from portable.formats import qdq_mxfp4
from portable.kernels.mla_decode.reference import make_mla_inputs, mla_cost, mla_reference, mla_torch_bf16, page_kv
from portable.kernels.mxfp4_moe.reference import make_moe_inputs, moe_cost, moe_reference, moe_torch_bf16

E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def decode_mxfp4(packed, scales):
    """Independent of portable.formats: a Python lookup per nibble, 2.0 ** (e - 127) per block."""
    lo, hi = (packed & 15).long(), (packed >> 4).long()
    table = torch.tensor(E2M1)
    values = torch.stack([table[lo], table[hi]], dim=-1).flatten(-2)
    scale = torch.tensor([2.0 ** (e - 127) for e in scales.flatten().tolist()]).reshape(scales.shape)
    return values * scale.repeat_interleave(32, dim=-1)


def rel_l2(a, b):
    return ((a.float() - b.float()).norm() / b.float().norm()).item()


# --- MoE -----------------------------------------------------------------------------------------

def naive_moe(inp, mode):
    """One token, one slot at a time, straight from the formulas in issue 5."""
    x_all = inp["hidden_states"].float()
    dh, de = inp["d_hidden"], inp["d_expert"]
    De = inp["w13"].shape[1] // 2
    out = torch.zeros(x_all.shape[0], x_all.shape[1])
    for i in range(x_all.shape[0]):
        x = x_all[i, :dh]
        if mode == "a4w4":
            x = qdq_mxfp4(x)
        for slot in range(inp["topk_ids"].shape[1]):
            e = int(inp["topk_ids"][i, slot])
            w13 = decode_mxfp4(inp["w13"][e], inp["w13_scale"][e])
            w2 = decode_mxfp4(inp["w2"][e], inp["w2_scale"][e])
            g = w13[:de, :dh] @ x
            u = w13[De:De + de, :dh] @ x
            h = g / (1 + torch.exp(-g)) * u
            if mode == "a4w4":
                h = qdq_mxfp4(h)
            out[i, :dh] += inp["topk_weights"][i, slot] * (w2[:dh, :de] @ h)
    return out


MOE_CASES = {
    "plain": dict(M=6, E=8, d_hidden=64, d_expert=32, topk=2),
    "repeats": dict(M=5, E=6, d_hidden=64, d_expert=64, topk=3, repeat_experts=True),
    "unused": dict(M=7, E=12, d_hidden=32, d_expert=32, topk=2, active_experts=3),
    "M1": dict(M=1, E=4, d_hidden=96, d_expert=32, topk=2),
    "padded": dict(M=4, E=5, d_hidden=80, d_expert=40, topk=2, pad_to=64, shared_experts=1),
}


@pytest.mark.parametrize("mode", ["a16w4", "a4w4"])
@pytest.mark.parametrize("case", list(MOE_CASES))
def test_moe_reference_matches_naive_loop(case, mode):
    inp = make_moe_inputs(seed=11, **MOE_CASES[case])
    got = moe_reference(**inp, mode=mode)
    want = naive_moe(inp, mode)
    assert got.dtype is torch.bfloat16 and got.shape == inp["hidden_states"].shape
    # both fp32, so they differ by the final bf16 rounding (<= 2^-9 relative) and fp32 ulps
    assert ((got.float() - want).abs() <= 2.0 ** -8 * want.abs() + 1e-6).all()
    assert got[:, inp["d_hidden"]:].eq(0).all()


@pytest.mark.parametrize("case", list(MOE_CASES))
def test_moe_torch_peer_matches_reference(case):
    inp = make_moe_inputs(seed=5, **MOE_CASES[case])
    ref = moe_reference(**inp, mode="a16w4").float()
    peer = moe_torch_bf16(**inp).float()
    assert rel_l2(peer, ref) <= 2e-2
    assert (peer - ref).abs().max() <= 5e-2 * ref.abs().max()


def test_moe_routing_options_do_what_they_say():
    inp = make_moe_inputs(8, 10, 32, 32, 3, seed=1, active_experts=4, repeat_experts=True, shared_experts=2)
    ids = inp["topk_ids"]
    assert ids.shape == (8, 5) and ids.dtype is torch.int32
    assert ids[:, :3].unique().numel() <= 4                    # 4 routed experts active, 4 get nothing
    assert (ids[:, 3:] == torch.tensor([8, 9], dtype=torch.int32)).all()
    assert (ids[::2, 2] == ids[::2, 0]).all()                  # repeated expert in even tokens
    assert torch.allclose(inp["topk_weights"][:, :3].sum(1), torch.ones(8))
    assert (inp["topk_weights"][:, 3:] == 1).all()


def test_moe_padding_is_ignored():
    inp = make_moe_inputs(3, 4, 80, 40, 2, seed=2, pad_to=64)
    assert inp["hidden_states"].shape == (3, 128) and inp["w13"].shape == (4, 128, 64)
    ref = moe_reference(**inp, mode="a4w4")
    narrow = dict(inp, hidden_states=inp["hidden_states"][:, :80].contiguous())
    assert torch.equal(moe_reference(**narrow, mode="a4w4"), ref[:, :80])
    garbage = inp["hidden_states"].clone()
    garbage[:, 80:] = 1e3               # junk in the padding must not move the a4w4 scales
    assert torch.equal(moe_reference(**dict(inp, hidden_states=garbage), mode="a4w4"), ref)


def test_moe_argument_errors():
    inp = make_moe_inputs(2, 4, 32, 32, 2, seed=0)
    with pytest.raises(InputError, match="mode: expected one of a16w4, a4w4"):
        moe_reference(**inp, mode="a8w4")
    with pytest.raises(InputError, match=r"topk_ids: expected expert ids in \[0, 4\)"):
        moe_reference(**dict(inp, topk_ids=inp["topk_ids"] + 3))
    with pytest.raises(InputError, match="topk_ids: expected dtype torch.int32"):
        moe_reference(**dict(inp, topk_ids=inp["topk_ids"].long()))
    with pytest.raises(InputError, match=r"w2_scale: expected shape \(4, 32, 1\)"):
        moe_reference(**dict(inp, w2_scale=inp["w2_scale"][:, :16]))
    with pytest.raises(InputError, match="d_hidden: expected a multiple of 32"):
        make_moe_inputs(2, 4, 40, 32, 2)


def test_moe_cost_by_hand():
    ids = torch.tensor([[0, 3], [3, 3], [5, 0]], dtype=torch.int32)   # experts 0, 3, 5 touched; 6 pairs
    cost = moe_cost(3, 8, 64, 32, ids)
    # per expert: w13 2*32 rows x (64/2 + 64/32) = 64 * 34 = 2176; w2 64 rows x (32/2 + 1) = 1088
    assert cost["bytes"] == 3 * (2176 + 1088) + 2 * 3 * 64 * 2
    assert cost["flops"] == 6 * 2 * (2 * 32 * 64 + 64 * 32)
    assert cost["experts_touched"] == 3


def test_moe_cost_matches_issue_estimate():
    # issue 5: E = 257, d_expert = 256, d_hidden 7168, ~33 experts touched is ~96 MB
    ids = torch.arange(33, dtype=torch.int32).reshape(1, 33).expand(4, 33)
    cost = moe_cost(4, 257, 7168, 256, ids)
    per_expert = 2 * 256 * (3584 + 224) + 7168 * (128 + 8)
    assert cost["bytes"] == 33 * per_expert + 2 * 4 * 7168 * 2
    assert 95e6 < cost["bytes"] < 97e6


# --- MLA -----------------------------------------------------------------------------------------

def naive_mla(inp):
    """One query, one head at a time, on an independently dequantized and de-paged cache."""
    kv, scale = inp["kv"], inp["kv_scale"]
    if kv.dtype is torch.uint8:
        rows = decode_mxfp4(kv, scale)
    elif kv.dtype is torch.float8_e4m3fn:
        rows = kv.float() * float(scale)
    else:
        rows = kv.float()
    qo, kvp = inp["qo_indptr"].tolist(), inp["kv_indptr"].tolist()
    P = inp["page_size"]
    q = inp["q"].float()
    out = torch.zeros(q.shape[0], q.shape[1], 512)
    lse = torch.full(q.shape[:2], -math.inf)
    for b in range(len(qo) - 1):
        n, L = qo[b + 1] - qo[b], kvp[b + 1] - kvp[b]
        if inp["kv_indices"] is None:
            seq = rows[kvp[b]:kvp[b + 1]]
        else:
            seq = torch.stack([rows[int(inp["kv_indices"][b, t // P]) * P + t % P] for t in range(L)]) \
                if L else rows[:0]
        for i in range(n):
            seen = L - (n - 1 - i)
            if seen <= 0:
                continue
            for head in range(q.shape[1]):
                s = (seq[:seen] @ q[qo[b] + i, head]) * inp["sm_scale"]
                m = s.max()
                w = torch.exp(s - m)
                out[qo[b] + i, head] = (w / w.sum()) @ seq[:seen, :512]
                lse[qo[b] + i, head] = m + torch.log(w.sum())
    return out, lse


MLA_BATCH = dict(kv_lens=[0, 1, 3, 5, 64, 65, 130], q_lens=[1, 4, 4, 2, 1, 4, 3])


@pytest.mark.parametrize("fmt", ["bf16", "fp8", "mxfp4"])
@pytest.mark.parametrize("page_size", [None, 16])
def test_mla_reference_matches_naive_loop(fmt, page_size):
    inp = make_mla_inputs(**MLA_BATCH, h=3, kv_format=fmt, seed=7, page_size=page_size)
    out, lse = mla_reference(**inp)
    want_out, want_lse = naive_mla(inp)
    assert out.dtype is torch.bfloat16 and out.shape == (sum(MLA_BATCH["q_lens"]), 3, 512)
    assert lse.dtype is torch.float32 and not out.isnan().any()
    assert (out.float() - want_out).abs().max() <= 1e-2
    assert rel_l2(out, want_out) <= 4e-3
    assert torch.equal(lse.isinf(), want_lse.isinf())
    finite = lse.isfinite()
    assert torch.allclose(lse[finite], want_lse[finite], atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("fmt, page_size", [("bf16", None), ("mxfp4", 64)])
def test_mla_long_ragged_batch(fmt, page_size):
    inp = make_mla_inputs([4097, 63, 64, 65, 0], q_lens=[4, 1, 1, 4, 1], h=2, kv_format=fmt, seed=21,
                          page_size=page_size)
    out, lse = mla_reference(**inp)
    want_out, want_lse = naive_mla(inp)
    assert (out.float() - want_out).abs().max() <= 1e-2 and rel_l2(out, want_out) <= 4e-3
    assert torch.equal(lse.isinf(), want_lse.isinf())
    peer_out, _ = mla_torch_bf16(**inp)
    assert rel_l2(peer_out, out) <= 1e-2


def test_mla_empty_and_fully_masked_queries_give_zeros_and_neg_inf():
    inp = make_mla_inputs([0, 2], q_lens=[3, 4], h=2, seed=3)
    out, lse = mla_reference(**inp)
    # sequence 0: no KV at all; sequence 1: L = 2, n = 4 -> queries 0 and 1 see 2 - 3 and 2 - 2 tokens
    blind = [0, 1, 2, 3, 4]
    assert out[blind].float().eq(0).all() and (lse[blind] == -math.inf).all()
    assert lse[5:].isfinite().all() and not out.isnan().any()


def test_mla_causal_offsets():
    # with q length 4, query 3 sees every token and query 0 all but the last 3
    inp = make_mla_inputs([10], q_lens=[4], h=1, seed=4)
    out, lse = mla_reference(**inp)
    for i in range(4):
        one = dict(inp, q=inp["q"][i:i + 1], qo_indptr=torch.tensor([0, 1], dtype=torch.int32),
                   kv_indptr=torch.tensor([0, 7 + i], dtype=torch.int32))
        o1, l1 = mla_reference(**one)
        assert torch.equal(o1, out[i:i + 1]) and torch.allclose(l1, lse[i:i + 1])


@pytest.mark.parametrize("fmt", ["bf16", "fp8", "mxfp4"])
def test_mla_paged_equals_contiguous(fmt):
    inp = make_mla_inputs(**MLA_BATCH, h=2, kv_format=fmt, seed=9)
    out, lse = mla_reference(**inp)
    for page_size in (1, 16, 64):
        kv, scale, indices = page_kv(inp["kv"], inp["kv_scale"], inp["kv_indptr"], page_size, seed=page_size)
        paged = dict(inp, kv=kv, kv_scale=scale, kv_indices=indices, page_size=page_size)
        o2, l2 = mla_reference(**paged)
        assert torch.equal(o2, out) and torch.equal(l2, lse)


def test_page_kv_poisons_unowned_slots():
    inp = make_mla_inputs([3, 5], h=1, kv_format="mxfp4", seed=1)
    kv, scale, indices = page_kv(inp["kv"], inp["kv_scale"], inp["kv_indptr"], 4, spare_pages=1)
    assert indices.shape == (2, 2) and kv.shape == (4 * 4, 288) and scale.shape == (16, 18)
    assert (scale == 0xFF).all(dim=1).sum() == 16 - 8      # 8 owned slots, the rest NaN scales


@pytest.mark.parametrize("fmt", ["bf16", "fp8", "mxfp4"])
@pytest.mark.parametrize("page_size", [None, 64])
def test_mla_torch_peer_matches_reference(fmt, page_size):
    inp = make_mla_inputs(**MLA_BATCH, h=4, kv_format=fmt, seed=13, page_size=page_size)
    out, lse = mla_reference(**inp)
    peer_out, peer_lse = mla_torch_bf16(**inp)
    assert not peer_out.isnan().any()
    assert (peer_out.float() - out.float()).abs().max() <= 1e-2 * max(1.0, out.float().abs().max().item())
    assert rel_l2(peer_out, out) <= 1e-2
    assert torch.equal(peer_lse.isinf(), lse.isinf())
    finite = lse.isfinite()
    assert torch.allclose(peer_lse[finite], lse[finite], atol=5e-2)


def test_mla_argument_errors():
    inp = make_mla_inputs([4, 4], h=2, seed=0)
    with pytest.raises(InputError, match=r"q: expected bfloat16 \(total_q, h, 576\)"):
        mla_reference(**dict(inp, q=inp["q"].float()))
    with pytest.raises(InputError, match="kv_indptr: expected a 1-D int32 tensor"):
        mla_reference(**dict(inp, kv_indptr=inp["kv_indptr"].long()))
    with pytest.raises(InputError, match="qo_indptr: expected its last entry to equal total_q = 2"):
        mla_reference(**dict(inp, qo_indptr=torch.tensor([0, 1, 3], dtype=torch.int32)))
    fp8 = make_mla_inputs([4], h=1, kv_format="fp8", seed=0)
    with pytest.raises(InputError, match="kv_scale: expected one fp32 per-tensor scale"):
        mla_reference(**dict(fp8, kv_scale=None))
    for bad in (-0.1, 0.0, float("nan"), "0.1"):
        with pytest.raises(InputError, match="sm_scale: expected a positive finite number"):
            mla_reference(**dict(inp, sm_scale=bad))
    paged = make_mla_inputs([70], h=1, seed=0, page_size=64)
    with pytest.raises(InputError, match="kv_indices: expected at least 2 pages"):
        mla_reference(**dict(paged, kv_indices=paged["kv_indices"][:, :1]))


def test_mla_cost_by_hand():
    qo = torch.tensor([0, 1, 5], dtype=torch.int32)      # q lengths 1 and 4
    kv = torch.tensor([0, 10, 16], dtype=torch.int32)    # KV lengths 10 and 6
    # visible tokens: 10; then 6-3, 6-2, 6-1, 6 = 3 + 4 + 5 + 6 = 18 -> 28
    h = 2
    io = 5 * h * (576 * 2 + 512 * 2)
    assert mla_cost(qo, kv, h)["flops"] == 2 * h * 1088 * 28
    assert mla_cost(qo, kv, h)["bytes"] == 16 * 1152 + io
    assert mla_cost(qo, kv, h, "fp8")["bytes"] == 16 * 576 + 4 + io
    assert mla_cost(qo, kv, h, "mxfp4")["bytes"] == 16 * (288 + 18) + io
    assert mla_cost(qo, kv, h, with_lse=True)["bytes"] == 16 * 1152 + io + 5 * h * 4
    assert mla_cost([0, 2], [0, 0], 4)["flops"] == 0       # empty sequence


def test_mla_cost_matches_issue_estimate():
    # issue 4: B = 128, L = 8192, h = 16 in bf16 is 1.21 GB of KV
    B, L = 128, 8192
    qo = list(range(B + 1))
    kv = [b * L for b in range(B + 1)]
    cost = mla_cost(qo, kv, 16)
    kv_bytes = B * L * 576 * 2
    assert round(kv_bytes / 1e9, 2) == 1.21
    assert cost["bytes"] == kv_bytes + B * 16 * (576 + 512) * 2
    assert cost["flops"] == 2 * 16 * 1088 * B * L
