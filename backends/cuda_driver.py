"""CUDA runtime backend: load a cubin and launch it on torch's current stream (cuda-python).

backends/hip_runtime.py is its mirror image; keep the two in step.
"""
from __future__ import annotations

import ctypes
import functools

from ..errors import LaunchError, ToolchainMissing
from . import launch_stub

name = "cuda"


@functools.cache
def _cu():
    try:
        from cuda.bindings import driver
    except ImportError as e:  # pragma: no cover - depends on the install
        raise ToolchainMissing("cuda-python is not installed: pip install cuda-python") from e
    return driver


def _check(result, what: str):
    err = result[0]
    if err:
        _, text = _cu().cuGetErrorString(err)
        raise LaunchError(f"{what} failed: {err!r} ({text.decode() if isinstance(text, bytes) else text})")
    return result[1] if len(result) == 2 else result[1:]



def driver_version() -> str:
    v = _check(_cu().cuDriverGetVersion(), "cuDriverGetVersion")
    return f"{v // 1000}.{v % 1000 // 10}"


def make_current(device_index: int) -> None:
    """Bind the device's primary context (the one torch uses) to this thread."""
    cu = _cu()
    _check(cu.cuInit(0), "cuInit")
    dev = _check(cu.cuDeviceGet(device_index), "cuDeviceGet")
    ctx = _check(cu.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
    _check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")


def load(code: bytes, device_index: int):
    make_current(device_index)
    return _check(_cu().cuModuleLoadData(code), "cuModuleLoadData")



def get_function(module, kernel: str):
    return _check(_cu().cuModuleGetFunction(module, kernel.encode()), f"cuModuleGetFunction({kernel})")


def set_max_dynamic_smem(function, nbytes: int) -> None:
    cu = _cu()
    attr = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    _check(cu.cuFuncSetAttribute(function, attr, nbytes), "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)")


@functools.lru_cache(maxsize=256)
def tensor_map_2d(address: int, rows: int, row_bytes: int, box_rows: int, box_bytes: int) -> bytes:
    """The driver's 128-byte tensor map of a row-major byte array (rows x row_bytes, rows
    row_bytes apart) read in boxes of box_rows x box_bytes: no swizzle (a box lands row after
    row), an L2 miss fetching the aligned 256 bytes (as mem.load16_l2_256 asks), zeros past
    the edges. Cached by its arguments: a call with the same weights reuses it."""
    cu = _cu()
    u64, u32 = cu.cuuint64_t, cu.cuuint32_t
    tmap = _check(cu.cuTensorMapEncodeTiled(
        cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, address,
        [u64(row_bytes), u64(rows)], [u64(row_bytes)], [u32(box_bytes), u32(box_rows)], [u32(1), u32(1)],
        cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE, cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_NONE,
        cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE), "cuTensorMapEncodeTiled")
    return ctypes.string_at(tmap.getPtr(), 128)


# The launch call itself, for the hot path in portable.kernels.base.Launcher:
# launch_function()(launch_handle(function), gx, gy, gz, bx, by, bz, smem, stream_handle(raw),
#                   kernelParams, EXTRA) -> err
EXTRA = 0


@functools.cache
def _launcher():
    """(launch, function handle, stream handle): the C stub with plain ints where it builds
    (launch_stub.py), else the binding with its own handle objects."""
    stub = launch_stub.bind("libcuda.so.1", "cuLaunchKernel")
    if stub is not None:
        return stub, int, int
    binding = _cu().cuLaunchKernel
    # a CUstream object rather than an int saves the binding a conversion on every launch
    return (lambda *args: binding(*args)[0]), (lambda function: function), _cu().CUstream


def launch_function():
    return _launcher()[0]


def launch_handle(function):
    """The function as launch_function() takes it."""
    return _launcher()[1](function)


def stream_handle(raw: int):
    """torch's raw stream pointer as launch_function() takes it."""
    return _launcher()[2](raw)


@functools.cache
def _overlap_attrs():
    cu = _cu()
    attr = cu.CUlaunchAttribute()
    attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
    attr.value.programmaticStreamSerializationAllowed = 1
    return [attr]


_configs: dict = {}


def launch_overlapped(function, grid, block, smem, stream, params) -> int:
    """Programmatic dependent launch (sm_90+): the kernel's blocks may start while the kernel
    before it in the stream still runs, and wait for its end in sync.grid_wait. Returns the
    error code. One launch configuration per (kernel, grid, block, shared bytes), made once:
    only its stream is set per launch (the caller holds the kernel's argument lock)."""
    cu = _cu()
    key = (int(function), grid, block, smem)
    config = _configs.get(key)
    if config is None:
        if len(_configs) >= 4096:        # grids follow batch sizes: keep the table small
            _configs.clear()
        config = _configs[key] = cu.CUlaunchConfig()
        config.gridDimX, config.gridDimY, config.gridDimZ = grid
        config.blockDimX, config.blockDimY, config.blockDimZ = block
        config.sharedMemBytes = smem
        config.attrs, config.numAttrs = _overlap_attrs(), 1
    config.hStream = stream if isinstance(stream, cu.CUstream) else cu.CUstream(stream)
    return cu.cuLaunchKernelEx(config, function, params, 0)[0]


def raise_for(err, what: str) -> None:
    _check((err,), what)
