"""mla_decode on a real GPU against the fp32 reference (issue 4's bar: max abs and relative L2
<= 1e-2), for every KV format, causal q lengths, head counts, ragged and paged batches."""
import pytest
import torch

import portable
from portable.device import device_target
from portable.kernels.mla_decode import ERROR_BARS, FP8_PRODUCTS_AUTO, compare
from portable.kernels.mla_decode.reference import make_mla_inputs, mla_reference
from portable.timing import capture

from conftest import refill

pytestmark = pytest.mark.gpu

RAGGED = [1, 63, 64, 65, 4097, 8192, 0]


def run_and_compare(fmt, lens, q_len, h, page_size=None, mma="auto", **knobs):
    """Against the error bars of the path the plan takes (mla.error_bars), into an output
    poisoned with NaN first (compare fails on any element left unwritten)."""
    inputs = make_mla_inputs(lens, q_len, h, fmt, seed=torch.seed() % (1 << 31), page_size=page_size, device="cuda")
    mla = portable.load("mla_decode", kv_format=fmt, mma=mma, tuning=knobs)
    plan = mla.plan(inputs["qo_indptr"], inputs["kv_indptr"], h)
    poisoned = torch.full((inputs["q"].shape[0], h, 512), float("nan"), device="cuda", dtype=torch.bfloat16)
    out, lse = mla(**inputs, plan=plan, return_lse=True, out=poisoned)
    assert out is poisoned
    want_out, want_lse = mla_reference(**inputs, out_dtype=torch.float32)
    atol, rtol_l2 = mla.error_bars(plan)
    ok, detail = compare(out, lse, want_out, want_lse, atol=atol, rtol_l2=rtol_l2)
    assert ok, f"{fmt} lens={lens} q_len={q_len} h={h} page={page_size}: {detail}"
    return out, lse


@pytest.mark.parametrize("fmt", ["bf16", "fp8", "mxfp4"])
@pytest.mark.parametrize("q_len", [1, 4])
@pytest.mark.parametrize("h", [16, 32, 128])
def test_ragged_batch_matches_reference(fmt, q_len, h):
    run_and_compare(fmt, RAGGED, q_len, h)


@pytest.mark.parametrize("fmt,page_size", [("bf16", 64), ("fp8", 1), ("mxfp4", 64)])
def test_paged_cache(fmt, page_size):
    # unused pages hold NaN: reading past a sequence's end would poison the output
    run_and_compare(fmt, [65, 4097, 1, 0, 300], 2, 16, page_size=page_size)


def test_split_kv_and_single_chunk_paths_agree():
    # B=1 splits the sequence across many blocks; B=264 gives one chunk per row
    run_and_compare("bf16", [8192], 1, 16)
    run_and_compare("bf16", [512] * 264, 1, 16)


def test_empty_sequences_give_zeros_and_minus_inf():
    out, lse = run_and_compare("bf16", [0, 0, 5], 1, 16)
    assert torch.all(out[:2] == 0) and torch.all(torch.isneginf(lse[:2]))


def test_other_tilings():
    run_and_compare("bf16", [1000, 77], 2, 64, kv_tile=64, row_groups=2, warps=8)


@pytest.mark.parametrize("fmt,h,knobs", [("fp8", 16, {"score_split": 8, "loop": "tile"}), ("mxfp4", 16, {"score_split": 4}),
                                         ("bf16", 32, {"score_split": 4})])
def test_score_split(fmt, h, knobs):
    """Warps splitting the scores' K more ways (each Q fragment serves several column tiles)."""
    run_and_compare(fmt, RAGGED, 4, h, **knobs)


@pytest.mark.parametrize("fmt", ["bf16", "fp8", "mxfp4"])
def test_query_tokens_grouped_in_one_block(fmt):
    """q = 3 on 16 heads: tokens go two to a block (a partial group at the end), each with its
    own causal limit; ragged and paged."""
    run_and_compare(fmt, RAGGED, 3, 16)
    run_and_compare(fmt, [65, 4097, 1, 0, 300], 3, 16, page_size=64)


@pytest.mark.parametrize("fmt,loop", [("bf16", "tile"), ("fp8", "tile"), ("fp8", "fragments"), ("mxfp4", "fragments"),
                                      ("mxfp4", "twin")])
