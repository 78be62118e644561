"""The public kernel path as a user meets it, on a machine without a GPU: templates, raw
sources and template strings written outside the package load, render and compile for every
target; declarations, parameters and arguments are checked with named errors before launch;
errors point at the template's own file and line."""
import textwrap

import jinja2
import pytest
import torch

import portable
from conftest import toolchain_or_skip
from portable.backends import clang_amdgpu, nvrtc
from portable.errors import CompileError, InputError, TargetError, TemplateError

SAXPY = textwrap.dedent("""\
    {#portable
    [params]
    dtype = { values = ["float32", "bfloat16"], default = "float32" }
    block = { values = [128, 256], default = 256 }
    unroll = { min = 1, max = 4, default = 2 }
    #}
    {% include "helpers.j2" %}
    {% set T = "float" if dtype == "float32" else "bf16_t" %}
    {{ fn.kernel }} {{ fn.launch_bounds(block) }}
    void saxpy(const {{ T }}* {{ fn.restrict }} x, {{ T }}* {{ fn.restrict }} y, float a, long long n) {
        long long i = (long long){{ idx.block_x }} * {{ block }} + {{ idx.thread_x }};
        if (i < n) y[i] = store(a * load(x[i]) + load(y[i]));
    }

    {{ fn.kernel }} void warp_sum(const float* x, float* out, int n) {
        int i = {{ idx.block_x }} * {{ idx.block_dim_x }} + {{ idx.thread_x }};
        float v = i < n ? x[i] : 0.f;
    {% for o in [32, 16, 8, 4, 2, 1] if o < WARP %}
        v += {{ warp.shfl_xor('v', o) }};
    {% endfor %}
        if ({{ warp.lane }} == 0) out[i / {{ WARP }}] = v;
    }
    """)

HELPERS = textwrap.dedent("""\
    {% if dtype == "float32" %}
    {{ fn.device }} float load(float v) { return v; }
    {{ fn.device }} float store(float v) { return v; }
    {% else %}
    {{ fn.device }} float load(bf16_t v) { return {{ cvt.bf16_bits_to_f32('v') }}; }
    {{ fn.device }} bf16_t store(float v) { return f32_to_bf16_bits_rn(v); }
    {% endif %}
    """)

RAW_CUDA = """extern "C" __global__ void scale(float* y, const float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i];
}
"""


@pytest.fixture
def saxpy_file(tmp_path):
    (tmp_path / "helpers.j2").write_text(HELPERS)
    path = tmp_path / "saxpy.j2"
    path.write_text(SAXPY)
    return path


def _compilers():
    toolchain_or_skip(nvrtc.available())
    toolchain_or_skip(clang_amdgpu.available())


def test_template_file_outside_the_package_compiles_for_every_target(saxpy_file):
    _compilers()
    k = portable.load(saxpy_file, dtype=torch.bfloat16)
    assert k.params == {"dtype": "bfloat16", "block": 256, "unroll": 2}
    assert list(k.signatures()) == ["saxpy", "warp_sum"]
    assert [a.kind for a in k.signatures()["saxpy"].args] == ["ptr", "ptr", "f32", "i64"]
    for target in portable.targets():
        rows = k.reports(target)
        assert [r["kernel"] for r in rows] == ["saxpy", "warp_sum"]
        assert all(r["spill_bytes"] in (0, None) and r["stack_bytes"] == 0 for r in rows), rows
    # the reduction has the offset-32 step on wave64 only
    assert "__shfl_xor(v, 32)" in k.source("gfx942") and "32)" not in k.source("sm_90a").split("warp_sum")[-1]


