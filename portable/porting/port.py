"""`portable port`: CUDA sources and source trees translated to HIP through the mapping table.

    portable port kernels/ -o hip/ --stats      # a tree, mirrored: .cu -> .hip, every other name kept
    portable port a.cu b.cuh --inplace          # the files themselves, under their own names
    portable port a.cu                          # one file's HIP on stdout

Each file is translated by port_translate (names, headers, warp calls, launches; line N of the
result is line N of the source), then audited as HIP against the AMD targets; every finding is
left as a `// portable: <rule>: <message>` line above its line, and so is everything the
translation left alone (rule `untranslated`) or wants checked (`ballot-width`). Those notes are
listed on stderr too. A `.cuh` keeps its name, so every `#include "x.cuh"` of the tree still
finds it; a quoted include of a `.cu` file follows the file to `.hip`.
"""
from __future__ import annotations

import csv
import io
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from . import audit
from ..errors import InputError
from .port_translate import blank, defined_names, translate
from ..targets import all_targets, get_target

COUNTS = ("names", "headers", "masks", "launches", "findings", "untranslated")
# HIP runtime includes are for hipcc; hipRTC pre-includes hiprtc_runtime.h instead, which lacks
# the <stdint.h> types hip_runtime.h brings (it has them only as __hip_int8_t, ...: checked, ROCm
# 7.2's header). They are spelt as glibc's <stdint.h> spells them for hipcc on Linux (LP64), so a
# real <stdint.h> after them is a redefinition to the same type, not a conflict.
_STDINT = (("int8_t", "signed char"), ("int16_t", "short"), ("int32_t", "int"), ("int64_t", "long"),
           ("uint8_t", "unsigned char"), ("uint16_t", "unsigned short"), ("uint32_t", "unsigned int"),
           ("uint64_t", "unsigned long"))
RTC_GUARD = ("#if !defined(__HIPCC_RTC__)  // hipRTC pre-includes its own runtime header",
             "#else  // which lacks the <stdint.h> types hip_runtime.h brings",
             " ".join(f"typedef {c} {t};" for t, c in _STDINT),
             "#endif")
_REPORTED = ("untranslated", "ballot-width")          # notes also listed on stderr


@dataclass
class Ported:
    source: str                  # the input path
    output: str                  # where the HIP went ("-": stdout)
    text: str                    # the HIP, with the audit's and the translation's comments
    counts: dict
    notes: list = field(default_factory=list)       # (line, rule, message), lines of the source


def amd_targets(spec: str | None) -> tuple[str, ...]:
    """'gfx942,gfx950' -> its AMD target names (the default: every AMD target)."""
    if not spec:
        return tuple(n for n, t in all_targets().items() if t.vendor == "amd")
    names = tuple(get_target(s.strip()).name for s in spec.split(",") if s.strip())
    nvidia = [n for n in names if all_targets()[n].vendor != "amd"]
    if nvidia or not names:
        raise InputError(f"target: expected AMD targets ({', '.join(amd_targets(None))}), got {spec!r}")
    return names


def port_text(text: str, path: str = "<source>", targets=None, launch: str = "keep",
              rename_cu: bool = False, defined: frozenset = frozenset()) -> Ported:
    """One CUDA source as HIP, with its comments, counts and notes; `defined`: the names the
    rest of the project defines (its own helpers are not CUDA API, whatever their spelling)."""
    targets = amd_targets(",".join(targets) if isinstance(targets, (list, tuple)) else targets)
    result = translate(text, targets, launch=launch, rename_cu=rename_cu, defined=defined)
    findings = audit.audit_source(result.text, path, list(targets))
    comments: dict[int, list[str]] = {}
    for f in findings:
        comments.setdefault(f.line, []).append(f"{f.kind}: {f.message}")
    said = {f.line: " ".join(f"{g.text} {g.message}" for g in findings if g.line == f.line) for f in findings}
    notes = [(n.line, n.rule, n.message) for n in result.notes]
    for line, rule, message in notes:
        name = message.split(":")[0].strip("<>")
        if name not in said.get(line, ""):                 # the audit has not said it already
            comments.setdefault(line, []).append(f"{rule}: {message}")
    counts = dict(result.counts, findings=len(findings), untranslated=sum(r == "untranslated" for _, r, _ in notes))
    return Ported(path, "", annotate(result.text, comments, result.rtc_guard), counts, notes)


def annotate(text: str, comments: dict[int, list[str]], guard: set[int] = frozenset()) -> str:
    """`text` with each line's comments above it (`/* */ \\` inside a continued macro, so the
    macro stays whole), and the lines in `guard` inside #if !defined(__HIPCC_RTC__)."""
    lines = re.split(r"(?<=\n)", text)
    out = []
    for number, line in enumerate(lines, start=1):
        eol = "\r\n" if line.endswith("\r\n") else "\n"
        continued = number > 1 and lines[number - 2].rstrip().endswith("\\")
        indent = re.match(r"[ \t]*", line).group()
        above, k = set(), number - 2
        while k >= 0 and lines[k].lstrip().startswith(("// portable:", "/* portable:")):
            above.add(lines[k].strip())                   # left by an earlier run
            k -= 1
        for c in dict.fromkeys(comments.get(number, [])):
            c = " ".join(c.split()).rstrip("\\")
            made = f"/* portable: {c.replace('*/', '* /')} */ \\" if continued else f"// portable: {c}"
            if made not in above:                          # a second run adds nothing
                out.append(indent + made + eol)
        if number in guard and number - 1 not in guard:
            out.append(RTC_GUARD[0] + eol)
        out.append(line)
        if number in guard and number + 1 not in guard:
            out.append(("" if line.endswith("\n") else "\n") + eol.join(RTC_GUARD[1:]) + eol)
    return "".join(out)


