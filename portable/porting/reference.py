"""`portable ref`: the CUDA<->HIP mapping table as a porting cheat-sheet.

The rows are the very ones the renderer reads (mapping/cuda_hip/*.csv), so an answer here is
what the templates use. A query that names a row (a whole CUDA or HIP cell, a row key, or the
first name in a cell) answers with that row, followed by the rows that mention the name; so a
HIP name finds the row of its CUDA name and the other way round. Otherwise every row that
mentions the query answers: as a name in any case, a substring of a cell, or a word of a note
(`e4m3fnuz`). A query that matches nothing says there is no row, with at most three near names
(and their rows) that are close to it by spelling; nothing unrelated is offered.
`--list` prints every row, one a line, so the table can be diffed against another (HIPIFY's).

The table has thousands of rows: their names are worked out once a process (`_index`, and the
near-name vocabulary once per filter), so a lookup only scans what was worked out.
"""
from __future__ import annotations

import difflib
import functools
import json
import re
import shutil
import sys
import textwrap
from typing import NamedTuple

import numpy as np
import pandas as pd

from ..data import TARGET_COLUMNS, load_table
from ..errors import InputError
from ..targets import get_target

COLUMNS = ("category", "cuda", "hip", *TARGET_COLUMNS, "note", "source", "key", "file")
AVAILABLE = ("yes", "emulated", "partial")          # what a --target filter keeps
FORMATS = ("table", "json", "csv")

# Match tiers, best first. A name the row is about (a whole cell, or the first name in a cell)
# brings the rows that merely mention it along; without one, every row that mentions the query
# anywhere (cells, then notes) answers; without that, the nearest names do.
EXACT, MENTION, ANY_CASE, SUBSTRING, NOTE, NEAREST = "exact", "mentions", "any case", "substring", "note", "nearest"
_NEAREST_COUNT = 3
# difflib ratio a near name must reach: typos (cudaMalocManaged -> cudaMallocManaged 0.97,
# __syncthread 0.96) pass; unrelated names sharing a few letters (xyzzy123, cublasCreate ->
# culinkcreate 0.75) do not
NEAREST_CUTOFF = 0.8
LIST_COLUMNS = ("key", "cuda", "hip", *TARGET_COLUMNS)

# Names inside a cell: C identifiers, PTX mnemonics (wgmma.fence), special registers (%smid),
# qualified names (cooperative_groups::this_grid).
_TOKEN = re.compile(r"[%A-Za-z_][A-Za-z0-9_]*(?:(?:\.|::)[A-Za-z0-9_]+)*")
_PARTS = re.compile(r"\.|::")                         # what joins a token's parts


@functools.cache
def table() -> pd.DataFrame:
    """Every row of the mapping table, in file order."""
    return pd.DataFrame(list(load_table()), columns=COLUMNS).fillna("")


@functools.cache
def _categories() -> tuple[str, ...]:
    return tuple(sorted(set(table()["category"])))


def categories() -> list[str]:
    return list(_categories())


def tokens(cell: str) -> set[str]:
    """The names a cell spells, with their dotted / qualified parts: 'threadIdx.x' gives
    {'threadIdx.x', 'threadIdx'}; 'cooperative_groups::this_grid' also gives 'this_grid'."""
    return _names(cell)[1]


def _names(cell: str) -> tuple[str, set[str]]:
    """The first name a cell spells ("" if none) and tokens(cell)."""
    found = _TOKEN.findall(cell)
    out = set(found)
    for tok in found:
        if "." in tok or ":" in tok:
            out.update(p for p in _PARTS.split(tok) if len(p) > 1)
    return (found[0] if found else ""), out


class _Row(NamedTuple):
    """What a lookup compares a query with, worked out once per row of table()."""
    cells: tuple[str, str]             # the CUDA and HIP cells
    cells_lower: tuple[str, str]
    leading: frozenset[str]            # the first name in each cell
    toks: frozenset[str]               # tokens() of both cells
    toks_lower: frozenset[str]
    names: tuple[str, ...]             # toks sorted: the order the near-name vocabulary takes them in
    key: str
    key_lower: str
    note_lower: str


@functools.cache
def _index() -> tuple[_Row, ...]:
    """One _Row per row of table(), at the row's label (table() has a RangeIndex)."""
    t = table()
    out = []
    for cuda, hip, key, note in zip(*(t[c].tolist() for c in ("cuda", "hip", "key", "note"))):
        (lead_cuda, toks_cuda), (lead_hip, toks_hip) = _names(cuda), _names(hip)
        toks = frozenset(toks_cuda | toks_hip)
        out.append(_Row(cells=(cuda, hip), cells_lower=(cuda.lower(), hip.lower()),
                        leading=frozenset((lead_cuda, lead_hip)), toks=toks,
                        toks_lower=frozenset(tok.lower() for tok in toks), names=tuple(sorted(toks)),
                        key=key, key_lower=key.lower(), note_lower=note.lower()))
    return tuple(out)