def test_loops_agree_with_the_reference(fmt, loop):
    """sm_90a runs bf16 on the heads loop; fp8 on the fragments loop and MXFP4 on the twin loop
    below their heads rows; the tile loop (every other target's) stays correct for all. Rows of 64-row tiles past a chunk's end, h = 128 as 8 blocks, a
    split and a paged batch (NaN in the unused pages)."""
    if loop in ("fragments", "twin") and "wgmma" not in device_target(torch.cuda.current_device()).features:
        pytest.skip("no warpgroup MMA on this GPU")
    run_and_compare(fmt, RAGGED, 1, 128, loop=loop)
    run_and_compare(fmt, [8192, 3], 2, 16, loop=loop)
    run_and_compare(fmt, [65, 4097, 1, 0, 300], 4, 32, page_size=64, loop=loop)
    run_and_compare(fmt, [65, 4097, 1, 0, 300], 1, 16, page_size=1, loop=loop)


@pytest.mark.parametrize("fmt", ["bf16", "fp8", "mxfp4"])
def test_heads_loop_matches_reference(fmt):
    """64 query rows a block (two warpgroups, both products on wgmma from shared memory; fp8 and
    MXFP4 decoded once a tile into a bf16 tile): h = 128 as two blocks a token, 16 heads x 4 tokens
    each with its causal limit (and q = 3: a partial token group), 32 heads x 2 tokens on a
    paged cache (NaN in unused pages), one long sequence split into chunks, empty sequences."""
    if "wgmma" not in device_target(torch.cuda.current_device()).features:
        pytest.skip("no warpgroup MMA on this GPU")
    run_and_compare(fmt, RAGGED, 1, 128, loop="heads")
    run_and_compare(fmt, RAGGED, 4, 16, loop="heads")
    run_and_compare(fmt, RAGGED, 3, 16, loop="heads")
    run_and_compare(fmt, [65, 4097, 1, 0, 300], 2, 32, page_size=64, loop="heads")
    run_and_compare(fmt, [8192], 1, 64, loop="heads", mma="bf16")     # (auto: fp8 products there)
    out, lse = run_and_compare(fmt, [0, 0, 5], 1, 64, loop="heads")
    assert torch.all(out[:2] == 0) and torch.all(torch.isneginf(lse[:2]))


def test_one_scoring_warpgroup_matches_reference():
    """The bf16 cache's heads loop every way: scores="regs" (the default: Q in the scorer's
    registers, two O warpgroups that copy, three stages), "one" (warpgroup 0 scores whole tiles,
    warpgroup 1 copies, both multiply P V; named barriers between them) and "halves": the heads
    loop's cases, a sequence of one tile and one split into chunks."""
    if "wgmma" not in device_target(torch.cuda.current_device()).features:
        pytest.skip("no warpgroup MMA on this GPU")
    for scores in ("one", "regs", "halves"):
        knobs = {"loop": "heads", "scores": scores}
        run_and_compare("bf16", RAGGED, 1, 128, **knobs)
        run_and_compare("bf16", RAGGED, 4, 16, **knobs)
        run_and_compare("bf16", RAGGED, 3, 16, **knobs)
        run_and_compare("bf16", [65, 4097, 1, 0, 300], 2, 32, page_size=64, **knobs)
        run_and_compare("bf16", [8192], 4, 32, **knobs)
        run_and_compare("bf16", [40, 64, 128], 1, 64, **knobs)
        out, lse = run_and_compare("bf16", [0, 0, 5], 1, 64, **knobs)
        assert torch.all(out[:2] == 0) and torch.all(torch.isneginf(lse[:2]))


def nan_past_the_cache(fmt, lens, mma="auto", q_len=2, h=32, **knobs):
    """q 2 h 32 (or those given) on a cache whose rows past the last sequence hold NaN, on tensor
    copies: a chunk's last tile brings those rows in, and none of them may reach the output."""
    inputs = make_mla_inputs(lens, q_len, h, fmt, seed=torch.seed() % (1 << 31), device="cuda")
    want_out, want_lse = mla_reference(**inputs, out_dtype=torch.float32)
    nan = torch.full((100, inputs["kv"].shape[1]), float("nan"), device="cuda").to(inputs["kv"].dtype)
    inputs["kv"] = torch.cat([inputs["kv"], nan])
    mla = portable.load("mla_decode", kv_format=fmt, mma=mma, tuning=knobs)
    plan = mla.plan(inputs["qo_indptr"], inputs["kv_indptr"], h)
    assert mla.for_plan(plan).tiles(device_target(torch.cuda.current_device()).name)["copies"] == "tensor"
    out, lse = mla(**inputs, plan=plan, return_lse=True)
    ok, detail = compare(out, lse, want_out, want_lse, *mla.error_bars(plan))
    assert ok, detail


