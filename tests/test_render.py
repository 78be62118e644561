"""Templates stay vendor-neutral; parameters cannot inject text; dialects differ where the table says."""
import re
from pathlib import Path

import jinja2
import pytest

import portable
from portable.data import templates_dir
from portable.dialect import dialect_for, vendor_only_spellings
from portable.render import render_template

# Always vendor-only, whatever the table holds.
FIXED_TOKENS = ["__shfl", "__nv_", "hip", "cuda", "asm", "__builtin_amdgcn", "__ballot", "__activemask",
                "__syncwarp", "wgmma", "tcgen05", "mfma", "__CUDA", "__HIP", "nvrtc", "amdgcn", "__lane_id"]


def vendor_tokens_in(text: str) -> list[str]:
    found = [t for t in FIXED_TOKENS if t.lower() in text.lower()]
    found += [t for t in vendor_only_spellings() if re.search(rf"\b{re.escape(t)}\b", text)]
    return found


def test_scanner_catches_a_planted_vendor_token():
    assert vendor_tokens_in("x = __shfl_xor_sync(0xffffffffu, v, 1);")
    assert vendor_tokens_in("y = __ballot(p);")
    assert vendor_tokens_in("v = __builtin_amdgcn_exp2f(x);")
    assert not vendor_tokens_in("{{ warp.shfl_xor('v', 1) }}")


def test_table_gives_vendor_only_spellings():
    tokens = vendor_only_spellings()
    assert {"__shfl_xor_sync", "__shfl_xor", "__ballot_sync", "__popcll"} <= tokens
    assert "threadIdx" not in tokens          # spelt the same on both


EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


KERNELS = Path(portable.__file__).resolve().parent / "kernels"


@pytest.mark.parametrize("path", sorted([p for p in templates_dir().rglob("*") if p.is_file()]
                                        + list(KERNELS.rglob("*.j2")) + list(EXAMPLES.rglob("*.j2"))),
                         ids=lambda p: p.name)
def test_templates_spell_no_vendor(path: Path):
    assert vendor_tokens_in(path.read_text()) == []


def test_dialects_differ_where_the_table_says():
    cuda, hip = dialect_for("sm_90a"), dialect_for("gfx942")
    assert cuda["warp"].shfl_xor("v", 16) == "__shfl_xor_sync(0xffffffffu, v, 16)"
    assert hip["warp"].shfl_xor("v", 16) == "__shfl_xor(v, 16)"
    assert str(cuda["warp"].mask_t) == "unsigned" and str(hip["warp"].mask_t) == "unsigned long long"
    assert str(cuda["warp"].size) == "32" and str(hip["warp"].size) == "64"
    assert str(cuda["sync"].block) == str(hip["sync"].block) == "__syncthreads()"


def test_spelling_refuses_text_that_is_not_an_expression():
    warp = dialect_for("gfx950")["warp"]
    with pytest.raises(ValueError, match="not a plain expression"):
        warp.shfl_xor("v); system(\"x\"", 1)
    with pytest.raises(ValueError, match="not a plain expression"):
        warp.shfl_xor("v; }", 1)
    with pytest.raises(TypeError, match="takes 2 arguments"):
        warp.shfl_xor("a", "b", "c")
    with pytest.raises(TypeError, match="needs arguments"):
        str(warp.shfl_xor)


def test_unavailable_row_refuses_to_render():
    cvt = dialect_for("gfx942")["cvt"]
    # the fp8 row has no rendered spelling: a template asking for it must fail, not emit ""
    with pytest.raises(portable.TargetError, match="not available on target gfx942"):
        cvt.fp8e4m3_to_f32("x")


@pytest.mark.parametrize("bad", [{"dtype": "float32; int x"}, {"dtype": "float16"}, {"block": 257},
                                 {"block": "256"}, {"vecs": True}, {"unroll": 4}])
def test_parameters_outside_declared_values_are_refused(bad):
    with pytest.raises(portable.InputError):
        portable.render("vector_add", target="sm_90a", **bad)


def test_parameter_error_names_parameter_and_choices():
    with pytest.raises(portable.InputError, match=r"block: expected one of \[64, 128, 256, 512, 1024\], got 257"):
        portable.load("vector_add", tuning={"block": 257})


def test_missing_template_variable_fails_loudly():
    """A name the template needs and nobody gave fails at the template's own line."""
    with pytest.raises(portable.errors.TemplateError, match=r"^vector_add.j2 \(built-in\):\d+: .*'block' is undefined"):
        render_template("vector_add.j2", "sm_90a", {"dtype": "float32"},
                        search=portable.load("vector_add").program.origin.search)


@pytest.mark.parametrize("target", portable.targets())
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_renders_for_every_target(target, dtype):
    src = portable.render("vector_add", target=target, dtype=dtype)
    assert 'extern "C" __global__' in src and "void vector_add(" in src
    assert "#include" not in src                       # self-contained: no headers on NVRTC's path