def lookup(query: str | None = None, category: str | None = None, target: str | None = None) -> pd.DataFrame:
    """Rows matching `query` (CUDA or HIP spelling, key, or a word of a note), optionally
    only in `category` and only those available on `target` (yes, emulated or partial).

    The result has the table's columns plus `match`, the tier that found each row. A query no
    row matches gives the rows of at most three near names (`match` "nearest", `near` the name),
    or no rows when no name of the table is close to it."""
    rows = _filter(table(), category, target)
    if query is None or not str(query).strip():
        return rows.assign(match="")
    query = str(query).strip()
    hits = _matches(rows, query)
    if not hits:
        return _nearest(rows, query).reset_index(drop=True)
    found = rows.loc[[label for label, _ in hits]].assign(match=[tier for _, tier in hits])
    return found.reset_index(drop=True)


def _filter(rows: pd.DataFrame, category: str | None, target: str | None) -> pd.DataFrame:
    if category:
        wanted = category.strip().lower()
        names = [c for c in categories() if c.lower() == wanted] or \
                [c for c in categories() if c.lower().startswith(wanted)]
        if not names:
            raise InputError(f"category: unknown category {category!r}; expected one of {', '.join(categories())}")
        rows = rows[rows["category"].isin(names)]
    if target:
        name = get_target(target).name                    # raises naming the argument
        rows = rows[rows[name].isin(AVAILABLE)]
    return rows


def _matches(rows: pd.DataFrame, query: str) -> list[tuple]:
    """(row label, tier) pairs, best tier first, table order within a tier."""
    low = query.lower()
    index = _index()
    tiers: dict[str, list] = {EXACT: [], MENTION: [], ANY_CASE: [], SUBSTRING: [], NOTE: []}
    for label in rows.index:
        r = index[label]
        if query in r.cells or query == r.key or query in r.leading:
            tiers[EXACT].append(label)
        elif query in r.toks:
            tiers[MENTION].append(label)
        elif low in r.toks_lower:
            tiers[ANY_CASE].append(label)
        elif low in r.cells_lower[0] or low in r.cells_lower[1]:
            tiers[SUBSTRING].append(label)
        elif low in r.note_lower or low in r.key_lower:
            tiers[NOTE].append(label)
    keep = (EXACT, MENTION) if tiers[EXACT] else (MENTION, ANY_CASE, SUBSTRING, NOTE)
    return [(label, tier) for tier in keep for label in tiers[tier]]


class _Vocabulary(NamedTuple):
    """The names some rows spell, for _nearest."""
    first: dict[str, tuple]            # lower-case name -> (spelling, label of the first row that spells it)
    names: list[str]                   # the lower-case names, in that dict's order
    lengths: np.ndarray                # their lengths
    counts: np.ndarray                 # counts[i, j]: how often names[i] holds letter j of `letters`
    letters: dict[str, int]


@functools.lru_cache(maxsize=64)
def _vocabulary(labels: tuple[int, ...]) -> _Vocabulary:
    """The near-name vocabulary of the rows at `labels`: the whole table's is built once, a
    filter's (--category, --target) once per filter."""
    index = _index()
    first: dict[str, tuple] = {}
    for label in labels:
        for tok in index[label].names:
            first.setdefault(tok.lower(), (tok, label))
    names = list(first)
    letters = {ch: j for j, ch in enumerate(sorted({ch for name in names for ch in name}))}
    counts = np.zeros((len(names), len(letters)), dtype=np.int32)
    at = (np.array([i for i, name in enumerate(names) for _ in name], dtype=np.intp),
          np.array([letters[ch] for name in names for ch in name], dtype=np.intp))
    np.add.at(counts, at, 1)
    return _Vocabulary(first, names, np.array([len(n) for n in names], dtype=np.int64), counts, letters)


def _nearest(rows: pd.DataFrame, query: str) -> pd.DataFrame:
    """For each of the (at most three) names closest to `query` by spelling (difflib ratio,
    case-insensitive, at least NEAREST_CUTOFF), the first row that spells it; `near` holds the
    name. No name that close: no rows."""
    vocab = _vocabulary(tuple(rows.index))
    low = query.lower()
    # difflib passes over a name whose quick_ratio (2 * letters in common / both lengths, an upper
    # bound of its ratio) is below the cutoff; computing that for every name at once and giving
    # difflib the rest finds the same names, sooner (the slack only lets more through)
    wanted = np.zeros(len(vocab.letters), dtype=np.int32)
    for ch in low:
        if ch in vocab.letters:
            wanted[vocab.letters[ch]] += 1
    common = np.minimum(vocab.counts, wanted).sum(axis=1)
    possible = 2.0 * common / (vocab.lengths + len(low)) >= NEAREST_CUTOFF - 1e-9
    candidates = [vocab.names[i] for i in np.flatnonzero(possible)]
    close = difflib.get_close_matches(low, candidates, n=_NEAREST_COUNT, cutoff=NEAREST_CUTOFF)
    labels, names = [], []
    for tok in close:
        name, label = vocab.first[tok]
        if label not in labels:
            labels.append(label)
            names.append(name)
    return rows.loc[labels].assign(match=NEAREST, near=names)


# ---------------------------------------------------------------- output

_SHORT = {"yes": "yes", "no": "no", "emulated": "emu", "partial": "part"}


