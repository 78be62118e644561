"""Compilers and runtimes behind one interface.

Compilers (module-level `compile(source, target, opts) -> Binary`, `version()`, `available()`):
  nvrtc          CUDA -> cubin, all sm_ targets, runs with or without a GPU
  hiprtc         HIP  -> code object at run time (ROCm machines)
  clang_amdgpu   HIP  -> code object + ISA offline (no ROCm, no GPU)
Runtimes (`load`, `get_function`, `set_max_dynamic_smem`, `launcher`, `launch_overlapped`,
`raise_for`, `make_current`, `driver_version`):
  cuda_driver    cuda-python driver API
  hip_runtime    hip-python module API
"""
from __future__ import annotations

from ..targets import get_target
from . import clang_amdgpu, cuda_driver, hip_runtime, hiprtc, nvrtc

COMPILERS = {"nvrtc": nvrtc, "hiprtc": hiprtc, "clang_amdgpu": clang_amdgpu}
RUNTIMES = {"nvidia": cuda_driver, "amd": hip_runtime}


def compiler_for(target: str, purpose: str = "report"):
    """The compiler for `target`. purpose="run" prefers the runtime compiler of the vendor
    (hipRTC on ROCm); "report" needs assembly text, which the offline clang gives on AMD."""
    vendor = get_target(target).vendor
    if vendor == "nvidia":
        return nvrtc
    if purpose == "run" and hiprtc.available()[0]:
        return hiprtc
    return clang_amdgpu


def runtime_for(target: str):
    return RUNTIMES[get_target(target).vendor]
