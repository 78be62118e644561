"""`portable matrix`: result files from several machines merged into one table.

Rows are kernel x shape x params (params apart: a bf16 and an fp32 variant of one shape are
different work), columns are device / target (a compile-only file gives one column per
target it compiled for). Each cell holds the median time, the achieved TB/s or TFLOP/s (the
one that bounds the kernel), the percentage of the roofline bound, and the ratio to the best
peer measured on that device in the same run.

Files are merged per row, not per file: two runs on one device that measured different
kernels both show in its column. Where two files hold the same row (kernel, shape, params,
device or compile-only, target), the newer file's row wins and a note names the file dropped
and how its software differed; with keep="both" each file of a column gets its own column
marked with its date instead. Every cell names its file (the CSV's 'source' field, a [n] after
the cell in Markdown and HTML, numbered in the sources list). Notes travel in
DataFrame.attrs["notes"] and every output format prints them.
"""
from __future__ import annotations

import csv
import html
import io
import re
import math
from pathlib import Path

import pandas as pd

from .data import TARGET_COLUMNS
from .report import MATRIX_CLASSES
from .results import label, merge_rows, roofline_position, sources

INDEX = ["kernel", "shape", "params"]
CELL_FIELDS = ("status", "median_us", "achieved", "unit", "pct_of_roofline", "ceilings", "vs_best_peer",
               "best_peer", "static", "error", "source")
KEEP_POLICIES = ("latest", "both")
ABOVE_ROOF_PCT = 105         # beyond timing noise: worth a note
ANY_SHAPE = "(any shape)"     # compile-only rows without a shape: the static report holds for every shape
# Instruction classes worth naming in a cell: vector width and the matrix path taken.
_NAMED_INSTRUCTIONS = ("global_load_128", "global_store_128", *MATRIX_CLASSES)
_SHORT = {"global_load_128": "ld128", "global_store_128": "st128"}
CELL_LEGEND = ("cell: median time, achieved TB/s or TFLOP/s (whichever bounds the kernel) with % of the "
               "roofline bound, then best peer time / our time (above 1: ours is faster)")


# --- inputs ----------------------------------------------------------------------------------
def _column_name(key: tuple[str, str]) -> str:
    return f"{key[0]} / {key[1]}"


def _software_diff(old: dict, new: dict) -> str:
    """'torch 2.10.0 -> 2.11.0, git_commit abc -> def' for the fields that differ."""
    changes = []
    for key in ("git_commit", "driver"):
        if old.get(key) != new.get(key):
            changes.append(f"{key} {old.get(key)} -> {new.get(key)}")
    ov, nv = old.get("versions", {}), new.get("versions", {})
    for key in sorted(set(ov) | set(nv)):
        if ov.get(key) != nv.get(key):
            changes.append(f"{key} {ov.get(key)} -> {nv.get(key)}")
    return ", ".join(changes) if changes else "same software"


# --- cells -----------------------------------------------------------------------------------
def static_summary(static: dict | None) -> str:
    """'26 regs, occ 100%, ld128 st128' from a static report."""
    if not static:
        return ""
    parts = []
    if static.get("registers") is not None:
        parts.append(f"{static['registers']} regs")
    if static.get("spill_bytes"):
        parts.append(f"spills {static['spill_bytes']} B")
    if static.get("smem_bytes"):
        parts.append(f"smem {static['smem_bytes'] / 1024:.0f} KiB")
    if static.get("occupancy") is not None:
        parts.append(f"occ {100 * static['occupancy']:.0f}%")
    instructions = static.get("instructions") or {}
    parts += [_SHORT.get(name, name) for name in _NAMED_INSTRUCTIONS if instructions.get(name)]
    return ", ".join(parts)


def _cell(row: dict, env: dict) -> dict:
    cell = dict.fromkeys(CELL_FIELDS)
    cell.update(status=row["status"], median_us=row["median_us"], static=static_summary(row.get("static")), error=row.get("error"))
    position = roofline_position(row, env)
    if position:
        memory = position["bound"] == "memory"
        cell.update(achieved=position["tbps"] if memory else position["tflops"], unit="TB/s" if memory else "TFLOP/s",
                    pct_of_roofline=position["pct_of_roofline"], ceilings=position["ceiling_origin"])
    peers = {name: p["median_us"] for name, p in (row.get("peers") or {}).items() if p.get("median_us")}
    if peers and row["median_us"]:
        best = min(peers, key=peers.get)
        cell.update(best_peer=best, vs_best_peer=peers[best] / row["median_us"])
    return cell


