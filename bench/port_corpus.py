"""`portable port` over a real corpus: the CUDA sources of pinned source distributions, ported
to HIP, each ported device file compiled offline for an AMD target.

    python bench/port_corpus.py [--cache DIR] [--sdist flashinfer-python==0.3.1] [--target gfx942]
                                [--jobs 2] [--hipify-perl PATH] [--csv FILE] [--no-std-headers]

Per sdist (downloaded once into the cache with `pip download --no-binary :all:`, never into the
repository): every source file outside vendored trees (3rdparty/, third_party/, ...) is ported
as `portable port` ports a tree, into CACHE/hip/NAME; a ported .cu / .cuh with `__global__` or
`__device__` code is a device file. Each is compiled the way `portable compile FILE.hip` compiles
(portable.load(...).binary(target): the offline clang with hipRTC's runtime header), with the
local headers it includes (resolved in the ported tree) written in place, since that compile
sees one text. A device file *uses only APIs with HIP equivalents* when neither it nor a local
header it pulls in has anything the port left untranslated (names, headers, masks) or inline
assembly, and every other header it includes is a HIP runtime header or a C/C++ standard one
(hipcc has those; the offline compile finds this machine's, with clang's builtin headers added
unless --no-std-headers). Libraries that are not on the offline path (CUTLASS, CuTe, torch,
hipCUB, ...) keep a file out, and so does a header that is not self-contained (it fails on a
name the project defines in a header it does not include: it would not compile alone on CUDA either). Printed: files ported and their counts, device files, those that
use only APIs with HIP equivalents, how many of each compile, and why the others are out.

--hipify-perl runs HIPIFY's perl script (not on PyPI: bring a copy) over the same files and
counts, with one function for both outputs, the CUDA spellings left in code (names the table
knows on the CUDA side or that look like CUDA API, *_sync calls with a 32-bit mask, CUDA headers),
and how many of its rewrites landed in comments or string literals.
"""
from __future__ import annotations

import argparse
import csv
import os
import re
import subprocess
import sys
import tarfile
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from portable.porting import port
from portable.porting.port_translate import CUDA_LOOKING, FULL64, blank, call_args, defined_names, mask_value, rules

VENDORED = ("3rdparty", "third_party", "thirdparty", "vendor", "external")
DEVICE = re.compile(r"\b__(?:global|device)__\b")
ASM = re.compile(r"\b(?:asm|__asm__|__asm)\b\s*(?:volatile\b|__volatile__\b|\s)*\(")
HOST_API = re.compile(r"(?<![\w.])hip[A-Z]\w*")             # hipStream_t, hipMalloc, hipLaunchKernelGGL
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]', re.M)
STD = set("""algorithm any array atomic bit bitset cassert cctype cerrno cfloat chrono cinttypes climits cmath
complex concepts condition_variable cstdarg cstddef cstdint cstdio cstdlib cstring ctime deque exception
execution filesystem fstream functional future initializer_list iomanip ios iosfwd iostream istream iterator
limits list map memory mutex new numeric optional ostream queue random ratio regex set shared_mutex span
sstream stack stdexcept string string_view system_error thread tuple type_traits typeinfo unordered_map
unordered_set utility valarray variant vector assert.h float.h limits.h math.h stdint.h stdio.h stdlib.h
string.h stddef.h stdbool.h inttypes.h errno.h time.h unistd.h""".split())


def fetch(spec: str, cache: Path) -> Path:
    """The unpacked source tree of a pinned sdist (`name==version`), downloaded once."""
    name, _, version = spec.partition("==")
    stem = f"{name.replace('-', '_')}-{version}"
    root = cache / "src" / stem
    if root.is_dir():
        return root
    sdists = cache / "sdists"
    sdists.mkdir(parents=True, exist_ok=True)
    found = [p for p in sdists.glob("*.tar.gz") if p.name.lower().startswith(stem.lower())]
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                        "--no-build-isolation", spec, "-d", str(sdists)], check=True, stdout=subprocess.DEVNULL)
        found = [p for p in sdists.glob("*.tar.gz") if p.name.lower().startswith(stem.lower())]
    with tarfile.open(found[0]) as tar:
        tar.extractall(cache / "src", filter="data")
    return root


