"""`portable dialect` and docs/dialect.md: every name a template can use, read from the table.

Both read portable.dialect (the rows of mapping/cuda_hip/*.csv the renderer turns into
spellings, the template-level names, the targets' fields), so the reference cannot drift from
what renders. `python -m portable.dialect_doc --write docs/dialect.md` regenerates the page.
"""
from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

from . import dialect
from .data import TARGET_COLUMNS, mapping_dir
from .dialect import HOST_SPACES, TEMPLATE_NAMES, Entry
from .errors import InputError, PortableError
from .targets import all_targets, get_target

DOC_PATH = "docs/dialect.md"
REGENERATE = f"python -m portable.dialect_doc --write {DOC_PATH}"

# One line per namespace for people; the rows themselves say what each name does. A namespace
# added to the table without a line here is described by its rows' categories.
SPACE_DOCS = {
    "idx": "thread and block indices and sizes",
    "fn": "function qualifiers and launch bounds",
    "sync": "barriers, fences, mbarriers and programmatic dependent launch",
    "warp": "warp (NVIDIA, 32 lanes) and wave (AMD, 64 lanes) operations: lanes, masks, shuffles, votes",
    "smem": "shared memory (LDS on AMD) declarations",
    "atomic": "atomic operations on global and shared memory",
    "math": "fast and exact math intrinsics",
    "cvt": "bit casts and number-format conversions (bf16, f16, fp8, E8M0, E2M1)",
    "mem": "vector loads and stores, cache hints, asynchronous copies and tensor maps",
    "mma": "warp/wave matrix fragments and instructions (mma.sync on NVIDIA, MFMA on AMD)",
    "sk": "skinny (swap-AB) GEMM fragments: weight rows in A, activation rows in B",
    "mma4": "block-scaled FP4 matrix fragments from warps/waves (sm_120a, gfx950)",
    "umma": "CTA-level block-scaled FP4 MMA in tensor memory (tcgen05, sm_100a)",
    "wg": "warpgroup MMA from shared-memory descriptors (wgmma, sm_90a)",
    "bits": "bit and byte manipulation",
}
# What each mapping/targets.toml key of a target holds (the values and their sources live there).
# A key added there without a line here reads as "from mapping/targets.toml".
LIMIT_DOCS = {
    "mma_shape": "M, N, K of one warp/wave bf16 matrix instruction",
    "fp4_matrix": "how block-scaled FP4 is multiplied: mma4 (warp/wave fragments) or umma (tcgen05)",
    "devices": "the devices this target compiles for",
    "arch_match": "the device architecture string that selects this target",
    "max_threads_per_block": "threads a block may have",
    "smem_per_block": "shared memory (LDS) bytes one block may use",
    "dynamic_smem_default": "dynamic shared memory bytes a launch may take without raising the limit",
    "smem_per_sm": "shared memory (LDS) bytes per SM (CU)",
    "smem_reserved_per_block": "shared memory bytes the system reserves per block",
    "regs_per_sm": "32-bit registers per SM",
    "reg_alloc_unit": "registers per warp, allocation granularity",
    "max_regs_per_thread": "registers a thread may have",
    "max_threads_per_sm": "resident threads per SM",
    "max_blocks_per_sm": "resident blocks per SM",
    "simds_per_cu": "SIMDs per CU",
    "vgprs_per_simd_lane": "vector registers per SIMD lane (arch VGPRs and AGPRs together)",
    "vgpr_alloc_unit": "vector registers, allocation granularity",
    "max_waves_per_simd": "resident waves per SIMD",
    "max_sgprs": "scalar registers a wave may have",
    "source": "where the target's numbers come from",
}
_ALL_TARGETS = "all targets"
_WIDTH = 100


# ---- the vocabulary ----------------------------------------------------------------------

def device_spaces() -> dict[str, list[Entry]]:
    return {s: es for s, es in dialect.spaces().items() if s not in HOST_SPACES}


def host_spaces() -> dict[str, list[Entry]]:
    return {s: es for s, es in dialect.spaces().items() if s in HOST_SPACES}


def space_doc(space: str) -> str:
    if space in SPACE_DOCS:
        return SPACE_DOCS[space]
    if space in HOST_SPACES:
        return "host side: what the backends spell for compilers and drivers, never device source"
    return ", ".join(sorted({e.category for e in dialect.spaces()[space]}))


