"""examples/gemm: C = A @ B.T (bf16 in, fp32 accumulation) through the matrix-fragment interface.
On the CPU: every target compiles with matrix instructions, no spills, shared memory within
its limit. On a GPU: against torch's float32 matmul of the same bf16 inputs."""
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
MATRIX = {"nvidia": "hmma", "amd": "mfma"}


@functools.cache
def example():
    """examples/gemm/gemm.py as a module (examples/ is not a package), loaded once."""
    spec = importlib.util.spec_from_file_location("gemm_example", FOLDER / "gemm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def compiler(target):
    return nvrtc if target.startswith("sm_") else clang_amdgpu


def full_report(k: portable.Program, target: str) -> tuple[dict, int]:
    """The static report with the dynamic shared memory the face launches with."""
    smem = example().smem_bytes(k, target)
    threads = k.params["WARPS"] * portable.get_target(target).wave
    return static_report(k.binary(target), "gemm", threads, dynamic_smem=smem), smem


def assert_clean(r: dict, smem: int, target: str, mma_per_step: int):
    t = portable.get_target(target)
    ins = r["instructions"]
    assert r["spill_bytes"] == 0 and r["stack_bytes"] == 0 and ins["local_memory"] == 0, r
    assert 0 < smem <= t.smem_per_block, (smem, t.smem_per_block)
    assert ins[MATRIX[t.vendor]] >= mma_per_step, ins          # at least one K step's worth
    assert ins["global_store_128"] > 0, ins                      # C leaves as 16-byte stores
    assert 0 < r["occupancy"] <= 1, r


# ---- CPU: compile and read the code --------------------------------------------------------

def test_template_spells_no_vendor():
    assert vendor_tokens_in((FOLDER / "gemm.j2").read_text()) == []


@pytest.mark.parametrize("target", portable.targets())
def test_defaults_compile_everywhere_with_matrix_instructions(target):
    toolchain_or_skip(compiler(target).available())
    k = portable.load(FOLDER / "gemm.j2")                      # 128 x 256 tiles, 8 warps, BK 32
    r, smem = full_report(k, target)
    m, n, _ = portable.get_target(target).mma_shape
    assert_clean(r, smem, target, (64 // m) * (64 // n))       # a 64 x 64 warp tile, one K step
    src = k.source(target)
    if target == "sm_90a":                                     # the async-copy ring, 4 stages
        assert "cp_async16(" in src and "cp_async_wait<2>()" in src
        assert smem == 4 * (128 + 256) * 40 * 2
        assert len(re.findall(r"\bLDGSTS\b", nvrtc.kernel_sass(k.binary(target).asm, "gemm"))) >= 6
    else:                                                      # two buffers staged in registers
        assert "cp_async16(" not in src and smem == 2 * (128 + 256) * 40 * 2
        assert r["instructions"]["global_load_128"] > 0


@pytest.mark.parametrize("target", portable.targets())
@pytest.mark.parametrize("tile,out", [((128, 128, 8), "float32"), ((64, 64, 4), "float32"), ((64, 64, 4), "bfloat16")])
def test_face_tiles_compile_everywhere(target, tile, out):
    """The face's other tiles (and the bf16 output) build clean on every target."""
    toolchain_or_skip(compiler(target).available())
    k = example().kernel(*tile, out=out)
    r, smem = full_report(k, target)
    assert_clean(r, smem, target, 1)


def test_bf16_output_and_deeper_k_compile_on_sm_90a():
    toolchain_or_skip(nvrtc.available())
    for params in ({"OUT": "bfloat16"}, {"BK": 64, "STAGES": 3}):
        k = portable.load(FOLDER / "gemm.j2", **params)
        r, smem = full_report(k, "sm_90a")
        assert_clean(r, smem, "sm_90a", 32)


def test_oversized_tiles_fail_with_the_shared_memory_named():
    toolchain_or_skip(clang_amdgpu.available())
    k = portable.load(FOLDER / "gemm.j2", BK=64)               # 2 x 55 KB: more than gfx942's 64 KB
    with pytest.raises(portable.CompileError, match=r"110592 bytes of shared memory; gfx942 allows 65536"):
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

def check(m: int, n: int, k: int, out_dtype=torch.float32, tile=None):
    gemm = example().gemm
    a = torch.randn(m, k, device="cuda").to(torch.bfloat16)
    b = torch.randn(n, k, device="cuda").to(torch.bfloat16)
    out = torch.full((m, n), float("nan"), dtype=out_dtype, device="cuda")   # every element must be written
    assert gemm(a, b, out, tile=tile) is out
    ref = a.float() @ b.float().T
    got = out.float()
    assert torch.isfinite(got).all(), "elements left unwritten (NaN poison) or non-finite"
    err = ((got - ref).abs().max() / ref.abs().max()).item()
    assert err < 1e-2, (m, n, k, out_dtype, tile, err)


@pytest.mark.gpu
@pytest.mark.parametrize("mnk", [(128, 128, 128), (256, 512, 384), (1024, 1024, 1024), (64, 64, 32)])
@pytest.mark.parametrize("out_dtype", [torch.float32, torch.bfloat16])
def test_matches_torch_at_chosen_tiles(mnk, out_dtype):
    check(*mnk, out_dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("tile", [(128, 256, 8), (128, 128, 8), (64, 64, 4)])
@pytest.mark.parametrize("mnk", [(256, 512, 384), (2048, 1024, 96), (384, 768, 4096)])
def test_matches_torch_at_every_tile(tile, mnk):
    # K = 96: 3 slices, fewer than the 4 stages; K = 4096: the ring wraps 32 times; 2048 x 1024
    # on 128 x 256 tiles: 16 tile rows, the last raster group whole; 384 rows: a group of 3
    check(*mnk, tile=tile)


@pytest.mark.gpu
def test_default_allocation_and_large_square():
    gemm = example().gemm
    a = torch.randn(4096, 4096, device="cuda").to(torch.bfloat16)
    b = torch.randn(4096, 4096, device="cuda").to(torch.bfloat16)
    c = gemm(a, b)
    assert c.dtype == torch.float32 and c.shape == (4096, 4096)
    ref = a.float() @ b.float().T
    assert ((c - ref).abs().max() / ref.abs().max()).item() < 1e-2
