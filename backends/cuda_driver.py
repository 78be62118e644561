"""CUDA runtime backend: load a cubin and launch it on torch's current stream (cuda-python).

backends/hip_runtime.py is its mirror image; keep the two in step.
"""
from __future__ import annotations

import ctypes
import functools

from ..errors import LaunchError, ToolchainMissing
from . import launch_stub, params

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
def tensor_map_2d(address: int, rows: int, row_bytes: int, box_rows: int, box_bytes: int, swizzle: int = 0) -> bytes:
    """The driver's 128-byte tensor map of a row-major byte array (rows x row_bytes, rows
    row_bytes apart) read in boxes of box_rows x box_bytes: a box lands row after row, with
    swizzle 128 (box_bytes 128) in 8-row atoms whose 16-byte chunk c of row r sits at c ^ (r % 8)
    (wg.desc_sw128's layout), with swizzle 64 (box_bytes 64) at c ^ (r % 8 / 2) (wg.desc_sw64's;
    the destination aligned to the atom); an L2 miss fetching the
    aligned 256 bytes (as mem.load16_l2_256 asks), zeros past the edges. Cached by its
    arguments: a call with the same array reuses it."""
    cu = _cu()
    u64, u32 = cu.cuuint64_t, cu.cuuint32_t
    tmap = _check(cu.cuTensorMapEncodeTiled(
        cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, address,
        [u64(row_bytes), u64(rows)], [u64(row_bytes)], [u32(box_bytes), u32(box_rows)], [u32(1), u32(1)],
        cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        {0: cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_NONE, 64: cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_64B,
         128: cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B}[swizzle],
        cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE), "cuTensorMapEncodeTiled")
    return ctypes.string_at(tmap.getPtr(), 128)


# launcher(): the launch call of every kernel (portable.program, portable.kernels.base)
EXTRA = 0


def launcher(function, kinds: tuple[str, ...]):
    """go(gx, gy, gz, bx, by, bz, smem, raw_stream, *values) -> err for one kernel: the C stub
    where it builds (launch_stub.py), else cuda-python's binding."""
    go = launch_stub.launcher("libcuda.so.1", "cuLaunchKernel", function, kinds)
    if go is not None:
        return go
    binding = _cu().cuLaunchKernel
    # a CUstream object rather than an int saves the binding a conversion on every launch
    return params.binding_launcher(lambda *args: binding(*args)[0], function, _cu().CUstream, kinds, EXTRA)


@functools.cache
def _overlap_attrs():
    cu = _cu()
    attr = cu.CUlaunchAttribute()
    attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
    attr.value.programmaticStreamSerializationAllowed = 1
    return [attr]


_configs: dict = {}


def launch_overlapped(function, grid, block, smem, stream: int, kernel_params: int) -> int:
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
    config.hStream = cu.CUstream(stream)
    return cu.cuLaunchKernelEx(config, function, kernel_params, 0)[0]


def raise_for(err, what: str) -> None:
    _check((err,), what)
