"""When each block of an mxfp4_moe call ran (CUDA only): a measurement build whose kernels record,
per block, the SM it ran on and %globaltimer at its start (thread 0) and end (the last warp to
leave), read back after one call. Prints, per kernel, its span, block times and how many blocks
were resident over time, so a partial last wave or a gap between kernels shows as numbers.

    python bench/moe_trace.py --shapes 0,6 [--params '{"h_wait": "grid"}'] [--bin 2]

Shapes are moe_sweep.py's indices into mxfp4_moe.SHAPES. The tracer adds a few instructions a
block, so times are close to, not equal to, the untraced kernels'.
"""
from __future__ import annotations

import argparse
import json
import re
import time

import numpy as np
import torch

import portable
from portable.kernels import mxfp4_moe as moe

SLOTS = 1 << 15      # blocks traced a kernel
SPIN_CYCLES = 20_000_000      # ~10 ms: longer than the host takes to queue any call
KERNELS = ("moe_route", "moe_quantize_x", "moe_permute_x", "moe_gemm1", "moe_quantize_h", "moe_gemm2",
           "moe_gemm2_shared", "moe_combine")
TRACER = f"""
__device__ unsigned long long ptrace_t[{len(KERNELS)}][2][{SLOTS}];
__device__ unsigned ptrace_sm[{len(KERNELS)}][{SLOTS}];
struct PTrace {{          // a block's start (thread 0) and end (the last warp's return: a destructor)
    int k; unsigned b;
    __device__ PTrace(int k_) : k(k_) {{
        b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
        if (threadIdx.x == 0 && b < {SLOTS}) {{
            unsigned long long t; unsigned s;
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
            asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
            ptrace_t[k][0][b] = t; ptrace_sm[k][b] = s;
        }}
    }}
    __device__ ~PTrace() {{
        if ((threadIdx.x & 31) == 0 && b < {SLOTS}) {{
            unsigned long long t;
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
            atomicMax(&ptrace_t[k][1][b], t);
        }}
    }}
}};
"""


def traced(source: str) -> str:
    def open_body(m):
        return m.group(0) + f" PTrace _ptrace({KERNELS.index(m.group(1))});"
    body = re.sub(r"void (moe_\w+)\([^)]*\)\s*\{", open_body, source)
    first = body.index('extern "C"')
    return body[:first] + TRACER + body[first:]


def _global(module, name: str):
    """(driver binding, device pointer, bytes) of the module's __device__ array `name`."""
    from cuda.bindings import driver as cu
    err, ptr, nbytes = cu.cuModuleGetGlobal(module, name.encode())
    assert not err, err
    return cu, ptr, nbytes


def read(module, name: str, dtype, shape):
    cu, ptr, nbytes = _global(module, name)
    out = np.empty(shape, dtype=dtype)
    assert out.nbytes == nbytes
    (err,) = cu.cuMemcpyDtoH(out.ctypes.data, ptr, nbytes)
    assert not err, err
    return out


def zero(module, names=("ptrace_t", "ptrace_sm")):
    """The module's __device__ arrays `names` set to zero bytes."""
    for name in names:
        cu, ptr, nbytes = _global(module, name)
        cu.cuMemsetD8(ptr, 0, nbytes)


def summarize(t, sm, bin_us: float):
    start, end = t[:, 0, :], t[:, 1, :]
    ran = start > 0
    t0 = start[ran].min()
    rows = []
    for k, name in enumerate(KERNELS):
        r = ran[k]
        if not r.any():
            continue
        s, e = (start[k][r] - t0) / 1e3, (end[k][r] - t0) / 1e3
        d = e - s
        rows.append((name, s, e))
        print(f"{name:18s} blocks {r.sum():5d} on {len(np.unique(sm[k][r])):3d} SMs  first start {s.min():6.1f}  "
              f"last start {s.max():6.1f}  last end {e.max():6.1f} us  block time median {np.median(d):5.1f}  "
              f"p10 {np.percentile(d, 10):5.1f}  p90 {np.percentile(d, 90):5.1f}  max {d.max():5.1f}")
    edges, table = residency([(s, e) for _, s, e in rows], bin_us)
    print("resident blocks (mean over each bin) from the first block's start, us:")
    print("   bin  " + "".join(f"{n[4:]:>14s}" for n, _, _ in rows))
    for lo, cells in zip(edges, table):
        print(f"{lo:6.1f}  " + "".join(f"{c:14.1f}" for c in cells))


def residency(spans, bin_us: float):
    """Bins of bin_us from 0 past the last end, and per bin and kernel the mean number of its
    blocks resident (each block's time inside the bin, summed, over the bin's length)."""
    stop = max(e.max() for _, e in spans)
    edges = np.arange(0, stop, bin_us)
    table = [[np.clip(np.minimum(e, lo + bin_us) - np.maximum(s, lo), 0, None).sum() / bin_us for s, e in spans]
             for lo in edges]
    return edges, table


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="0,6")
    ap.add_argument("--params", default="{}", help="JSON settings: mode and tuning knobs")
    ap.add_argument("--bin", type=float, default=2.0, help="microseconds a row of the residency table")
    args = ap.parse_args()
    plain = moe.MXFP4MoE.source
    moe.MXFP4MoE.source = lambda self, target: traced(plain(self, target))
    for i in (int(s) for s in args.shapes.split(",")):
        shape = moe.SHAPES[i]
        settings = json.loads(args.params)
        base = portable.load("mxfp4_moe", **{k: v for k, v in settings.items() if k in moe.MXFP4MoE.PARAMS},
                             tuning={k: v for k, v in settings.items() if k not in moe.MXFP4MoE.PARAMS})
        inputs = base.make_inputs(shape, 0)
        P = shape["M"] * (shape["topk"] + shape["shared"])
        k = base.auto_variant(P, shape["E"], shape["d_hidden"], "sm_90a") if base.tuning["tiles"] == "auto" else base
        ok, detail = k.verify(inputs, k.run(inputs))
        for _ in range(20):
            k.run(inputs)
        module = k.launcher_at(0).module
        torch.cuda.synchronize()
        zero(module)
        torch.cuda._sleep(SPIN_CYCLES)      # the host queues the whole call while the GPU spins,
        host = time.perf_counter()          # so the trace shows the GPU's gaps, not the host's
        k.run(inputs)
        host = (time.perf_counter() - host) * 1e6
        torch.cuda.synchronize()
        t = read(module, "ptrace_t", np.uint64, (len(KERNELS), 2, SLOTS)).astype(np.int64)
        sm = read(module, "ptrace_sm", np.uint32, (len(KERNELS), SLOTS))
        print(f"\n== {shape['model']} M={shape['M']} tiles={k.tuning['tiles']} {args.params}: {'ok' if ok else detail}; "
              f"the host queued the call in {host:.0f} us")
        summarize(t, sm, args.bin)


if __name__ == "__main__":
    main()
