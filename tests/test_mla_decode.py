"""mla_decode without a GPU: five-target compile with matrix instructions, the work plan."""
import re

import pytest
import torch

import portable
from portable.backends import clang_amdgpu, nvrtc
from portable.kernels.mla_decode import MLADecode

from conftest import assert_register_pool, assert_wgmma_pipelined, toolchain_or_skip


@pytest.mark.parametrize("target", portable.targets())
@pytest.mark.parametrize("fmt", ["bf16", "fp8", "mxfp4"])
def test_compiles_with_matrix_instructions_and_no_spills(target, fmt):
    toolchain_or_skip((nvrtc if target.startswith("sm_") else clang_amdgpu).available())
    k = portable.load("mla_decode", kv_format=fmt)
    r = k.report(target)
    instr = r["instructions"]
    if k.tiles(target)["loop"] in ("fragments", "twin"):
        assert instr["hgmma"] > 0 and instr["hmma"] == 0, instr
    elif target.startswith("sm_"):
        assert instr["hmma"] > 0, instr
    else:
        assert instr["mfma"] > 0, instr
    assert r["spill_bytes"] == 0 and r["stack_bytes"] == 0 and instr["local_memory"] == 0, r
    assert r["smem_bytes"] <= portable.get_target(target).smem_per_block


def covered(items, token_chunks, qo, kvp, heads, m_tile):
    """Every (token, head group) row sees exactly its visible KV range, split into its chunks."""
    seen = {}
    for b, i, head0, lo, hi, chunk, _, _ in items:
        seen.setdefault((qo[b] + i, head0), []).append((lo, hi, chunk))
    for b in range(len(qo) - 1):
        n, L = qo[b + 1] - qo[b], kvp[b + 1] - kvp[b]
        for i in range(n):
            vis = max(0, L - (n - 1 - i))
            for head0 in range(0, heads, m_tile):
                ranges = sorted(seen.pop((qo[b] + i, head0)))
                assert len(ranges) == token_chunks[qo[b] + i]
                assert ranges[0][0] == 0 and ranges[-1][1] == vis
                assert all(a[1] == c[0] for a, c in zip(ranges, ranges[1:]))
                assert [c for _, _, c in ranges] == ([-1] if len(ranges) == 1 else list(range(len(ranges))))
    assert not seen


@pytest.mark.parametrize("lens,q_len,heads", [([8192], 1, 16), ([1, 63, 64, 65, 4097, 8192, 0], 4, 128),
                                              ([512] * 300, 1, 16), ([0, 0], 2, 32)])
def test_plan_covers_every_row_once(lens, q_len, heads):
    qo = [i * q_len for i in range(len(lens) + 1)]
    kvp = [0]
    for L in lens:
        kvp.append(kvp[-1] + L)
    k = MLADecode()
    items, chunks = k.work_list(qo, kvp, heads, "sm_90a", sms=132)
    covered(items, chunks, qo, kvp, heads, 16)
    if lens == [8192]:
        assert max(chunks) > 1          # one long sequence is split across the GPU


def test_fp8_on_sm90a_takes_the_fragments_loop_and_refuses_shapes_it_cannot_run():
    k = portable.load("mla_decode", kv_format="fp8")
    assert k.tiles("sm_90a")["loop"] == "fragments" and k.tiles("sm_100a")["loop"] == "tile"
    assert k.for_heads(16, "sm_90a") is k                   # 16 heads a block: no [.wide] variant
    assert k.dynamic_smem("sm_90a") == 2 * 64 * 576 + 16 * 576 * 2 + 16 * 64 * 2 + 256 + 192
    with pytest.raises(portable.InputError, match="fragments' takes kv_tile 64"):
        portable.load("mla_decode", kv_format="fp8", tuning={"kv_tile": 32}).source("sm_90a")
    with pytest.raises(portable.InputError, match="sm_100a lacks"):
        portable.load("mla_decode", kv_format="fp8", tuning={"loop": "fragments"}).source("sm_100a")
    with pytest.raises(portable.InputError, match="written for kv_format 'fp8'"):
        portable.load("mla_decode", kv_format="bf16", tuning={"loop": "fragments"}).source("sm_90a")


def test_the_cache_format_is_the_one_parameter_and_the_tiling_is_tuning():
    """kv_format and mma (the products' operands, which round Q and P) say what is computed;
    the tiling and loop only how fast, so they are knobs (0 / "" the target's table), each
    validated over its closed set."""
    assert list(MLADecode.PARAMS) == ["kv_format", "mma"]
    assert set(MLADecode.TUNING) == {"kv_tile", "row_groups", "warps", "min_blocks", "score_split", "tokens",
                                      "loop", "stages", "scores", "decoders", "copies", "partials", "pairs"}
    with pytest.raises(portable.InputError, match=r"loop: a tuning knob .* pass tuning=\{'loop': \.\.\.\}"):
        portable.load("mla_decode", kv_format="fp8", loop="fragments")
    with pytest.raises(portable.InputError, match=r"kv_tile: expected one of \[0, 32, 64\], got 48"):
        portable.load("mla_decode", tuning={"kv_tile": 48})
    k = portable.load("mla_decode", kv_format="fp8", tuning={"loop": "tile", "kv_tile": 32})
    assert k.params == {"kv_format": "fp8", "mma": "auto"} and k.tuning["loop"] == "tile" and k.tuning["stages"] == 0
    assert k.template_context("sm_90a")["LOOP"] == "tile" and k.template_context("sm_90a")["KV_TILE"] == 32


def test_plan_refuses_heads_that_do_not_tile():
    with pytest.raises(portable.InputError, match="multiple of 16"):
        MLADecode().work_list([0, 1], [0, 5], 8, "sm_90a", 132)


def test_cost_model_by_hand():
    # B=128, L=8192, h=16 bf16: 128 * 8192 * 1152 bytes of KV + q and out and lse
    c = MLADecode().cost_of({"B": 128, "L": 8192, "q_len": 1, "h": 16})
    assert c["bytes"] == 128 * 8192 * 1152 + 128 * 16 * (576 * 2 + 512 * 2 + 4)
    assert c["flops"] == 2 * 16 * (576 + 512) * 128 * 8192


