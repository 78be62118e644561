"""bench/load_probe.py: every pattern compiles for sm_90a with the loads or copies it names and
no spills (CPU only; the timings need the H100)."""
import pytest

from portable.errors import ToolchainMissing

from conftest import bench_module

load_probe = bench_module("load_probe")

# what each pattern's SASS must hold: its global reads
READS = {"skinny": "LDG.E.128", "rows": "LDG.E.128", "flat": "LDG.E.128", "async": "LDGSTS.E.BYPASS.128",
         "async_all": "LDGSTS.E.BYPASS.128", "bulk_all": "UBLKCP", "ldg_sts_all": "LDG.E.128"}


@pytest.mark.parametrize("pattern", list(load_probe.PATTERNS))
def test_pattern_compiles_with_its_reads(pattern):
    assert set(READS) == set(load_probe.PATTERNS)
    try:
        binary = load_probe.compile_probe(pattern, 2 if pattern in ("skinny", "rows", "flat", "async") else 1)
    except ToolchainMissing as e:
        pytest.skip(str(e))
    assert READS[pattern] in binary.asm, (pattern, READS[pattern])
    assert binary.meta["kernels"]["probe"]["spill_bytes"] == 0
