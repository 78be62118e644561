"""The `portable` command as a user types it: errors in one style, help that lists what it
accepts, and output that says what it did (issue 36's CLI papercuts)."""
import io
import json
import os
import subprocess
import sys
from importlib.metadata import version

import pytest

from portable import bench, cli, results
from portable.errors import CompileError
from portable.kernels import KERNELS
from portable.kernels.vector_add import VectorAdd
from portable.params import Choice, DTypeChoice, Range, describe


def run(argv, capsys):
    """(exit status, stdout, stderr) of `portable ARGV`, argparse's own exits included."""
    try:
        status = cli.main(argv)
    except SystemExit as e:
        status = e.code
    out, err = capsys.readouterr()
    return status, out, err


# ---------------------------------------------------------------- --version

def test_version_comes_from_the_package_metadata(capsys):
    status, out, _ = run(["--version"], capsys)
    assert status == 0 and out == f"portable {version('portable')}\n"


# ---------------------------------------------------------------- one error style

def test_param_without_equals_is_a_portable_error(capsys):
    for command in (["compile", "vector_add"], ["render", "vector_add", "--target", "sm_90a"]):
        status, out, err = run([*command, "-p", "block"], capsys)
        assert (status, out, err) == (2, "", "portable: --param: expected KEY=VALUE, got 'block'\n")


