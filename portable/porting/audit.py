"""`portable audit`: portability hazards in CUDA (and HIP) sources, judged against the targets.

Each check reads the source with comments and string literals blanked out (positions kept),
so nothing in a comment or a string is ever flagged; inline PTX is read from the asm
statement's own strings. Facts (availability per target, fixes, notes) come from the mapping
table rows, and limits (wave size, shared memory / LDS, threads per block) from the targets
data, so the audit says what `portable ref` says.
"""
# The audit lives in four modules, re-exported here so that every name stays importable from
# portable.audit: audit_findings (Finding, table rows), audit_reading (Source, evaluate),
# audit_preprocess (Conditional, predefined macros) and audit_rules (Audit, PTX_FAMILIES).
from __future__ import annotations

import json
from pathlib import Path

from .audit_findings import (  # noqa: F401  (re-exported: portable.porting.audit is the public face)
    SEVERITIES,
    SOURCE_SUFFIXES,
    Finding,
    _rows_by_cuda,
    table_row,
    maybe_row,
    _fix,
)
from .audit_reading import (  # noqa: F401  (re-exported: portable.porting.audit is the public face)
    Source,
    _blank,
    _spaces,
    _call_args,
    _TYPE_BYTES,
    _CONST_DEF,
    _INT,
    _SIZEOF,
    _constants,
    _int_literal,
    evaluate,
)
from .audit_preprocess import (  # noqa: F401  (re-exported: portable.porting.audit is the public face)
    _UNDEF,
    _NVCC_MACROS,
    _HIPCC_MACROS,
    _NAMES_AMD,
    _STUB_STATEMENT,
    _macro_env,
    _and3,
    _or3,
    _not3,
    _condition,
    _included_macros,
    _header_envs,
    _Branch,
    Conditional,
)
from .audit_rules import (  # noqa: F401  (re-exported: portable.porting.audit is the public face)
    Audit,
    _matching_brace,
    _statement,
    _kb,
    PTX_FAMILIES,
    _LEADING,
    _AMDGPU_BUILTIN,
    _API_LIKE,
    _name_index,
    _name_verdicts,
)
from ..errors import InputError
from ..targets import Target, all_targets, get_target


# ---------------------------------------------------------------- entry points

def _resolve(targets) -> list[Target]:
    if targets is None:
        return list(all_targets().values())
    if isinstance(targets, str):
        if targets.strip() == "all":
            return list(all_targets().values())
        targets = [t for t in targets.split(",") if t.strip()]
    resolved = [t if isinstance(t, Target) else get_target(str(t).strip()) for t in targets]
    if not resolved:
        raise InputError("targets: no target given; expected one or more of " + ", ".join(all_targets()))
    return resolved


def audit_source(text: str, path: str = "<source>", targets=None) -> list[Finding]:
    """Hazards in one source text for `targets` (names, a comma-separated string, or None for all)."""
    return Audit(Source(text, path), _resolve(targets)).run()


def source_files(paths) -> list[Path]:
    files = []
    for p in map(Path, paths):
        if p.is_dir():
            files += sorted(f for f in p.rglob("*") if f.suffix in SOURCE_SUFFIXES and f.is_file())
        elif p.is_file():
            files.append(p)
        else:
            raise InputError(f"path: {str(p)!r} is neither a file nor a folder")
    return files


def audit_paths(paths, targets=None) -> list[Finding]:
    """Hazards in every file given, or every source file under each folder given."""
    resolved = _resolve(targets)
    findings = []
    for f in source_files(paths):
        findings += audit_source(f.read_text(errors="replace"), str(f), resolved)
    return findings


def at_or_above(findings: list[Finding], severity: str) -> list[Finding]:
    if severity not in SEVERITIES:
        raise InputError(f"fail-on: unknown severity {severity!r}; expected one of {', '.join(SEVERITIES)}")
    floor = SEVERITIES.index(severity)
    return [f for f in findings if SEVERITIES.index(f.severity) >= floor]


def cmd_audit(args) -> int:
    targets = _resolve(args.target)
    findings = audit_paths(args.paths, targets)
    if args.format == "json":
        print(json.dumps([f.to_dict() for f in findings], indent=2))
    else:
        for f in findings:
            print(f.format())
        counts = {s: sum(f.severity == s for f in findings) for s in reversed(SEVERITIES)}
        files = len(source_files(args.paths))
        print(f"{len(findings)} finding(s): " + ", ".join(f"{n} {s}" for s, n in counts.items())
              + f" in {files} file(s) for {', '.join(t.name for t in targets)}")
    return 1 if at_or_above(findings, args.fail_on) else 0


def add_cli(subparsers) -> None:
    p = subparsers.add_parser("audit", help="report portability hazards in CUDA/HIP sources",
                              description="Report portability hazards (file:line:column, severity, fix from the mapping table).")
    p.add_argument("paths", nargs="+", metavar="PATH", help="source files, or folders to search for them")
    p.add_argument("--target", default="all", help="targets to judge against: a comma-separated list or 'all' (default)")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument("--fail-on", choices=SEVERITIES, default="error",
                   help="exit with status 1 when a hazard at or above this severity is found (default: error)")
    p.set_defaults(func=cmd_audit)
