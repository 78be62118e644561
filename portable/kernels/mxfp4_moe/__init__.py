"""mxfp4_moe: fused MXFP4 mixture of experts, routing given (mxfp4_moe.j2 beside this file, its paths
in the templates beside it).

    moe = portable.load("mxfp4_moe", mode="a16w4")          # or "a4w4"
    big = portable.load("mxfp4_moe", tuning={"tiles": "large"})   # a tiling pinned (knobs: mxfp4_moe.j2)
    out = moe(hidden_states, w13, w13_scale, w2, w2_scale, topk_weights, topk_ids,
              d_hidden=7168, d_expert=256)

Four launches on torch's current stream, no host sync once the ids are checked:
moe_route (pairs -> expert-ordered tiles) -> moe_gemm1 (gate/up, SwiGLU) -> moe_gemm2 (down,
times the routing weight) -> moe_combine (sum of each token's slots in slot order: the result
is the same bit for bit on every run, no atomics). a4w4 on the bf16 path adds moe_quantize_x
(x rounded through MXFP4 once) and, with skinny tiles, moe_quantize_h; a16w4 on sm_90a's
warpgroup_rs tiles adds moe_permute_x (x in the K order those GEMMs read; in f16, scaled per
token, where the tiling's gemm1_type is "f16"). Weights stay FP4 +
E8M0 in memory; they are decoded in registers (skinny tiles, sm_90a's warpgroup_rs tiles) or
shared memory (the other bf16 tiles), or fed to the target's block-scaled FP4 matrix instruction
as they are (a4w4 where targets.toml gives the target an `fp4_matrix`).
"""
from __future__ import annotations

import math

import torch

from ...device import device_target
from ...dtypes import bf16_half_ulp
from ...errors import InputError
from ...formats import MX_BLOCK, scale_row_max
from . import reference as ref
from ...targets import get_target, tiling
from ..base import NO_MAP, Kernel

E_MAX = 1024                 # experts moe_route can count in shared memory
ROUTE_THREADS = 1024
TILE_FIELDS = ("bm", "bn", "bk", "warps", "warps_m")
SKINNY_FIELDS = ("ahead", "xahead", "mt", "min_blocks", "ksplit",              # per GEMM: 1, then 2
                 "ahead2", "xahead2", "mt2", "min_blocks2", "ksplit2", "shared2_mt", "shared2_warps", "shared2_min_blocks")
SKINNY_DEFAULTS = {"xahead": 1, "xahead2": 1, "raster": "tile",     # where a target's [skinny] row leaves them out
                   "shared2_k": 0, "shared2_mt": 2, "shared2_warps": 4, "shared2_min_blocks": 1}
SKINNY_KINDS = ("skinny", "skinny_wide")     # skinny_wide: the [skinny] row with its own overrides (more rows a tile)
TILE_KINDS = SKINNY_KINDS + ("small", "medium", "large")
BPAIR_GEMMS = {"none": 0, "gemm1": 1, "gemm2": 2, "both": 3}     # bpair: a bit a GEMM (the template's BPAIR)
# A GEMM kernel's phases in order, for the lifetimes in layout()'s "regions": the tile's rows read
# and barriers set up, the K loop, the accumulators stored to sC (umma_release ends it), the epilogue
SMEM_PHASES = ("setup", "loop", "store", "epilogue")


# DeepSeek-R1 (d_hidden 7168, top-8 routed + 1 shared) at two expert widths, gpt-oss-120b
SHAPES = ([{"model": "R1 E257", "M": M, "E": 257, "d_hidden": 7168, "d_expert": 256, "topk": 8, "shared": 1}
           for M in (4, 64, 256)]
          + [{"model": "R1 E33", "M": M, "E": 33, "d_hidden": 7168, "d_expert": 2048, "topk": 8, "shared": 1}
             for M in (64, 256, 1024)]
          + [{"model": "gpt-oss", "M": M, "E": 128, "d_hidden": 2880, "d_expert": 2880, "topk": 4, "shared": 0}
             for M in (1, 32, 1024)])


