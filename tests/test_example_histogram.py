"""examples/histogram: compiles everywhere without spills, 64-bit lane masks on wave64;
on a GPU, equal to torch.bincount over the in-range values (out-of-range values ignored)."""
import functools
import importlib.util
import re
from pathlib import Path

import pytest
import torch

import portable
from portable.backends import clang_amdgpu, nvrtc

from conftest import toolchain_or_skip
from test_render import vendor_tokens_in

FOLDER = Path(__file__).parents[1] / "examples" / "histogram"
ENTRIES = ("histogram_block", "histogram_warp")


@functools.cache
def example():
    """examples/histogram/histogram.py as a module (examples/ is not a package), loaded once so
    its programs (one a bins value) are built once."""
    spec = importlib.util.spec_from_file_location("histogram_example", FOLDER / "histogram.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def compiler(target):
    return nvrtc if target.startswith("sm_") else clang_amdgpu


def kernel_asm(binary, entry):
    return (nvrtc.kernel_sass if binary.target.startswith("sm_") else clang_amdgpu.kernel_asm)(binary.asm, entry)


# ---- CPU: compile and read the code --------------------------------------------------------

def test_template_spells_no_vendor():
    assert vendor_tokens_in((FOLDER / "histogram.j2").read_text()) == []


@pytest.mark.parametrize("target", portable.targets())
def test_compiles_for_every_target_without_spills(target):
    toolchain_or_skip(compiler(target).available())
    k = portable.load(FOLDER / "histogram.j2")
    reports = {r["kernel"]: r for r in k.reports(target)}
    assert set(reports) == set(ENTRIES)
    limit = portable.get_target(target).smem_per_block
    for name, r in reports.items():
        assert r["spill_bytes"] == 0 and r["stack_bytes"] == 0, (name, r)
        assert r["instructions"]["local_memory"] == 0, (name, r)
        assert 256 * 4 <= r["smem_bytes"] <= limit, (name, r)     # the block's private histogram
        assert r["instructions"]["global_load"] >= 1 and r["occupancy"] > 0, (name, r)


@pytest.mark.parametrize("target", ["sm_90a", "gfx942"])
@pytest.mark.parametrize("bins", [1, 100, 4096])
def test_other_bin_counts_compile(target, bins):
    # 1: no ballot bits; 100: not a multiple of either wave; 4096: the largest (16 KB shared)
    toolchain_or_skip(compiler(target).available())
    for r in portable.load(FOLDER / "histogram.j2", bins=bins).reports(target):
        assert r["spill_bytes"] == 0 and r["stack_bytes"] == 0 and r["smem_bytes"] >= 4 * bins, r


def test_wave64_masks_are_64_bit_and_wave32_masks_32_bit():
    k = portable.load(FOLDER / "histogram.j2")          # bins 256: eight ballots of a bit
    amd, nv = k.source("gfx942"), k.source("sm_90a")
    # the rendered spellings: a 64-bit mask and the 64-bit popcount on AMD, 32-bit on NVIDIA
    assert "unsigned long long peers = __ballot(valid);" in amd
    assert "const unsigned long long ones = __ballot(set);" in amd
    assert "(unsigned)__popcll(peers)" in amd and "__ffsll(peers)" in amd
    assert re.search(r"\bunsigned peers = __ballot_sync\(0xffffffffu, valid\);", nv)
    assert "(unsigned)__popc(peers)" in nv and "__ffs(peers)" in nv


def test_instructions_atomics_ballots_and_popcounts():
    """The code the compilers made: shared atomics, one global atomic a bucket, and on the
    warp path the ballots and the lane-mask count (64 bits on gfx942: two 32-bit counts or
    one 64-bit scalar count)."""
    k = portable.load(FOLDER / "histogram.j2")
    if nvrtc.available()[0]:
        b = k.binary("sm_90a")
        if b.asm:
            block, warp = kernel_asm(b, "histogram_block"), kernel_asm(b, "histogram_warp")
            assert re.search(r"\bATOMS\.", block) and re.search(r"\bREDG?\.E\.ADD\b", block)
            assert len(re.findall(r"\bVOTE\.ANY\b", warp)) >= 9       # the valid ballot + 8 bits
            assert re.search(r"\bPOPC\b", warp) and re.search(r"\bATOMS\.ADD\b", warp)
    toolchain_or_skip(clang_amdgpu.available())
    b = k.binary("gfx942")
    block, warp = kernel_asm(b, "histogram_block"), kernel_asm(b, "histogram_warp")
    assert "ds_add_u32" in block and "global_atomic_add" in block
    assert "ds_add_u32" in warp and "global_atomic_add" in warp
    # each ballot is a compare writing a 64-bit lane mask (an SGPR pair)
    assert len(re.findall(r"\bv_cmp_\w+_e64 s\[\d+:\d+\]", warp)) >= 9
    assert (len(re.findall(r"\bv_bcnt_u32_b32\b", warp)) >= 2 or re.search(r"\bs_bcnt1_i32_b64\b", warp))


def test_face_checks_before_any_launch():
    histogram = example().histogram
    x = torch.zeros(10, dtype=torch.int32)
    with pytest.raises(portable.InputError, match="bins"):
        histogram(x, bins=5000)
    with pytest.raises(portable.InputError, match="out"):
        histogram(x, bins=16, out=torch.zeros(15, dtype=torch.int32))
    with pytest.raises(portable.InputError, match="out"):
        histogram(x, bins=16, out=torch.zeros(16, dtype=torch.int64))


# ---- GPU: against torch.bincount -----------------------------------------------------------

def reference(x: torch.Tensor, bins: int) -> torch.Tensor:
    inside = x[(x >= 0) & (x < bins)]
    return torch.bincount(inside.reshape(-1).long(), minlength=bins)


def check(x: torch.Tensor, bins: int, warp_aggregated: bool):
    histogram = example().histogram
    out = torch.full((bins,), -12345, dtype=torch.int32, device=x.device)   # the face must zero it
    assert histogram(x, bins, out, warp_aggregated=warp_aggregated) is out
    ref = reference(x, bins)
    assert out.sum().item() == ref.sum().item() == ((x >= 0) & (x < bins)).sum().item()
    assert torch.equal(out.long(), ref)


@pytest.mark.gpu
@pytest.mark.parametrize("warp_aggregated", [True, False])
@pytest.mark.parametrize("bins", [1, 37, 100, 256, 4096])
@pytest.mark.parametrize("n", [1, 63, 255, 1000, 65537, (1 << 20) + 3])
def test_random_values_match_bincount(n, bins, warp_aggregated):
    # a quarter of the range lies outside [0, bins) on each side: those values are ignored
    spread = max(1, bins // 4)
    x = torch.randint(-spread, bins + spread, (n,), dtype=torch.int32, device="cuda")
    check(x, bins, warp_aggregated)


@pytest.mark.gpu
@pytest.mark.parametrize("warp_aggregated", [True, False])
@pytest.mark.parametrize("bins", [100, 256, 4096])
def test_skewed_values_match_bincount(bins, warp_aggregated):
    n = (1 << 22) + 17
    one = torch.full((n,), bins - 1, dtype=torch.int32, device="cuda")     # every lane on one bucket
    check(one, bins, warp_aggregated)
    mostly = torch.where(torch.rand(n, device="cuda") < 0.9, 7,
                         torch.randint(0, bins, (n,), device="cuda")).to(torch.int32)
    check(mostly, bins, warp_aggregated)


@pytest.mark.gpu
@pytest.mark.parametrize("warp_aggregated", [True, False])
def test_extreme_values_strided_input_and_other_blocks(warp_aggregated):
    x = torch.randint(-(1 << 31), (1 << 31) - 1, (3, 50001), dtype=torch.int32, device="cuda")
    x[:, ::3] = torch.randint(0, 64, (3, 16667), dtype=torch.int32, device="cuda")
    x[0, :4] = torch.tensor([-(1 << 31), (1 << 31) - 1, 64, -1], dtype=torch.int32, device="cuda")
    check(x[:, ::2], 64, warp_aggregated)                        # strided: the face copies it
    histogram = example().histogram
    for block in (128, 512, 1024):
        out = histogram(x, 64, warp_aggregated=warp_aggregated, block=block)
        assert torch.equal(out.long(), reference(x, 64))


@pytest.mark.gpu
def test_empty_input_gives_zeros_and_default_output():
    histogram = example().histogram
    out = histogram(torch.empty(0, dtype=torch.int32, device="cuda"), bins=10)
    assert out.dtype == torch.int32 and out.shape == (10,) and not out.any()
    x = torch.randint(0, 256, (12345,), dtype=torch.int32, device="cuda")
    assert torch.equal(histogram(x).long(), reference(x, 256))