def test_wide_row_groups_chosen_from_the_target_data():
    k = MLADecode(kv_format="mxfp4", tuning={"loop": "tile"})   # (sm_90a runs MXFP4 on the fragments loop by default)
    assert k.for_heads(16, "sm_90a") is k                     # 16 heads: one group, the base tiling
    wide = k.for_heads(128, "sm_90a")
    assert wide is k.for_heads(64, "sm_90a")                  # one cached variant
    assert wide.tiles("sm_90a")["row_groups"] == 2 and wide.for_heads(128, "sm_90a") is wide
    assert k.for_heads(128, "gfx942") is k                    # no [.wide] table there
    pinned = MLADecode(kv_format="mxfp4", tuning={"loop": "tile", "row_groups": 1})
    assert pinned.for_heads(128, "sm_90a") is pinned          # an explicit choice wins
    assert wide.tiles("sm_90a")["tokens"] == 1                # 128 heads: two head groups of one token
    by_tokens = k.for_heads(16, "sm_90a", q_max=4)             # 16 heads x 4 tokens fill two groups
    assert by_tokens.tiles("sm_90a")["row_groups"] == 2 and by_tokens.tiles("sm_90a")["tokens"] == 2


def test_heads_loop_for_bf16_from_16_rows():
    k = MLADecode(kv_format="bf16")
    big = k.for_heads(128, "sm_90a")
    assert big.tiles("sm_90a")["loop"] == "heads" and big.tiles("sm_90a")["tokens"] == 1
    assert big is k.for_heads(64, "sm_90a") and big.for_heads(128, "sm_90a") is big
    by_tokens = k.for_heads(16, "sm_90a", q_max=4)            # 16 heads x 4 tokens: 64 rows
    assert by_tokens.tiles("sm_90a")["loop"] == "heads" and by_tokens.tiles("sm_90a")["tokens"] == 4
    assert k.for_heads(16, "sm_90a").tiles("sm_90a")["loop"] == "heads"      # from_rows = 16
    assert k.for_heads(16, "sm_90a", q_max=2).tiles("sm_90a")["tokens"] == 4   # 2 tokens of 16 heads: 32 rows
    assert MLADecode(kv_format="bf16", tuning={"loop": "tile"}).for_heads(16, "sm_90a").tiles("sm_90a")["loop"] == "tile"
    assert k.for_heads(128, "sm_100a").tiles("sm_100a")["loop"] == "tile"    # no [.heads] table there
    assert MLADecode(kv_format="mxfp4", tuning={"loop": "tile"}).for_heads(128, "sm_90a").tiles("sm_90a")["loop"] == "tile"
    assert MLADecode(kv_format="bf16", tuning={"loop": "tile"}).for_heads(128, "sm_90a").tiles("sm_90a")["row_groups"] == 2
    assert big.dynamic_smem("sm_90a") == 232216                          # scores="regs", copies="tensor"
    assert big.tiles("sm_90a")["copies"] == "tensor"
    halves = MLADecode(kv_format="bf16", tuning={"scores": "halves"}).for_heads(128, "sm_90a")
    assert halves.dynamic_smem("sm_90a") == 3 * 64 * 1152 + 64 * 64 * 2 + 2 * 2 * 64 * 4
    with pytest.raises(portable.InputError, match="written for kv_format 'fp8' and 'mxfp4'"):
        portable.load("mla_decode", kv_format="bf16", tuning={"loop": "fragments"}).source("sm_90a")
    with pytest.raises(portable.InputError, match="sm_100a lacks"):
        portable.load("mla_decode", kv_format="bf16", tuning={"loop": "heads"}).source("sm_100a")


@pytest.mark.parametrize("fmt", ["bf16", "fp8", "mxfp4"])
def test_heads_loop_compiles_to_warpgroup_mma_without_spills(fmt):
    toolchain_or_skip(nvrtc.available())
    knobs = {"loop": "heads", "scores": "halves"} if fmt == "bf16" else {"loop": "heads"}   # ("one": its own test)
    r = MLADecode(kv_format=fmt, mma="bf16", tuning=knobs).for_heads(128, "sm_90a").report("sm_90a")
    assert r["instructions"]["hgmma"] == 40 and r["instructions"]["hmma"] == 0, r    # 36 for S, 4 for P V
    assert r["spill_bytes"] == 0 and r["instructions"]["local_memory"] == 0, r
    assert r["smem_bytes"] <= portable.get_target("sm_90a").smem_per_block


@pytest.mark.parametrize("fmt,least", [("fp8", 48), ("mxfp4", 32)])
def test_decoded_formats_take_the_heads_loop_from_their_rows(fmt, least):
    """fp8 and MXFP4 on bf16 products (raw rows decoded once a tile into one bf16 tile) take the
    heads loop from the [.heads] table's from_rows query rows a sequence; below, their own
    16-head loops. (fp8 on mma="auto" takes fp8 products from 32 rows instead.)"""
    k = MLADecode(kv_format=fmt, mma="bf16")
    assert k.for_heads(16, "sm_90a") is k and k.tiles("sm_90a")["loop"] == {"fp8": "fragments", "mxfp4": "twin"}[fmt]
    assert (k.for_heads(32, "sm_90a") is k) == (least > 32)
    for heads, q_max, tokens in ((16, 3, 4), (16, 4, 4), (64, 1, 1), (128, 1, 1)):
        t = k.for_heads(heads, "sm_90a", q_max).tiles("sm_90a")
        assert t["loop"] == "heads" and t["tokens"] == tokens, (heads, q_max, t)
    assert MLADecode(kv_format=fmt, mma="bf16", tuning={"kv_tile": 64}).for_heads(128, "sm_90a") is not k.for_heads(128, "sm_90a")
    assert MLADecode(kv_format=fmt, tuning={"loop": "fragments"}).for_heads(128, "sm_90a").tiles("sm_90a")["loop"] == "fragments"
    assert MLADecode(kv_format=fmt, mma="bf16", tuning={"loop": "heads"}).for_heads(16, "sm_90a").tiles("sm_90a")["loop"] == "heads"
    assert k.for_heads(128, "sm_100a") is k                      # no [.heads] table there
    # Q, one bf16 tile, P, two raw stages (MXFP4: rows padded to 320 bytes, 20-byte scale
    # windows and their start bytes), maxima, sums
    raw = {"fp8": 2 * 64 * 576, "mxfp4": 2 * 64 * (320 + 20 + 1)}[fmt]
    assert k.for_heads(128, "sm_90a").layout("sm_90a")["bytes"] == 2 * 64 * 1152 + 64 * 64 * 2 + raw + 1024