def test_tensor_copies_match_reference():
    """scores="regs" with copies="tensor" (one thread asks the copy engine for each tile): the
    heads loop's cases; 64- and 128-row pages with NaN in the unused pages, and NaN in the cache
    rows past the last sequence (a chunk's last tile brings them in, and its V rows must become
    zeros); 1-row pages, which take cp.async copies."""
    if "wgmma" not in device_target(torch.cuda.current_device()).features:
        pytest.skip("no warpgroup MMA on this GPU")
    knobs = {"loop": "heads", "scores": "regs", "copies": "tensor"}
    run_and_compare("bf16", RAGGED, 1, 128, **knobs)
    run_and_compare("bf16", RAGGED, 4, 16, **knobs)
    run_and_compare("bf16", RAGGED, 3, 16, **knobs)
    run_and_compare("bf16", [8192], 4, 32, **knobs)
    run_and_compare("bf16", [40, 64, 128], 1, 64, **knobs)
    for page_size in (64, 128, 1):
        run_and_compare("bf16", [65, 4097, 1, 0, 300], 2, 32, page_size=page_size, **knobs)
    nan_past_the_cache("bf16", [65, 1, 130], **knobs)


@pytest.mark.parametrize("mma", ["fp8x2", "fp8"])
def test_fp8_tensor_copies_match_reference(mma):
    """The fp8 cache on fp8 products, scores="one", with copies="tensor": sequences of 4096 and more (fp8
    products' lengths) at q 4 h 16 and h 128, 64-row pages with NaN in the unused pages, 1-row
    pages (cp.async), and NaN in the cache rows past the last sequence (V^T's columns there must
    be zeros)."""
    if "wgmma" not in device_target(torch.cuda.current_device()).features:
        pytest.skip("no warpgroup MMA on this GPU")
    knobs = {"mma": mma, "loop": "heads", "scores": "one", "copies": "tensor"}
    run_and_compare("fp8", [4096, 8192, 5000], 4, 16, **knobs)
    run_and_compare("fp8", [4097, 8192], 1, 128, **knobs)
    for page_size in (64, 1):
        run_and_compare("fp8", [4100, 6000, 8192], 2, 32, page_size=page_size, **knobs)
    nan_past_the_cache("fp8", [4097, 4130], **knobs)


@pytest.mark.parametrize("fmt,mma,pairs", [("fp8", "fp8x2", 0), ("fp8", "fp8", 0), ("mxfp4", "fp8", 1), ("mxfp4", "fp8", 2)])
def test_fp8_regs_loop_matches_reference(fmt, mma, pairs):
    """The fp8 and MXFP4 caches on fp8 products with Q in the scorer's registers (scores="regs")
    on sequences of 4096 and more (fp8 products' lengths, where their bars hold): partial last
    tiles and an empty sequence at q 4 h 32, q 1 h 16 and h 128, 64-row pages with NaN in the
    unused pages, 1-row pages (the fp8 cache: which take the two-warpgroup loop on cp.async),
    partials in fp32; the fp8 cache: NaN in the cache rows past the last sequence (its tensor
    copies bring them in); MXFP4 (a fourth, decoding warpgroup): a full GPU of long sequences,
    where races between the decoder and the others would show; MXFP4 in pairs (two blocks of a
    cluster decoding half of each tile into both): those shapes with 128 rows a sequence (q 4
    h 32, h 128), on 64- and 1-row pages too (the decoders' own copies), beside unpaired ones."""
    if "wgmma" not in device_target(torch.cuda.current_device()).features:
        pytest.skip("no warpgroup MMA on this GPU")
    knobs = {"mma": mma, "loop": "heads", "scores": "regs", **({"pairs": pairs} if pairs else {})}
    out, _ = run_and_compare(fmt, [4097, 4159, 0, 4160, 4100], 4, 32, **knobs)
    assert torch.all(out[8:12] == 0)                  # (the empty sequence's rows)
    run_and_compare(fmt, [4096, 8192, 5000], 1, 16, **knobs)
    run_and_compare(fmt, [4097, 8192], 1, 128, **knobs)
    for page_size in (64, 1):
        run_and_compare(fmt, [4100, 6000, 8192, 1100], 2, 32, page_size=page_size, **knobs)
    if fmt == "fp8":                                  # (tensor copies; MXFP4's cp.async reads no row past a chunk)
        nan_past_the_cache(fmt, [4097, 4130], **knobs)
    run_and_compare(fmt, [8192, 3000], 4, 32, **knobs, partials="fp32")
    if fmt == "mxfp4":
        run_and_compare(fmt, [8192] * 64, 4, 32, **knobs)
    if pairs == 2:
        for page_size in (64, 1):
            run_and_compare(fmt, [4100, 6000, 8192, 1100, 0], 4, 32, page_size=page_size, **knobs)


