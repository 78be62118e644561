"""Time examples/gemm against torch.matmul on one GPU, in the same run.

    python examples/gemm/bench_gemm.py                  # 4096^3, median of 50 after warm-up
    python examples/gemm/bench_gemm.py --size 8192 --sweep

Each kernel is launched `--iters` times back to back, one pair of CUDA events around each
launch (the queue stays ahead of the GPU, so the Python call does not show), and the median
is taken. torch multiplies the same bf16 inputs (a @ b.T, bf16 out, its own tuned GEMM); the
example runs with fp32 and bf16 output. --sweep adds rows for other tilings of the template.
"""
import argparse
import importlib.util
import statistics
from pathlib import Path

import torch

import portable

_spec = importlib.util.spec_from_file_location("gemm_example", Path(__file__).with_name("gemm.py"))
example = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(example)

SWEEP = [dict(BK=32, STAGES=3), dict(BK=32, STAGES=5), dict(BK=64, STAGES=3), dict(BK=64, STAGES=4),
         dict(BM=128, BN=128, STAGES=4), dict(BM=256, BN=128, STAGES=4)]


def median_us(fn, iters: int, warmup: int = 10) -> float:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    for start, end in events:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in events) * 1e3


def template_launch(params: dict, a, b, out):
    """A launch of the template with `params` (the face's fixed tiling set aside)."""
    prog = portable.load(example.TEMPLATE, **params)
    target = portable.target_of(a)
    m, n, k = a.shape[0], b.shape[0], a.shape[1]
    bm, bn = prog.params["BM"], prog.params["BN"]
    kernel = prog.gemm[(m // bm) * (n // bn), prog.params["WARPS"] * target.wave, example.smem_bytes(prog, target.name)]
    return lambda: kernel(a, b, out, m, n, k)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=4096, help="M = N = K")
    ap.add_argument("--iters", type=int, default=50, help="timed launches a kernel (median taken)")
    ap.add_argument("--sweep", action="store_true", help="also time other tilings of the template")
    args = ap.parse_args()
    if args.iters < 20:
        ap.error("--iters: at least 20")
    n = args.size
    torch.manual_seed(0)
    a = torch.randn(n, n, device="cuda").to(torch.bfloat16)
    b = torch.randn(n, n, device="cuda").to(torch.bfloat16)
    c32 = torch.empty(n, n, device="cuda")
    c16 = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    ref = a.float() @ b.float().T
    tile = example.pick_tile(n, n, torch.cuda.get_device_properties(0).multi_processor_count)

    rows = [("torch.matmul, bf16 out", lambda: torch.matmul(a, b.T), None)]
    rows.append((f"gemm {tile[0]}x{tile[1]}, fp32 out", lambda: example.gemm(a, b, c32), c32))
    rows.append((f"gemm {tile[0]}x{tile[1]}, bf16 out", lambda: example.gemm(a, b, c16), c16))
    if args.sweep:
        for p in SWEEP:
            name = "template " + " ".join(f"{k}={v}" for k, v in p.items())
            try:
                fn = template_launch(p, a, b, c32)
                fn()                                        # builds it: a tiling the target cannot hold fails here
                rows.append((name, fn, c32))
            except portable.PortableError as e:
                print(f"{name}: skipped ({str(e).splitlines()[0]})")

    flops = 2.0 * n ** 3
    print(f"C = A @ B.T, {n} x {n} x {n} bf16, {torch.cuda.get_device_name(0)}, median of {args.iters}")
    print(f"{'kernel':<40} {'us':>9} {'TFLOP/s':>9} {'/ torch':>8} {'max rel err':>12}")
    base = None
    for name, fn, out in rows:
        us = median_us(fn, args.iters)
        base = base or us
        err = "" if out is None else f"{((out.float() - ref).abs().max() / ref.abs().max()).item():.1e}"
        print(f"{name:<40} {us:9.1f} {flops / us / 1e6:9.1f} {base / us:8.2f} {err:>12}")


if __name__ == "__main__":
    main()
