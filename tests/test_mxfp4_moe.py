"""mxfp4_moe without a GPU: five-target compile with the issue's instruction checks, tiling
data, argument errors before any launch."""
import pytest
import torch

import portable
from portable.backends import clang_amdgpu, nvrtc
from portable.kernels.mxfp4_moe import MXFP4MoE
from portable.kernels.mxfp4_moe.reference import make_moe_inputs
from portable.targets import like, tiling

from conftest import assert_wgmma_pipelined, bench_module, toolchain_or_skip

# the matrix instruction class each target's GEMMs must show, per mode (a target `like` another: its)
EXPECTED = {
    ("sm_90a", "a16w4"): "hmma", ("sm_90a", "a4w4"): "hmma",
    ("sm_100a", "a16w4"): "hmma", ("sm_100a", "a4w4"): "block_scaled_mma",
    ("sm_120a", "a16w4"): "hmma", ("sm_120a", "a4w4"): "block_scaled_mma",
    ("gfx942", "a16w4"): "mfma", ("gfx942", "a4w4"): "mfma",
    ("gfx950", "a16w4"): "mfma", ("gfx950", "a4w4"): "mfma_scale",
}


@pytest.mark.parametrize("tiles", ["skinny", "skinny_wide", "small", "large"])
@pytest.mark.parametrize("mode", ["a16w4", "a4w4"])
@pytest.mark.parametrize("target", portable.targets())
def test_compiles_with_matrix_instructions_and_no_spills(target, mode, tiles):
    toolchain_or_skip((nvrtc if target.startswith("sm_") else clang_amdgpu).available())
    if tiles not in tiling("mxfp4_moe", target):
        pytest.skip(f"no [{tiles}] tiling for {target}")
    moe = portable.load("mxfp4_moe", mode=mode, tuning={"tiles": tiles})
    if tiles == "skinny" and moe.matrix_path(target) != "bf16":     # FP4 instructions take "small"
        with pytest.raises(portable.InputError, match="tiles: 'skinny'"):
            moe.tiles(target)
        return
    rows = moe.reports(target)
    # the skinny gemm2 staged in shared memory is a kernel of its own where the target's tiling has it
    staged = ["moe_gemm2_shared"] if moe.skinny(target) and moe.tiles(target)["shared2_k"] else []
    assert [r["kernel"] for r in rows] == ["moe_gemm1", "moe_gemm2"] + staged
    assert staged == ([] if target != "sm_90a" or not moe.skinny(target) else ["moe_gemm2_shared"])
    for r in rows:
        instr = r["instructions"]
        expected = "hgmma" if moe.mma_path(target).startswith("warpgroup") else EXPECTED[like(target) or target, mode]   # sm_90a large tiles
        assert instr[expected] > 0, (r["kernel"], instr)
        assert r["spill_bytes"] == 0 and r["stack_bytes"] == 0 and instr["local_memory"] == 0, r
        assert r["smem_bytes"] <= portable.get_target(target).smem_per_block


def test_fp4_path_comes_from_the_target_data():
    assert MXFP4MoE(mode="a4w4").matrix_path("gfx950") == "mma4"
    assert MXFP4MoE(mode="a4w4").matrix_path("gfx942") == "bf16"       # CDNA3: no FP4 matrix unit
    assert MXFP4MoE(mode="a16w4").matrix_path("gfx950") == "bf16"      # bf16 activations: bf16 MMA
    src = portable.render("mxfp4_moe", target="sm_120a", mode="a4w4")
    assert "kind::mxf4.block_scale" in src
    assert "kind::mxf4" not in portable.render("mxfp4_moe", target="sm_90a", mode="a4w4")


