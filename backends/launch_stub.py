"""The launch stub (launch_stub.c): built once with the host's C compiler into the cache,
then loaded as an extension module. Where it cannot be built (no compiler, no Python
headers) or PORTABLE_LAUNCH=binding is set, `launcher` returns None and the runtimes launch
through their Python bindings; `status()` says which and why (`portable doctor` shows it).
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sysconfig
import tempfile
from pathlib import Path

from ..cache import cache_dir
from . import params

SOURCE = Path(__file__).with_name("launch_stub.c")
_why_not: list[str] = []


def _compiler() -> list[str] | None:
    cc = os.environ.get("CC") or (sysconfig.get_config_var("CC") or "cc").split()[0]
    for name in (cc, "cc", "gcc", "clang"):
        found = shutil.which(name)
        if found:
            return [found]
    return None


@functools.cache
def module():
    """The built stub module, or None (the reason in status())."""
    if os.environ.get("PORTABLE_LAUNCH", "") == "binding":
        _why_not.append("PORTABLE_LAUNCH=binding")
        return None
    try:
        return _load(_built())
    except (OSError, ImportError, subprocess.SubprocessError, _NotBuilt) as e:
        _why_not.append(str(e))
        return None


class _NotBuilt(Exception):
    pass


def _built() -> Path:
    """The stub's shared object in the cache, compiled on first use."""
    source = SOURCE.read_bytes()
    include = sysconfig.get_paths()["include"]
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    tag = hashlib.sha256(source + include.encode() + suffix.encode()).hexdigest()[:16]
    path = cache_dir() / "launch" / f"portable_launch_stub_{tag}{suffix}"
    if path.exists():
        return path
    cc = _compiler()
    if cc is None:
        raise _NotBuilt("no C compiler (cc, gcc or clang) on PATH")
    if not (Path(include) / "Python.h").exists():
        raise _NotBuilt(f"no Python headers (Python.h) in {include}")
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
        built = Path(tmp) / path.name
        run = subprocess.run(cc + ["-O2", "-shared", "-fPIC", f"-I{include}", str(SOURCE), "-o", str(built)],
                             capture_output=True, text=True, timeout=300)
        if run.returncode:
            raise _NotBuilt(f"{cc[0]} failed: {run.stderr.strip()[-400:]}")
        os.replace(built, path)         # atomic: another process building it too is fine
    return path


def _load(path: Path):
    loader = importlib.machinery.ExtensionFileLoader("portable_launch_stub", str(path))
    spec = importlib.util.spec_from_file_location("portable_launch_stub", path, loader=loader)
    stub = importlib.util.module_from_spec(spec)
    loader.exec_module(stub)
    return stub


@functools.cache
def _address(library: str, symbol: str) -> int | None:
    try:
        return ctypes.cast(getattr(ctypes.CDLL(library), symbol), ctypes.c_void_p).value
    except (OSError, AttributeError) as e:
        _why_not.append(f"{library}: {e}")
        return None


def launcher(library: str, symbol: str, function, kinds: tuple[str, ...]):
    """go(gx, gy, gz, bx, by, bz, smem, stream, *values) -> err for one kernel, calling `symbol`
    of the shared library `library` (the driver's launch function) through the stub; or None."""
    stub = module()
    address = _address(library, symbol) if stub is not None else None
    if address is None:
        return None
    _, offsets, size = params.layout(kinds)
    return stub.launcher(address, int(function), params.codes(kinds), offsets, size)


def status(library: str = "libcuda.so.1", symbol: str = "cuLaunchKernel") -> str:
    """'stub' where launches through `library` go through the stub, else 'binding (why)'."""
    if module() is not None and _address(library, symbol) is not None:
        return "stub"
    return f"binding ({'; '.join(dict.fromkeys(_why_not))})"