def test_twin_loop_compiles_to_warpgroup_mma_without_spills():
    """MXFP4 on two warpgroups with alternate KV tiles: 36 MMAs for S^T and 32 for O^T a tile."""
    toolchain_or_skip(nvrtc.available())
    k = MLADecode(kv_format="mxfp4", tuning={"loop": "twin"})
    assert k.for_heads(128, "sm_90a") is k and k.block_threads("sm_90a") == 256
    r = k.report("sm_90a")
    assert r["instructions"]["hgmma"] == 68 and r["instructions"]["hmma"] == 0, r
    assert r["spill_bytes"] == 0 and r["instructions"]["local_memory"] == 0, r
    assert r["smem_bytes"] <= portable.get_target("sm_90a").smem_per_block
    with pytest.raises(portable.InputError, match="written for kv_format 'mxfp4'"):
        MLADecode(kv_format="fp8", tuning={"loop": "twin"}).source("sm_90a")


def test_work_list_groups_consecutive_tokens_with_their_causal_limit():
    wide = MLADecode(kv_format="bf16", tuning={"loop": "tile"}).for_heads(16, "sm_90a", q_max=3)
    # b0: 3 queries on 1 KV row (tokens 0-1 see 0 rows: an empty item), b1: 1 query on 300 rows
    items, chunks = wide.work_list([0, 3, 4], [0, 1, 301], 16, "sm_90a", sms=132)
    assert wide.tiles("sm_90a")["tokens"] == 2
    assert items[0] == (0, 0, 0, 0, 0, -1, 2, 0)               # tokens 0-1 together, 16 heads a group
    assert items[1] == (0, 2, 0, 0, 1, -1, 1, 0)               # token 2 alone sees the one row
    assert [it[6] for it in items[2:]] == [1] * (len(items) - 2) and chunks[:3] == [1, 1, 1]
    assert chunks[3] == len(items) - 2                         # b1 split into chunks


def test_compare_counts_error_beyond_the_bf16_output_rounding():
    from portable.kernels.mla_decode import compare
    want = torch.tensor([[[4.1383, 0.5, -2.0397]]])
    lse = torch.zeros(1, 1)
    ok, detail = compare(want.to(torch.bfloat16), lse, want, lse)       # rounding alone: 1.3e-2 raw
    assert ok and "1.33e-02 raw" in detail, detail
    assert not compare((want + 0.02).to(torch.bfloat16), lse, want, lse)[0]


@pytest.mark.parametrize("fmt,loop,mma", [("bf16", "heads", "auto"), ("fp8", "fragments", "auto"), ("fp8", "heads", "bf16"),
                                          ("fp8", "heads", "fp8"), ("fp8", "heads", "fp8x2"), ("mxfp4", "twin", "auto"),
                                          ("mxfp4", "heads", "bf16"), ("mxfp4", "heads", "fp8"), ("mxfp4", "heads", "fp8x2")])
def test_wgmma_pipeline_not_serialized(fmt, loop, mma):
    """ptxas keeps the sm_90a loops' wgmma pipelined (no "serialized" advisory: an O register
    read while its P V is in flight made the fp8 products' loop 25% slower)."""
    assert_wgmma_pipelined(portable.load("mla_decode", kv_format=fmt, mma=mma, tuning={"loop": loop}))


@pytest.mark.parametrize("copies", ["cp.async", "tensor"])
def test_scorer_with_q_in_registers_compiles(copies):
    """scores="regs": 31 MMAs 64 x 64 with Q from registers and 5 from shared memory for S, 4 P V
    MMAs (one copy of the code for both O warpgroups), 12 warps, no spills and no serialized
    wgmma; setmaxnreg honoured (ptxas drops it, and spills, where a warpgroup's count does not
    fit its code) and within the pool the launch holds (setmaxnreg.inc waits for registers the
    others gave back: asking for more than the launch's 3 x its count hangs the block); three
    KV stages beside Q's slab and k-step in shared memory (and the tensor copies' three
    mbarriers), within sm_90a's 227 KB. The tensor copies: nine box copies a tile and no
    cp.async of the cache (only Q's: 16-byte LDGSTS)."""
    toolchain_or_skip(nvrtc.available())
    k = MLADecode(kv_format="bf16", tuning={"loop": "heads", "scores": "regs", "copies": copies}).for_heads(32, "sm_90a", 4, 8192)
    r = k.report("sm_90a")
    assert r["instructions"]["hgmma"] == 31 + 5 + 4 and r["spill_bytes"] == 0, r
    assert k.block_threads("sm_90a") == 384
    bars = 3 * 8 if copies == "tensor" else 0
    assert k.dynamic_smem("sm_90a") == 64 * 80 * 2 + 3 * 64 * 576 * 2 + 3 * 64 * 4 + bars <= 232448
    assert_register_pool(k, raised=1, lowered=2)          # the scorer up, the O warpgroups down
    assert_wgmma_pipelined(k)
    sass = nvrtc.kernel_sass(k.binary("sm_90a").asm, "mla_decode")
    box_copies, cp_async = sass.count("UTMALDG"), sass.count("LDGSTS")
    assert (box_copies, cp_async) == ((4 * 9, 6) if copies == "tensor" else (0, 6 + 72)), (box_copies, cp_async)


def test_bf16_partials_are_refused_off_the_heads_loops():
    """partials: a knob of the heads loops (common.store_row_bf16 stores them), refused before
    any launch elsewhere; mla_combine reads what the loop writes."""
    for fmt, knobs in (("fp8", {"loop": "fragments"}), ("bf16", {"loop": "tile"}), ("mxfp4", {"loop": "twin"})):
        with pytest.raises(portable.InputError, match="partials: a knob of the heads loops"):
            MLADecode(kv_format=fmt, tuning={**knobs, "partials": "bf16"}).source("sm_90a")
    k = MLADecode(kv_format="bf16", tuning={"loop": "heads", "partials": "bf16"})
    combine = k.source("sm_90a").split("void mla_combine(")[1]
    assert "v[c] = *reinterpret_cast<const uint2*>(po" in combine