def sources(root: Path) -> list[Path]:
    skip = {root / v for v in VENDORED}
    return [p for p in port.audit.source_files([root]) if not any(s in p.parents for s in skip)]


def _port_one(args):
    """One file ported into the mirrored tree (what `portable port ROOT -o OUT` does for it)."""
    src, root, out, defined = args
    ported = port.port_text(src.read_text(errors="replace"), str(src), rename_cu=True, defined=defined)
    dst = port.output_path(src.resolve(), root.resolve(), out)
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text(ported.text)
    return str(dst), ported.counts, ported.notes


class Tree:
    """The ported tree: which file an include names, and what a file pulls in."""

    def __init__(self, out: Path, notes: dict):
        self.out, self.notes = out, notes
        self.by_tail: dict[str, list[Path]] = {}
        for p in out.rglob("*"):
            if p.is_file():
                parts = p.relative_to(out).parts
                for k in range(len(parts)):
                    self.by_tail.setdefault("/".join(parts[k:]), []).append(p)

    def resolve(self, here: Path, quote: str, name: str) -> Path | None:
        if quote == '"' and (here.parent / name).is_file():
            return (here.parent / name).resolve()
        hits = self.by_tail.get(name.lstrip("./"), [])
        return min(hits, key=lambda p: len(p.parts)).resolve() if hits else None

    def amalgamate(self, path: Path, seen: set, blockers: Counter, std: set) -> str:
        """`path`'s text with every local include written in place (each file once); what keeps
        it from using only APIs with HIP equivalents is counted in `blockers`, the standard
        headers it includes are gathered in `std`."""
        seen.add(path)
        text = path.read_text(errors="replace")
        code = blank(text)
        if str(path) in self.notes and self.notes[str(path)]:
            blockers["untranslated"] += 1
        if ASM.search(code):
            blockers["inline asm"] += 1
        if HOST_API.search(code):
            blockers["HIP host API (the offline compile is device code only)"] += 1
        out, last = [], 0
        for m in INCLUDE.finditer(text):
            if not code[m.start():m.end()].strip():
                continue                                    # inside a comment
            quote, name = m.group(1), m.group(2).strip()
            if name.startswith("hip/"):
                continue                                    # hipRTC's runtime header stands in (guarded)
            local = self.resolve(path, quote, name)
            out.append(text[last:m.start()])
            if local is not None:
                out.append("" if local in seen else self.amalgamate(local, seen, blockers, std))
            elif name in STD:
                std.add(name)                               # hipcc has it; see --no-std-headers
                out.append(text[m.start():m.end()])
            else:
                blockers[f"not on the offline path: <{name.split('/')[0]}>"] += 1
                out.append(text[m.start():m.end()])
            last = m.end()
        out.append(text[last:])
        return re.sub(r"^[ \t]*#[ \t]*pragma[ \t]+once[^\n]*", "", "".join(out), flags=re.M)


def _compile(args):
    text, target = args
    import portable
    try:
        portable.load(text, lang="hip").binary(target)
        return ""
    except Exception as e:                  # a compile error: its first line says why
        lines = [ln for ln in str(e).splitlines() if "error" in ln]
        return (lines[0] if lines else str(e).splitlines()[0])[:200]


def std_headers_env() -> None:
    """The offline compile (ziglang's clang) finds this machine's C and C++ library headers but
    not clang's own (stddef.h, float.h), which the wheel keeps in ziglang/lib/include: the
    compile workers get them through CPLUS_INCLUDE_PATH, as any installed clang has them."""
    try:
        import ziglang
    except ImportError:
        return
    include = Path(ziglang.__file__).parent / "lib" / "include"
    if include.is_dir():
        os.environ["CPLUS_INCLUDE_PATH"] = os.pathsep.join(filter(None, [str(include), os.environ.get("CPLUS_INCLUDE_PATH")]))


