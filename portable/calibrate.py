"""`portable calibrate`: this device's ceilings, measured, beside the datasheet's.

Memory: the better of torch's device-to-device copy and the project's own vector_add
(both 1 GiB per operand, bytes read + written over the median time). Compute: a library
GEMM (torch.matmul bf16, torch._scaled_mm fp8 e4m3) at 8192^3 on random data.
Results are stored per device in the cache folder, with the software versions.
"""
from __future__ import annotations

import json
import re

import torch

from .timing import time_gpu

GEMM_N = 8192
COPY_N = 1 << 28


def measure_copy() -> dict:
    from . import load
    src = torch.randn(COPY_N, device="cuda")
    dst = torch.empty_like(src)
    copy = time_gpu(lambda: dst.copy_(src))["median_us"]
    copy_tbps = 2 * COPY_N * 4 / copy / 1e6
    b = torch.randn_like(src)
    add = load("vector_add")
    stream = time_gpu(lambda: add(src, b, dst))["median_us"]
    stream_tbps = 3 * COPY_N * 4 / stream / 1e6
    del src, dst, b
    return {"value": round(max(copy_tbps, stream_tbps), 4),
            "how": f"max of torch copy_ 1 GiB fp32 ({copy_tbps:.3f} TB/s) and portable vector_add n=2^28 fp32 "
                   f"({stream_tbps:.3f} TB/s); bytes read + written over the median of 50"}


def measure_gemm(kind: str) -> dict | None:
    n = GEMM_N
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    if kind == "bf16":
        fn, how = (lambda: a @ b), "torch.matmul bf16"
    else:
        if not hasattr(torch, "_scaled_mm"):
            return None
        fp8 = torch.float8_e4m3fnuz if torch.version.hip and "gfx942" in torch.cuda.get_device_properties(0).gcnArchName else torch.float8_e4m3fn
        a8, b8 = a.to(fp8), b.t().contiguous().to(fp8).t()      # _scaled_mm wants B column-major
        one = torch.ones((), device="cuda")
        fn, how = (lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)), f"torch._scaled_mm {fp8}"
    try:
        t = time_gpu(fn, warmup=3, repeats=20)["median_us"]
    except RuntimeError as e:       # e.g. no fp8 GEMM on this device or build
        return {"value": None, "how": f"{how} failed: {str(e).splitlines()[0]}"}
    return {"value": round(2 * n ** 3 / t / 1e6, 1), "how": f"{how} {n}^3 random inputs, median of 20"}


def measure(index: int = 0) -> dict:
    torch.cuda.set_device(index)
    ceilings = {"copy_tbps": measure_copy()}
    for kind in ("bf16", "fp8"):
        m = measure_gemm(kind)
        if m and m["value"]:
            ceilings[f"{kind}_tflops"] = m
    torch.cuda.empty_cache()
    return ceilings


def _store_path(device: str):
    from .cache import cache_dir
    folder = cache_dir() / "ceilings"
    folder.mkdir(exist_ok=True)
    return folder / (re.sub(r"[^A-Za-z0-9]+", "_", device).strip("_") + ".json")


def run(args) -> int:
    from .devices import lookup_device
    from .results import software_versions
    if not torch.cuda.is_available():
        print("portable calibrate: no GPU here; the datasheet ceilings are in mapping/devices.toml")
        return 1
    device = torch.cuda.get_device_name(0)
    measured = measure(0)
    record = {"device": device, "versions": software_versions(), "measured": measured}
    _store_path(device).write_text(json.dumps(record, indent=1))
    sheet = lookup_device(device) or {}
    print(f"{device}  (stored in {_store_path(device)})")
    print(f"{'ceiling':<12}{'datasheet':>12}{'measured':>12}  how")
    for key, field in (("copy_tbps", "memory_tbps"), ("bf16_tflops", "bf16_tflops"), ("fp8_tflops", "fp8_tflops")):
        ds = sheet.get(field, {}).get("value")
        m = measured.get(key, {})
        print(f"{key:<12}{ds if ds is not None else '-':>12}{m.get('value', '-'):>12}  {m.get('how', 'not measured')}")
    return 0


def add_cli(sub) -> None:
    p = sub.add_parser("calibrate", help="measure this GPU's memory and GEMM ceilings; show them beside the datasheet")
    p.set_defaults(func=run)
