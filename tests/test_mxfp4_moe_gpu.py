"""mxfp4_moe on a GPU: both modes against the fp32 reference of the same mode, on fresh random
inputs, outputs poisoned with NaN first (every element must be written)."""
import pytest
import torch

import portable
from portable.device import device_target
from portable.formats import scale_row_max
from portable.kernels.mxfp4_moe import compare
from portable.targets import tiling
from portable.kernels.mxfp4_moe.reference import make_moe_inputs, moe_reference
from portable.timing import capture

from conftest import refill

pytestmark = pytest.mark.gpu

# (M, E, d_hidden, d_expert, topk) + make_moe_inputs options
CASES = {
    "M1": ((1, 8, 256, 128, 2), {}),
    "empty experts, repeats, shared": ((37, 16, 512, 256, 4), {"active_experts": 6, "repeat_experts": True,
                                                                "shared_experts": 1}),
    "padded dims": ((19, 6, 200, 72, 2), {"pad_to": 256}),
    "partial K slice": ((24, 12, 2880, 2880, 4), {}),
    "large tiles": ((300, 8, 512, 256, 3), {"shared_experts": 1}),
    "R1-like": ((64, 33, 7168, 256, 8), {"shared_experts": 1}),
}


def load_tiles(mode, tiles, **knobs):
    """The kernel with `tiles` (and other tuning knobs), skipping a kind this GPU's target has no
    tiling for ("medium")."""
    if tiles not in tiling("mxfp4_moe", device_target(torch.cuda.current_device()).name):
        pytest.skip(f"no [{tiles}] tiling for this GPU's target")
    return portable.load("mxfp4_moe", mode=mode, tuning={"tiles": tiles, **knobs})


def run_poisoned(moe, inp, **kw):
    out = torch.full((inp["hidden_states"].shape[0], inp["hidden_states"].shape[1]), float("nan"),
                     device="cuda", dtype=torch.bfloat16)
    moe(**inp, out=out, **kw)
    torch.cuda.synchronize()
    return out


@pytest.mark.parametrize("mode", ["a16w4", "a4w4"])
@pytest.mark.parametrize("case", list(CASES))
def test_matches_reference(case, mode):
    args, opts = CASES[case]
    inp = make_moe_inputs(*args, seed=torch.seed() % (1 << 31), device="cuda", **opts)
    moe = portable.load("mxfp4_moe", mode=mode)
    out = run_poisoned(moe, inp)
    ok, detail = compare(out, moe_reference(**inp, mode=mode))
    assert ok, f"{case} {mode}: {detail}"


@pytest.mark.parametrize("mode", ["a16w4", "a4w4"])
@pytest.mark.parametrize("tiles", ["skinny", "skinny_wide", "small", "medium", "large"])
def test_both_tilings_and_bitwise_repeatable(mode, tiles):
    inp = make_moe_inputs(96, 10, 1024, 512, 4, seed=torch.seed() % (1 << 31), device="cuda", shared_experts=1)
    moe = load_tiles(mode, tiles)
    first = run_poisoned(moe, inp)
    ok, detail = compare(first, moe_reference(**inp, mode=mode))
    assert ok, detail
    assert torch.equal(first, run_poisoned(moe, inp))       # the combine is deterministic


@pytest.mark.parametrize("mode", ["a16w4", "a4w4"])
@pytest.mark.parametrize("case,tiles,params", [
    ("large tiles", "large", {}), ("partial K slice", "large", {"ahead": 1, "ahead2": 1, "gemm1_type": "bf16"}),
    ("padded dims", "large", {"bm": 256, "groups": 1, "bn": 64, "bn2": 128, "stages": 3}),
    ("R1-like", "large", {"stages": 6}), ("large tiles", "medium", {}), ("partial K slice", "medium", {}),
    ("large tiles", "large", {"mma": "warpgroup"}), ("partial K slice", "medium", {"mma": "warpgroup"}),
    ("partial K slice", "medium", {"gemm1_type": "bf16"}), ("padded dims", "large", {"gemm1_type": "f16"}),
    ("R1-like", "medium", {"gemm1_type": "bf16"}), ("R1-like", "medium", {"ahead": 2, "ahead2": 2}), ("large tiles", "large", {"gemm1_type": "f16", "groups": 1, "bn": 64, "bn2": 128}),
    ("partial K slice", "medium", {"gemm2_type": "f16"}), ("padded dims", "large", {"gemm2_type": "f16"}),
    ("large tiles", "medium", {"gemm2_type": "f16", "gemm1_type": "bf16", "raster": "tile"}), ("R1-like", "medium", {"gemm2_type": "bf16"}),
    ("large tiles", "large", {"gemm2_type": "f16", "h_wait": "grid"}), ("padded dims", "medium", {"gemm2_type": "f16", "overlap": 0})])