def test_raw_cuda_and_hip_sources_compile_for_their_vendor_only(tmp_path):
    _compilers()
    cu = tmp_path / "scale.cu"
    cu.write_text(RAW_CUDA)
    k = portable.load(cu)
    assert k.targets() == [t for t in portable.targets() if t.startswith("sm_")]
    assert k.report("sm_120a")["kernel"] == "scale"
    with pytest.raises(TargetError, match=r"scale.cu cannot be built for gfx942: a CUDA source compiles for NVIDIA targets"):
        k.source("gfx942")
    hip = tmp_path / "scale.hip"
    hip.write_text(RAW_CUDA)
    k = portable.load(hip)
    assert k.targets() == ["gfx942", "gfx950"] and k.report("gfx950")["kernel"] == "scale"
    with pytest.raises(TargetError, match=r"a HIP source compiles for AMD targets only \(gfx942, gfx950\), and sm_90a is an NVIDIA target"):
        portable.load(hip, target="sm_90a")


def test_template_string_and_raw_string():
    _compilers()
    k = portable.load("{{ fn.kernel }} void fill(float* y, float v) { y[{{ idx.thread_x }}] = v; }")
    assert [r["target"] for t in portable.targets() for r in k.reports(t)] == portable.targets()
    k = portable.load(RAW_CUDA, lang="cuda")
    assert k.report("sm_90a")["kernel"] == "scale"
    with pytest.raises(InputError, match="lang: expected 'template', 'cuda' or 'hip', got 'ptx'"):
        portable.load(RAW_CUDA, lang="ptx")


def test_declaration_errors_name_the_line():
    with pytest.raises(InputError, match=r"<string>:1: parameter block: expected a default"):
        portable.load("{#portable\n[params]\nblock = { values = [1, 2] }\n#}\n{{ fn.kernel }} void k() {}")
    with pytest.raises(InputError, match=r"default 3 is not one of \[1, 2\]"):
        portable.load("{#portable\n[params]\nblock = { values = [1, 2], default = 3 }\n#}\n{{ fn.kernel }} void k() {}")
    with pytest.raises(InputError, match=r"<string>:2: the \{#portable ... #\} declaration is not valid TOML"):
        portable.load("\n{#portable\n[params\n#}\n{{ fn.kernel }} void k() {}")


def test_parameters_are_validated(saxpy_file):
    with pytest.raises(InputError, match=r"^block: expected one of \[128, 256\], got 100"):
        portable.load(saxpy_file, block=100)
    with pytest.raises(InputError, match=r"^unroll: expected an integer from 1 to 4, got 9"):
        portable.load(saxpy_file, unroll=9)
    with pytest.raises(InputError, match=r"^unroll: expected an integer from 1 to 4, got '2'"):
        portable.load(saxpy_file, unroll="2")
    with pytest.raises(InputError, match=r"unknown parameter\(s\) blk; this kernel takes dtype, block, unroll"):
        portable.load(saxpy_file, blk=128)
    with pytest.raises(InputError, match=r"^dtype: expected one of \['float32', 'bfloat16'\], got 'float16'"):
        portable.load(saxpy_file, dtype=torch.float16)


@pytest.mark.parametrize("args, message", [
    (lambda x: (x, x, 2.0), r"^saxpy: expected 4 arguments \(x, y, a, n\), got 3"),
    (lambda x: (x.double(), x, 2.0, 8), r"^saxpy: argument x \(`const float\* __restrict__ x`\): expected dtype float32, got torch.float64"),
    (lambda x: (x, x[::2], 2.0, 8), r"^saxpy: argument y \(`float\* __restrict__ y`\): expected a contiguous tensor, got strides \(2,\)"),
    (lambda x: (x, x, 2.0, 1 << 63), r"^saxpy: argument n \(`long long n`\): 9223372036854775808 overflows long long"),
    (lambda x: (x, x, 1e39, 8), r"^saxpy: argument a \(`float a`\): 1e\+39 overflows float"),
    (lambda x: (x, x, "2", 8), r"^saxpy: argument a \(`float a`\): expected a Python float \(float\), got str"),
    (lambda x: (x, x, 2.0, 8.0), r"^saxpy: argument n \(`long long n`\): expected a Python int \(long long\), got float 8.0"),
    (lambda x: ([1.0], x, 2.0, 8), r"^saxpy: argument x \(`const float\* __restrict__ x`\): expected a GPU tensor"),
    (lambda x: (x, x, 2.0, 8), r"^saxpy: argument x \(`const float\* __restrict__ x`\): expected a tensor on a GPU \(device 'cuda'\), got device 'cpu'"),
])
def test_arguments_are_checked_against_the_signature_before_launch(saxpy_file, args, message):
    k = portable.load(saxpy_file)
    with pytest.raises(InputError, match=message):
        k.saxpy[1, 256](*args(torch.randn(16)))