def run_sdist(spec: str, cache: Path, target: str, jobs: int, rows: list) -> dict:
    root = fetch(spec, cache)
    out = cache / "hip" / root.name
    files = sources(root)
    defined = port.project_names(f.read_text(errors="replace") for f in files)
    with ProcessPoolExecutor(jobs) as pool:
        done = list(pool.map(_port_one, [(f, root, out, defined) for f in files], chunksize=4))
    totals, notes = Counter(), {}
    for dst, counts, file_notes in done:
        totals.update(counts)
        notes[str(Path(dst).resolve())] = [n for n in file_notes if n[1] == "untranslated"]
    tree = Tree(out, notes)
    device = [Path(d).resolve() for d, _, _ in done
              if Path(d).suffix in (".hip", ".cuh") and DEVICE.search(blank(Path(d).read_text(errors="replace")))]
    units = []
    for path in device:
        blockers, std = Counter(), set()
        units.append((path, tree.amalgamate(path, set(), blockers, std), blockers, std))
    with ProcessPoolExecutor(jobs) as pool:
        errors = list(pool.map(_compile, [(text, target) for _, text, _, _ in units]))
    summary, reasons, failures = Counter(files=len(files), device_files=len(device)), Counter(), Counter()
    for (path, text, blockers, std), error in zip(units, errors):
        # a header that uses a name the project defines in a header it does not include fails
        # alone on CUDA too: it is not a standalone file, whatever the port did
        missing = re.search(r"undeclared identifier '(\w+)'", error)
        if missing and missing.group(1) in defined and missing.group(1) not in defined_names(blank(text)):
            blockers[f"not self-contained (uses {missing.group(1)} from a header it does not include)"] += 1
        eligible = not blockers
        summary["eligible"] += eligible
        summary["eligible_std"] += eligible and bool(std)
        summary["compiled"] += not error
        summary["eligible_compiled"] += eligible and not error
        reasons.update(k.split(" (uses")[0] for k in blockers)
        if eligible and error:
            failures[re.sub(r"^\S+:\d+:\d+: ", "", error)[:120]] += 1
        rows.append({"sdist": spec, "file": str(path.relative_to(out)), "eligible": int(eligible),
                     "compiled": int(not error), "std_headers": " ".join(sorted(std)),
                     "blockers": "; ".join(f"{k} x{v}" for k, v in blockers.items()), "error": error})
    return {"totals": totals, "summary": summary, "reasons": reasons, "failures": failures, "root": root,
            "files": files, "out": out}


def cuda_left(text: str) -> Counter:
    """CUDA spellings left in the code of a translated text (comments and strings not read):
    names the table knows on the CUDA side or that look like CUDA API, `*_sync` calls with a
    32-bit mask, and CUDA headers. The same count for any translator's output."""
    r = rules()
    code = blank(text)
    left = Counter()
    for m in re.finditer(r"(?<![\w.])(?<!->)[A-Za-z_]\w*", INCLUDE.sub("", code)):
        name = m.group()
        if name in r.names or name in r.blocked or (CUDA_LOOKING.match(name) and name not in r.same):
            left[name] += 1
    for m in re.finditer(r"(?<![\w.])(__\w+_sync|__syncwarp)\s*\(", code):
        spans, _ = call_args(code, m.end() - 1)
        if spans and mask_value(code[slice(*spans[0])], {}) != FULL64:
            left[m.group(1)] += 1
    for m in INCLUDE.finditer(text):
        if re.match(r"(?:cuda|cu[a-z]+\.h|cub/|cooperative_groups|nv)", m.group(2).strip()):
            left[f"<{m.group(2).strip()}>"] += 1
    return left