@pytest.mark.parametrize("mma", ["fp8x2", "fp8"])
def test_fp8_tensor_copies_compile(mma):
    """The fp8 cache on fp8 products with copies="tensor": nine box copies a tile (two tiles in
    the prologue, one in the loop), no cp.async, no spills, wgmma pipelined, an mbarrier a ring
    slot beside the cp.async layout."""
    toolchain_or_skip(nvrtc.available())
    k = MLADecode(kv_format="fp8", mma=mma, tuning={"loop": "heads", "scores": "one", "copies": "tensor"}).for_heads(32, "sm_90a", 4, 8192)
    old = MLADecode(kv_format="fp8", mma=mma, tuning={"loop": "heads", "scores": "one", "copies": "cp.async"}).for_heads(32, "sm_90a", 4, 8192)
    assert k.report("sm_90a")["spill_bytes"] == 0
    assert_wgmma_pipelined(k)
    sass = nvrtc.kernel_sass(k.binary("sm_90a").asm, "mla_decode")
    assert (sass.count("UTMALDG"), sass.count("LDGSTS")) == (3 * 9, 0)
    assert k.dynamic_smem("sm_90a") == old.dynamic_smem("sm_90a") + 2 * 8


@pytest.mark.parametrize("mma", ["fp8x2", "fp8"])
def test_fp8_regs_loop_compiles(mma):
    """The fp8 cache's default on fp8 products, scores="regs": S on QP x 18 e4m3 MMAs 64 x 64
    (fp8x2: 28 with Q's k-steps from registers, 8 from shared memory), 2 P V^T MMAs 64 x 256 (one
    copy of the code for both O warpgroups), 12 warps, no spills, setmaxnreg within the launch's
    pool, wgmma pipelined; tensor copies only (nine box copies at each of the prologue's and the
    loop's call sites, no cp.async); three KV stages, V^T and P twice, Q's k-steps past the
    registers, the mbarriers and row data within sm_90a's shared memory."""
    toolchain_or_skip(nvrtc.available())
    k = MLADecode(kv_format="fp8", mma=mma).for_heads(32, "sm_90a", 4, 8192)
    assert k.tiles("sm_90a")["scores"] == "regs" and k.block_threads("sm_90a") == 384
    r = k.report("sm_90a")
    parts = 2 if mma == "fp8x2" else 1
    assert r["instructions"]["hgmma"] == 18 * parts + 2 and r["spill_bytes"] == 0 and r["instructions"]["local_memory"] == 0, r
    landing_past_vt_p = max(0, parts * 64 * 592 - 2 * 512 * 64 - 2 * 64 * 64)
    in_smem = (18 * parts - min(18 * parts, 28)) * 64 * 32
    assert k.dynamic_smem("sm_90a") == (3 * 64 * 576 + 2 * 512 * 64 + 2 * 64 * 64 + landing_past_vt_p + in_smem + 3 * 8
                                        + 64 * 4 + 2 * 64 * 4 + 2 * 64 * 4) <= 232448
    assert_register_pool(k, raised=1, lowered=2)          # the scorer up, the O warpgroups down
    assert_wgmma_pipelined(k)
    sass = nvrtc.kernel_sass(k.binary("sm_90a").asm, "mla_decode")
    assert (sass.count("UTMALDG"), sass.count("LDGSTS")) == (2 * 9, 0)
    assert MLADecode(kv_format="fp8", mma=mma).variant(copies="cp.async").tiles("sm_90a")["scores"] == "one"


@pytest.mark.parametrize("mma", ["fp8x2", "fp8"])
def test_fp8_swap_scores_compile(mma):
    """scores="swap" (the fp8 cache's regs loop where a sequence brings 16 query rows): S^T on 18
    e4m3 MMAs 64 x 16 QP with both operands from shared memory (Q's 16 rows a part as B, no Q in
    registers) where S over 64 padded rows takes 18 QP of 64 x 64, and O^T = V^T P^T on 8 MMAs 64
    x 16 (V^T's 64-row blocks as A, P's 16 rows as B) where O took 2 of 64 x 256; the same 12
    warps and register pool, no spills, wgmma pipelined; Q's 16 rows a part at L.q, the warps'
    maxima beside; refused at other row counts and off the fp8 cache."""
    toolchain_or_skip(nvrtc.available())
    mla = MLADecode(kv_format="fp8", mma=mma, tuning={"scores": "swap"})
    k = mla.for_heads(16, "sm_90a", 1, 8192)
    assert k.tiles("sm_90a")["scores"] == "swap" and k.block_threads("sm_90a") == 384
    parts = 2 if mma == "fp8x2" else 1
    r = k.report("sm_90a")
    assert r["instructions"]["hgmma"] == 18 + 8 and r["spill_bytes"] == 0 and r["instructions"]["local_memory"] == 0, r
    assert f"m64n{16 * parts}k32.f32.e4m3.e4m3" in k.source("sm_90a") and "wg_mma_e4m3_n64(" not in k.source("sm_90a").split("void mla_decode(")[1]
    layout = k.layout("sm_90a")
    assert layout["q_slab"] == 16 * parts * 64 and layout["m"] - layout["q"] == 9 * 16 * parts * 64 + 3 * 8 + 64 * 4 + 2 * 64 * 4 + 2 * 64 * 4 + 64 * 4
    assert layout["q"] % 512 == 0 and k.dynamic_smem("sm_90a") <= 232448
    assert_register_pool(k, raised=1, lowered=2)
    assert_wgmma_pipelined(k)
    # its stages refill before P V^T (tile 3 after P of tile 0, then one a tile): three call sites
    assert nvrtc.kernel_sass(k.binary("sm_90a").asm, "mla_decode").count("UTMALDG") == 3 * 9
    # the fp8 cache's default at 16 rows on fp8 products; the regs loop from 32
    assert MLADecode(kv_format="fp8", mma=mma).for_heads(16, "sm_90a", 1, 8192).tiles("sm_90a")["scores"] == "swap"
    assert MLADecode(kv_format="fp8", mma=mma).for_heads(32, "sm_90a", 1, 8192).tiles("sm_90a")["scores"] == "regs"
    assert MLADecode(kv_format="fp8", mma=mma, tuning={"scores": "regs"}).for_heads(16, "sm_90a", 1, 8192).tiles("sm_90a")["scores"] == "regs"
    with pytest.raises(portable.InputError, match="scores: 'swap' scores 16 query rows"):
        mla.for_heads(32, "sm_90a", 1, 8192)
    with pytest.raises(portable.InputError, match="scores: a knob"):
        MLADecode(kv_format="mxfp4", mma="fp8", tuning={"scores": "swap"}).source("sm_90a")


