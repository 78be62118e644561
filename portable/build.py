"""Render -> compile -> cache: the one road every kernel travels to a Binary."""
from __future__ import annotations

import time

from . import cache
from .backends import compiler_for

# Counters so tests and benchmarks can show whether the compiler ran.
stats = {"compiled": 0, "cached": 0, "compile_seconds": 0.0, "load_seconds": 0.0}


def build(source: str, target: str, opts: dict | None = None, purpose: str = "report"):
    opts = opts or {}
    compiler = compiler_for(target, purpose)
    k = cache.key(source, target, f"{compiler.__name__.rsplit('.', 1)[-1]} {compiler.version()}", opts)
    t0 = time.perf_counter()
    binary = cache.get(k)
    if binary is not None:
        stats["cached"] += 1
        stats["load_seconds"] += time.perf_counter() - t0
        return binary
    binary = compiler.compile(source, target, opts)
    cache.put(k, binary)
    stats["compiled"] += 1
    stats["compile_seconds"] += time.perf_counter() - t0
    return binary