def test_warpgroup_mma_on_sm90a_large_tiles_from_the_target_data():
    assert MXFP4MoE(tuning={"tiles": "large"}).mma_path("sm_90a") == "warpgroup_rs"
    assert MXFP4MoE(mode="a4w4", tuning={"tiles": "large"}).mma_path("sm_90a") == "warpgroup_rs"      # bf16 path there too
    assert MXFP4MoE(tuning={"tiles": "medium"}).mma_path("sm_90a") == "warpgroup_rs"
    assert MXFP4MoE(tuning={"tiles": "large", "mma": "warpgroup"}).mma_path("sm_90a") == "warpgroup"
    assert MXFP4MoE(tuning={"tiles": "large", "mma": "sync"}).mma_path("sm_90a") == "bf16"
    assert MXFP4MoE(tuning={"tiles": "small"}).mma_path("sm_90a") == "bf16"
    assert MXFP4MoE(tuning={"tiles": "large"}).mma_path("sm_100a") == "bf16"
    with pytest.raises(portable.InputError, match="bm = 16 x warps, bn 32, 64 or 128 and bn2 64, 128 or 256"):
        MXFP4MoE(tuning={"tiles": "large", "mma": "warpgroup", "bm": 64}).source("sm_90a")
    with pytest.raises(portable.InputError, match="bn = 64 x groups, bn2 = 128 x groups"):
        MXFP4MoE(tuning={"tiles": "large", "bn": 64}).source("sm_90a")
    with pytest.raises(portable.InputError, match="large_warpgroup"):
        MXFP4MoE(tuning={"tiles": "large", "mma": "warpgroup"}).source("sm_100a")
    assert MXFP4MoE(tuning={"tiles": "large", "mma": "sync"}).tiles("sm_90a")["bn2"] == 64         # [large], not [large_warpgroup]
    assert MXFP4MoE(tuning={"tiles": "large"}).tiles("sm_90a")["bn2"] == 256


def test_warpgroup_rs_reads_activations_in_its_k_order():
    """The warpgroup_rs GEMMs take x through moe_permute_x (a16w4) or moe_quantize_x (a4w4) in the
    K order its A fragments expect, and gemm1 writes h in that order (store_rs_order)."""
    src = MXFP4MoE(tuning={"tiles": "large"}).source("sm_90a")
    assert "moe_permute_x" in src and "store_rs_order(" in src and "wg_mma_bf16_n128(" in src
    assert "moe_permute_x" not in MXFP4MoE(tuning={"tiles": "large", "mma": "warpgroup"}).source("sm_90a")


def test_medium_tiles_where_the_target_has_them():
    k = MXFP4MoE()
    assert k.pick_tiles(1024 * 4, 128, "sm_90a") == "medium"        # gpt-oss M1024: 32 rows an expert
    assert k.pick_tiles(256 * 9, 33, "sm_90a") == "large"           # R1 E33 M256: 70
    assert k.pick_tiles(2048 * 4, 128, "sm_90a") == "medium"        # gpt-oss M2048: 64
    assert k.pick_tiles(1024 * 9, 33, "sm_90a") == "large"          # R1 E33 M1024: 279
    assert k.pick_tiles(64 * 9, 33, "sm_90a") == "medium"           # R1 E33 M64: 17.5
    assert k.pick_tiles(256 * 9, 257, "sm_90a") == "skinny"         # R1 E257 M256: 9
    assert k.pick_tiles(1024 * 4, 128, "sm_100a") == "large"        # no [medium] there
    rows = MXFP4MoE(tuning={"tiles": "medium"}).reports("sm_90a")
    assert all(r["instructions"]["hgmma"] > 0 and r["spill_bytes"] == 0 for r in rows), rows
    assert MXFP4MoE(tuning={"tiles": "medium", "mma": "sync"}).reports("sm_90a")[0]["instructions"]["hmma"] > 0
    with pytest.raises(portable.InputError, match="no \\[medium\\] tiling"):
        MXFP4MoE(tuning={"tiles": "medium"}).tiles("gfx942")


def test_skinny_k_split_only_while_blocks_are_few():
    """Warps split K by 2 while a split leaves each about four 128-deep slices and the grid has
    fewer than `waves` rounds of resident blocks (the H100: 132 SMs, 4 blocks each)."""
    from portable.kernels.mxfp4_moe import skinny_ksplit
    assert skinny_ksplit(7168, 4) == 4 and skinny_ksplit(256, 4) == 1 and skinny_ksplit(2880, 4) == 4
    assert skinny_ksplit(7168, 4, 41 * 8, 528, 9) == 4          # R1 E257 M4 gemm1: 0.6 rounds unsplit
    assert skinny_ksplit(7168, 4, 329 * 8, 528, 9) == 2         # R1 E257 M64: 5 rounds unsplit, 10 split in 2
    assert skinny_ksplit(7168, 4, 69 * 64, 396, 9) == 1         # R1 E33 M64 (16-row tiles): 11 rounds
    assert skinny_ksplit(7168, 8, 1, 1, 9) == 8                 # a block of 8 warps splits up to 8