def test_mxfp4_regs_loop_compiles():
    """MXFP4 on the regs loop (scores="regs", one Q part): 16 warps, the fourth decoding; S on 18
    e4m3 MMAs with all of Q from registers, P V^T in 64 x 128 halves (4 MMAs: a 64 x 256 one needs
    more than the launch's 128 registers a thread, and ptxas compiles each instruction within
    them); no spills, the pool moved by setmaxnreg (the scorer and the O warpgroups up, the
    decoder down) within the launch's, wgmma pipelined; the nibbles by tensor copies (cp.async
    where the pages ask it), the scales by cp.async; two decoded K tiles beside three raw stages
    within sm_90a's shared memory. Two Q parts are refused (their Q does not fit the scorer's
    registers beside a decoder)."""
    toolchain_or_skip(nvrtc.available())
    k = MLADecode(kv_format="mxfp4", mma="fp8", tuning={"scores": "regs"}).for_heads(32, "sm_90a", 4, 8192)
    assert k.tiles("sm_90a")["scores"] == "regs" and k.block_threads("sm_90a") == 512
    r = k.report("sm_90a")
    assert r["instructions"]["hgmma"] == 18 + 4 and r["spill_bytes"] == 0 and r["instructions"]["local_memory"] == 0, r
    assert_register_pool(k, raised=(1, 2), lowered=1)
    assert_wgmma_pipelined(k)
    sass = nvrtc.kernel_sass(k.binary("sm_90a").asm, "mla_decode")
    assert k.tiles("sm_90a")["copies"] == "tensor"          # the nibbles: five slabs a call site; the scales on cp.async
    assert sass.count("UTMALDG") % 5 == 0 < sass.count("UTMALDG") and sass.count("LDGSTS") > 0
    on_cp_async = nvrtc.kernel_sass(k.variant(copies="cp.async").binary("sm_90a").asm, "mla_decode")
    assert on_cp_async.count("UTMALDG") == 0 and on_cp_async.count("LDGSTS") > sass.count("LDGSTS")
    lay = k.layout("sm_90a")
    assert (lay["kv_tiles"], lay["raw_stages"]) == (2, 3) and k.dynamic_smem("sm_90a") <= 232448
    with pytest.raises(portable.InputError, match="MXFP4's \"regs\": mma 'fp8'"):
        MLADecode(kv_format="mxfp4", mma="fp8x2", tuning={"scores": "regs"}).source("sm_90a")


def test_mxfp4_pairs_compile_and_plan_in_clusters():
    """pairs=2 (MXFP4's regs loop): the two blocks of a sequence's 128 query rows run as a
    cluster of two (compiled in: a plain launch groups them), each block 16 heads x 4 tokens at q
    4 h 32 (64 heads x 1 token at h 128) so both take the same KV; the decoders decode half of each tile
    and the copy engine brings those rows to the peer, tiles handed over by mbarriers (one a
    remote arrival), within the register pool, no spills. Fewer than 128 rows a
    sequence take the unpaired kernel; the plan's consecutive items pair up; the knob is refused
    off that loop."""
    toolchain_or_skip(nvrtc.available())
    mla = MLADecode(kv_format="mxfp4", mma="fp8", tuning={"scores": "regs", "pairs": 2})
    k = mla.for_heads(32, "sm_90a", 4, 8192)
    assert (k.tiles("sm_90a")["pairs"], k.tiles("sm_90a")["tokens"]) == (2, 4)
    assert mla.for_heads(128, "sm_90a", 1, 8192).tiles("sm_90a")["tokens"] == 1
    assert mla.for_heads(128, "sm_90a", 1, 8192).tiles("sm_90a")["pairs"] == 2
    assert mla.for_heads(16, "sm_90a", 4, 8192).tiles("sm_90a")["pairs"] == 1        # 64 rows: one block a sequence
    assert "__cluster_dims__(2, 1, 1)" in k.source("sm_90a")
    assert "__cluster_dims__" not in mla.for_heads(16, "sm_90a", 4, 8192).source("sm_90a")
    r = k.report("sm_90a")
    assert r["instructions"]["hgmma"] == 18 + 4 and r["spill_bytes"] == 0 and r["instructions"]["local_memory"] == 0, r
    assert_register_pool(k, raised=(1, 2), lowered=1)
    assert_wgmma_pipelined(k)
    sass = nvrtc.kernel_sass(k.binary("sm_90a").asm, "mla_decode")
    alone = nvrtc.kernel_sass(k.variant(pairs=1).binary("sm_90a").asm, "mla_decode")
    # a decode call stores five chunks' two 16-byte halves: one call a tile here (not two); the
    # peer's copy goes by the copy engine (9 half slabs and 3 factor pieces), no remote store, and
    # the one GPU-scope membar is the start's cluster barrier (none a tile)
    assert alone.count("STS.128") - sass.count("STS.128") == 5 * 2 and "ST.E" not in sass
    assert sass.count("UBLKCP.S.S") == 9 + 3 and "UBLKCP" not in alone and sass.count("MEMBAR.ALL.GPU") == 1
    assert sass.count("UCGABAR_ARV") == 1 and "SYNCS.ARRIVE.TRANS64.RED" in sass
    items, _ = k.work_list([0, 4, 8, 12], [0, 8192, 100, 5000], 32, "sm_90a", 132)
    assert len(items) % 2 == 0
    for a, b in zip(items[::2], items[1::2]):
        assert (a[0], a[1], a[3], a[4], a[5]) == (b[0], b[1], b[3], b[4], b[5]) and b[2] == a[2] + 16
    with pytest.raises(portable.InputError, match="pairs: a knob of MXFP4's"):
        MLADecode(kv_format="fp8", mma="fp8", tuning={"scores": "regs", "pairs": 2}).source("sm_90a")