def project_names(texts) -> frozenset:
    """What the files being ported define between them (macros, types, functions; a variable
    stays with its file)."""
    return frozenset().union(*(defined_names(blank(t), variables=False) for t in texts))


def output_path(src: Path, base: Path, out_dir: Path) -> Path:
    rel = src.relative_to(base)
    return out_dir / (rel.with_suffix(".hip") if rel.suffix == ".cu" else rel)


def port_paths(paths, out_dir=None, inplace: bool = False, targets=None, launch: str = "keep") -> list[Ported]:
    """Every source file given, or found under each folder given, ported and written: into
    `out_dir` (mirroring the inputs below their common folder), over itself (`inplace`), or
    nowhere (the texts are returned; one file's goes to stdout from the command)."""
    if out_dir and inplace:
        raise InputError("output: expected -o DIR or --inplace, got both")
    files = audit.source_files(paths)
    roots = [Path(p).resolve() if Path(p).is_dir() else Path(p).resolve().parent for p in paths]
    base = Path(os.path.commonpath(roots)) if roots else Path.cwd()
    texts = {src: src.read_text(errors="replace") for src in files}
    defined = project_names(texts.values())
    done = []
    for src, text in texts.items():
        ported = port_text(text, str(src), targets, launch, rename_cu=bool(out_dir), defined=defined)
        if out_dir:
            dst = output_path(src.resolve(), base, Path(out_dir))
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_text(ported.text)
            ported.output = str(dst)
        elif inplace:
            src.write_text(ported.text)
            ported.output = str(src)
        else:
            ported.output = "-"
        done.append(ported)
    return done


def stats_rows(ported: list[Ported]) -> list[dict]:
    rows = [{"file": p.source, "output": p.output, **{k: p.counts[k] for k in COUNTS}} for p in ported]
    total = {"file": f"total ({len(ported)} files)", "output": "", **{k: sum(r[k] for r in rows) for k in COUNTS}}
    return rows + [total]


def format_stats(rows: list[dict], fmt: str = "text") -> str:
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=["file", "output", *COUNTS], lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        return buf.getvalue()
    names = [r["file"] + (f" -> {r['output']}" if r["output"] not in ("", "-") else "") for r in rows]
    width = max(len(n) for n in names + ["file"])
    lines = [f"{'file':<{width}}  " + "  ".join(f"{c:>{max(len(c), 5)}}" for c in COUNTS)]
    for name, r in zip(names, rows):
        lines.append(f"{name:<{width}}  " + "  ".join(f"{r[c]:>{max(len(c), 5)}}" for c in COUNTS))
    return "\n".join(lines) + "\n"


def cmd_port(args) -> int:
    if not args.output and not args.inplace and len(audit.source_files(args.paths)) != 1:
        raise InputError("output: expected -o DIR or --inplace to port several files (one file's HIP goes to stdout)")
    ported = port_paths(args.paths, args.output, args.inplace, args.target, args.launch)
    for p in ported:
        for line, rule, message in p.notes:
            if rule in _REPORTED:
                print(f"{p.source}:{line}: {rule}: {message}", file=sys.stderr)
    if not args.output and not args.inplace:
        sys.stdout.write(ported[0].text)
    if args.stats or args.format == "csv":
        stream = sys.stderr if not args.output and not args.inplace else sys.stdout
        stream.write(format_stats(stats_rows(ported), args.format))
    return 0


def add_cli(subparsers) -> None:
    p = subparsers.add_parser("port", help="translate CUDA sources and trees to HIP through the mapping table",
                              description="Translate CUDA files or trees to HIP (API names, types, headers, warp "
                                          "masks, launches) from the mapping table; audit findings and what stays "
                                          "untranslated are left as // portable: comments and listed on stderr.")
    p.add_argument("paths", nargs="+", metavar="PATH", help="source files, or folders to search for them")
    where = p.add_mutually_exclusive_group()
    where.add_argument("-o", "--output", metavar="DIR",
                       help="write the HIP here, mirroring the inputs (.cu -> .hip; .cuh and others keep their names)")
    where.add_argument("--inplace", action="store_true", help="rewrite each file under its own name")
    p.add_argument("--stats", action="store_true",
                   help=f"print per-file counts ({', '.join(COUNTS)}) and totals")
    p.add_argument("--format", choices=["text", "csv"], default="text", help="the counts as a table or as CSV")
    p.add_argument("--target", help="AMD targets the audit judges against (default: all AMD targets)")
    p.add_argument("--launch", choices=["keep", "ggl"], default="keep",
                   help="kernel<<<...>>>(...) launches: keep them (hipcc takes them, default) or rewrite them "
                        "to hipLaunchKernelGGL")
    p.set_defaults(func=cmd_port)
