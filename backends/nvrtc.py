"""NVRTC: CUDA source -> cubin for any sm_ target, with or without a GPU present."""
from __future__ import annotations

import functools
import re

from ..dialect import dialect_for
from ..errors import ToolchainMissing
from .binary import Binary, raise_compile_error
from .flags import option_flags
from .tools import nvidia_tool, run_tool


@functools.cache
def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError as e:   # pragma: no cover - depends on the install
        raise ToolchainMissing("NVRTC not found: pip install cuda-python nvidia-cuda-nvrtc") from e
    return nvrtc


def _check(result, what):
    err = result[0] if isinstance(result, tuple) else result
    if int(err) != 0:
        nvrtc = _nvrtc()
        _, msg = nvrtc.nvrtcGetErrorString(err)
        raise ToolchainMissing(f"{what}: {msg.decode() if isinstance(msg, bytes) else msg}")
    return result[1:] if isinstance(result, tuple) and len(result) > 1 else None


def version() -> str:
    major, minor = _check(_nvrtc().nvrtcVersion(), "nvrtcVersion")
    return f"nvrtc {major}.{minor}"


def available() -> tuple[bool, str]:
    try:
        return True, version()
    except Exception as e:  # NVRTC library missing or unloadable
        return False, str(e)


def options(target: str, opts: dict) -> list[str]:
    """Portable options -> NVRTC flags, spelled by the mapping table's rtc.* rows."""
    rtc = dialect_for(target)["rtc"]
    return [rtc.arch(target), str(rtc.std), str(rtc.verbose)] + option_flags(target, opts)


def compile(source: str, target: str, opts: dict | None = None, name: str = "kernel.cu") -> Binary:
    nvrtc = _nvrtc()
    flags = options(target, opts or {})
    (prog,) = _check(nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], []), "nvrtcCreateProgram")
    try:
        encoded = [f.encode() for f in flags]
        result = nvrtc.nvrtcCompileProgram(prog, len(encoded), encoded)
        (size,) = _check(nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
        buf = b" " * size
        _check(nvrtc.nvrtcGetProgramLog(prog, buf), "nvrtcGetProgramLog")
        log = buf.rstrip(b"\x00 ").decode(errors="replace")
        if int(result[0]) != 0:
            raise_compile_error(version(), target, log, source)
        (size,) = _check(nvrtc.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")
        code = b" " * size
        _check(nvrtc.nvrtcGetCUBIN(prog, code), "nvrtcGetCUBIN")
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    return Binary(target=target, format="cubin", code=code, compiler=version(), options=tuple(flags),
                  log=log, asm=disassemble(code), meta=resources(code, log))


_SPILLS = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
_FUNCTION = re.compile(r"Function ([\w$]+):\s*\n\s*REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)")


def resources(cubin: bytes, log: str) -> dict:
    """Per-kernel registers, stack, static shared and local memory from cuobjdump's
    resource report (the same on every NVRTC version); spill bytes from ptxas --verbose."""
    kernels = {}
    tool = nvidia_tool("cuobjdump")
    if tool:
        text = run_tool([tool, "--dump-resource-usage"], cubin, suffix=".cubin")
        for name, reg, stack, shared, local in _FUNCTION.findall(text):
            kernels[name] = {"registers": int(reg), "stack_bytes": int(stack), "smem_bytes": int(shared),
                             "local_bytes": int(local), "spill_bytes": None}
    # ptxas prints a "Function properties for NAME" line followed by the spill counts
    for name, body in re.findall(r"Function properties for ([\w$]+)\n(.*?)(?=\n\S*ptxas info\s*: (?:Function|Compiling)|\Z)", log, re.S):
        m = _SPILLS.search(body)
        if m and name in kernels:
            kernels[name]["spill_bytes"] = int(m.group(1)) + int(m.group(2))
    return {"kernels": kernels}


def disassemble(cubin: bytes) -> str:
    """SASS text from nvdisasm ('' when the tool is not installed)."""
    tool = nvidia_tool("nvdisasm")
    if tool is None:
        return ""
    return run_tool([tool, "--print-code"], cubin, suffix=".cubin")


def kernel_sass(sass: str, kernel: str) -> str:
    """One kernel's part of nvdisasm's text: from its `.text.<kernel>:` label to the next section."""
    start = sass.index(f"\n.text.{kernel}:")
    end = sass.find("\n//----", start)
    return sass[start:end if end >= 0 else len(sass)]
