"""`portable port`: CUDA -> HIP translation read from the mapping table (CPU only; the compile
of a ported file needs the offline AMD toolchain and is skipped without it)."""
import csv
import io
import re
import shutil
from pathlib import Path

import pytest

from portable.porting import port, port_translate
from portable.cli import Parser
from portable.errors import InputError
from portable.porting.port_translate import translate

from conftest import toolchain_or_skip

SAMPLES = Path(__file__).parent / "port_samples"


def hip(text, **kw):
    return translate(text, **kw).text


def notes(text, **kw):
    return [(n.line, n.rule, n.message) for n in translate(text, **kw).notes]


def run_cli(*argv):
    parser = Parser(prog="portable")
    port.add_cli(parser.add_subparsers())
    args = parser.parse_args(["port", *map(str, argv)])
    return args.func(args)


# ---------------------------------------------------------------- names

def test_api_names_and_types_from_the_table():
    out = hip("cudaStream_t s; cudaError_t e = cudaMalloc(&p, n);\ncudaMemcpy(d, h, n, cudaMemcpyHostToDevice);\n")
    assert out == "hipStream_t s; hipError_t e = hipMalloc(&p, n);\nhipMemcpy(d, h, n, hipMemcpyHostToDevice);\n"


def test_names_only_at_identifier_boundaries():
    src = "mycudaMalloc(); cudaMallocX(); cudaMalloc_count = 1; obj.cudaMalloc(); ptr->cudaFree(); cudaFree(p);\n"
    out = hip(src)
    assert out == src.replace("cudaFree(p)", "hipFree(p)")


def test_comments_and_strings_are_untouched():
    src = ('// cudaMalloc in a comment\n/* cudaFree(p) */ x = 1;\nprintf("cudaMemcpy %d", 1);\n'
           "char c = 'c'; auto r = R\"(cudaMalloc)\";\ncudaFree(p); // cudaFree\n")
    out = hip(src)
    assert out == src.replace("cudaFree(p); //", "hipFree(p); //")


def test_a_name_the_file_defines_itself_is_left_alone():
    src = "#define cudaCheck(x) x\ncudaCheck(cudaMalloc(&p, 4));\n"
    assert hip(src) == "#define cudaCheck(x) x\ncudaCheck(hipMalloc(&p, 4));\n"
    assert notes(src) == []


def test_what_has_no_hip_equivalent_stays_and_is_reported():
    src = "float v = __ldcg(p);\n#if __CUDA_ARCH__ >= 800\n#endif\ncudaGraphInstantiate(&e, g, 0);\ncudaFooBar();\n"
    assert hip(src) == src
    found = {(line, message.split(":")[0]) for line, rule, message in notes(src)}
    assert found == {(1, "__ldcg"), (2, "__CUDA_ARCH__"), (4, "cudaGraphInstantiate"), (5, "cudaFooBar")}
    assert all(rule == "untranslated" for _, rule, _ in notes(src))


def test_rules_come_from_the_table(monkeypatch):
    def row(cuda, hip, file="ref_x.csv:2", amd="yes", **kw):
        return {"key": "", "category": "runtime", "cuda": cuda, "hip": hip, "cuda_expr": "", "hip_expr": "",
                "sm_90a": "yes", "sm_100a": "yes", "sm_120a": "yes", "gfx942": amd, "gfx950": amd,
                "note": "", "source": "test", "file": file, **kw}
    table = (row("cudaAlpha", "hipAlpha"),
             row("cudaBeta", "hipBetaHand"), row("cudaBeta", "hipBetaGenerated", file="generated_x.csv:2"),
             row("cudaGamma", "hipGamma", file="generated_x.csv:3"),
             row("cudaDelta(p, flags)", "hipDelta(p)"),
             row("cudaEps (an annotation) / cudaZeta", "hipEps (another) / hipZeta"),
             row("cudaEta", "none (nearest: nothing)"),
             row("cudaTheta", "hipTheta", amd="no"),
             row("cudaIota", "hipIota1 (gfx942) / hipIota2 (gfx950)"),
             row("__stx", "__builtin_store", key="mem.stx", cuda_expr="__stx({ptr}, {v})",
                 hip_expr="__builtin_store({v}, {ptr})"))
    monkeypatch.setattr(port_translate, "load_table", lambda: table)
    port_translate.rules.cache_clear()
    try:
        r = port_translate.rules()
        assert r.names == {"cudaAlpha": "hipAlpha", "cudaBeta": "hipBetaHand", "cudaGamma": "hipGamma",
                           "cudaEps": "hipEps", "cudaZeta": "hipZeta"}
        assert set(r.blocked) == {"cudaDelta", "cudaEta", "cudaTheta", "cudaIota"}
        assert hip("__stx(p, 1.0f);\n") == "__builtin_store(1.0f, p);\n"     # arguments in HIP's order
    finally:
        port_translate.rules.cache_clear()


