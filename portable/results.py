"""The benchmark result file: self-describing JSON that `portable bench` writes and
`portable roofline` / `portable matrix` read. bench/results/SCHEMA.md documents every field
with a complete example; in short:

    {"schema": "portable.results/1",
     "environment": {"mode": "gpu" | "compile-only", "device": "NVIDIA H100 80GB HBM3" | null,
                     "target": "sm_90a" | null, "driver": "...", "versions": {"torch": ..., ...},
                     "git_commit": "...", "date": "2026-11-22T10:00:00+00:00",
                     "ceilings": {"measured": {"copy_tbps": {"value": 2.98, "how": "..."}, ...},
                                  "datasheet": {<mapping/devices.toml entry>} | null}},
     "rows": [{"kernel", "shape", "shape_set", "params", "target", "status", "error", "times_us",
               "median_us", "flops", "bytes", "peak", "static", "peers"}, ...]}

No host name is stored anywhere: files are meant to be committed and shared.
"""
from __future__ import annotations

import datetime as _dt
import importlib.metadata
import json
import math
import os
import platform
import statistics
import subprocess
from pathlib import Path

SCHEMA = "portable.results/1"
MODES = ("gpu", "compile-only")
STATUSES = ("ok", "compile-only", "failed", "mismatch")
PEAKS = ("fp32", "bf16", "fp8", "fp4")          # which compute ceiling bounds a row
MEASURED_CEILINGS = {"copy_tbps": "memory", "bf16_tflops": "bf16", "fp8_tflops": "fp8", "fp32_tflops": "fp32",
                     "fp4_tflops": "fp4"}
STATIC_FIELDS = ("registers", "spill_bytes", "smem_bytes", "occupancy", "instructions")
# Keys that would identify the machine: refused so that result files can be published.
PRIVATE_KEYS = ("hostname", "host", "node", "user", "username")

# Distributions whose versions describe the software a number was measured with.
_DISTRIBUTIONS = {"torch": ("torch",), "cuda-python": ("cuda-python",), "cuda-bindings": ("cuda-bindings",),
                  "nvrtc": ("nvidia-cuda-nvrtc", "nvidia-cuda-nvrtc-cu12"), "hip-python": ("hip-python",),
                  "cupy": ("cupy", "cupy-cuda13x", "cupy-cuda12x", "cupy-rocm-6-0"), "triton": ("triton",),
                  "flashinfer": ("flashinfer-python",), "triton_kernels": ("triton_kernels", "triton-kernels"),
                  "jinja2": ("jinja2",), "portable": ("portable",)}


# --- building a file -------------------------------------------------------------------------
def software_versions() -> dict:
    """Installed versions of the packages that shape a measurement (None: not installed).
    Wheel versions only: bench overrides e.g. 'nvrtc' with the version the library reports."""
    out = {"python": platform.python_version()}
    for label, names in _DISTRIBUTIONS.items():
        out[label] = None
        for name in names:
            try:
                out[label] = importlib.metadata.version(name)
                break
            except importlib.metadata.PackageNotFoundError:
                continue
    return out