def _pick(rows: list[dict]) -> dict:
    """Several rows for one kernel x shape x params in one column (a repeated case): the fastest
    ok row, else the first row (its failure then shows)."""
    timed = [r for r in rows if r["status"] == "ok" and r["median_us"]]
    return min(timed, key=lambda r: r["median_us"]) if timed else rows[0]


# --- merge -----------------------------------------------------------------------------------
def merge(results, keep: str = "latest") -> pd.DataFrame:
    """One table from result files (paths, dicts, or (label, dict) pairs). Index (kernel, shape,
    params); columns (column, field) with column 'device / target' and field one of CELL_FIELDS.
    Merged per row: a column takes each row from the newest file that has it (keep='both':
    each file of a column in its own dated column instead); a cell's 'source' names its file.
    attrs['notes']: what was dropped, chosen or differs; attrs['sources']: each file that fills
    cells (number = position + 1), with its columns, date, commit and software; attrs['columns']:
    each column's files, newest first."""
    if keep not in KEEP_POLICIES:
        raise ValueError(f"keep: expected one of {', '.join(KEEP_POLICIES)}, got {keep!r}")
    srcs = sources(results)
    if not srcs:
        raise ValueError("results: expected at least one result file, got none")
    if keep == "latest":
        entries = merge_rows(srcs)
    else:                        # each file merged alone: only its own repeated cases meet
        ranked = sorted(srcs, key=lambda s: (s["date"], s["order"]), reverse=True)
        entries = [entry for src in ranked for entry in merge_rows([src])]
    notes = [CELL_LEGEND]
    columns = _assign_columns(entries, keep, notes)
    order, cells = _collect_cells(columns, notes)
    used = _used_sources(columns, cells)
    number = {id(src): n for n, src in enumerate(used, start=1)}
    _note_sources(columns, used, number, notes)

    names = [c[0] for c in columns]
    index = pd.MultiIndex.from_tuples(order, names=INDEX) if order else pd.MultiIndex.from_arrays([[]] * 3, names=INDEX)
    data = [[cells.get(name, {}).get(key, {}).get(field) for name in names for field in CELL_FIELDS] for key in order]
    frame = pd.DataFrame(data, index=index, dtype=object,
                         columns=pd.MultiIndex.from_product([names, CELL_FIELDS], names=["column", "field"]))
    frame.attrs["notes"] = notes
    frame.attrs["sources"] = [
        {"file": src["label"], "date": src["env"]["date"], "git_commit": src["env"]["git_commit"],
         "driver": src["env"]["driver"], "versions": src["env"]["versions"],
         "columns": [name for name in names if any(c["_src"] is src for c in cells.get(name, {}).values())],
         "cells": sum(c["_src"] is src for by_key in cells.values() for c in by_key.values())}
        for src in used]
    frame.attrs["columns"] = {name: [src["label"] for src in _column_sources(ents)] for name, _, ents, _ in columns}
    return frame


def _column_sources(entries: list) -> list[dict]:
    """The files behind a column's entries, newest first (the order merge_rows gives)."""
    out = []
    for entry in entries:
        if all(entry["source"] is not s for s in out):
            out.append(entry["source"])
    return out


def _assign_columns(entries: list, keep: str, notes: list) -> list[tuple[str, tuple, list, object]]:
    """(name, key, entries, date) per column. keep='latest': one column per device/target, each
    row from its newest file; keep='both': a column fed by several files becomes one dated
    column per file. Ordered devices first, then compile-only, each by target, device name,
    newest first."""
    by_key: dict[tuple, list] = {}
    for entry in entries:
        by_key.setdefault(entry["key"][:2], []).append(entry)
    columns = []
    for key, ents in by_key.items():
        name, srcs = _column_name(key), _column_sources(ents)
        if keep == "both" and len(srcs) > 1:
            used = set()
            for n, src in enumerate(srcs, start=1):
                dated = f"{name} @{src['env']['date']}"
                dated = dated if dated not in used else f"{dated} ({n})"     # two files with one date
                used.add(dated)
                columns.append((dated, key, [e for e in ents if e["source"] is src], src["date"]))
            notes.append(f"{name}: {len(srcs)} files, each shown in its own column marked with its date "
                         f"({'; '.join(src['label'] for src in srcs)})")
            continue
        columns.append((name, key, ents, srcs[0]["date"]))
        _note_dropped(name, ents, notes)
    rank = {t: i for i, t in enumerate(TARGET_COLUMNS)}
    columns.sort(key=lambda c: (c[1][0] == "compile-only", rank.get(c[1][1], 99), c[1][0], -c[3].timestamp()))
    return columns


