"""`portable check`: the main job. Compiles every kernel for all five targets and prints
the matrix; with a GPU it also runs each kernel against its reference and times it."""
from __future__ import annotations

from .cli import compile_rows, format_report


def run(targets: str = "all", files=()) -> int:
    from .device import device_target, gpu_count
    from .kernels import KERNELS
    failed = 0
    if files:                      # a user's own kernels: the compile matrix only
        for path in files:
            rows = compile_rows(path, targets, {})
            print(f"\n{path}\n{format_report(rows)}")
            failed += sum("error" in r for r in rows)
        return 1 if failed else 0
    print("== compile matrix (static report per target) ==")
    for name, cls in KERNELS.items():
        for variant in getattr(cls, "CHECK_VARIANTS", [{}]):
            rows = compile_rows(name, targets, dict(variant))
            label = ", ".join(f"{k}={v}" for k, v in variant.items())
            print(f"\n{name}" + (f" ({label})" if label else ""))
            print(format_report(rows))
            failed += sum("error" in r for r in rows)
    n = gpu_count()
    if not n:
        print("\nno GPU here: compile-only. On a GPU machine this also runs each kernel against its reference.")
        return 1 if failed else 0
    print(f"\n== run on GPU 0 ({device_target(0).name}) ==")
    print(f"{'kernel':<12} {'variant':<18} {'shape':<14} {'result':<6} {'median us':>10} {'TB/s':>7}")
    for name, cls in KERNELS.items():
        for variant in getattr(cls, "CHECK_VARIANTS", [{}]):
            r = cls(**variant).selftest(0)
            label = ",".join(str(v) for v in variant.values())
            print(f"{name:<12} {label:<18} {r['shape']:<14} {'pass' if r['ok'] else 'FAIL':<6} {r['median_us']:>10.1f} {r['tbps']:>7.3f}")
            failed += not r["ok"]
    return 1 if failed else 0


def add_cli(sub) -> None:
    p = sub.add_parser("check", help="the main job: five-target compile matrix; on a GPU also run and time each kernel")
    p.add_argument("files", nargs="*", metavar="FILE",
                   help="your own .j2/.cu/.hip kernels to compile instead of the built-ins (default parameters)")
    p.add_argument("--target", default="all")
    p.set_defaults(func=lambda args: run(args.target, args.files))
