"""softmax: row softmax over the last dim of a 2-D float32 or bfloat16 tensor (softmax.j2).

    y = softmax(x)                   # like torch.softmax(x, dim=-1), accumulated in fp32
    softmax(x, out=y)                # into a given tensor of x's shape and dtype

Rows of up to WARP_ROW_MAX elements get a warp (wave) each, longer rows a block each.
"""
from __future__ import annotations

from pathlib import Path

import torch

import portable

BLOCK = 256
WARP_ROW_MAX = 1024          # longer rows take a block each, so no row is one warp's long serial work
_TEMPLATE = Path(__file__).with_name("softmax.j2")
_PROGRAMS = {dt: portable.load(_TEMPLATE, dtype=dt, block=BLOCK) for dt in (torch.float32, torch.bfloat16)}
_ENTRIES: dict = {}          # dtype -> (softmax_warp, softmax_block), on first use


def program(dtype: torch.dtype) -> portable.Program:
    """The loaded program for `dtype`: entries softmax_warp and softmax_block, each launched
    as `[grid, BLOCK](x, out, rows, n)` (each loops over rows, so any grid covers them)."""
    return _PROGRAMS[dtype]


def softmax(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """softmax(x, dim=-1) of a contiguous 2-D GPU tensor, into `out` (allocated like x when not given)."""
    if not isinstance(x, torch.Tensor) or x.dim() != 2:
        raise portable.InputError(f"x: expected a 2-D torch.Tensor (rows, n), got "
                                  f"{tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__}")
    if x.dtype not in _PROGRAMS:
        raise portable.InputError(f"x: expected dtype float32 or bfloat16, got {x.dtype}")
    if out is None:
        out = torch.empty_like(x)
    elif out.shape != x.shape:
        raise portable.InputError(f"out: expected shape {tuple(x.shape)} like x, got {tuple(out.shape)}")
    entries = _ENTRIES.get(x.dtype)
    if entries is None:
        entries = _ENTRIES[x.dtype] = (_PROGRAMS[x.dtype].softmax_warp, _PROGRAMS[x.dtype].softmax_block)
    rows, n = x.shape
    if rows and n:      # dtypes, devices and contiguity are checked by the launcher
        if n <= WARP_ROW_MAX:
            # blocks of BLOCK // 32 rows; a block of 64-lane waves holds half as many, and the
            # kernel's row loop takes the rest
            entries[0][-(-rows // (BLOCK // 32)), BLOCK](x, out, rows, n)
        else:
            entries[1][min(rows, 1 << 30), BLOCK](x, out, rows, n)
    return out


softmax.program = program