def test_tensor_copies_are_refused_off_the_regs_loop():
    """copies: a knob of the "regs" loops and the fp8 cache's heads loop on fp8 products, refused
    before any launch elsewhere (MXFP4's two-warpgroup loop reads raw rows that sit padded in
    shared memory, which the copy engine does not do)."""
    for fmt, mma, knobs in (("bf16", "auto", {"loop": "heads", "scores": "one"}), ("fp8", "bf16", {"loop": "heads"}),
                            ("bf16", "auto", {"loop": "tile"}), ("mxfp4", "fp8", {"loop": "heads", "scores": "one"})):
        with pytest.raises(portable.InputError, match="copies: a knob of the \"regs\" heads loops and of the fp8"):
            MLADecode(kv_format=fmt, mma=mma, tuning={**knobs, "copies": "tensor"}).source("sm_90a")


def test_register_pool_check_catches_the_hang(monkeypatch):
    """The first build of scores="regs" raised its scorer to 192 beside two O warpgroups at 160
    (512 a thread against the launch's 3 x 168) and hung its block on an H200: the pool check
    refuses that build."""
    toolchain_or_skip(nvrtc.available())
    source = MLADecode.source
    monkeypatch.setattr(MLADecode, "source", lambda self, target: source(self, target).replace("wg_maxnreg_inc<184>", "wg_maxnreg_inc<192>"))
    k = MLADecode(kv_format="bf16", tuning={"loop": "heads", "scores": "regs"}).for_heads(32, "sm_90a", 4, 8192)
    assert "wg_maxnreg_inc<192>" in k.source("sm_90a")
    with pytest.raises(AssertionError, match=r"\(\[192\], 160, 168\)"):
        assert_register_pool(k, raised=1, lowered=2)


def test_one_scoring_warpgroup_compiles_and_is_refused_elsewhere():
    """scores="one" (the bf16 cache's heads loop with Q in shared memory): 36 MMAs 64 x 64 for S (the
    first tile and the loop's), P V on both warpgroups (4 each), no spills, no serialized wgmma,
    P over the stages' rope slabs (no P region); the knob refused before any launch off the bf16
    cache's heads loop on bf16 products."""
    toolchain_or_skip(nvrtc.available())
    k = MLADecode(kv_format="bf16", tuning={"loop": "heads", "scores": "one"}).for_heads(32, "sm_90a", 4, 8192)
    r = k.report("sm_90a")
    assert r["instructions"]["hgmma"] == 2 * 36 + 2 * 4 and r["spill_bytes"] == 0, r
    assert k.dynamic_smem("sm_90a") == 3 * 64 * 576 * 2 + 2 * 64 * 4 + 64 * 4
    assert_wgmma_pipelined(k)
    assert MLADecode(kv_format="bf16").for_heads(32, "sm_90a", 4, 8192).tiles("sm_90a")["scores"] == "regs"
    for fmt, mma, loop, scores in (("fp8", "bf16", "heads", "one"), ("bf16", "auto", "tile", "one"),
                                   ("mxfp4", "fp8x2", "heads", "regs"), ("fp8", "fp8x2", "heads", "halves")):
        with pytest.raises(portable.InputError, match="scores: a knob of the bf16 cache's heads loop on bf16 products, "
                                                      "and \"one\" or \"regs\" of the fp8 and MXFP4 caches' on fp8 products"):
            MLADecode(kv_format=fmt, mma=mma, tuning={"loop": loop, "scores": scores}).source("sm_90a")


@pytest.mark.parametrize("mma,stages", [("fp8", 2), ("fp8", 3), ("fp8x2", 2)])
def test_fp8_products_compile_to_fp8_warpgroup_mma(mma, stages):
    """mma="fp8" on scores="one": 18 e4m3 MMAs 64 x 64 for S on the scoring warpgroup (twice: the
    pipeline's first tile and the loop; "fp8x2": 36, Q's two parts) and 2 for P V on each
    warpgroup, no bf16 MMA, no spills, no serialized wgmma, inside sm_90a's shared memory; the
    layout the test knows."""
    toolchain_or_skip(nvrtc.available())
    k = MLADecode(kv_format="fp8", mma=mma, tuning={"stages": stages, "scores": "one"}).for_heads(32, "sm_90a", 4, 8192)
    assert k.tiles("sm_90a")["loop"] == "heads" and k.params["mma"] == mma and k.tiles("sm_90a")["copies"] == "tensor"
    r = k.report("sm_90a")
    parts = 2 if mma == "fp8x2" else 1
    assert r["instructions"]["hgmma"] == 2 * 18 * parts + 2 * 2 and r["instructions"]["hmma"] == 0, r
    assert r["spill_bytes"] == 0 and r["instructions"]["local_memory"] == 0, r
    bars = 8 * stages           # (tensor copies, the default: an mbarrier a ring slot)
    assert k.dynamic_smem("sm_90a") == (parts + stages) * 64 * 576 + 2 * 512 * 64 + 2 * 64 * 64 + bars + 64 * 4 + 2 * 64 * 4 + 65 * 4
    assert r["smem_bytes"] <= portable.get_target("sm_90a").smem_per_block
    assert_wgmma_pipelined(k)


@pytest.mark.parametrize("fmt,mma,stages", [("fp8", "fp8", 2), ("fp8", "fp8", 3), ("fp8", "fp8x2", 2),
                                            ("mxfp4", "fp8", 2), ("mxfp4", "fp8x2", 2)])
def test_fp8_products_layout_keeps_its_alignments(fmt, mma, stages):
    """The fp8 products' shared memory: the 64-byte-swizzled tiles (Q, K, V^T, P) start on their
    512-byte atoms (the descriptors carry no base offset), the cp.async targets and the vector
    loads of the MXFP4 row factors (16 and 8 bytes) on theirs."""
    k = MLADecode(kv_format=fmt, mma=mma, tuning={"stages": stages})
    lay = k.layout("sm_90a")
    for name in ("q", "kv", "vt", "p"):
        assert lay[name] % 512 == 0, (name, lay)
    for name, align in (("raw", 16), ("sc", 4), ("wm", 16), ("kf", 8), ("ke", 8), ("qs", 4), ("alpha", 4), ("l", 4)):
        if name in lay:
            assert lay[name] % align == 0, (name, lay)