def git_commit() -> str:
    """HEAD of the checkout this package runs from, '+dirty' when files differ; 'unknown' outside git.
    --no-optional-locks: reading must never write the index (other people share the checkout).
    A copy of the tree without .git (e.g. shipped to a GPU machine) names it in $PORTABLE_GIT_COMMIT."""
    if os.environ.get("PORTABLE_GIT_COMMIT"):
        return os.environ["PORTABLE_GIT_COMMIT"]
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "--no-optional-locks", "-C", str(root), "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def new_result(environment: dict) -> dict:
    """A result with no rows yet. `environment` needs at least device and target on a GPU
    machine (mode is then 'gpu'), or nothing at all for a compile-only file; date, git_commit,
    versions and the datasheet ceilings are filled in when missing."""
    if not isinstance(environment, dict):
        raise ValueError(f"environment: expected a dict, got {type(environment).__name__}")
    env = json.loads(json.dumps(environment))          # a deep copy that is certainly JSON
    env.setdefault("device", None)
    env.setdefault("target", None)
    env.setdefault("mode", "gpu" if env["device"] else "compile-only")
    env.setdefault("driver", None)
    env["versions"] = {**software_versions(), **env.get("versions", {})}
    env.setdefault("git_commit", git_commit())
    env.setdefault("date", now_iso())
    ceilings = env.setdefault("ceilings", {})
    ceilings.setdefault("measured", {})
    if "datasheet" not in ceilings:
        from .devices import lookup_device
        ceilings["datasheet"] = lookup_device(env["device"]) if env["device"] else None
    result = {"schema": SCHEMA, "environment": env, "rows": []}
    _check_environment(env)
    return result


def add_row(result: dict, row: dict) -> dict:
    """Append one row, filling the optional fields; the row is checked before it goes in.
    median_us is computed from times_us when not given."""
    if not isinstance(row, dict):
        raise ValueError(f"row: expected a dict, got {type(row).__name__}")
    row = json.loads(json.dumps(row))
    row.setdefault("shape_set", "default")
    row.setdefault("params", {})
    row.setdefault("error", None)
    row.setdefault("times_us", [])
    if "median_us" not in row:
        row["median_us"] = statistics.median(row["times_us"]) if row["times_us"] else None
    row.setdefault("peak", "fp32")
    row.setdefault("static", None)
    row.setdefault("peers", {})
    for peer in row["peers"].values():
        if isinstance(peer, dict) and "median_us" not in peer:
            times = peer.get("times_us") or []
            peer["median_us"] = statistics.median(times) if times else None
    _check_row(row, f"rows[{len(result['rows'])}]", result["environment"])
    result["rows"].append(row)
    return row


# --- checking a file -------------------------------------------------------------------------
def _need(obj: dict, key: str, where: str, types, expected: str, nullable: bool = False):
    if key not in obj:
        raise ValueError(f"{where}.{key}: missing (expected {expected})")
    value = obj[key]
    if value is None and nullable:
        return None
    if isinstance(value, bool) or not isinstance(value, types):
        raise ValueError(f"{where}.{key}: expected {expected}, got {value!r}")
    return value


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _check_times(times, where: str) -> None:
    if not isinstance(times, list) or not all(_number(t) and t > 0 for t in times):
        raise ValueError(f"{where}: expected a list of positive microsecond numbers, got {times!r}")


def _check_environment(env) -> None:
    where = "environment"
    if not isinstance(env, dict):
        raise ValueError(f"{where}: expected an object, got {env!r}")
    mode = _need(env, "mode", where, str, f"one of {', '.join(MODES)}")
    if mode not in MODES:
        raise ValueError(f"{where}.mode: expected one of {', '.join(MODES)}, got {mode!r}")
    gpu = mode == "gpu"
    _need(env, "device", where, str, "the torch device name" + ("" if gpu else " or null"), nullable=not gpu)
    target = _need(env, "target", where, str, "the device's target, e.g. 'sm_90a'" + ("" if gpu else " or null"),
                   nullable=not gpu)
    if target is not None:
        from .targets import all_targets
        if target not in all_targets():
            raise ValueError(f"{where}.target: expected one of {', '.join(all_targets())}, got {target!r}")
    _need(env, "driver", where, str, "the driver version string or null", nullable=True)
    versions = _need(env, "versions", where, dict, "an object of package -> version")
    for key in ("python", "torch"):
        _need(versions, key, f"{where}.versions", str, "a version string")
    _need(env, "git_commit", where, str, "the commit hash of the portable checkout ('unknown' outside git)")
    date = _need(env, "date", where, str, "an ISO 8601 date with time zone, e.g. 2026-11-22T10:00:00+00:00")
    try:
        parsed = _dt.datetime.fromisoformat(date)
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise ValueError(f"{where}.date: expected ISO 8601 with a time zone, e.g. 2026-11-22T10:00:00+00:00, got {date!r}")
    ceilings = _need(env, "ceilings", where, dict, "an object with 'measured' and 'datasheet'")
    measured = _need(ceilings, "measured", f"{where}.ceilings", dict, "an object of ceiling name -> {value, how}")
    for name, ceiling in measured.items():
        at = f"{where}.ceilings.measured.{name}"
        if name not in MEASURED_CEILINGS:
            raise ValueError(f"{at}: unknown ceiling; expected one of {', '.join(MEASURED_CEILINGS)}")
        if not isinstance(ceiling, dict):
            raise ValueError(f"{at}: expected {{value, how}}, got {ceiling!r}")
        value = _need(ceiling, "value", at, (int, float), "a positive number")
        if not _number(value) or value <= 0:
            raise ValueError(f"{at}.value: expected a positive number, got {value!r}")
        _need(ceiling, "how", at, str, "how it was measured (what, size, statistic)")
    _need(ceilings, "datasheet", f"{where}.ceilings", dict, "the devices.toml entry or null", nullable=True)
    _refuse_private_keys(env, where)


