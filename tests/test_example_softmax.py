"""examples/softmax: compiles clean for every target; its warp reductions cover the whole wave
(offset 32 on 64-lane AMD waves, not on 32-lane NVIDIA warps); on a GPU, matches a float64
torch.softmax for row lengths that are and are not multiples of the wave, in both entries."""
import importlib.util
import re
from pathlib import Path

import pytest
import torch

import portable
from portable.backends import clang_amdgpu, nvrtc
from portable.dialect import dialect_for

from conftest import toolchain_or_skip

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "examples" / "softmax" / "softmax.j2"
DTYPES = [torch.float32, torch.bfloat16]
ENTRIES = ["softmax_warp", "softmax_block"]


def _example():
    spec = importlib.util.spec_from_file_location("example_softmax", ROOT / "examples" / "softmax" / "softmax.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ex = _example()


@pytest.mark.parametrize("target", portable.targets())
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_compiles_without_spills_with_16_byte_access(target, dtype):
    toolchain_or_skip((nvrtc if target.startswith("sm_") else clang_amdgpu).available())
    reports = portable.load(TEMPLATE, dtype=dtype).reports(target)
    assert [r["kernel"] for r in reports] == ENTRIES
    for report in reports:
        instr = report["instructions"]
        assert report["spill_bytes"] == 0 and report["stack_bytes"] == 0 and instr["local_memory"] == 0, report
        assert instr["global_load_128"] >= 1 and instr["global_store_128"] >= 1, instr


def _xor_offsets(source: str, target: str, var: str) -> list[int]:
    """The lane offsets of every warp.shfl_xor of `var` in the source, in order, found by the
    target's own spelling of the call."""
    spelled = re.escape(str(dialect_for(target)["warp"].shfl_xor(var, 999)))
    return [int(o) for o in re.findall(spelled.replace("999", r"(\d+)"), source)]


@pytest.mark.parametrize("target", portable.targets())
def test_reductions_span_the_whole_wave(target):
    """Each of the four reductions (max and sum, in each entry) steps WARP/2, ..., 2, 1: on a
    64-lane wave that starts at 32; a 32-lane warp has no offset 32 to take."""
    wave = portable.get_target(target).wave
    steps = [wave >> k for k in range(1, wave.bit_length())]           # 32 .. 1 or 16 .. 1
    assert steps[0] == wave // 2 and steps[-1] == 1
    source = portable.load(TEMPLATE).source(target)
    assert _xor_offsets(source, target, "M") == steps * 2
    assert _xor_offsets(source, target, "S") == steps * 2
    assert (32 in steps) == (wave == 64)


def test_gfx942_has_the_offset_32_step_and_sm_90a_does_not():
    amd, nvidia = portable.load(TEMPLATE).source("gfx942"), portable.load(TEMPLATE).source("sm_90a")
    for var in ("M", "S"):
        assert str(dialect_for("gfx942")["warp"].shfl_xor(var, 32)) in amd
        assert _xor_offsets(amd, "gfx942", var)[0] == 32
        assert 32 not in _xor_offsets(nvidia, "sm_90a", var)
        assert _xor_offsets(nvidia, "sm_90a", var)[0] == 16


def test_face_refuses_bad_input_before_any_launch():
    with pytest.raises(portable.InputError, match=r"x: expected a 2-D torch.Tensor \(rows, n\), got \(8,\)"):
        ex.softmax(torch.randn(8))
    with pytest.raises(portable.InputError, match=r"x: expected dtype float32 or bfloat16, got torch.float16"):
        ex.softmax(torch.randn(2, 8, dtype=torch.float16))
    with pytest.raises(portable.InputError, match=r"out: expected shape \(2, 8\) like x, got \(8, 2\)"):
        ex.softmax(torch.randn(2, 8), out=torch.empty(8, 2))
    with pytest.raises(portable.InputError, match=r"argument x .*expected a tensor on a GPU"):
        ex.softmax(torch.randn(2, 8))


# ---------------------------------------------------------------- GPU
NS = [1, 31, 64, 100, 1000, 1024, 1025, 4096]


def _check(out, x):
    """Against float64 torch.softmax: fp32 arithmetic, then (bf16) one rounding, at most
    2^-8 of the value (rtol just above)."""
    ref = torch.softmax(x.double(), dim=-1)
    rtol = 1e-5 if out.dtype == torch.float32 else 4e-3
    torch.testing.assert_close(out.double(), ref, rtol=rtol, atol=1e-7, equal_nan=True)


def _inputs(rows, n, dtype, seed, offset=0):
    """Random rows with a spread of a few units; `offset` elements into the storage (a
    misaligned view) when given."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    flat = 3.0 * torch.randn(rows * n + offset, device="cuda", generator=g)
    return flat.to(dtype)[offset:].view(rows, n)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", NS)
@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize("offset", [0, 1], ids=["aligned", "misaligned"])
def test_each_entry_matches_torch(dtype, n, entry, offset):
    """Both entries at every length, launched raw; 37 rows leave the last block part empty.
    offset 1 makes every row misaligned, so the element loops run instead of the vector ones."""
    rows = 37
    x = _inputs(rows, n, dtype, seed=n + 13 * offset, offset=offset)
    out = torch.full((rows * n + offset,), float("nan"), device="cuda", dtype=dtype)[offset:].view(rows, n)
    k = getattr(ex.program(dtype), entry)
    grid = -(-rows // (ex.BLOCK // 32)) if entry == "softmax_warp" else rows
    k[grid, ex.BLOCK](x, out, rows, n)
    torch.cuda.synchronize()
    assert not out.isnan().any(), "some element was not written"
    _check(out, x)


@pytest.mark.gpu
@pytest.mark.parametrize("entry", ENTRIES)
def test_small_grid_loops_over_rows(entry):
    """A grid smaller than the rows: each warp (or block) takes further rows in turn."""
    rows, n = 1000, 100
    x = _inputs(rows, n, torch.float32, seed=5)
    out = torch.full_like(x, float("nan"))
    getattr(ex.program(torch.float32), entry)[3, ex.BLOCK](x, out, rows, n)
    torch.cuda.synchronize()
    assert not out.isnan().any()
    _check(out, x)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", NS)
def test_face_matches_torch(dtype, n):
    x = _inputs(300, n, dtype, seed=n)
    out = ex.softmax(x)
    torch.cuda.synchronize()
    assert out.shape == x.shape and out.dtype == dtype
    _check(out, x)
    again = torch.full_like(x, float("nan"))
    assert ex.softmax(x, out=again) is again
    torch.cuda.synchronize()
    assert torch.equal(again, out)


@pytest.mark.gpu
@pytest.mark.parametrize("n", [31, 1000, 4096])
def test_masked_and_large_rows(n):
    """-inf entries (masking) drop out; a row all -inf is NaN as in torch; large values do not
    overflow (the row max is subtracted first)."""
    x = _inputs(6, n, torch.float32, seed=n)
    x[0, ::2] = float("-inf")
    x[1, 1:] = float("-inf")
    x[2] = float("-inf")
    x[3] *= 1000.0
    x[4, : n // 2] = float("-inf")
    out = torch.full_like(x, 2.0)           # a softmax value is at most 1: 2.0 marks an unwritten one
    ex.softmax(x, out=out)
    torch.cuda.synchronize()
    assert not (out == 2.0).any()
    assert out[2].isnan().all() and torch.softmax(x[2:3], dim=-1).isnan().all()
    _check(out, x)


@pytest.mark.gpu
def test_empty_shapes_launch_nothing():
    for shape in [(0, 8), (4, 0)]:
        x = torch.randn(shape, device="cuda")
        assert ex.softmax(x).shape == shape
