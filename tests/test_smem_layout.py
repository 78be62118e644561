"""Shared-memory layouts of the kernels that keep an mbarrier (or tensor memory's address) in
shared memory. PTX ISA (mbarrier): an mbarrier must be invalidated before its memory is used for
anything else, and any mbarrier operation but init on memory that holds no valid mbarrier is
undefined; so no barrier may share a byte with a region live at the same time. CPU only: the
regions come from the Python that sizes them (MXFP4MoE.layout, MLADecode.layout), every
target, mode and tiling."""
import itertools
import re
from pathlib import Path

import pytest

import portable
from portable.data import load_table, templates_dir
from portable.kernels import mxfp4_moe
from portable.kernels.mxfp4_moe import SMEM_PHASES, MXFP4MoE, TILE_KINDS
from portable.targets import tiling

# the templates whose kernels' layouts this file checks (mla_decode's: its tensor copies)
LAID_OUT = {"mxfp4_moe_gemm_mma.j2", "mxfp4_moe_rs.j2",
            "mla_decode_common.j2", "mla_decode_heads_regs.j2", "mla_decode_heads_fp8.j2", "mla_decode_heads_fp8_regs.j2"}


def barrier_rows() -> list[str]:
    """Dialect rows that put an mbarrier or a tensor-memory allocation in shared memory."""
    return [r["key"] for r in load_table() if r["key"] and re.search(r"\bmbarrier\.init\b|\btcgen05\.alloc\b", r["cuda"])]


def test_only_the_laid_out_templates_make_barriers():
    """A template that starts using an mbarrier needs its regions laid out here."""
    keys = barrier_rows()
    assert {"sync.mbar_init", "umma.init"} <= set(keys), keys
    kernels = Path(portable.__file__).resolve().parent / "kernels"
    users = {p.name for p in [*templates_dir().glob("*.j2"), *kernels.rglob("*.j2")]
             if any(re.search(rf"\b{re.escape(k)}\(", p.read_text()) for k in keys)
             or re.search(r"\bmbarrier\b|\btcgen05\b", p.read_text())}
    assert users <= LAID_OUT, f"{sorted(users - LAID_OUT)}: barriers in shared memory; lay out their regions here"
    assert users == LAID_OUT, users


def variants():
    """Every (target, parameters) of mxfp4_moe whose tiling is valid, shared-memory layout once each."""
    seen = {}
    for target in portable.targets():
        kinds = [k for k in TILE_KINDS if k in tiling("mxfp4_moe", target)]
        for mode, tiles, mma, wfetch in itertools.product(("a16w4", "a4w4"), kinds, ("", "sync", "warpgroup", "warpgroup_rs"),
                                                        ("", "registers", "tma")):
            k = MXFP4MoE(mode=mode, tuning={"tiles": tiles, "mma": mma, "wfetch": wfetch})
            try:
                k.template_context(target)         # the tiling's own checks
            except portable.InputError:
                continue
            layout = k.layout(target)
            key = repr((target, [layout[g]["regions"] for g in (1, 2)]))
            seen.setdefault(key, (target, {"mode": mode, "tiles": tiles, "mma": mma, "wfetch": wfetch}, k.mma_path(target)))
    return list(seen.values())


VARIANTS = variants()


def moe(params: dict) -> MXFP4MoE:
    """A variant's kernel: its mode a parameter, the rest tuning knobs."""
    return MXFP4MoE(mode=params["mode"], tuning={k: v for k, v in params.items() if k != "mode"})


def live_together(a: dict, b: dict) -> bool:
    (a0, a1), (b0, b1) = ([SMEM_PHASES.index(p) for p in r["live"]] for r in (a, b))
    return a0 <= b1 and b0 <= a1


def clashes(regions: list[dict], barriers_only: bool) -> list[str]:
    return [f"{a['name']} [{a['start']}, {a['end']}) {a['live']} and {b['name']} [{b['start']}, {b['end']}) {b['live']}"
            for a, b in itertools.combinations(regions, 2)
            if (a["barrier"] or b["barrier"] or not barriers_only)
            and a["start"] < b["end"] and b["start"] < a["end"] and live_together(a, b)]


def test_the_barrier_kinds_are_all_covered():
    """The variants include every path that keeps a barrier in shared memory: tcgen05 (umma) and
    the warpgroup_rs TMA weight stages."""
    paths = {(target, path) for target, params, path in VARIANTS
             if any(r["barrier"] for r in moe(params).layout(target)[1]["regions"])}
    assert ("sm_100a", "umma") in paths and ("sm_90a", "warpgroup_rs") in paths, paths


@pytest.mark.parametrize("target,params,path", VARIANTS, ids=[f"{t}-{'-'.join(v for v in p.values() if v)}-{m}"
                                                               for t, p, m in VARIANTS])
