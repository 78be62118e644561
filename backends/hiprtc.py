"""hipRTC: HIP source -> code object at run time on a ROCm machine (hip-python).

Mirror image of backends/nvrtc.py; the offline path without ROCm is clang_amdgpu.py.
"""
from __future__ import annotations

import functools

from ..dialect import dialect_for
from ..errors import ToolchainMissing
from .binary import Binary, raise_compile_error
from .flags import option_flags


@functools.cache
def _hiprtc():
    try:
        from hip import hiprtc
    except ImportError as e:
        raise ToolchainMissing("hipRTC not found: pip install 'portable[hip]' on a ROCm machine") from e
    return hiprtc


def _check(result, what):
    err = result[0]
    if err:
        hiprtc = _hiprtc()
        raise ToolchainMissing(f"{what}: {hiprtc.hiprtcGetErrorString(err)}")
    return result[1:] if len(result) > 1 else None


def version() -> str:
    major, minor = _check(_hiprtc().hiprtcVersion(), "hiprtcVersion")
    return f"hiprtc {major}.{minor}"


def available() -> tuple[bool, str]:
    try:
        return True, version()
    except Exception as e:  # no ROCm runtime library on this machine
        return False, str(e).splitlines()[0]


def options(target: str, opts: dict) -> list[str]:
    """Portable options -> hipRTC flags, spelled by the mapping table's rtc.* rows."""
    rtc = dialect_for(target)["rtc"]
    return [rtc.arch(target), str(rtc.std), str(rtc.O3)] + option_flags(target, opts)


def compile(source: str, target: str, opts: dict | None = None, name: str = "kernel.hip") -> Binary:
    hiprtc = _hiprtc()
    flags = options(target, opts or {})
    (prog,) = _check(hiprtc.hiprtcCreateProgram(source.encode(), name.encode(), 0, None, None), "hiprtcCreateProgram")
    try:
        encoded = [f.encode() for f in flags]
        result = hiprtc.hiprtcCompileProgram(prog, len(encoded), encoded)
        (size,) = _check(hiprtc.hiprtcGetProgramLogSize(prog), "hiprtcGetProgramLogSize")
        buf = bytearray(size)
        _check(hiprtc.hiprtcGetProgramLog(prog, buf), "hiprtcGetProgramLog")
        log = bytes(buf).rstrip(b"\x00 ").decode(errors="replace")
        if result[0]:
            raise_compile_error(version(), target, log, source)
        (size,) = _check(hiprtc.hiprtcGetCodeSize(prog), "hiprtcGetCodeSize")
        code = bytearray(size)
        _check(hiprtc.hiprtcGetCode(prog, code), "hiprtcGetCode")
    finally:
        hiprtc.hiprtcDestroyProgram(prog)
    return Binary(target=target, format="hsaco", code=bytes(code), compiler=version(), options=tuple(flags), log=log)
