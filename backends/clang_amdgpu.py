"""Offline AMDGPU compiler: HIP source -> code object + ISA with clang, no ROCm or GPU needed.

Defaults (the amd-offline extra): clang from the ziglang wheel, hipRTC's runtime header
from rocm-llvm-python, ocml/ockl bitcode from triton. On a ROCm machine point it at
ROCm's own tools instead:
  PORTABLE_AMD_CLANG=/opt/rocm/llvm/bin/clang
  PORTABLE_AMD_DEVICE_LIBS=/opt/rocm/amdgcn/bitcode
  PORTABLE_HIPRTC_HEADER=.../hiprtc_runtime.h
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

from ..dialect import dialect_for
from ..errors import ToolchainMissing
from .binary import Binary, raise_compile_error
from .flags import option_flags
from .tools import site_file

# The __oclc_* control constants the device libraries read. ROCm ships them as
# oclc_*.bc files; building them from IR works with any clang.
_OCLC_IR = """target triple = "amdgcn-amd-amdhsa"
@__oclc_ABI_version = weak_odr hidden local_unnamed_addr addrspace(4) constant i32 600, align 4
@__oclc_wavefrontsize64 = linkonce_odr hidden local_unnamed_addr addrspace(4) constant i8 1, align 1
@__oclc_finite_only_opt = linkonce_odr hidden local_unnamed_addr addrspace(4) constant i8 0, align 1
@__oclc_unsafe_math_opt = linkonce_odr hidden local_unnamed_addr addrspace(4) constant i8 0, align 1
@__oclc_daz_opt = linkonce_odr hidden local_unnamed_addr addrspace(4) constant i8 0, align 1
@__oclc_correctly_rounded_sqrt32 = linkonce_odr hidden local_unnamed_addr addrspace(4) constant i8 1, align 1
@__oclc_ISA_version = linkonce_odr hidden local_unnamed_addr addrspace(4) constant i32 {isa}, align 4
"""


def _isa_version(target: str) -> int:
    # gfx942 -> 9402, gfx950 -> 9500: major, minor, stepping as the device libraries number them
    digits = target[3:]
    return int(digits[:-2]) * 1000 + int(digits[-2], 16) * 100 + int(digits[-1], 16)


def _work_dir() -> Path:
    from ..cache import cache_dir
    path = cache_dir() / "amdgpu-tools"
    path.mkdir(parents=True, exist_ok=True)
    return path


@functools.cache
def clang_command() -> tuple[str, ...]:
    custom = os.environ.get("PORTABLE_AMD_CLANG")
    if custom:
        return (custom,)
    if site_file("ziglang") is not None:
        return (sys.executable, "-m", "ziglang", "clang")
    found = shutil.which("clang")
    if found:
        return (found,)
    raise ToolchainMissing("no clang for AMDGPU: pip install 'portable[amd-offline]' or set PORTABLE_AMD_CLANG")


@functools.cache
def _linker_path() -> str:
    """A folder holding `lld`/`ld.lld` for clang to find; the ziglang wheel needs a wrapper."""
    if clang_command()[0] != sys.executable:
        return ""
    folder = _work_dir() / "bin"
    folder.mkdir(exist_ok=True)
    script = f'#!/bin/sh\n# clang runs "lld -flavor gnu ..."\nif [ "$1" = "-flavor" ]; then shift 2; fi\nexec "{sys.executable}" -m ziglang ld.lld "$@"\n'
    for name in ("lld", "ld.lld"):
        path = folder / name
        if not path.exists() or path.read_text() != script:
            tmp = folder / f".{name}.{os.getpid()}"
            tmp.write_text(script)
            tmp.chmod(tmp.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
            os.replace(tmp, path)
    return str(folder)


def _header() -> Path:
    custom = os.environ.get("PORTABLE_HIPRTC_HEADER")
    path = Path(custom) if custom else site_file("rocm", "amd_comgr", "hiprtc_runtime.h")
    if not path or not path.exists():
        raise ToolchainMissing("hiprtc_runtime.h not found: pip install 'portable[amd-offline]' or set PORTABLE_HIPRTC_HEADER")
    return path


def _device_libs() -> list[Path]:
    custom = os.environ.get("PORTABLE_AMD_DEVICE_LIBS")
    folder = Path(custom) if custom else site_file("triton", "backends", "amd", "lib")
    libs = [folder / "ocml.bc", folder / "ockl.bc"] if folder else []
    if not libs or not all(p.exists() for p in libs):
        raise ToolchainMissing("ocml.bc/ockl.bc not found: pip install 'portable[amd-offline]' or set PORTABLE_AMD_DEVICE_LIBS")
    return libs


def _run(args: list[str]) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if _linker_path():
        env["PATH"] = _linker_path() + os.pathsep + env.get("PATH", "")
    try:
        return subprocess.run([*clang_command(), *args], capture_output=True, text=True, env=env)
    except FileNotFoundError as e:
        raise ToolchainMissing(f"clang for AMDGPU not found ({e.filename}): pip install 'portable[amd-offline]' "
                               "or set PORTABLE_AMD_CLANG") from e


@functools.cache
def version() -> str:
    proc = _run(["--version"])
    if proc.returncode != 0:
        raise ToolchainMissing(f"clang --version failed: {proc.stderr.strip()}")
    return proc.stdout.splitlines()[0].strip()


def available() -> tuple[bool, str]:
    try:
        _header(), _device_libs()
        return True, version()
    except ToolchainMissing as e:
        return False, str(e)


def _control_bitcode(target: str) -> Path:
    tag = hashlib.sha256(version().encode()).hexdigest()[:12]
    path = _work_dir() / f"oclc_{target}_{tag}.bc"
    if not path.exists():
        with tempfile.TemporaryDirectory(prefix="portable-") as tmp:
            ir = Path(tmp, "oclc.ll")
            ir.write_text(_OCLC_IR.format(isa=_isa_version(target)))
            out = Path(tmp, "oclc.bc")
            proc = _run(["-target", "amdgcn-amd-amdhsa", f"-mcpu={target}", "-nogpulib", "-c", "-emit-llvm", str(ir), "-o", str(out)])
            if proc.returncode != 0:
                raise ToolchainMissing(f"building the oclc control bitcode failed: {proc.stderr.strip()}")
            os.replace(out, path)   # atomic: a concurrent builder writes the same bytes
    return path


def options(target: str, opts: dict) -> list[str]:
    """Portable options -> clang flags; the rtc.* rows spell the HIP side."""
    rtc = dialect_for(target)["rtc"]
    flags = ["-x", "hip", rtc.arch(target), "--cuda-device-only", "--no-gpu-bundle-output", "-nogpulib", "-nogpuinc",
             str(rtc.O3), str(rtc.std), "-D__HIPCC_RTC__", "-include", str(_header())]
    for lib in [*_device_libs(), _control_bitcode(target)]:
        flags += ["-Xclang", "-mlink-builtin-bitcode", "-Xclang", str(lib)]
    return flags + option_flags(target, opts, lineinfo=False)


def compile(source: str, target: str, opts: dict | None = None, name: str = "kernel.hip") -> Binary:
    flags = options(target, opts or {})
    with tempfile.TemporaryDirectory(prefix="portable-") as tmp:
        src = Path(tmp, name)
        src.write_text(source)
        code_path, asm_path = Path(tmp, "kernel.hsaco"), Path(tmp, "kernel.s")
        proc = _run([*flags, str(src), "-o", str(code_path)])
        log = proc.stderr
        if proc.returncode != 0:
            raise_compile_error(version(), target, log, source)
        asm_proc = _run([*flags, str(src), "-S", "-o", str(asm_path)])
        if asm_proc.returncode != 0:
            raise_compile_error(version(), target, asm_proc.stderr, source)
        code, asm = code_path.read_bytes(), asm_path.read_text()
    # stable options for the cache key: tool paths vary between machines, the flags do not
    return Binary(target=target, format="hsaco", code=code, compiler=version(),
                  options=tuple(f if not f.startswith("/") else Path(f).name for f in flags), log=log, asm=asm)


def kernel_asm(asm: str, kernel: str) -> str:
    """One kernel's part of `clang -S` output: from its `<kernel>:` label to its `.size <kernel>,`
    directive, where clang's `.Lfunc_end<N>` closes it (ValueError when absent)."""
    name = re.escape(kernel)
    start = re.search(rf"^{name}:", asm, re.M)
    end = start and re.search(rf"^\s*\.size\s+{name},", asm[start.end():], re.M)
    if not end:
        raise ValueError(f"no function {kernel!r} in the assembly")
    return asm[start.start():start.end() + end.start()]