def test_gemm2_staged_in_shared_memory_where_k_fits():
    """sm_90a's skinny gemm2 runs from shared memory (moe_gemm2_shared) where the stored d_expert is
    a multiple of 128 up to the tiling's shared2_k and the weights are 16-byte aligned; stage2
    forces either form, and "shared" names what is missing where it cannot run."""
    from portable.kernels.mxfp4_moe.reference import _Sizes
    t = MXFP4MoE(tuning={"tiles": "skinny"}).tiles("sm_90a")
    assert t["shared2_k"] == 256
    assert "moe_gemm2_shared" in portable.render("mxfp4_moe", target="sm_90a", tuning={"tiles": "skinny"})
    assert "moe_gemm2_shared" not in portable.render("mxfp4_moe", target="sm_90a", tuning={"tiles": "skinny", "stage2": "registers"})
    assert "moe_gemm2_shared" not in portable.render("mxfp4_moe", target="gfx942", tuning={"tiles": "skinny"})
    w, sc = torch.empty(64, dtype=torch.uint8), torch.empty(64, dtype=torch.uint8)
    fits = MXFP4MoE(tuning={"tiles": "skinny"}).shared2_fits
    assert fits(t, _Sizes(257, 7168, 256, 7168, 256), w, sc)
    assert fits(t, _Sizes(8, 256, 128, 200, 72), w, sc)
    assert not fits(t, _Sizes(8, 256, 384, 256, 384), w, sc)          # K past the buffer
    assert not fits(t, _Sizes(8, 256, 160, 256, 160), w, sc)          # not whole 128-value slices
    assert not fits(t, _Sizes(8, 256, 256, 256, 256), w[1:], sc)       # misaligned weights
    assert not MXFP4MoE(tuning={"tiles": "skinny", "stage2": "registers"}).shared2_fits(t, _Sizes(8, 256, 256, 256, 256), w, sc)
    with pytest.raises(portable.InputError, match="stage2: 'shared' needs .*got 384"):
        MXFP4MoE(tuning={"tiles": "skinny", "stage2": "shared"}).shared2_fits(t, _Sizes(8, 256, 384, 256, 384), w, sc)


def test_tile_choice_and_variants():
    k = MXFP4MoE()
    assert k.pick_tiles(4 * 9, 257, "sm_90a") == "skinny"
    assert k.pick_tiles(256 * 9, 257, "sm_90a") == "skinny"         # R1 E257 M256: 9 rows an expert
    assert k.pick_tiles(13 * 33, 33, "sm_90a") == "skinny_wide"     # 13 pairs an expert (from 16: medium)
    assert k.pick_tiles(13 * 33, 33, "sm_100a") == "skinny"         # no [skinny_wide] there
    assert MXFP4MoE(tuning={"tiles": "skinny_wide"}).tiles("sm_90a")["bm"] == 16
    wide = MXFP4MoE(tuning={"tiles": "skinny_wide"}).tiles("sm_90a")
    assert wide["ahead"] == 2 and wide["mt2"] == 1       # the [skinny] row below its own values
    assert MXFP4MoE(mode="a4w4").pick_tiles(4 * 9, 257, "sm_90a") == "skinny"     # bf16 path
    assert MXFP4MoE(mode="a4w4").pick_tiles(4 * 9, 257, "sm_120a") == "small"     # FP4 instructions
    assert k.pick_tiles(1024 * 9, 33, "sm_90a") == "large"
    assert k.variant("large") is k.variant("large") and k.variant("large").tiles("sm_90a")["bm"] == 128
    assert k.variant("large").tiles("gfx942")["bm"] == 64            # 64 KB of LDS