@pytest.mark.parametrize("mma", ["fp8x2", "fp8"])
def test_fp8_swap_scores_match_reference(mma):
    """The fp8 cache's regs loop with scores="swap" (16 query rows a sequence: S^T = K Q^T, the
    rows' maxima meeting over four warps, P a byte a value into 16 of P's 64 rows): partial last
    tiles and an empty sequence, 64-row pages with NaN in the unused pages and 1-row pages (which
    take the two-warpgroup loop on cp.async), NaN in the cache rows past the last sequence,
    partials in fp32, a full GPU of long sequences; other row counts are refused."""
    if "wgmma" not in device_target(torch.cuda.current_device()).features:
        pytest.skip("no warpgroup MMA on this GPU")
    knobs = {"mma": mma, "loop": "heads", "scores": "swap"}
    out, _ = run_and_compare("fp8", [4097, 4159, 0, 4160, 4100], 1, 16, **knobs)
    assert torch.all(out[2] == 0)                      # (the empty sequence's row)
    for page_size in (64, 1):
        run_and_compare("fp8", [4100, 6000, 8192, 1100], 1, 16, page_size=page_size, **knobs)
    nan_past_the_cache("fp8", [4097, 4130], q_len=1, h=16, **knobs)
    run_and_compare("fp8", [8192, 3000], 1, 16, **knobs, partials="fp32")
    run_and_compare("fp8", [8192] * 128, 1, 16, **knobs)
    with pytest.raises(portable.InputError, match="scores: 'swap' scores 16 query rows"):
        run_and_compare("fp8", [4096] * 2, 2, 16, **knobs)


@pytest.mark.parametrize("fmt,mma,knobs", [("bf16", "auto", {"scores": "regs"}), ("bf16", "auto", {"scores": "one"}),
                                           ("bf16", "auto", {"scores": "halves"}), ("fp8", "bf16", {}), ("mxfp4", "bf16", {}),
                                           ("fp8", "fp8x2", {}), ("mxfp4", "fp8", {})])
def test_bf16_partials_match_reference(fmt, mma, knobs):
    """partials="bf16" (the chunks' unnormalised O in bf16 for mla_combine, a quad's lanes
    trading pairs so each stores 4 dims) on every heads loop: sequences split into chunks at q
    1 and 4, h 16..128, ragged with empty and one-row sequences (on bf16 products), a partial
    token group."""
    if "wgmma" not in device_target(torch.cuda.current_device()).features:
        pytest.skip("no warpgroup MMA on this GPU")
    knobs = {"loop": "heads", "partials": "bf16", **knobs}
    run_and_compare(fmt, [8192] * 4, 4, 32, mma=mma, **knobs)
    run_and_compare(fmt, [8192, 1024 if mma == "bf16" or fmt == "bf16" else 4096, 5000], 1, 16, mma=mma, **knobs)
    if mma in ("auto", "bf16"):
        run_and_compare(fmt, RAGGED, 3, 16, mma=mma, **knobs)
    run_and_compare(fmt, [4097, 8192], 1, 128, mma=mma, **knobs)


