"""bench/ab_variants.py: each commit's files written here, put over a tree there in turn, the
tree's own files back at the end (CPU only, on a throwaway git repository)."""
import shutil
import subprocess
import sys

import pytest

from conftest import bench_module

ab = bench_module("ab_variants")


def _git(root, *args):
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", *args], cwd=root, check=True, capture_output=True)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_prepare_then_run_each_variant_and_restore(tmp_path, capfd):
    repo = tmp_path / "repo"
    (repo / "k").mkdir(parents=True)
    (repo / "k" / "a.txt").write_text("one")
    (repo / "same.txt").write_text("same")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "old")
    (repo / "k" / "a.txt").write_text("two")
    (repo / "k" / "b.txt").write_text("new file")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "new")
    (repo / "k" / "a.txt").write_text("edited, not committed")

    out = tmp_path / "abold"
    files = ab.prepare({"old": "HEAD~1", "new": "HEAD"}, out, ["."], root=repo)
    assert files == ["k/a.txt", "k/b.txt"]                     # same.txt does not differ
    assert (out / "old" / "k" / "a.txt").read_text() == "one" and not (out / "old" / "k" / "b.txt").exists()
    assert (out / "tree" / "k" / "a.txt").read_text() == "edited, not committed"

    show = [sys.executable, "-c", "import pathlib; p = pathlib.Path('k'); "
            "print(p.joinpath('a.txt').read_text(), p.joinpath('b.txt').exists())"]
    assert ab.run(["old", "new"], show, out, root=repo) == 0
    lines = [line for line in capfd.readouterr().out.splitlines() if not line.startswith("==")]
    assert lines == ["one False", "two True"]
    assert (repo / "k" / "a.txt").read_text() == "edited, not committed" and (repo / "k" / "b.txt").exists()