def signature(entry: Entry) -> str:
    return f"{entry.key}({', '.join(entry.fields)})" if entry.fields else entry.key


def usage(entry: Entry) -> str:
    """How a template writes the name: arguments are C expressions passed as strings."""
    if not entry.fields:
        return f"{{{{ {entry.key} }}}}"
    return f"{{{{ {entry.key}({', '.join(repr(f) for f in entry.fields)}) }}}}"


def availability(entry: Entry, targets=TARGET_COLUMNS) -> str:
    """'all targets', or the targets grouped by the table's cell: 'yes: sm_100a; no: ...'."""
    cells = {t: entry.availability[t] or "-" for t in targets}
    if len(targets) > 1 and set(cells.values()) == {"yes"}:
        return _ALL_TARGETS
    groups: dict[str, list[str]] = {}
    for t, cell in cells.items():
        groups.setdefault(cell, []).append(t)
    order = sorted(groups, key=lambda c: (c != "yes", c == "no", c))
    return "; ".join(f"{cell}: {', '.join(groups[cell])}" for cell in order)


def spelling(entry: Entry, target: str) -> str:
    """The pattern `target` renders, or '-' where the table gives none."""
    return entry.pattern(get_target(target).dialect) or "-"


def target_fields() -> dict[str, str]:
    """target.X -> what it holds, for every field a template may read."""
    return {a: LIMIT_DOCS.get(a.partition(".")[2], text) for a, text in dialect.target_attributes().items()}


def target_value(attribute: str, target: str) -> str:
    """target.X on one target, as a template would see it ('-' where the target lacks it)."""
    t = get_target(target)
    field = attribute.partition(".")[2]
    if field == "has":
        return "a method"
    if field in ("name", "vendor", "dialect", "wave", "features"):
        value = getattr(t, field)
    elif field in t.limits:
        value = t.limits[field]
    else:
        return "-"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value) if field in ("features", "devices") else str(list(value))
    return str(value)


def template_value(name: str, target: str) -> str:
    """A template-level name's value on one target, shortened where it is long."""
    t = get_target(target)
    if name == "WARP":
        return str(t.wave)
    if name == "target":
        return t.name
    if name == "dialect_prelude":
        folder = mapping_dir() / "prelude"
        return " + ".join(f"prelude/{p}.h" for p in (t.dialect, t.name) if (folder / f"{p}.h").exists())
    return "-"


def resolve(query: str) -> tuple[str, str]:
    """What a query names: ('space', s), ('entry', key), ('template', name) or
    ('attribute', 'target.x'); anything else is an error with the nearest names."""
    query = query.strip().split("(")[0].strip()
    if query in dialect.spaces():
        return "space", query
    if query in dialect.entries():
        return "entry", query
    if query in TEMPLATE_NAMES:
        return "template", query
    if query in target_fields():
        return "attribute", query
    near = dialect.nearest_names(query)
    raise InputError(f"dialect: no name {query!r}; nearest: "
                     + (", ".join(near) if near else "none (portable dialect lists every name)"))


# ---- text for the terminal ---------------------------------------------------------------

def _wrap(label: str, text: str, indent: int) -> list[str]:
    pad = " " * indent
    return textwrap.wrap(text, _WIDTH, initial_indent=f"{pad}{label:<10} ", subsequent_indent=pad + " " * 11) or [f"{pad}{label}"]


def _space_header(space: str, target: str | None) -> str:
    on = f" on {target} ({get_target(target).dialect})" if target else ""
    count = len(dialect.spaces()[space])
    return f"{space}{on}: {space_doc(space)}; {count} name{'s' * (count != 1)}"


def _shown(entry: Entry, dialect_name: str) -> str:
    """A listing's spelling: the pattern; a host row without one shows the name it stands for."""
    pattern = entry.pattern(dialect_name)
    if pattern or not entry.host:
        return pattern or "-"
    return f"[{entry.cuda if dialect_name == 'cuda' else entry.hip}]"


def space_lines(space: str, target: str | None = None) -> list[str]:
    entries = dialect.spaces()[space]
    width = min(max(len(signature(e)) for e in entries), 40)
    lines = [_space_header(space, target)]
    for e in entries:
        if target:
            lines.append(f"  {signature(e):<{width}}  {e.availability[target] or '-':<8}  {spelling(e, target)}")
            continue
        lines.append(f"  {signature(e):<{width}}  {availability(e)}")
        cuda, hip = _shown(e, "cuda"), _shown(e, "hip")
        lines += [f"      both  {cuda}"] if cuda == hip else [f"      cuda  {cuda}", f"      hip   {hip}"]
    return lines