def test_param_error_as_typed_in_a_shell():
    p = subprocess.run([sys.executable, "-m", "portable.cli", "compile", "vector_add", "-p", "block"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 2
    assert p.stderr == "portable: --param: expected KEY=VALUE, got 'block'\n" and p.stdout == ""


@pytest.mark.parametrize("argv, message", [
    (["compile", "gemm"], "portable: kernel: unknown kernel 'gemm'; expected one of vector_add, mla_decode, mxfp4_moe, a .j2/.cu/.hip file"),
    (["bench", "--repeats", "x"], "portable: --repeats: expected an integer, got 'x'"),
    (["render", "vector_add"], "portable: --target: expected a value, got none"),
    (["compile", "vector_add", "--target"], "portable: --target: expected a value, got none"),
    (["compile", "vector_add", "-t", "vecs=3"], "portable: vecs: expected one of [1, 2, 4, 8], got 3"),
    (["compile", "vector_add", "--target", "sm_89"], "portable: target: unknown target 'sm_89'; expected one of sm_90a"),
])
def test_usage_errors_say_portable_what_expected_got_with_status_2(argv, message, capsys):
    status, _, err = run(argv, capsys)
    assert status == 2
    assert err.splitlines()[-1].startswith(message), err


# ---------------------------------------------------------------- doctor

LONG = ('"cuda" is an NVIDIA driver library and can only be found via system search. '
        "Ensure the NVIDIA display driver is installed.")


def test_doctor_prints_whole_messages(monkeypatch, capsys):
    from portable.backends import cuda_driver

    def no_driver():
        raise RuntimeError(LONG)
    monkeypatch.setattr(cuda_driver, "driver_version", no_driver)
    status, out, _ = run(["doctor"], capsys)
    assert status == 0
    line = next(s for s in out.splitlines() if s.startswith("cuda driver"))
    assert line.endswith(f"not available: {LONG}")          # piped: one whole line


def test_doctor_wraps_at_word_boundaries_on_a_terminal(monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self):
            return True
    monkeypatch.setattr(sys, "stdout", Terminal())
    monkeypatch.setattr(cli.shutil, "get_terminal_size", lambda *a: os.terminal_size((64, 24)))
    lines = cli._wrap(f"not available: {LONG}", indent=24)
    assert len(lines) > 1 and all(len(s) <= 40 for s in lines)
    assert " ".join(lines) == f"not available: {LONG}"       # no word cut


# ---------------------------------------------------------------- parameters in help

def test_describe_prints_a_choice_with_its_default():
    assert describe(Choice(("float32", "bfloat16"), "float32")) == "float32 | bfloat16 (default float32)"
    assert describe(Choice(("", "tile"), "")) == '"" | tile (default "")'


def test_describe_takes_a_range_spec_too():
    assert describe(Range(int, 64, 1024, 256)) == "64..1024 (default 256)"
    assert describe(Range(int, 64, 1024, 256, multiple_of=64)) == "64..1024, a multiple of 64 (default 256)"
    assert describe(Range(int, 1, 8, 2, power_of_two=True)) == "1..8, a power of two (default 2)"
    assert describe(DTypeChoice(("float32", "bfloat16"), "float32")) == "float32 | bfloat16 (default float32)"


@pytest.mark.parametrize("command", ["compile", "render"])
def test_help_lists_every_kernels_parameters(command, capsys):
    status, out, _ = run([command, "--help"], capsys)
    assert status == 0
    for name, cls in KERNELS.items():
        assert f"\n  {name}\n" in out
        for param, spec in cls.PARAMS.items():
            assert any(s.split() == [param, *describe(spec).split()] for s in out.splitlines()), param


def test_compile_kernel_params_prints_its_parameters(capsys):
    status, out, err = run(["compile", "vector_add", "--params"], capsys)
    assert status == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == "vector_add parameters (-p KEY=VALUE):"
    knobs = lines.index("  tuning (-t KEY=VALUE; from Python tuning={...}):")
    assert [s.split(None, 1) for s in lines[1:knobs]] == [[k, describe(spec)] for k, spec in VectorAdd.PARAMS.items()]
    assert [s.split(None, 1) for s in lines[knobs + 1:]] == [[k, describe(spec)] for k, spec in VectorAdd.TUNING.items()]
    assert "  dtype  float32 | bfloat16 (default float32)" in lines
    status, out, _ = run(["compile", "mla_decode", "--params"], capsys)
    assert status == 0 and 'loop         "" | tile | fragments | heads | twin (default "")' in out


# ---------------------------------------------------------------- compile: failed targets are errors

def test_a_target_that_fails_is_an_error_line_not_a_table_row(capsys):
    status, out, err = run(["compile", "mla_decode", "--target", "gfx942", "-t", "loop=heads"], capsys)
    assert status == 2 and out == ""
    assert err == "portable: gfx942: loop: 'heads' needs warpgroup MMA, which gfx942 lacks (use 'tile')\n"


def fake_reports(self, target):
    if target == "gfx942":
        raise CompileError("clang failed for gfx942\nrow_sum.hip:3: error: no member named 'x'")
    return [{"target": target, "kernel": "vector_add", "compiler": "fake 1.0", "registers": 16, "sgprs": None,
             "spill_bytes": 0, "stack_bytes": 0, "smem_bytes": 0, "occupancy": 1.0, "instructions": {}}]


def test_compiled_targets_keep_their_table_and_failures_go_to_stderr(monkeypatch, capsys):
    monkeypatch.setattr(VectorAdd, "reports", fake_reports)
    status, out, err = run(["compile", "vector_add", "--target", "sm_90a,gfx942,gfx950"], capsys)
    assert status == 2
    table = out.splitlines()
    assert len(table) == 3 and "error" not in table[0]
    assert [s.split()[0] for s in table[1:]] == ["sm_90a", "gfx950"]
    # the whole message: a compiler's log follows its first line
    assert err == "portable: gfx942: clang failed for gfx942\nrow_sum.hip:3: error: no member named 'x'\n"


def test_json_keeps_failed_targets_as_rows(monkeypatch, capsys):
    monkeypatch.setattr(VectorAdd, "reports", fake_reports)
    status, out, err = run(["compile", "vector_add", "--target", "sm_90a,gfx942", "--format", "json"], capsys)
    assert status == 2 and err.startswith("portable: gfx942: clang failed")
    rows = json.loads(out)
    assert [r["target"] for r in rows] == ["sm_90a", "gfx942"]
    assert rows[1]["error"] == "clang failed for gfx942" and "error" not in rows[0]


def test_all_targets_compiled_exit_0(monkeypatch, capsys):
    monkeypatch.setattr(VectorAdd, "reports", fake_reports)
    status, out, err = run(["compile", "vector_add", "--target", "sm_90a,sm_100a"], capsys)
    assert status == 0 and err == "" and len(out.splitlines()) == 3


def test_check_still_shows_failed_targets_in_its_table():
    # `portable check` prints compile_rows through format_report, error rows included
    rows = [{"target": "gfx942", "kernel": "mla_decode", "error": "loop: 'heads' needs warpgroup MMA"}]
    assert "needs warpgroup MMA" in cli.format_report(rows)


# ---------------------------------------------------------------- bench says where it writes

@pytest.fixture
def quick_bench(monkeypatch):
    calls = []

    def compile_only(names, shape_set):
        calls.append((names, shape_set))
        return results.new_result({})
    monkeypatch.setattr(bench, "bench_compile_only", compile_only)
    return calls


def test_bench_says_where_it_writes_at_the_start_and_the_end(quick_bench, tmp_path, capsys):
    out_file = tmp_path / "sub" / "r.json"
    status, _, err = run(["bench", "--compile-only", "--kernels", "vector_add", "--out", str(out_file)], capsys)
    assert status == 0 and out_file.exists()
    first, last = err.strip().splitlines()[0], err.strip().splitlines()[-1]
    assert first == f"portable bench: results will be written to {out_file.resolve()}"
    assert last.startswith(f"portable bench: wrote {out_file.resolve()}: 0 rows (compile-only)")


def test_bench_without_out_names_the_default_file(quick_bench, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    status, _, err = run(["bench", "--compile-only", "--kernels", "vector_add"], capsys)
    target = (tmp_path / "results.json").resolve()
    assert status == 0 and target.exists()
    assert err.splitlines()[0] == (f"portable bench: results will be written to {target} "
                                   "(no --out given: results.json in the current folder)")
    assert f"wrote {target}" in err


def test_bench_help_explains_shape_set_and_repeats(capsys):
    status, out, _ = run(["bench", "--help"], capsys)
    text = " ".join(out.split())
    assert status == 0
    assert "--shape-set SHAPE_SET which of each kernel's shape lists to run: default, quick" in text
    assert "--repeats REPEATS timed calls a kernel x shape" in text


def test_bench_refuses_zero_repeats(quick_bench, capsys):
    status, _, err = run(["bench", "--repeats", "0"], capsys)
    assert status == 2 and err == "portable: --repeats: expected a positive integer, got 0\n"
    assert quick_bench == []                                  # refused before any work


# ---------------------------------------------------------------- piped into head

def test_output_cut_short_by_a_pipe_is_no_traceback(monkeypatch, tmp_path):
    # `portable ref ... | head -N` (the README shows it): the reader leaves before the end
    from portable.porting import reference

    def reader_left(args):
        raise BrokenPipeError(32, "Broken pipe")
    monkeypatch.setattr(reference, "cmd_ref", reader_left)
    with open(tmp_path / "stdout", "w") as piped:
        monkeypatch.setattr(sys, "stdout", piped)
        assert cli.main(["ref", "--list"]) == 1