def test_auto_variant_takes_the_deep_medium_tiles_from_d_hidden():
    k = MXFP4MoE()
    deep = k.auto_variant(64 * 9, 33, 7168, "sm_90a")                # R1 E33 M64: medium, d_hidden 7168
    assert deep.tuning["tiles"] == "medium" and deep.tiles("sm_90a")["ahead"] == 2 == deep.tiles("sm_90a")["ahead2"]
    assert deep.rs_h16("sm_90a") and not k.variant("medium").rs_h16("sm_90a")      # gemm2 in f16 there only
    wide = k.auto_variant(64 * 9, 33, 7168, "sm_90a", 64 * 1024)                # an h too wide for rescale_h
    assert wide.tiles("sm_90a")["ahead"] == 2 and not wide.rs_h16("sm_90a")
    assert deep is k.auto_variant(64 * 9, 33, 7168, "sm_90a")        # cached
    plain = k.auto_variant(1024 * 4, 128, 2880, "sm_90a")            # gpt-oss M1024: medium, d_hidden 2880
    assert plain.tuning["tiles"] == "medium" and plain.tiles("sm_90a")["ahead"] == 3
    assert k.auto_variant(4 * 9, 257, 7168, "sm_90a").tuning["tiles"] == "skinny"     # other kinds as they are
    assert MXFP4MoE(tuning={"ahead": 3}).auto_variant(64 * 9, 33, 7168, "sm_90a").tiles("sm_90a")["ahead"] == 3   # the caller's stays


def test_kernels_launched_overlapped_wait_for_the_one_before():
    """Every kernel launched overlapped after moe_route has griddepcontrol.wait (ACQBULK in the
    SASS) on CUDA; HIP compiles the same template with no-ops."""
    for tiles, mode in (("skinny", "a4w4"), ("large", "a16w4")):
        k = MXFP4MoE(mode=mode, tuning={"tiles": tiles})
        sass = k.binary("sm_90a").asm
        names = ["moe_gemm1", "moe_gemm2", "moe_combine"] + (["moe_quantize_x", "moe_quantize_h"] if tiles == "skinny" else [])
        for name in names:
            assert "ACQBULK" in nvrtc.kernel_sass(sass, name), (tiles, name)
        assert k.binary("gfx942").code
    # x's pass reads nothing moe_route writes: it waits only after its last store, running beside it
    for tiles, name in (("skinny", "moe_quantize_x"), ("medium", "moe_permute_x")):
        body = nvrtc.kernel_sass(MXFP4MoE(mode="a4w4" if tiles == "skinny" else "a16w4", tuning={"tiles": tiles}).binary("sm_90a").asm, name)
        assert body.rindex("ACQBULK") > body.rindex("STG"), name


def test_r1_medium_h_kept_in_the_l2_then_discarded():
    """R1's medium tiles (f16 h) store gemm1's h with an L2 evict_last policy, x's pass does not,
    and moe_combine drops lines from the L2 (discard.global.L2: CCTL.E.RML2), so no kept line
    outlives the call; HIP spells both as a plain store and nothing."""
    k = MXFP4MoE().auto_variant(64 * 9, 33, 7168, "sm_90a")          # R1 E33 M64: medium_deep
    src = k.source("sm_90a")
    assert "createpolicy.fractional.L2::evict_last" in src
    assert src.count("store_rs_order_f16<true>(") == 1 and src.count("store_rs_order_f16<false>(") == 1
    assert "CCTL.E.RML2" in nvrtc.kernel_sass(k.binary("sm_90a").asm, "moe_combine")
    hip = MXFP4MoE().source("gfx942")
    assert "createpolicy" not in hip and "discard_l2(" in hip


def test_compare_counts_error_beyond_the_bf16_output_rounding():
    """Issue 5's max-abs bar (5e-2 x RMS) past the bf16 output's own rounding: an output 40 x RMS
    rounds by more than the bar alone and passes; the same output off by 4 bf16 ulps does not."""
    from portable.kernels.mxfp4_moe import compare
    want = torch.ones(1600)
    want[0] = 40.1                                     # RMS ~1.41: the half-ulp 0.125 is 8.8e-2 x RMS
    assert compare(want.to(torch.bfloat16), want)[0]
    off = want.clone()
    off[0] += 1.0
    ok, detail = compare(off.to(torch.bfloat16), want)
    assert not ok and "beyond bf16 rounding" in detail, detail
    # an exact zero rounds to itself: no allowance there (the RMS here is 1e-2, the error 0.15 x RMS)
    small = torch.full((1600,), 1e-2)
    small[0] = 0.0
    wrong = small.clone()
    wrong[0] = 1.5e-3
    assert not compare(wrong.to(torch.bfloat16), small)[0]