def _note_dropped(name: str, entries: list, notes: list) -> None:
    """One note per (older file, newer file) pair whose rows met in this column: how many of the
    older file's rows lost, and how its software differed."""
    lost: dict[tuple[int, int], list] = {}
    had: dict[int, int] = {}
    for entry in entries:
        had[id(entry["source"])] = had.get(id(entry["source"]), 0) + 1
        for old in entry["older"]:
            had[id(old)] = had.get(id(old), 0) + 1
            lost.setdefault((id(old), id(entry["source"])), [old, entry["source"], 0])[2] += 1
    for old, new, n in lost.values():
        what = (f"dropped {old['label']}" if n == had[id(old)] else
                f"dropped {n} of the {had[id(old)]} rows of {old['label']}")
        notes.append(f"{name}: {what} (date {old['env']['date']}): {new['label']} (date {new['env']['date']}) "
                     f"is newer and has the same rows; {_software_diff(old['env'], new['env'])}")


def _used_sources(columns: list, cells: dict) -> list[dict]:
    """The files that fill at least one cell, in column order, newest first within a column."""
    shown = {id(cell["_src"]) for by_key in cells.values() for cell in by_key.values()}
    used = []
    for _, _, ents, _ in columns:
        for src in _column_sources(ents):
            if id(src) in shown and all(src is not u for u in used):
                used.append(src)
    return used


def _note_sources(columns: list, used: list, number: dict, notes: list) -> None:
    """A column whose cells come from several files says so (each cell's [n] names its file), and
    files from different portable commits are listed by commit."""
    for name, _, ents, _ in columns:
        srcs = [s for s in _column_sources(ents) if id(s) in number]
        if len(srcs) > 1:
            newest = srcs[0]
            diffs = "; ".join(f"[{number[id(s)]}] -> [{number[id(newest)]}]: {_software_diff(s['env'], newest['env'])}"
                              for s in srcs[1:])
            notes.append(f"{name}: cells from {len(srcs)} files, each row from the newest file that has it "
                         f"(a cell's [n] names its file); {diffs}")
    commits: dict[str, list] = {}
    for src in used:
        commits.setdefault(src["env"]["git_commit"], []).append(f"[{number[id(src)]}] {src['label']}")
    if len(commits) > 1:
        notes.append("cells come from different portable commits: " +
                     "; ".join(f"{commit} ({', '.join(files)})" for commit, files in commits.items()))


def _collect_cells(columns: list, notes: list) -> tuple[list, dict]:
    """Row keys (kernel, shape, params labels) in bench order, a kernel's rows together, and
    column name -> row key -> cell."""
    order: list[tuple[str, str, str]] = []
    cells: dict[str, dict[tuple, dict]] = {}
    for name, _, ents, _ in columns:
        for entry in ents:
            group, src = entry["rows"], entry["source"]
            row_key = (group[0]["kernel"], label(group[0]["shape"]) or ANY_SHAPE, label(group[0]["params"]))
            if row_key in cells.get(name, {}):
                continue              # the same shape and params spelt in another key order: newest kept
            if len(group) > 1:
                notes.append(f"{name}: {' '.join(filter(None, row_key))}: {len(group)} rows in one file; "
                             f"the fastest ok one is shown")
            # '_src' (not a field: the frame never shows it) tells files with one label apart
            cell = {**_cell(_pick(group), src["env"]), "source": src["label"], "_src": src}
            cells.setdefault(name, {})[row_key] = cell
            if row_key not in order:
                order.append(row_key)
    _spread_any_shape(cells, order)
    kernels = list(dict.fromkeys(key[0] for key in order))
    order.sort(key=lambda key: kernels.index(key[0]))
    for name, by_key in cells.items():
        for row_key, cell in by_key.items():
            pct = cell["pct_of_roofline"]
            if pct is not None and pct > ABOVE_ROOF_PCT:
                notes.append(f"{name}: {' '.join(filter(None, row_key))} reaches {pct:.0f}% of its roofline bound: "
                             f"the cost model undercounts, a ceiling is too low, or a cache serves the data")
    return order, cells