# ---------------------------------------------------------------- headers

def test_headers_from_the_header_rows_guarded_for_hiprtc():
    src = "#include <cuda_runtime.h>\n#include <cuda_fp16.h>\n#include <cstdint>\n#include \"local.cuh\"\n"
    result = translate(src)
    assert result.text == "#include <hip/hip_runtime.h>\n#include <hip/hip_fp16.h>\n#include <cstdint>\n#include \"local.cuh\"\n"
    assert result.rtc_guard == {1, 2} and result.counts["headers"] == 2
    out = port.port_text(src).text
    assert out.startswith("#if !defined(__HIPCC_RTC__)") and out.count("#endif") == 1
    assert out.index("#endif") < out.index("#include <cstdint>")


def test_headers_without_hip_equivalent_stay_and_are_reported():
    src = "#include <cuda_pipeline.h>\n#include <cutlass/gemm/gemm.h>\n#include <cuda_new_thing.h>\n"
    assert hip(src) == src
    assert [(line, message.split(":")[0]) for line, _, message in notes(src)] == \
        [(1, "<cuda_pipeline.h>"), (2, "<cutlass/gemm/gemm.h>"), (3, "<cuda_new_thing.h>")]


def test_a_quoted_include_of_a_cu_file_follows_it_to_hip():
    assert hip('#include "part.cu"\n', rename_cu=True) == '#include "part.hip"\n'
    assert hip('#include "part.cu"\n') == '#include "part.cu"\n'


# ---------------------------------------------------------------- warp masks

WARP32 = "__device__ float f(float v) {{ {} }}\n"             # counts lanes in 32s (no warpSize)
WAVE = "__device__ float f(float v) {{ int w = warpSize; {} }}\n"


def test_full_masks_in_every_spelling_drop_to_the_hip_forms():
    body = ("v += __shfl_xor_sync(0xffffffff, v, 1); v += __shfl_down_sync(FULL, v, 2); "
            "v += __shfl_up_sync(~0u, v, 1); v += __shfl_sync(uint32_t(-1), v, 0, 16); "
            "return __any_sync(0xFFFFFFFFu, v > 0) + __all_sync(~0, v > 1);")
    out = hip("#define FULL 0xffffffff\n" + WAVE.format(body))
    assert ("__shfl_xor(v, 1)" in out and "__shfl_down(v, 2)" in out and "__shfl_up(v, 1)" in out
            and "__shfl(v, 0, 16)" in out and "__any(v > 0)" in out and "__all(v > 1)" in out)
    assert "_sync" not in out.split("\n", 1)[1]


def test_shuffles_keep_cudas_width_where_lanes_are_counted_in_32s():
    assert "__shfl(v, 0, 32)" in hip(WARP32.format("return __shfl_sync(0xffffffff, v, 0);"))
    assert "__shfl(v, 0)" in hip(WAVE.format("return __shfl_sync(0xffffffff, v, 0);"))


def test_a_partial_mask_is_left_and_reported():
    src = WAVE.format("return __shfl_xor_sync(0x0000ffff, v, 1);")
    assert hip(src) == src
    (line, rule, message), = notes(src)
    assert rule == "untranslated" and "0x0000ffff" in message and "64-bit mask" in message


