"""`portable matrix`: result files from several machines merged into one table.

Rows are kernel x shape x params (params apart: a bf16 and an fp32 variant of one shape are
different work), columns are device / target (a compile-only file gives one column per
target it compiled for). Each cell holds the median time, the achieved TB/s or TFLOP/s (the
one that bounds the kernel), the percentage of the roofline bound, and the ratio to the best
peer measured on that device in the same run.

Two files that would fill the same column (two runs on one device, or two compile-only runs
for one target) are never mixed silently: the latest by date wins and a note names the file
dropped and how its software differed, or, with keep="both", each gets its own column marked
with its date. Notes travel in DataFrame.attrs["notes"] and every output format prints them.
"""
from __future__ import annotations

import csv
import datetime as _dt
import html
import io
import math
from pathlib import Path

import pandas as pd

from .data import TARGET_COLUMNS
from .results import label, load, roofline_position, validate

INDEX = ["kernel", "shape", "params"]
CELL_FIELDS = ("status", "median_us", "achieved", "unit", "pct_of_roofline", "ceilings", "vs_best_peer",
               "best_peer", "static", "error")
KEEP_POLICIES = ("latest", "both")
ABOVE_ROOF_PCT = 105         # beyond timing noise: worth a note
ANY_SHAPE = "(any shape)"     # compile-only rows without a shape: the static report holds for every shape
# Instruction classes worth naming in a cell: vector width and the matrix path taken.
_NAMED_INSTRUCTIONS = ("global_load_128", "global_store_128", "hmma", "hgmma", "tcgen05", "block_scaled_mma",
                       "mfma", "mfma_scale")
_SHORT = {"global_load_128": "ld128", "global_store_128": "st128"}
CELL_LEGEND = ("cell: median time, achieved TB/s or TFLOP/s (whichever bounds the kernel) with % of the "
               "roofline bound, then best peer time / our time (above 1: ours is faster)")


# --- inputs ----------------------------------------------------------------------------------
def _sources(results) -> list[dict]:
    """Each input as {label, result, env, date}; paths are loaded, dicts validated."""
    if isinstance(results, (str, Path, dict)):
        results = [results]
    out = []
    for i, item in enumerate(results):
        if isinstance(item, (str, Path)):
            result, name = load(item), str(item)
        elif isinstance(item, dict):
            try:
                result = validate(item)
            except ValueError as e:
                raise ValueError(f"results[{i}]: {e}") from None
            env = result["environment"]
            name = f"results[{i}] ({env['device'] or 'compile-only'}, {env['date']})"
        else:
            raise ValueError(f"results[{i}]: expected a result dict or a file path, got {type(item).__name__}")
        env = result["environment"]
        out.append({"label": name, "result": result, "env": env, "order": i,
                    "date": _dt.datetime.fromisoformat(env["date"])})
    return out


def _column_key(env: dict, row: dict) -> tuple[str, str]:
    if env["mode"] == "compile-only" or row["status"] == "compile-only":
        return ("compile-only", row["target"])
    return (env["device"], row["target"])


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
    """One table from result files (paths or dicts). Index (kernel, shape, params); columns
    (column, field) with column 'device / target' and field one of CELL_FIELDS.
    attrs['notes']: what was dropped, chosen or differs; attrs['columns']: each column's file,
    date, commit and software."""
    if keep not in KEEP_POLICIES:
        raise ValueError(f"keep: expected one of {', '.join(KEEP_POLICIES)}, got {keep!r}")
    sources = _sources(results)
    if not sources:
        raise ValueError("results: expected at least one result file, got none")
    notes = [CELL_LEGEND]
    columns = _assign_columns(sources, keep, notes)
    order, cells = _collect_cells(columns, notes)

    names = [c[0] for c in columns]
    index = pd.MultiIndex.from_tuples(order, names=INDEX) if order else pd.MultiIndex.from_arrays([[]] * 3, names=INDEX)
    data = [[cells.get(name, {}).get(key, {}).get(field) for name in names for field in CELL_FIELDS] for key in order]
    frame = pd.DataFrame(data, index=index, dtype=object,
                         columns=pd.MultiIndex.from_product([names, CELL_FIELDS], names=["column", "field"]))
    commits: dict[str, list] = {}
    for name, _, src, _ in columns:
        commits.setdefault(src["env"]["git_commit"], []).append(name)
    if len(commits) > 1:
        notes.append("columns come from different portable commits: " +
                     "; ".join(f"{commit} ({', '.join(cols)})" for commit, cols in commits.items()))
    frame.attrs["notes"] = notes
    frame.attrs["columns"] = {name: {"file": src["label"], "date": src["env"]["date"],
                                     "git_commit": src["env"]["git_commit"], "driver": src["env"]["driver"],
                                     "versions": src["env"]["versions"]} for name, _, src, _ in columns}
    return frame


