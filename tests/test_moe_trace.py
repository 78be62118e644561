"""bench/moe_trace.py: its tracer goes into every kernel of the module and the result compiles;
its residency table counts blocks right (CPU only)."""
import numpy as np
import pytest

import portable

from conftest import bench_module

moe_trace = bench_module("moe_trace")


def test_every_kernel_traced_and_compiles():
    from portable.build import build
    from portable.errors import ToolchainMissing
    k = portable.load("mxfp4_moe", tuning={"tiles": "skinny"})
    source = moe_trace.traced(k.source("sm_90a"))
    for name in ("moe_route", "moe_gemm1", "moe_gemm2", "moe_gemm2_shared", "moe_combine"):
        assert f"PTrace _ptrace({moe_trace.KERNELS.index(name)});" in source.split(f"void {name}(", 1)[1][:2000], name
    try:
        binary = build(source, "sm_90a", {}, purpose="run")
    except ToolchainMissing as e:
        pytest.skip(str(e))
    assert binary.code


def test_residency_counts_blocks():
    # kernel a: two blocks over [0, 4) and [2, 4); kernel b: one block over [3, 5)
    spans = [(np.array([0.0, 2.0]), np.array([4.0, 4.0])), (np.array([3.0]), np.array([5.0]))]
    edges, table = moe_trace.residency(spans, 2.0)
    assert list(edges) == [0.0, 2.0, 4.0]
    assert table == [[1.0, 0.0], [2.0, 0.5], [0.0, 0.5]]
