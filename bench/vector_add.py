"""vector_add benchmark (issue 2): bandwidth vs torch.add and the device's copy, launch
overhead vs CuPy's RawKernel, and compile vs cached load in fresh processes.

    python bench/vector_add.py [--out DIR]     # on a GPU machine; prints a table last
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

import portable
from portable.device import device_target
from portable.timing import time_gpu

N = 1 << 28


def copy_ceiling() -> dict:
    """Device-to-device copy of 1 GiB fp32: bytes read + bytes written over the median time."""
    src = torch.randn(N, device="cuda")
    dst = torch.empty_like(src)
    t = time_gpu(lambda: dst.copy_(src))
    return {"median_us": t["median_us"], "tbps": 2 * src.numel() * 4 / t["median_us"] / 1e6}


def bandwidth(dtype: torch.dtype, variants) -> list[dict]:
    a, b = (torch.randn(N, device="cuda", dtype=dtype) for _ in range(2))
    out = torch.empty_like(a)
    nbytes = 3 * N * a.element_size()
    rows = []
    t = time_gpu(lambda: torch.add(a, b, out=out))
    rows.append({"impl": "torch.add", "dtype": str(dtype)[6:], "median_us": t["median_us"], "tbps": nbytes / t["median_us"] / 1e6})
    for block, vecs in variants:
        k = portable.load("vector_add", dtype=dtype, tuning={"block": block, "vecs": vecs})
        out.fill_(float("nan"))
        k(a, b, out)
        ok = torch.equal(out, a + b)
        t = time_gpu(lambda: k(a, b, out))
        rows.append({"impl": f"portable b{block} v{vecs}", "dtype": str(dtype)[6:], "ok": ok,
                     "median_us": t["median_us"], "tbps": nbytes / t["median_us"] / 1e6})
    return rows


def per_call_us(fn, calls: int = 2000, repeats: int = 7) -> float:
    """Host wall time per call of `fn` launched back to back (small n: the host is the bottleneck)."""
    fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(samples)


def launch_overhead() -> dict:
    n = 4096
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.empty_like(a)
    k = portable.load("vector_add")
    result = {"portable_us": per_call_us(lambda: k(a, b, out)),
              "torch_add_us": per_call_us(lambda: torch.add(a, b, out=out))}
    try:
        import cupy
    except ImportError:
        result["cupy_us"] = None
        return result
    source = portable.render("vector_add", target=device_target(0).name)
    raw = cupy.RawKernel(source, "vector_add", options=("-std=c++17",))
    ca, cb, cout = cupy.asarray(a), cupy.asarray(b), cupy.asarray(out)
    grid, block, n64 = (k.grid(n),), (k.params["block"],), cupy.int64(n)
    cout.fill(float("nan"))
    raw(grid, block, (ca, cb, cout, n64))
    cupy.cuda.runtime.deviceSynchronize()
    assert torch.equal(out, a + b), "CuPy launch of the rendered source gave a wrong result"
    # the host is noisy: alternate the two, 1000 calls each, and take medians of each and of the ratio
    ours, theirs, rounds = [], [], 41
    for _ in range(rounds):
        ours.append(per_call_us(lambda: k(a, b, out), calls=300, repeats=1))
        theirs.append(per_call_us(lambda: raw(grid, block, (ca, cb, cout, n64)), calls=300, repeats=1))
    result.update(portable_us=statistics.median(ours), cupy_us=statistics.median(theirs),
                  ratio_median=statistics.median(o / t for o, t in zip(ours, theirs)), rounds=rounds,
                  portable_rounds_us=ours, cupy_rounds_us=theirs)
    return result


def launch_breakdown() -> dict:
    """Where a call's host time goes: validation, our launcher, and the bare driver call
    through cuda-python and through ctypes (same function, same packed arguments)."""
    import ctypes
    from cuda.bindings import driver as cu
    from portable.backends.params import ParamPacker
    from portable.device import current_stream
    n = 4096
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.empty_like(a)
    k = portable.load("vector_add")
    k(a, b, out)
    L = k._launchers[0]
    args = (a.data_ptr(), b.data_ptr(), out.data_ptr(), n)
    grid, block = (k.grid(n), 1, 1), k._block
    packer = ParamPacker(L.signatures[k.ENTRY].kinds)
    params = packer.pack(args)
    func = L.function
    lib = ctypes.CDLL("libcuda.so.1")
    raw = lib.cuLaunchKernel
    raw.restype = ctypes.c_int
    raw.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
    fptr = int(func)
    stream = current_stream(0)
    bare = ctypes.CDLL("libcuda.so.1").cuLaunchKernel      # no argtypes: arguments pre-wrapped
    bare.restype = ctypes.c_int
    cstream = cu.CUstream(stream)
    fp, pp, sp = ctypes.c_void_p(fptr), ctypes.c_void_p(params), ctypes.c_void_p(stream)
    out_ = {
        "full_call_us": per_call_us(lambda: k(a, b, out)),
        "launcher_us": per_call_us(lambda: L(grid, block, 0, args)),
        "cuda_python_launch_us": per_call_us(lambda: cu.cuLaunchKernel(func, grid[0], 1, 1, block[0], 1, 1, 0, stream, params, 0)),
        "cuda_python_cached_stream_us": per_call_us(lambda: cu.cuLaunchKernel(func, grid[0], 1, 1, block[0], 1, 1, 0, cstream, params, 0)),
        "ctypes_launch_us": per_call_us(lambda: raw(fptr, grid[0], 1, 1, block[0], 1, 1, 0, stream, params, None)),
        "ctypes_prewrapped_us": per_call_us(lambda: bare(fp, grid[0], 1, 1, block[0], 1, 1, 0, sp, pp, None)),
        "validation_us": per_call_us(lambda: k.check(a, b, out), calls=20000),
        "stream_lookup_us": per_call_us(lambda: current_stream(0), calls=20000),
        "pack_us": per_call_us(lambda: packer.pack(args), calls=20000),
        "data_ptr_x3_us": per_call_us(lambda: (a.data_ptr(), b.data_ptr(), out.data_ptr()), calls=20000),
    }
    return out_


_CACHE_PROBE = """
import json, time
t0 = time.perf_counter()
import portable
from portable.build import stats
from portable.device import device_target
t1 = time.perf_counter()
k = portable.load("vector_add")
k.binary(device_target(0).name, purpose="run")
t2 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "build_s": t2 - t1, **stats}))
"""


def cache_timing() -> list[dict]:
    """Two fresh processes on one empty cache: the first compiles, the second must not."""
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, PORTABLE_CACHE_DIR=cache)
        runs = []
        for _ in range(2):
            out = subprocess.run([sys.executable, "-c", _CACHE_PROBE], env=env, capture_output=True, text=True, check=True)
            runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        return runs


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    args = ap.parse_args()
    dev = torch.cuda.get_device_name(0)
    variants = [(b, v) for b in (128, 256, 512) for v in (1, 2, 4)]
    log = {"device": dev, "target": device_target(0).name, "torch": torch.__version__, "n": N}
    log["copy"] = copy_ceiling()
    log["bandwidth"] = bandwidth(torch.float32, variants) + bandwidth(torch.bfloat16, variants)
    log["launch"] = launch_overhead()
    log["launch_breakdown"] = launch_breakdown()
    log["cache"] = cache_timing()
    with open(os.path.join(args.out, "vector_add_bench.json"), "w") as f:
        json.dump(log, f, indent=1)

    copy = log["copy"]["tbps"]
    print(f"\n{dev}  n=2^28  copy ceiling {copy:.3f} TB/s (1 GiB fp32, read+write)")
    print(f"{'impl':<22}{'dtype':<10}{'us':>9}{'TB/s':>8}{'/torch':>8}{'/copy':>7}  ok")
    for dtype in ("float32", "bfloat16"):
        rows = [r for r in log["bandwidth"] if r["dtype"] == dtype]
        base = rows[0]["tbps"]
        for r in rows:
            print(f"{r['impl']:<22}{dtype:<10}{r['median_us']:>9.1f}{r['tbps']:>8.3f}{r['tbps'] / base:>8.3f}"
                  f"{r['tbps'] / copy:>7.3f}  {r.get('ok', '')}")
    L = log["launch"]
    cupy_ratio = f"median ratio {L['ratio_median']:.2f}x CuPy over {L['rounds']} alternating rounds" if L.get("cupy_us") else "CuPy missing"
    print(f"launch overhead per call (n=4096): portable {L['portable_us']:.2f} us, CuPy RawKernel "
          f"{L['cupy_us'] or float('nan'):.2f} us, torch.add {L['torch_add_us']:.2f} us  -> {cupy_ratio}")
    print("host time per call by part: " + ", ".join(f"{k[:-3]} {v:.2f}" for k, v in log["launch_breakdown"].items()) + " (us)")
    c0, c1 = log["cache"]
    print(f"process 1: compiled={c0['compiled']} build {c0['build_s'] * 1e3:.1f} ms; "
          f"process 2: compiled={c1['compiled']} cached={c1['cached']} build {c1['build_s'] * 1e3:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
