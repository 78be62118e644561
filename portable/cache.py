"""Disk cache of compiled binaries.

Key: sha256 over the rendered source, target, compiler name and version, and options.
Entry: MAGIC, sha256 of the body, newline, body (JSON metadata line + code bytes).
Writes go to a temporary file in the same folder and are renamed into place, so two
processes compiling the same kernel both succeed and a reader never sees half a file.
An entry whose checksum does not match is deleted and rebuilt.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

MAGIC = b"PORTABLE-BINARY-1\n"


def cache_dir() -> Path:
    root = os.environ.get("PORTABLE_CACHE_DIR")
    if not root:
        base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
        root = Path(base) / "portable"
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def key(source: str, target: str, compiler: str, options: dict) -> str:
    blob = json.dumps({"source": source, "target": target, "compiler": compiler, "options": options},
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def _path(k: str) -> Path:
    return cache_dir() / "binaries" / k[:2] / f"{k}.bin"


def get(k: str):
    """The cached Binary, or None when absent or corrupted (a corrupted entry is removed)."""
    from .backends.binary import Binary
    path = _path(k)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    head = len(MAGIC)
    body = data[head + 65:]
    if not data.startswith(MAGIC) or data[head:head + 64].decode(errors="replace") != hashlib.sha256(body).hexdigest():
        path.unlink(missing_ok=True)
        return None
    meta_line, _, code = body.partition(b"\n")
    meta = json.loads(meta_line)
    meta["options"] = tuple(meta["options"])
    return Binary(code=code, **meta)


def put(k: str, binary) -> Path:
    meta = {f: getattr(binary, f) for f in ("target", "format", "compiler", "options", "log", "asm", "meta")}
    body = json.dumps(meta).encode() + b"\n" + binary.code
    data = MAGIC + hashlib.sha256(body).hexdigest().encode() + b"\n" + body
    path = _path(k)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def clear() -> int:
    """Remove every cached binary; returns how many entries were removed."""
    folder = cache_dir() / "binaries"
    count = sum(1 for _ in folder.rglob("*.bin")) if folder.exists() else 0
    shutil.rmtree(folder, ignore_errors=True)
    return count


def entries() -> int:
    folder = cache_dir() / "binaries"
    return sum(1 for _ in folder.rglob("*.bin")) if folder.exists() else 0
