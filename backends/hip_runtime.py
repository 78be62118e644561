"""HIP runtime backend: load a code object and launch it on torch's current stream (hip-python).

Mirror image of backends/cuda_driver.py; ROCm builds of torch expose the HIP stream as
torch.cuda.current_stream().cuda_stream, so the caller side is the same.
"""
from __future__ import annotations

import functools

from ..errors import LaunchError, ToolchainMissing
from . import params

name = "hip"


@functools.cache
def _hip():
    try:
        from hip import hip
    except ImportError as e:
        raise ToolchainMissing("hip-python is not installed: pip install 'portable[hip]' (ROCm machines)") from e
    return hip


def _check(result, what: str):
    err = result[0]
    if err:
        text = _hip().hipGetErrorString(err)
        raise LaunchError(f"{what} failed: {err!r} ({text.decode() if isinstance(text, bytes) else text})")
    return result[1] if len(result) == 2 else result[1:]



def driver_version() -> str:
    v = _check(_hip().hipDriverGetVersion(), "hipDriverGetVersion")
    return f"{v // 10000000}.{v // 100000 % 100}"


def make_current(device_index: int) -> None:
    """HIP binds a device, not a context, to the thread."""
    hip = _hip()
    _check(hip.hipInit(0), "hipInit")
    _check(hip.hipSetDevice(device_index), "hipSetDevice")


def load(code: bytes, device_index: int):
    make_current(device_index)
    return _check(_hip().hipModuleLoadData(code), "hipModuleLoadData")



def get_function(module, kernel: str):
    return _check(_hip().hipModuleGetFunction(module, kernel.encode()), f"hipModuleGetFunction({kernel})")


def set_max_dynamic_smem(function, nbytes: int) -> None:
    """No call needed: AMD gives a kernel the whole LDS without an opt-in (mapping row
    mod.max_dynamic_smem_attr); the caller has already checked nbytes against the target."""


EXTRA = None


def launcher(function, kinds: tuple[str, ...]):
    """go(gx, gy, gz, bx, by, bz, smem, raw_stream, *values) -> err for one kernel, through
    hip-python (hipModuleLaunchKernel takes the same C arguments as cuLaunchKernel, but the
    C stub cuda_driver uses is not wired here: no ROCm machine here to check hip-python's
    handles as ints). hip-python takes the raw hipStream_t pointer value as it is."""
    binding = _hip().hipModuleLaunchKernel
    return params.binding_launcher(lambda *args: binding(*args)[0], function, lambda raw: raw, kinds, EXTRA)


def launch_overlapped(function, grid, block, smem, stream: int, kernel_params: int) -> int:
    """HIP has no programmatic dependent launch: a plain launch (sync.grid_wait is a no-op)."""
    return _hip().hipModuleLaunchKernel(function, *grid, *block, smem, stream, kernel_params, EXTRA)[0]


def raise_for(err, what: str) -> None:
    _check((err,), what)