@pytest.mark.parametrize("mma", ["fp8", "fp8x2"])
def test_fp8_products_on_mxfp4_compile(mma):
    """MXFP4 on fp8 products: the same MMAs as the fp8 cache, no spills, no serialized wgmma;
    two raw stages (rows padded to 320 bytes, 20-byte scale windows) and two decoded K tiles fit
    sm_90a's shared memory (beside two Q parts with one V^T and P buffer); a third stage does
    not, and says so before any launch."""
    toolchain_or_skip(nvrtc.available())
    k = MLADecode(kv_format="mxfp4", mma=mma, tuning={"scores": "one"})
    r = k.report("sm_90a")
    parts = 2 if mma == "fp8x2" else 1
    assert k.tiles("sm_90a")["loop"] == "heads"
    assert r["instructions"]["hgmma"] == 2 * 18 * parts + 2 * 2 and r["instructions"]["hmma"] == 0, r
    assert r["spill_bytes"] == 0 and r["instructions"]["local_memory"] == 0, r
    raw, v = 2 * 64 * (320 + 20 + 1), 3 - parts
    assert k.layout("sm_90a")["kv_tiles"] == 2 and k.layout("sm_90a")["v_bufs"] == v
    assert k.dynamic_smem("sm_90a") == (parts + 2) * 64 * 576 + v * (512 * 64 + 64 * 64) + raw + 2 * 64 * 8 + 2 * 8 * 4 + 64 * 4 + 2 * 64 * 4 + 65 * 4
    assert r["smem_bytes"] <= portable.get_target("sm_90a").smem_per_block
    assert_wgmma_pipelined(k)
    with pytest.raises(portable.InputError, match="shared memory"):
        MLADecode(kv_format="mxfp4", mma="fp8x2", tuning={"stages": 3}).source("sm_90a")


def test_fp8_products_compile_as_a_user_asks_for_them():
    """`portable compile mla_decode -p kv_format=fp8 -p mma=fp8x2`: no loop named, the heads loop
    (the format's own default, fragments, cannot run fp8 products)."""
    toolchain_or_skip(nvrtc.available())
    for mma in ("fp8", "fp8x2"):
        k = portable.load("mla_decode", kv_format="fp8", mma=mma)
        assert k.tiles("sm_90a")["loop"] == "heads"
        assert k.report("sm_90a")["instructions"]["hgmma"] == (38 if mma == "fp8x2" else 20)     # (scores="regs")


def test_fp8_products_refused_where_they_do_not_run():
    runs = "runs the fp8 and MXFP4 caches on the tile loop .every target. and the heads loop"
    with pytest.raises(portable.InputError, match="mma: 'fp8' " + runs):
        portable.load("mla_decode", kv_format="bf16", mma="fp8").source("sm_90a")
    with pytest.raises(portable.InputError, match="mma: 'fp8x2' " + runs + ".*'bf16', loop 'tile' on sm_100a"):
        portable.load("mla_decode", kv_format="bf16", mma="fp8x2").source("sm_100a")
    with pytest.raises(portable.InputError, match="mma: 'fp8x2' " + runs):
        portable.load("mla_decode", kv_format="mxfp4", mma="fp8x2", tuning={"loop": "twin"}).source("sm_90a")
    with pytest.raises(portable.InputError, match="mma: expected one of"):
        portable.load("mla_decode", kv_format="fp8", mma="fp4")


def test_auto_picks_fp8_products_from_rows_and_length():
    """"auto" takes fp8 products with two Q parts for the fp8 cache from 16 rows (one part is
    opt-in there: it doubles the error against the unquantized latents) and, from 32 rows, one part for MXFP4
    (whose own rounding dwarfs Q's), with two decoding warpgroups."""
    k = MLADecode(kv_format="fp8")
    assert k.for_heads(32, "sm_90a", 4, 8192).params["mma"] == "fp8x2"     # 128 rows, long
    assert k.for_heads(16, "sm_90a", 2, 4096).params["mma"] == "fp8x2"     # 32 rows
    assert k.for_heads(32, "sm_90a", 4, 1024).params["mma"] == "fp8x2"
    assert k.for_heads(32, "sm_90a", 4, 1023).params["mma"] == "auto"      # too short for e4m3 P: bf16 products
    assert k.for_heads(16, "sm_90a", 1, 8192).params["mma"] == "fp8x2"     # 16 rows too (the regs loop)
    assert k.for_heads(16, "sm_90a", 1, 1023).tiles("sm_90a")["loop"] == "fragments"   # (shorter: bf16 products)
    assert k.for_heads(16, "sm_90a", 1, 8192, batch=4).params["mma"] == "fp8x2"
    assert k.for_heads(16, "sm_90a", 1, 2048, batch=4).params["mma"] == "auto"     # a small batch of short sequences
    assert k.for_heads(16, "sm_90a", 1, 2048, batch=4).tiles("sm_90a")["loop"] == "heads"   # short, small: bf16 products
    assert k.for_heads(32, "sm_90a", 4, 1024, batch=4).params["mma"] == "auto"
    for fmt in ("mxfp4", "bf16"):
        assert MLADecode(kv_format=fmt).for_heads(16, "sm_90a", 1, 1024, batch=4).tiles("sm_90a")["loop"] == "heads"
    assert MLADecode(kv_format="mxfp4").for_heads(16, "sm_90a", 1, 8192, batch=4).tiles("sm_90a")["loop"] == "twin"
    assert k.for_heads(128, "sm_100a", 1, 8192) is k                       # no fp8 products there
    assert MLADecode(kv_format="fp8", mma="bf16").for_heads(32, "sm_90a", 4, 8192).params["mma"] == "bf16"
    assert MLADecode(kv_format="fp8", mma="fp8").for_heads(32, "sm_90a", 4, 8192).params["mma"] == "fp8"
    mx = MLADecode(kv_format="mxfp4")
    assert mx.for_heads(32, "sm_90a", 4, 8192).params["mma"] == "fp8"        # MXFP4 too, from 32 rows ...
    # ... on the regs loop in pairs from 128 rows a sequence, below on the two-warpgroup loop
    assert mx.for_heads(32, "sm_90a", 4, 8192).tiles("sm_90a")["pairs"] == 2
    assert mx.for_heads(32, "sm_90a", 4, 8192).block_threads("sm_90a") == 512
    assert mx.for_heads(16, "sm_90a", 4, 8192).tiles("sm_90a")["scores"] == "one"
    assert mx.for_heads(16, "sm_90a", 4, 8192).block_threads("sm_90a") == 384
    assert MLADecode(kv_format="mxfp4", tuning={"scores": "regs"}).for_heads(16, "sm_90a", 4, 8192).tiles("sm_90a")["scores"] == "regs"
    assert mx.for_heads(32, "sm_90a", 1, 8192).params["mma"] == "fp8"
    assert mx.for_heads(16, "sm_90a", 1, 8192).tiles("sm_90a")["loop"] == "twin"
    assert mx.for_heads(32, "sm_90a", 4, 8192, batch=4).params["mma"] == "fp8"     # ... in a small batch too
    assert mx.for_heads(16, "sm_90a", 1, 8192, batch=4).params["mma"] == "auto"    # (16 rows: the twin loop)
    assert mx.for_heads(32, "sm_90a", 4, 2048, batch=4).params["mma"] == "auto"    # (short, small: bf16 products)
    assert mx.for_heads(32, "sm_90a", 4, 1023).params["mma"] == "auto"
    two = MLADecode(kv_format="fp8", mma="fp8x2").for_heads(32, "sm_90a", 4, 8192)
    assert two.tiles("sm_90a")["scores"] == "regs" and two.block_threads("sm_90a") == 384     # Q in the scorer's registers
    assert MLADecode(kv_format="mxfp4", mma="fp8x2").tiles("sm_90a")["decoders"] == 1     # (slower with two)


