"""Finding and running the command-line tools the offline compilers and reports use."""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from ..errors import ToolchainMissing


def site_file(package: str, *parts: str) -> Path | None:
    """A file inside an installed package, found without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        path = Path(root, *parts)
        if path.exists():
            return path
    return None


def nvidia_tool(name: str) -> str | None:
    """cuobjdump / nvdisasm: $PORTABLE_CUDA_BIN, the pip wheels, then PATH."""
    custom = os.environ.get("PORTABLE_CUDA_BIN")
    if custom and Path(custom, name).exists():
        return str(Path(custom, name))
    for sub in ("cu13", "cu12"):
        path = site_file("nvidia", sub, "bin", name)
        if path:
            return str(path)
    cuda_nvcc = site_file("nvidia", "cuda_nvcc", "bin", name)
    if cuda_nvcc:
        return str(cuda_nvcc)
    return shutil.which(name)


def run_tool(cmd: list[str], data: bytes | None = None, suffix: str = ".bin", env=None) -> str:
    """Run a tool on `data` written to a temporary file appended to `cmd`; return stdout."""
    with tempfile.TemporaryDirectory(prefix="portable-") as tmp:
        args = list(cmd)
        if data is not None:
            path = Path(tmp, "input" + suffix)
            path.write_bytes(data)
            args.append(str(path))
        proc = subprocess.run(args, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise ToolchainMissing(f"{Path(args[0]).name} failed ({proc.returncode}): {proc.stderr.strip()[:2000]}")
        return proc.stdout
