"""`portable roofline`: a roofline picture per device and an HTML report with the tables.

x = arithmetic intensity (FLOP per byte of the cost model's minimum traffic), y = achieved
TFLOP/s, both log scale. Roofs: dashed = the datasheet (mapping/devices.toml, copied into the
result file), solid = ceilings measured on that device in that run. One numbered marker per
timed row; the legend under the plot names each number.
"""
from __future__ import annotations

import base64
import html
import io
import math
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from .devices import PEAK_FORMATS, number
from .errors import ToolchainMissing
from .results import label, load, roofline_position, validate

ROOF_COLORS = {"memory": "#333333", "fp32": "#2ca02c", "bf16": "#1f77b4", "fp8": "#9467bd", "fp4": "#d62728"}
POINT_COLORS = ("#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f")
POINT_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
STYLES = {"datasheet": "--", "measured": "-"}
FORMATS = ("png", "svg")
ABOVE_ROOF_PCT = 105        # beyond timing noise: the cost model undercounts, or a ceiling is too low


@dataclass
class RooflinePlot:
    path: object                                  # where it was written (a path or a file object)
    points: list = field(default_factory=list)    # one Line2D per timed row, in row order
    roofs: list = field(default_factory=list)     # one Line2D per roof drawn
    skipped: list = field(default_factory=list)   # 'kernel shape: why' for rows not plotted


def _roofs(env: dict) -> dict[str, dict]:
    """{'datasheet': {'memory': TB/s, 'bf16': TFLOP/s, ...}, 'measured': {...}} (absent: not known)."""
    sheet = env["ceilings"].get("datasheet")
    datasheet = {"memory": number(sheet, "memory_tbps"),
                 **{p: number(sheet, f"{p}_tflops") for p in PEAK_FORMATS}}
    m = env["ceilings"].get("measured", {})
    measured = {"memory": m.get("copy_tbps", {}).get("value"),
                **{p: m.get(f"{p}_tflops", {}).get("value") for p in PEAK_FORMATS}}
    return {origin: {k: v for k, v in roofs.items() if v} for origin, roofs in
            (("datasheet", datasheet), ("measured", measured))}


def _timed_rows(result: dict) -> tuple[list[dict], list[str]]:
    rows, skipped = [], []
    for row in result["rows"]:
        if row["status"] != "ok" or not row.get("median_us"):
            continue
        if not row.get("flops") or not row.get("bytes"):
            name = " ".join(filter(None, (row["kernel"], label(row["shape"]))))
            skipped.append(f"{name}: flops or bytes is 0 (no place on a log axis)")
            continue
        rows.append(row)
    return rows, skipped


def _fmt(value: float) -> str:
    """10,066 / 989.5 / 3.35: thousands separated, never exponent notation."""
    return f"{value:,.0f}" if value >= 1000 else f"{value:.4g}"


def _spread(values: list[float], gap: float) -> list[float]:
    """Move sorted display positions apart by at least `gap`, keeping their order and centre."""
    order = sorted(range(len(values)), key=values.__getitem__)
    placed = [values[i] for i in order]
    for _ in range(50):
        moved = False
        for k in range(1, len(placed)):
            overlap = gap - (placed[k] - placed[k - 1])
            if overlap > 0:
                placed[k - 1] -= overlap / 2
                placed[k] += overlap / 2
                moved = True
        if not moved:
            break
    out = [0.0] * len(values)
    for k, i in enumerate(order):
        out[i] = placed[k]
    return out