@pytest.mark.parametrize("fmt", ["fp8", "mxfp4"])
def test_fp8_products_match_reference(fmt):
    """mma="fp8" (Q and P rounded to e4m3, both products on the fp8 matrix path; opt-in) within
    its bars (max abs 1.5e-2: it reached 1.07e-2 at 8192 query rows on an H100; relative L2
    5e-2) on sequences of 4096 and more: 16 heads x 4 tokens, h = 128,
    64-row pages (NaN in unused pages), one long sequence split into chunks, partial last
    tiles, empty sequences."""
    if "wgmma" not in device_target(torch.cuda.current_device()).features:
        pytest.skip("no warpgroup MMA on this GPU")
    bar = {"mma": "fp8"}
    run_and_compare(fmt, [4096, 8192, 5000], 4, 16, **bar)
    run_and_compare(fmt, [4097, 8192], 1, 128, **bar)
    run_and_compare(fmt, [4100, 6000, 8192], 2, 32, page_size=64, **bar)
    run_and_compare(fmt, [8192], 1, 64, **bar)
    run_and_compare(fmt, [4097, 4159, 0, 4160, 4100], 4, 16, **bar)      # partial last tiles, an empty sequence
    out, lse = run_and_compare(fmt, [0, 0, 4500], 1, 64, **bar)
    assert torch.all(out[:2] == 0) and torch.all(torch.isneginf(lse[:2]))


@pytest.mark.parametrize("fmt", ["fp8", "mxfp4"])
def test_fp8_products_with_two_q_parts_match_reference(fmt):
    """mma="fp8x2" (Q as two e4m3 parts: bf16's precision; P e4m3) within max abs 1e-2 where
    every sequence is FP8_PRODUCTS_FROM_KV long (what "auto" asks of the fp8 cache): causal, partial tiles,
    h = 128, paged, empty sequences."""
    if "wgmma" not in device_target(torch.cuda.current_device()).features:
        pytest.skip("no warpgroup MMA on this GPU")
    bar = {"mma": "fp8x2"}
    run_and_compare(fmt, [1024, 1087, 0, 2049, 4100], 4, 16, **bar)
    run_and_compare(fmt, [1025, 3000], 1, 128, **bar)
    run_and_compare(fmt, [1100, 4097, 0, 2000], 2, 32, page_size=64, **bar)
    out, lse = run_and_compare(fmt, [0, 0, 1500], 1, 64, **bar)
    assert torch.all(out[:2] == 0) and torch.all(torch.isneginf(lse[:2]))


@pytest.mark.parametrize("fmt", ["fp8", "mxfp4"])
@pytest.mark.parametrize("mma", ["fp8", "fp8x2"])
@pytest.mark.parametrize("knobs", [{}, {"kv_tile": 32}, {"row_groups": 2, "tokens": 2, "kv_tile": 64}])
def test_fp8_products_on_the_tile_loop_match_reference(fmt, mma, knobs):
    """fp8 products on the tile loop: the form sm_100a, sm_103a, sm_120a, gfx942 and gfx950 run
    (the dialect's mma8: mma.sync m16n8k32 e4m3 / MFMA 16x16x32 fp8, V^T built from each K
    tile; MXFP4 decoded exactly to e4m3 against each row's largest scale), here through the same
    fragments on this GPU (sm_90a runs mma.sync e4m3 as f16 pairs: the same operands and sums).
    Each bar as on the heads loop: long sequences, causal rows, 64-row pages, one sequence
    split into chunks, partial tiles, empty sequences."""
    bar = {"mma": mma, "loop": "tile", **knobs}
    run_and_compare(fmt, [4096, 8192, 5000], 4, 16, **bar)
    run_and_compare(fmt, [4097, 4159, 0, 4160, 4100], 2, 32, page_size=64, **bar)
    run_and_compare(fmt, [8192], 1, 16, **bar)
    out, lse = run_and_compare(fmt, [0, 0, 4500], 2, 16, **bar)
    assert torch.all(out[:4] == 0) and torch.all(torch.isneginf(lse[:4]))


