"""The porting table as data, and `portable ref` as its lookup tool."""
import argparse
import csv
import io
import json
from collections import Counter

import pytest

from portable.porting import reference
from portable.data import TARGET_COLUMNS, load_table, mapping_dir
from portable.errors import InputError, TargetError

AVAILABILITY = {"yes", "no", "emulated", "partial"}
# the categories, as the table names them
REQUIRED_CATEGORIES = {
    "indexing", "synchronisation", "warp", "shared memory", "memory", "atomics", "math", "conversions",
    "matrix", "runtime", "driver", "module", "runtime compilation", "streams", "events", "graphs",
    "device", "launch", "profiling",
}


def rows():
    return load_table()


def row(cuda):
    matches = [r for r in rows() if r["cuda"] == cuda]
    assert len(matches) == 1, f"expected one row with cuda = {cuda!r}, found {len(matches)}"
    return matches[0]


def available(r):
    return {t for t in TARGET_COLUMNS if r[t] != "no"}


# ---------------------------------------------------------------- the table

def test_table_has_at_least_250_rows_covering_every_category():
    assert len(rows()) >= 250
    assert REQUIRED_CATEGORIES <= {r["category"] for r in rows()}


@pytest.mark.parametrize("r", load_table(), ids=lambda r: r["file"])
def test_every_row_is_complete(r):
    assert r["category"].strip()
    assert r["cuda"].strip(), "no CUDA spelling"
    assert r["hip"].strip(), "no HIP spelling (write 'none (nearest: ...)' when there is none)"
    for t in TARGET_COLUMNS:
        assert r[t] in AVAILABILITY, f"{t} = {r[t]!r}"
    assert r["source"].strip(), "every fact names where it comes from"


def test_reference_rows_are_not_render_rows():
    for path in sorted((mapping_dir() / "cuda_hip").glob("ref_*.csv")):
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                assert not (r["key"] or r["cuda_expr"] or r["hip_expr"]), f"{path.name}: {r['cuda']}"


def test_reference_rows_repeat_no_cuda_spelling():
    # a reference row never repeats a spelling already in the table: the renderer's rows own
    # theirs, and the backends' table test maps cuda -> hip through a dict
    counts = Counter(r["cuda"] for r in rows())
    repeated = [r["file"] for r in rows() if r["file"].startswith("ref_") and counts[r["cuda"]] > 1]
    assert repeated == []


def test_none_rows_say_what_is_nearest_or_why():
    for r in rows():
        if r["hip"].startswith("none") and r["hip"] != "none":
            assert r["hip"].startswith("none ("), r["hip"]


# ---------------------------------------------------------------- facts the issue names

def test_wave64_and_64_bit_masks_on_amd():
    assert "64" in row("warpSize (32)")["hip"]
    assert "64 bits" in row("__activemask()")["note"]
    assert row("unsigned (32-bit lane mask)")["hip"].startswith("unsigned long long")


def test_lds_sizes_per_target():
    note = row("cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes)")["note"]
    assert "64 KB gfx942" in note and "160 KB gfx950" in note


def test_fp8_fnuz_on_gfx942_and_ocp_elsewhere():
    r = row("__nv_fp8_e4m3 (cuda_fp8.h)")
    assert "__hip_fp8_e4m3_fnuz (gfx942)" in r["hip"] and "OCP, gfx950" in r["hip"]
    assert "max 240" in r["note"] and "max 448" in r["note"] and "half" in r["note"]
    assert r["gfx942"] == "partial" and r["gfx950"] == "yes"


