"""The checks of `portable audit`: `Audit` (one source against a set of targets), the PTX
instruction families and the names the mapping table marks unavailable."""
from __future__ import annotations

import functools
import re
from pathlib import Path

from .audit_findings import Finding, _fix, maybe_row, table_row
from .audit_preprocess import _NAMES_AMD, _STUB_STATEMENT, Conditional, _included_macros
from .audit_reading import _TYPE_BYTES, Source, _call_args, _constants, evaluate
from ..data import TARGET_COLUMNS, load_table
from ..targets import Target, all_targets


# ---------------------------------------------------------------- the checks

class Audit:
    """One source against a set of targets; each check_* method adds findings."""

    def __init__(self, source: Source, targets: list[Target]):
        self.src, self.targets = source, targets
        self.wave64 = [t for t in targets if t.wave != 32]      # wave-size hazards exist only here
        self.amd = [t for t in targets if t.vendor == "amd"]
        self.findings: list[Finding] = []
        self.consts = _constants(source.code)
        every = list(all_targets().values())
        path = Path(source.path)
        seed = _included_macros(path, source.code_str, every, frozenset({path})) if path.is_file() else {}
        self.cond = Conditional(source.code, every, seed=seed)
        # lanes or warps counted with warpSize somewhere in the file: then a hard-coded 32 next to
        # it is a real disagreement, not a consistent 32-lane "virtual warp" (correct on wave64)
        self.mixed = bool(re.search(r"\bwarpSize\b", source.code))

    def add(self, offset: int, length: int, severity: str, kind: str, message: str, targets,
            row: dict | None = None, fix: str = "") -> None:
        line, col = self.src.position(offset)
        names = tuple(t.name if isinstance(t, Target) else t for t in self.cond.live_targets(line, targets))
        if not names:
            return              # inside #if branches that none of these targets compiles
        text = " ".join(self.src.text[offset:offset + length].split()) or self.src.line_text(line)
        if row is not None and not fix:
            fix = _fix(row)
        self.findings.append(Finding(self.src.path, line, col, severity, kind, text, message, fix, names,
                                     row["file"] if row else ""))

    def run(self) -> list[Finding]:
        for check in (self.check_warp_arithmetic, self.check_warp_constants, self.check_shuffle_reductions,
                      self.check_shuffle_width, self.check_lane_masks, self.check_ballot_width,
                      self.check_warp_sync_semantics, self.check_cooperative_groups, self.check_inline_asm,
                      self.check_unavailable_names, self.check_vendor_libraries, self.check_template_atoms,
                      self.check_managed_memory, self.check_arch_guards, self.check_static_shared,
                      self.check_dynamic_shared, self.check_fp8_formats, self.check_launch_bounds):
            check()
        unique = {(f.line, f.column, f.kind, f.message, f.targets): f for f in self.findings}
        return sorted(unique.values(), key=lambda f: (f.line, f.column, f.kind))

    # -- warp / wavefront size ---------------------------------------------------------------

    # an expression that is a thread or lane index: threadIdx.x, tid, lane_id, idx, ...
    _THREADISH = r"(?:threadIdx\s*\.\s*[xyz]|\b\w*(?:tid|Tid|TID|lane|Lane|LANE|thread|Thread|THREAD|idx|Idx|IDX)\w*)"
    _LANE_ARITH = re.compile(_THREADISH + r"\s*(?:&\s*(?:31|0[xX]1[fF])|%\s*32)(?![\w.])")
    _WARP_ARITH = re.compile(r"(?:" + _THREADISH + r"|\bblockDim\s*\.\s*[xyz])\s*(?:/\s*32|>>\s*5)(?![\w.])")
    _WARP_SCALE = re.compile(r"\b\w*[Ww]arp\w*\s*(?:\*\s*32|<<\s*5)(?![\w.])|\b32\s*\*\s*\w*[Ww]arp\w*")

    # a shared array sized per 32-lane warp: partial[1024 / 32], sums[BLOCK >> 5]
    _SHARED_PER_WARP = re.compile(r"\b__shared__\b[^;{}]*\[\s*[\w\s*+()]*?(?:/\s*32|>>\s*5)\s*\]")

    def check_warp_arithmetic(self) -> None:
        # Consistent 32-lane "virtual warps" (/32, %32, &31 and offset-16 reductions inside them)
        # are correct on a 64-lane wave; the hazard is 32 used beside warpSize, which is 64 there.
        if not self.mixed:
            return
        warp_index = "threadIdx.x >> 5 / threadIdx.x / 32 (warp index hard-coded)"
        for pattern, message, row in (
                (self._SHARED_PER_WARP, "shared array sized for 32-lane warps while warps are counted with warpSize "
                                        "elsewhere in the file", warp_index),
                (self._LANE_ARITH, "lane index computed for 32-lane warps; a wave has 64 lanes here",
                 "threadIdx.x % 32 (or %laneid)"),
                (self._WARP_ARITH, "warp index computed for 32-lane warps; a wave has 64 lanes here", warp_index),
                (self._WARP_SCALE, "offset scaled by a hard-coded warp size of 32", warp_index)):
            for m in pattern.finditer(self.src.code):
                self.add(m.start(), len(m.group()), "warning", "warp-size", message, self.wave64, table_row(row))

    # names that say "warp size": WARP_SIZE, kWarpSize, warp_size, THREADS_PER_WARP, WARP
    _WARP_NAME = (r"(?:\w*(?:WARP|[Ww]arp)_?(?:SIZE|[Ss]ize|THREADS|[Tt]hreads|LANES|[Ll]anes)\w*"
                  r"|\w*(?:THREADS|[Tt]hreads|LANES|[Ll]anes)_?(?:PER|[Pp]er)_?(?:WARP|[Ww]arp)\w*|WARP|kWarp)")
    _WARP_CONST = re.compile(r"#\s*define\s+" + _WARP_NAME + r"\s+\(?32[uUlL]*\)?(?![\w.])"
                             r"|\b" + _WARP_NAME + r"\s*=\s*\(?32[uUlL]*\)?(?![\w.])")

    def check_warp_constants(self) -> None:
        if not self.mixed:
            return                  # a 32-lane group size used consistently is correct on wave64
        for m in self._WARP_CONST.finditer(self.src.code):
            self.add(m.start(), len(m.group()), "warning", "warp-size",
                     "warp size hard-coded as 32", self.wave64,
                     table_row("constexpr int WARP_SIZE = 32; / #define WARP_SIZE 32"))

    _HALVING_LOOP = re.compile(
        r"\bfor\s*\(\s*(?:(?:const|unsigned|signed|int|auto|uint32_t|int32_t|size_t)\s+)*(?P<v>\w+)\s*=\s*(?P<start>[^;]+?)\s*;"
        r"\s*(?P=v)\s*(?:>|>=|!=)\s*[01][uU]?\s*;\s*(?:(?P=v)\s*(?:>>=\s*1|/=\s*2)|(?P=v)\s*=\s*(?P=v)\s*(?:/\s*2|>>\s*1))\s*\)"
        r"|\bfor\s*\(\s*(?:(?:const|unsigned|signed|int|auto|uint32_t|int32_t|size_t)\s+)*(?P<u>\w+)\s*=\s*1[uU]?\s*;"
        r"\s*(?P=u)\s*(?:<\s*(?P<below>[^;]+?)|<=\s*(?P<upto>[^;]+?))\s*;\s*(?:(?P=u)\s*(?:<<=\s*1|\*=\s*2)|(?P=u)\s*=\s*(?P=u)\s*(?:\*\s*2|<<\s*1))\s*\)")
    _SHUFFLE = re.compile(r"\b__shfl(?:_xor|_down|_up)?(?:_sync)?\s*\(|\.shfl(?:_xor|_down|_up)?\s*\(")

    def _largest_offset(self, m) -> int | None:
        if m.group("start"):
            return evaluate(m.group("start"), self.consts)
        below, upto = m.group("below"), m.group("upto")
        n = evaluate(below, self.consts) if below else evaluate(upto, self.consts)
        return None if n is None else (n // 2 if below else n)

    def check_shuffle_reductions(self) -> None:
        if not self.mixed:
            return                  # offset-16 reductions inside consistent 32-lane groups are correct on wave64
        code = self.src.code
        for m in self._HALVING_LOOP.finditer(code):
            if self._largest_offset(m) != 16:
                continue
            rest = code[m.end():]
            body = rest[:_matching_brace(rest)] if rest.lstrip().startswith("{") else rest[:rest.find(";") + 1]
            if self._SHUFFLE.search(body):
                self.add(m.start(), len(m.group()), "error", "shuffle-reduction",
                         "shuffle reduction stops at offset 16 while lanes are counted with warpSize: on a 64-lane wave lanes 0-31 and 32-63 are never combined",
                         self.wave64, table_row("for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);"))
        # unrolled butterflies: an offset-16 shuffle with no offset-32 shuffle in the same function
        by_function: dict[int, list] = {}
        for m in re.finditer(r"\b(__shfl_(?:xor|down)(?:_sync)?)\s*\(", code):
            args, _ = _call_args(code, m.end() - 1)
            offset_arg = 2 if m.group(1).endswith("_sync") else 1
            if len(args) > offset_arg:
                v = evaluate(args[offset_arg][1], self.consts)
                by_function.setdefault(self.src.function_at(m.start()), []).append((m, v))
        for calls in by_function.values():
            if any(v == 32 for _, v in calls):
                continue
            for m, v in calls:
                if v == 16:
                    self.add(m.start(), len(m.group(1)), "error", "shuffle-reduction",
                             "unrolled shuffle reduction starts at offset 16 (no offset-32 step)", self.wave64,
                             table_row("for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);"))

    _LANE_GROUP_32 = re.compile(r"(?:%\s*32|&\s*(?:31|0[xX]1[fF])|/\s*32|>>\s*5)(?![\w.])")

    def check_shuffle_width(self) -> None:
        """A shuffle from a lane index with no width (so the whole wave) in a function that
        groups lanes by 32: on a 64-lane wave, lanes 32-63 read from lanes 0-31."""
        code = self.src.code
        for m in re.finditer(r"\b(__shfl_sync|__shfl)\s*\(", code):
            args, _ = _call_args(code, m.end() - 1)
            lane_arg = 2 if m.group(1) == "__shfl_sync" else 1
            if len(args) <= lane_arg:
                continue
            if len(args) > lane_arg + 1:
                width = evaluate(args[lane_arg + 1][1], self.consts)
                if width is not None and width <= 32:
                    continue
            fn = self.src.function_at(m.start())
            body = code[fn:self._function_end(fn)] if fn >= 0 else ""
            if not (self._LANE_GROUP_32.search(body) or re.search(r"\b__shfl_(?:xor|down)(?:_sync)?\s*\([^;]*,\s*16\s*\)", body)):
                continue
            self.add(m.start(), len(m.group(1)), "error", "warp-size",
                     "shuffle from a lane index with no width while lanes are grouped by 32: on a 64-lane wave "
                     "lanes 32-63 read lanes 0-31; pass width 32 (the fourth argument)",
                     self.wave64, maybe_row("__shfl_sync"), fix="" if maybe_row("__shfl_sync") else "__shfl_sync(mask, v, lane, 32)")

    def _function_end(self, start: int) -> int:
        return start + _matching_brace(self.src.code[start:])

    _FULL_MASK = re.compile(r"\b0[xX][fF]{8}(?![0-9a-fA-F])[uUlL]*|~\s*0[uU]\b")

    _MASK_DECL_32 = re.compile(r"^\s*(?:(?:static|const|constexpr|__device__|__constant__|inline)\s+)*"
                               r"(?P<type>unsigned(?:\s+int)?|uint32_t|int|uint|unsigned\s+long)\s+(?P<name>\w+)\s*=\s*$")

    def check_lane_masks(self) -> None:
        code, row = self.src.code, table_row("0xffffffffu")
        message = "32-bit full lane mask: covers lanes 0-31 only, and HIP's *_sync functions reject a 32-bit mask"
        for m in self._FULL_MASK.finditer(code):
            statement = _statement(code, m.start())
            if re.search(r"_sync\s*\(|__syncwarp|__ballot|__activemask|[Mm][Aa][Ss][Kk]", statement):
                decl = self._MASK_DECL_32.match(code[code.rfind("\n", 0, m.start()) + 1:m.start()])
                fix = ""
                if decl:        # the literal alone would be narrowed back to 32 bits by its 32-bit variable
                    fix = (f"unsigned long long {decl.group('name')} = 0xffffffffffffffffull; -- the variable's type "
                           f"'{decl.group('type')}' holds 32 bits: widen it, not only the literal")
                self.add(m.start(), len(m.group()), "error", "lane-mask", message, self.wave64, row, fix=fix)
        # a named constant holding the 32-bit mask, passed as the mask of a *_sync call
        for m in re.finditer(r"\b(?:__\w+_sync|__syncwarp)\s*\(", code):
            args, _ = _call_args(code, m.end() - 1)
            if args and not self._FULL_MASK.search(args[0][1]) and evaluate(args[0][1], self.consts) == 0xFFFFFFFF:
                self.add(args[0][0], len(args[0][1]), "error", "lane-mask", message, self.wave64, row)

    _BALLOT = r"(?:__ballot(?:_sync)?|__activemask)\s*\("
    _BALLOT_32 = re.compile(
        r"\b(?:unsigned\s+int|unsigned(?!\s+long)|int|uint32_t|int32_t|uint)\s+\w+\s*=\s*(?:\(\s*\w+\s*\)\s*)?" + _BALLOT
        + r"|\(\s*(?:unsigned(?:\s+int)?|int|uint32_t)\s*\)\s*" + _BALLOT
        + r"|\b(?:__popc|__ffs|__clz|__brev|__fns)\s*\(\s*" + _BALLOT)

    def check_ballot_width(self) -> None:
        for m in self._BALLOT_32.finditer(self.src.code):
            uses_popc = m.group().lstrip().startswith(("__popc", "__ffs", "__clz", "__brev", "__fns"))
            row = table_row("unsigned mask = __ballot_sync(...) (32-bit ballot variable)")
            if uses_popc:   # HIP has __popc / __ffs too: the hazard is the 32-bit count, not the name
                row = maybe_row("__popcll(x)") or row
            self.add(m.start(), len(m.group()), "error", "ballot-width",
                     "ballot result held in 32 bits: lanes 32-63 of a 64-lane wave are lost", self.wave64, row)

    def check_warp_sync_semantics(self) -> None:
        for m in re.finditer(r"\b__activemask\s*\(", self.src.code):
            self.add(m.start(), len("__activemask"), "warning", "warp-sync-semantics",
                     "__activemask is 64-bit on HIP and only a snapshot of converged lanes on CUDA",
                     self.wave64, table_row("__activemask()"))
        for m in re.finditer(r"\b__syncwarp\s*\(", self.src.code):
            if re.match(r"\s*#\s*define\b", self.src.code_line(m.start())):
                continue                # a HIP shim defining __syncwarp, not a use
            self.add(m.start(), len("__syncwarp"), "info", "warp-sync-semantics",
                     "__syncwarp: a wave already runs in lockstep on AMD; HIP's masked form needs a 64-bit mask",
                     self.wave64, table_row("__syncwarp(mask)"))

    # -- inline PTX and instructions a target lacks ---------------------------------------------

    def check_inline_asm(self) -> None:
        code = self.src.code
        for m in re.finditer(r"\b(?:asm|__asm__|__asm)\b\s*(?:volatile\b|__volatile__\b|goto\b|\s)*\(", code):
            _, end = _call_args(code, m.end() - 1)
            ptx = self.src.code_str[m.end():end]
            rows = [(p, table_row(cuda)) for p, cuda in PTX_FAMILIES if re.search(p, ptx)]
            first = rows[0][1] if rows else None
            message = "inline PTX does not compile for AMD targets"
            if rows:
                used = re.search(rows[0][0] + r"[\w.:%]*", ptx)
                message += f"; it uses {used.group() if used else first['cuda'].split(' (')[0]}"
            self.add(m.start(), end - m.start(), "error", "inline-asm", message, self.amd, first,
                     fix="" if first else "replace it with a builtin or intrinsic: `portable ref <instruction>` lists them")
            for pattern, row in rows:
                missing = [t for t in self.targets if t.vendor == "nvidia" and row[t.name] == "no"]
                kind = "matrix-unavailable" if row["category"] == "matrix" else "unavailable-on-target"
                used = re.search(pattern + r"[\w.:%]*", ptx)
                self.add(m.start(), end - m.start(), "error", kind,
                         f"{used.group() if used else row['cuda'].split(' (')[0]} is not available on these targets", missing, row)

    def check_unavailable_names(self) -> None:
        code = self.src.code
        # the texture family (one row speaks for tex1D/2D/3D, their Lod/Grad forms and surfaces)
        tex = maybe_row("tex1Dfetch / tex2D (cudaTextureObject_t)")
        if tex is not None:
            for m in re.finditer(r"\b(?:tex[123]D\w*|tex1Dfetch|texCubemap\w*|surf[123]D\w*)(?=\s*[<(])", code):
                if m.group() != "tex1Dfetch":          # the name index has tex1Dfetch itself
                    self.add(m.start(), len(m.group()), "error", "unavailable-on-target",
                             f"{m.group()} reads a texture: these targets have no image support", [t for t in self.targets if tex[t.name] == "no"], tex)
        # cache-hinted stores HIP does not declare (its __builtin_nontemporal_store takes the value first)
        for m in re.finditer(r"\b__stcs\s*\(", code):
            self.add(m.start(), len("__stcs"), "error", "no-hip-equivalent", "__stcs has no HIP declaration",
                     self.amd, maybe_row("__stcs"), fix="" if maybe_row("__stcs") else "__builtin_nontemporal_store(v, p)")
        for name, (pattern, cuda_rows, hip_rows) in _name_index().items():
            for m in pattern.finditer(code):
                if self.src.code_line(m.start()).lstrip().startswith("#"):
                    continue            # a feature test in #if / #ifdef is not a use
                for severity, kind, message, targets, row in _name_verdicts(name, cuda_rows, hip_rows, self.targets):
                    self.add(m.start(), len(m.group()), severity, kind, message, targets, row)

    # -- cooperative groups beyond what HIP has ---------------------------------------------------

    def check_cooperative_groups(self) -> None:
        code, code_str = self.src.code, self.src.code_str
        aliases = {"cooperative_groups"} | set(re.findall(r"\bnamespace\s+(\w+)\s*=\s*(?:::)?cooperative_groups\b", code))
        ns = "(?:" + "|".join(map(re.escape, sorted(aliases))) + ")"
        reduce_fix = ("a shuffle reduction over the tile (tile.shfl_xor from tile.size() / 2), or hipCUB's WarpReduce"
                      " -- HIP's cooperative groups have no reduce()/reduce.h")
        for m in re.finditer(r"#\s*include\s*[<\"]cooperative_groups/(?:reduce|scan|memcpy_async)\.h[>\"]", code_str):
            header = re.search(r"cooperative_groups/\w+\.h", m.group()).group()
            self.add(m.start(), len(m.group()), "error", "no-hip-equivalent",
                     f"<{header}> has no HIP counterpart", self.amd, fix=reduce_fix)
        for m in re.finditer(rf"\b{ns}::(?:experimental::)?(reduce|inclusive_scan|exclusive_scan|memcpy_async|block_tile_memory)\b", code):
            what = m.group(1)
            fix = reduce_fix if what != "block_tile_memory" else \
                "tiles of at most the wave size (64 on gfx942/gfx950), or shared memory for larger groups"
            self.add(m.start(), len(m.group()), "error", "no-hip-equivalent",
                     f"cooperative_groups::{what} has no HIP counterpart", self.amd, fix=fix)
        row = maybe_row("cooperative_groups::tiled_partition<32>(block)")
        for m in re.finditer(rf"\b(?:{ns}::)?(?:tiled_partition|thread_block_tile)\s*<\s*([^,>]+)", code):
            n = evaluate(m.group(1), self.consts)
            if n is None:
                continue
            over = [t for t in self.targets if n > t.wave and (t.vendor == "amd" or n > 32 and not re.search(
                r"block_tile_memory", code))]
            self.add(m.start(), len(m.group()), "error", "warp-size",
                     f"a {n}-thread tile is larger than a wave: HIP's tiles go up to the wave size, and CUDA's "
                     "tiles over 32 threads need block_tile_memory", over, row)

    # -- vendor libraries and template libraries ---------------------------------------------

    _LIBRARIES = (
        # (include or name pattern, what, the AMD library, row)
        (r"#\s*include\s*[<\"]mma\.h[>\"]|\bnvcuda::wmma\b|\bwmma::(?:fragment|load_matrix_sync|mma_sync|store_matrix_sync)\b",
         "nvcuda::wmma", "rocWMMA (rocwmma::fragment / load_matrix_sync / mma_sync): a header library whose tiles follow wave64",
         "nvcuda::wmma::fragment / wmma::load_matrix_sync / wmma::mma_sync (mma.h)"),
        (r"#\s*include\s*[<\"](?:cutlass|cute)/[\w/.]+[>\"]", "CUTLASS / CuTe",
         "Composable Kernel / CK Tile: CUTLASS and CuTe do not build for AMD", "CUTLASS / CuTe (templates)"),
        (r"#\s*include\s*[<\"]cudnn(?:_frontend|_version|_backend|_graph|_ops\w*|_adv\w*|_cnn\w*)?\.h[>\"]|\bcudnn[A-Z]\w*\b|\bcudnn_frontend::", "cuDNN",
         "MIOpen (miopen* calls; its API differs from cuDNN's, and cudnn-frontend graphs have no counterpart)", ""),
    )

    def check_vendor_libraries(self) -> None:
        """One finding per library a file uses: at its first include, or its first use."""
        code, code_str = self.src.code, self.src.code_str
        for pattern, what, fix, row_name in self._LIBRARIES:
            hits = [m for m in re.finditer(pattern, code_str) if m.group().lstrip().startswith("#")] + \
                [m for m in re.finditer(pattern, code) if not m.group().lstrip().startswith("#")]
            live = [m for m in sorted(hits, key=lambda m: m.start())
                    if self.cond.live_targets(self.src.position(m.start())[0], self.amd)]
            if live:
                m = live[0]
                row = maybe_row(row_name) if row_name else None
                self.add(m.start(), len(m.group()), "error", "vendor-library",
                         f"{what} is NVIDIA-only; the AMD counterpart is another library", self.amd, row, fix=fix if not row else "")

    # CuTe / CUTLASS atoms that name an instruction family a target lacks
    _ATOMS = (
        (r"\bSM90_\d+x\d+x\d+_\w+|\bGMMA::\w+|\bwarpgroup_(?:arrive|commit_batch|wait)\b|\bcutlass::arch::Sm90\b[^;]*OpClassTensorOp",
         "wgmma (sm_90a warpgroup MMA)", "wgmma.mma_async.sync.aligned.m64nNk16.f32.f16.f16"),
        (r"\bSM100_MMA_\w+|\bUMMA::\w+|\bSM100_TMEM_\w+", "tcgen05 (sm_100a UMMA)", "tcgen05.mma.cta_group::1.kind::f16"),
        (r"\bSM90_TMA_\w+|\bmake_tma_copy\b|\bmake_tma_atom\b|\bTmaDescriptor\b|\bcute::TMA::",
         "TMA (the tensor copy engine)", "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes (TMA)"),
    )

    def check_template_atoms(self) -> None:
        code = self.src.code
        for pattern, what, cuda in self._ATOMS:
            row = maybe_row(cuda)
            if row is None:
                continue
            for m in re.finditer(pattern, code):
                missing = [t for t in self.targets if row[t.name] == "no" or (t.vendor == "amd" and row["hip"].startswith("none"))]
                kind = "matrix-unavailable" if row["category"] == "matrix" else "unavailable-on-target"
                self.add(m.start(), len(m.group()), "error", kind,
                         f"{m.group()} is {what}, which these targets lack", missing, row)

    def check_managed_memory(self) -> None:
        row = maybe_row("cudaMallocManaged")
        if row is None:
            return
        # the targets the row's note names (gfx942 needs XNACK for page migration), else all AMD ones
        named = [t for t in self.amd if t.name in row["note"]] or self.amd
        for m in re.finditer(r"\b(?:cuda|hip)MallocManaged\b|\b__managed__\b", self.src.code):
            self.add(m.start(), len(m.group()), "warning", "managed-memory",
                     "managed memory migrates pages on demand only with XNACK enabled on this target", named, row)

    # -- #if branches hipcc never takes ---------------------------------------------------

    def _branch_text(self, branch) -> str:
        start = self.src._line_starts[branch.first - 1] if branch.first - 1 < len(self.src._line_starts) else len(self.src.code)
        end = self.src._line_starts[branch.last] if branch.last < len(self.src._line_starts) else len(self.src.code)
        if branch.last < branch.first:
            return ""
        return "\n".join(ln for ln in self.src.code[start:end].split("\n") if not ln.lstrip().startswith("#"))

    def _does_work(self, branch) -> bool:
        """A branch body with code that computes something: not only directives, and not only
        asm statements without outputs (fences, waits, hints: skipping them is harmless)."""
        text = self._branch_text(branch)
        for m in reversed(list(re.finditer(r"\b(?:asm|__asm__)\b\s*(?:volatile\b|__volatile__\b|\s)*\(", text))):
            _, end = _call_args(text, m.end() - 1)
            if not re.search(r"\"[=+]", self._asm_operands(text, m, end)):
                text = text[:m.start()] + text[end:]
        text = self._HINTS.sub("", text)
        text = re.sub(r"\bif\s*(?:constexpr\s*)?\((?:[^()]|\([^()]*\))*\)|\belse\b", "", text)
        return bool(re.search(r"\w", re.sub(r"\s*;", "", text)))

    # calls whose absence changes no result: waits for programmatic dependent launch, sleeps, prefetches
    _HINTS = re.compile(r"\b(?:cudaGridDependencySynchronize|cudaTriggerProgrammaticLaunchCompletion|__nanosleep"
                        r"|__prefetch_global_\w+|prefetch_\w+)\s*\([^;]*\)\s*;")

    def _asm_operands(self, text, m, end) -> str:
        # the operand constraints live in string literals, which the blanked view lost: find the
        # same statement in the view that keeps strings
        where = self.src.code.find(text[m.start():end])
        return self.src.code_str[where:where + end - m.start()] if where >= 0 else '"="'

    def _is_stub(self, branch) -> bool:
        start = self.src._line_starts[branch.first - 1] if branch.first <= len(self.src._line_starts) else 0
        raw = self.src.code[start:self.src._line_starts[branch.last] if branch.last < len(self.src._line_starts) else len(self.src.code)]
        if re.search(r"^\s*#\s*error\b", raw, re.M):
            return True
        text = re.sub(r"\bif\s*(?:constexpr\s*)?\((?:[^()]|\([^()]*\))*\)|\belse\b", "", self._branch_text(branch))
        return not re.search(r"\w", _STUB_STATEMENT.sub("", text))

    def _defines_only_stubs(self, branch) -> bool:
        """A file-scope branch whose function bodies all only stop or assert: the kernel exists
        for hipcc, and does nothing."""
        text = self._branch_text(branch)
        bodies, depth, start = [], 0, 0
        for k, ch in enumerate(text):
            if ch == "{":
                depth += 1
                start = k + 1 if depth == 1 else start
            elif ch == "}" and depth:
                depth -= 1
                if depth == 0:
                    bodies.append(text[start:k])
        strip = lambda t: _STUB_STATEMENT.sub("", re.sub(r"\bif\s*(?:constexpr\s*)?\((?:[^()]|\([^()]*\))*\)|\belse\b", "", t))
        return bool(bodies) and not any(re.search(r"\w", strip(b)) for b in bodies)

    def check_arch_guards(self) -> None:
        nvidia = [t.name for t in all_targets().values() if t.vendor == "nvidia"]
        row = maybe_row("__CUDA_ARCH__ (900, 1000, 1200)")
        for group in self.cond.groups:
            for branch in group:
                if not branch.cond or _NAMES_AMD.search(branch.cond):
                    continue
                if all(branch.live[(n, True)] is False for n in nvidia):
                    continue
                hit = []
                in_function = self.src.function_at(self.src._line_starts[branch.line - 1]) >= 0
                for t in self.amd:
                    w = (t.name, True)
                    if branch.parent[w] is False or branch.live[w] is not False:
                        continue
                    taken = [o for o in group if o is not branch and o.live[w] is not False]
                    if in_function and taken and not all(self._is_stub(o) for o in taken):
                        continue
                    # around whole definitions: with no #else, callers fail to compile (loud); an
                    # #else that defines the same kernel with an assert for a body is silent
                    if not in_function and not (taken and all(self._defines_only_stubs(o) for o in taken)):
                        continue
                    hit.append(t)
                if hit and self._does_work(branch):
                    offset = self.src._line_starts[branch.line - 1]
                    fallback = "the branch hipcc takes only stops or asserts" if any(o is not branch for o in group) else "there is no #else"
                    self.add(offset, len(self.src.line_text(branch.line)), "error", "arch-guard",
                             f"#if {' '.join(branch.cond.split())[:80]} is false under hipcc (no __CUDA_ARCH__, no __CUDACC__), "
                             f"so this code compiles to nothing on AMD and {fallback}", hit, row,
                             fix="" if row else "test __HIP_DEVICE_COMPILE__ / __gfx942__ beside __CUDA_ARCH__, or give the #if an #else that works")

    # -- shared memory / LDS -------------------------------------------------------------------

    _STATIC_SHARED = re.compile(
        r"(?P<ext>\bextern\s+)?\b__shared__\s+(?:(?:__align__|alignas|__attribute__)\s*\((?:[^()]|\([^()]*\))*\)\s*|volatile\s+|static\s+)*"
        r"(?P<type>(?:unsigned\s+|signed\s+)?(?:long\s+long|[A-Za-z_][\w:]*))\s+(?P<name>[A-Za-z_]\w*)\s*(?P<dims>(?:\[[^\]]*\]\s*)+)")

    def check_static_shared(self) -> None:
        totals: dict[int, int] = {}
        over: set[tuple[int, str]] = set()
        for m in self._STATIC_SHARED.finditer(self.src.code):
            if m.group("ext"):
                continue                       # dynamic shared memory: sized at launch
            size = _TYPE_BYTES.get(" ".join(m.group("type").split()))
            for dim in re.findall(r"\[([^\]]*)\]", m.group("dims")):
                n = evaluate(dim, self.consts)
                size = None if size is None or n is None else size * n
            if size is None:
                continue
            fn = self.src.function_at(m.start())
            totals[fn] = totals.get(fn, 0) + size
            hit = [t for t in self.targets if totals[fn] > t.smem_per_block and (fn, t.name) not in over]
            over |= {(fn, t.name) for t in hit}
            if hit:
                limits = ", ".join(f"{t.name} {_kb(t.smem_per_block)}" for t in hit)
                self.add(m.start(), len(m.group()), "error", "shared-memory",
                         f"static shared memory reaches {totals[fn]} bytes ({_kb(totals[fn])}) in this function, over the per-block limit ({limits})",
                         hit, table_row("__shared__"))

    _DYN_ATTRS = ("cudaFuncAttributeMaxDynamicSharedMemorySize", "hipFuncAttributeMaxDynamicSharedMemorySize",
                  "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES")

    def check_dynamic_shared(self) -> None:
        code = self.src.code
        requests = []                       # (offset, length, size expression, what)
        for m in re.finditer(r"\b(?:cuda|hip|cu)FuncSetAttribute\s*\(", code):
            args, end = _call_args(code, m.end() - 1)
            if len(args) == 3 and args[1][1] in self._DYN_ATTRS:
                requests.append((m.start(), end - m.start(), args[2][1], "dynamic shared memory requested with the opt-in attribute"))
        for m in re.finditer(r"<<<", code):
            end = code.find(">>>", m.end())
            args, _ = _call_args("(" + code[m.end():end] + ")", 0) if end > 0 else ([], 0)
            if len(args) >= 3:
                requests.append((m.start(), end + 3 - m.start(), args[2][1], "dynamic shared memory in the launch"))
        for offset, length, size, what in requests:
            n = evaluate(size, self.consts)
            hit = [t for t in self.targets if n is not None and n > t.smem_per_block]
            if hit:
                limits = ", ".join(f"{t.name} {_kb(t.smem_per_block)}" for t in hit)
                self.add(offset, length, "error", "shared-memory",
                         f"{what}: {n} bytes ({_kb(n)}) is over the per-block limit ({limits})", hit,
                         table_row("cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes)"))

    # -- number formats ------------------------------------------------------------------------

    _OCP_FP8 = re.compile(r"\b(?:__nv_fp8(?:x[24])?_e[45]m[32]|__NV_E4M3|__NV_E5M2|__nv_cvt_\w*fp8\w*|__nv_cvt_fp8\w*"
                          r"|__hip_fp8(?:x[24])?_e[45]m[32]|__HIP_E4M3|__HIP_E5M2|float8_e4m3fn|float8_e5m2)\b")
    _FNUZ_FP8 = re.compile(r"\b\w*(?:fnuz|FNUZ)\w*\b")

    def check_fp8_formats(self) -> None:
        code = self.src.code
        gfx942 = [t for t in self.targets if "fp8_e4m3fnuz" in t.features]
        not_fnuz = [t for t in self.targets if "fp8_e4m3fnuz" not in t.features]
        for m in self._OCP_FP8.finditer(code):
            self.add(m.start(), len(m.group()), "warning", "fp8-format",
                     "OCP fp8 (e4m3fn / e5m2): gfx942 hardware reads fp8 as FNUZ, where the same bits mean half the value",
                     gfx942, table_row("__nv_fp8_e5m2 (cuda_fp8.h)" if "e5m2" in m.group().lower() else "__nv_fp8_e4m3 (cuda_fp8.h)"))
        for m in self._FNUZ_FP8.finditer(code):
            self.add(m.start(), len(m.group()), "warning", "fp8-format",
                     "FNUZ fp8 is gfx942's format; gfx950 and NVIDIA hardware use OCP e4m3fn / e5m2",
                     not_fnuz, table_row("__nv_fp8_e4m3 (cuda_fp8.h)"))
        for m in re.finditer(r"\b448(?:\.0*)?[fF]?(?![\w.])", code):
            if re.search(r"fp8|FP8|e4m3|E4M3|float8", _statement(code, m.start()) + self.src.code_line(m.start())):
                self.add(m.start(), len(m.group()), "warning", "fp8-format",
                         "448 is the OCP e4m3 maximum; e4m3fnuz on gfx942 tops out at 240",
                         gfx942, table_row("fp8 e4m3 per-tensor scale = amax / 448"))

    # -- launch bounds -------------------------------------------------------------------------

    def check_launch_bounds(self) -> None:
        code = self.src.code
        for m in re.finditer(r"\b__launch_bounds__\s*\(", code):
            args, _ = _call_args(code, m.end() - 1)
            if not args:
                continue
            threads = evaluate(args[0][1], self.consts)
            too_many = [t for t in self.targets if threads is not None and threads > t.max_threads_per_block]
            self.add(m.start(), len(m.group()) - 1, "error", "launch-bounds",
                     f"{threads} threads per block is over the limit of {min([t.max_threads_per_block for t in too_many] or [0])}",
                     too_many, table_row("__launch_bounds__(N) with N > 1024"))
            blocks = evaluate(args[1][1], self.consts) if len(args) >= 2 else None
            if blocks is not None and blocks > 1:      # 1 (or unknown) asks nothing either vendor would act on
                self.add(args[1][0], len(args[1][1]), "warning", "launch-bounds",
                         "second argument means minimum waves per execution unit on AMD, not blocks per SM",
                         self.amd, table_row("__launch_bounds__(maxThreads, minBlocksPerSM) second argument"))
            if len(args) >= 3:
                self.add(args[2][0], len(args[2][1]), "error", "launch-bounds",
                         "a third argument (max blocks per cluster) does not compile with HIP's __launch_bounds__",
                         self.amd, table_row("__launch_bounds__(maxThreads, minBlocks, maxBlocksPerCluster) third argument"))


def _matching_brace(body: str) -> int:
    depth = 0
    for k, ch in enumerate(body):
        depth += (ch == "{") - (ch == "}")
        if ch == "}" and depth == 0:
            return k + 1
    return len(body)


def _statement(code: str, offset: int) -> str:
    start = max(code.rfind(";", 0, offset), code.rfind("{", 0, offset), code.rfind("}", 0, offset)) + 1
    end = code.find(";", offset)
    return code[start:end if end >= 0 else len(code)]


def _kb(n: int) -> str:
    return f"{n / 1024:g} KB"


# PTX instruction families an asm statement may hold, most specific first, each naming the
# table row (by its CUDA cell) whose availability and fix apply.
PTX_FAMILIES = (
    (r"\bwgmma\.(?:fence|commit_group|wait_group)", "wgmma.fence / wgmma.commit_group / wgmma.wait_group"),
    (r"\bwgmma\.mma_async\S*\.e[45]m[32]", "wgmma.mma_async.sync.aligned.m64nNk32.f32.e4m3.e4m3"),
    (r"\bwgmma\.mma_async", "wgmma.mma_async.sync.aligned.m64nNk16.f32.f16.f16"),
    (r"\btcgen05\.mma\S*kind::mxf4nvf4", "tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.scale_vec::4X (NVFP4)"),
    (r"\btcgen05\.mma\S*kind::mxf8f6f4", "tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale"),
    (r"\btcgen05\.mma\S*kind::mxf4\b", "tcgen05.mma.cta_group::1.kind::mxf4.block_scale"),
    (r"\btcgen05\.mma\.cta_group::2", "tcgen05.mma.cta_group::2 (CTA pair)"),
    (r"\btcgen05\.mma", "tcgen05.mma.cta_group::1.kind::f16"),
    (r"\btcgen05\.(?:alloc|dealloc|relinquish_alloc_permit)", "tcgen05.alloc / tcgen05.dealloc / tcgen05.relinquish_alloc_permit"),
    (r"\btcgen05\.(?:ld|st)\b", "tcgen05.ld / tcgen05.st"),
    (r"\btcgen05\.cp\b", "tcgen05.cp"),
    (r"\btcgen05\.(?:commit|wait)\b", "tcgen05.commit / tcgen05.wait"),
    (r"\btcgen05\.fence", "tcgen05.fence::before_thread_sync / tcgen05.fence::after_thread_sync"),
    (r"\bmma\.sync\S*kind::mxf4nvf4", "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3"),
    (r"\bmma\.sync\S*kind::mxf4\b", "mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0"),
    (r"\bmma\.sync\S*kind::mxf8f6f4", "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e4m3.f32.ue8m0"),
    (r"\bmma\.sync\S*kind::f8f6f4", "mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.e2m1.e2m1.f32"),
    (r"\bmma\.sp\b", "mma.sp.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32 (2:4 sparse)"),
    (r"\bmma\.sync\S*\.e5m2\.", "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32"),
    (r"\bmma\.sync\S*\.e4m3\.", "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32"),
    (r"\bmma\.sync\S*\.tf32\.", "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"),
    (r"\bmma\.sync\S*\.f64\.", "mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64"),
    (r"\bmma\.sync\S*\.[su]8\.", "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"),
    (r"\bmma\.sync\S*\.bf16\.", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"),
    (r"\bmma\.sync", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"),
    (r"\bldmatrix\b", "ldmatrix.sync.aligned.m8n8.x4.shared.b16 (PTX)"),
    (r"\bstmatrix\b", "stmatrix.sync.aligned.m8n8.x4.shared.b16 (PTX)"),
    (r"\bmovmatrix\b", "movmatrix.sync.aligned.m8n8.trans.b16 (PTX)"),
    (r"\bsetmaxnreg\b", "setmaxnreg.inc.sync.aligned.u32 / setmaxnreg.dec (PTX)"),
    (r"\bcp\.async\.bulk\.tensor", "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes (TMA)"),
    (r"\bcp\.async\.bulk\.prefetch|\bprefetch\.global", "prefetch.global.L2 / cp.async.bulk.prefetch.L2.global (PTX)"),
    (r"\bcp\.reduce\.async\.bulk", "cp.reduce.async.bulk (bulk reduction into global memory)"),
    (r"\bcp\.async\.bulk", "cp.async.bulk.shared::cluster.global (1-D bulk copy)"),
    (r"\bcp\.async\.(?:commit_group|wait_group|wait_all)", "cp.async.commit_group / cp.async.wait_group N (PTX)"),
    (r"\bcp\.async\b", "cp.async.ca.shared.global [dst], [src], 16 (PTX) / __pipeline_memcpy_async"),
    (r"\bmbarrier\.\S*expect_tx", "mbarrier.arrive.expect_tx.shared::cta.b64 (PTX)"),
    (r"\bmbarrier\.init", "mbarrier.init.shared::cta.b64 (PTX)"),
    (r"\bmbarrier\.try_wait", "mbarrier.try_wait.parity.shared::cta.b64 (PTX)"),
    (r"\bfence\.proxy\.async", "fence.proxy.async.shared::cta (PTX)"),
    (r"\bgriddepcontrol\.wait", "griddepcontrol.wait / cudaGridDependencySynchronize()"),
    (r"\bgriddepcontrol\.launch_dependents", "griddepcontrol.launch_dependents / cudaTriggerProgrammaticLaunchCompletion()"),
    (r"\belect\.sync", "elect.sync (PTX)"),
    (r"\bredux\.sync\S*\.f32", "redux.sync.max.f32 (PTX)"),
    (r"\bredux\.sync", "redux.sync.add.u32 (PTX)"),
    (r"\bcvt\.rs\.", "cvt.rs.satfinite.bf16x2.f32 (PTX, stochastic rounding)"),
    (r"\bcvt\S*\.bf16x2\.f32", "cvt.rn.bf16x2.f32 (PTX)"),
    (r"\bcvt\S*ue8m0", "cvt.rp.satfinite.ue8m0x2.f32 (PTX)"),
    (r"\bcvt\S*\.f16x2\.e2m1x2", "cvt.rn.f16x2.e2m1x2 (PTX)"),
    (r"\bcvt\S*e2m1x2", "cvt.rn.satfinite.e2m1x2.f32 (PTX)"),
    (r"\bcvt\S*(?:e2m3x2|e3m2x2)", "cvt.rn.satfinite.e2m3x2.f32 (PTX)"),
    (r"\bcvt\S*e5m2x2", "cvt.rn.satfinite.e5m2x2.f32 (PTX)"),
    (r"\bcvt\.rna\.tf32", "cvt.rna.tf32.f32 (PTX) / wmma::__float_to_tf32"),
    (r"\b(?:fma|add|mul|sub)\S*\.f32x2\b", "__ffma2_rn(float2, float2, float2) / fma.rn.f32x2 (PTX)"),
    (r"\bld\.global\S*\.v8\.", "ld.global.v8.f32 (256-bit load, PTX)"),
    (r"\bmultimem\.", "multimem.red.relaxed.sys.global.add (PTX, NVLink multicast)"),
    (r"\btanh\.approx", "tanh.approx.f32 (PTX) / __tanhf(x)"),
    (r"\blop3\.b32", "lop3.b32 (PTX three-input logic)"),
    (r"\bprmt\.b32", "prmt.b32 (PTX byte permute)"),
    (r"\bbar\.sync\s+\w+\s*,", "bar.sync id, nthreads (PTX named barrier)"),
    (r"\bbar\.sync\b", "bar.sync 0 (PTX)"),
    (r"%globaltimer", "%globaltimer (PTX, nanoseconds)"),
    (r"%nsmid", "%nsmid (PTX special register)"),
    (r"%smid", "%smid (PTX; asm(\"mov.u32 %0, %%smid;\"))"),
    (r"%warpid", "%warpid (PTX special register)"),
    (r"%clusterid|%cluster_ctarank", "%clusterid.x / cluster.block_rank()"),
    (r"%lanemask_lt", "%lanemask_lt (PTX special register)"),
    (r"%lanemask_gt", "%lanemask_gt (PTX special register)"),
    (r"%lanemask_eq", "%lanemask_eq (PTX special register)"),
    (r"%lanemask_(?:le|ge)", "%lanemask_le / %lanemask_ge (PTX special registers)"),
)


# ---------------------------------------------------------------- names the table marks unavailable

_LEADING = re.compile(r"^\s*([A-Za-z_]\w*(?:::\w+)*)")
_AMDGPU_BUILTIN = "__builtin_amdgcn_"
# A leading identifier counts as an API name only if it looks like one, so that rows such as
# "static __shared__ ..." or "kernel<<<...>>>" do not turn 'static' or 'kernel' into hazards.
_API_LIKE = re.compile(r"^(?:__\w+|cu\w+|CU_\w+|nv\w+|hip\w+|HIP_\w+|\w+::\w+|[a-z]+[A-Z]\w*|[a-z]\w*_\w+|tex\d\w*|surf\d\w*)$")


@functools.cache
def _name_index() -> dict[str, tuple]:
    """name -> (pattern, rows it leads on the CUDA side, rows it leads on the HIP side), kept
    only for names some row marks unavailable ('no') or without a HIP equivalent."""
    cuda_side: dict[str, list] = {}
    hip_side: dict[str, list] = {}
    for row in load_table():
        for cell, side in ((row["cuda"], cuda_side), (row["hip"], hip_side)):
            if cell.startswith("none"):
                continue
            m = _LEADING.match(cell)
            if m and _API_LIKE.match(m.group(1)) and len(m.group(1)) >= 5:
                side.setdefault(m.group(1), []).append(row)
    index = {}
    for name in set(cuda_side) | set(hip_side):
        rows = cuda_side.get(name, []) + hip_side.get(name, [])
        if (any(r[t] == "no" for r in rows for t in TARGET_COLUMNS) or name.startswith(_AMDGPU_BUILTIN)
                or any(r["hip"].startswith("none") for r in cuda_side.get(name, []))):
            last = name.split("::")[-1]
            pattern = re.compile(rf"::\s*{re.escape(last)}\b" if name.startswith("cooperative_groups::")
                                 else rf"(?<![\w.]){re.escape(name)}\b")
            index[name] = (pattern, cuda_side.get(name, []), hip_side.get(name, []))
    return index


def _name_verdicts(name: str, cuda_rows: list, hip_rows: list, targets: list[Target]):
    """(severity, kind, message, targets, row) for a name used in a source. The availability
    columns describe the CUDA spelling on NVIDIA targets and the HIP spelling on AMD targets,
    so each side of the row is judged only by its own vendor's columns."""
    out = []
    for vendor, own, other in (("nvidia", cuda_rows, hip_rows), ("amd", hip_rows, cuda_rows)):
        tgts = [t for t in targets if t.vendor == vendor]
        if not tgts or not (own or other):
            continue
        if own:
            missing = [t for t in tgts if all(r[t.name] == "no" for r in own)]
            if missing:
                row = own[0]
                kind = "matrix-unavailable" if row["category"] == "matrix" else "unavailable-on-target"
                out.append(("error", kind, f"{name} is not available on these targets", missing, row))
        elif vendor == "amd":
            # a CUDA name in a source ported to AMD: flagged when its HIP side is 'none' or
            # its row says the counterpart is missing on the target
            no_hip = all(r["hip"].startswith("none") for r in other)
            hard = [t for t in tgts if all(r[t.name] == "no" for r in other)]
            soft = [t for t in tgts if t not in hard] if no_hip else []
            row = other[0]
            kind = "no-hip-equivalent" if no_hip else \
                "matrix-unavailable" if row["category"] == "matrix" else "unavailable-on-target"
            what = f"{name} has no HIP equivalent" if no_hip else f"{name} has no working counterpart on these targets"
            out.append(("error", kind, what, hard, row))
            out.append(("warning", kind, what + "; the nearest needs rework", soft, row))
        elif vendor == "nvidia":
            # an AMDGPU builtin never compiles for NVIDIA, whatever its row's CUDA side offers
            missing = [t for t in tgts if name.startswith(_AMDGPU_BUILTIN) or all(r[t.name] == "no" for r in other)]
            if missing:
                out.append(("error", "unavailable-on-target", f"{name} is AMD-only", missing, other[0]))
    return out
