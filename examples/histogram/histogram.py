"""histogram(x, bins): counts of int32 values in [0, bins), from examples/histogram/histogram.j2.

    counts = histogram(torch.randint(0, 256, (10**6,), dtype=torch.int32, device="cuda"))

Values outside [0, bins) are ignored, not clamped: `counts.sum()` is the number of in-range
values, and `counts` equals `torch.bincount(x[(x >= 0) & (x < bins)], minlength=bins)`.
"""
from functools import cache
from pathlib import Path

import torch

import portable

TEMPLATE = Path(__file__).with_name("histogram.j2")
BLOCK = 256


@cache
def _program(bins: int, block: int) -> portable.Program:
    # one program a bucket count: `bins` sizes the shared histogram, so it is a template parameter
    return portable.load(TEMPLATE, bins=bins, block=block)


def histogram(x: torch.Tensor, bins: int = 256, out: torch.Tensor | None = None, *,
              warp_aggregated: bool = True, block: int = BLOCK) -> torch.Tensor:
    """Counts of the int32 values of `x` (any shape) in buckets 0 .. bins-1 (bins <= 4096),
    as an int32 tensor of `bins` elements (written into `out` when given; a count past
    2**31 - 1 wraps).

    The kernel adds into its output with atomics, so the output is zeroed here first.
    `warp_aggregated` picks the kernel that merges equal values within a warp before the
    shared-memory atomic (histogram_warp): faster when values repeat, as in skewed data;
    False takes one shared-memory atomic a value (histogram_block)."""
    program = _program(bins, block)          # checks bins and block against the declaration
    if out is None:
        out = torch.empty(bins, dtype=torch.int32, device=x.device)
    elif out.numel() != bins or out.dtype != torch.int32:
        raise portable.InputError(f"out: expected an int32 tensor of {bins} elements (bins), "
                                  f"got {out.dtype} of shape {tuple(out.shape)}")
    out.zero_()       # the one output not poisoned by the tests: the kernel accumulates into it
    x = x.reshape(-1)                        # contiguous 1-D: copies only a strided input
    n = x.numel()
    if n == 0:
        return out
    # enough blocks to fill the GPU once (2048 threads an SM or CU), fewer for small inputs:
    # every block adds its whole histogram to `out`, so more blocks cost more global atomics
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else 1
    grid = min(-(-n // block), sms * max(1, 2048 // block))
    kernel = program.histogram_warp if warp_aggregated else program.histogram_block
    kernel[grid, block](x, out, n)
    return out