def _refuse_private_keys(obj, where: str) -> None:
    if isinstance(obj, dict):
        for key, value in obj.items():
            if str(key).lower() in PRIVATE_KEYS:
                raise ValueError(f"{where}.{key}: result files carry no host or user names; remove this field")
            _refuse_private_keys(value, f"{where}.{key}")


def _check_row(row, where: str, env: dict) -> None:
    if not isinstance(row, dict):
        raise ValueError(f"{where}: expected an object, got {row!r}")
    _need(row, "kernel", where, str, "the kernel name")
    _need(row, "shape", where, dict, "an object of problem sizes (and dtypes)")
    _need(row, "shape_set", where, str, "the name of the shape set, e.g. 'deepseek-v3'")
    _need(row, "params", where, dict, "an object of template parameters")
    target = _need(row, "target", where, str, "a target name, e.g. 'sm_90a'")
    from .targets import all_targets
    if target not in all_targets():
        raise ValueError(f"{where}.target: expected one of {', '.join(all_targets())}, got {target!r}")
    status = _need(row, "status", where, str, f"one of {', '.join(STATUSES)}")
    if status not in STATUSES:
        raise ValueError(f"{where}.status: expected one of {', '.join(STATUSES)}, got {status!r}")
    error = _need(row, "error", where, str, "the error text or null", nullable=True)
    times = _need(row, "times_us", where, list, "a list of every raw time in microseconds")
    _check_times(times, f"{where}.times_us")
    median = _need(row, "median_us", where, (int, float), "the median of times_us, or null without times", nullable=True)
    for key in ("flops", "bytes"):
        value = _need(row, key, where, (int, float), f"the cost model's {key} (a number >= 0)", nullable=status != "ok")
        if value is not None and (not _number(value) or value < 0):
            raise ValueError(f"{where}.{key}: expected a number >= 0, got {value!r}")
    peak = _need(row, "peak", where, str, f"the compute ceiling that bounds it: one of {', '.join(PEAKS)}")
    if peak not in PEAKS:
        raise ValueError(f"{where}.peak: expected one of {', '.join(PEAKS)}, got {peak!r}")
    static = _need(row, "static", where, dict, "the static report object or null", nullable=True)
    if static is not None:
        for key in STATIC_FIELDS:
            if key not in static:
                raise ValueError(f"{where}.static.{key}: missing (expected the static report's {key}, null if unknown)")
    peers = _need(row, "peers", where, dict, "an object of peer name -> {times_us, median_us}")
    for name, peer in peers.items():
        at = f"{where}.peers.{name}"
        if not isinstance(peer, dict):
            raise ValueError(f"{at}: expected {{times_us, median_us}}, got {peer!r}")
        _check_times(_need(peer, "times_us", at, list, "a list of microsecond times"), f"{at}.times_us")
        _need(peer, "median_us", at, (int, float), "the median of its times or null", nullable=True)

    # What each status promises.
    if status == "ok":
        if env.get("mode") == "compile-only":
            raise ValueError(f"{where}.status: 'ok' rows need a GPU; a compile-only file has only "
                             f"'compile-only' or 'failed' rows")
        if not times:
            raise ValueError(f"{where}.times_us: an 'ok' row needs its raw times, got an empty list")
        if median is None or not min(times) <= median <= max(times):
            raise ValueError(f"{where}.median_us: expected the median of times_us "
                             f"(between {min(times)} and {max(times)}), got {median!r}")
    elif status == "compile-only":
        if times or median is not None:
            raise ValueError(f"{where}.times_us: a 'compile-only' row has no times (expected [] and median_us null)")
        if static is None:
            raise ValueError(f"{where}.static: a 'compile-only' row needs its static report, got null")
    elif not error:
        raise ValueError(f"{where}.error: a '{status}' row needs the error text, got {error!r}")


