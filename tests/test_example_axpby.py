"""examples/axpby: compiles clean for every target and dtype; its fp16 conversions agree with
numpy bit for bit; on a GPU, matches a float64 reference on aligned and misaligned tensors.
Also runs the template vendor-token scan over every example template (tests/test_render.py
scans templates/ only)."""
import importlib.util
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

import portable
from portable.backends import clang_amdgpu, nvrtc

from conftest import toolchain_or_skip
from test_render import vendor_tokens_in

ROOT = Path(__file__).resolve().parents[1]
DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def _example():
    spec = importlib.util.spec_from_file_location("example_axpby", ROOT / "examples" / "axpby" / "axpby.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ex = _example()


@pytest.mark.parametrize("path", sorted((ROOT / "examples").rglob("*.j2")), ids=lambda p: str(p.relative_to(ROOT)))
def test_example_templates_spell_no_vendor(path):
    assert vendor_tokens_in(path.read_text()) == []


@pytest.mark.parametrize("target", portable.targets())
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_compiles_without_spills_with_16_byte_access(target, dtype):
    toolchain_or_skip((nvrtc if target.startswith("sm_") else clang_amdgpu).available())
    report = portable.load(ROOT / "examples" / "axpby" / "axpby.j2", dtype=dtype).report(target)
    instr = report["instructions"]
    assert report["spill_bytes"] == 0 and report["stack_bytes"] == 0 and instr["local_memory"] == 0, report
    assert instr["global_load_128"] >= 2 and instr["global_store_128"] >= 1, instr


def test_face_refuses_bad_input_before_any_launch():
    x = torch.randn(8)
    with pytest.raises(portable.InputError, match=r"shape \(8,\)"):
        ex.axpby(x, torch.randn(9))
    with pytest.raises(portable.InputError, match=r"expected dtype float32, bfloat16 or float16, got torch.int32"):
        ex.axpby(torch.ones(8, dtype=torch.int32), torch.ones(8, dtype=torch.int32))
    with pytest.raises(portable.InputError, match=r"argument y .*expected dtype float16"):
        ex.axpby(x.half(), x)
    with pytest.raises(portable.InputError, match=r"argument x .*expected a tensor on a GPU"):
        ex.axpby(x, x)


def test_fp16_conversions_match_numpy_on_the_host(tmp_path):
    """The template's integer fp16 <-> fp32 helpers, compiled for the host: every fp16 to fp32,
    and fp32 to fp16 (round to nearest even) on ties, edges and random bits, against numpy."""
    cxx = shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no host C++ compiler")
    src = ex.program(torch.float16).source("sm_90a")
    start, end = src.index("__device__ __forceinline__ float f16_bits_to_f32"), src.index("// one element")
    program = ("#include <cstdio>\n#include <cstring>\n"
               "static float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }\n"
               "static unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }\n"
               + src[start:end].replace("__device__ __forceinline__", "static")
               + "int main(int, char** argv) {\n"
               "  FILE* o = fopen(argv[1], \"wb\");\n"
               "  for (unsigned h = 0; h < 65536; ++h) { float f = f16_bits_to_f32(h); fwrite(&f, 4, 1, o); }\n"
               "  fclose(o);\n"
               "  FILE* in = fopen(argv[2], \"rb\"); FILE* o2 = fopen(argv[3], \"wb\"); unsigned u;\n"
               "  while (fread(&u, 4, 1, in) == 1) { unsigned short r = (unsigned short)f32_to_f16_bits_rn("
               "__uint_as_float(u)); fwrite(&r, 2, 1, o2); }\n"
               "  fclose(in); fclose(o2); return 0;\n}\n")
    work = tmp_path
    (work / "f16.cpp").write_text(program)
    subprocess.run([cxx, "-O1", "-o", str(work / "f16"), str(work / "f16.cpp")], check=True, capture_output=True)
    top = np.arange(1 << 16, dtype=np.uint32) << 16
    rng = np.random.default_rng(0)
    bits = np.concatenate([top, top | 0x0fff, top | 0x1000, top | 0x1001, top | 0x2000, top | 0x3000,
                           np.arange(0x33000000, 0x38800000, 97, dtype=np.uint32),   # fp16 subnormal range
                           np.arange(0x477fe000, 0x47800000, dtype=np.uint32),       # around 65504 .. 65536
                           rng.integers(0, 1 << 32, size=1 << 20, dtype=np.uint64).astype(np.uint32)])
    bits.tofile(work / "in.bin")
    subprocess.run([str(work / "f16"), str(work / "widen.bin"), str(work / "in.bin"), str(work / "narrow.bin")],
                   check=True)
    widened = np.fromfile(work / "widen.bin", dtype=np.float32)
    expected = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32)
    nan = np.isnan(expected)
    assert np.array_equal(np.isnan(widened), nan)
    assert np.array_equal(widened[~nan].view(np.uint32), expected[~nan].view(np.uint32))
    narrowed = np.fromfile(work / "narrow.bin", dtype=np.uint16)
    with np.errstate(over="ignore"):
        expected = bits.view(np.float32).astype(np.float16)
    nan = np.isnan(expected)
    assert np.array_equal(np.isnan(narrowed.view(np.float16)), nan)
    wrong = np.flatnonzero((narrowed != expected.view(np.uint16)) & ~nan)
    assert wrong.size == 0, [(hex(bits[i]), hex(narrowed[i])) for i in wrong[:5]]