class MXFP4MoE(Kernel):
    NAME = "mxfp4_moe"
    TEMPLATE = "mxfp4_moe.j2"
    ENTRY = "moe_gemm1"
    DYNAMIC_SMEM = True
    CHECK_VARIANTS = [{"mode": m} for m in ref.MODES]

    # --- per target ---------------------------------------------------------------------
    def tiles(self, target: str) -> dict:
        table = tiling(self.NAME, target)
        kind = self.tile_kind(target)
        if kind in SKINNY_KINDS and self.small_kind(target) != "skinny":
            raise InputError(f"tiles: {kind!r} multiplies decoded bf16 weights; {target} in mode "
                             f"{self.params['mode']!r} takes the {self.matrix_path(target)} path or has no [skinny] tiling")
        if kind not in table:
            raise InputError(f"tiles: {target} has no [{kind}] tiling in tuning.toml (it has "
                             f"{', '.join(k for k in TILE_KINDS if k in table)})")
        t = dict(table.get(f"{kind}_{self.mma_path(target)}", table[kind]))      # e.g. [small_umma], [large_warpgroup]
        if kind == "skinny_wide":
            t = {**table["skinny"], **t}
        t.update({k: self.tuning[k] for k in TILE_FIELDS + SKINNY_FIELDS + ("bn2", "raster", "stages", "groups", "gemm1_type", "gemm2_type", "wfetch", "wstages", "bpair")
                  if self.tuning[k]})
        t.setdefault("bn2", t.get("bn"))
        if kind in SKINNY_KINDS:
            t = {**SKINNY_DEFAULTS, **t}
        return t

    def matrix_path(self, target: str) -> str:
        """"bf16" (operands decoded to bf16 for the target's bf16 instruction) or the target's FP4
        matrix path for a4w4 ("mma4": block-scaled FP4 from warp fragments; "umma": tcgen05)."""
        return get_target(target).limits.get("fp4_matrix", "bf16") if self.params["mode"] == "a4w4" else "bf16"

    def mma_path(self, target: str) -> str:
        """The template's MMA_PATH: the matrix path, except that bf16 small/large tiles take
        warpgroup MMA ("warpgroup", or "warpgroup_rs" with A from registers) where `mma` (the
        knob, else the target's tuning table) says so and the table has a [KIND_MMA] tiling
        for them (sm_90a: large, medium)."""
        path = self.matrix_path(target)
        table = tiling(self.NAME, target)
        kind = self.tile_kind(target)
        want = self.tuning["mma"] or table.get("mma", "sync")
        if path != "bf16" or kind in SKINNY_KINDS or want == "sync":
            return path
        if f"{kind}_{want}" not in table:
            if self.tuning["mma"]:
                raise InputError(f"mma: {want!r} needs a [{kind}_{want}] tiling for {target} in tuning.toml")
            return path
        return want

    def small_kind(self, target: str) -> str:
        """The tiling for decode-sized batches: "skinny" where the target has one and the call
        multiplies bf16 (the FP4 instruction paths take "small")."""
        return "skinny" if "skinny" in tiling(self.NAME, target) and self.matrix_path(target) == "bf16" else "small"

    def tile_kind(self, target: str) -> str:
        """The tiling this kernel object compiles: its `tiles`, "auto" standing for the
        decode-sized kind (a call with "auto" picks a variant per batch: pick_tiles)."""
        return self.small_kind(target) if self.tuning["tiles"] == "auto" else self.tuning["tiles"]

    def skinny(self, target: str) -> bool:
        """Whether this kernel runs the skinny GEMMs on `target`."""
        return self.tile_kind(target) in SKINNY_KINDS

    def variant(self, tiles: str, **over) -> "MXFP4MoE":
        """This kernel with `tiles` and the tuning knobs in `over` (built once, then cached)."""
        if self.tuning["tiles"] == tiles and not over:
            return self
        key = (tiles, tuple(sorted(over.items())))
        variants = self.__dict__.setdefault("_variants", {})
        if key not in variants:
            variants[key] = MXFP4MoE(target=self.target, tuning={**self.tuning, "tiles": tiles, **over}, **self.params)
        return variants[key]

    def auto_variant(self, pairs: int, experts: int, d_hidden: int, target: str, De: int = 0) -> "MXFP4MoE":
        """The variant a call with tiles="auto" runs: pick_tiles' kind, and on the medium tiles
        the target's `medium_deep` knobs from `medium_deep_from_hidden` (tuning.toml) where
        the caller left them at 0 (gemm2 in f16 where the stored d_expert De fits it)."""
        kind = self.pick_tiles(pairs, experts, target)
        table = tiling(self.NAME, target)
        over = {}
        if kind == "medium" and d_hidden >= table.get("medium_deep_from_hidden", math.inf):
            over = {k: v for k, v in table["medium_deep"].items() if not self.tuning[k]}
            if over.get("gemm2_type") == "f16" and De > self.variant(kind).h16_max_cols(target):
                del over["gemm2_type"]
            if "bpair" in over and not self.variant(kind, **over).bpair_fits(target):
                del over["bpair"]             # e.g. the caller's TMA weights or mma path
        return self.variant(kind, **over)

    def h16_max_cols(self, target) -> int:
        """The widest h the f16 gemm2 takes: rescale_h keeps a byte a 32-value group of the tile's
        rows in the block's fp32 tile (BM rows of LDC floats)."""
        return 32 * 4 * self.layout(target)[1]["ldc"]

    def layout(self, target: str) -> dict:
        """Shared-memory layout of both GEMMs (byte offsets and leading dimensions): the one place
        the template and dynamic_smem read it from. "regions" lists what each offset holds and in
        which phases of the kernel (SMEM_PHASES) it is live, for tests/test_smem_layout.py."""
        if self.skinny(target):                      # static shared memory only
            return {1: {"bytes": 0, "regions": []}, 2: {"bytes": 0, "regions": []}}
        t = self.tiles(target)
        bm, bn, bk, bn2 = t["bm"], t["bn"], t["bk"], t["bn2"]
        path = self.matrix_path(target)
        wstages = t.get("wstages", 0) if self.tma(target) else 0      # the weights' shared stages (wfetch "tma")
        out = {}
        for which, nb in ((1, 2 * bn), (2, bn2)):
            lda, lda4, ldc = bk + 8, bk // 2 + 16, nb + 4
            off_scratch = off_w = 0
            c_bytes = bm * ldc * 4
            regions = []

            def region(name, start, size, live, barrier=False):
                regions.append({"name": name, "start": start, "end": start + size, "live": live, "barrier": barrier})
            if path != "bf16":
                off_as = bm * lda4
                off_b = _align(off_as + bm * (bk // 32))
                off_bs = off_b + nb * lda4
                operands = off_bs + nb * (bk // 32)
                for name, start, size in (("sA4", 0, bm * lda4), ("sAs", off_as, bm * (bk // 32)),
                                          ("sB4", off_b, nb * lda4), ("sBs", off_bs, nb * (bk // 32))):
                    region(name, start, size, ("loop", "loop"))
                if path == "umma":
                    u = umma_offsets(nb, bk)
                    off_scratch = _umma_scratch_at(operands, c_bytes, u)
                    operands = off_scratch + u["bytes"]
                    region("umma staging", off_scratch, u["off_bar"], ("loop", "loop"))
                    # umma_init .. umma_release, which runs after umma_store has filled sC
                    region("umma mbarrier", off_scratch + u["off_bar"], 8, ("setup", "store"), barrier=True)
                    region("umma tmem slot", off_scratch + u["off_tmem"], 4, ("setup", "setup"))
            elif self.mma_path(target) == "warpgroup":   # two stages of unpadded swizzled tiles
                off_as = off_bs = 0
                off_b = 2 * bm * bk * 2
                operands = off_b + 2 * nb * bk * 2
                region("sA stages", 0, off_b, ("loop", "loop"))
                region("sB stages", off_b, 2 * nb * bk * 2, ("loop", "loop"))
            elif self.mma_path(target) == "warpgroup_rs":   # the activations' stages (and the weights' with TMA)
                off_as = off_bs = off_b = 0
                operands = t["stages"] * bm * bk * 2
                region("activation stages", 0, operands, ("loop", "loop"))
                if wstages:                   # each stage one K slice of both warpgroups' 64 x groups rows
                    off_w = _align(operands, 128)
                    operands = off_w + wstages * 128 * t.get("groups", 1) * 64
                    region("weight stages", off_w, operands - off_w, ("loop", "loop"))
            else:
                off_as = off_bs = 0
                off_b = bm * lda * 2
                operands = off_b + nb * lda * 2
                region("sA", 0, off_b, ("loop", "loop"))
                region("sB", off_b, nb * lda * 2, ("loop", "loop"))
            off_rows = _align(max(operands, c_bytes))
            off_bar = _align(off_rows + bm * 4, 8)         # the weight stages' mbarriers
            region("sC", 0, c_bytes, ("store", "epilogue"))
            region("sRow", off_rows, bm * 4, ("setup", "epilogue"))
            if wstages:                       # initialised in the setup, never invalidated: live to the end
                region("weight stage mbarriers", off_bar, 8 * wstages, ("setup", "epilogue"), barrier=True)
            out[which] = {"lda": lda, "lda4": lda4, "ldc": ldc, "off_as": off_as, "off_b": off_b, "off_bs": off_bs,
                          "stage_a": bm * bk, "stage_b": nb * bk,
                          "off_scratch": off_scratch, "off_rows": off_rows, "bytes": off_bar + 8 * wstages,
                          "stages": t.get("stages", 2), "groups": t.get("groups", 1),
                          "off_w": off_w, "off_bar": off_bar, "wstages": wstages, "regions": regions}
        return out

    def template_context(self, target):
        t = self.tiles(target)
        tgt = get_target(target)
        mma_n = tgt.mma_shape[1]
        if self.skinny(target):
            if t["bm"] % mma_n or t["warps"] not in (1, 2, 4, 8) or any(t.get(k, 0) > t["warps"] for k in ("ksplit", "ksplit2")):
                raise InputError(f"tiling {t} on {target}: skinny tiles need bm a multiple of {mma_n} "
                                 f"(the instruction's N), 1, 2, 4 or 8 warps and ksplit/ksplit2 at most the warps")
            ahead, xahead = (t["ahead"], t["ahead2"]), (t["xahead"], t["xahead2"])
            return {"MODE": self.params["mode"], "MMA_PATH": "bf16", "SKINNY": True, "BM": t["bm"], "WARPS": t["warps"],
                    "SK_AHEAD": ahead, "SK_XAHEAD": xahead, "SK_MT": (t["mt"], t["mt2"]),
                    "RASTER": t["raster"],
                    "SK_UNROLL": tuple(math.lcm(a + 1, x + 1) for a, x in zip(ahead, xahead)),
                    "MIN_BLOCKS": (t["min_blocks"], t["min_blocks2"]), "E_MAX": E_MAX,
                    "SHARED2_K": self.shared2_k(t),
                    "SHARED2_MT": t["shared2_mt"], "SHARED2_WARPS": t["shared2_warps"],
                    "SHARED2_MIN_BLOCKS": t["shared2_min_blocks"]}
        bm, bn, bk, warps, wm = (t[k] for k in TILE_FIELDS)
        wn = warps // wm
        problems = []
        if bn % 32 or bk % 128:
            problems.append("bn must be a multiple of 32 and bk of 128 (whole MX blocks, either FP4 instruction)")
        if self.matrix_path(target) == "umma":         # one 128-row tcgen05 MMA a block, 4 warps
            if bm != 128 or warps != 4 or 2 * bn > 256:
                problems.append("tcgen05 tiles need bm = 128, warps = 4 and 2 * bn <= 256")
        elif self.mma_path(target) == "warpgroup_rs":     # two warpgroups of 64 weight rows
            groups = t.get("groups", 1)
            if ("wgmma" not in tgt.features or warps != 8 or bm not in (64, 128, 256) or bk != 128 or groups not in (1, 2)
                    or bn != 64 * groups or t["bn2"] != 128 * groups or t.get("stages", 0) < 3):
                problems.append(f"warpgroup_rs tiles need a target with wgmma ({target}: "
                                f"{'yes' if 'wgmma' in tgt.features else 'no'}), 8 warps, bm 64, 128 or 256, bk 128, "
                                f"1 or 2 groups, bn = 64 x groups, bn2 = 128 x groups and 3 or more stages")
        elif self.mma_path(target) == "warpgroup":        # a warpgroup per 64 rows, all columns
            if "wgmma" not in tgt.features or bm != 16 * warps or bn not in (32, 64, 128) or t["bn2"] not in (64, 128, 256):
                problems.append(f"warpgroup MMA tiles need a target with wgmma ({target}: "
                                f"{'yes' if 'wgmma' in tgt.features else 'no'}), bm = 16 x warps, bn 32, 64 or 128 and bn2 64, 128 or 256")
        else:
            if bm % (16 * wm) or warps % wm:
                problems.append(f"bm = {bm} must split into warps_m = {wm} groups of 16-row tiles")
            if t["bn2"] != bn:
                problems.append(f"bn2 = {t['bn2']}: only warpgroup MMA tiles take their own gemm2 width")
            for nb in (2 * bn, bn):
                if nb % (wn * mma_n):
                    problems.append(f"{nb} columns do not split over {wn} warps of {mma_n}-wide instructions")
        layout = self.layout(target)
        smem = max(v["bytes"] for v in layout.values())
        if smem > tgt.smem_per_block:
            problems.append(f"{smem} bytes of shared memory, {target} has {tgt.smem_per_block}")
        if BPAIR_GEMMS[t.get("bpair", "none")] and not self.bpair_fits(target):
            problems.append(f"bpair {t['bpair']!r}: one barrier a group of K slices takes warpgroup_rs tiles with "
                            f"wfetch 'registers' and an even number of stages")
        if self.tma(target) and ("tma" not in tgt.features or t.get("wstages", 0) < 2):
            problems.append(f"wfetch 'tma' needs a target with tensor-map copies ({target}: "
                            f"{'yes' if 'tma' in tgt.features else 'no'}) and wstages of 2 or more")
        fetch = (t.get("ahead", 1), t.get("ahead2", 1))    # K slices fetched ahead, per GEMM
        most = 4 if self.mma_path(target) == "warpgroup_rs" else 2    # a register ring of any depth there
        if not all(1 <= f <= most for f in fetch):
            problems.append(f"ahead/ahead2 = {fetch}: these tiles fetch 1 to {most} K slices ahead")
        if problems:
            raise InputError(f"tiling {t} on {target}: " + "; ".join(problems))
        return {"MODE": self.params["mode"], "MMA_PATH": self.mma_path(target), "SKINNY": False, "BM": bm, "BN": bn, "BN2": t["bn2"], "BK": bk, "FETCH": fetch,
                "RASTER": t.get("raster", "tile"),
                "MIN_BLOCKS": (t.get("min_blocks", 1), t.get("min_blocks2", 1)),
                "WARPS": warps, "WARPS_M": wm, "E_MAX": E_MAX, "LAYOUT": layout, "RS_F16": self.rs_f16(target),
                "RS_H16": self.rs_h16(target), "WFETCH": "tma" if self.tma(target) else "registers",
                "BPAIR": BPAIR_GEMMS[t.get("bpair", "none")]}

    def bpair_fits(self, target) -> bool:
        """Whether the K loop can take one block barrier a group of slices (bpair): warpgroup_rs
        tiles whose weights come by loads (TMA stages rely on a barrier a slice) and an even
        number of activation stages (two groups of stages / 2)."""
        return (self.mma_path(target) == "warpgroup_rs" and not self.tma(target)
                and self.tiles(target).get("stages", 0) % 2 == 0)

    def tma(self, target) -> bool:
        """Whether the warpgroup_rs GEMMs read their weights through tensor-map copies (wfetch "tma")."""
        return self.mma_path(target) == "warpgroup_rs" and self.tiles(target).get("wfetch") == "tma"

    @staticmethod
    def tensor_maps(launcher, box_rows: int, s, w13, w2) -> tuple[bytes, bytes]:
        """w13's and w2's tensor maps for the TMA GEMMs (boxes of box_rows rows x one 64-byte K
        slice; made once per weights, cached), 128 zero bytes each where box_rows is 0 (GEMMs
        that load their weights take the argument and leave it)."""
        if not box_rows:
            return NO_MAP, NO_MAP
        make = launcher.runtime.tensor_map_2d
        return (make(w13.data_ptr(), s.E * 2 * s.De, s.Dh // 2, box_rows, 64),
                make(w2.data_ptr(), s.E * s.Dh, s.De // 2, box_rows, 64))

    def rs_f16(self, target) -> bool:
        """Whether gemm1 multiplies in f16 (warpgroup_rs tiles whose gemm1_type is "f16"): x then goes
        through mx_rows_f16, one token a block, which also writes each token's scale exponent."""
        return self.mma_path(target) == "warpgroup_rs" and self.tiles(target).get("gemm1_type") == "f16"

    def rs_h16(self, target) -> bool:
        """Whether gemm2 multiplies in f16 (warpgroup_rs tiles whose gemm2_type is "f16"): gemm1 then
        writes h in f16, each tile's last block putting every pair row at one scale (rescale_h)."""
        return self.mma_path(target) == "warpgroup_rs" and self.tiles(target).get("gemm2_type") == "f16"

    def block_threads(self, target):
        return self.tiles(target)["warps"] * get_target(target).wave

    def dynamic_smem(self, target):
        return self.layout(target)[1]["bytes"]

    def entry_smem(self, target) -> dict:
        return {"moe_gemm2": self.layout(target)[2]["bytes"]}

    def reports(self, target: str) -> list[dict]:
        """Both GEMMs (the route and combine kernels have no matrix work)."""
        from ...report import static_report
        gemm2 = static_report(self.binary(target), "moe_gemm2", self.block_threads(target),
                              self.entry_smem(target)["moe_gemm2"])
        out = [self.report(target), gemm2]
        t = self.tiles(target)
        if self.skinny(target) and self.shared2_k(t):     # the module renders moe_gemm2_shared
            out.append(static_report(self.binary(target), "moe_gemm2_shared", t["shared2_warps"] * get_target(target).wave, 0))
        return out

    # --- call ---------------------------------------------------------------------------
    def __call__(self, hidden_states, w13, w13_scale, w2, w2_scale, topk_weights, topk_ids, *,
                 d_hidden: int | None = None, d_expert: int | None = None, check_ids: bool = True, out=None,
                 w13_row_max=None, w2_row_max=None):
        """out (M, hidden_states.shape[1]) bf16, new or the given `out`. check_ids=True reads the
        ids' range on the host (one device sync); with False an out-of-range id is skipped on the
        GPU (its slot adds nothing) and the call queues its launches without waiting.
        w13_row_max, w2_row_max: `portable.formats.scale_row_max` of w13_scale and w2_scale, computed
        once where the weights are loaded; the f16 GEMMs then read them instead of scanning each
        row's scales (the same bits either way). They must be those tensors: a smaller code
        overflows f16 products."""
        s = ref._check(hidden_states, w13, w13_scale, w2, w2_scale, topk_weights, topk_ids, d_hidden, d_expert,
                       self.params["mode"], check_ids=check_ids)
        M, width = hidden_states.shape
        k_top = topk_ids.shape[1]
        named = (("hidden_states", hidden_states), ("w13", w13), ("w13_scale", w13_scale), ("w2", w2),
                 ("w2_scale", w2_scale), ("topk_weights", topk_weights), ("topk_ids", topk_ids))
        for name, t, scale in (("w13_row_max", w13_row_max, w13_scale), ("w2_row_max", w2_row_max, w2_scale)):
            if t is not None:
                ref._tensor(name, t, torch.uint8, 2)
                ref._shape(name, t, scale.shape[:2])
                named += ((name, t),)
        for name, t in named:
            if t.device.type != "cuda":
                raise InputError(f"{name}: expected a tensor on a GPU (device 'cuda'), got device '{t.device}'")
            if not t.is_contiguous():
                raise InputError(f"{name}: expected a contiguous tensor, got strides {t.stride()}")
        for name, t in (("hidden_states", hidden_states), ("w13", w13), ("w2", w2)):     # read 16 bytes at a time
            if t.data_ptr() % 16:
                raise InputError(f"{name}: expected a 16-byte aligned data pointer, got one {t.data_ptr() % 16} bytes past")
        if width % 8 or s.d_hidden % 8:
            raise InputError(f"hidden_states: expected a width and d_hidden that are multiples of 8 (16-byte rows), "
                             f"got width {width}, d_hidden {s.d_hidden}")
        if s.E > E_MAX:
            raise InputError(f"w13: expected at most {E_MAX} experts, got {s.E}")
        if out is None:
            out = torch.empty(M, width, device=hidden_states.device, dtype=torch.bfloat16)
        elif (not isinstance(out, torch.Tensor) or out.dtype is not torch.bfloat16 or tuple(out.shape) != (M, width)
              or out.device != hidden_states.device or not out.is_contiguous()):
            got = f"{out.dtype} {tuple(out.shape)} on {out.device}" if isinstance(out, torch.Tensor) else type(out).__name__
            raise InputError(f"out: expected a contiguous bfloat16 ({M}, {width}) tensor on {hidden_states.device}, got {got}")
        P = M * k_top
        if P == 0:
            return out
        target = device_target(hidden_states.device.index if hidden_states.device.index is not None
                               else torch.cuda.current_device()).name
        kernel = self.auto_variant(P, s.E, s.d_hidden, target, s.De) if self.tuning["tiles"] == "auto" else self
        return kernel.launch(hidden_states, w13, w13_scale, w2, w2_scale, topk_weights, topk_ids, s, out, w13_row_max, w2_row_max)

    def pick_tiles(self, pairs: int, experts: int, target: str) -> str:
        """Large tiles once the average expert gets enough rows to fill them (no host sync: the
        average over all experts, not the touched ones); "medium" (a target's half-height large
        tiles) below its `medium_below_rows`; "skinny_wide" from its `skinny_wide_from_rows` (fewer
        tiles an expert: fewer passes over its weights)."""
        table = tiling(self.NAME, target)
        rows = pairs / experts
        if rows < table["large_from_rows"]:
            kind = self.small_kind(target)
            return "skinny_wide" if kind == "skinny" and rows >= table.get("skinny_wide_from_rows", math.inf) else kind
        return "medium" if rows < table.get("medium_below_rows", 0) else "large"

    def launch(self, hidden_states, w13, w13_scale, w2, w2_scale, topk_weights, topk_ids, s, out,
               w13_row_max=None, w2_row_max=None):
        """Queues the call's kernels. Everything but the pointers comes from a plan made once per
        batch layout (sizes, grids, the workspace's layout), so a call costs the host a workspace
        allocation and the launches."""
        launcher = self.launcher(hidden_states)
        M, width = hidden_states.shape
        k_top = topk_ids.shape[1]
        aligned = w2.data_ptr() % 16 == 0 and w2_scale.data_ptr() % 16 == 0
        key = (launcher.device_index, M, width, k_top, s.E, s.Dh, s.De, s.d_hidden, s.d_expert, aligned)
        plans = self.__dict__.setdefault("_plans", {})
        plan = plans.get(key)
        if plan is None:
            if len(plans) >= 256:        # batch layouts come and go: keep the table small
                plans.clear()
            plan = plans[key] = self.plan(launcher, M, width, k_top, s, w2, w2_scale)
        ov = plan["overlap"]
        map13, map2 = self.tensor_maps(launcher, plan["tma_rows"], s, w13, w2)
        ws = torch.empty(plan["bytes"], device=hidden_states.device, dtype=torch.uint8)
        at = {name: ws.data_ptr() + off for name, off in plan["offsets"].items()}
        x, x_stride = hidden_states.data_ptr(), width
        go = launcher.launch_other
        go("moe_route", (1, 1, 1), (ROUTE_THREADS, 1, 1), 0,
           (topk_ids.data_ptr(), M * k_top, s.E, plan["max_tiles"], at["tile_expert"], at["tile_rows"], at["tile_done"]))
        if plan["x_pass"]:              # x rounded through MXFP4 once, or (rs) put in the GEMM's K order
            x, x_stride = at["x"], plan["x_stride"]
            go(plan["x_pass"], plan["x_grid"], (256, 1, 1), 0,
               (hidden_states.data_ptr(), width, s.d_hidden, M, x, x_stride, at.get("xexp", 0)), ov)
        go("moe_gemm1", plan["grid1"], plan["block1"], plan["smem1"],
           (x, x_stride, s.d_hidden, w13.data_ptr(), w13_scale.data_ptr(), s.De, s.Dh, s.d_expert,
            at["tile_expert"], at["tile_rows"], k_top, at["h_out"], plan["split1"], at["tile_done"], at.get("xexp", 0),
            0 if w13_row_max is None else w13_row_max.data_ptr(), at.get("hblk", 0), at.get("hexp", 0), map13), ov)
        if plan["quantize_h"]:
            go("moe_quantize_h", plan["qh_grid"], (256, 1, 1), 0,
               (at["h_out"], s.De, s.d_expert, plan["h_rows"], at["hbuf"]), ov)
        go(plan["gemm2"], plan["grid2"], plan["block2"], plan["smem2"],
           (at["hbuf"], s.De, s.d_expert, w2.data_ptr(), w2_scale.data_ptr(), s.Dh, s.d_hidden,
            at["tile_expert"], at["tile_rows"], topk_weights.data_ptr(), width,
            at["ybuf"], plan["split2"], at["tile_done"], plan["h_parts"], at.get("hexp", 0),
            0 if w2_row_max is None else w2_row_max.data_ptr(), map2), ov)
        go("moe_combine", (-(-(M * width // 8) // 256), 1, 1), (256, 1, 1), 0,
           (at["ybuf"], topk_ids.data_ptr(), s.E, k_top, M, width, out.data_ptr(),
            at["hbuf"], plan["kept_lines"]), ov)
        return out

    def plan(self, launcher, M: int, width: int, k_top: int, s, w2, w2_scale) -> dict:
        """One batch layout's launches: grids, K splits, which gemm2, and the workspace (routing
        tiles, x's rounded or permuted copy, h, the per-pair outputs) as byte offsets."""
        ov = bool(self.tuning["overlap"])                # overlapped launches after moe_route
        t = self.tiles(launcher.target)
        bm = t["bm"]
        P = M * k_top
        max_tiles = -(-P // bm) + min(s.E, P)          # sum over experts of ceil(count / bm), at most
        # warpgroup_rs: the GEMMs read activations in 128-value K slices, permuted (moe_permute_x)
        rs = self.mma_path(launcher.target) == "warpgroup_rs"      # skinny kinds report their matrix path
        h_cols = _align(s.De, 128) if rs else s.De
        threads = self.block_threads(launcher.target)
        layout = self.layout(launcher.target)
        a4w4_x = self.params["mode"] == "a4w4" and self.matrix_path(launcher.target) == "bf16"
        x_stride = _align(s.d_hidden, 128 if rs else MX_BLOCK) if a4w4_x or rs else width
        skinny = self.skinny(launcher.target)
        if skinny:      # warps split K where it is long and blocks are few; the rest of a block's warps split the rows
            waves = tiling(self.NAME, launcher.target).get("split_below_waves", math.inf)

            def column_groups(rows, per_tile, mt, split):     # a tile's blocks: its rows over a block's
                return -(-rows // (per_tile * t[mt] * t["warps"] // split))

            def split_and_grid(key, k_dim, rows, per_tile, mt, blocks):
                split = t.get(key) or skinny_ksplit(k_dim, t["warps"], max_tiles * column_groups(rows, per_tile, mt, 1),
                                                    launcher.sm_count * max(1, t[blocks]), waves)
                return split, column_groups(rows, per_tile, mt, split)
            split1, grid1 = split_and_grid("ksplit", s.Dh, s.d_expert, 8, "mt", "min_blocks")    # 8 features a 16-row tile
            split2, grid2 = split_and_grid("ksplit2", s.De, width, 16, "mt2", "min_blocks2")
        else:
            split1 = split2 = 1
            # rs: gemm1 writes whole 128-value slices of h (zeros past d_expert), which gemm2 reads
            grid1, grid2 = -(-_align(s.d_expert, 128 if rs else 1) // t["bn"]), -(-width // t["bn2"])
        quantize_h = skinny and self.params["mode"] == "a4w4"     # gemm1 leaves fp32 h to round
        shared2, threads2 = skinny and self.shared2_fits(t, s, w2, w2_scale, split2), threads
        if shared2:                          # its own rows a block and warps
            threads2 = t["shared2_warps"] * get_target(launcher.target).wave
            grid2 = -(-width // (16 * t["shared2_mt"] * t["shared2_warps"]))
        # skinny a16w4 and warpgroup_rs tiles, overlapped: gemm2's blocks of a tile wait for the tile's
        # h parts (skinny: each block's K-part-0 warps signal; rs: each block), not for all of gemm1,
        # so the tiles done first are multiplied during gemm1's last wave (a plain launch starts after
        # gemm1 anyway: no counter to read)
        h_parts = 0
        h16 = self.rs_h16(launcher.target)
        if h16 and h_cols > self.h16_max_cols(launcher.target):
            raise InputError(f"gemm2_type: 'f16' takes a stored d_expert up to {self.h16_max_cols(launcher.target)} "
                             f"on these tiles, got {s.De}; 'bf16' takes any")
        if ov and not quantize_h and self.tuning["h_wait"] == "tile" and (skinny or rs):
            # f16 gemm2: the tile's last gemm1 block signals again once it has rescaled the tile's h
            h_parts = grid1 * (t["warps"] // split1) if skinny else grid1 + h16
        column_first = (skinny or rs) and t.get("raster") == "column"      # the grid's x over one tile's column groups

        def grid(cols):
            return (cols, max_tiles, 1) if column_first else (max_tiles, cols, 1)
        h_rows = max_tiles * bm
        sizes = {"tile_expert": 4 * max_tiles, "tile_rows": 4 * h_rows, "tile_done": 4 * max_tiles,
                 "hbuf": 2 * h_rows * h_cols, "ybuf": 2 * P * width}
        if quantize_h:
            sizes["h_out"] = 4 * h_rows * h_cols
        if a4w4_x or rs:
            sizes["x"] = 2 * M * x_stride
        f16 = self.rs_f16(launcher.target)
        if f16:
            sizes["xexp"] = 4 * M
        if h16:                 # each 32-value group's scale exponent, then each pair row's
            sizes["hblk"] = 4 * h_rows * (h_cols // 32)
            sizes["hexp"] = 4 * h_rows
        offsets, total = {}, 0
        for name, nbytes in sizes.items():         # 256-byte aligned pieces of one workspace
            offsets[name], total = total, total + _align(nbytes, 256)
        offsets.setdefault("h_out", offsets["hbuf"])
        return {"overlap": ov, "max_tiles": max_tiles, "bytes": total, "offsets": offsets,
                "x_pass": ("moe_quantize_x" if a4w4_x else "moe_permute_x") if a4w4_x or rs else "",
                "x_grid": (M, 1, 1) if f16 else (-(-(M * x_stride // MX_BLOCK) // 256), 1, 1), "x_stride": x_stride,
                "grid1": grid(grid1), "block1": (threads, 1, 1), "smem1": layout[1]["bytes"], "split1": split1,
                "quantize_h": quantize_h, "h_rows": h_rows, "qh_grid": (-(-(h_rows * s.De // MX_BLOCK) // 256), 1, 1),
                "gemm2": "moe_gemm2_shared" if shared2 else "moe_gemm2", "grid2": grid(grid2),
                "block2": (threads2, 1, 1), "smem2": layout[2]["bytes"], "split2": split2, "h_parts": h_parts,
                # gemm1's f16 h is stored kept in the L2 (mem.store_l2_keep); moe_combine drops its lines
                "kept_lines": _align(sizes["hbuf"], 256) // 128 if h16 else 0,
                "tma_rows": 64 * t.get("groups", 1) if self.tma(launcher.target) else 0}

    def shared2_k(self, t: dict) -> int:
        """The largest stored d_expert moe_gemm2_shared takes (0: the module has no such kernel)."""
        return 0 if self.tuning["stage2"] == "registers" else t["shared2_k"]

    def shared2_fits(self, t: dict, s, w2, w2_scale, split: int = 1) -> bool:
        """Whether the skinny gemm2 runs from shared memory (moe_gemm2_shared): the module has it
        and the stored d_expert is a multiple of 128 up to its `shared2_k` (one block's rows, K
        whole, in its static buffer; a block's scale bytes then start 16-byte aligned, Dh being a
        multiple of 32), w2 and w2_scale 16-byte aligned for the copies, K not split. stage2="shared"
        asks for it and fails where it cannot."""
        k = self.shared2_k(t)
        fits = (bool(k) and s.De % 128 == 0 and s.De <= k and split == 1
                and w2.data_ptr() % 16 == 0 and w2_scale.data_ptr() % 16 == 0)
        if self.tuning["stage2"] == "shared" and not fits:
            raise InputError(f"stage2: 'shared' needs a [skinny] shared2_k for this target (here {k}), the stored "
                             f"d_expert a multiple of 128 up to it (got {s.De}), no K split (got ksplit2 {split}) "
                             f"and 16-byte aligned w2 and w2_scale")
        return fits

    # --- reference, cost and benchmark face -------------------------------------------------
    reference = staticmethod(ref.moe_reference)

    SHAPE_SETS = {
        "default": [(shape, {"mode": m}) for m in ref.MODES for shape in SHAPES],
        "quick": [(SHAPES[0], {"mode": m}) for m in ref.MODES] + [(SHAPES[5], {"mode": "a16w4"})],
    }

    def make_inputs(self, shape: dict, device: int):
        """Fresh random weights and hidden states; the routing is drawn from the shape alone, so
        cost_of counts exactly the experts these inputs touch. The weights come as a server holds
        them: with their row maxima computed once, when they were loaded."""
        inputs = ref.make_moe_inputs(shape["M"], shape["E"], shape["d_hidden"], shape["d_expert"], shape["topk"],
                                     seed=torch.seed() % (1 << 31), shared_experts=shape["shared"],
                                     device=f"cuda:{device}")
        ids, weights = _routing(shape)
        return {**inputs, "topk_ids": ids.to(f"cuda:{device}"), "topk_weights": weights.to(f"cuda:{device}"),
                "w13_row_max": scale_row_max(inputs["w13_scale"]), "w2_row_max": scale_row_max(inputs["w2_scale"])}

    def run(self, inputs):
        return self(**inputs, check_ids=False)

    def verify(self, inputs, result) -> tuple[bool, str]:
        want = ref.moe_reference(**_weights(inputs), mode=self.params["mode"])
        return compare(result, want)

    def peers(self) -> dict:
        """The torch path a user would write. It computes a16w4 (reference.moe_torch_bf16 says why
        there is no a4w4 one), so beside an a4w4 kernel it is checked against the a16w4 reference."""
        def torch_bf16(inputs):
            return ref.moe_torch_bf16(**_weights(inputs))
        torch_bf16.verify = lambda inputs, result: compare(result, ref.moe_reference(**_weights(inputs), mode="a16w4"))
        return {"torch dequant + bf16 matmuls": torch_bf16}

    def cost_of(self, shape: dict) -> dict:
        ids, _ = _routing(shape)
        c = ref.moe_cost(shape["M"], shape["E"], shape["d_hidden"], shape["d_expert"], ids)
        return {"flops": c["flops"], "bytes": c["bytes"], "peak": "bf16"}

    def selftest(self, device: int) -> dict:
        from ...timing import time_gpu
        shape = {"M": 64, "E": 33, "d_hidden": 1024, "d_expert": 256, "topk": 8, "shared": 1}
        inputs = self.make_inputs(shape, device)
        ok, detail = self.verify(inputs, self.run(inputs))
        median_us = time_gpu(lambda: self.run(inputs))["median_us"]
        return {"ok": ok, "shape": "M64 E33 1024x256", "median_us": median_us,
                "tbps": self.cost_of(shape)["bytes"] / median_us / 1e6, "detail": detail}


def compare(out, want, rtol_l2: float = 2e-2, atol_rel: float = 5e-2) -> tuple[bool, str]:
    """Issue 5's bar: relative L2 <= 2e-2 and max abs error <= 5e-2 x the output's scale (its RMS);
    no NaN. The max abs error is counted beyond the rounding of the bf16 output itself (as
    mla_decode's compare): an output 25.6 x RMS or more has a half-ulp past the bar on its own,
    which block scales spread over 2^31 in a row make (tests/test_mxfp4_moe_gpu.py)."""
    o, w = out.float(), want.float()
    if torch.isnan(o).any():
        return False, "NaN in the output"
    scale = w.pow(2).mean().sqrt().clamp_min(1e-30).item() if w.numel() else 1.0
    err = ((o - w).abs() - bf16_half_ulp(w)).clamp_min(0).max().item() / scale if o.numel() else 0.0
    rel = ((o - w).norm() / w.norm().clamp_min(1e-30)).item() if o.numel() else 0.0
    return err <= atol_rel and rel <= rtol_l2, f"rel L2 {rel:.2e}, max abs {err:.2e} x RMS beyond bf16 rounding"


def _weights(inputs: dict) -> dict:
    """The call's inputs without what only speeds the kernel up (the references take the rest)."""
    return {k: v for k, v in inputs.items() if k not in ("w13_row_max", "w2_row_max")}


def _routing(shape: dict):
    """The shape's routing, drawn on the CPU from a fixed seed."""
    gen = torch.Generator().manual_seed(shape["M"] * 1009 + shape["E"])
    return ref.make_routing(shape["M"], shape["E"], shape["topk"], gen, shared_experts=shape["shared"])


def umma_offsets(n: int, bk: int) -> dict:
    """umma_cfg<n, bk>'s byte offsets in the scratch umma_mxf4_step re-lays the tiles into
    (mapping/prelude/sm_100a.h; tests/test_umma_sm100a.py has the compiler check that both agree):
    A 128 x bk and B n x bk E2M1 in core matrices, 512-byte scale blocks, then the mbarrier and the
    TMEM address slot, which live from umma_init to umma_release."""
    kc, rb = -(-bk // 128), -(-n // 128)
    off_b = 64 * bk
    off_sfa = off_b + n * bk // 2
    off_sfb = off_sfa + 512 * kc
    off_bar = off_sfb + 512 * kc * rb
    return {"off_b": off_b, "off_sfa": off_sfa, "off_sfb": off_sfb, "off_bar": off_bar,
            "off_tmem": off_bar + 8, "bytes": off_bar + 16}


def umma_scratch_bytes(n: int, bk: int) -> int:
    """Shared bytes of the umma scratch (umma_cfg::BYTES)."""
    return umma_offsets(n, bk)["bytes"]


def _umma_scratch_at(operands: int, c_bytes: int, u: dict) -> int:
    """Where the umma scratch starts: past the operand tiles (both live in the K loop), and far
    enough that its mbarrier and TMEM slot lie past sC, which umma_store fills while the barrier
    is still valid (umma_release invalidates it after). Only the staged tiles, dead by then, may
    lie under sC."""
    return _align(max(operands, c_bytes - u["off_bar"]), 128)


def skinny_ksplit(k_dim: int, warps: int, blocks: int = 0, slots: int = 1, waves: float = math.inf) -> int:
    """Warps of a skinny block that split K: a power of two that divides the block, each warp keeping
    about four 128-deep slices or more, and no more splits once the grid has `waves` rounds of
    `slots` resident blocks (`blocks`: the grid unsplit, counted from the tiles' upper bound). A split
    adds a shared-memory reduction and shortens each warp's run, so it pays only where blocks are
    few (R1 gemm1 K 7168 at M 4: 4; R1 E33 M64, both GEMMs: 1; gemm2 K 256: 1)."""
    split = 1
    while split * 2 <= warps and -(-k_dim // 128) >= 4 * split * 2 and blocks * split < waves * slots:
        split *= 2
    return split


def _align(n: int, to: int = 16) -> int:
    return -(-n // to) * to
