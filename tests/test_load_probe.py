"""bench/load_probe.py: every pattern compiles for sm_90a with the loads or copies it names and
no spills (CPU only; the timings need the H100)."""
import pytest

from portable.errors import ToolchainMissing

from conftest import bench_module

load_probe = bench_module("load_probe")

# what each pattern's SASS must hold: its global reads
READS = {"skinny": "LDG.E.128", "rows": "LDG.E.128", "flat": "LDG.E.128", "async": "LDGSTS.E.BYPASS.128",
         "async_all": "LDGSTS.E.BYPASS.128", "bulk_all": "UBLKCP", "ldg_sts_all": "LDG.E.128",
         "stream": "LDGSTS.E.BYPASS.128"}


@pytest.mark.parametrize("pattern", list(load_probe.PATTERNS))
def test_pattern_compiles_with_its_reads(pattern):
    assert set(READS) == set(load_probe.PATTERNS)
    try:
        binary = load_probe.compile_probe(pattern, 2 if pattern in ("skinny", "rows", "flat", "async", "stream") else 1)
    except ToolchainMissing as e:
        pytest.skip(str(e))
    assert READS[pattern] in binary.asm, (pattern, READS[pattern])
    assert binary.meta["kernels"]["probe"]["spill_bytes"] == 0


@pytest.mark.parametrize("pattern", ["skinny", "stream"])
def test_work_adds_the_decode_sized_load(pattern):
    """--work puts each piece through LOP3 + PRMT chains and bf16 MMAs (without it: neither)."""
    try:
        idle, busy = (load_probe.compile_probe(pattern, 4, work) for work in (0, 9))
    except ToolchainMissing as e:
        pytest.skip(str(e))
    assert "HMMA" not in idle.asm and "HMMA" in busy.asm
    assert busy.asm.count("PRMT") >= 8 * 9, busy.asm.count("PRMT")
    assert busy.meta["kernels"]["probe"]["spill_bytes"] == 0