def _spread_any_shape(cells: dict, order: list) -> None:
    """A compile-only row without a shape holds for every shape of its kernel and params that
    another column measured; it stays a row of its own only when there is no such shape."""
    for kernel, _, params in [key for key in order if key[1] == ANY_SHAPE]:
        shaped = [key for key in order if key[0] == kernel and key[2] == params and key[1] != ANY_SHAPE]
        if not shaped:
            continue
        for column_cells in cells.values():
            cell = column_cells.pop((kernel, ANY_SHAPE, params), None)
            if cell:
                for key in shaped:
                    column_cells.setdefault(key, cell)
        order.remove((kernel, ANY_SHAPE, params))


# --- output ----------------------------------------------------------------------------------
def _rate(value: float) -> str:
    if value >= 100:
        return f"{value:.0f}"
    return f"{value:.3g}" if value >= 1 else f"{value:.2g}"


def _time(us: float) -> str:
    return f"{us:.0f} us" if us >= 100 else f"{us:.1f} us" if us >= 10 else f"{us:.2f} us"


def _present(value) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def cell_text(cell: dict) -> str:
    """One cell as the Markdown and HTML tables show it."""
    status = cell.get("status")
    if not _present(status):
        return ""
    if status in ("failed", "mismatch"):
        first = (cell.get("error") or "").strip().splitlines()
        return f"{status.upper()}: {first[0][:80] if first else 'no error text'}"
    if status == "compile-only":
        return ", ".join(p for p in ("compiled", cell.get("static")) if p)
    parts = [_time(cell["median_us"])]
    if _present(cell.get("achieved")):
        rate = f"{_rate(cell['achieved'])} {cell['unit']}"
        if _present(cell.get("pct_of_roofline")):
            rate += f" ({cell['pct_of_roofline']:.0f}%)"
        parts.append(rate)
    if _present(cell.get("vs_best_peer")):
        parts.append(f"{cell['vs_best_peer']:.2f}x {cell['best_peer']}")
    return ", ".join(parts)


def text_table(frame: pd.DataFrame, marks: bool = True) -> pd.DataFrame:
    """The frame with one text cell per column (what Markdown and HTML show); with marks, each
    cell ends in [n], the number of its file in the sources list."""
    names = list(dict.fromkeys(frame.columns.get_level_values("column")))
    number: dict[str, int] = {}
    for n, src in enumerate(frame.attrs.get("sources", []), start=1):
        number.setdefault(src["file"], n)
    rows = []
    for values in frame.itertuples(index=False, name=None):
        per_column: dict[str, dict] = {}
        for (name, field), value in zip(frame.columns, values):
            per_column.setdefault(name, {})[field] = value
        row = []
        for name in names:
            text, source = cell_text(per_column[name]), per_column[name].get("source")
            if marks and text and _present(source) and source in number:
                text += f" [{number[source]}]"
            row.append(text)
        rows.append(row)
    return pd.DataFrame(rows, index=frame.index, columns=names, dtype=object)


def _source_lines(frame: pd.DataFrame) -> list[str]:
    """One line per source file, numbered as the cells' [n]: the columns it fills and how many
    cells, its date, commit and software."""
    lines = []
    for n, info in enumerate(frame.attrs.get("sources", []), start=1):
        v = info["versions"]
        software = ", ".join(f"{k} {v[k]}" for k in ("torch", "compiler", "nvrtc", "hiprtc", "cuda-bindings", "hip-python")
                             if v.get(k))
        lines.append(f"[{n}] {info['file']}: {', '.join(info['columns'])} ({info['cells']} cells); "
                     f"date {info['date']}; commit {info['git_commit']}; driver {info['driver'] or '-'}; {software}")
    return lines


def to_markdown(frame: pd.DataFrame) -> str:
    table = text_table(frame)
    header = [*INDEX, *table.columns]
    esc = lambda s: str(s).replace("|", "\\|") or "-"           # noqa: E731 - a pipe would split the cell
    lines = ["| " + " | ".join(map(esc, header)) + " |", "|" + "---|" * len(header)]
    for row_key, row in table.iterrows():
        lines.append("| " + " | ".join(esc(v) for v in (*row_key, *row.tolist())) + " |")
    lines += ["", "Notes:", *[f"- {n}" for n in frame.attrs.get("notes", [])],
              "", "Sources (a cell's [n]):", *[f"- {s}" for s in _source_lines(frame)]]
    return "\n".join(lines) + "\n"