def entry_lines(key: str, target: str | None = None) -> list[str]:
    e = dialect.entries()[key]
    lines = [signature(e), f"  {'template':<10} {usage(e)}"]
    lines.append(f"  {'arguments':<10} {', '.join(e.fields) if e.fields else 'none (renders as itself)'}")
    lines.append(f"  {'category':<10} {e.category}")
    if target:
        lines.append(f"  {target:<10} {e.availability[target] or '-'}: {spelling(e, target)}")
    else:
        for dialect_name, pattern, name in (("cuda", e.cuda_expr, e.cuda), ("hip", e.hip_expr, e.hip)):
            lines += _wrap(dialect_name, f"{pattern or '-'}   [{name}]" if name and name != pattern else pattern or "-", 2)
        lines += [f"  {t:<10} {e.availability[t] or '-'}" for t in TARGET_COLUMNS]
    if e.host:
        lines.append(f"  {'side':<10} host: the backends use it; it is not for device source")
    if e.note:
        lines += _wrap("note", e.note, 2)
    if e.source:
        lines += _wrap("source", e.source, 2)
    lines.append(f"  {'row':<10} mapping/cuda_hip/{e.row}")
    return lines


def template_lines(name: str, target: str | None = None, full: bool = True) -> list[str]:
    targets = [target] if target else list(TARGET_COLUMNS)
    lines = [name, *_wrap("what", TEMPLATE_NAMES[name], 2)]
    if name == "target":
        fields = target_fields()
        if not full:
            return lines + _wrap("fields", ", ".join(fields), 2)
        for attribute in fields:
            lines += attribute_lines(attribute, target, indent=2)
        return lines
    lines += [f"  {t:<10} {template_value(name, t)}" for t in targets]
    return lines


def attribute_lines(attribute: str, target: str | None = None, indent: int = 0) -> list[str]:
    pad = " " * indent
    lines = [f"{pad}{attribute}"] + _wrap("what", target_fields()[attribute], indent + 2)
    for t in ([target] if target else TARGET_COLUMNS):
        lines += _wrap(t, target_value(attribute, t), indent + 2)
    return lines


def listing(query: str | None = None, target: str | None = None) -> list[str]:
    """The text `portable dialect [QUERY] [--target T]` prints."""
    if target:
        target = get_target(target).name
    if query is None:
        lines = ["template-level names (every template gets them)"]
        for name in TEMPLATE_NAMES:
            lines += ["  " + line for line in template_lines(name, target, full=False)]
        for space in device_spaces():
            lines += ["", *space_lines(space, target)]
        lines += ["", f"host-side namespaces (not for device source): {', '.join(host_spaces())}; "
                      f"see portable dialect SPACE"]
        return lines
    kind, name = resolve(query)
    if kind == "space":
        return space_lines(name, target)
    if kind == "entry":
        return entry_lines(name, target)
    if kind == "template":
        return template_lines(name, target)
    return attribute_lines(name, target)


# ---- docs/dialect.md ---------------------------------------------------------------------

def _cell(text: str) -> str:
    """Prose in a Markdown table cell: pipes, HTML-looking brackets and emphasis marks escaped."""
    return (text.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
            .replace("*", "\\*"))


def _code(text: str) -> str:
    return f"`{text.replace('|', chr(92) + '|')}`" if text else "-"


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head),
            *("| " + " | ".join(row) + " |" for row in rows)]