def hipify_compare(script: str, files: list[Path], out: Path, root: Path) -> dict:
    """hipify-perl over the same files: cuda_left() of its output beside cuda_left() of ours, and
    how many of its rewrites landed in comments or strings."""
    theirs, ours, in_text = Counter(), Counter(), 0
    for f in files:
        # -quiet-warnings: its per-line warning pass is what makes it slow (minutes on a large file)
        proc = subprocess.run(["perl", script, "-quiet-warnings", str(f)], capture_output=True, text=True)
        text = proc.stdout
        theirs.update(cuda_left(text))
        ours.update(cuda_left(port.output_path(f.resolve(), root.resolve(), out).read_text(errors="replace")))
        src = f.read_text(errors="replace")
        changed = Counter(re.findall(r"\bhip\w+", _comments_and_strings(text)))
        changed.subtract(Counter(re.findall(r"\bhip\w+", _comments_and_strings(src))))
        in_text += sum(v for v in changed.values() if v > 0)
    return {"theirs": theirs, "ours": ours, "in_text": in_text}


def _comments_and_strings(text: str) -> str:
    code = blank(text)
    return "".join(c if b == " " and c != " " else " " for c, b in zip(text, code))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cache", default=os.environ.get("PORTABLE_CORPUS_CACHE",
                                                     str(Path.home() / ".cache" / "portable" / "corpus")))
    p.add_argument("--sdist", action="append", help="name==version (default: flashinfer-python==0.3.1)")
    p.add_argument("--target", default="gfx942")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--no-std-headers", action="store_true",
                   help="leave clang's builtin headers out of the compile (files that include <cstdio> and the "
                        "like then fail on stddef.h)")
    p.add_argument("--hipify-perl", help="path to HIPIFY's hipify-perl script, to count what it leaves")
    p.add_argument("--csv", help="write one row per device file here")
    args = p.parse_args(argv)
    if not args.no_std_headers:
        std_headers_env()
    cache, rows = Path(args.cache), []
    for spec in args.sdist or ["flashinfer-python==0.3.1"]:
        r = run_sdist(spec, cache, args.target, args.jobs, rows)
        s, t = r["summary"], r["totals"]
        print(f"{spec}: {s['files']} source files ported ({', '.join(f'{k} {t[k]}' for k in port.COUNTS)})")
        print(f"  device files (.cu/.cuh with __global__/__device__ code): {s['device_files']}; "
              f"compile for {args.target}: {s['compiled']}")
        print(f"  using only APIs with HIP equivalents (offline path + C/C++ standard library): {s['eligible']} "
              f"({s['eligible_std']} with standard headers); compile for {args.target}: {s['eligible_compiled']}"
              + (f" ({100 * s['eligible_compiled'] / s['eligible']:.0f}%)" if s["eligible"] else ""))
        print("  what keeps the other device files out (files affected): "
              + ", ".join(f"{k} {v}" for k, v in r["reasons"].most_common(10)))
        for error, n in r["failures"].most_common(10):
            print(f"  eligible but failed ({n}): {error}")
        if args.hipify_perl:
            h = hipify_compare(args.hipify_perl, r["files"], r["out"], r["root"])
            print(f"  CUDA spellings left in code (same count for both): portable port {sum(h['ours'].values())} "
                  f"({len(h['ours'])} names), hipify-perl {sum(h['theirs'].values())} ({len(h['theirs'])} names); "
                  f"hipify-perl's rewrites inside comments and strings: {h['in_text']}")
            print(f"    hipify-perl leaves most: {', '.join(f'{n} {c}' for n, c in h['theirs'].most_common(10))}")
            print(f"    portable port leaves most: {', '.join(f'{n} {c}' for n, c in h['ours'].most_common(10))}")
    if args.csv and rows:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n")
            w.writeheader()
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
