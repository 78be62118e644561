"""Disk cache: keyed, atomic, self-checking, clearable; a second process does not compile."""
import json
import os
import subprocess
import sys

import pytest

import portable
from portable import cache
from portable.backends.binary import Binary
from portable.build import build, stats


def sample(code=b"\x7fELF-code") -> Binary:
    return Binary(target="sm_90a", format="cubin", code=code, compiler="nvrtc 13.5", options=("-arch=sm_90a",),
                  log="ptxas info", asm="LDG.E.128", meta={"kernels": {"k": {"registers": 8}}})


def test_roundtrip_keeps_every_field():
    k = cache.key("src", "sm_90a", "nvrtc 13.5", {})
    cache.put(k, sample())
    got = cache.get(k)
    assert got == sample()


def test_key_changes_with_each_input():
    base = cache.key("src", "sm_90a", "nvrtc 13.5", {})
    assert len({base, cache.key("src2", "sm_90a", "nvrtc 13.5", {}), cache.key("src", "sm_100a", "nvrtc 13.5", {}),
                cache.key("src", "sm_90a", "nvrtc 13.0", {}), cache.key("src", "sm_90a", "nvrtc 13.5", {"fast_math": True})}) == 5


@pytest.mark.parametrize("damage", ["flip", "truncate", "garbage"])
def test_corrupted_entry_is_detected_removed_and_rebuilt(damage):
    k = cache.key(f"corrupt-{damage}", "sm_90a", "nvrtc 13.5", {})
    path = cache.put(k, sample())
    data = bytearray(path.read_bytes())
    if damage == "flip":
        data[-3] ^= 0xFF
    elif damage == "truncate":
        data = data[: len(data) // 2]
    else:
        data = bytearray(b"not a cache entry")
    path.write_bytes(bytes(data))
    assert cache.get(k) is None and not path.exists()
    cache.put(k, sample())
    assert cache.get(k) == sample()


def test_second_build_uses_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PORTABLE_CACHE_DIR", str(tmp_path))
    src = portable.render("vector_add", target="sm_120a", dtype="bfloat16", tuning={"vecs": 4})
    before = dict(stats)
    first = build(src, "sm_120a")
    assert (stats["compiled"], stats["cached"]) == (before["compiled"] + 1, before["cached"])
    second = build(src, "sm_120a")
    assert (stats["compiled"], stats["cached"]) == (before["compiled"] + 1, before["cached"] + 1)
    assert first == second


PROBE = """
import json, sys, portable
from portable.build import stats
portable.load("vector_add", dtype="bfloat16", tuning={"block": 128}).binary("sm_100a")
print(json.dumps(stats))
"""


def test_two_processes_compiling_at_once_both_succeed_then_a_third_hits_the_cache(tmp_path):
    env = dict(os.environ, PORTABLE_CACHE_DIR=str(tmp_path))
    procs = [subprocess.Popen([sys.executable, "-c", PROBE], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    third = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120, check=True)
    s = json.loads(third.stdout)
    assert s["compiled"] == 0 and s["cached"] == 1
    assert not list(tmp_path.rglob(".tmp-*"))            # no half-written files left behind


def test_cli_cache_clear_empties_it(capsys):
    from portable.cli import main
    cache.put(cache.key("x", "sm_90a", "nvrtc", {}), sample())
    assert cache.entries() >= 1
    assert main(["cache", "clear"]) == 0
    assert cache.entries() == 0
    assert "removed" in capsys.readouterr().out