def test_matrix_instructions_live_on_their_own_targets():
    assert available(row("wgmma.mma_async.sync.aligned.m64nNk16.f32.f16.f16")) == {"sm_90a"}
    assert available(row("tcgen05.mma.cta_group::1.kind::f16")) == {"sm_100a", "sm_103a"}   # sm_103a is like sm_100a
    block_scaled = row("mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0")
    assert {"sm_120a", "gfx950"} == available(block_scaled)
    scale = [r for r in rows() if r["hip"].startswith("__builtin_amdgcn_mfma_scale_")]
    assert scale and all(r["gfx942"] == "no" and r["gfx950"] == "yes" for r in scale)
    assert row("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32")["gfx950"] == "no"   # xf32 gone in CDNA4
    mfma = row("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
    assert "16x16x16" in mfma["hip"] and available(mfma) == set(TARGET_COLUMNS)


def test_driver_create_calls_keep_their_flags():
    # cuStreamCreate(&s, flags) and cuEventCreate(&e, flags) take flags; hipStreamCreate and
    # hipEventCreate take none, their WithFlags forms do (the runtime's cudaEventCreate takes none either)
    assert row("cuStreamCreate")["hip"] == "hipStreamCreateWithFlags"
    assert row("cuEventCreate")["hip"] == "hipEventCreateWithFlags"
    assert row("cudaEventCreate")["hip"] == "hipEventCreate"


# ---------------------------------------------------------------- lookup

def test_cuda_name_finds_its_row_first():
    found = reference.lookup("__shfl_xor_sync")
    assert found.iloc[0]["hip"] == "__shfl_xor" and found.iloc[0]["match"] == reference.EXACT
    assert len(found) > 1                         # the rows that mention it come along


def test_hip_name_finds_the_same_row():
    by_cuda = reference.lookup("__shfl_xor_sync").iloc[0]
    by_hip = reference.lookup("__shfl_xor")
    assert by_hip.iloc[0]["cuda"] == by_cuda["cuda"]
    launch = reference.lookup("hipModuleLaunchKernel")
    assert launch.iloc[0]["cuda"] == "cuLaunchKernel" and "argument order" in launch.iloc[0]["note"]


def test_any_case_and_ptx_names_match():
    assert reference.lookup("HIPMODULELAUNCHKERNEL").iloc[0]["cuda"] == "cuLaunchKernel"
    wgmma = reference.lookup("wgmma.fence")
    assert wgmma.iloc[0]["cuda"].startswith("wgmma.fence")


def test_words_in_notes_match():
    found = reference.lookup("e4m3fnuz")
    assert len(found) >= 3
    for _, r in found.iterrows():
        assert "e4m3fnuz" in (r["cuda"] + r["hip"] + r["note"]).lower()


def test_misspelt_name_answers_with_at_most_three_near_names():
    found = reference.lookup("cudaMalocManaged")
    assert 1 <= len(found) <= 3 and set(found["match"]) == {reference.NEAREST}
    assert found.iloc[0]["cuda"] == "cudaMallocManaged" and found.iloc[0]["near"] == "cudaMallocManaged"
    assert len(reference.lookup("__shfl_xor_snc")) <= 3


@pytest.mark.parametrize("query", ["xyzzy123", "zzqqxx", "hipFooBar", "qwertyuiop"])
def test_unrelated_name_answers_with_no_row(query):
    # below the similarity threshold nothing is offered (xyzzy123 once got ten ldmatrix rows)
    assert len(reference.lookup(query)) == 0


def test_filters_by_category_and_target():
    found = reference.lookup(category="matrix", target="gfx950")
    assert len(found) and set(found["category"]) == {"matrix"}
    assert set(found["gfx950"]) <= set(reference.AVAILABLE)
    assert any(h.startswith("__builtin_amdgcn_mfma_scale_") for h in found["hip"])
    assert not any(c.startswith("wgmma") for c in found["cuda"])
    assert set(reference.lookup(category="stream")["category"]) == {"streams"}   # a prefix serves


def test_rows_are_read_once_not_per_lookup(monkeypatch):
    """Thousands of rows: their names are worked out once (and the near-name vocabulary once per
    filter), so a lookup after the first only scans them; none tokenises a cell again."""
    queries = ["__shfl_xor_sync", "__shfl_xor", "HIPMODULELAUNCHKERNEL", "wgmma.fence", "Malloc", "e4m3fnuz",
               "cudaMalocManaged", "xyzzy123"]
    for q in queries:                                             # whatever the first lookups build
        reference.lookup(q)
    reference.lookup("mfma_scal", category="matrix", target="gfx950")
    built = reference._vocabulary.cache_info().misses
    calls = []

    class Counting:                                               # every tokenisation goes through _TOKEN
        def findall(self, cell, real=reference._TOKEN):
            calls.append(cell)
            return real.findall(cell)
    monkeypatch.setattr(reference, "_TOKEN", Counting())
    for q in queries:
        reference.lookup(q)
        reference.lookup(q.upper())                               # other tiers, the same vocabulary
    reference.lookup("mfma_scal", category="matrix", target="gfx950")
    assert calls == []
    assert reference._index.cache_info().misses == 1
    assert reference._vocabulary.cache_info().misses == built


def test_bad_filters_name_the_argument():
    with pytest.raises(InputError, match="category"):
        reference.lookup("x", category="nonsense")
    with pytest.raises(TargetError, match="target"):
        reference.lookup("x", target="sm_80")


# ---------------------------------------------------------------- the command

def run_ref(argv, capsys):
    parser = argparse.ArgumentParser()
    reference.add_cli(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["ref", *argv])
    assert args.func(args) == 0
    return capsys.readouterr().out


def test_cli_table_json_csv(capsys):
    table = run_ref(["__shfl_xor_sync"], capsys)
    assert "__shfl_xor" in table and "kernel.csv" in table and "gfx950" in table
    records = json.loads(run_ref(["hipModuleLaunchKernel", "--format", "json"], capsys))
    assert records[0]["cuda"] == "cuLaunchKernel" and records[0]["source"]
    parsed = list(csv.DictReader(io.StringIO(run_ref(["--category", "matrix", "--target", "gfx950", "--format", "csv"], capsys))))
    assert parsed and all(r["category"] == "matrix" for r in parsed)
    assert run_ref(["hipFooBar"], capsys) == "no row for 'hipFooBar', and no name close to it\n"
    assert json.loads(run_ref(["xyzzy123", "--format", "json"], capsys)) == []


def test_cli_no_row_says_so_with_near_names(capsys):
    out = run_ref(["cudaMalocManaged"], capsys)
    assert out.startswith("no row for 'cudaMalocManaged'; near names: cudaMallocManaged")
    assert "ldmatrix" not in out
    assert "ldmatrix" not in run_ref(["xyzzy123"], capsys)


def test_cli_list_prints_every_row_one_a_line(capsys):
    lines = run_ref(["--list"], capsys).splitlines()
    assert lines[0].split("\t") == ["key", "cuda", "hip", *TARGET_COLUMNS]
    assert len(lines) == len(rows()) + 1
    assert all(len(line.split("\t")) == 3 + len(TARGET_COLUMNS) for line in lines)
    assert f"warp.shfl_xor\t__shfl_xor_sync\t__shfl_xor\t" + "\t".join(["yes"] * len(TARGET_COLUMNS)) in lines
    parsed = list(csv.DictReader(io.StringIO(run_ref(["--list", "--format", "csv"], capsys))))
    assert len(parsed) == len(rows()) and list(parsed[0]) == list(reference.LIST_COLUMNS)
    records = json.loads(run_ref(["--list", "--category", "warp", "--format", "json"], capsys))
    assert records and {r["cuda"] for r in records} <= {r["cuda"] for r in rows() if r["category"] == "warp"}


def test_cli_list_takes_no_query(capsys):
    from portable.cli import main
    assert main(["ref", "--list", "x"]) == 2
    assert capsys.readouterr().err == "portable: --list: expected no QUERY (it prints every row), got 'x'\n"


def test_registered_in_the_portable_command(capsys):
    from portable.cli import main
    assert main(["ref", "e4m3fnuz"]) == 0
    assert "e4m3fnuz" in capsys.readouterr().out
