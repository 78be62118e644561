"""`portable audit` measured on real CUDA nobody here wrote (issue 39).

The sources come from pinned source distributions on the package index, downloaded once into
a cache; the repository keeps only labels (tests/audit_corpus/labels.csv: file inside the
sdist, its sha256, line, rule, and whether a finding there is a real porting hazard on HIP /
wave64). Each label was written by reading the finding against its source lines; labels with
verdict 'hazard' that the audit does not report are its misses. A finding with no label counts
as a false positive, so new findings need a read and a label.

The download needs the package index: without it the test skips, unless
PORTABLE_REQUIRE_TOOLCHAINS=1 (CI), where it fails.
"""
from __future__ import annotations

import csv
import hashlib
import os
import subprocess
import sys
import tarfile
from collections import defaultdict
from pathlib import Path

import pytest

from portable.porting import audit

LABELS = Path(__file__).parent / "audit_corpus" / "labels.csv"
# read at import, before the per-test fixture points PORTABLE_CACHE_DIR at a fresh folder
_CACHE_ENV = os.environ.get("PORTABLE_CACHE_DIR")
GOAL = 0.90


def load_labels() -> list[dict]:
    with LABELS.open(newline="") as fh:
        return list(csv.DictReader(fh))


def _unavailable(why: str):
    if os.environ.get("PORTABLE_REQUIRE_TOOLCHAINS") == "1":
        pytest.fail(f"audit corpus required but unavailable: {why}")
    pytest.skip(why)


def fetch_sdist(spec: str, cache: Path) -> Path:
    """The unpacked source tree of a pinned sdist (NAME==VERSION), downloaded with pip once."""
    name, version = spec.split("==")
    stem = f"{name.replace('-', '_')}-{version}"
    tree = cache / "trees" / stem
    if (tree / ".complete").is_file():
        return tree
    archives = cache / "archives"
    archives.mkdir(parents=True, exist_ok=True)
    def archive():
        key = stem.lower().replace("-", "_") + ".tar.gz"
        return [p for p in archives.glob("*.tar.gz") if p.name.lower().replace("-", "_") == key]
    found = archive()
    if not found:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--no-build-isolation",
               "--disable-pip-version-check", "-q", spec, "-d", str(archives)]
        try:
            run = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as e:
            _unavailable(f"pip download {spec}: {e}")
        found = archive()
        if run.returncode != 0 or not found:
            _unavailable(f"pip download {spec} failed: {(run.stderr or run.stdout).strip()[-500:]}")
    tree.mkdir(parents=True, exist_ok=True)
    with tarfile.open(found[0]) as tar:
        members = [m for m in tar.getmembers() if m.isfile() and Path(m.name).suffix in audit.SOURCE_SUFFIXES
                   and not Path(m.name).is_absolute() and ".." not in Path(m.name).parts]
        for m in members:
            parts = Path(m.name).parts[1:]          # drop the sdist's top folder
            if not parts:
                continue
            dest = tree.joinpath(*parts)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(tar.extractfile(m).read())
    (tree / ".complete").write_text(spec)
    return tree


@pytest.fixture(scope="module")
def corpus(request) -> dict[str, Path]:
    cache = Path(_CACHE_ENV) / "corpus" if _CACHE_ENV else Path(request.config.cache.mkdir("audit-corpus"))
    return {spec: fetch_sdist(spec, cache) for spec in sorted({row["sdist"] for row in load_labels()})}


def measure(corpus: dict[str, Path]) -> dict:
    """Runs the audit on every labelled file and matches findings to labels by (file, line, rule)."""
    labels = load_labels()
    files = {(r["sdist"], r["path"]): r["sha256"] for r in labels}
    hazards = {(r["sdist"], r["path"], int(r["line"]), r["rule"]) for r in labels if r["verdict"] == "hazard"}
    for (spec, path), sha in files.items():
        source = corpus[spec] / path
        assert source.is_file(), f"{spec}: {path} is not in the sdist"
        assert hashlib.sha256(source.read_bytes()).hexdigest() == sha, f"{spec}: {path} differs from the labelled file"
    reported = set()
    for spec, path in files:
        for f in audit.audit_paths([corpus[spec] / path]):
            reported.add((spec, path, f.line, f.kind))
    tp, fp, fn = reported & hazards, reported - hazards, hazards - reported
    by_rule = defaultdict(lambda: [0, 0, 0])
    for group, i in ((tp, 0), (fp, 1), (fn, 2)):
        for key in group:
            by_rule[key[3]][i] += 1
    return {"tp": tp, "fp": fp, "fn": fn, "files": len(files), "labels": len(labels), "by_rule": dict(by_rule)}


def test_precision_and_recall_on_the_labelled_corpus(corpus, capsys):
    m = measure(corpus)
    tp, fp, fn = len(m["tp"]), len(m["fp"]), len(m["fn"])
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    with capsys.disabled():
        print(f"\naudit corpus: {m['files']} files from {len(corpus)} sdists, {m['labels']} labels: "
              f"tp {tp}, fp {fp}, fn {fn}, precision {precision:.3f}, recall {recall:.3f}")
        for rule, (a, b, c) in sorted(m["by_rule"].items()):
            print(f"    {rule:24s} tp {a:3d}  fp {b:3d}  fn {c:3d}")
        for key in sorted(m["fp"]):
            print("    false positive:", *key)
        for key in sorted(m["fn"]):
            print("    missed:", *key)
    assert precision >= GOAL and recall >= GOAL, f"precision {precision:.3f}, recall {recall:.3f} (tp {tp}, fp {fp}, fn {fn})"


def test_labels_are_well_formed():
    rows = load_labels()
    assert rows, "no labels"
    shas = defaultdict(set)
    for r in rows:
        assert r["verdict"] in ("hazard", "not-hazard", "clean"), r
        assert r["sdist"].count("==") == 1 and not r["path"].startswith("/"), r
        assert len(r["sha256"]) == 64, r
        shas[(r["sdist"], r["path"])].add(r["sha256"])
        if r["verdict"] != "clean":
            assert int(r["line"]) > 0 and r["rule"], r
    assert all(len(s) == 1 for s in shas.values()), "one sha256 per labelled file"
    assert len({r["sdist"] for r in rows}) >= 2 and len(shas) >= 30