def markdown() -> str:
    """docs/dialect.md, whole."""
    cuda, hip = dialect.dialect_for("sm_90a"), dialect.dialect_for("gfx942")
    targets = list(TARGET_COLUMNS)
    out = [
        "# The dialect: names a template can use",
        "",
        f"Generated from `mapping/cuda_hip/*.csv` and `mapping/targets.toml` by `{REGENERATE}`;",
        "do not edit by hand (a test fails when the page and the table differ). "
        "`portable dialect [SPACE|NAME] [--target T]` prints the same on a terminal.",
        "",
        "A template never spells a vendor: it writes names from this page, and the dialect of the target being",
        "rendered fills in the CUDA or HIP spelling.",
        "",
        f"- A name without arguments renders as itself: `{{{{ sync.block }}}};` gives `{cuda['sync'].block};` on every target,",
        f"  `{{{{ warp.mask_t }}}}` gives `{cuda['warp'].mask_t}` on CUDA targets and `{hip['warp'].mask_t}` on HIP targets.",
        "- A name with arguments is called with C expressions written as strings (or ints), by position in the order",
        f"  shown or by name: `{{{{ warp.shfl_xor('v', 'o') }}}}` gives `{cuda['warp'].shfl_xor('v', 'o')}` on CUDA targets and",
        f"  `{hip['warp'].shfl_xor('v', 'o')}` on HIP targets. Only plain expressions (names, numbers, operators, brackets) pass.",
        "- A name whose target column says `no` fails when rendered for that target; put such code under",
        "  `{% if target.has('wgmma') %}` or another test of the target's fields.",
        "- A misspelt name fails with the nearest names, e.g. "
        f"`{_misspelt_example()}`.",
        "- Some spellings call helpers defined in `mapping/prelude/`: `prelude.j2` emits them (`dialect_prelude`), and a",
        "  template that does not include `prelude.j2` gets it first.",
        "",
        "## Template-level names",
        "",
        *_table(["name", "what it holds", *targets],
                [[_code(n), _cell(text), *(_code(template_value(n, t)) for t in targets)]
                 for n, text in TEMPLATE_NAMES.items()]),
        "",
        "### Fields of `target`",
        "",
        "A field a target's row lacks (`-`) fails when read on that target.",
        "",
        *_table(["field", "what it holds", *targets],
                [[_code(a), _cell(text), *(_cell(target_value(a, t)) for t in targets)]
                 for a, text in target_fields().items()]),
        "",
        "## Namespaces",
        "",
        *(f"- [`{s}`](#{s}): {_cell(space_doc(s))} ({len(es)})" for s, es in device_spaces().items()),
        "",
        f"The table's host-side namespaces ({', '.join(f'`{s}`' for s in host_spaces())}) spell compiler flags and",
        "driver calls for the backends and are not for device source; `portable dialect SPACE` lists them.",
    ]
    for space, entries in device_spaces().items():
        out += ["", f"## {space}", "", _cell(space_doc(space)[:1].upper() + space_doc(space)[1:]) + ".", ""]
        out += _table(["name", "CUDA", "HIP", "targets", "note"],
                      [[_code(signature(e)), _code(e.cuda_expr), _code(e.hip_expr),
                        _cell(availability(e).replace(_ALL_TARGETS, "all")), _cell(e.note)] for e in entries])
    return "\n".join(out) + "\n"


def _misspelt_example() -> str:
    try:
        dialect.dialect_for("sm_90a")["warp"].shfl_xorr
    except PortableError as e:
        return str(e)
    raise AssertionError("warp.shfl_xorr resolved")      # the example must fail


def write(path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(markdown())
    return path


# ---- command line ------------------------------------------------------------------------

def cmd_dialect(args) -> int:
    if args.write:
        print(f"wrote {write(args.write)}")
        return 0
    sys.stdout.write("\n".join(listing(args.name, args.target)) + "\n")
    return 0


def add_cli(subparsers) -> None:
    p = subparsers.add_parser("dialect", help="list the names a template can use, with their CUDA and HIP spellings",
                              description="Every name a template can use: arguments, CUDA and HIP spellings, "
                                          "availability per target. SPACE (e.g. warp) lists one namespace; "
                                          "NAME (e.g. warp.shfl_xor) shows one entry in full.")
    p.add_argument("name", nargs="?", metavar="SPACE|NAME", help="a namespace (warp) or a name (warp.shfl_xor, WARP, target.wave)")
    p.add_argument("--target", help=f"only this target's spelling and availability: {', '.join(all_targets())}")
    p.add_argument("--write", metavar="PATH", help=f"write the Markdown reference instead (the repository's is {DOC_PATH})")
    p.set_defaults(func=cmd_dialect)


def main(argv=None) -> int:
    """`python -m portable.dialect_doc`: the same command without the rest of the CLI."""
    parser = argparse.ArgumentParser(prog="portable")
    add_cli(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["dialect", *(sys.argv[1:] if argv is None else argv)])
    try:
        return args.func(args)
    except PortableError as e:
        print(f"portable: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