def _assign_columns(sources: list, keep: str, notes: list) -> list[tuple[str, tuple, dict, list]]:
    """(name, key, source, rows) per column: one file per column, or with keep='both' each file
    in its own dated column; never two files in one column. Ordered devices first, then
    compile-only, each by target, device name, newest first."""
    wanted: dict[tuple, dict[int, list]] = {}
    for i, src in enumerate(sources):
        for row in src["result"]["rows"]:
            wanted.setdefault(_column_key(src["env"], row), {}).setdefault(i, []).append(row)
    columns = []
    for key, by_source in wanted.items():
        ranked = sorted(by_source, key=lambda i: (sources[i]["date"], sources[i]["order"]), reverse=True)
        name, newest = _column_name(key), sources[ranked[0]]
        if len(ranked) == 1 or keep == "latest":
            columns.append((name, key, newest, by_source[ranked[0]]))
            for i in ranked[1:]:
                old = sources[i]
                notes.append(f"{name}: dropped {old['label']} (date {old['env']['date']}): {newest['label']} "
                             f"(date {newest['env']['date']}) is newer; {_software_diff(old['env'], newest['env'])}")
            continue
        used = set()
        for n, i in enumerate(ranked, start=1):
            dated = f"{name} @{sources[i]['env']['date']}"
            dated = dated if dated not in used else f"{dated} ({n})"     # two files with one date
            used.add(dated)
            columns.append((dated, key, sources[i], by_source[i]))
        notes.append(f"{name}: {len(ranked)} files, each shown in its own column marked with its date "
                     f"({'; '.join(sources[i]['label'] for i in ranked)})")
    rank = {t: i for i, t in enumerate(TARGET_COLUMNS)}
    columns.sort(key=lambda c: (c[1][0] == "compile-only", rank.get(c[1][1], 99), c[1][0], -c[2]["date"].timestamp()))
    return columns


def _collect_cells(columns: list, notes: list) -> tuple[list, dict]:
    """Row keys (kernel, shape, params labels) in bench order, a kernel's rows together, and
    column name -> row key -> cell."""
    order: list[tuple[str, str, str]] = []
    cells: dict[str, dict[tuple, dict]] = {}
    for name, _, src, rows in columns:
        groups: dict[tuple, list] = {}
        for row in rows:
            groups.setdefault((row["kernel"], label(row["shape"]) or ANY_SHAPE, label(row["params"])), []).append(row)
        for row_key, group in groups.items():
            if len(group) > 1:
                notes.append(f"{name}: {' '.join(filter(None, row_key))}: {len(group)} rows in one file; "
                             f"the fastest ok one is shown")
            cells.setdefault(name, {})[row_key] = _cell(_pick(group), src["env"])
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


def text_table(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with one text cell per column (what Markdown and HTML show)."""
    names = list(dict.fromkeys(frame.columns.get_level_values("column")))
    rows = []
    for values in frame.itertuples(index=False, name=None):
        per_column: dict[str, dict] = {}
        for (name, field), value in zip(frame.columns, values):
            per_column.setdefault(name, {})[field] = value
        rows.append([cell_text(per_column[name]) for name in names])
    return pd.DataFrame(rows, index=frame.index, columns=names, dtype=object)


def _source_lines(frame: pd.DataFrame) -> list[str]:
    """One line per source file: the columns it fills, its date, commit and software."""
    by_file: dict[str, list] = {}
    for name, info in frame.attrs.get("columns", {}).items():
        by_file.setdefault(info["file"], [name, info])
        if by_file[info["file"]][0] != name:
            by_file[info["file"]][0] += f", {name}"
    lines = []
    for file, (names, info) in by_file.items():
        v = info["versions"]
        software = ", ".join(f"{k} {v[k]}" for k in ("torch", "compiler", "nvrtc", "hiprtc", "cuda-bindings", "hip-python")
                             if v.get(k))
        lines.append(f"{names}: {file}; date {info['date']}; commit {info['git_commit']}; "
                     f"driver {info['driver'] or '-'}; {software}")
    return lines


def to_markdown(frame: pd.DataFrame) -> str:
    table = text_table(frame)
    header = [*INDEX, *table.columns]
    esc = lambda s: str(s).replace("|", "\\|") or "-"           # noqa: E731 - a pipe would split the cell
    lines = ["| " + " | ".join(map(esc, header)) + " |", "|" + "---|" * len(header)]
    for row_key, row in table.iterrows():
        lines.append("| " + " | ".join(esc(v) for v in (*row_key, *row.tolist())) + " |")
    lines += ["", "Notes:", *[f"- {n}" for n in frame.attrs.get("notes", [])],
              "", "Columns:", *[f"- {s}" for s in _source_lines(frame)]]
    return "\n".join(lines) + "\n"


def to_csv(frame: pd.DataFrame) -> str:
    """Every field as its own column ('column | field'); notes as leading '# ' lines, so read it
    back with pandas.read_csv(path, comment='#'). Strings are quoted so a '#' inside a cell is safe."""
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
    body += "<h3>Columns</h3><ul>" + "".join(f"<li>{html.escape(s)}</li>" for s in _source_lines(frame)) + "</ul>"
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


# --- command line ----------------------------------------------------------------------------
def _cmd(args) -> int:
    fmt = args.format or (Path(args.out).suffix.lstrip(".").replace("markdown", "md") if args.out else "md")
    try:
        text = render(merge(args.results, keep=args.keep), fmt)
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
                   help="two files for one device/target: keep the latest (default) or show both")
    p.set_defaults(func=_cmd)
