"""The generated rows of the CUDA<->HIP table (mapping/cuda_hip/generated_*.csv): what their
generator makes from the pinned packages, checked against both vendors' headers, and the answers
`portable ref` gives for the names porting engineers asked for."""
import difflib
import importlib.util
import os
from collections import Counter
from pathlib import Path

import pytest

from portable.porting import reference
from portable.data import load_table, mapping_dir

GENERATOR = Path(__file__).resolve().parents[1] / "mapping" / "generate" / "cuda_hip.py"
# read at import: the autouse fixture in conftest.py points PORTABLE_CACHE_DIR at a private
# folder for each test, but the downloaded wheels (about 2 GB) are worth keeping across runs
_PERSISTENT_CACHE = os.environ.get("PORTABLE_CACHE_DIR")


def generator():
    spec = importlib.util.spec_from_file_location("cuda_hip_generator", GENERATOR)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def generated_rows():
    return [r for r in load_table() if r["file"].startswith("generated_")]


def test_generated_files_are_what_the_generator_makes(tmp_path_factory):
    """Re-runs the generator (pip downloads of the pinned wheels) and diffs its CSVs against the
    committed ones. Needs the package index: skipped offline, a failure where
    PORTABLE_REQUIRE_TOOLCHAINS=1 (CI)."""
    gen = generator()
    cache = Path(_PERSISTENT_CACHE) / "mapping-wheels" if _PERSISTENT_CACHE else tmp_path_factory.mktemp("wheels")
    try:
        files, _ = gen.generate(cache, mapping_dir() / "cuda_hip")
    except RuntimeError as e:                     # pip download failed: no package index here
        if os.environ.get("PORTABLE_REQUIRE_TOOLCHAINS") == "1":
            pytest.fail(f"the generator's pinned wheels could not be downloaded: {e}")
        pytest.skip(f"needs the package index to download the generator's pinned wheels: {e}")
    committed = {p.name: p.read_text() for p in (mapping_dir() / "cuda_hip").glob("generated_*.csv")}
    assert sorted(committed) == sorted(files), "run python mapping/generate/cuda_hip.py"
    for name, text in files.items():
        if text != committed[name]:
            diff = "".join(list(difflib.unified_diff(committed[name].splitlines(True), text.splitlines(True),
                                                     f"committed {name}", f"generated {name}"))[:40])
            pytest.fail(f"{name} is out of date (run python mapping/generate/cuda_hip.py):\n{diff}")


def test_at_least_2600_rows_with_a_hip_spelling_checked_on_both_sides():
    checked = [r for r in generated_rows() if not r["hip"].startswith("none")
               and "checked: CUDA: " in r["source"] and "; HIP: " in r["source"]]
    by_category = Counter(r["category"] for r in checked)
    assert len(checked) >= 2600, by_category
    for category in ("runtime", "driver", "types", "enums", "device functions", "cublas", "curand",
                     "cufft", "cusparse", "nccl", "cooperative groups"):
        assert by_category[category] > 0, category


def test_every_generated_row_names_its_pinned_sources():
    for r in generated_rows():
        assert r["source"].startswith("generated: "), r["file"]
        assert "checked: CUDA: " in r["source"], r["file"]
        assert "; HIP: " in r["source"] or "unchecked" in r["source"], r["file"]
        assert not r["key"] and not r["cuda_expr"] and not r["hip_expr"], r["file"]


def test_unchecked_rows_say_so():
    unchecked = [r for r in generated_rows() if "; HIP: " not in r["source"]]
    assert unchecked and all(r["category"] == "cub" and "unverified" in r["note"] for r in unchecked)


def test_generated_rows_repeat_no_cuda_spelling():
    """A name a hand-written row answers is left to it; the exceptions are the plain functions
    whose template row is about one use of them (the generator's NARROWER_TEMPLATE_ROWS)."""
    gen = generator()
    counts = Counter(r["cuda"] for r in load_table())
    repeated = {r["cuda"] for r in generated_rows() if counts[r["cuda"]] > 1}
    assert repeated == set(gen.NARROWER_TEMPLATE_ROWS)


# the wrong and missing answers: the first row `portable ref NAME` gives
EXACT_ANSWERS = {
    "cuStreamCreate": "hipStreamCreateWithFlags",
    "cuGetErrorString": "hipDrvGetErrorString",
    "__popc": "__popc",
    "__ffs": "__ffs",
    "cudaStream_t": "hipStream_t",
    "cudaEvent_t": "hipEvent_t",
    "cudaGraphExec_t": "hipGraphExec_t",
    "CUdeviceptr": "hipDeviceptr_t",
    "CUfunction": "hipFunction_t",
    "CUmodule": "hipModule_t",
    "cudaDeviceGetAttribute": "hipDeviceGetAttribute",
    "cublasCreate": "hipblasCreate",
    "cublasSgemm": "hipblasSgemm",
    "cublasGemmStridedBatchedEx": "hipblasGemmStridedBatchedEx",
    "ncclAllReduce": "ncclAllReduce",
    "ncclCommInitRank": "ncclCommInitRank",
    "cub::BlockReduce": "hipcub::BlockReduce",
    "curandCreateGenerator": "hiprandCreateGenerator",
    "curandGenerateUniform": "hiprandGenerateUniform",
}


@pytest.mark.parametrize("cuda,hip", EXACT_ANSWERS.items())
def test_exact_answers(cuda, hip):
    found = reference.lookup(cuda)
    assert len(found) and found.iloc[0]["match"] == reference.EXACT, cuda
    assert found.iloc[0]["hip"] == hip


def test_ballot_mask_template_rows_stay():
    """__popc / __ffs answer themselves first, and the rows about counting a ballot mask (64
    bits on HIP) still follow them."""
    for name, wide in (("__popc", "__popcll"), ("__ffs", "__ffsll")):
        found = reference.lookup(name)
        assert wide in list(found["hip"])[1:]
        assert wide in found.iloc[0]["note"]


def test_non_sync_shuffles_are_not_on_the_nvidia_targets():
    for name in ("__shfl_up", "__shfl_down"):
        r = next(r for r in generated_rows() if r["cuda"] == name)
        assert (r["sm_90a"], r["sm_100a"], r["sm_120a"], r["gfx942"], r["gfx950"]) == ("no", "no", "no", "yes", "yes")
        assert f"{name}_sync" in r["note"]
