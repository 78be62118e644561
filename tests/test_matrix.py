"""The merge: a GPU file and a compile-only file give one table with all five targets; files are
merged per row (two runs of one device that measured different kernels both show; the same row
in two files: the newer wins) and every cell names its file."""
import io
import json

import pandas as pd
import pytest

from portable import matrix, results
from portable.cli import main
from test_results import FIVE_TARGETS, H100, VERSIONS, compile_only_result, gpu_result, moe_result, times

# Rows keep the bench's order, so the index is not lexsorted; lookups here are few and small.
pytestmark = pytest.mark.filterwarnings("ignore::pandas.errors.PerformanceWarning")

GPU_COLUMN = f"{H100} / sm_90a"
FP32 = ("vector_add", "n=2^28", "dtype=float32")
GEMM = ("gemm", "m=8192 n=8192 k=8192", "dtype=bfloat16")


def columns(frame):
    return list(dict.fromkeys(frame.columns.get_level_values("column")))


def notes(frame):
    return "\n".join(frame.attrs["notes"])


def test_gpu_and_compile_only_give_all_five_targets():
    frame = matrix.merge([gpu_result(), compile_only_result()])
    assert columns(frame) == [GPU_COLUMN] + [f"compile-only / {t}" for t in FIVE_TARGETS]
    assert list(frame.index.names) == ["kernel", "shape", "params"]
    assert list(frame.index) == [FP32, ("vector_add", "n=2^28", "dtype=bfloat16"),
                                 ("vector_add", "n=1000", "dtype=float32"), GEMM]

    cell = frame.loc[FP32, GPU_COLUMN]
    n_bytes = 3 * (1 << 28) * 4
    assert cell["status"] == "ok" and cell["unit"] == "TB/s"
    assert cell["achieved"] == pytest.approx(n_bytes / 1085.0 / 1e6)
    assert cell["pct_of_roofline"] == pytest.approx(100 * n_bytes / (2.98e6 * 1085.0))   # measured copy ceiling
    assert cell["best_peer"] == "torch" and cell["vs_best_peer"] == pytest.approx(1070.0 / 1085.0)

    gemm = frame.loc[GEMM, GPU_COLUMN]
    assert gemm["unit"] == "TFLOP/s"

    for target in FIVE_TARGETS:
        static = frame.loc[FP32, f"compile-only / {target}"]
        assert static["status"] == "compile-only" and "regs" in static["static"]
    text = matrix.text_table(frame)
    assert text.loc[FP32, "compile-only / gfx950"] == "compiled, 12 regs, occ 100%, ld128, st128 [2]"
    assert matrix.text_table(frame, marks=False).loc[FP32, "compile-only / gfx950"] == \
        "compiled, 12 regs, occ 100%, ld128, st128"
    assert text.loc[FP32, GPU_COLUMN].startswith("1085 us, 2.97 TB/s (100%), 0.99x torch")
    assert text.loc[("vector_add", "n=1000", "dtype=float32"), GPU_COLUMN].startswith("MISMATCH: max abs error")


def test_duplicate_runs_latest_wins_and_says_so():
    old = gpu_result(date="2026-11-20T10:00:00+00:00")
    new = gpu_result(date="2026-11-22T10:00:00+00:00")
    new["rows"][0]["times_us"] = times(1100.0)
    new["rows"][0]["median_us"] = 1100.0
    frame = matrix.merge([new, old])                                   # argument order does not matter
    assert columns(frame) == [GPU_COLUMN]
    assert frame.loc[FP32, (GPU_COLUMN, "median_us")] == 1100.0
    text = notes(frame)
    assert "dropped results[1]" in text and "2026-11-20" in text and "is newer" in text and "same software" in text
    for render in (matrix.to_markdown, matrix.to_html, matrix.to_csv):
        assert "dropped results[1]" in render(frame)


