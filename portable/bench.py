"""`portable bench`: every kernel x shape on this machine's GPU, checked then timed, with
peers in the same process, written as a self-describing result file (portable.results).

Without a GPU it writes compile-only rows (the static report per target), so every target
still gets a column when files are merged with `portable matrix`.

A kernel joins the bench by giving its class SHAPE_SETS and the methods make_inputs,
run, verify, peers and cost_of (see portable/kernels/vector_add.py).
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

from . import results
from .errors import PortableError
from .kernels import KERNELS
from .timing import time_gpu

DEFAULT_OUT = "results.json"
L2_FLUSH_BYTES = 256 << 20     # rotate input sets until they span this much: no cache flatters a time


def _progress(i: int, total: int, text: str) -> None:
    width = 24
    done = int(width * i / max(total, 1))
    sys.stderr.write(f"\r[{'#' * done}{'.' * (width - done)}] {i}/{total} {text[:70]:<70}")
    if i == total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def _cases(kernel_names, shape_set):
    for name in kernel_names:
        cls = KERNELS[name]
        sets = getattr(cls, "SHAPE_SETS", {})
        if shape_set not in sets:
            raise PortableError(f"--shape-set: kernel {name} has no shape set {shape_set!r}; it has {', '.join(sets) or 'none'}")
        for shape, params in sets[shape_set]:
            yield name, cls, shape, params


def _static(report: dict) -> dict:
    return {k: report.get(k) for k in results.STATIC_FIELDS}


def _time_rotating(fn, sets, repeats):
    """Time fn(inputs) over rotating input sets; returns the raw times in microseconds."""
    current = {"inputs": sets[0]}
    rotate = (lambda i: current.__setitem__("inputs", sets[i % len(sets)])) if len(sets) > 1 else None
    return time_gpu(lambda: fn(current["inputs"]), repeats=repeats, rotate=rotate)["times_us"]


def _time_peer(k, fn, sets, repeats) -> dict:
    """A peer's times on the kernel's input sets, after its own setup (`prepare`, outside the
    timing) and a check by the kernel's verify(), or by the peer's own `verify` where it computes
    other semantics (a bf16 path beside an a4w4 kernel): a peer that disagrees with its reference
    is not timed (its error is kept instead)."""
    try:
        for inputs in getattr(fn, "prepare", None) and sets or []:
            fn.prepare(inputs)
        ok, detail = getattr(fn, "verify", k.verify)(sets[0], fn(sets[0]))
    except Exception as e:          # a library's own failure, whatever its type: recorded, not raised
        ok, detail = False, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    if not ok:
        return {"times_us": [], "error": detail}
    return {"times_us": _time_rotating(fn, sets, repeats)}


def sweep_table(rows: list[dict], columns: list[str]) -> str:
    """A tiling sweep's rows as a text table (bench/*_sweep.py): the given columns, "-" where a
    row has none (a tiling that failed has only its error)."""
    import pandas as pd
    frame = pd.DataFrame(rows).reindex(columns=columns)
    return frame.fillna("-").to_string(index=False, float_format=lambda v: f"{v:.3f}")


def bench_gpu(kernel_names, shape_set: str, repeats: int) -> dict:
    from .backends import cuda_driver, hip_runtime, hiprtc, nvrtc
    from .calibrate import measure
    from .device import device_target
    target = device_target(0).name
    runtime, compiler = (hip_runtime, hiprtc) if torch.version.hip else (cuda_driver, nvrtc)
    env = {"device": torch.cuda.get_device_name(0), "target": target, "driver": runtime.driver_version(),
           "versions": {"compiler": compiler.version()},
           "ceilings": {"measured": measure(0)}}
    result = results.new_result(env)
    cases = list(_cases(kernel_names, shape_set))
    for i, (name, cls, shape, params) in enumerate(cases):
        label = f"{name} {shape} {params}"
        _progress(i, len(cases), label)
        row = {"kernel": name, "shape": shape, "shape_set": shape_set, "params": params, "target": target}
        try:
            k = cls(**params)
            row.update(k.cost_of(shape))
            probe = k.make_inputs(shape, 0)
            ok, detail = k.verify(probe, k.run(probe))
            nsets = max(1, min(8, -(-L2_FLUSH_BYTES // max(row["bytes"], 1))))
            sets = [probe] + [k.make_inputs(shape, 0) for _ in range(nsets - 1)]
            row["times_us"] = _time_rotating(k.run, sets, repeats)
            row["status"] = "ok" if ok else "mismatch"
            row["error"] = None if ok else detail
            row["peers"] = {peer: _time_peer(k, fn, sets, repeats) for peer, fn in k.peers().items()}
            row["static"] = _static(k.report(target))
            del sets, probe
        except (PortableError, RuntimeError) as e:
            row.update(status="failed", error=str(e).splitlines()[0], times_us=[], flops=row.get("flops", 0),
                       bytes=row.get("bytes", 0))
        results.add_row(result, row)
        torch.cuda.empty_cache()
    _progress(len(cases), len(cases), "done")
    return result


def bench_compile_only(kernel_names, shape_set: str) -> dict:
    """One row per kernel x shape x target with the static report (binaries come from the cache
    after the first shape of a parameter set)."""
    from .targets import all_targets
    result = results.new_result({})
    jobs = [(*case, target) for case in _cases(kernel_names, shape_set) for target in all_targets()]
    for i, (name, cls, shape, params, target) in enumerate(jobs):
        _progress(i, len(jobs), f"compile {name} {params} {target}")
        k = cls(**params)
        row = {"kernel": name, "shape": shape, "shape_set": shape_set, "params": params, "target": target,
               "status": "compile-only", **k.cost_of(shape)}
        try:
            row["static"] = _static(k.report(target))
        except PortableError as e:
            row.update(status="failed", error=str(e).splitlines()[0])
        results.add_row(result, row)
    _progress(len(jobs), len(jobs), "done")
    return result


def run(args) -> int:
    names = list(KERNELS) if args.kernels == "all" else [n.strip() for n in args.kernels.split(",")]
    unknown = [n for n in names if n not in KERNELS]
    if unknown:
        raise PortableError(f"--kernels: unknown kernel(s) {', '.join(unknown)}; expected some of {', '.join(KERNELS)}")
    if args.repeats < 1:
        raise PortableError(f"--repeats: expected a positive integer, got {args.repeats}")
    # the run takes minutes: say where its file goes before it starts and where it went after,
    # on stderr so the summary on stdout stays clean
    out = Path(args.out or DEFAULT_OUT).resolve()
    chosen = "" if args.out else f" (no --out given: {DEFAULT_OUT} in the current folder)"
    sys.stderr.write(f"portable bench: results will be written to {out}{chosen}\n")
    t0 = time.time()
    gpu = torch.cuda.is_available() and not args.compile_only
    result = bench_gpu(names, args.shape_set, args.repeats) if gpu else bench_compile_only(names, args.shape_set)
    results.save(result, out)
    rows = result["rows"]
    sys.stderr.write(f"portable bench: wrote {out}: {len(rows)} rows ({result['environment']['mode']}) "
                     f"in {time.time() - t0:.0f} s\n")
    for r in rows:
        if r["median_us"]:
            peers = " ".join(f"{p}={v['median_us']:.1f}us" if v["median_us"] else f"{p}=failed"
                             for p, v in r["peers"].items())
            print(f"  {r['kernel']:<12} {str(r['shape']):<22} {str(r['params']):<26} {r['status']:<9} "
                  f"{r['median_us']:>9.1f} us  {r['bytes'] / r['median_us'] / 1e6:6.3f} TB/s  {peers}")
    return 0 if all(r["status"] in ("ok", "compile-only") for r in rows) else 1


def add_cli(sub) -> None:
    p = sub.add_parser("bench", help="check and time every kernel x shape here; write a result file")
    p.add_argument("--kernels", default="all", help="comma-separated kernel names or 'all'")
    sets = sorted({s for cls in KERNELS.values() for s in getattr(cls, "SHAPE_SETS", {})})
    p.add_argument("--shape-set", default="default",
                   help=f"which of each kernel's shape lists to run: {', '.join(sets)} (default: default, the "
                        "full list; quick: a few shapes a kernel)")
    p.add_argument("--repeats", type=int, default=50,
                   help="timed calls a kernel x shape (and a peer); the row keeps every time and its median "
                        "(default 50)")
    p.add_argument("--compile-only", action="store_true", help="static reports for all targets even on a GPU machine")
    p.add_argument("--out", metavar="FILE",
                   help=f"result file to write (default: {DEFAULT_OUT} in the current folder); its path is "
                        "printed on stderr at the start and the end")
    p.set_defaults(func=run)