def test_warpgroup_rs_tiles(case, tiles, params, mode):
    """Weights decoded into the A registers of warpgroup MMA (mxfp4_moe_rs.j2): the
    permuted K order of x and h, partial 128-value slices (2880), padded dims, 64-256 pairs a tile
    (products 16-256 wide), one or two 64-row weight groups a warpgroup, 3-6 stages, one or two
    weight slices ahead, gemm1 in f16 (the default) and in bf16; bitwise repeatable. The
    shared-tile form ("warpgroup") is checked too. gemm2 in f16 and bf16, its h waited for per
    tile (both rasters), for all of gemm1, and after a plain launch."""
    params = {"mma": "warpgroup_rs", **params}
    if f"{tiles}_{params['mma']}" not in tiling("mxfp4_moe", device_target(torch.cuda.current_device()).name):
        pytest.skip(f"no [{tiles}_{params['mma']}] tiling for this GPU's target")
    args, opts = CASES[case]
    inp = make_moe_inputs(*args, seed=torch.seed() % (1 << 31), device="cuda", **opts)
    moe = portable.load("mxfp4_moe", mode=mode, tuning={"tiles": tiles, **params})
    first = run_poisoned(moe, inp)
    ok, detail = compare(first, moe_reference(**inp, mode=mode))
    assert ok, f"{case} {tiles} {params} {mode}: {detail}"
    assert torch.equal(first, run_poisoned(moe, inp))


@pytest.mark.parametrize("params", [{"ahead": 1, "mt": 1}, {"ahead": 2, "mt": 2, "min_blocks": 3},
                                    {"ahead": 3, "mt": 4, "min_blocks": 2, "ahead2": 1, "mt2": 4, "min_blocks2": 2},
                                    {"ahead": 2, "xahead": 3, "min_blocks": 2, "xahead2": 2},
                                    {"ahead": 3, "xahead": 2, "ahead2": 2, "xahead2": 3, "min_blocks2": 2},
                                    {"raster": "column", "mt2": 4, "min_blocks2": 2},
                                    {"ksplit": 1, "ksplit2": 2}, {"ksplit": 2, "ksplit2": 1}])
def test_skinny_ring_depths_and_row_tiles(params):
    """The register rings of weights and activations (odd and even depths, unequal), the
    grid's column-first order, the weight tiles a warp and the K splits, on 2880-wide K (partial
    slices, split over warps) and 2880 rows (a partial last tile group)."""
    inp = make_moe_inputs(24, 12, 2880, 2880, 4, seed=torch.seed() % (1 << 31), device="cuda")
    moe = portable.load("mxfp4_moe", tuning={"tiles": "skinny", **params})
    ok, detail = compare(run_poisoned(moe, inp), moe_reference(**inp))
    assert ok, detail


@pytest.mark.parametrize("mode", ["a16w4", "a4w4"])
@pytest.mark.parametrize("tiles,params", [("skinny", {}), ("skinny_wide", {}),
                                          ("skinny", {"shared2_warps": 8, "shared2_mt": 2, "shared2_min_blocks": 3})])