@pytest.mark.parametrize("mma", ["fp8", "fp8x2"])
def test_mxfp4_fp8_products_with_two_decoding_warpgroups(mma):
    """decoders=2: a third warpgroup decodes half of each MXFP4 tile (registers moved by
    setmaxnreg); a full GPU of long sequences (a race between the decoders and the softmax's
    reads of the row factors showed there, not in small batches), causal rows, 64-row pages,
    one sequence split into chunks, partial tiles, empty sequences."""
    if "wgmma" not in device_target(torch.cuda.current_device()).features:
        pytest.skip("no warpgroup MMA on this GPU")
    bar = {"mma": mma, "scores": "one", "decoders": 2}
    run_and_compare("mxfp4", [8192] * 64, 4, 32, **bar)            # every SM busy for long: races show
    run_and_compare("mxfp4", [4096, 8192, 5000], 4, 16, **bar)
    run_and_compare("mxfp4", [4097, 4159, 0, 4160, 4100], 2, 32, page_size=64, **bar)
    run_and_compare("mxfp4", [8192], 1, 64, **bar)
    out, lse = run_and_compare("mxfp4", [0, 0, 4500], 1, 64, **bar)
    assert torch.all(out[:2] == 0) and torch.all(torch.isneginf(lse[:2]))


@pytest.mark.parametrize("loop,decoders,mma,scores", [("heads", 0, "fp8x2", ""), ("heads", 2, "fp8x2", ""), ("heads", 2, "fp8", "one"),
                                                     ("heads", 0, "fp8", "regs"), ("tile", 0, "fp8x2", "")])
