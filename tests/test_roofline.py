"""The roofline picture: a file is written with exactly one marker per timed row; the HTML
report embeds the pictures and the tables."""
import base64
import re

import pytest

from portable import results, roofline
from portable.cli import main
from test_results import compile_only_result, gpu_result, moe_result, times


def timed(result):
    return [r for r in result["rows"] if r["status"] == "ok" and r["median_us"]]


@pytest.mark.parametrize("suffix, magic", [("png", b"\x89PNG"), ("svg", b"<?xml")])
def test_one_marker_per_timed_row(tmp_path, suffix, magic):
    result = gpu_result()
    drawn = roofline.plot(result, tmp_path / f"h100.{suffix}")
    assert (tmp_path / f"h100.{suffix}").read_bytes().startswith(magic)
    assert len(timed(result)) == 3 and len(drawn.points) == 3        # the mismatch row has no time: no marker
    for point, row in zip(drawn.points, timed(result)):
        x, y = point.get_xdata(), point.get_ydata()
        assert len(x) == 1 and point.get_marker() not in (None, "None", "")
        assert x[0] == pytest.approx(row["flops"] / row["bytes"])
        assert y[0] == pytest.approx(row["flops"] / row["median_us"] / 1e6)
        assert row["kernel"] in point.get_label()
    assert not drawn.skipped


def test_roofs_from_datasheet_and_measured(tmp_path):
    drawn = roofline.plot(gpu_result(), tmp_path / "h100.png")
    styles = sorted(line.get_linestyle() for line in drawn.roofs)
    # datasheet (dashed): memory, fp32, bf16, fp8; measured (solid): memory, bf16, fp8
    assert styles.count("--") == 4 and styles.count("-") == 3
    only_sheet = roofline.plot(gpu_result(measured=False), tmp_path / "sheet.png")
    assert {line.get_linestyle() for line in only_sheet.roofs} == {"--"}


def test_unknown_device_plots_with_measured_roofs_only(tmp_path):
    drawn = roofline.plot(gpu_result(device="NVIDIA GB300", target="sm_100a", datasheet=None), tmp_path / "x.png")
    assert len(drawn.points) == 3 and {line.get_linestyle() for line in drawn.roofs} == {"-"}


def test_rows_without_traffic_are_skipped_and_said(tmp_path):
    result = gpu_result()
    results.add_row(result, {"kernel": "noop", "shape": {}, "target": "sm_90a", "status": "ok",
                             "times_us": times(3.0), "flops": 0, "bytes": 0})
    drawn = roofline.plot(result, tmp_path / "h100.png")
    assert len(drawn.points) == 3 and drawn.skipped == ["noop: flops or bytes is 0 (no place on a log axis)"]


def test_refusals_name_the_argument(tmp_path):
    with pytest.raises(ValueError, match="compile-only file has no times to plot"):
        roofline.plot(compile_only_result(), tmp_path / "cpu.png")
    with pytest.raises(ValueError, match=r"path: expected a \.png or \.svg file name, got '.*h100\.jpg'"):
        roofline.plot(gpu_result(), tmp_path / "h100.jpg")


def test_html_report_embeds_plots_and_tables(tmp_path):
    gpu, cpu = tmp_path / "h100.json", tmp_path / "cpu.json"
    results.save(gpu_result(), gpu)
    results.save(compile_only_result(), cpu)
    page = roofline.html_report([gpu, cpu], tmp_path / "report.html").read_text()
    images = re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", page)
    assert len(images) == 1 and base64.b64decode(images[0]).startswith(b"\x89PNG")   # one GPU file, one picture
    assert "how measured" in page and "NVIDIA H100 Tensor Core GPU datasheet" in page          # ceilings side by side
    assert "Matrix (all files)" in page and "compile-only / gfx950" in page and str(cpu) in page


def test_command_line(tmp_path, capsys):
    gpu, cpu = tmp_path / "h100.json", tmp_path / "cpu.json"
    results.save(gpu_result(), gpu)
    results.save(compile_only_result(), cpu)
    out = tmp_path / "plots"
    assert main(["roofline", str(gpu), str(cpu), "--out", str(out)]) == 0
    assert (out / "nvidia-h100-80gb-hbm3-sm-90a.png").exists() and (out / "roofline.html").exists()
    printed = capsys.readouterr().out
    assert "(3 points)" in printed and "compile-only, no times to plot" in printed


def test_report_matrix_merges_runs_of_one_device_per_row(tmp_path):
    """Two H100 runs of different kernels: the report's matrix shows both, each cell naming its
    file by path (the dropped older file hid every MoE time)."""
    gpu, moe, cpu = tmp_path / "h100.json", tmp_path / "h100-mxfp4_moe.json", tmp_path / "cpu.json"
    results.save(gpu_result(date="2026-11-22T10:00:00+00:00"), gpu)
    results.save(moe_result(date="2026-11-21T10:00:00+00:00"), moe)
    results.save(compile_only_result(), cpu)
    page = roofline.html_report([gpu, moe, cpu], tmp_path / "report.html").read_text()
    matrix_part = page[page.index("Matrix (all files)"):]
    moe_row = re.search(r"<th>mxfp4_moe</th>.*?</tr>", matrix_part, flags=re.S).group(0)
    assert "293 us" in moe_row and "[2]" in moe_row
    assert f"[1] {gpu}: " in matrix_part and f"[2] {moe}: " in matrix_part and f"[3] {cpu}: " in matrix_part
    assert "dropped" not in matrix_part


def test_pictures_of_one_device_are_named_by_date_not_argument_order(tmp_path, capsys, monkeypatch):
    """The earliest run keeps the plain name and later runs add their date, whatever order the
    files are given in, so the committed pictures keep their names when the command lists the
    files in another order."""
    # Names only: drawing eight pictures would take most of the test's time
    monkeypatch.setattr(roofline, "plot", lambda result, path, title=None: roofline.RooflinePlot(
        path=path, points=timed(result)))
    early, late = tmp_path / "h100-mxfp4_moe.json", tmp_path / "h100.json"
    results.save(moe_result(date="2026-11-21T10:00:00+00:00"), early)
    results.save(gpu_result(date="2026-11-22T10:00:00+00:00"), late)
    for order, out in (([late, early], tmp_path / "a"), ([early, late], tmp_path / "b")):
        assert main(["roofline", *map(str, order), "--out", str(out)]) == 0
        printed = capsys.readouterr().out
        assert f"wrote {out / 'nvidia-h100-80gb-hbm3-sm-90a.png'} (1 points)" in printed
        assert f"wrote {out / 'nvidia-h100-80gb-hbm3-sm-90a-20261122100000.png'} (3 points)" in printed
