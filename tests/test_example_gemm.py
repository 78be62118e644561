"""examples/gemm: C = A @ B.T (bf16 in, fp32 accumulation) through the matrix-fragment interface,
and on sm_90a through the warpgroup instructions. On the CPU: every target compiles with matrix
instructions, no spills, shared memory within its limit; the sm_90a paths and the bench's sweep
rows build as designed. On a GPU: against torch's float32 matmul of the same bf16 inputs."""
import functools
import importlib.util
import re
from pathlib import Path

import pytest
import torch

import portable
from portable.backends import clang_amdgpu, nvrtc
from portable.report import static_report

from conftest import toolchain_or_skip
from test_render import vendor_tokens_in

FOLDER = Path(__file__).parents[1] / "examples" / "gemm"


def _module(name: str):
    """examples/gemm/NAME.py as a module (examples/ is not a package)."""
    spec = importlib.util.spec_from_file_location(f"gemm_{name}", FOLDER / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.cache
def example():
    return _module("gemm")


@functools.cache
def sweep() -> list:
    """bench_gemm.py's SWEEP rows: (tile, tuning knobs)."""
    return _module("bench_gemm").SWEEP


def sweep_id(row) -> str:
    (bm, bn, warps), params = row
    return f"{bm}x{bn}x{warps}w" + "".join(f"-{k}{v}" for k, v in params.items())


def matrix_count(ins: dict, vendor: str) -> int:
    """Matrix instructions of either NVIDIA kind (mma.sync HMMA, warpgroup HGMMA) or AMD's MFMA."""
    return ins["hmma"] + ins["hgmma"] if vendor == "nvidia" else ins["mfma"]


def sass(k: portable.Program) -> str:
    return nvrtc.kernel_sass(k.binary("sm_90a").asm, "gemm")


def compiler(target):
    return nvrtc if target.startswith("sm_") else clang_amdgpu


def full_report(k: portable.Program, target: str) -> tuple[dict, int]:
    """The static report with the dynamic shared memory the face launches with."""
    smem = example().smem_bytes(k, target)
    threads = k.tuning["WARPS"] * portable.get_target(target).wave
    return static_report(k.binary(target), "gemm", threads, dynamic_smem=smem), smem


def assert_clean(r: dict, smem: int, target: str, mma_per_step: int):
    t = portable.get_target(target)
    ins = r["instructions"]
    assert r["spill_bytes"] == 0 and r["stack_bytes"] == 0 and ins["local_memory"] == 0, r
    assert 0 < smem <= t.smem_per_block, (smem, t.smem_per_block)
    assert matrix_count(ins, t.vendor) >= mma_per_step, ins     # at least one K step's worth
    assert ins["global_store_128"] > 0, ins                      # C leaves as 16-byte stores
    assert 0 < r["occupancy"] <= 1, r


# ---- CPU: compile and read the code --------------------------------------------------------

@pytest.mark.parametrize("name", ["gemm.j2", "gemm_warpgroup.j2"])
def test_template_spells_no_vendor(name):
    assert vendor_tokens_in((FOLDER / name).read_text()) == []


@pytest.mark.parametrize("target", portable.targets())
def test_defaults_compile_everywhere_with_matrix_instructions(target):
    toolchain_or_skip(compiler(target).available())
    k = portable.load(FOLDER / "gemm.j2")                      # 128 x 256 tiles, 8 warps, BK 64, 4 stages
    r, smem = full_report(k, target)
    src = k.source(target)
    if target == "sm_90a":
        # the warpgroup path: a K slice is 4 instructions 64 x 256 x 16 a warpgroup, read from
        # 4 stages of 128-byte rows (+1 KB to align them) by 12 async copies a thread
        assert_clean(r, smem, target, 4)
        assert "#define GEMM_PATH_WARPGROUP" in src and "cp_async_wait<1>()" in src and "wg_wait<1>()" in src
        assert smem == 4 * (128 + 256) * 128 + 1024
        code = sass(k)
        assert len(re.findall(r"\bHGMMA\.64x256x16\.F32\.BF16\b", code)) >= 4 and r["instructions"]["hmma"] == 0
        assert len(re.findall(r"\bLDGSTS\b", code)) >= 12
        assert r["registers"] <= 200, r                            # 128 accumulators and the loop's few
    else:                                                      # the fragments, two buffers staged in registers, BK 32
        m, n, _ = portable.get_target(target).mma_shape
        assert_clean(r, smem, target, (64 // m) * (64 // n))   # a 64 x 64 warp tile, one K step
        assert "cp_async16(" not in src and "#define GEMM_BK 32" in src and smem == 2 * (128 + 256) * 40 * 2
        assert r["instructions"]["global_load_128"] > 0


@pytest.mark.parametrize("target", portable.targets())
@pytest.mark.parametrize("tile,out", [((128, 128, 8), "float32"), ((64, 64, 4), "float32"), ((64, 64, 4), "bfloat16")])
@pytest.mark.parametrize("bk", [64, 32])
def test_face_tiles_compile_everywhere(target, tile, out, bk):
    """The face's other tiles (and the bf16 output) build clean on every target, at both stage
    depths the face picks (sm_90a: the warpgroup path at BK 64, the fragments at 32)."""
    toolchain_or_skip(compiler(target).available())
    k = example().kernel(*tile, out=out, BK=bk)
    r, smem = full_report(k, target)
    assert_clean(r, smem, target, 1)
    if target == "sm_90a":
        kind = "hgmma" if bk == 64 else "hmma"
        assert r["instructions"][kind] > 0 and r["instructions"]["hgmma" if bk == 32 else "hmma"] == 0, r


@pytest.mark.parametrize("row", [((128, 256, 8), {"OUT": "bfloat16"})] + sweep(), ids=sweep_id)
def test_sweep_rows_build_clean_on_sm_90a(row):
    """Every row bench_gemm.py --sweep times builds on sm_90a: no spills, the path it names
    (MMA=warp: HMMA only; else HGMMA only), and the waits the INFLIGHT and STAGES it asks for."""
    toolchain_or_skip(nvrtc.available())
    (bm, bn, warps), params = row
    knobs = {key: v for key, v in params.items() if key != "OUT"}
    k = example().kernel(bm, bn, warps, params.get("OUT", "float32"), **{"BK": 64, **knobs})
    r, smem = full_report(k, "sm_90a")
    assert_clean(r, smem, "sm_90a", 1)
    assert "serializ" not in k.binary("sm_90a").log.lower()   # ptxas did not serialize the warpgroup instructions
    ins = r["instructions"]
    if params.get("MMA") == "warp":
        assert ins["hmma"] > 0 and ins["hgmma"] == 0, ins
        return
    assert ins["hgmma"] >= 4 * (bm * 4 // warps // 64) and ins["hmma"] == 0, ins
    inflight, stages = params.get("INFLIGHT", 1), params.get("STAGES", 4)
    assert f"WARPGROUP.DEPBAR.LE gsb0, 0x{inflight}" in sass(k)
    src = k.source("sm_90a")
    assert f"cp_async_wait<{stages - 2 - inflight}>()" in src, stages
    assert smem == max(stages * (bm + bn) * 128 + 1024, bm * (bn + 8) * (4 if params.get("OUT", "float32") == "float32" else 2))


def test_two_blocks_an_sm_where_the_sweep_says():
    """128 x 128 tiles in 3 stages: 97 KB a block, so two blocks share an SM (the epilogue of
    one under the other's loop)."""
    toolchain_or_skip(nvrtc.available())
    for warps in (8, 4):
        r, smem = full_report(example().kernel(128, 128, warps, STAGES=3), "sm_90a")
        assert smem == 3 * 256 * 128 + 1024
        assert r["occupancy"] == 2 * warps * 32 / 2048, r


def test_warpgroup_requests_that_cannot_hold_fail_with_the_reason():
    toolchain_or_skip(nvrtc.available())
    toolchain_or_skip(clang_amdgpu.available())
    with pytest.raises(portable.CompileError, match=r"MMA=warpgroup: gfx942 lacks warpgroup matrix instructions"):
        portable.load(FOLDER / "gemm.j2", tuning={"MMA": "warpgroup"}).binary("gfx942")
    with pytest.raises(portable.CompileError, match=r"MMA=warpgroup needs BK=64 .* BK=32 WARPS=8 give 64 rows"):
        portable.load(FOLDER / "gemm.j2", tuning={"MMA": "warpgroup", "BK": 32}).binary("sm_90a")
    # auto takes the fragments where the warpgroup path does not apply: 32-deep stages, 32-row bands
    for params in ({"BK": 32}, {"BM": 64, "BN": 64}):
        assert "#define GEMM_PATH_WARP 1" in portable.load(FOLDER / "gemm.j2", tuning=params).source("sm_90a")


def test_oversized_tiles_fail_with_the_shared_memory_named():
    toolchain_or_skip(clang_amdgpu.available())
    k = portable.load(FOLDER / "gemm.j2", tuning={"BM": 256, "BN": 256})    # 2 x 40 KB: more than gfx942's 64 KB
    with pytest.raises(portable.CompileError, match=r"81920 bytes of shared memory; gfx942 allows 65536"):
        k.binary("gfx942")


def test_face_checks_shapes_before_any_launch():
    gemm = example().gemm
    bf = dict(dtype=torch.bfloat16)
    with pytest.raises(portable.InputError, match=r"M=100, N=64, K=64: expected M and N positive multiples of 64"):
        gemm(torch.zeros(100, 64, **bf), torch.zeros(64, 64, **bf))
    with pytest.raises(portable.InputError, match=r"K a positive multiple of 32"):
        gemm(torch.zeros(64, 48, **bf), torch.zeros(64, 48, **bf))
    with pytest.raises(portable.InputError, match=r"b: expected shape \(N, 64\)"):
        gemm(torch.zeros(64, 64, **bf), torch.zeros(64, 128, **bf))
    with pytest.raises(portable.InputError, match=r"a: expected a 2-D torch.bfloat16 tensor"):
        gemm(torch.zeros(64, 64), torch.zeros(64, 64, **bf))
    with pytest.raises(portable.InputError, match=r"out: expected a \(64, 64\) float32 or bfloat16 tensor"):
        gemm(torch.zeros(64, 64, **bf), torch.zeros(64, 64, **bf), out=torch.zeros(64, 64, dtype=torch.float16))
    with pytest.raises(portable.InputError, match=r"a: expected a tensor on a GPU"):
        gemm(torch.zeros(64, 64, **bf), torch.zeros(64, 64, **bf))


def test_tile_choice():
    pick = example().pick_tile
    assert pick(4096, 4096, 132) == (128, 256, 8)              # 512 blocks
    assert pick(1024, 1024, 132) == (64, 64, 4)                # 128 x 256 would give 32 blocks
    assert pick(128, 128, 132) == (64, 64, 4)                  # nothing fills the GPU: the smallest
    assert pick(2048, 1152, 132) == (128, 128, 8)              # N = 9 x 128: no 256-column tiles, 144 blocks
    assert pick(8192, 128, 132) == (64, 64, 4)                 # 128 x 128 would give 64 blocks


# ---- GPU: against torch's float32 matmul of the bf16 inputs --------------------------------

def check(m: int, n: int, k: int, out_dtype=torch.float32, tile=None, **knobs):
    gemm = example().gemm
    a = torch.randn(m, k, device="cuda").to(torch.bfloat16)
    b = torch.randn(n, k, device="cuda").to(torch.bfloat16)
    out = torch.full((m, n), float("nan"), dtype=out_dtype, device="cuda")   # every element must be written
    assert gemm(a, b, out, tile=tile, **knobs) is out
    ref = a.float() @ b.float().T
    got = out.float()
    assert torch.isfinite(got).all(), "elements left unwritten (NaN poison) or non-finite"
    err = ((got - ref).abs().max() / ref.abs().max()).item()
    assert err < 1e-2, (m, n, k, out_dtype, tile, knobs, err)


@pytest.mark.gpu
@pytest.mark.parametrize("mnk", [(128, 128, 128), (256, 512, 384), (1024, 1024, 1024), (64, 64, 32)])
@pytest.mark.parametrize("out_dtype", [torch.float32, torch.bfloat16])
def test_matches_torch_at_chosen_tiles(mnk, out_dtype):
    check(*mnk, out_dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("tile", [(128, 256, 8), (128, 128, 8), (64, 64, 4)])
@pytest.mark.parametrize("mnk", [(256, 512, 384), (2048, 1024, 96), (384, 768, 4096)])
def test_matches_torch_at_every_tile(tile, mnk):
    # K = 96: 3 slices of 32 (the fragments), fewer than the 4 stages; K = 384 and 4096: 64-deep
    # slices (the warpgroup path on sm_90a), the ring wraps 1 and 16 times; 2048 x 1024 on
    # 128 x 256 tiles: 16 tile rows, the last raster group whole; 384 rows: a group of 3
    check(*mnk, tile=tile)


@pytest.mark.gpu
@pytest.mark.parametrize("mma", ["auto", "warp"])
@pytest.mark.parametrize("stages,inflight", [(2, 0), (3, 0), (3, 1), (4, 0), (4, 1), (6, 1)])
@pytest.mark.parametrize("mnk", [(256, 256, 64), (256, 512, 192), (512, 768, 1280)])
def test_pipeline_depths_match_torch(mma, stages, inflight, mnk):
    # K = 64: one slice; 192: fewer slices than stages; 1280: 20 slices, the ring wraps. STAGES
    # 2 with INFLIGHT 1 takes 3, 6 takes what fits (4 at 128 x 256)
    check(*mnk, tile=(128, 256, 8), MMA=mma, STAGES=stages, INFLIGHT=inflight)


@pytest.mark.gpu
@pytest.mark.parametrize("row", sweep(), ids=sweep_id)
@pytest.mark.parametrize("out_dtype", [torch.float32, torch.bfloat16])
def test_sweep_rows_match_torch(row, out_dtype):
    # 2304 rows: 18 tile rows of 128 (a raster group of 16 and one of 2), 9 of 256
    tile, knobs = row
    check(2304, 768, 1024, out_dtype, tile=tile, **knobs)


@pytest.mark.gpu
def test_default_allocation_and_large_square():
    gemm = example().gemm
    a = torch.randn(4096, 4096, device="cuda").to(torch.bfloat16)
    b = torch.randn(4096, 4096, device="cuda").to(torch.bfloat16)
    c = gemm(a, b)
    assert c.dtype == torch.float32 and c.shape == (4096, 4096)
    ref = a.float() @ b.float().T
    assert ((c - ref).abs().max() / ref.abs().max()).item() < 1e-2