def test_fp8_products_on_mxfp4_block_scales_far_apart(loop, decoders, mma, scores):
    """MXFP4 on fp8 products where the scales move: rows' scales grow along each sequence (the
    output's unit R moves, O is rescaled), and in every row one block sits 12 binades under
    the rest (the decode's converter path, exact) and one 18 under (rounded in e4m3); split
    into chunks and whole; on the heads loop (one or two decoding warpgroups) and on the tile
    loop (every other target's), and on the regs loop's decoding warpgroup; one Q part as
    "auto" runs it."""
    if loop == "heads" and "wgmma" not in device_target(torch.cuda.current_device()).features:
        pytest.skip("no warpgroup MMA on this GPU")
    lens = [4096, 3000, 1500]
    inputs = make_mla_inputs(lens, 4, 16, "mxfp4", seed=torch.seed() % (1 << 31), device="cuda")
    codes = inputs["kv_scale"].int()
    rows = torch.arange(codes.shape[0], device="cuda")
    pos = rows - torch.repeat_interleave(inputs["kv_indptr"][:-1], torch.tensor(lens, device="cuda"))
    # -5 .. 0 binades along each sequence: R moves, and the scores keep the test's unit spread
    # (from +0 up they reach 126, where Q's two e4m3 parts alone miss the LSE by 8e-2)
    codes += (pos // 700 - 5).unsqueeze(1)
    codes[:, 3] -= 12
    codes[:, 11] -= 18
    inputs["kv_scale"] = codes.clamp(1, 254).to(torch.uint8)
    mla = portable.load("mla_decode", kv_format="mxfp4", mma=mma, tuning={"loop": loop, "decoders": decoders, "scores": scores})
    want_out, want_lse = mla_reference(**inputs, out_dtype=torch.float32)
    for batch in (inputs, {**inputs, "q": inputs["q"][:4], "qo_indptr": inputs["qo_indptr"][:2], "kv_indptr": inputs["kv_indptr"][:2]}):
        plan = mla.plan(batch["qo_indptr"], batch["kv_indptr"], 16)
        out, lse = mla(**batch, plan=plan, return_lse=True)
        n = batch["q"].shape[0]
        ok, detail = compare(out, lse, want_out[:n], want_lse[:n], *ERROR_BARS[mma])
        assert ok, (plan.chunks, detail)


@pytest.mark.parametrize("fmt", ["fp8", "mxfp4"])
def test_auto_takes_fp8_products_only_on_long_sequences(fmt):
    """mma="auto" on the fp8 cache: fp8 products with Q in two e4m3 parts from 16 query rows a
    sequence where every sequence is FP8_PRODUCTS_FROM_KV long; shorter sequences and small
    batches of shorter sequences stay on bf16 products; MXFP4 the same from 32 rows (16 rows
    stay on its twin loop), with one Q part (and two decoding warpgroups); each within its bars."""
    if "wgmma" not in device_target(torch.cuda.current_device()).features:
        pytest.skip("no warpgroup MMA on this GPU")
    mla = portable.load("mla_decode", kv_format=fmt)
    fp8 = FP8_PRODUCTS_AUTO[fmt]
    rows16 = fp8 if fmt == "fp8" else "auto"               # (16 rows: MXFP4's twin loop)
    for lens, q_len, h, want in (([4096, 8192], 4, 16, fp8), ([4096, 8192], 2, 16, fp8), ([1024, 2000] * 4, 4, 32, fp8),
                                 ([1024, 2000], 4, 32, "auto"), (RAGGED, 4, 32, "auto"), ([8192] * 8, 1, 16, rows16),
                                 ([8192, 4096], 1, 16, rows16), ([4096] * 8, 1, 32, fp8), ([1024] * 64, 4, 32, fp8),
                                 ([1000] * 8, 1, 16, "auto")):
        inputs = make_mla_inputs(lens, q_len, h, fmt, seed=1, device="cuda")
        plan = mla.plan(inputs["qo_indptr"], inputs["kv_indptr"], h)
        assert mla.for_plan(plan).params["mma"] == want, (lens, q_len, h)
        out, lse = mla(**inputs, plan=plan, return_lse=True)
        assert mla.error_bars(plan) == ERROR_BARS["bf16" if want == "auto" else want]
        atol, rtol_l2 = mla.error_bars(plan)
        ok, detail = compare(out, lse, *mla_reference(**inputs, out_dtype=torch.float32), atol=atol, rtol_l2=rtol_l2)
        assert ok, (lens, q_len, h, detail)


def test_errors_before_launch():
    inputs = make_mla_inputs([10, 20], 1, 16, "bf16", device="cuda")
    mla = portable.load("mla_decode")
    with pytest.raises(portable.InputError, match="kv: expected torch.float8_e4m3fn"):
        portable.load("mla_decode", kv_format="fp8")(**inputs)
    bad = dict(inputs, q=inputs["q"].cpu())
    with pytest.raises(portable.InputError, match="q: expected a tensor on a GPU"):
        mla(**bad)
    odd = make_mla_inputs([10], 1, 8, "bf16", device="cuda")
    with pytest.raises(portable.InputError, match="multiple of 16"):
        mla(**odd)
    with pytest.raises(portable.InputError, match=r"out: expected a contiguous bfloat16 \(2, 16, 512\)"):
        mla(**inputs, out=torch.empty(2, 16, 512, device="cuda"))
    shifted = torch.empty(inputs["kv"].numel() + 4, device="cuda", dtype=torch.bfloat16)[4:].view(inputs["kv"].shape)
    shifted.copy_(inputs["kv"])
    with pytest.raises(portable.InputError, match="kv: expected a tensor whose data starts on a 16-byte boundary"):
        mla(**dict(inputs, kv=shifted))


def test_plan_is_reused_across_calls_and_checked():
    inputs = make_mla_inputs([100, 5000], 2, 32, "fp8", device="cuda")
    mla = portable.load("mla_decode", kv_format="fp8")
    plan = mla.plan(inputs["qo_indptr"], inputs["kv_indptr"], 32)
    planned = mla(**inputs, plan=plan)
    assert torch.equal(planned, mla(**inputs))            # same work list either way
    assert torch.equal(planned, mla(**inputs, plan=plan))
    with pytest.raises(portable.InputError, match="as planned"):
        mla(**dict(inputs, q=inputs["q"][:, :16].contiguous()), plan=plan)
    other = portable.load("mla_decode", kv_format="fp8", tuning={"kv_tile": 32, "warps": 4})
    with pytest.raises(portable.InputError, match="plan: built for tiling"):
        other(**inputs, plan=plan)


@pytest.mark.parametrize("fmt", ["bf16", "fp8", "mxfp4"])
def test_cuda_graph_replay(fmt):
    """A planned call (split-KV, so the combine kernel too) captured in a CUDA graph replays to
    the eager call's bits, and to the new result after new inputs are copied into the captured
    tensors."""
    lens, h = [1, 300, 4097], 16
    inputs = make_mla_inputs(lens, 2, h, fmt, seed=1, device="cuda")
    mla = portable.load("mla_decode", kv_format=fmt)
    plan = mla.plan(inputs["qo_indptr"], inputs["kv_indptr"], h)
    graph, (out, lse) = capture(lambda: mla(**inputs, plan=plan, return_lse=True))
    for seed in (2, 3):
        fresh = make_mla_inputs(lens, 2, h, fmt, seed=seed, device="cuda")
        refill(inputs, fresh)
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        want_out, want_lse = mla(**fresh, plan=plan, return_lse=True)
        assert torch.equal(out, want_out) and torch.equal(lse, want_lse), seed