def test_no_live_barrier_shares_bytes(target, params, path):
    layout = moe(params).layout(target)
    for gemm in (1, 2):
        L = layout[gemm]
        for r in L["regions"]:
            assert 0 <= r["start"] < r["end"] <= L["bytes"], (gemm, r, L["bytes"])
            assert not r["barrier"] or r["start"] % 8 == 0, (gemm, r)
        assert not clashes(L["regions"], barriers_only=True), (f"gemm{gemm}", clashes(L["regions"], True))
        # and nothing else shares bytes while live either (sC reuses the operand tiles after the K loop)
        assert not clashes(L["regions"], barriers_only=False), (f"gemm{gemm}", clashes(L["regions"], False))


def test_the_check_sees_a_barrier_under_the_output_tile(monkeypatch):
    """The umma scratch right past the operand tiles (the old placement) puts its mbarrier inside
    sC, which umma_store writes while the barrier is valid: the check fails it."""
    monkeypatch.setattr(mxfp4_moe, "_umma_scratch_at", lambda operands, c_bytes, u: -(-operands // 128) * 128)
    regions = MXFP4MoE(mode="a4w4", tuning={"tiles": "large"}).layout("sm_100a")[1]["regions"]
    found = clashes(regions, barriers_only=True)
    assert found and all("umma mbarrier" in c and "sC" in c for c in found), found


MLA_TENSOR_COPIES = [("bf16", "auto", {"loop": "heads", "scores": "regs", "copies": "tensor"}, 3),
                     ("fp8", "fp8x2", {"loop": "heads", "scores": "one", "copies": "tensor"}, 2),
                     ("fp8", "fp8", {"loop": "heads", "scores": "one", "copies": "tensor"}, 2),
                     ("fp8", "fp8", {"loop": "heads", "scores": "one", "copies": "tensor", "stages": 3}, 3)]


@pytest.mark.parametrize("fmt,mma,knobs,stages", MLA_TENSOR_COPIES)
def test_mla_tensor_copies_keep_their_barriers_apart(fmt, mma, knobs, stages):
    """mla_decode's tensor copies: one mbarrier a KV stage, 8-byte aligned, in a region of its own
    that no other region overlaps (every region lives for the whole kernel; the regs loop's row
    sums go over Q's dims 496..511 at the end, not over the barriers), within sm_90a's shared
    memory; on cp.async the barrier region is empty."""
    from portable.kernels.mla_decode import MLADecode

    lay = MLADecode(kv_format=fmt, mma=mma, tuning=knobs).layout("sm_90a")
    old = MLADecode(kv_format=fmt, mma=mma, tuning={**knobs, "copies": "cp.async"}).layout("sm_90a")
    assert lay["bar"] % 8 == 0 and lay["bytes"] <= portable.get_target("sm_90a").smem_per_block, lay
    assert region_ends(lay)["bar"] - lay["bar"] == 8 * stages, lay
    assert lay["bytes"] == old["bytes"] + 8 * stages, (lay, old)


@pytest.mark.parametrize("mma", ["fp8x2", "fp8"])
def test_mla_fp8_regs_loop_keeps_its_barriers_apart(mma):
    """The fp8 cache's "regs" loop (tensor copies only): three mbarriers, 8-byte aligned, in a
    region of their own; Q's row-major landing (the prologue's, over the V^T and P buffers) ends
    before the k-steps of Q kept in shared memory, which the same prologue writes."""
    from portable.kernels.mla_decode import MLADecode
    lay = MLADecode(kv_format="fp8", mma=mma, tuning={"loop": "heads", "scores": "regs"}).layout("sm_90a")
    assert lay["bar"] % 8 == 0 and lay["bytes"] <= portable.get_target("sm_90a").smem_per_block, lay
    assert region_ends(lay)["bar"] - lay["bar"] == 24, lay
    parts = 2 if mma == "fp8x2" else 1
    assert lay["vt"] + parts * 64 * lay["q_ld"] <= lay["q"], lay
    assert all(lay[n] % 1024 == 0 for n in ("kv", "vt", "p", "q")), lay      # (the 64-byte swizzle's atoms)


def region_ends(layout: dict) -> dict:
    """mla_decode's regions (MLADecode.layout) -> where each ends: the next start past its own
    (regions of no bytes start where the next one does)."""
    starts = {n: v for n, v in layout.items()
              if n not in ("bytes", "stage", "kv_tiles", "v_bufs", "raw_stage", "raw_row", "scw", "q_ld", "kq")}
    return {n: min((v for v in starts.values() if v > at), default=layout["bytes"]) for n, at in starts.items()}