@pytest.mark.parametrize("case", ["M1", "padded dims", "R1-like", "rows past Dh"])
def test_gemm2_staged_in_shared_memory(case, tiles, params, mode):
    """The skinny gemm2 from shared memory (moe_gemm2_shared) against the register ring: the same
    bits (the same K steps), and the reference; stored d_expert 128 and 256, d_expert short of it
    (h zero-filled past it), a block's rows past Dh (224 rows against 128- and 256-row blocks),
    padding columns; 8- and 16-column tiles, 4 and 8 warps a block."""
    if not tiling("mxfp4_moe", device_target(torch.cuda.current_device()).name)["skinny"].get("shared2_k"):
        pytest.skip("this GPU's target has no shared-memory skinny gemm2")
    args, opts = CASES[case] if case in CASES else ((5, 6, 224, 128, 2), {})
    inp = make_moe_inputs(*args, seed=torch.seed() % (1 << 31), device="cuda", **opts)
    got = {st: run_poisoned(portable.load("mxfp4_moe", mode=mode, tuning={"tiles": tiles, "stage2": st, **params}), inp)
           for st in ("shared", "registers")}
    ok, detail = compare(got["shared"], moe_reference(**inp, mode=mode))
    assert ok, f"{case} {mode}: {detail}"
    assert torch.equal(got["shared"], got["registers"]), case


@pytest.mark.parametrize("stage2", ["", "registers"])
@pytest.mark.parametrize("params", [{}, {"ksplit": 1}, {"ksplit": 2, "mt": 2, "min_blocks": 3}])
@pytest.mark.parametrize("case", ["M1", "partial K slice", "R1-like"])
def test_gemm2_waits_per_tile(case, params, stage2):
    """The skinny gemm2 starting on each tile once gemm1's warps have signalled its h (h_wait
    "tile", counters zeroed by moe_route every call) against waiting for all of gemm1 ("grid"):
    the same bits, three calls in a row, and the reference; gemm2 from shared memory and from
    its register ring, gemm1's K split 1, 2 or 4 ways (each K part 0 warp signals)."""
    args, opts = CASES[case]
    inp = make_moe_inputs(*args, seed=torch.seed() % (1 << 31), device="cuda", **opts)
    grid = run_poisoned(portable.load("mxfp4_moe", tuning={"tiles": "skinny", "stage2": stage2, "h_wait": "grid", **params}), inp)
    moe = portable.load("mxfp4_moe", tuning={"tiles": "skinny", "stage2": stage2, **params})
    for _ in range(3):
        assert torch.equal(run_poisoned(moe, inp), grid), f"{case} {params} {stage2}"
    ok, detail = compare(grid, moe_reference(**inp))
    assert ok, detail


@pytest.mark.parametrize("mode", ["a16w4", "a4w4"])
@pytest.mark.parametrize("raster", ["tile", "column"])
@pytest.mark.parametrize("tiles,case", [("medium", "empty experts, repeats, shared"), ("medium", "padded dims"),
                                        ("large", "large tiles"), ("medium", "R1-like")])
def test_warpgroup_gemm2_waits_per_tile(tiles, case, raster, mode):
    """The warpgroup_rs gemm2 starting on each tile once every gemm1 block of it has signalled its
    part of h (h_wait "tile") against waiting for all of gemm1 ("grid"), with the grid over tiles
    first or over a tile's column groups first: the same bits, three calls in a row, and the
    reference."""
    if load_tiles(mode, tiles).mma_path(device_target(torch.cuda.current_device()).name) != "warpgroup_rs":
        pytest.skip("this GPU's target has no warpgroup_rs tiles")
    args, opts = CASES[case]
    inp = make_moe_inputs(*args, seed=torch.seed() % (1 << 31), device="cuda", **opts)
    grid = run_poisoned(portable.load("mxfp4_moe", mode=mode, tuning={"tiles": tiles, "raster": raster, "h_wait": "grid"}), inp)
    moe = portable.load("mxfp4_moe", mode=mode, tuning={"tiles": tiles, "raster": raster})
    for _ in range(3):
        assert torch.equal(run_poisoned(moe, inp), grid), f"{case} {tiles} {raster} {mode}"
    ok, detail = compare(grid, moe_reference(**inp, mode=mode))
    assert ok, detail