def validate(result) -> dict:
    """Raise ValueError naming the first missing or bad field; return the result unchanged."""
    if not isinstance(result, dict):
        raise ValueError(f"result: expected a JSON object, got {type(result).__name__}")
    schema = _need(result, "schema", "result", str, f"{SCHEMA!r}")
    if schema != SCHEMA:
        raise ValueError(f"result.schema: expected {SCHEMA!r}, got {schema!r} (a file from another portable version?)")
    _check_environment(_need(result, "environment", "result", dict, "an object describing the device and software"))
    rows = _need(result, "rows", "result", list, "a list of rows")
    for i, row in enumerate(rows):
        _check_row(row, f"rows[{i}]", result["environment"])
    return result


def save(result: dict, path) -> Path:
    """Validate, then write atomically (a half-written file never replaces a good one)."""
    validate(result)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # open() (not mkstemp) so the file gets the umask's permissions: result files are shared
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def load(path) -> dict:
    """Read and validate one result file; errors name the file."""
    path = Path(path)
    try:
        with open(path) as f:
            result = json.load(f)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not JSON ({e})") from None
    try:
        return validate(result)
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None


# --- several files --------------------------------------------------------------------------
def sources(items) -> list[dict]:
    """Each input as {label, result, env, date, order}. An input is a path (loaded; its label is
    the path), a result dict (validated; labelled by its position, device and date), or a
    (label, result dict) pair for a caller that already loaded the file."""
    if isinstance(items, (str, Path, dict)):
        items = [items]
    out = []
    for i, item in enumerate(items):
        name = None
        if isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], dict):
            name, item = item
        if isinstance(item, (str, Path)):
            result, name = load(item), str(item)
        elif isinstance(item, dict):
            try:
                result = validate(item)
            except ValueError as e:
                raise ValueError(f"results[{i}]: {e}") from None
            env = result["environment"]
            name = str(name) if name else f"results[{i}] ({env['device'] or 'compile-only'}, {env['date']})"
        else:
            raise ValueError(f"results[{i}]: expected a result dict or a file path, got {type(item).__name__}")
        env = result["environment"]
        out.append({"label": name, "result": result, "env": env, "order": i,
                    "date": _dt.datetime.fromisoformat(env["date"])})
    return out


def row_identity(row: dict, env: dict) -> tuple:
    """What makes rows of two files the same measurement: where it ran (the device, or
    'compile-only' for a static report, which holds for any device of its target), target,
    kernel, shape and params. Dicts compare by content, not key order."""
    where = "compile-only" if env["mode"] == "compile-only" or row["status"] == "compile-only" else env["device"]
    return (where, row["target"], row["kernel"], json.dumps(row["shape"], sort_keys=True),
            json.dumps(row["params"], sort_keys=True))