def to_csv(frame: pd.DataFrame) -> str:
    """Every field as its own column ('column | field'; 'column | source' names each cell's
    file); notes and the numbered sources as leading '# ' lines, so read it back with
    pandas.read_csv(path, comment='#'). Strings are quoted so a '#' inside a cell is safe."""
    flat = frame.copy()
    flat.columns = [f"{c} | {f}" for c, f in frame.columns]
    buf = io.StringIO()
    for line in frame.attrs.get("notes", []) + [f"source {s}" for s in _source_lines(frame)]:
        buf.write(f"# {line}\n")
    flat.reset_index().to_csv(buf, index=False, quoting=csv.QUOTE_NONNUMERIC)
    return buf.getvalue()


def to_html(frame: pd.DataFrame, standalone: bool = True) -> str:
    body = text_table(frame).to_html(escape=True, na_rep="")
    body += "<h3>Notes</h3><ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in frame.attrs.get("notes", [])) + "</ul>"
    body += ("<h3>Sources (a cell's [n])</h3><ul>" +
             "".join(f"<li>{html.escape(s)}</li>" for s in _source_lines(frame)) + "</ul>")
    if not standalone:
        return body
    return ("<!doctype html><html><head><meta charset='utf-8'><title>portable matrix</title>"
            f"<style>{TABLE_CSS}</style></head><body><h1>portable matrix</h1>{body}</body></html>\n")


TABLE_CSS = ("body{font-family:sans-serif;margin:2em} table{border-collapse:collapse;font-size:0.9em}"
             "td,th{border:1px solid #bbb;padding:3px 8px;text-align:left;vertical-align:top}"
             "th{background:#eee}")
FORMATS = {"md": to_markdown, "csv": to_csv, "html": to_html}


def render(frame: pd.DataFrame, fmt: str) -> str:
    if fmt not in FORMATS:
        raise ValueError(f"format: expected one of {', '.join(FORMATS)}, got {fmt!r}")
    return FORMATS[fmt](frame)


def select(frame: pd.DataFrame, columns: str | None = None, rows: str | None = None) -> pd.DataFrame:
    """The rows whose 'kernel shape params' matches the regular expression `rows`, and the
    columns whose name contains `columns` (a short table for a page, from the same files)."""
    if rows:
        pattern = re.compile(rows)
        keep = [pattern.search(" ".join(map(str, key))) is not None for key in frame.index]
        frame = frame[keep]
    if columns:
        names = [c for c in dict.fromkeys(frame.columns.get_level_values("column")) if columns in c]
        frame = frame[[c for c in frame.columns if c[0] in names]]
    return frame


# --- command line ----------------------------------------------------------------------------
def _cmd(args) -> int:
    fmt = args.format or (Path(args.out).suffix.lstrip(".").replace("markdown", "md") if args.out else "md")
    try:
        frame = merge(args.results, keep=args.keep)
        attrs = dict(frame.attrs)
        frame = select(frame, args.columns, args.rows)
        frame.attrs.update(attrs)
        text = render(frame, fmt)
    except ValueError as e:          # a bad file or format: one line naming it, not a traceback
        raise SystemExit(f"portable matrix: {e}") from None
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
        print(f"wrote {args.out}")
    else:
        print(text, end="")
    return 0


def add_cli(subparsers) -> None:
    p = subparsers.add_parser("matrix", help="merge result files from several machines into one table")
    p.add_argument("results", nargs="+", metavar="RESULTS", help="result files written by `portable bench`")
    p.add_argument("--format", choices=list(FORMATS), help="md (default), csv or html; taken from --out's suffix when omitted")
    p.add_argument("--out", metavar="FILE", help="write here instead of printing")
    p.add_argument("--keep", choices=KEEP_POLICIES, default="latest",
                   help="the same row (kernel, shape, params, device/target) in two files: the newest "
                        "file's row (default), or both: each file of a device/target in its own dated column")
    p.add_argument("--rows", metavar="REGEX", help="only the rows whose 'kernel shape params' matches REGEX")
    p.add_argument("--columns", metavar="TEXT", help="only the columns whose name contains TEXT (e.g. H100)")
    p.set_defaults(func=_cmd)