def test_other_sync_calls_get_the_64_bit_full_mask():
    out = hip(WAVE.format("__syncwarp(0xffffffff); __syncwarp(); return __match_any_sync(0xffffffff, v);"))
    assert "__syncwarp(0xffffffffffffffffull)" in out and "__syncwarp();" in out
    assert "__match_any_sync(0xffffffffffffffffull, v)" in out


def test_ballot_results_are_widened_to_64_bits():
    body = ("unsigned m = __ballot_sync(0xffffffff, v > 0); int below = __popc(m & 3u); "
            "int all = __popc(__ballot_sync(0xffffffff, v > 1)); auto a = __ballot_sync(0xffffffff, v > 2); "
            "const uint32_t c = __ballot_sync(0xffffffff, v > 3); return below + all + __ffs(c);")
    out = hip(WAVE.format(body))
    assert "unsigned long long m = __ballot(v > 0)" in out and "__popcll(m & 3u)" in out
    assert "__popcll(__ballot(v > 1))" in out and "auto a = __ballot(v > 2)" in out
    assert "const unsigned long long c = __ballot(v > 3)" in out and "__ffsll(c)" in out
    assert notes(WAVE.format(body)) == []


def test_a_ballot_where_lanes_are_counted_in_32s_is_reported():
    src = WARP32.format("unsigned m = __ballot_sync(0xffffffff, v > 0); return m;")
    assert "unsigned long long m = __ballot(v > 0)" in hip(src)
    (_, rule, message), = notes(src)
    assert rule == "ballot-width" and "(__lane_id() & 32)" in message


def test_a_ballot_of_unknown_width_is_reported():
    src = WAVE.format("store(__ballot_sync(0xffffffff, v > 0)); return 0;")
    assert "store(__ballot(v > 0))" in hip(src)
    assert [rule for _, rule, _ in notes(src)] == ["ballot-width"]


# ---------------------------------------------------------------- launches

LAUNCHES = ("void run(float* x, int n, cudaStream_t s) {\n"
            "    fill<<<(n + 255) / 256, 256>>>(x, n);\n"
            "    scale<float, 4><<<dim3(n), dim3(256), 64, s>>>(x,\n"
            "                                              2.0f, n);\n}\n")


def test_launches_are_kept_by_default_and_counted():
    result = translate(LAUNCHES)
    assert "fill<<<(n + 255) / 256, 256>>>(x, n);" in result.text and result.counts["launches"] == 2


def test_launches_rewritten_to_hipLaunchKernelGGL():
    out = hip(LAUNCHES, launch="ggl")
    assert "hipLaunchKernelGGL(fill, (n + 255) / 256, 256, 0, 0, x, n);" in out
    assert "hipLaunchKernelGGL((scale<float, 4>), dim3(n), dim3(256), 64, s, x,\n" in out
    assert out.count("\n") == LAUNCHES.count("\n")


@pytest.mark.parametrize("sample", sorted(p.name for p in SAMPLES.rglob("*.cu*")))
def test_translation_keeps_every_line_where_it_was(sample):
    src = next(SAMPLES.rglob(sample)).read_text()
    for launch in ("keep", "ggl"):
        assert translate(src, launch=launch).text.count("\n") == src.count("\n")


# ---------------------------------------------------------------- audit comments

def test_audit_findings_are_left_as_comments_above_their_lines():
    src = '__device__ int lane() {\n    int v;\n    asm volatile("mov.u32 %0, %%laneid;" : "=r"(v));\n    return v;\n}\n'
    lines = port.port_text(src, "x.cu").text.splitlines()
    at = next(i for i, line in enumerate(lines) if "asm volatile" in line)
    assert lines[at - 1].startswith("    // portable: inline-asm: ")


def test_comments_inside_a_continued_macro_keep_it_whole():
    src = "#define SUM(v) \\\n    v = __ldcg(&v); \\\n    v += 1\n"
    out = port.port_text(src).text
    assert re.search(r"^    /\* portable: [\w-]+: __ldcg[^*]*\*/ \\$", out, re.M)
    assert all(line.endswith("\\") for line in out.splitlines()[:-1])