@pytest.mark.parametrize("tiles", ["skinny", "medium", "large"])
def test_cuda_graph_replay(tiles):
    """A call captured in a CUDA graph (check_ids=False: no host read) replays to the eager call's
    bits, and to the new result after new inputs are copied into the captured tensors."""
    moe = load_tiles("a16w4", tiles)
    inp = make_moe_inputs(37, 16, 512, 256, 4, seed=torch.seed() % (1 << 31), device="cuda", shared_experts=1)
    out = torch.empty(37, 512, device="cuda", dtype=torch.bfloat16)
    graph, _ = capture(lambda: moe(**inp, out=out, check_ids=False))
    for seed in (1, 2):
        fresh = make_moe_inputs(37, 16, 512, 256, 4, seed=seed, device="cuda", shared_experts=1)
        refill(inp, fresh)
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, run_poisoned(moe, fresh)), seed


@pytest.mark.parametrize("mode", ["a16w4", "a4w4"])
def test_overlapped_launches_change_no_bit(mode):
    """overlap=1 (programmatic dependent launches) against plain launches, skinny and large."""
    for tiles in ("skinny", "large"):
        inp = make_moe_inputs(37, 16, 512, 256, 4, seed=torch.seed() % (1 << 31), device="cuda", shared_experts=1)
        got = [run_poisoned(portable.load("mxfp4_moe", mode=mode, tuning={"tiles": tiles, "overlap": o}), inp) for o in (1, 0)]
        assert torch.equal(got[0], got[1]), tiles


@pytest.mark.parametrize("mode", ["a16w4", "a4w4"])
@pytest.mark.parametrize("tiles", ["skinny", "medium", "large"])
def test_tokens_at_far_apart_scales(mode, tiles):
    """2880-wide K (a partial last slice) and 2880 rows, tokens whose activations differ by up to
    2^40, each checked against its own scale (the warpgroup_rs gemm1 scales each token into f16)."""
    moe = load_tiles(mode, tiles)
    inp = make_moe_inputs(24, 12, 2880, 2880, 4, seed=torch.seed() % (1 << 31), device="cuda")
    powers = torch.tensor([2.0 ** (10 * (i % 5) - 20) for i in range(24)], device="cuda")
    inp["hidden_states"] = (inp["hidden_states"].float() * powers[:, None]).to(torch.bfloat16)
    want = moe_reference(**inp, mode=mode)
    got = run_poisoned(moe, inp)
    for i in range(24):
        ok, detail = compare(got[i:i + 1], want[i:i + 1])
        assert ok, f"token {i} (x times 2^{10 * (i % 5) - 20}): {detail}"


@pytest.mark.parametrize("mode", ["a16w4", "a4w4"])
@pytest.mark.parametrize("tiles", ["skinny", "skinny_wide", "small", "medium", "large"])
def test_smallest_block_scales(mode, tiles):
    """w13 blocks at the four smallest E8M0 scales (2^-127 .. 2^-124: the first two are bf16
    subnormals in the decode's scale multiply) against x scaled by 2^100 so they matter."""
    inp = make_moe_inputs(40, 8, 512, 256, 2, seed=torch.seed() % (1 << 31), device="cuda")
    inp["w13_scale"] = torch.randint(0, 4, inp["w13_scale"].shape, dtype=torch.uint8, device="cuda")
    inp["hidden_states"] = inp["hidden_states"] * 2.0 ** 100
    moe = load_tiles(mode, tiles)
    ok, detail = compare(run_poisoned(moe, inp), moe_reference(**inp, mode=mode))
    assert ok, detail


@pytest.mark.parametrize("mode", ["a16w4", "a4w4"])
@pytest.mark.parametrize("tiles", ["skinny", "medium", "large"])
@pytest.mark.parametrize("shift", [7, 60])
def test_block_scales_above_two(shift, mode, tiles):
    """Every block scale of both weights raised by 2^shift (the inputs' codes 120-123 become
    127-130 or 180-183: block scales past 2, up to 2^56), x scaled by 2^(-2 shift) so the
    products stay in range, against the reference (the other end of test_smallest_block_scales)."""
    inp = make_moe_inputs(40, 8, 512, 256, 2, seed=torch.seed() % (1 << 31), device="cuda")
    for key in ("w13_scale", "w2_scale"):
        inp[key] = inp[key] + shift
    inp["hidden_states"] = inp["hidden_states"] * 2.0 ** (-2 * shift)
    moe = load_tiles(mode, tiles)
    ok, detail = compare(run_poisoned(moe, inp), moe_reference(**inp, mode=mode))
    assert ok, detail