def format_table(found: pd.DataFrame, width: int | None = None) -> str:
    """A plain-text table with wrapped cells: category, CUDA, HIP, one column per target, note, row."""
    width = width or _width()
    heads = ("category", "CUDA", "HIP", *[t.replace("sm_", "") for t in TARGET_COLUMNS], "note", "row")
    fixed = [13, 0, 0, *[max(4, len(h)) for h in heads[3:-2]], 0, 0]     # a target column fits its name and "part"
    fixed[-1] = max([len("row")] + [len(f) for f in found["file"]])
    rest = width - sum(fixed) - 2 * (len(heads) - 1)
    fixed[1] = fixed[2] = max(18, rest * 3 // 10)
    fixed[-2] = max(20, rest - fixed[1] - fixed[2])
    lines = ["  ".join(h.ljust(w) for h, w in zip(heads, fixed)).rstrip(),
             "  ".join("-" * w for w in fixed)]
    for _, row in found.iterrows():
        cells = (row["category"], row["cuda"], row["hip"], *[_SHORT.get(row[t], row[t]) for t in TARGET_COLUMNS],
                 row["note"], row["file"])
        wrapped = [textwrap.wrap(str(c), w, break_long_words=True, break_on_hyphens=False) or [""]
                   for c, w in zip(cells, fixed)]
        for i in range(max(len(w) for w in wrapped)):
            lines.append("  ".join((w[i] if i < len(w) else "").ljust(fw) for w, fw in zip(wrapped, fixed)).rstrip())
        if any(len(w) > 1 for w in wrapped):
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _width() -> int:
    # piped output (README, CI logs) gets a fixed, comfortable width
    return shutil.get_terminal_size((160, 24)).columns if sys.stdout.isatty() else 160


def render(found: pd.DataFrame, fmt: str, query: str | None = None, width: int | None = None,
           scope: str = "") -> str:
    """`found` as text: a table with a one-line heading, JSON records, or CSV."""
    if fmt not in FORMATS:
        raise InputError(f"format: unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    if fmt == "json":
        return json.dumps(found.to_dict(orient="records"), indent=2) + "\n"
    if fmt == "csv":
        return found.to_csv(index=False)
    if query and not len(found):
        return f"no row for {query!r}{scope}, and no name close to it\n"
    if query and found["match"].iloc[0] == NEAREST:
        head = f"no row for {query!r}{scope}; near names: {', '.join(found['near'])}"
    else:
        counts = found["match"].value_counts(sort=False)
        tiers = f" ({', '.join(f'{k}: {v}' for k, v in counts.items())})" if query else ""
        head = f"{len(found)} row(s)" + (f" for {query!r}" if query else "") + scope + tiers
    return head + "\n\n" + (format_table(found, width) if len(found) else "no rows\n")


# ---------------------------------------------------------------- command line

def render_list(found: pd.DataFrame, fmt: str) -> str:
    """One line a row, LIST_COLUMNS only, in table order: tab-separated with a header (`table`),
    or CSV / JSON records."""
    if fmt not in FORMATS:
        raise InputError(f"format: unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    rows = found[list(LIST_COLUMNS)]
    if fmt == "json":
        return json.dumps(rows.to_dict(orient="records"), indent=2) + "\n"
    if fmt == "csv":
        return rows.to_csv(index=False)
    # a cell never holds a tab or a newline, so each row stays one line of a diff
    lines = ["\t".join(LIST_COLUMNS)] + ["\t".join(str(v) for v in r) for r in rows.itertuples(index=False)]
    return "\n".join(lines) + "\n"


def cmd_ref(args) -> int:
    query = " ".join(args.query) if args.query else None
    if args.list:
        if query:
            raise InputError(f"--list: expected no QUERY (it prints every row), got {query!r}")
        sys.stdout.write(render_list(lookup(None, category=args.category, target=args.target), args.format))
        return 0
    found = lookup(query, category=args.category, target=args.target)
    scope = (f" in category {args.category!r}" if args.category else "") + \
            (f" available on {args.target}" if args.target else "")
    sys.stdout.write(render(found, args.format, query, width=args.width, scope=scope))
    return 0


def add_cli(subparsers) -> None:
    p = subparsers.add_parser("ref", help="look up a CUDA or HIP name in the porting table",
                              description="Look up CUDA <-> HIP spellings with per-target availability and notes.")
    p.add_argument("query", nargs="*", help="a CUDA or HIP name, PTX instruction, or word of a note (e.g. __shfl_xor_sync, e4m3fnuz)")
    p.add_argument("--category", help=f"only this category (or prefix): {', '.join(categories())}")
    p.add_argument("--target", help="only rows available (yes, emulated, partial) on this target")
    p.add_argument("--list", action="store_true",
                   help=f"print every row (or every row --category/--target keep), one a line: "
                        f"{', '.join(LIST_COLUMNS)}; tab-separated, or --format csv|json")
    p.add_argument("--format", choices=FORMATS, default="table")
    p.add_argument("--width", type=int, help="table width in characters (default: the terminal's, or 160 when piped)")
    p.set_defaults(func=cmd_ref)
