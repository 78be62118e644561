"""The `portable` command."""
from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import shutil
import sys
import textwrap

# Subcommands owned by other modules register themselves through add_cli(subparsers).
_PLUGINS = ("portable.porting.reference", "portable.porting.audit", "portable.roofline", "portable.matrix",
            "portable.calibrate", "portable.bench", "portable.dialect_doc", "portable.porting.port")


def version() -> str:
    """The installed distribution's version (package metadata), so it is never spelt twice."""
    from importlib.metadata import PackageNotFoundError, version as dist_version
    try:
        return dist_version("portable")
    except PackageNotFoundError:          # a bare checkout on sys.path, never installed
        return "unknown (not installed)"


def parse_params(pairs: list[str]) -> dict:
    """-p KEY=VALUE pairs -> template parameters (digits become ints)."""
    from .errors import InputError
    out = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep:
            raise InputError(f"--param: expected KEY=VALUE, got {pair!r}")
        out[key] = int(value) if value.lstrip("-").isdigit() else value
    return out


def params_text(name: str, indent: str = "  ") -> str:
    """A kernel's parameters and tuning knobs, one a line: name, accepted values, default
    (params.describe); the knobs under their own heading."""
    from .params import describe
    params, tuning = declared(name)
    width = max((len(k) for k in (*params, *tuning)), default=0)
    lines = [f"{indent}{k:<{width}}  {describe(spec)}" for k, spec in params.items()]
    if tuning:
        lines += [f"{indent}tuning (-t KEY=VALUE; from Python tuning={{...}}):"]
        lines += [f"{indent}  {k:<{width}}  {describe(spec)}" for k, spec in tuning.items()]
    return "\n".join(lines)


def declared(kernel: str) -> tuple[dict, dict]:
    """A built-in's parameters and tuning knobs, or those a template file declares."""
    from .kernels import KERNELS
    from .program import Origin
    if kernel in KERNELS:
        return KERNELS[kernel].PARAMS, KERNELS[kernel].TUNING
    decl = Origin.of(kernel).declaration
    return decl.params, decl.tuning


def params_epilog() -> str:
    from .kernels import KERNELS
    parts = ["KERNEL is a built-in name or a file: a template (.j2) declares its parameters in its",
             "{#portable #} block, a raw .cu / .hip source takes none.",
             "",
             "built-in kernel parameters (-p KEY=VALUE; `portable compile KERNEL|FILE --params` prints one's):"]
    for name in KERNELS:
        parts.append(f"  {name}\n{params_text(name, indent='    ')}")
    return "\n".join(parts)


def _wrap(text: str, indent: int) -> list[str]:
    """A message in whole words: wrapped to a terminal's width, continuation lines under its
    start; piped (logs, grep) each line of it whole."""
    paras = str(text).splitlines() or [""]
    if not sys.stdout.isatty():
        return paras
    width = max(shutil.get_terminal_size().columns - indent, 40)
    return [line for para in paras
            for line in textwrap.wrap(para, width, break_long_words=False, break_on_hyphens=False) or [""]]


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
            rows.append((label, f"not available: {e}"))
    if n and not torch.version.hip:
        from .backends import launch_stub
        how = launch_stub.status()
        rows.append(("launch", "C stub (backends/launch_stub.c)" if how == "stub" else f"cuda-python {how}"))
    from .backends.tools import nvidia_tool
    rows.append(("nvdisasm", nvidia_tool("nvdisasm") or "not found (SASS instruction counts unavailable)"))
    rows.append(("cache", f"{cache.cache_dir()} ({cache.entries()} binaries)"))
    width = max(len(r[0]) for r in rows)
    for label, text in rows:
        first, *rest = _wrap(text, width + 2)
        print(f"{label:<{width}}  {first}")
        for line in rest:
            print(" " * (width + 2) + line)
    return 0


def cmd_render(args) -> int:
    from . import render
    sys.stdout.write(render(args.kernel, args.target, tuning=parse_params(args.tuning), **parse_params(args.param)))
    return 0


def _compile(kernel: str, target_spec: str, params: dict, tuning: dict | None = None) -> list[tuple[str, list[dict] | Exception]]:
    """(target, its report rows or the PortableError that stopped it) for each target."""
    from . import load
    from .errors import PortableError
    from .targets import resolve_targets
    k = load(kernel, tuning=tuning, **params)
    out = []
    for t in resolve_targets(target_spec):
        try:
            out.append((t.name, k.reports(t.name)))
        except PortableError as e:
            out.append((t.name, e))
    return out


def _as_rows(kernel: str, results) -> list[dict]:
    """Report rows for every target; a target that failed gets one row with its error's first line."""
    rows = []
    for target, got in results:
        if isinstance(got, Exception):
            rows.append({"target": target, "kernel": kernel, "error": str(got).splitlines()[0]})
        else:
            rows.extend(got)
    return rows


def compile_rows(kernel: str, target_spec: str, params: dict) -> list[dict]:
    """Every target's report rows, failed targets as error rows (`portable check`'s tables)."""
    return _as_rows(kernel, _compile(kernel, target_spec, params))


def format_report(rows: list[dict]) -> str:
    import pandas as pd
    from .report import MATRIX_CLASSES
    flat = []
    for r in rows:
        r = dict(r)
        if r.get("sgprs") is None:
            r["sgprs"] = "-"            # NVIDIA has no scalar register file
        instr = r.pop("instructions", {}) or {}
        r["ld128/st128"] = f"{instr.get('global_load_128', '?')}/{instr.get('global_store_128', '?')}" if instr else "-"
        mma = {k: v for k, v in instr.items() if k in MATRIX_CLASSES and v}
        r["matrix"] = " ".join(f"{k}:{v}" for k, v in mma.items()) or "-"
        flat.append(r)
    cols = ["target", "kernel", "compiler", "registers", "sgprs", "spill_bytes", "stack_bytes", "smem_bytes",
            "occupancy", "ld128/st128", "matrix", "error"]
    df = pd.DataFrame(flat, dtype=object)     # object: ints stay ints beside error rows
    return df[[c for c in cols if c in df.columns]].fillna("-").to_string(index=False)


