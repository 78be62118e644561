"""axpby: out = a*x + b*y elementwise for float32, bfloat16 and float16 tensors (axpby.j2).

    out = axpby(x, y, a=2.0, b=-0.5)          # a new tensor like x
    axpby(x, y, 2.0, -0.5, out=x)              # or into a given one (in place is fine)
    k = axpby.entry(torch.float16)             # raw: k[axpby.grid(n, dt), BLOCK](x, y, out, a, b, n)

Lean on purpose (it is the launch-overhead benchmark): programs load at import, and a call
checks the shapes, looks up the launch bound to its grid by (dtype, shape) and launches. The
launcher checks dtypes, devices and contiguity, the kernel checks alignment. Pass a and b as floats: the launcher's fast path
takes a Python float for a `float` argument (an int takes its slower, fully checked path).
"""
from __future__ import annotations

from pathlib import Path

import torch

import portable

BLOCK = 256
_TEMPLATE = Path(__file__).with_name("axpby.j2")
_PROGRAMS = {dt: portable.load(_TEMPLATE, dtype=dt, block=BLOCK) for dt in (torch.float32, torch.bfloat16, torch.float16)}
_PER_BLOCK = {dt: BLOCK * (16 // dt.itemsize) for dt in _PROGRAMS}    # one 16-byte vector a thread
_ENTRIES: dict = {}                                                   # dtype -> its kernel, on first use
_LAUNCH: dict = {}                                                    # (dtype, shape) -> (bound launch, n)


def program(dtype: torch.dtype) -> portable.Program:
    """The loaded program for `dtype`: its source and static report per target."""
    return _PROGRAMS[dtype]


def entry(dtype: torch.dtype) -> portable.Entry:
    """The kernel for `dtype`, to launch raw (keep it: `program(dt)[...]` looks it up per call)."""
    k = _ENTRIES.get(dtype)
    if k is None:
        k = _ENTRIES[dtype] = _PROGRAMS[dtype].axpby
    return k


def grid(n: int, dtype: torch.dtype) -> int:
    return -(-n // _PER_BLOCK[dtype]) or 1


def axpby(x: torch.Tensor, y: torch.Tensor, a: float = 1.0, b: float = 1.0,
          out: torch.Tensor | None = None) -> torch.Tensor:
    """a*x + b*y in fp32, rounded once to x's dtype, into `out` (allocated like x when not
    given). x, y and out: contiguous GPU tensors of one shape and dtype."""
    shape = x.shape
    if out is None:
        out = torch.empty_like(x)           # x's shape by construction
    elif out.shape != shape:
        raise portable.InputError(f"out: expected x's shape {tuple(shape)}, got {tuple(out.shape)}")
    if y.shape != shape:
        raise portable.InputError(f"y: expected x's shape {tuple(shape)}, got {tuple(y.shape)}")
    call = _LAUNCH.get((x.dtype, shape))
    if call is None:
        call = _launch(x, shape)
    call[0](x, y, out, a, b, call[1])
    return out


def _launch(x: torch.Tensor, shape) -> tuple:
    """(the launcher bound to its grid, n) for x's dtype and shape, kept for the next call."""
    dt = x.dtype
    if dt not in _PROGRAMS:
        raise portable.InputError(f"x: expected dtype float32, bfloat16 or float16, got {dt}")
    n = x.numel()
    call = (entry(dt)[grid(n, dt), BLOCK] if n else lambda *args: None), n
    if len(_LAUNCH) > 1024:             # shapes follow the caller's: keep the table small
        _LAUNCH.clear()
    _LAUNCH[dt, shape] = call
    return call

axpby.program, axpby.entry, axpby.grid = program, entry, grid