def test_port_of_the_sample_counts_and_reports():
    ported = port.port_text((SAMPLES / "kernels.cu").read_text(), "kernels.cu")
    assert ported.counts["names"] >= 9 and ported.counts["headers"] == 3 and ported.counts["launches"] == 2
    assert ported.counts["masks"] == 8 and ported.counts["untranslated"] == 4
    assert "// portable: untranslated: __ldcg:" in ported.text
    assert "cudaMalloc in this comment" in ported.text and '"cudaMemcpy done' in ported.text


# ---------------------------------------------------------------- the command

def test_stats_text_and_csv(tmp_path, capsys):
    assert run_cli(SAMPLES, "-o", tmp_path / "out", "--stats") == 0
    out = capsys.readouterr()
    table = out.out.splitlines()
    assert table[0].split() == ["file", *port.COUNTS] and table[-1].startswith("total (4 files)")
    assert "kernels.cu:41: untranslated: __ldcg" in out.err
    assert run_cli(SAMPLES, "-o", tmp_path / "out", "--format", "csv") == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["file"].rsplit("/", 1)[-1] for r in rows[:-1]] == ["device_only.cu", "kernels.cu", "launch.cu", "util.cuh"]
    assert rows[-1]["file"] == "total (4 files)"
    assert int(rows[-1]["untranslated"]) == sum(int(r["untranslated"]) for r in rows[:-1])


def test_output_dir_mirrors_the_tree(tmp_path, capsys):
    run_cli(SAMPLES, "-o", tmp_path)
    made = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert made == ["device_only.hip", "kernels.hip", "tree/sub/launch.hip", "tree/util.cuh"]
    assert '#include "../util.cuh"' in (tmp_path / "tree/sub/launch.hip").read_text()


def test_inplace_rewrites_the_files_and_a_second_run_adds_nothing(tmp_path, capsys):
    tree = shutil.copytree(SAMPLES, tmp_path / "s")
    run_cli(tree, "--inplace")
    first = (tree / "kernels.cu").read_text()
    assert "hipMalloc" in first and "// portable:" in first and not (tree / "kernels.hip").exists()
    run_cli(tree, "--inplace")
    assert (tree / "kernels.cu").read_text() == first


def test_one_file_goes_to_stdout(capsys):
    run_cli(SAMPLES / "tree" / "util.cuh")
    assert "#include <hip/hip_runtime.h>" in capsys.readouterr().out


def test_usage_errors():
    with pytest.raises(InputError, match="-o DIR or --inplace"):
        run_cli(SAMPLES)
    with pytest.raises(InputError, match="AMD targets"):
        port.port_text("int x;\n", targets="sm_90a")


# ---------------------------------------------------------------- the ported file compiles

def test_a_ported_device_file_compiles_for_gfx942(tmp_path):
    from portable.backends import clang_amdgpu
    toolchain_or_skip(clang_amdgpu.available())
    import portable
    ported = port.port_paths([SAMPLES / "device_only.cu"], out_dir=tmp_path)[0]
    assert ported.counts["untranslated"] == 0
    kernel = portable.load(ported.output)
    assert [r["kernel"] for r in kernel.reports("gfx942")] == ["row_sum", "count_positive"]


def test_rows_added_from_the_corpus_and_version_tests_left():
    """Names the port corpus met untranslated: bf16 and fp8 storage typedefs, cuRAND states,
    cudaLaunchKernelEx; a CUDA version test must not become a HIP_VERSION test (other numbers)."""
    src = ("__global__ void k(nv_bfloat16* p, __nv_fp8x2_storage_t* q, curandStatePhilox4_32_10_t* s) {}\n"
           "#if CUDA_VERSION >= 12000\n#endif\nvoid h() { cudaLaunchKernelEx(&config, k, a, b); }\n")
    out = hip(src)
    assert "__hip_bfloat16* p, __hip_fp8x2_storage_t* q, hiprandStatePhilox4_32_10_t* s" in out
    assert "hipLaunchKernelEx(&config, k, a, b)" in out
    assert "#if CUDA_VERSION >= 12000" in out
    assert any(line == 2 and "CUDA_VERSION" in msg and "HIP_VERSION = major" in msg for line, _, msg in notes(src))
