"""NVRTC: CUDA source -> cubin for any sm_ target, with or without a GPU present."""
from __future__ import annotations

import functools
import re

from ..dialect import dialect_for
from ..errors import ToolchainMissing
from .binary import Binary, raise_compile_error
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
    flags = [rtc.arch(target), str(rtc.std), str(rtc.verbose)]
    if opts.get("fast_math"):
        flags.append(str(rtc.fast_math))
    if opts.get("lineinfo"):
        flags.append(str(rtc.lineinfo))
    for name, value in sorted(opts.get("defines", {}).items()):
        flags.append(rtc.define(name, value))
    return flags


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
                  log=log, asm=disassemble(code), meta=resources_from_log(log))


_PTXAS = {
    "registers": re.compile(r"Used (\d+) registers"),
    "stack_bytes": re.compile(r"(\d+) bytes stack frame"),
    "spill_store_bytes": re.compile(r"(\d+) bytes spill stores"),
    "spill_load_bytes": re.compile(r"(\d+) bytes spill loads"),
    "smem_bytes": re.compile(r"(\d+) bytes smem"),
}


def resources_from_log(log: str) -> dict:
    """ptxas --verbose lines -> per-kernel registers, stack, spills, static shared memory."""
    kernels: dict[str, dict] = {}
    current = None
    for line in log.splitlines():
        m = re.search(r"(?:Compiling entry function|Function properties for) '?([\w$]+)'?", line)
        if m:
            current = kernels.setdefault(m.group(1), {k: 0 for k in _PTXAS})
            continue
        if current is None:
            continue
        for key, pattern in _PTXAS.items():
            hit = pattern.search(line)
            if hit:
                current[key] = int(hit.group(1))
    return {"kernels": kernels}


def disassemble(cubin: bytes) -> str:
    """SASS text from nvdisasm ('' when the tool is not installed)."""
    tool = nvidia_tool("nvdisasm")
    if tool is None:
        return ""
    return run_tool([tool, "--print-code"], cubin, suffix=".cubin")