# ---------------------------------------------------------------- GPU
def _exact(x, y, a, b):
    return a * x.double() + b * y.double()


def _reference(x, y, a, b):
    """float64, rounded once to the element type."""
    return _exact(x, y, a, b).to(x.dtype)


def _check(out, x, y, a, b):
    """Against the unrounded float64 result: fp32 arithmetic (atol), then one rounding to the
    element type, at most half an ulp (2^-8 of the value in bf16, 2^-11 in fp16, rtol just above)."""
    rtol = {torch.float32: 1e-6, torch.bfloat16: 4e-3, torch.float16: 5e-4}[out.dtype]
    torch.testing.assert_close(out.double(), _exact(x, y, a, b), rtol=rtol, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [1, 7, 8, 9, 1000, 4097, (1 << 20) + 3])
@pytest.mark.parametrize("offset", [0, 1], ids=["aligned", "misaligned"])
def test_matches_float64_reference(dtype, n, offset):
    """offset 1: views one element into their storage, so the kernel takes its element loop."""
    g = torch.Generator(device="cuda").manual_seed(n * 7 + offset)
    x = torch.randn(n + offset, device="cuda", dtype=dtype, generator=g)[offset:]
    y = torch.randn(n + offset, device="cuda", dtype=dtype, generator=g)[offset:]
    out = torch.full((n + offset,), float("nan"), device="cuda", dtype=dtype)[offset:]
    got = ex.axpby(x, y, 1.5, -0.75, out=out)
    torch.cuda.synchronize()
    assert got is out and torch.isfinite(out).all(), "some element was not written"
    _check(out, x, y, 1.5, -0.75)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_allocates_output_and_runs_in_place(dtype):
    x = torch.randn(12345, device="cuda", dtype=dtype)
    y = torch.randn_like(x)
    x0 = x.clone()
    out = ex.axpby(x, y, 2.0, 0.5)
    assert out.shape == x.shape and out.dtype == dtype and out.data_ptr() != x.data_ptr()
    ex.axpby(x, y, 2.0, 0.5, out=x)
    torch.cuda.synchronize()
    _check(out, x0, y, 2.0, 0.5)
    assert torch.equal(x, out)              # in place: the same arithmetic, the same bits
    assert ex.axpby(x[:0], y[:0]).numel() == 0          # nothing launched for nothing


@pytest.mark.gpu
def test_raw_launch_of_the_entry():
    dt, n = torch.float32, 5000
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.full_like(x, float("nan"))
    ex.entry(dt)[ex.grid(n, dt), ex.BLOCK](x, y, out, 3.0, -1.0, n)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, 3.0 * x - y, rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_every_16_bit_value_round_trips(dtype):
    """1*x + 0*y is x exactly: every bit pattern through the kernel's widening and narrowing."""
    x = torch.arange(-(1 << 15), 1 << 15, device="cuda", dtype=torch.int32).to(torch.int16).view(dtype)
    y = torch.ones_like(x)
    out = ex.axpby(x, y, 1.0, 0.0)
    torch.cuda.synchronize()
    torch.testing.assert_close(out, x, rtol=0, atol=0, equal_nan=True)


@pytest.mark.gpu
def test_fp16_rounds_to_nearest_even():
    """Sums exact in fp32 whose fp16 rounding torch does from float64: ties, subnormals and
    overflow decide the same way in the kernel."""
    g = torch.Generator(device="cuda").manual_seed(3)
    n = 1 << 20
    sign = lambda: torch.where(torch.rand(n, device="cuda", generator=g) < 0.5, -1.0, 1.0)
    # x in +-[0.5, 2) and y in +-[0.5, 1), b = 2^-10: y's bits fall in x's rounding range, ties at |y| = 0.5
    x = (sign() * (0.5 + 1.5 * torch.rand(n, device="cuda", generator=g))).half()
    y = (sign() * (0.5 + 0.5 * torch.rand(n, device="cuda", generator=g))).half()
    y[::97] = 0.5
    out = ex.axpby(x, y, 1.0, 2.0 ** -10)
    assert torch.equal(out, _reference(x, y, 1.0, 2.0 ** -10))
    # subnormal results: x subnormal, b = 2^-25 puts the ties at |y| = 0.5
    xs = (torch.randint(1, 1024, (n,), device="cuda", generator=g, dtype=torch.int32).to(torch.int16)
          .view(torch.float16) * sign().half())
    out = ex.axpby(xs, y, 1.0, 2.0 ** -25)
    assert torch.equal(out, _reference(xs, y, 1.0, 2.0 ** -25))
    # overflow: 65504 + 16 is the tie to 65536 (inf), 65504 + 8 rounds back down
    big = torch.tensor([65504.0, 65504.0, -65504.0, 65504.0], device="cuda", dtype=torch.float16)
    add = torch.tensor([16.0, 8.0, -16.0, 15.0], device="cuda", dtype=torch.float16)
    out = ex.axpby(big, add)
    torch.cuda.synchronize()
    assert out.tolist() == [float("inf"), 65504.0, float("-inf"), 65504.0]