def test_launch_configuration_errors(saxpy_file):
    k = portable.load(saxpy_file)
    with pytest.raises(InputError, match=r"has 2 kernels \(saxpy, warp_sum\): launch one by name"):
        k[1, 256]
    with pytest.raises(InputError, match=r"^entry: .*saxpy.j2 has no kernel 'sxpy'; expected one of saxpy, warp_sum"):
        k.sxpy
    with pytest.raises(InputError, match=r"^block: 2048 threads a block; the targets allow at most 1024"):
        k.saxpy[1, 2048]
    with pytest.raises(InputError, match=r"^grid: expected a positive int or a tuple of 1 to 3 positive ints, got 0"):
        k.saxpy[0, 256]
    with pytest.raises(InputError, match=r"^launch: expected kernel\[grid, block\]"):
        k.saxpy[1]


def test_unknown_names_and_files():
    with pytest.raises(InputError, match=r"unknown kernel 'vector_ad' \(did you mean 'vector_add'\?\)"):
        portable.load("vector_ad")
    with pytest.raises(InputError, match=r"file 'nope.j2' not found"):
        portable.load("nope.j2")


def test_render_errors_point_at_the_template_line(tmp_path):
    path = tmp_path / "typo.j2"
    path.write_text("{{ fn.kernel }} void k(float* y) {\n\n    y[0] = {{ warp.shfl_xorr('1.f', 1) }};\n}\n")
    with pytest.raises(portable.PortableError, match=r"typo.j2:3: warp.shfl_xorr: no such dialect name; nearest: warp.shfl_xor"):
        portable.render(path, "sm_90a")
    with pytest.raises(TemplateError, match=r"^<string>:6: 'blk' is undefined; nearest names: block"):
        portable.render("{#portable\n[params]\nblock = { values = [1], default = 1 }\n#}\n{{ fn.kernel }} void k() {\n{{ blk }} }", "sm_90a")
    with pytest.raises(TemplateError, match=r"^<string>:1: unexpected '}'"):
        portable.render("{{ fn.kernel } void k() {}", "sm_90a")


def test_compile_errors_map_rendered_lines_to_the_template(saxpy_file, tmp_path):
    toolchain_or_skip(nvrtc.available())
    path = tmp_path / "broken.j2"
    path.write_text("{{ fn.kernel }} void k(float* y) {\n    int i = {{ idx.thread_x }};\n    y[i] = nothing_here;\n}\n")
    with pytest.raises(CompileError, match=r"(?s)for sm_90a \(template \S*broken.j2:3\).*>\s*\d+ \|     y\[i\] = nothing_here;    <- \S*broken.j2:3"):
        portable.load(path).report("sm_90a")


def test_line_marks_leave_built_in_renders_unchanged():
    """Rendering with the template line marks gives exactly what plain Jinja2 gives."""
    from portable.data import templates_dir
    from portable.dialect import dialect_for
    from portable.render import dialect_prelude, target_prelude
    from portable.targets import get_target
    for name, params in [("mla_decode", {}), ("mxfp4_moe", {}), ("mla_decode", {"kv_format": "mxfp4"})]:
        k = portable.load(name, **params)
        plain = jinja2.Environment(loader=jinja2.FileSystemLoader([*k.program.origin.search, str(templates_dir())]),
                                   undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                                   keep_trailing_newline=True)
        for target in ("sm_90a", "gfx950"):
            t = get_target(target)
            context = dict(dialect_for(target), target=t, WARP=t.wave,
                           dialect_prelude=dialect_prelude(t.dialect) + target_prelude(target), **k.template_context(target))
            expected = plain.get_template(k.TEMPLATE).render(**context)
            if "@prelude-begin" in expected:      # the renderer keeps only the prelude pieces a source uses
                from portable.prelude import prune_source
                expected = prune_source(expected)
            assert k.source(target) == expected, (name, target)


