"""The host's time to queue one call beside the GPU's time for it: where the host's is longer, a
loop of calls without a CUDA graph runs at the host's pace, not at the benchmark's (which spins the
GPU before each timed call so that only the GPU's time is measured).

    python bench/host_time.py [--kernels mxfp4_moe,mla_decode] [--shape-set default] [--out DIR]

Host time: from the call to its return (the launches queued, nothing waited for), the device
synchronized after each so the queue never fills; median of --repeats. GPU time: the bench's.
The last two columns are the same call captured once in a CUDA graph and replayed.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

import portable
from portable.bench import _cases, _time_rotating
from portable.timing import capture


def host_us(fn, inputs, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        t = time.perf_counter()
        fn(inputs)
        times.append((time.perf_counter() - t) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernels", default="mxfp4_moe,mla_decode")
    ap.add_argument("--shape-set", default="default")
    ap.add_argument("--repeats", type=int, default=50)
    ap.add_argument("--out", default=None, help="also write the table to DIR/host_time.txt")
    args = ap.parse_args()
    lines = [f"{'kernel':11s} {'shape':46s} {'params':22s} {'host us':>8s} {'GPU us':>8s} {'graph: host':>12s} {'GPU us':>8s}"]
    for name, cls, shape, params in _cases(args.kernels.split(","), args.shape_set):
        k = cls(**params)
        inputs = k.make_inputs(shape, 0)
        for _ in range(5):
            k.run(inputs)
        host = host_us(k.run, inputs, args.repeats)
        gpu = statistics.median(_time_rotating(k.run, [inputs], args.repeats))
        graph, _ = capture(lambda: k.run(inputs))
        g_host = host_us(lambda _: graph.replay(), inputs, args.repeats)
        g_gpu = statistics.median(_time_rotating(lambda _: graph.replay(), [inputs], args.repeats))
        short = ", ".join(f"{key} {v}" for key, v in shape.items() if key not in ("d_hidden", "d_expert", "topk", "shared"))
        lines.append(f"{name:11s} {short:46s} {str(params):22s} {host:8.1f} {gpu:8.1f} {g_host:12.1f} {g_gpu:8.1f}")
        print(lines[-1], flush=True)
    if args.out:
        with open(f"{args.out}/host_time.txt", "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
