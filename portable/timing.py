"""Timing on the GPU with device events: warm-up, then the median of many."""
from __future__ import annotations

import statistics

import torch


# GPU cycles to spin before each timed call (~500 us on a 2 GHz clock): the host enqueues the
# start event, the call and the end event while the GPU is still busy, so a small kernel's
# time is its own and not the host's launch overhead (mxfp4_moe's call checks its arguments
# and queues four launches: more host time than the 100 us spin first used here).
SPIN_CYCLES = 1_000_000


def time_gpu(fn, warmup: int = 5, repeats: int = 50, rotate=None) -> dict:
    """Time `fn()` with events around each call. `rotate(i)` runs before call i, outside the
    timed region (e.g. to switch input sets so the L2 does not flatter the result)."""
    spin = getattr(torch.cuda, "_sleep", None)
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
        if spin:
            spin(SPIN_CYCLES)
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    times = [s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends)]
    return {"times_us": times, "median_us": statistics.median(times)}


def capture(fn):
    """(graph, what the captured fn() returned): fn() captured in a CUDA graph after one warm-up
    call on a side stream (as torch asks). graph.replay() re-runs its launches on whatever the
    captured tensors then hold, into the same output tensors."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        result = fn()
    return graph, result