def test_error_bars_follow_the_products_a_plan_runs(monkeypatch):
    """verify and the GPU tests read one table: bf16 products 1e-2 / 1e-2, fp8x2 1e-2 / 5e-2,
    fp8 (one Q part) 5e-2 / 5e-2 (max abs, relative L2)."""
    import sys
    from portable.kernels.mla_decode import ERROR_BARS, MLAPlan
    monkeypatch.setattr(sys.modules[MLADecode.__module__], "device_target", lambda index: portable.get_target("sm_90a"))
    none = torch.empty(0)

    def plan(heads, q_max, kv_min, batch):
        return MLAPlan(work=none, token_chunks=none, qo_indptr=none, kv_indptr=none, n_items=0, chunks=1, total_q=0,
                       heads=heads, q_max=q_max, kv_min=kv_min, batch=batch, device_index=0, tiles={})
    fp8 = MLADecode(kv_format="fp8")
    assert fp8.error_bars(plan(32, 4, 8192, 128)) == ERROR_BARS["fp8x2"] == (1e-2, 5e-2)
    assert fp8.error_bars(plan(32, 4, 512, 128)) == ERROR_BARS["bf16"] == (1e-2, 1e-2)
    assert MLADecode(kv_format="fp8", mma="fp8").error_bars(plan(32, 4, 8192, 128)) == (5e-2, 5e-2)
    assert MLADecode(kv_format="mxfp4").error_bars(plan(32, 4, 8192, 128)) == ERROR_BARS["fp8"]
    assert MLADecode(kv_format="bf16").error_bars(plan(128, 1, 8192, 64)) == (1e-2, 1e-2)


@pytest.mark.parametrize("target", portable.targets())
@pytest.mark.parametrize("fmt", ["fp8", "mxfp4"])
@pytest.mark.parametrize("mma", ["fp8", "fp8x2"])
def test_fp8_products_on_the_tile_loop_compile_on_every_target(target, fmt, mma):
    """fp8 products on the tile loop (the form every target but sm_90a runs), both caches:
    the fp8 matrix instruction at the fp8 rate on sm_120a (QMMA) and on gfx942 / gfx950
    (v_mfma_f32_16x16x32_fp8_fp8, every MFMA of the kernel), while sm_90a, sm_100a and sm_103a
    compile mma.sync e4m3 to f16 HMMA pairs (no faster than bf16 there: "auto" never takes it);
    no bf16 products left, no spills, the layout within the target's shared memory."""
    toolchain_or_skip((nvrtc if target.startswith("sm_") else clang_amdgpu).available())
    k = portable.load("mla_decode", kv_format=fmt, mma=mma, tuning={"loop": "tile"})
    r = k.report(target)
    instr = r["instructions"]
    if target.startswith("gfx"):
        assert instr["mfma"] == instr["fp8_mma"] > 0, instr
    elif target == "sm_120a":
        assert instr["fp8_mma"] > 0 and instr["hmma"] == 0, instr
    else:
        assert instr["hmma"] > 0 and instr["fp8_mma"] == 0, instr
    src = k.source(target)
    assert "mma_e4m3(" in src and "mma_bf16(" not in src
    assert src.count("mma_e4m3(acc") == 1 and src.count("mma_e4m3(s[j]") == 1
    assert r["spill_bytes"] == 0 and r["stack_bytes"] == 0 and instr["local_memory"] == 0, r
    L = k.layout(target)
    assert L["bytes"] <= portable.get_target(target).smem_per_block
    # 16-byte stores into Q and K rows, 8-byte operand reads (MFMA) from V^T rows
    assert L["ld8"] % 16 == 0 and L["vt_ld"] % 8 == 0
    assert all(v % 16 == 0 for key, v in L.items() if key not in ("ld8", "vt_ld", "p_ld", "bytes")), L


@pytest.mark.parametrize("mma", ["fp8", "fp8x2"])
def test_mxfp4_third_decoding_warpgroup_compiles(mma):
    """decoders=2 (MXFP4 on fp8 products): 384 threads, registers moved by setmaxnreg (ptxas
    keeps both, none ignored), the same MMAs as with one decoder, wgmma still pipelined; the
    knob refused where it does not apply."""
    toolchain_or_skip(nvrtc.available())
    k = portable.load("mla_decode", kv_format="mxfp4", mma=mma, tuning={"scores": "one", "decoders": 2})
    assert k.block_threads("sm_90a") == 384
    r, b = k.report("sm_90a"), k.binary("sm_90a")
    parts = 2 if mma == "fp8x2" else 1
    assert r["instructions"]["hgmma"] == 2 * 18 * parts + 2 * 2, r
    assert len(re.findall(r"\bUSETMAXREG\b", b.asm)) == 2
    assert_register_pool(k, raised=2, lowered=1)          # the MMA warpgroups up, the decoder down
    assert_wgmma_pipelined(k)
    with pytest.raises(portable.InputError, match="decoders: a knob of MXFP4 on fp8 products"):
        portable.load("mla_decode", kv_format="fp8", mma="fp8x2", tuning={"decoders": 2}).source("sm_90a")