def merge_rows(srcs: list[dict]) -> list[dict]:
    """Per row identity, the rows of the newest source that has it (by date, then the later
    argument): [{'key', 'source', 'rows', 'older'}], 'rows' all of that source's rows with the
    key (a repeated case stays the caller's choice), 'older' the sources whose rows with the key
    lost. Newest source first, each in file order, so argument order does not change it.
    Per row, not per file: two runs of one device that measured different kernels both show."""
    ranked = sorted(srcs, key=lambda s: (s["date"], s["order"]), reverse=True)
    merged: dict[tuple, dict] = {}
    for src in ranked:
        for row in src["result"]["rows"]:
            key = row_identity(row, src["env"])
            entry = merged.setdefault(key, {"key": key, "source": src, "rows": [], "older": []})
            if entry["source"] is src:
                entry["rows"].append(row)
            elif all(o is not src for o in entry["older"]):      # identity: results are large
                entry["older"].append(src)
    return list(merged.values())


# --- reading a file --------------------------------------------------------------------------
def label(values: dict) -> str:
    """'n=2^28 dtype=float32' for a shape or params dict (powers of two >= 2^16 as 2^k)."""
    parts = []
    for key, value in values.items():
        if isinstance(value, int) and not isinstance(value, bool) and value >= 1 << 16 and value & (value - 1) == 0:
            value = f"2^{value.bit_length() - 1}"
        parts.append(f"{key}={value}")
    return " ".join(parts)


def ceilings(environment: dict) -> dict:
    """The ceilings a row is judged against: {'memory': (TB/s, origin), 'fp32'/'bf16'/...: (TFLOP/s,
    origin)}, origin 'measured' or 'datasheet'. Measured wins: it is what this device, with this
    software, actually reaches; the datasheet fills what was not measured. A ceiling known to
    neither is absent."""
    from .devices import number
    measured = environment.get("ceilings", {}).get("measured", {}) or {}
    datasheet = environment.get("ceilings", {}).get("datasheet")
    out = {}
    for name, kind in MEASURED_CEILINGS.items():
        if name in measured:
            out[kind] = (float(measured[name]["value"]), "measured")
    for kind, field in (("memory", "memory_tbps"), *((p, f"{p}_tflops") for p in PEAKS)):
        value = number(datasheet, field)
        if kind not in out and value:
            out[kind] = (float(value), "datasheet")
    return out


def roofline_position(row: dict, environment: dict) -> dict | None:
    """Where a timed row sits against its device's roofline: achieved TB/s and TFLOP/s, which
    one bounds it, and the percentage of the bound reached. None for rows without a time."""
    median = row.get("median_us")
    if row.get("status") != "ok" or not median:
        return None
    flops, nbytes = row.get("flops") or 0, row.get("bytes") or 0
    ceil = ceilings(environment)
    memory, compute = ceil.get("memory"), ceil.get(row.get("peak", "fp32"))
    # time the roofline allows, in us: TB/s * 1e6 = bytes per us
    memory_us = nbytes / (memory[0] * 1e6) if memory else None
    compute_us = flops / (compute[0] * 1e6) if compute else None
    if memory_us is not None and compute_us is not None:
        bound = "memory" if memory_us >= compute_us else "compute"
    elif memory_us is not None or compute_us is not None:
        bound = "memory" if memory_us is not None else "compute"
    else:
        bound = "memory" if nbytes >= flops else "compute"     # no ceilings: guess from intensity
    floor_us = max(u for u in (memory_us, compute_us, 0.0) if u is not None) or None
    return {"tbps": nbytes / median / 1e6, "tflops": flops / median / 1e6,
            "intensity": flops / nbytes if nbytes else None, "bound": bound,
            "pct_of_roofline": 100.0 * floor_us / median if floor_us else None,
            "ceiling_origin": ", ".join(sorted({c[1] for c in (memory, compute) if c})) or None}