def test_weight_loads_ask_the_l2_for_256_byte_blocks():
    """sm_90a's weight loads carry the L2 fetch-size hint (LTC256B in the SASS) in both GEMMs of the
    skinny, medium and large tiles (bench/NOTES.md mxfp4_moe v19); with wfetch "tma" (the medium
    tiles' default) both GEMMs copy them by tensor-map boxes (UTMALDG) instead; the HIP build loads
    plainly."""
    for tiles, over in (("skinny", {}), ("medium", {"wfetch": "registers"}), ("large", {})):
        sass = MXFP4MoE(tuning={"tiles": tiles, **over}).binary("sm_90a").asm
        for name in ("moe_gemm1", "moe_gemm2"):
            assert "LDG.E.LTC256B.128.CONSTANT" in nvrtc.kernel_sass(sass, name), (tiles, name)
    sass = MXFP4MoE(tuning={"tiles": "medium"}).binary("sm_90a").asm
    for name in ("moe_gemm1", "moe_gemm2"):
        body = nvrtc.kernel_sass(sass, name)
        assert "UTMALDG.2D" in body and "LDG.E.LTC256B.128.CONSTANT" not in body, name
    assert "global_load_dwordx4" in MXFP4MoE(tuning={"tiles": "skinny"}).binary("gfx942").asm


def test_one_barrier_a_pair_of_k_slices():
    """bpair: R1's medium tiles (the auto variant from medium_deep_from_hidden) take one block
    barrier a pair of K slices in both GEMMs' K loops (each loop body two slices, 16 HGMMA: 1
    BAR.SYNC against 2); callers asking for TMA weights or another matrix path do not get it (with
    mma "warpgroup" or "sync" the auto variant was refused before), and asking for it where it
    cannot apply is refused by name (bench/NOTES.md mxfp4_moe v28)."""
    sass_loops = bench_module("sass_loops")
    auto = portable.load("mxfp4_moe").auto_variant(576, 33, 7168, "sm_90a", 2048)
    assert auto.tuning["bpair"] == "both"
    for bpair, barriers in (("none", 2), ("both", 1)):
        code = auto.variant("medium", **{**{k: v for k, v in auto.tuning.items() if k != "tiles"}, "bpair": bpair}).binary("sm_90a").code
        for name in ("moe_gemm1", "moe_gemm2"):
            insns, labels = sass_loops.instructions(code, name)
            k_loops = [body for body in sass_loops.loops(insns, labels) if sum("HGMMA" in x["op"] for x in body) == 16]
            assert k_loops and all(sum("BAR.SYNC" in x["op"] for x in body) == barriers for body in k_loops), (bpair, name)
    for over in ({"wfetch": "tma"}, {"mma": "warpgroup"}, {"mma": "sync"}):     # it does not apply there: left out
        v = portable.load("mxfp4_moe", tuning=over).auto_variant(576, 33, 7168, "sm_90a", 2048)
        assert v.tuning["bpair"] == "" and v.template_context("sm_90a")["BPAIR"] == 0, over
    with pytest.raises(portable.InputError, match="bpair 'both'.*wfetch 'registers' and an even number of stages"):
        portable.load("mxfp4_moe", tuning={"tiles": "medium", "bpair": "both"}).binary("sm_90a")


def test_wgmma_pipeline_not_serialized():
    """ptxas keeps the warpgroup tiles' wgmma pipelined: no C7511 advisory ("wgmma.mma_async
    instructions are serialized") in their compile log; a slice body written twice brought it
    (bench/NOTES.md mxfp4_moe v20: E33 M1024 1765.6 -> 2257.8 us)."""
    for params in ({"tiles": "medium"}, {"tiles": "large"}, {"tiles": "large", "mma": "warpgroup"}):
        assert_wgmma_pipelined(MXFP4MoE(tuning=params), params)


def test_errors_before_any_launch():
    inp = make_moe_inputs(4, 4, 64, 32, 2, seed=0)
    moe = portable.load("mxfp4_moe")
    with pytest.raises(portable.InputError, match="hidden_states: expected a tensor on a GPU"):
        moe(**inp)
    with pytest.raises(portable.InputError, match="mode"):
        portable.load("mxfp4_moe", mode="a8w8")
    with pytest.raises(portable.InputError, match="topk_ids"):
        moe(**dict(inp, topk_ids=inp["topk_ids"].long()))
