"""Host time per call of the elementwise example (examples/axpby) against CuPy's RawKernel on
the same rendered source, alternating in one run (issue 37: at most 1.0x CuPy).

    python bench/launch_overhead.py [--n 4096] [--calls 2000] [--rounds 15] [--out DIR]

Each round times `calls` back-to-back calls with the host clock (the GPU, a few us a kernel
at this size, keeps up, so this is the host's cost of queueing), then synchronizes; the
variants take turns round by round and each reports its median round. Rows:
  portable raw          k[grid, block](x, y, out, a, b, n) on a kept Entry
  portable axpby(out=)  the Python face into a preallocated output
  portable axpby()      the face allocating its output (torch.empty_like)
  cupy raw              RawKernel((grid,), (block,), args) on preallocated CuPy views of the same memory
  cupy + alloc          cupy.empty_like, then the RawKernel
  stub launch           the C stub's launcher (backends/launch_stub.c): packs the values, calls cuLaunchKernel
  binding launch        cuLaunchKernel through cuda-python with a kept CUstream (portable's fallback;
                        run with PORTABLE_LAUNCH=binding to time the portable rows on it)
  ctypes launch         cuLaunchKernel through ctypes (measured slower: bench/NOTES.md, launch overhead)
  ctypes, objects made once   the same without argtypes, the handles as ctypes objects made once
The last four launch the same function with the same arguments and no checks.
"""
from __future__ import annotations

import argparse
import importlib.util
import pathlib
import statistics
import time

import numpy as np
import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]


def example():
    spec = importlib.util.spec_from_file_location("axpby", ROOT / "examples" / "axpby" / "axpby.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--out", default=None, help="also write the table to DIR/launch_overhead.txt")
    args = ap.parse_args()
    import cupy
    from portable.backends import cuda_driver

    ax = example()
    dt, n = torch.float32, args.n
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.full_like(x, float("nan"))
    entry = ax.entry(dt)
    grid, block = ax.grid(n, dt), ax.BLOCK
    a, b = 2.0, -0.5
    entry[grid, block](x, y, out, a, b, n)
    torch.testing.assert_close(out, a * x + b * y)

    source = ax.program(dt).source("sm_90a")
    ck = cupy.RawKernel(source, "axpby")
    cx, cy, cout = cupy.asarray(x), cupy.asarray(y), cupy.asarray(out)
    ca, cb, cn = np.float32(a), np.float32(b), np.int64(n)
    out.fill_(float("nan"))
    ck((grid,), (block,), (cx, cy, cout, ca, cb, cn))
    torch.cuda.synchronize()
    torch.testing.assert_close(out, a * x + b * y)

    import ctypes
    from portable.backends import launch_stub
    from portable.backends.params import ParamPacker
    kinds = entry.signature.kinds
    packer = ParamPacker(kinds)
    xp, yp, op = x.data_ptr(), y.data_ptr(), out.data_ptr()
    packer.pack((xp, yp, op, a, b, n))
    fn = entry._on[0].function
    stream = torch.cuda.current_stream().cuda_stream
    cu = cuda_driver._cu()
    cu_stream = cu.CUstream(stream)
    fast = ctypes.CDLL("libcuda.so.1").cuLaunchKernel
    u32, ptr = ctypes.c_uint, ctypes.c_void_p
    fast.argtypes, fast.restype = [ptr, u32, u32, u32, u32, u32, u32, u32, ptr, ptr, ptr], ctypes.c_int
    handle = int(fn)
    bare = ctypes.CDLL("libcuda.so.1").cuLaunchKernel        # no argtypes: ctypes objects made once
    bare.restype = ctypes.c_int
    c_fn, c_stream, c_params = ctypes.c_void_p(handle), ctypes.c_void_p(stream), ctypes.c_void_p(packer.address)
    go = launch_stub.launcher("libcuda.so.1", "cuLaunchKernel", fn, kinds)
    print(f"portable launches through: {launch_stub.status()}")

    def cupy_alloc():
        o = cupy.empty_like(cx)
        ck((grid,), (block,), (cx, cy, o, ca, cb, cn))

    variants = {
        "portable raw": lambda: entry[grid, block](x, y, out, a, b, n),
        "portable axpby(out=)": lambda: ax.axpby(x, y, a, b, out=out),
        "portable axpby()": lambda: ax.axpby(x, y, a, b),
        "cupy raw": lambda: ck((grid,), (block,), (cx, cy, cout, ca, cb, cn)),
        "cupy + alloc": cupy_alloc,
        "stub launch": (lambda: go(grid, 1, 1, block, 1, 1, 0, stream, xp, yp, op, a, b, n)) if go else None,
        "binding launch": lambda: cu.cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, cu_stream, packer.address, 0),
        "ctypes launch": lambda: fast(handle, grid, 1, 1, block, 1, 1, 0, stream, packer.address, None),
        "ctypes, objects made once": lambda: bare(c_fn, grid, 1, 1, block, 1, 1, 0, c_stream, c_params, None),
    }
    variants = {name: f for name, f in variants.items() if f is not None}
    times = {name: [] for name in variants}
    for _ in range(3):                         # warm-up: every path built, loaded and cached
        for f in variants.values():
            f()
    torch.cuda.synchronize()
    for _ in range(args.rounds):
        for name, f in variants.items():
            t = time.perf_counter()
            for _ in range(args.calls):
                f()
            times[name].append((time.perf_counter() - t) / args.calls * 1e6)
            torch.cuda.synchronize()
    med = {name: statistics.median(v) for name, v in times.items()}
    rows = [f"launch overhead, axpby float32 n={n}, {torch.cuda.get_device_name(0)}, median of {args.rounds} rounds x {args.calls} calls, "
            f"portable launching through {'the C stub' if launch_stub.status() == 'stub' else 'the binding'}",
            f"{'variant':24s} {'us/call':>8s} {'spread':>14s} {'vs cupy':>8s}"]
    for name, v in times.items():
        peer = med["cupy + alloc"] if name == "portable axpby()" else med["cupy raw"]
        rows.append(f"{name:24s} {med[name]:8.2f} {min(v):6.2f}-{max(v):6.2f} {med[name] / peer:8.2f}")
    text = "\n".join(rows)
    print(text)
    if args.out:
        with open(pathlib.Path(args.out) / "launch_overhead.txt", "a") as f:
            f.write(text + "\n\n")


if __name__ == "__main__":
    main()