def test_two_files_for_one_device_with_disjoint_kernels_both_show():
    """The committed matrix lost every H100 MoE time: the older MoE file was dropped whole for
    the newer file of other kernels. Per row, both show, each cell naming its file."""
    moe = moe_result(date="2026-11-21T10:00:00+00:00", shapes=(4, 64))
    frame = matrix.merge([gpu_result(date="2026-11-22T10:00:00+00:00"), moe])
    assert columns(frame) == [GPU_COLUMN]
    moe_keys = [key for key in frame.index if key[0] == "mxfp4_moe"]
    assert len(moe_keys) == 2 and FP32 in frame.index and GEMM in frame.index
    assert frame.loc[moe_keys[1], (GPU_COLUMN, "median_us")] == pytest.approx(293.0)
    assert frame.loc[FP32, (GPU_COLUMN, "median_us")] == pytest.approx(1085.0)
    assert frame.loc[moe_keys[0], (GPU_COLUMN, "source")].startswith("results[1]")
    assert frame.loc[FP32, (GPU_COLUMN, "source")].startswith("results[0]")
    assert "dropped" not in notes(frame) and f"{GPU_COLUMN}: cells from 2 files" in notes(frame)
    assert "git_commit 589fbfc -> ab960aa" in notes(frame)
    assert [s["cells"] for s in frame.attrs["sources"]] == [4, 2]
    text = matrix.text_table(frame)
    assert text.loc[moe_keys[0], GPU_COLUMN].endswith(" [2]") and text.loc[FP32, GPU_COLUMN].endswith(" [1]")
    md = matrix.to_markdown(frame)
    assert "- [1] results[0] (NVIDIA H100 80GB HBM3, 2026-11-22T10:00:00+00:00): NVIDIA H100 80GB HBM3 / sm_90a " \
           "(4 cells)" in md and "- [2] results[1] (" in md
    assert "[2] results[1] (" in matrix.to_html(frame)
    back = pd.read_csv(io.StringIO(matrix.to_csv(frame)), comment="#")
    assert sorted(back[f"{GPU_COLUMN} | source"].str.split(" ").str[0]) == ["results[0]"] * 4 + ["results[1]"] * 2


def test_same_row_in_two_files_newer_wins_and_the_source_names_it(tmp_path):
    """A re-run of one row: its cell comes from the newer file and says so; the older file's
    other rows stay; argument order does not matter."""
    old, new = tmp_path / "h100-old.json", tmp_path / "h100-rerun.json"
    results.save(gpu_result(date="2026-11-20T10:00:00+00:00"), old)
    rerun = moe_result(date="2026-11-22T10:00:00+00:00", commit="ab960aa")
    first = gpu_result()["rows"][0]
    results.add_row(rerun, {**{k: first[k] for k in ("kernel", "shape", "params", "target", "flops", "bytes")},
                            "status": "ok", "times_us": times(1100.0)})
    results.save(rerun, new)
    for order in ([old, new], [new, old]):
        frame = matrix.merge(order)
        assert frame.loc[FP32, (GPU_COLUMN, "median_us")] == 1100.0
        assert frame.loc[GEMM, (GPU_COLUMN, "median_us")] == pytest.approx(1900.0)      # only in the old file
        assert frame.loc[FP32, (GPU_COLUMN, "source")] == str(new)
        assert frame.loc[GEMM, (GPU_COLUMN, "source")] == str(old)
        assert f"{GPU_COLUMN}: dropped 1 of the 4 rows of {old} (date 2026-11-20T10:00:00+00:00): {new} " \
               f"(date 2026-11-22T10:00:00+00:00) is newer and has the same rows; same software" in notes(frame)
        assert [s["file"] for s in frame.attrs["sources"]] == [str(new), str(old)]
        assert matrix.text_table(frame).loc[FP32, GPU_COLUMN].endswith(" [1]")
    md = tmp_path / "m.md"
    assert main(["matrix", str(old), str(new), "--out", str(md)]) == 0
    text = md.read_text()
    assert f"- [1] {new}: {GPU_COLUMN} (2 cells)" in text and f"- [2] {old}: {GPU_COLUMN} (3 cells)" in text
    fp32_line = next(line for line in text.splitlines() if line.startswith("| vector_add | n=2^28 | dtype=float32 |"))
    assert "1100 us" in fp32_line and fp32_line.endswith("[1] |")


