"""Several commits' kernel files timed side by side in one device call (bench/NOTES.md: every A/B
since mxfp4_moe v21 copied an old and a new template over in turn). The device's copy of the tree
has no .git, so the variants are written here and travel as untracked files:

    python bench/ab_variants.py prepare old=HEAD~1 new=HEAD          # here: bench/abold/<name>/...
    python3 bench/ab_variants.py run --order old,new,old,new -- \\
        python3 bench/moe_ab.py --repeats 10 --shapes '[...]' --params '[{}]'     # there

`prepare` writes, for each name, that commit's version of every file under --paths that differs
between any two of the commits (a file a commit lacks is recorded as absent), and the tree's own
versions as the variant "tree". `run` copies each variant's files over the tree (removing the
absent ones), runs the command, and puts the tree's versions back at the end. Delete bench/abold
before committing (it is not ignored, so that it travels).
"""
from __future__ import annotations

import argparse
import itertools
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ABSENT = "absent.json"          # the files a variant lacks


def _git(*args: str, root: Path) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


def prepare(variants: dict[str, str], out: Path, paths: list[str], root: Path = ROOT) -> list[str]:
    """Writes out/<name>/<file> for each name=commit and out/tree/<file>; returns the files."""
    commits = list(variants.values())
    changed = set()
    for a, b in itertools.combinations(commits, 2):
        changed.update(_git("diff", "--name-only", a, b, "--", *paths, root=root).split())
    files = sorted(changed)
    if not files:
        raise SystemExit(f"the commits {commits} do not differ under {paths}")
    shutil.rmtree(out, ignore_errors=True)
    for name, commit in {**variants, "tree": None}.items():
        absent = []
        present = set(_git("ls-tree", "-r", "--name-only", commit, "--", *files, root=root).split()) if commit else set()
        for f in files:
            if commit is None:
                src = root / f
                data = src.read_bytes() if src.exists() else None
            else:
                data = subprocess.run(["git", "show", f"{commit}:{f}"], cwd=root, check=True,
                                      capture_output=True).stdout if f in present else None
            if data is None:
                absent.append(f)
                continue
            dst = out / name / f
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(data)
        (out / name).mkdir(parents=True, exist_ok=True)
        (out / name / ABSENT).write_text(json.dumps({"files": files, "absent": absent}))
    return files


def put(variant: Path, root: Path = ROOT) -> None:
    """The variant's files over the tree; the files it lacks removed."""
    meta = json.loads((variant / ABSENT).read_text())
    for f in meta["files"]:
        dst = root / f
        if f in meta["absent"]:
            dst.unlink(missing_ok=True)
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(variant / f, dst)


def run(order: list[str], command: list[str], out: Path, root: Path = ROOT) -> int:
    """The command once per variant in order, each with its files in place; the tree's put back."""
    worst = 0
    try:
        for name in order:
            put(out / name, root)
            print(f"== {name}", flush=True)
            worst = max(worst, subprocess.run(command, cwd=root).returncode)
    finally:
        put(out / "tree", root)
    return worst


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", type=Path, default=ROOT / "bench" / "abold")
    sub = ap.add_subparsers(dest="what", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("variants", nargs="+", help="name=commit")
    p.add_argument("--paths", nargs="+", default=["templates", "portable", "mapping", "backends"])
    r = sub.add_parser("run")
    r.add_argument("--order", required=True, help="variant names, comma-separated, e.g. old,new,old,new")
    r.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")
    args = ap.parse_args()
    if args.what == "prepare":
        pairs = dict(v.split("=", 1) for v in args.variants)
        files = prepare(pairs, args.dir, args.paths)
        print(f"{len(files)} files x {len(pairs)} variants (+ tree) in {args.dir}: " + ", ".join(files))
        return 0
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("run needs a command after --")
    return run(args.order.split(","), command, args.dir)


if __name__ == "__main__":
    sys.exit(main())
