"""The result-file schema: a valid file passes; each missing or bad field fails, naming it.

The builders here (gpu_result, compile_only_result, moe_result) also serve test_matrix and test_roofline."""
import copy
import json

import pytest

from portable import results
from portable.devices import lookup_device

H100 = "NVIDIA H100 80GB HBM3"
FIVE_TARGETS = ("sm_90a", "sm_100a", "sm_120a", "gfx942", "gfx950")
MEASURED_H100 = {
    "copy_tbps": {"value": 2.98, "how": "torch copy_ of 1 GiB fp32, read + write bytes, median of 50"},
    "bf16_tflops": {"value": 760.0, "how": "torch.matmul bf16 8192^3, median of 50"},
    "fp8_tflops": {"value": 1378.0, "how": "torch._scaled_mm e4m3 8192^3, median of 50"},
}
VERSIONS = {"python": "3.11.7", "torch": "2.11.0+cu130", "cuda-bindings": "13.3.0", "nvrtc": "13.0", "portable": "0.1.0"}


def static(registers=26):
    return {"registers": registers, "spill_bytes": 0, "smem_bytes": 0, "occupancy": 1.0,
            "instructions": {"global_load_128": 4, "global_store_128": 2}}


def times(median, n=9):
    """n raw times around `median` (their median is exactly `median`)."""
    return [median * (1 + 0.01 * (i - n // 2)) for i in range(n)]


def gpu_result(device=H100, target="sm_90a", date="2026-11-22T10:00:00+00:00", commit="ab960aa",
               versions=None, measured=True, datasheet="lookup"):
    env = {"device": device, "target": target, "driver": "580.65.06 (CUDA 13.0)", "git_commit": commit,
           "date": date, "versions": dict(versions or VERSIONS),
           "ceilings": {"measured": copy.deepcopy(MEASURED_H100) if measured else {},
                        "datasheet": lookup_device(device) if datasheet == "lookup" else datasheet}}
    result = results.new_result(env)
    n = 1 << 28
    for dtype, size, median, torch_median in (("float32", 4, 1085.0, 1070.0), ("bfloat16", 2, 548.0, 560.0)):
        results.add_row(result, {
            "kernel": "vector_add", "shape": {"n": n}, "shape_set": "default",
            "params": {"dtype": dtype}, "target": target, "status": "ok",
            "times_us": times(median), "flops": n, "bytes": 3 * n * size, "static": static(),
            "peers": {"torch": {"times_us": times(torch_median)}}})
    # a compute-bound row so the plot shows a point near the compute roofs
    results.add_row(result, {
        "kernel": "gemm", "shape": {"m": 8192, "n": 8192, "k": 8192}, "params": {"dtype": "bfloat16"},
        "target": target, "status": "ok", "times_us": times(1900.0), "flops": 2 * 8192 ** 3,
        "bytes": 3 * 8192 * 8192 * 2, "peak": "bf16", "static": static(168),
        "peers": {"torch": {"times_us": times(1450.0)}}})
    results.add_row(result, {
        "kernel": "vector_add", "shape": {"n": 1000}, "params": {"dtype": "float32"},
        "target": target, "status": "mismatch", "error": "max abs error 0.5 at index 17 (expected 0)",
        "flops": 1000, "bytes": 12000, "static": static()})
    return result


def compile_only_result(targets=FIVE_TARGETS, date="2026-11-22T09:00:00+00:00", commit="ab960aa"):
    env = {"git_commit": commit, "date": date, "versions": dict(VERSIONS)}
    result = results.new_result(env)
    n = 1 << 28
    for target in targets:
        for dtype, size in (("float32", 4), ("bfloat16", 2)):
            results.add_row(result, {
                "kernel": "vector_add", "shape": {"n": n}, "params": {"dtype": dtype},
                "target": target, "status": "compile-only", "flops": n, "bytes": 3 * n * size,
                "static": static(26 if target.startswith("sm") else 12)})
    return result


def moe_result(date="2026-11-21T10:00:00+00:00", commit="589fbfc", median=293.0, shapes=(64,)):
    """A second H100 run that measured another kernel than gpu_result's (disjoint rows)."""
    env = {"device": H100, "target": "sm_90a", "driver": "580.65.06 (CUDA 13.0)", "git_commit": commit,
           "date": date, "versions": dict(VERSIONS),
           "ceilings": {"measured": copy.deepcopy(MEASURED_H100), "datasheet": lookup_device(H100)}}
    result = results.new_result(env)
    for m in shapes:
        results.add_row(result, {
            "kernel": "mxfp4_moe", "shape": {"model": "R1", "M": m}, "params": {"mode": "a16w4"},
            "target": "sm_90a", "status": "ok", "times_us": times(median), "flops": 2 * m * 7168 * 256 * 8,
            "bytes": 654_000_000, "peak": "bf16", "static": static(125)})
    return result


# --- a valid file ----------------------------------------------------------------------------
def test_valid_files_pass_and_round_trip(tmp_path):
    for result in (gpu_result(), compile_only_result()):
        assert results.validate(result) is result
        path = results.save(result, tmp_path / "r.json")
        assert results.load(path) == json.loads(json.dumps(result))


def test_new_result_fills_header():
    result = results.new_result({"device": H100, "target": "sm_90a"})
    env = result["environment"]
    assert result["schema"] == results.SCHEMA and result["rows"] == []
    assert env["mode"] == "gpu" and env["versions"]["torch"] and env["git_commit"]
    assert env["ceilings"]["datasheet"]["key"] == "h100_sxm"      # from devices.toml
    assert results.new_result({})["environment"]["mode"] == "compile-only"


def test_add_row_computes_median():
    result = gpu_result()
    row = result["rows"][0]
    assert row["median_us"] == pytest.approx(1085.0)
    assert row["peers"]["torch"]["median_us"] == pytest.approx(1070.0)


# --- each missing field fails, naming it ---------------------------------------------------------
ENV_FIELDS = ["mode", "device", "target", "driver", "versions", "git_commit", "date", "ceilings"]
ROW_FIELDS = ["kernel", "shape", "shape_set", "params", "target", "status", "error", "times_us", "median_us",
              "flops", "bytes", "peak", "static", "peers"]


@pytest.mark.parametrize("field", ["schema", "environment", "rows"])
def test_missing_top_level_field(field):
    result = gpu_result()
    del result[field]
    with pytest.raises(ValueError, match=rf"result\.{field}: missing"):
        results.validate(result)


@pytest.mark.parametrize("field", ENV_FIELDS)
def test_missing_environment_field(field):
    result = gpu_result()
    del result["environment"][field]
    with pytest.raises(ValueError, match=rf"environment\.{field}: missing"):
        results.validate(result)


@pytest.mark.parametrize("field", ["measured", "datasheet"])
def test_missing_ceilings_field(field):
    result = gpu_result()
    del result["environment"]["ceilings"][field]
    with pytest.raises(ValueError, match=rf"environment\.ceilings\.{field}: missing"):
        results.validate(result)


def test_measured_ceiling_needs_how():
    result = gpu_result()
    del result["environment"]["ceilings"]["measured"]["copy_tbps"]["how"]
    with pytest.raises(ValueError, match=r"ceilings\.measured\.copy_tbps\.how: missing"):
        results.validate(result)


@pytest.mark.parametrize("field", ROW_FIELDS)
def test_missing_row_field(field):
    result = gpu_result()
    del result["rows"][0][field]
    with pytest.raises(ValueError, match=rf"rows\[0\]\.{field}: missing"):
        results.validate(result)


@pytest.mark.parametrize("field", results.STATIC_FIELDS)
def test_missing_static_field(field):
    result = compile_only_result()
    del result["rows"][1]["static"][field]
    with pytest.raises(ValueError, match=rf"rows\[1\]\.static\.{field}: missing"):
        results.validate(result)


# --- bad values ---------------------------------------------------------------------------------
@pytest.mark.parametrize("where, key, value, message", [
    ("top", "schema", "portable.results/0", r"result\.schema: expected 'portable\.results/1'"),
    ("env", "mode", "cpu", r"environment\.mode: expected one of gpu, compile-only"),
    ("env", "target", "sm_80", r"environment\.target: expected one of sm_90a"),
    ("env", "date", "2026-11-22 10:00", r"environment\.date: expected ISO 8601 with a time zone"),
    ("env", "device", None, r"environment\.device: expected the torch device name"),
    ("env", "hostname", "gpu-node-7", r"environment\.hostname: result files carry no host"),
    ("row", "status", "slow", r"rows\[0\]\.status: expected one of ok, compile-only, failed, mismatch"),
    ("row", "target", "gfx90a", r"rows\[0\]\.target: expected one of"),
    ("row", "times_us", [], r"rows\[0\]\.times_us: an 'ok' row needs its raw times"),
    ("row", "times_us", [10.0, -1.0], r"rows\[0\]\.times_us: expected a list of positive"),
    ("row", "median_us", 5.0, r"rows\[0\]\.median_us: expected the median of times_us"),
    ("row", "bytes", -4, r"rows\[0\]\.bytes: expected a number >= 0"),
    ("row", "peak", "int8", r"rows\[0\]\.peak: expected one of fp32, bf16, fp8, fp4"),
])
def test_bad_values_name_the_field(where, key, value, message):
    result = gpu_result()
    obj = {"top": result, "env": result["environment"], "row": result["rows"][0]}[where]
    obj[key] = value
    with pytest.raises(ValueError, match=message):
        results.validate(result)


def test_status_promises():
    result = gpu_result()
    result["rows"][3]["error"] = None                      # a mismatch must say what mismatched
    with pytest.raises(ValueError, match=r"rows\[3\]\.error: a 'mismatch' row needs the error text"):
        results.validate(result)
    result = compile_only_result()
    result["rows"][0]["times_us"] = [1.0]                  # compile-only rows carry no times
    with pytest.raises(ValueError, match=r"rows\[0\]\.times_us: a 'compile-only' row has no times"):
        results.validate(result)
    result = compile_only_result()
    result["rows"][0]["static"] = None
    with pytest.raises(ValueError, match=r"rows\[0\]\.static: a 'compile-only' row needs its static report"):
        results.validate(result)


def test_add_row_refuses_a_bad_row():
    result = gpu_result()
    with pytest.raises(ValueError, match=r"rows\[4\]\.kernel: missing"):
        results.add_row(result, {"shape": {}, "target": "sm_90a", "status": "failed", "error": "x",
                                 "flops": None, "bytes": None})
    assert len(result["rows"]) == 4


def test_load_names_the_file(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"schema": results.SCHEMA, "rows": []}))
    with pytest.raises(ValueError, match=r"bad\.json: result\.environment: missing"):
        results.load(path)


def test_roofline_position_uses_measured_ceilings_first():
    result = gpu_result()
    env = result["environment"]
    pos = results.roofline_position(result["rows"][0], env)          # fp32 vector add: memory-bound
    assert pos["bound"] == "memory" and pos["ceiling_origin"] == "datasheet, measured"
    bound_us = 3 * (1 << 28) * 4 / (2.98 * 1e6)                       # bytes / measured copy bandwidth
    assert pos["pct_of_roofline"] == pytest.approx(100 * bound_us / 1085.0)
    gemm = results.roofline_position(result["rows"][2], env)          # bf16 GEMM: compute-bound
    assert gemm["bound"] == "compute"
    assert gemm["pct_of_roofline"] == pytest.approx(100 * 2 * 8192 ** 3 / (760.0 * 1e6) / 1900.0)
    env["ceilings"]["measured"] = {}
    assert results.roofline_position(result["rows"][0], env)["ceiling_origin"] == "datasheet"


def test_labels():
    assert results.label({"n": 1 << 28, "dtype": "float32"}) == "n=2^28 dtype=float32"
    assert results.label({}) == ""
    assert results.label({"m": 4096}) == "m=4096"


def test_the_documented_example_validates():
    """bench/results/SCHEMA.md's examples are real files, not prose that drifts."""
    import re
    from pathlib import Path
    text = (Path(__file__).resolve().parent.parent / "bench" / "results" / "SCHEMA.md").read_text()
    gpu_example, compile_only_row = re.findall(r"```json\n(.*?)```", text, flags=re.S)
    results.validate(json.loads(gpu_example))
    result = compile_only_result(targets=())
    result["rows"].append(json.loads(compile_only_row))
    results.validate(result)


# --- several files: merged per row -----------------------------------------------------------------
def merged(*items):
    return {entry["key"]: entry for entry in results.merge_rows(results.sources(list(items)))}


def test_merge_rows_keeps_disjoint_rows_of_one_device():
    """Two runs of one device that measured different kernels: every row stays (a merge per file
    kept only the newer file's rows)."""
    entries = merged(moe_result(date="2026-11-21T10:00:00+00:00"), gpu_result(date="2026-11-22T10:00:00+00:00"))
    kernels = {key[2] for key in entries}
    assert kernels == {"vector_add", "gemm", "mxfp4_moe"} and len(entries) == 5
    assert {entry["source"]["label"].split(" ")[0] for entry in entries.values()} == {"results[0]", "results[1]"}
    assert not any(entry["older"] for entry in entries.values())


def test_merge_rows_newest_row_wins_whatever_the_argument_order():
    old = gpu_result(date="2026-11-20T10:00:00+00:00")
    new = results.new_result({**old["environment"], "date": "2026-11-22T10:00:00+00:00"})
    results.add_row(new, {**{k: old["rows"][0][k] for k in ("kernel", "shape", "params", "target", "flops", "bytes")},
                          "status": "ok", "times_us": times(1100.0)})
    for items in ((old, new), (new, old)):
        entries = results.merge_rows(results.sources(list(items)))
        assert len(entries) == 4
        first = entries[0]                                  # the newest file's rows come first
        assert first["key"][2:] == ("vector_add", '{"n": 268435456}', '{"dtype": "float32"}')
        assert first["source"]["result"] is new and first["rows"][0]["median_us"] == 1100.0
        assert [o["result"] for o in first["older"]] == [old]
        assert all(e["source"]["result"] is old and not e["older"] for e in entries[1:])


def test_merge_rows_identity():
    """Shape and params compare by content; a static report is keyed as compile-only for its
    target, apart from the device's timed rows; one date: the later argument wins."""
    a, b = gpu_result(), gpu_result()
    b["rows"][0]["shape"] = dict(reversed(list(b["rows"][0]["shape"].items())))
    entries = results.merge_rows(results.sources([a, b]))
    assert len(entries) == 4 and all(e["source"]["result"] is b for e in entries)
    env = a["environment"]
    row = {**a["rows"][0], "status": "compile-only"}
    assert results.row_identity(row, env)[:2] == ("compile-only", "sm_90a")
    assert results.row_identity(a["rows"][0], env)[:2] == (H100, "sm_90a")
    repeated = gpu_result()
    repeated["rows"].append(copy.deepcopy(repeated["rows"][0]))
    assert [len(e["rows"]) for e in results.merge_rows(results.sources([repeated]))] == [2, 1, 1, 1]


def test_sources_take_paths_dicts_and_labelled_pairs(tmp_path):
    path = results.save(gpu_result(), tmp_path / "h100.json")
    srcs = results.sources([path, compile_only_result(), ("bench/x.json", moe_result())])
    assert [s["label"] for s in srcs] == [str(path), "results[1] (compile-only, 2026-11-22T09:00:00+00:00)",
                                          "bench/x.json"]
    with pytest.raises(ValueError, match=r"results\[0\]: expected a result dict or a file path, got int"):
        results.sources([3])