@pytest.mark.parametrize("mode", ["a16w4", "a4w4"])
@pytest.mark.parametrize("tiles", ["medium", "large"])
def test_block_scales_spread_within_a_row(mode, tiles):
    """Every block of w13 at its own scale, 2^-27 .. 2^4 (codes 100-131), so one row's blocks span
    2^31: the f16 gemm1 scales each weight row by its largest block (blocks far below it round);
    with gemm2 in f16 one pair's h then spans far more than f16 does (rescale_h rounds the groups
    far below the row's largest). a4w4 is held to the relative L2 bar only: its FP4 roundings of h
    flip between the kernel's and the reference's sum orders (mxfp4_moe/reference.py), and here a
    flipped value of a pair's dominant block moved one output 6.0e-2 x RMS (relative L2 2.9e-3)."""
    inp = make_moe_inputs(40, 8, 1024, 256, 2, seed=torch.seed() % (1 << 31), device="cuda")
    inp["w13_scale"] = torch.randint(100, 132, inp["w13_scale"].shape, dtype=torch.uint8, device="cuda")
    for gemm2_type in ("bf16", "f16"):
        moe = load_tiles(mode, tiles, gemm2_type=gemm2_type)
        ok, detail = compare(run_poisoned(moe, inp), moe_reference(**inp, mode=mode),
                             atol_rel=5e-2 if mode == "a16w4" else float("inf"))
        assert ok, f"gemm2 {gemm2_type}: {detail}"


def spread_scales(shape):
    """Block codes 100-131 (2^-27 .. 2^4) with each row's first at 131 or 132: every row spans 2^31
    and has its own largest code (a row read at another's overflows f16), while the outputs keep
    one magnitude. Random codes in every block make a few outputs ride on one block 2^31 above the
    rest: their bf16 rounding in ybuf then measured 6.3-6.9e-2 x RMS (gemm2 in bf16 and f16 alike)
    against the 5e-2 bar, which compare now counts beyond the bf16 output's own rounding."""
    codes = torch.randint(100, 132, shape, dtype=torch.uint8, device="cuda")
    codes[..., 0] = torch.randint(131, 133, shape[:-1], dtype=torch.uint8, device="cuda")
    return codes


@pytest.mark.parametrize("tiles", ["medium", "large"])
def test_w2_block_scales_spread_within_a_row(tiles):
    """The same for w2's blocks: the f16 gemm2's per-row scale (a16w4; gemm2 in bf16 scales each
    block on its own). With h rounded to bf16 (gemm2 in bf16) such weights, where an output rides
    on one block of 32 products, measured 5.3e-2 x RMS against the 5e-2 bar; in f16 h keeps three
    more bits. a4w4's h roundings flip between the kernel and the reference (mxfp4_moe/reference.py)."""
    inp = make_moe_inputs(40, 8, 1024, 256, 2, seed=torch.seed() % (1 << 31), device="cuda")
    inp["w2_scale"] = spread_scales(inp["w2_scale"].shape)
    moe = load_tiles("a16w4", tiles, gemm2_type="f16")
    ok, detail = compare(run_poisoned(moe, inp), moe_reference(**inp))
    assert ok, detail


@pytest.mark.parametrize("case,tiles,spread", [("R1-like", "medium", False), ("partial K slice", "medium", False),
                                               ("large tiles", "medium", True), ("padded dims", "large", False)])
