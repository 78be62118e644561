"""Timing on the GPU with device events: warm-up, then the median of many."""
from __future__ import annotations

import statistics

import torch


def time_gpu(fn, warmup: int = 5, repeats: int = 50, rotate=None) -> dict:
    """Time `fn()` with events around each call. `rotate(i)` runs before call i, outside the
    timed region (e.g. to switch input sets so the L2 does not flatter the result)."""
    for i in range(warmup):
        if rotate:
            rotate(i)
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    for i in range(repeats):
        if rotate:
            rotate(i)
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    times = [s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends)]
    return {"times_us": times, "median_us": statistics.median(times)}