def test_version_mismatch_is_named():
    old = gpu_result(date="2026-11-20T10:00:00+00:00", commit="1111111", versions={**VERSIONS, "torch": "2.10.0"})
    new = gpu_result(date="2026-11-22T10:00:00+00:00", commit="2222222")
    text = notes(matrix.merge([old, new]))
    assert "torch 2.10.0 -> 2.11.0+cu130" in text and "git_commit 1111111 -> 2222222" in text


def test_keep_both_shows_each_file_in_a_dated_column():
    old = gpu_result(date="2026-11-20T10:00:00+00:00", versions={**VERSIONS, "torch": "2.10.0"})
    new = gpu_result(date="2026-11-22T10:00:00+00:00")
    frame = matrix.merge([old, new], keep="both")
    assert columns(frame) == [f"{GPU_COLUMN} @2026-11-22T10:00:00+00:00", f"{GPU_COLUMN} @2026-11-20T10:00:00+00:00"]
    assert "2 files, each shown in its own column" in notes(frame)


def test_keep_both_with_one_date_still_gives_two_columns():
    frame = matrix.merge([gpu_result(), gpu_result()], keep="both")
    assert len(columns(frame)) == 2 and len(set(columns(frame))) == 2


def test_columns_from_different_commits_are_noted():
    frame = matrix.merge([gpu_result(commit="aaaaaaa"), compile_only_result(commit="bbbbbbb")])
    assert "different portable commits" in notes(frame)
    assert "different portable commits" not in notes(matrix.merge([gpu_result(), compile_only_result()]))


def test_two_compile_only_files_compete_per_target():
    early = compile_only_result(date="2026-11-21T09:00:00+00:00")
    late = compile_only_result(targets=("gfx950",), date="2026-11-22T09:00:00+00:00")
    frame = matrix.merge([early, late])
    assert columns(frame) == [f"compile-only / {t}" for t in FIVE_TARGETS]
    assert sum("dropped" in n for n in frame.attrs["notes"]) == 1 and "compile-only / gfx950: dropped" in notes(frame)
    assert frame.attrs["columns"]["compile-only / gfx950"] == ["results[1] (compile-only, 2026-11-22T09:00:00+00:00)"]
    assert frame.attrs["columns"]["compile-only / gfx942"] == ["results[0] (compile-only, 2026-11-21T09:00:00+00:00)"]
    assert frame.loc[FP32, ("compile-only / gfx950", "source")].startswith("results[1]")


def test_params_are_part_of_the_row():
    frame = matrix.merge([gpu_result()])
    assert frame.loc[FP32, (GPU_COLUMN, "median_us")] == pytest.approx(1085.0)
    assert frame.loc[("vector_add", "n=2^28", "dtype=bfloat16"), (GPU_COLUMN, "median_us")] == pytest.approx(548.0)


def test_a_repeated_case_shows_the_fastest_and_says_so():
    result = gpu_result()
    results.add_row(result, {**{k: result["rows"][0][k] for k in ("kernel", "shape", "params", "target", "flops",
                                                                   "bytes")}, "status": "ok", "times_us": times(1050.0)})
    frame = matrix.merge([result])
    assert frame.loc[FP32, (GPU_COLUMN, "median_us")] == 1050.0
    assert "vector_add n=2^28 dtype=float32: 2 rows in one file; the fastest ok one is shown" in notes(frame)


