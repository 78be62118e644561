"""The `portable` command."""
from __future__ import annotations

import argparse
import importlib
import json
import sys

# Subcommands owned by other modules register themselves through add_cli(subparsers).
_PLUGINS = ("portable.reference", "portable.audit", "portable.roofline", "portable.matrix",
            "portable.calibrate", "portable.bench")


def parse_params(pairs: list[str]) -> dict:
    """-p KEY=VALUE pairs -> template parameters (digits become ints)."""
    out = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"--param: expected KEY=VALUE, got {pair!r}")
        out[key] = int(value) if value.lstrip("-").isdigit() else value
    return out


def cmd_doctor(args) -> int:
    from . import cache
    from .backends import clang_amdgpu, cuda_driver, hip_runtime, hiprtc, nvrtc
    from .device import gpu_count
    import torch
    rows = [("torch", torch.__version__ + (f" (HIP {torch.version.hip})" if torch.version.hip else f" (CUDA {torch.version.cuda})"))]
    n = gpu_count()
    for i in range(n):
        from .device import device_target
        try:
            t = device_target(i).name
        except Exception as e:   # a GPU no target matches: say so, keep going
            t = str(e)
        rows.append((f"gpu {i}", f"{torch.cuda.get_device_name(i)} -> {t}"))
    if not n:
        rows.append(("gpus", "none found (compile-only mode)"))
    for label, module in (("nvrtc", nvrtc), ("hiprtc", hiprtc), ("clang amdgpu (offline)", clang_amdgpu)):
        ok, text = module.available()
        rows.append((label, text if ok else f"not available: {text}"))
    for label, runtime in (("cuda driver", cuda_driver), ("hip runtime", hip_runtime)):
        try:
            rows.append((label, runtime.driver_version()))
        except Exception as e:   # no driver on this machine
            rows.append((label, f"not available: {str(e).splitlines()[0][:100]}"))
    from .backends.tools import nvidia_tool
    rows.append(("nvdisasm", nvidia_tool("nvdisasm") or "not found (SASS instruction counts unavailable)"))
    rows.append(("cache", f"{cache.cache_dir()} ({cache.entries()} binaries)"))
    width = max(len(r[0]) for r in rows)
    for label, text in rows:
        print(f"{label:<{width}}  {text}")
    return 0


def cmd_render(args) -> int:
    from . import render
    sys.stdout.write(render(args.kernel, args.target, **parse_params(args.param)))
    return 0


def compile_rows(kernel: str, target_spec: str, params: dict) -> list[dict]:
    from . import load
    from .errors import PortableError
    from .targets import resolve_targets
    k = load(kernel, **params)
    rows = []
    for t in resolve_targets(target_spec):
        try:
            rows.extend(k.reports(t.name))
        except PortableError as e:
            rows.append({"target": t.name, "kernel": kernel, "error": str(e).splitlines()[0]})
    return rows


def format_report(rows: list[dict]) -> str:
    import pandas as pd
    flat = []
    for r in rows:
        r = dict(r)
        if r.get("sgprs") is None:
            r["sgprs"] = "-"            # NVIDIA has no scalar register file
        instr = r.pop("instructions", {}) or {}
        r["ld128/st128"] = f"{instr.get('global_load_128', '?')}/{instr.get('global_store_128', '?')}" if instr else "-"
        mma = {k: v for k, v in instr.items() if k in ("hmma", "hgmma", "tcgen05", "block_scaled_mma", "mfma", "mfma_scale") and v}
        r["matrix"] = " ".join(f"{k}:{v}" for k, v in mma.items()) or "-"
        flat.append(r)
    cols = ["target", "kernel", "compiler", "registers", "sgprs", "spill_bytes", "stack_bytes", "smem_bytes",
            "occupancy", "ld128/st128", "matrix", "error"]
    df = pd.DataFrame(flat, dtype=object)     # object: ints stay ints beside error rows
    return df[[c for c in cols if c in df.columns]].fillna("-").to_string(index=False)


def cmd_compile(args) -> int:
    rows = compile_rows(args.kernel, args.target, parse_params(args.param))
    if args.format == "json":
        print(json.dumps(rows, indent=2))
    else:
        print(format_report(rows))
    return 1 if any("error" in r for r in rows) else 0


def cmd_cache(args) -> int:
    from . import cache
    if args.action == "clear":
        print(f"removed {cache.clear()} cached binaries from {cache.cache_dir()}")
    else:
        print(f"{cache.cache_dir()}: {cache.entries()} binaries")
    return 0


def build_parser() -> argparse.ArgumentParser:
    from .kernels import KERNELS
    p = argparse.ArgumentParser(prog="portable", description="GPU kernels written once, for CUDA and HIP targets.")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("doctor", help="GPUs, compilers, runtimes and cache found here").set_defaults(func=cmd_doctor)
    r = sub.add_parser("render", help="print a kernel's rendered source for a target")
    r.add_argument("kernel", choices=list(KERNELS))
    r.add_argument("--target", required=True)
    r.add_argument("--param", "-p", action="append", metavar="KEY=VALUE", help="template parameter, e.g. -p dtype=bfloat16")
    r.set_defaults(func=cmd_render)
    c = sub.add_parser("compile", help="compile a kernel and print its static report, one row per target")
    c.add_argument("kernel", choices=list(KERNELS))
    c.add_argument("--target", default="all", help="a target, a comma-separated list, or 'all' (default)")
    c.add_argument("--param", "-p", action="append", metavar="KEY=VALUE")
    c.add_argument("--format", choices=["table", "json"], default="table")
    c.set_defaults(func=cmd_compile)
    k = sub.add_parser("cache", help="show or clear the compiled-binary cache")
    k.add_argument("action", choices=["info", "clear"], nargs="?", default="info")
    k.set_defaults(func=cmd_cache)
    for name in ("portable.main_job",) + _PLUGINS:
        importlib.import_module(name).add_cli(sub)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    from .errors import PortableError
    try:
        return args.func(args) or 0
    except PortableError as e:
        print(f"portable: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