def test_given_row_maxima_change_no_bit(case, tiles, spread):
    """w13_row_max and w2_row_max (scale_row_max of the scales, given where the weights are loaded)
    in place of the f16 GEMMs' scans: the same bits, on the medium and large rs tiles in f16, block
    scales spread over 2^31 inside a row among them."""
    params = {"gemm1_type": "f16", "gemm2_type": "f16"}
    if f"{tiles}_warpgroup_rs" not in tiling("mxfp4_moe", device_target(torch.cuda.current_device()).name):
        pytest.skip(f"no [{tiles}_warpgroup_rs] tiling for this GPU's target")
    args, opts = CASES[case]
    inp = make_moe_inputs(*args, seed=torch.seed() % (1 << 31), device="cuda", **opts)
    if spread:
        for key in ("w13_scale", "w2_scale"):
            inp[key] = spread_scales(inp[key].shape)
    moe = portable.load("mxfp4_moe", tuning={"tiles": tiles, **params})
    scanned = run_poisoned(moe, inp)
    given = run_poisoned(moe, inp, w13_row_max=scale_row_max(inp["w13_scale"]), w2_row_max=scale_row_max(inp["w2_scale"]))
    ok, detail = compare(given, moe_reference(**inp))
    assert ok, f"{case} {tiles}: {detail}"
    assert torch.equal(given, scanned)


@pytest.mark.parametrize("case,tiles,params", [
    ("R1-like", "medium", {"gemm2_type": "f16", "ahead": 2, "ahead2": 2}), ("partial K slice", "medium", {"wstages": 2}),
    ("padded dims", "large", {"wstages": 3}), ("large tiles", "large", {"gemm1_type": "bf16", "wstages": 6}),
    ("large tiles", "medium", {"gemm2_type": "f16", "overlap": 0}), ("empty experts, repeats, shared", "medium", {"raster": "tile"})])
def test_weights_by_tensor_map_change_no_bit(case, tiles, params):
    """wfetch "tma" (the rs tiles' weights copied by tensor-map boxes into shared stages) against the
    lanes' own loads: the same K steps, so the same bits; 2-6 stages, one and two 64-row groups, a
    partial last K slice (2880), padded dims (rows past the expert's read and dropped), gemm1 and
    gemm2 in f16 and bf16, overlapped and plain launches; then in a CUDA graph (the maps travel
    by value with the launch)."""
    if f"{tiles}_warpgroup_rs" not in tiling("mxfp4_moe", device_target(torch.cuda.current_device()).name):
        pytest.skip(f"no [{tiles}_warpgroup_rs] tiling for this GPU's target")
    args, opts = CASES[case]
    inp = make_moe_inputs(*args, seed=torch.seed() % (1 << 31), device="cuda", **opts)
    loads = run_poisoned(portable.load("mxfp4_moe", tuning={"tiles": tiles, "wfetch": "registers", **params}), inp)
    moe = portable.load("mxfp4_moe", tuning={"tiles": tiles, "wstages": 4, **params, "wfetch": "tma"})
    tma = run_poisoned(moe, inp)
    ok, detail = compare(tma, moe_reference(**inp))
    assert ok, f"{case} {tiles} {params}: {detail}"
    assert torch.equal(tma, loads)
    out = torch.full_like(tma, float("nan"))
    graph, _ = capture(lambda: moe(**inp, out=out, check_ids=False))
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, tma)


@pytest.mark.parametrize("case,tiles,params", [
    ("R1-like", "medium", {"gemm2_type": "f16", "ahead": 2, "ahead2": 2}),
    ("partial K slice", "medium", {"ahead": 2, "ahead2": 2, "mode": "a4w4"}),
    ("padded dims", "large", {}), ("large tiles", "large", {"stages": 6}),
    ("empty experts, repeats, shared", "medium", {"ahead": 3, "ahead2": 3})])
