"""Time examples/gemm against torch.matmul on one GPU, in the same run.

    python examples/gemm/bench_gemm.py                  # 4096^3, median of 50 after warm-up
    python examples/gemm/bench_gemm.py --size 8192 --sweep

Each kernel is launched `--iters` times back to back, one pair of CUDA events around each
launch (the queue stays ahead of the GPU, so the Python call does not show), and the median
is taken. torch multiplies the same bf16 inputs (a @ b.T, bf16 out, its own tuned GEMM); the
example runs with fp32 and bf16 output. --sweep adds rows for other tilings and paths of the
template (SWEEP). Every row but torch's is checked against a float32 reference first (its output
NaN-filled, so every element must be written) and shows WRONG instead of a time if it fails.
"""
import argparse
import functools
import importlib.util
import statistics
from pathlib import Path

import torch

import portable

_spec = importlib.util.spec_from_file_location("gemm_example", Path(__file__).with_name("gemm.py"))
example = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(example)

# --sweep: (tile (BM, BN, warps), more tuning knobs of the template) beside the face's choice
# (128 x 256, 8 warps, BK 64, 4 stages, INFLIGHT 1: the warpgroup path on the H100)
SWEEP = [
    ((128, 256, 8), dict(STAGES=3)),                    # warpgroup: one slice copied ahead
    ((128, 256, 8), dict(INFLIGHT=0)),                  # three ahead, the matrix unit drains each slice
    ((128, 256, 8), dict(INFLIGHT=0, STAGES=3)),
    ((256, 128, 8), dict()),                            # warpgroups of 128 rows: two 64 x 128 instructions a K step
    ((128, 128, 8), dict(INFLIGHT=0, STAGES=3)),        # 97 KB: two blocks an SM, one's epilogue under the other's loop
    ((128, 128, 8), dict(STAGES=3)),
    ((128, 128, 8), dict(STAGES=6)),                    # one block an SM, four slices copied ahead
    ((128, 128, 4), dict(STAGES=3)),                    # one warpgroup of 128 rows, two blocks an SM
    ((128, 256, 8), dict(MMA="warp", STAGES=3)),        # the warp fragments (mma.sync): best before, 361-368 TFLOP/s
    ((128, 256, 8), dict(MMA="warp", BK=32)),           # the first design: 326 TFLOP/s
]


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


def path(tile: tuple, k: int, device, **knobs) -> str:
    """Which of the template's paths the face runs for this tiling (its GEMM_PATH_ line)."""
    prog = example.kernel(*tile, **{"BK": 64 if k % 64 == 0 else 32, **knobs})
    return "warpgroup" if "GEMM_PATH_WARPGROUP" in prog.source(portable.target_of(device).name) else "warp"


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
    face = f"gemm {tile[0]}x{tile[1]} [{path(tile, n, a)}]"
    rows.append((f"{face}, fp32 out", lambda: example.gemm(a, b, c32), c32))
    rows.append((f"{face}, bf16 out", lambda: example.gemm(a, b, c16), c16))
    if args.sweep:
        for t, p in SWEEP:
            name = " ".join([f"{t[0]}x{t[1]} {t[2]}w", *(f"{k}={v}" for k, v in p.items()), f"[{path(t, n, a, **p)}]"])
            try:
                fn = functools.partial(example.gemm, a, b, c32, tile=t, **p)
                fn()                                        # builds it: a tiling the target cannot hold fails here
                rows.append((name, fn, c32))
            except portable.PortableError as e:
                print(f"{name}: skipped ({str(e).splitlines()[0]})")

    flops = 2.0 * n ** 3
    print(f"C = A @ B.T, {n} x {n} x {n} bf16, {torch.cuda.get_device_name(0)}, median of {args.iters}")
    print(f"{'kernel':<52} {'us':>9} {'TFLOP/s':>9} {'/ torch':>8} {'max rel err':>12}")
    base = None
    for name, fn, out in rows:
        err = ""
        if out is not None:                                 # checked before it is timed: NaN first, so every element must be written
            out.fill_(float("nan"))
            fn()
            e = ((out.float() - ref).abs().max() / ref.abs().max()).item()
            err = f"{e:.1e}"
            if not e < 1e-2:                                # NaN fails too
                print(f"{name:<52} {'WRONG':>9} {'':>9} {'':>8} {err:>12}")
                continue
        us = median_us(fn, args.iters)
        base = base or us
        print(f"{name:<52} {us:9.1f} {flops / us / 1e6:9.1f} {base / us:8.2f} {err:>12}")


if __name__ == "__main__":
    main()
