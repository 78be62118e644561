"""Peers from other libraries: offered only where they import and the format suits them; a peer
that disagrees with the reference or fails is recorded with its error and not timed."""
import pytest

import portable
from portable import peers, results
from portable.bench import _time_peer
from test_results import gpu_result


class FakeKernel:
    def __init__(self, ok):
        self.ok = ok

    def verify(self, inputs, result):
        return self.ok, "max abs 3.0e-01" if not self.ok else "ok"


def test_a_peer_that_disagrees_is_not_timed():
    prepared = []
    fn = lambda inputs: inputs["x"]           # noqa: E731
    fn.prepare = prepared.append
    entry = _time_peer(FakeKernel(False), fn, [{"x": 1}, {"x": 2}], repeats=3)
    assert entry == {"times_us": [], "error": "max abs 3.0e-01"}
    assert prepared == [{"x": 1}, {"x": 2}]    # every set prepared before the check


def test_a_peer_that_raises_is_recorded_with_its_error():
    def fn(inputs):
        raise ValueError("Invalid shape of q_nope\nmore")
    assert _time_peer(FakeKernel(True), fn, [{}], repeats=3) == {"times_us": [], "error": "ValueError: Invalid shape of q_nope"}


def test_a_peer_with_its_own_verify_is_checked_by_it():
    fn = lambda inputs: 1                     # noqa: E731
    fn.verify = lambda inputs, result: (False, "rel L2 3e-02 against the a16w4 reference")
    entry = _time_peer(FakeKernel(True), fn, [{}], repeats=3)
    assert entry == {"times_us": [], "error": "rel L2 3e-02 against the a16w4 reference"}


@pytest.mark.parametrize("mode", ["a16w4", "a4w4"])
def test_the_moe_torch_peer_is_checked_against_the_a16w4_reference(monkeypatch, mode):
    from portable.kernels import mxfp4_moe
    seen = []
    monkeypatch.setattr(mxfp4_moe.ref, "moe_reference", lambda **kw: seen.append(kw["mode"]) or "want")
    monkeypatch.setattr(mxfp4_moe, "compare", lambda result, want: (result == want, ""))
    (peer,) = portable.load("mxfp4_moe", mode=mode).peers().values()
    assert peer.verify({}, "want") == (True, "") and seen == ["a16w4"]


def test_a_failed_peer_entry_is_a_valid_result_row():
    result = gpu_result()
    results.add_row(result, {"kernel": "mla_decode", "shape": {"B": 4}, "params": {"kv_format": "bf16"},
                             "target": "sm_90a", "status": "ok", "times_us": [10.0, 11.0, 12.0], "flops": 1,
                             "bytes": 1, "static": None,
                             "peers": {"flashinfer 0.3.1 MLA": {"times_us": [], "error": "ValueError: x"}}})
    row = results.validate(result)["rows"][-1]
    assert row["peers"]["flashinfer 0.3.1 MLA"]["median_us"] is None


@pytest.mark.parametrize("fmt", ["bf16", "fp8", "mxfp4"])
def test_flashinfer_is_offered_for_bf16_caches_where_it_imports(monkeypatch, fmt):
    monkeypatch.setattr(peers, "available", lambda module: False)
    assert list(portable.load("mla_decode", kv_format=fmt).peers()) == ["torch bf16 bmm-softmax-bmm"]
    monkeypatch.setattr(peers, "available", lambda module: True)
    monkeypatch.setattr(peers, "FlashInferMLA", lambda: "peer")
    names = list(portable.load("mla_decode", kv_format=fmt).peers())
    assert any(n.startswith("flashinfer") for n in names) == (fmt == "bf16")