def test_built_in_signatures_are_read_from_their_source():
    """What used to be typed by hand beside each template is read from the rendered entry."""
    mla = portable.load("mla_decode").program.signatures("sm_90a")
    assert mla["mla_decode"].kinds == ("ptr",) * 12 + ("i32",) * 4 + ("f32", "tmap")
    assert mla["mla_combine"].kinds == ("ptr",) * 6 + ("i32",) * 2
    moe = portable.load("mxfp4_moe").program.signatures("sm_90a")
    assert moe["moe_gemm1"].kinds[-1] == "tmap" and moe["moe_combine"].kinds[-1] == "i64"


def test_custom_op_traces_through_torch_compile():
    def twice(x: torch.Tensor, a: float) -> torch.Tensor:
        return x * (2 * a)
    op = portable.custom_op("portable_test::twice", twice, like="x")
    x = torch.randn(5)
    compiled = torch.compile(lambda t: op(t, 1.5) + 1, fullgraph=True, backend="eager")
    assert torch.equal(compiled(x), x * 3.0 + 1)
    with pytest.raises(InputError, match="like: twice has no argument 'y'"):
        portable.custom_op("portable_test::bad", twice, like="y")


def test_the_cli_takes_files_wherever_it_takes_kernel_names(saxpy_file, capsys):
    _compilers()
    from portable.cli import main
    assert main(["compile", str(saxpy_file), "--target", "all", "-p", "block=128"]) == 0
    table = capsys.readouterr().out
    assert all(t in table for t in portable.targets()) and table.count("warp_sum") == len(portable.targets())
    assert main(["compile", str(saxpy_file), "--params"]) == 0
    assert "unroll  1..4 (default 2)" in capsys.readouterr().out
    assert main(["render", str(saxpy_file), "--target", "gfx950"]) == 0
    assert "__shfl_xor(v, 32)" in capsys.readouterr().out
    assert main(["check", str(saxpy_file), "--target", "sm_120a"]) == 0
    assert "sm_120a" in capsys.readouterr().out
    assert main(["compile", str(saxpy_file), "-p", "block=100"]) == 2
    assert "block: expected one of [128, 256], got 100" in capsys.readouterr().err


def test_line_marks_survive_string_filters():
    """Marks are not whitespace: `| trim` and `| upper` on a macro's text leave no debris."""
    src = portable.render("{% macro body() %}\n  int b = 2;\n{% endmacro %}\n"
                          "{{ fn.kernel }} void k(int* y) {\n{{ body() | trim }}\n{{ 'x' | upper }}\n}", "sm_90a")
    assert "int b = 2;\nX\n}" in src and "\ue000" not in src and "\ue001" not in src


def readme_template() -> str:
    """The template of README's "Write your own kernel" section, as a user would copy it."""
    readme = (__import__("pathlib").Path(__file__).resolve().parents[1] / "README.md").read_text()
    return readme[readme.index("## Write your own kernel"):].split("```")[1].lstrip("\n")


def test_readme_kernel_compiles_for_every_target(tmp_path):
    _compilers()
    (tmp_path / "row_sum.j2").write_text(readme_template())
    for dtype in ("float32", "bfloat16"):
        k = portable.load(tmp_path / "row_sum.j2", dtype=dtype)
        assert [r["spill_bytes"] for t in portable.targets() for r in k.reports(t)] == [0] * len(portable.targets())


def test_repr_is_the_load_call_with_the_knobs_set():
    assert repr(portable.load("mxfp4_moe")) == "portable.load('mxfp4_moe', mode='a16w4')"
    assert repr(portable.load("mla_decode", tuning={"loop": "heads"}, target="sm_90a")) == \
        "portable.load('mla_decode', kv_format='bf16', mma='auto', tuning={'loop': 'heads'}, target='sm_90a')"