def test_one_barrier_a_group_of_slices_changes_no_bit(case, tiles, params):
    """bpair (the rs K loop's block barrier and B copies once a group of stages / 2 K slices)
    against one a slice: the same MMAs in the same order, so the same bits; groups of 2 and 3
    slices, a last group of one slice (2880: 23 slices), an odd `ahead` (the group found by the
    slice's index), both GEMMs, both modes."""
    if f"{tiles}_warpgroup_rs" not in tiling("mxfp4_moe", device_target(torch.cuda.current_device()).name):
        pytest.skip(f"no [{tiles}_warpgroup_rs] tiling for this GPU's target")
    args, opts = CASES[case]
    inp = make_moe_inputs(*args, seed=torch.seed() % (1 << 31), device="cuda", **opts)
    mode = params.get("mode", "a16w4")
    base = {"tiles": tiles, "wfetch": "registers", **{k: v for k, v in params.items() if k != "mode"}}
    each = run_poisoned(portable.load("mxfp4_moe", mode=mode, tuning={**base, "bpair": "none"}), inp)
    grouped = run_poisoned(portable.load("mxfp4_moe", mode=mode, tuning={**base, "bpair": "both"}), inp)
    ok, detail = compare(grouped, moe_reference(**inp, mode=mode))
    assert ok, f"{case} {tiles} {params}: {detail}"
    assert torch.equal(grouped, each)


def test_unaligned_arrays_refused_before_any_launch():
    """hidden_states, w13 and w2 are read 16 bytes at a time (the weights also as tensor-map
    arrays): an 8-byte aligned one is refused by name, on every tiling, before any launch."""
    inp = make_moe_inputs(37, 16, 512, 256, 4, seed=torch.seed() % (1 << 31), device="cuda", shared_experts=1)
    for name in ("hidden_states", "w13", "w2"):
        t = inp[name]
        shifted = torch.empty(t.numel() * t.element_size() + 8, device="cuda", dtype=torch.uint8)[8:]
        shifted = shifted.view(t.dtype).view(t.shape)
        shifted.copy_(t)
        for tiles in ("skinny", "medium", "large"):
            with pytest.raises(portable.InputError, match=f"{name}: expected a 16-byte aligned"):
                load_tiles("a16w4", tiles)(**{**inp, name: shifted})


def test_out_of_range_ids():
    inp = make_moe_inputs(8, 6, 256, 128, 2, seed=3, device="cuda")
    moe = portable.load("mxfp4_moe")
    bad = inp["topk_ids"].clone()
    bad[2, 1] = 6
    with pytest.raises(portable.InputError, match="topk_ids"):
        moe(**dict(inp, topk_ids=bad))
    # unchecked, the slot is skipped on the GPU: the same as routing it with weight 0; token 5,
    # routed nowhere, gets a row of zeros
    bad[5, :] = -1
    got = run_poisoned(moe, dict(inp, topk_ids=bad), check_ids=False)
    weights = inp["topk_weights"].clone()
    weights[2, 1] = 0.0
    weights[5, :] = 0.0
    ok, detail = compare(got, moe_reference(**dict(inp, topk_weights=weights)))
    assert ok, detail
    assert torch.equal(got[5], torch.zeros_like(got[5]))


def test_errors_name_the_argument():
    inp = make_moe_inputs(4, 4, 256, 64, 2, seed=1, device="cuda")
    moe = portable.load("mxfp4_moe")
    with pytest.raises(portable.InputError, match="hidden_states"):
        moe(**dict(inp, hidden_states=inp["hidden_states"].float()))
    with pytest.raises(portable.InputError, match="w13"):
        moe(**dict(inp, w13=inp["w13"].cpu()))
    with pytest.raises(portable.InputError, match="out"):
        moe(**inp, out=torch.empty(4, 128, device="cuda", dtype=torch.bfloat16))
    with pytest.raises(portable.InputError, match="w13_row_max"):
        moe(**inp, w13_row_max=scale_row_max(inp["w13_scale"])[:, :-1])
    with pytest.raises(portable.InputError, match="w2_row_max"):
        moe(**inp, w2_row_max=scale_row_max(inp["w2_scale"]).float())
    if "medium_warpgroup_rs" in tiling("mxfp4_moe", device_target(torch.cuda.current_device()).name):
        wide = make_moe_inputs(4, 2, 256, 16896 + 128, 2, seed=1, device="cuda")      # h too wide for rescale_h
        with pytest.raises(portable.InputError, match="gemm2_type"):
            portable.load("mxfp4_moe", tuning={"tiles": "medium", "gemm2_type": "f16"})(**wide)