def _new_figure():
    """A figure on the Agg canvas, made without pyplot: files only, no display needed, and no
    global backend switch in a caller's process (a notebook keeps its own backend)."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ModuleNotFoundError:
        raise ToolchainMissing("roofline: matplotlib is not installed; expected it for plots "
                               "(pip install matplotlib)") from None
    fig = Figure(figsize=(9, 6), dpi=120)
    FigureCanvasAgg(fig)
    return fig


def _draw(result: dict, title: str | None = None):
    env = result["environment"]
    if env["mode"] != "gpu":
        raise ValueError("result: a compile-only file has no times to plot (environment.mode is "
                         "'compile-only'); pass a result file measured on a GPU")
    rows, skipped = _timed_rows(result)
    roofs = _roofs(env)
    xs = [r["flops"] / r["bytes"] for r in rows]
    ys = [r["flops"] / r["median_us"] / 1e6 for r in rows]

    # Ridge points: where each compute roof meets the memory roof of the same origin (the
    # datasheet's memory roof stands in when the bandwidth was not measured).
    ridges = {}
    for origin, r in roofs.items():
        bw = r.get("memory") or roofs["datasheet"].get("memory")
        for p in PEAK_FORMATS:
            if p in r and bw:
                ridges[(origin, p)] = r[p] / bw
    peaks = [r[p] for r in roofs.values() for p in PEAK_FORMATS if p in r]
    x_all = xs + list(ridges.values()) or [1.0]
    xmin = 10 ** math.floor(math.log10(min(x_all)) - 0.5)
    xmax = 10 ** math.ceil(math.log10(max(x_all)) + 0.5)
    bws = [r["memory"] for r in roofs.values() if "memory" in r]
    y_low = ys + [bw * xmin for bw in bws]
    y_high = ys + peaks
    ymin = 10 ** math.floor(math.log10(min(y_low or [1e-3])))
    ymax = 10 ** (math.log10(max(y_high or [1.0])) + 0.4)

    fig = _new_figure()
    ax = fig.subplots()
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(xmin, xmax)
    ax.set_ylim(ymin, ymax)
    ax.grid(True, which="major", color="#dddddd", linewidth=0.6)
    ax.set_xlabel("arithmetic intensity (FLOP / byte of minimum traffic)")
    ax.set_ylabel("achieved TFLOP/s")
    date = env["date"][:10]
    key = ", ".join([
        "dashed: datasheet roofs" if roofs["datasheet"] else "no datasheet entry for this device (mapping/devices.toml)",
        "solid: measured in this run" if roofs["measured"] else "no ceilings measured in this run"])
    ax.set_title(title or f"{env['device']} ({env['target']}), {date}, commit {env['git_commit'][:10]}\n{key}",
                 fontsize=10)

    # Roofs: the memory diagonal up to the highest ridge, each compute roof from its ridge on.
    roof_lines, right_labels = [], []
    for origin, r in roofs.items():
        style = STYLES[origin]
        bw = r.get("memory") or roofs["datasheet"].get("memory")
        if "memory" in r:
            top = max([ridges[(origin, p)] for p in PEAK_FORMATS if (origin, p) in ridges] or [xmax])
            line, = ax.plot([xmin, top], [r["memory"] * xmin, r["memory"] * top], style,
                            color=ROOF_COLORS["memory"], linewidth=1.4)
            roof_lines.append(line)
            _diagonal_label(ax, r["memory"], _free_spot(ax, r["memory"], xmin, min(ridges.values(), default=xmax),
                                                                list(zip(xs, ys))),
                            f"memory {_fmt(r['memory'])} TB/s ({origin})", above=origin == "datasheet")
        for p in PEAK_FORMATS:
            if p not in r:
                continue
            start = r[p] / bw if bw else xmin
            line, = ax.plot([start, xmax], [r[p], r[p]], style, color=ROOF_COLORS[p], linewidth=1.4)
            roof_lines.append(line)
            right_labels.append((r[p], f"{p} {_fmt(r[p])} TFLOP/s ({origin})", ROOF_COLORS[p]))
    _right_labels(fig, ax, right_labels)

    # One marker per timed row, numbered; the legend names the numbers.
    kernels = list(dict.fromkeys(r["kernel"] for r in rows))
    points, taken = [], []
    markers = [ax.transData.transform(p) for p in zip(xs, ys)]
    for i, (row, x, y) in enumerate(zip(rows, xs, ys), start=1):
        pos = roofline_position(row, env)
        rate = f"{pos['tbps']:.3g} TB/s" if pos["bound"] == "memory" else f"{pos['tflops']:.3g} TFLOP/s"
        pct = f", {pos['pct_of_roofline']:.0f}% of roof" if pos["pct_of_roofline"] else ""
        if pos["pct_of_roofline"] and pos["pct_of_roofline"] > ABOVE_ROOF_PCT:
            pct += " (above the roof: check the cost model or the ceilings)"
        params = label(row["params"])
        text = f"{i}: {row['kernel']} {label(row['shape'])}" + (f" [{params}]" if params else "") + \
            f": {row['median_us']:.4g} us, {rate}{pct}"
        k = kernels.index(row["kernel"])
        point, = ax.plot([x], [y], linestyle="none", marker=POINT_MARKERS[(i - 1) % len(POINT_MARKERS)],
                         markersize=7, color=POINT_COLORS[k % len(POINT_COLORS)], markeredgecolor="black",
                         markeredgewidth=0.6, label=text, zorder=5)
        points.append(point)
        ax.annotate(str(i), (x, y), textcoords="offset points", xytext=_number_offset(ax, x, y, taken, markers),
                    fontsize=8, fontweight="bold", zorder=6)
    if points:
        ax.legend(handles=points, loc="upper left", bbox_to_anchor=(0.0, -0.12), fontsize=8, frameon=False,
                  ncol=1, handletextpad=0.4)
    else:
        ax.text(0.5, 0.5, "no timed rows", transform=ax.transAxes, ha="center", color="#999999")
    return fig, points, roof_lines, skipped


def _free_spot(ax, bw: float, start: float, stop: float, points: list) -> float:
    """Where along the memory roof (x from start to stop) a label sits farthest from the points:
    the label covers about a decade to the right of the returned x."""
    lo, hi = math.log10(start) + 0.2, math.log10(stop) - 1.3
    if hi <= lo:
        return start * 1.5
    shown = [ax.transData.transform(p) for p in points]
    best, best_gap = lo, -1.0
    for k in range(13):
        x = 10 ** (lo + (hi - lo) * k / 12)
        span = [ax.transData.transform((x * 10 ** (j / 4), bw * x * 10 ** (j / 4))) for j in range(5)]
        gap = min((math.dist(a, b) for a in span for b in shown), default=1e9)
        if gap > best_gap + 1:              # ties go to the leftmost spot
            best, best_gap = x, gap
    return best


def _diagonal_label(ax, bw: float, x0: float, text: str, above: bool) -> None:
    """Text along the memory roof from x0, rotated to its slope on screen."""
    (ax_, ay), (bx, by) = ax.transData.transform([(x0, bw * x0), (x0 * 10, bw * x0 * 10)])
    angle = math.degrees(math.atan2(by - ay, bx - ax_))
    ax.annotate(text, (x0, bw * x0), xytext=(0, 4 if above else -4), textcoords="offset points",
                rotation=angle, rotation_mode="anchor", va="bottom" if above else "top", fontsize=8,
                color=ROOF_COLORS["memory"], transform_rotates_text=False)


def _right_labels(fig, ax, labels: list) -> None:
    """Compute-roof labels in the right margin at their line's height, spread so none overlap
    (bf16 measured and datasheet roofs are often closer than a line of text)."""
    if not labels:
        return
    to_axes = ax.transAxes.inverted()
    heights = [to_axes.transform(ax.transData.transform((1.0, y)))[1] for y, _, _ in labels]   # axes fraction
    text_height = 11 / 72 * fig.dpi / ax.get_window_extent().height                          # 11 pt, as a fraction
    for (_, text, color), at, placed in zip(labels, heights, _spread(heights, gap=text_height)):
        ax.annotate(text, xy=(1.0, at), xycoords="axes fraction", xytext=(1.02, placed), textcoords="axes fraction",
                    va="center", fontsize=8, color=color, annotation_clip=False,
                    arrowprops={"arrowstyle": "-", "color": color, "linewidth": 0.5})


def _number_offset(ax, x: float, y: float, taken: list, markers: list) -> tuple[int, int]:
    """An offset (points) for a point's number: clear of other markers and numbers, and plainly
    nearer its own marker than any other, so it cannot read as another point's number. Below-right
    first: points sit on or under the roofs, which rise to the right. In a crowd where no spot
    qualifies, the least ambiguous spot wins."""
    px, py = ax.transData.transform((x, y))
    scale = ax.figure.dpi / 72
    others = [m for m in markers if math.dist(m, (px, py)) > 0.5]
    best, best_score = (5, 5), -math.inf
    for radius in (7, 13, 19):
        for dx, dy in ((1, -1), (1, 0), (0, -1), (-1, -1), (1, 1), (-1, 0), (-1, 1), (0, 1)):
            ox, oy = dx * radius - (6 if dx < 0 else 0), dy * radius - (8 if dy < 0 else 0)
            centre = (px + (ox + 3) * scale, py + (oy + 4) * scale)       # centre of a one-digit label
            own = math.dist(centre, (px, py))
            nearest_marker = min((math.dist(centre, m) for m in others), default=math.inf)
            nearest_number = min((math.dist(centre, t) for t in taken), default=math.inf)
            if nearest_marker > max(9 * scale, 1.4 * own) and nearest_number > 10 * scale:
                taken.append(centre)
                return ox, oy
            score = min(nearest_marker / own, nearest_number / (10 * scale))
            if score > best_score:
                best, best_score, best_centre = (ox, oy), score, centre
    taken.append(best_centre)
    return best


def plot(result, path, title: str | None = None) -> RooflinePlot:
    """Write the roofline of one GPU result file (dict or path) to `path` (.png or .svg, or a
    file object with fmt taken as png). Returns the markers drawn, one per timed row."""
    if isinstance(result, (str, Path)):
        result = load(result)
    else:
        validate(result)
    fmt = "png"
    if isinstance(path, (str, Path)):
        fmt = Path(path).suffix.lstrip(".").lower()
        if fmt not in FORMATS:
            raise ValueError(f"path: expected a .png or .svg file name, got {str(path)!r}")
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig, points, roofs, skipped = _draw(result, title)
    fig.savefig(path, format=fmt, bbox_inches="tight")
    return RooflinePlot(path=path, points=points, roofs=roofs, skipped=skipped)


# --- HTML report -----------------------------------------------------------------------------
def _table(headers: list[str], rows: list[list]) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape('' if c is None else str(c))}</td>" for c in r) + "</tr>"
                   for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _ceilings_table(env: dict) -> str:
    """Datasheet and measured ceilings side by side, each with where it comes from."""
    sheet = env["ceilings"].get("datasheet") or {}
    measured = env["ceilings"].get("measured", {})
    rows = []
    for kind, sheet_field, measured_field, unit in [("memory", "memory_tbps", "copy_tbps", "TB/s")] + \
            [(p, f"{p}_tflops", f"{p}_tflops", "TFLOP/s") for p in PEAK_FORMATS]:
        s, m = sheet.get(sheet_field), measured.get(measured_field)
        if not s and not m:
            continue
        ratio = f"{m['value'] / s['value']:.0%}" if s and m else ""
        rows.append([kind, f"{s['value']} {unit}" if s else "-", (s or {}).get("source", ""),
                     f"{m['value']:.4g} {unit}" if m else "-", (m or {}).get("how", ""), ratio])
    if not rows:
        return "<p>No ceilings: the device is not in mapping/devices.toml and nothing was measured.</p>"
    return _table(["ceiling", "datasheet", "source", "measured", "how measured", "measured / datasheet"], rows)


def _rows_table(result: dict) -> str:
    env = result["environment"]
    out = []
    for row in result["rows"]:
        pos = roofline_position(row, env)
        peers = ", ".join(f"{n} {p['median_us']:.4g} us" for n, p in row["peers"].items() if p.get("median_us"))
        out.append([row["kernel"], label(row["shape"]), row["shape_set"], label(row["params"]), row["target"],
                    row["status"], f"{row['median_us']:.4g}" if row["median_us"] else "",
                    f"{pos['tbps']:.3g}" if pos else "", f"{pos['tflops']:.3g}" if pos else "",
                    f"{pos['pct_of_roofline']:.0f}%" if pos and pos["pct_of_roofline"] else "",
                    peers, len(row["times_us"]), (row["error"] or "").splitlines()[0][:120] if row["error"] else ""])
    return _table(["kernel", "shape", "shape set", "params", "target", "status", "median us", "TB/s", "TFLOP/s",
                   "% of roof", "peers", "times", "error"], out)


def _environment_table(env: dict) -> str:
    rows = [["device", env["device"] or "(compile-only)"], ["target", env["target"] or "-"],
            ["driver", env["driver"] or "-"], ["git commit", env["git_commit"]], ["date", env["date"]]]
    rows += [[k, v] for k, v in env["versions"].items() if v]
    return _table(["field", "value"], rows)


def html_report(results, path) -> Path:
    """One HTML file: per GPU file its roofline (inline PNG), ceilings, environment and rows;
    then the matrix of all files, merged per row, with its notes and sources. `results`: paths,
    result dicts, or (label, result dict) pairs."""
    from . import matrix
    results = [results] if isinstance(results, (str, Path, dict)) else list(results)
    # (label, result) pairs, so that the matrix's sources name the files (each loaded once)
    loaded = [(str(r), load(r)) if isinstance(r, (str, Path)) else
              (r[0], validate(r[1])) if isinstance(r, tuple) else (None, validate(r)) for r in results]
    parts = ["<h1>portable roofline report</h1>"]
    for _, result in loaded:
        env = result["environment"]
        heading = f"{env['device']} / {env['target']}" if env["mode"] == "gpu" else "compile-only"
        parts.append(f"<h2>{html.escape(heading)} <small>{html.escape(env['date'])}</small></h2>")
        if env["mode"] == "gpu":
            buf = io.BytesIO()
            plot(result, buf)
            png = base64.b64encode(buf.getvalue()).decode()
            parts.append(f"<img alt='roofline {html.escape(heading)}' src='data:image/png;base64,{png}'>")
            parts.append("<h3>Ceilings</h3>" + _ceilings_table(env))
        parts.append("<h3>Environment</h3>" + _environment_table(env))
        parts.append("<h3>Rows</h3>" + _rows_table(result))
    parts.append("<h2>Matrix (all files)</h2>" + matrix.to_html(matrix.merge(loaded), standalone=False))
    page = ("<!doctype html><html><head><meta charset='utf-8'><title>portable roofline report</title>"
            f"<style>{matrix.TABLE_CSS} img{{max-width:100%}}</style></head><body>{''.join(parts)}</body></html>\n")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page)
    return path


# --- command line ----------------------------------------------------------------------------
def _slug(env: dict) -> str:
    return re.sub(r"[^a-z0-9]+", "-", f"{env['device']}-{env['target']}".lower()).strip("-")


def _cmd(args) -> int:
    try:
        loaded = [load(p) for p in args.results]
    except ValueError as e:
        raise SystemExit(f"portable roofline: {e}") from None
    out = Path(args.out) if args.out else Path(args.results[0]).parent
    # Two runs of one device: the earliest keeps the plain name, later ones add their date, by
    # date rather than argument order, so adding a run never renames another run's picture.
    slugs, used = {}, set()
    for i in sorted(range(len(loaded)), key=lambda i: (datetime.fromisoformat(loaded[i]["environment"]["date"]), i)):
        env = loaded[i]["environment"]
        if env["mode"] == "gpu":
            slug = base = _slug(env)
            if slug in used:
                slug = base = f"{base}-{re.sub(r'[^0-9]+', '', env['date'])[:14]}"
            n = 2
            while slug in used:                  # two runs with one date
                slug, n = f"{base}-{n}", n + 1
            used.add(slug)
            slugs[i] = slug
    for i, (path, result) in enumerate(zip(args.results, loaded)):
        if i not in slugs:
            print(f"{path}: compile-only, no times to plot (it joins the report's matrix)")
            continue
        drawn = plot(result, out / f"{slugs[i]}.{args.format}")
        print(f"wrote {drawn.path} ({len(drawn.points)} points)")
        for why in drawn.skipped:
            print(f"  not plotted: {why}")
    report = html_report(list(zip(args.results, loaded)), out / "roofline.html")
    print(f"wrote {report}")
    return 0


def add_cli(subparsers) -> None:
    p = subparsers.add_parser("roofline", help="roofline plots per device and an HTML report from result files")
    p.add_argument("results", nargs="+", metavar="RESULTS", help="result files written by `portable bench`")
    p.add_argument("--out", metavar="DIR", help="folder for the pictures and roofline.html (default: beside the first file)")
    p.add_argument("--format", choices=FORMATS, default="png", help="picture format (default png)")
    p.set_defaults(func=_cmd)
