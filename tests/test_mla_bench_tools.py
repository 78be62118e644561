"""The bench scripts that measure inside mla_decode's heads loops, against the templates they
edit (CPU only): a misspelt edit fails instead of timing the unedited loop, every ablation cut
and timeline mark finds its place, and every wait of a loop is timed."""
import pathlib
import re
import sys

import pytest

import portable
from portable.backends import nvrtc

sys.path.insert(0, str(pathlib.Path(__file__).parents[1] / "bench"))
import mla_ablation  # noqa: E402
import mla_timeline  # noqa: E402
import mla_waits  # noqa: E402
import source_edits  # noqa: E402
from conftest import toolchain_or_skip  # noqa: E402


def heads_source(fmt: str, mma: str = "auto", **knobs) -> str:
    k = portable.load("mla_decode", kv_format=fmt, mma=mma, tuning=knobs)
    return k.for_heads(32, "sm_90a", q_max=4, kv_min=8192, batch=128).source("sm_90a")


@pytest.fixture
def edits():
    yield source_edits.edit
    source_edits.edit([])


def test_a_misspelt_edit_fails(edits):
    edits([("no such text in the loop", "x")])
    with pytest.raises(ValueError, match="not in the rendered source"):
        heads_source("bf16")


def test_an_edit_changes_only_what_it_names(edits):
    plain = heads_source("bf16")
    cut = mla_ablation.REGS_CUTS["no P V"]
    edits(cut)
    edited = heads_source("bf16")
    assert edited != plain and edited == plain.replace(*cut[0])


@pytest.mark.parametrize("fmt, knobs, cuts", [("bf16", {"copies": "tensor"}, mla_ablation.REGS_CUTS),
                                              ("mxfp4", {"scores": "one"}, mla_ablation.MX_CUTS),
                                              ("mxfp4", {"scores": "regs", "mma": "fp8", "pairs": 1}, mla_ablation.MXREGS_CUTS),
                                              ("fp8", {"scores": "regs"}, mla_ablation.FP8REGS_CUTS),
                                              ("fp8", {"scores": "swap"}, mla_ablation.SWAP_CUTS)])
def test_every_ablation_cut_finds_its_loop(fmt, knobs, cuts):
    if knobs.get("scores") == "swap":           # (16 query rows a sequence only)
        source = portable.load("mla_decode", kv_format=fmt, tuning=knobs).for_heads(16, "sm_90a", q_max=1, kv_min=8192).source("sm_90a")
    else:
        source = heads_source(fmt, **knobs)
    for name, pieces in cuts.items():
        assert all(old in source for old, _ in pieces[:1]), name


def test_the_timeline_marks_every_point_of_the_regs_loop(edits):
    edits(mla_timeline.MARKS, then=mla_timeline.traced)          # as mla_timeline.main edits
    source = heads_source("bf16")
    for _, new in mla_timeline.MARKS:
        assert new in source
    marked = {int(p) for p in re.findall(r"ptrace_mark\((\d+)\)", source)}
    marked |= {2, 3, 4, 5}                        # (one call marks tiles 0, 1, 2 and the middle)
    assert marked | {8} == set(range(len(mla_timeline.POINTS)))
    assert "atomicMax(&ptrace_t[8]" in source.split("void mla_combine(")[0]


@pytest.mark.parametrize("fmt, mma", [("bf16", "auto"), ("fp8", "auto"), ("mxfp4", "auto")])
def test_every_wait_of_a_heads_loop_is_timed(fmt, mma, edits):
    plain = heads_source(fmt, mma)
    text, sites = mla_waits.timed(plain)
    edits([], then=lambda source: mla_waits.timed(source)[0])    # as mla_waits.main edits
    assert heads_source(fmt, mma) == text
    body = text[text.index("void mla_decode("):text.index("void mla_combine(")]
    assert body.count("PW(") == len(sites) > 5
    unwrapped = [m.group(0) for m in re.finditer(r"\b(" + mla_waits.WAITS + r")\s*\(", body)
                 if not body[:m.start()].endswith(", ")]
    assert unwrapped == [], unwrapped             # each call sits right after "PW(n, "
    assert "PLife _plife;" in body
    assert text.split("void mla_combine(")[1] == plain.split("void mla_combine(")[1]


def test_the_named_calls_are_timed_too(edits):
    """--calls decode,issue: each call of MXFP4's decode and copy lambdas is a site of its own,
    and the timed source compiles."""
    plain = heads_source("mxfp4", "auto", scores="one")
    text, sites = mla_waits.timed(plain, ("decode", "issue"))
    assert len(sites) > len(mla_waits.timed(plain)[1])
    assert any(": decode(" in s for s in sites) and any(": issue(" in s for s in sites)
    toolchain_or_skip(nvrtc.available())
    edits([], then=lambda source: mla_waits.timed(source, ("decode", "issue"))[0])
    k = portable.load("mla_decode", kv_format="mxfp4", tuning={"scores": "one", "decoders": 2})
    assert "SR_CLOCKLO" in k.for_heads(32, "sm_90a", q_max=4, kv_min=8192, batch=128).binary("sm_90a").asm


def test_the_rounding_emulation_is_the_reference_without_its_roundings():
    """mla_error_tail compares the kernel with mla_fp8_numerics.attend: unrounded it must be
    mla_reference (causal offsets included), and one e4m3 Q part must move it, within its bar."""
    import torch
    from mla_fp8_numerics import attend
    from portable.kernels.mla_decode import ERROR_BARS
    from portable.kernels.mla_decode.reference import dequantize_kv, make_mla_inputs, mla_reference
    inp = make_mla_inputs([300], 3, 16, "mxfp4", seed=5)
    want, _ = mla_reference(**inp, out_dtype=torch.float32)
    keys = dequantize_kv(inp["kv"], inp["kv_scale"])
    exact, _ = attend(inp["q"], keys, inp["sm_scale"], "bf16", "fp32")
    one, _ = attend(inp["q"], keys, inp["sm_scale"], "token", "e4m3")
    assert (exact - want).abs().max() < 1e-5
    assert 1e-4 < (one - want).abs().max() < ERROR_BARS["fp8"][0]
