"""Real compilers for all five targets; errors that show the log and the source."""
import pytest

import portable
from portable.backends import clang_amdgpu, nvrtc
from portable.errors import CompileError, ToolchainMissing
from portable.targets import get_target

from conftest import toolchain_or_skip

BROKEN = 'extern "C" __global__ void k(float* x) {\n    int a = 1;\n    x[0] = undefined_name + a;\n    x[1] = 2.0f;\n}\n'


def compiler(target):
    return nvrtc if target.startswith("sm_") else clang_amdgpu


@pytest.mark.parametrize("target", portable.targets())
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_vector_add_compiles_with_128bit_global_access(target, dtype):
    toolchain_or_skip(compiler(target).available())
    report = portable.load("vector_add", dtype=dtype).report(target)
    instr = report["instructions"]
    assert report["target"] == target and report["registers"] > 0
    assert instr["global_load_128"] >= 2 and instr["global_store_128"] >= 1, instr
    assert report["spill_bytes"] == 0 and report["stack_bytes"] == 0 and instr["local_memory"] == 0
    assert 0 < report["occupancy"] <= 1


@pytest.mark.parametrize("module,target", [(nvrtc, "sm_90a"), (clang_amdgpu, "gfx942")])
def test_compile_error_shows_log_and_rendered_lines(module, target):
    toolchain_or_skip(module.available())
    with pytest.raises(CompileError) as err:
        module.compile(BROKEN, target)
    text = str(err.value)
    assert "undefined_name" in text                       # the compiler's own words
    assert ">    3 |     x[0] = undefined_name + a;" in text  # the failing rendered line, marked
    assert "    2 |     int a = 1;" in text                   # with its neighbours
    assert err.value.log and err.value.source == BROKEN


def test_missing_amd_compiler_is_named(monkeypatch):
    monkeypatch.setenv("PORTABLE_AMD_CLANG", "/nonexistent/bin/clang")
    for cached in (clang_amdgpu.clang_command, clang_amdgpu.version, clang_amdgpu._linker_path):
        cached.cache_clear()
    try:
        with pytest.raises(ToolchainMissing, match=r"clang for AMDGPU not found \(/nonexistent/bin/clang\).*PORTABLE_AMD_CLANG"):
            clang_amdgpu.version()
        ok, why = clang_amdgpu.available()
        assert not ok and "portable[amd-offline]" in why
    finally:
        monkeypatch.delenv("PORTABLE_AMD_CLANG")
        # _linker_path depends on the clang found: it must not keep the missing one's answer
        for cached in (clang_amdgpu.clang_command, clang_amdgpu.version, clang_amdgpu._linker_path):
            cached.cache_clear()


def test_missing_nvrtc_is_named(monkeypatch):
    def gone():
        raise ToolchainMissing("NVRTC not found: pip install cuda-python nvidia-cuda-nvrtc")
    monkeypatch.setattr(nvrtc, "_nvrtc", gone)
    with pytest.raises(ToolchainMissing, match="NVRTC not found"):
        portable.load("vector_add", dtype="bfloat16", tuning={"vecs": 8}).report("sm_100a")


def test_unknown_target_lists_the_known_ones():
    with pytest.raises(portable.TargetError, match=r"unknown target 'sm_89'; expected one of sm_90a, sm_100a"):
        portable.load("vector_add", target="sm_89")
    with pytest.raises(portable.InputError, match="unknown kernel 'gemm'"):
        portable.load("gemm")


def test_cli_compile_all_lists_five_targets(capsys):
    from portable.cli import main
    for target in ("sm_90a", "gfx942"):
        toolchain_or_skip(compiler(target).available())
    assert main(["compile", "vector_add", "--target", "all"]) == 0
    out = capsys.readouterr().out
    for target in portable.targets():
        assert target in out
    assert "error" not in out


def test_reserved_shared_memory_counted_once():
    """NVIDIA's SHARED count holds the 1 KB the system reserves a block: a kernel declaring
    4096 bytes reports 5120, and a block of exactly half an SM's shared memory (reserve
    included) leaves room for two blocks, not one."""
    toolchain_or_skip(nvrtc.available())
    from portable.report import static_report
    static = portable.load('extern "C" __global__ void k(float* o) { __shared__ float s[1024]; '
                           's[threadIdx.x] = 1.f; __syncthreads(); o[threadIdx.x] = s[(threadIdx.x + 1) & 1023]; }',
                           lang="cuda")
    dynamic = portable.load('extern "C" __global__ void k(float* o) { extern __shared__ float s[]; '
                            's[threadIdx.x] = 1.f; __syncthreads(); o[threadIdx.x] = s[(threadIdx.x + 1) & 1023]; }',
                            lang="cuda")
    for target in ("sm_90a", "sm_100a", "sm_120a"):
        t = get_target(target)
        assert static.report(target)["smem_bytes"] == 4096 + t.smem_reserved_per_block
        half = t.smem_per_sm // 2 - t.smem_reserved_per_block            # dynamic bytes of half an SM
        r = static_report(dynamic.binary(target), "k", 128, dynamic_smem=half)
        assert r["smem_bytes"] == t.smem_per_sm // 2
        assert r["occupancy"] == pytest.approx(2 * 128 / t.max_threads_per_sm, abs=1e-3), (target, r)