def test_compile_only_rows_without_shape_hold_for_every_shape():
    static_only = results.new_result({"git_commit": "ab960aa", "versions": VERSIONS})
    results.add_row(static_only, {"kernel": "vector_add", "shape": {}, "params": {"dtype": "float32"},
                                  "target": "gfx942", "status": "compile-only",
                                  "flops": None, "bytes": None, "static": {"registers": 12, "spill_bytes": 0,
                                  "smem_bytes": 0, "occupancy": 1.0, "instructions": {}}})
    frame = matrix.merge([gpu_result(), static_only])
    fp32 = [key for key in frame.index if key[0] == "vector_add" and key[2] == "dtype=float32"]
    assert len(fp32) == 2 and all(frame.loc[key, ("compile-only / gfx942", "status")] == "compile-only" for key in fp32)
    assert pd.isna(frame.loc[("vector_add", "n=2^28", "dtype=bfloat16"), ("compile-only / gfx942", "status")])
    assert ("vector_add", matrix.ANY_SHAPE, "dtype=float32") not in frame.index


def test_unknown_device_without_ceilings_still_shows_time():
    result = gpu_result(device="NVIDIA GB300", target="sm_100a", measured=False, datasheet=None)
    cell = matrix.merge([result]).loc[FP32, "NVIDIA GB300 / sm_100a"]
    assert cell["median_us"] == pytest.approx(1085.0) and cell["pct_of_roofline"] is None


def test_above_the_roof_is_noted():
    result = gpu_result()
    result["rows"][0]["bytes"] *= 2              # a cost model that claims twice the traffic
    assert "reaches 199% of its roofline bound" in notes(matrix.merge([result]))


def test_formats_carry_table_and_notes():
    frame = matrix.merge([gpu_result(), compile_only_result()])
    md = matrix.to_markdown(frame)
    assert md.splitlines()[0].startswith("| kernel | shape | params | NVIDIA H100")
    assert "Notes:" in md and "Sources (a cell's [n]):" in md
    back = pd.read_csv(io.StringIO(matrix.to_csv(frame)), comment="#")
    assert len(back) == len(frame) and f"{GPU_COLUMN} | median_us" in back.columns
    assert f"{GPU_COLUMN} | source" in back.columns
    page = matrix.to_html(frame)
    assert page.count("<table") == 1 and "compile-only / gfx950" in page and "<li>cell:" in page
    with pytest.raises(ValueError, match="format: expected one of md, csv, html, got 'xlsx'"):
        matrix.render(frame, "xlsx")


def test_bad_input_names_its_position():
    broken = gpu_result()
    del broken["rows"][0]["kernel"]
    with pytest.raises(ValueError, match=r"results\[1\]: rows\[0\]\.kernel: missing"):
        matrix.merge([gpu_result(), broken])
    with pytest.raises(ValueError, match="keep: expected one of latest, both"):
        matrix.merge([gpu_result()], keep="oldest")


def test_command_line(tmp_path, capsys):
    gpu, cpu = tmp_path / "h100.json", tmp_path / "cpu.json"
    results.save(gpu_result(), gpu)
    results.save(compile_only_result(), cpu)
    assert main(["matrix", str(gpu), str(cpu), "--format", "md", "--out", str(tmp_path / "m.md")]) == 0
    assert "compile-only / gfx950" in (tmp_path / "m.md").read_text()
    assert main(["matrix", str(gpu), str(cpu), "--out", str(tmp_path / "m.csv")]) == 0   # format from suffix
    assert (tmp_path / "m.csv").read_text().startswith("# cell:")
    assert main(["matrix", str(gpu)]) == 0 and "| vector_add |" in capsys.readouterr().out
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema": "other"}))
    with pytest.raises(SystemExit, match=r"portable matrix: .*bad\.json: result\.schema: expected"):
        main(["matrix", str(bad)])


def test_rows_and_columns_can_be_selected_for_a_short_table(capsys):
    """`--rows REGEX --columns TEXT`: the README's results table, from the committed files."""
    from portable.cli import main
    root = __import__("pathlib").Path(__file__).resolve().parents[1] / "bench" / "results"
    assert main(["matrix", str(root / "h100.json"), str(root / "h100-mxfp4_moe.json"), "--columns", "H100",
                 "--rows", r"vector_add n=2\^28"]) == 0
    table = [l for l in capsys.readouterr().out.splitlines() if l.startswith("| vector_add")]
    assert len(table) == 2 and all(l.count("|") == 5 for l in table)