def cmd_compile(args) -> int:
    """The table holds the targets that compiled; each one that failed is an error line on
    stderr (`portable: TARGET: message`, the whole message: a compiler's log follows its first
    line), and any failure makes the exit status 2, as every other error of the command. JSON
    keeps the failed targets as rows with an `error`, for scripts."""
    if args.params:
        print(f"{args.kernel} parameters (-p KEY=VALUE):\n{params_text(args.kernel)}")
        return 0
    results = _compile(args.kernel, args.target, parse_params(args.param), parse_params(args.tuning))
    failed = [(target, got) for target, got in results if isinstance(got, Exception)]
    compiled = [r for _, got in results if not isinstance(got, Exception) for r in got]
    if args.format == "json":
        print(json.dumps(_as_rows(args.kernel, results), indent=2))
    elif compiled:
        print(format_report(compiled))
    sys.stdout.flush()              # the table, then the errors, in that order on one terminal
    for target, e in failed:
        print(f"portable: {target}: {e}", file=sys.stderr)
    return 2 if failed else 0


def cmd_cache(args) -> int:
    from . import cache
    if args.action == "clear":
        print(f"removed {cache.clear()} cached binaries from {cache.cache_dir()}")
    else:
        print(f"{cache.cache_dir()}: {cache.entries()} binaries")
    return 0


# argparse's own complaints, said the way the project's errors are: `WHAT: expected X, got Y`
QUOTES = "'\""                   # around argparse's choices in some Python versions, not others
_ARGPARSE = (
    (re.compile(r"argument (?P<what>[^:]+): invalid choice: (?P<got>.+?) \(choose from (?P<choices>.+)\)$"),
     lambda m: f"{m['what']}: expected one of {', '.join(c.strip().strip(QUOTES) for c in m['choices'].split(','))}, "
               f"got {m['got']}"),
    (re.compile(r"argument (?P<what>[^:]+): invalid (?P<type>\w+) value: (?P<got>.+)$"),
     lambda m: f"{m['what']}: expected {'an integer' if m['type'] == 'int' else 'a ' + m['type']}, got {m['got']}"),
    (re.compile(r"argument (?P<what>[^:]+): expected one argument$"),
     lambda m: f"{m['what']}: expected a value, got none"),
    (re.compile(r"the following arguments are required: (?P<what>.+)$"),
     lambda m: f"{m['what']}: expected a value, got none"),
)


class Parser(argparse.ArgumentParser):
    """Usage errors print as `portable: WHAT: expected X, got Y` with exit status 2, like the
    errors the commands raise (subcommand parsers are made of this class too)."""

    def error(self, message):
        for pattern, say in _ARGPARSE:
            m = pattern.match(message)
            if m:
                message = say(m)
                break
        self.print_usage(sys.stderr)
        self.exit(2, f"portable: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    from .kernels import KERNELS
    p = Parser(prog="portable", description="GPU kernels written once, for CUDA and HIP targets.")
    p.add_argument("--version", action="version", version=f"portable {version()}")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("doctor", help="GPUs, compilers, runtimes and cache found here").set_defaults(func=cmd_doctor)
    raw = argparse.RawDescriptionHelpFormatter      # keeps the parameter list's lines
    r = sub.add_parser("render", help="print a kernel's rendered source for a target",
                       epilog=params_epilog(), formatter_class=raw)
    r.add_argument("kernel", metavar="KERNEL|FILE", help=f"a built-in kernel ({', '.join(KERNELS)}) or a .j2/.cu/.hip file")
    r.add_argument("--target", required=True)
    r.add_argument("--param", "-p", action="append", metavar="KEY=VALUE",
                   help="template parameter, e.g. -p dtype=bfloat16 (each kernel's are listed below)")
    r.add_argument("--tuning", "-t", action="append", metavar="KEY=VALUE",
                   help="tuning knob (how, not what: tile sizes, depths), e.g. -t block=256")
    r.set_defaults(func=cmd_render)
    c = sub.add_parser("compile", help="compile a kernel and print its static report, one row per target",
                       description=textwrap.fill(
                           "Compile a kernel for each target and print its static report, one row per target "
                           "that compiled; each target that failed is a `portable: TARGET: ...` line on stderr "
                           "and makes the exit status 2.", 78),
                       epilog=params_epilog(), formatter_class=raw)
    c.add_argument("kernel", metavar="KERNEL|FILE", help=f"a built-in kernel ({', '.join(KERNELS)}) or a .j2/.cu/.hip file")
    c.add_argument("--target", default="all", help="a target, a comma-separated list, or 'all' (default)")
    c.add_argument("--param", "-p", action="append", metavar="KEY=VALUE",
                   help="template parameter, e.g. -p dtype=bfloat16 (each kernel's are listed below)")
    c.add_argument("--tuning", "-t", action="append", metavar="KEY=VALUE",
                   help="tuning knob (how, not what: tile sizes, depths), e.g. -t block=256")
    c.add_argument("--params", action="store_true",
                   help="print the kernel's parameters, their accepted values and defaults; compile nothing")
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
    except BrokenPipeError:
        # `portable ref --list | head`: the reader left; no traceback, and none again when
        # Python flushes stdout at exit (the recipe of Python's signal docs)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
