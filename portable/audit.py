"""`portable audit`: portability hazards in CUDA (and HIP) sources, judged against the targets.

Each check reads the source with comments and string literals blanked out (positions kept),
so nothing in a comment or a string is ever flagged; inline PTX is read from the asm
statement's own strings. Facts (availability per target, fixes, notes) come from the mapping
table rows, and limits (wave size, shared memory / LDS, threads per block) from the targets
data, so the audit says what `portable ref` says.
"""
from __future__ import annotations

import ast
import bisect
import functools
import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from .data import TARGET_COLUMNS, load_table
from .errors import InputError
from .targets import Target, all_targets, get_target

SEVERITIES = ("info", "warning", "error")
SOURCE_SUFFIXES = (".cu", ".cuh", ".hip", ".h", ".hpp", ".hh", ".cpp", ".cc", ".cxx", ".inl")


@dataclass(frozen=True)
class Finding:
    file: str
    line: int
    column: int
    severity: str               # info | warning | error
    kind: str                   # hazard kind, e.g. lane-mask
    text: str                   # the offending source text
    message: str
    fix: str                    # from the table row where one exists
    targets: tuple[str, ...]    # the targets the hazard applies to
    row: str = ""               # table row the fix comes from (file:line)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["targets"] = list(self.targets)
        return d

    def format(self) -> str:
        where = f"{self.file}:{self.line}:{self.column}"
        out = f"{where}: {self.severity}: [{self.kind}] {self.message} ({', '.join(self.targets)})\n    | {self.text}"
        if self.fix:
            out += f"\n    fix: {self.fix}" + (f"  [{self.row}]" if self.row else "")
        return out


# ---------------------------------------------------------------- the table, as the audit needs it

@functools.cache
def _rows_by_cuda() -> dict[str, dict]:
    return {r["cuda"]: r for r in load_table()}


def table_row(cuda: str) -> dict:
    """The table row whose CUDA cell is exactly `cuda` (checks name their rows this way)."""
    try:
        return _rows_by_cuda()[cuda]
    except KeyError:
        raise KeyError(f"audit: no mapping-table row has cuda = {cuda!r}") from None


def _fix(row: dict) -> str:
    return f"{row['hip']}" + (f" -- {row['note']}" if row["note"] else "")


# ---------------------------------------------------------------- reading a source

class Source:
    """A source file with two blanked views, same length and line breaks as the original:
    `code` has comments and string/char literals blanked, `code_str` comments only."""

    def __init__(self, text: str, path: str):
        self.text, self.path = text, path
        self.code, self.code_str = _blank(text)
        self._line_starts = [0] + [m.end() for m in re.finditer(r"\n", text)]

    def position(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self._line_starts, offset)
        return line, offset - self._line_starts[line - 1] + 1

    def line_text(self, line: int) -> str:
        start = self._line_starts[line - 1]
        end = self.text.find("\n", start)
        return self.text[start:end if end >= 0 else len(self.text)].strip()

    def code_line(self, offset: int) -> str:
        """The blanked line (no comments, no strings) holding `offset`."""
        start = self.code.rfind("\n", 0, offset) + 1
        end = self.code.find("\n", offset)
        return self.code[start:end if end >= 0 else len(self.code)]

    def function_at(self, offset: int) -> int:
        """Start offset of the outermost function body holding `offset` (-1 at file scope)."""
        i = bisect.bisect_right(self._functions, (offset, float("inf"))) - 1
        if i >= 0 and self._functions[i][0] <= offset < self._functions[i][1]:
            return self._functions[i][0]
        return -1

    @functools.cached_property
    def _functions(self) -> list[tuple[int, int]]:
        # a brace block whose opener follows ')' (after optional qualifiers) is a function body
        # when no enclosing block is one: if/for blocks inside a function stay with it
        spans, stack = [], []
        for m in re.finditer(r"[{}]", self.code):
            if m.group() == "{":
                head = self.code[max(0, m.start() - 200):m.start()]
                is_fn = bool(re.search(r"\)\s*(?:const|noexcept|override|final|->\s*[\w:<>]+|\s)*$", head))
                outer_fn = any(f for _, f in stack)
                stack.append((m.start(), is_fn and not outer_fn))
            elif stack:
                start, is_fn = stack.pop()
                if is_fn:
                    spans.append((start, m.end()))
        return sorted(spans)


def _blank(text: str) -> tuple[str, str]:
    """Blank comments (both views) and string/char literals (first view only)."""
    code, code_str = list(text), list(text)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            _spaces(code, i, j), _spaces(code_str, i, j)
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            _spaces(code, i, j), _spaces(code_str, i, j)
            i = j
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^()\\ ]{0,16})\(', text[i:])
            if m:
                end = text.find(")" + m.group(1) + '"', i + m.end())
                j = n if end < 0 else end + len(m.group(1)) + 2
                _spaces(code, i, j)
                i = j
            else:
                i += 1
        elif c in "\"'":
            if c == "'" and re.search(r"\b\d[0-9a-fA-FxXbB']*$", text[max(0, i - 40):i]):
                i += 1          # digit separator 1'000'000, not a char literal
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            _spaces(code, i, j)
            i = j
        else:
            i += 1
    return "".join(code), "".join(code_str)


def _spaces(chars: list, start: int, end: int) -> None:
    for k in range(start, end):
        if chars[k] != "\n":
            chars[k] = " "


def _call_args(code: str, open_paren: int) -> tuple[list[tuple[int, str]], int]:
    """Top-level arguments (offset, text) of the call whose '(' is at `open_paren`, and the end."""
    depth, start, args = 0, open_paren + 1, []
    for k in range(open_paren, len(code)):
        ch = code[k]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                args.append((start, code[start:k]))
                return [(o + len(a) - len(a.lstrip()), a.strip()) for o, a in args if a.strip()], k + 1
        elif ch == "," and depth == 1:
            args.append((start, code[start:k]))
            start = k + 1
    return [], len(code)


# ---------------------------------------------------------------- constant expressions

_TYPE_BYTES = {
    "char": 1, "signed char": 1, "unsigned char": 1, "bool": 1, "int8_t": 1, "uint8_t": 1,
    "__nv_fp8_e4m3": 1, "__nv_fp8_e5m2": 1, "__hip_fp8_e4m3": 1, "__hip_fp8_e4m3_fnuz": 1,
    "short": 2, "unsigned short": 2, "int16_t": 2, "uint16_t": 2, "half": 2, "__half": 2,
    "__nv_bfloat16": 2, "nv_bfloat16": 2, "__hip_bfloat16": 2, "hip_bfloat16": 2, "_Float16": 2,
    "int": 4, "unsigned": 4, "unsigned int": 4, "int32_t": 4, "uint32_t": 4, "float": 4,
    "__half2": 4, "half2": 4, "__nv_bfloat162": 4, "__hip_bfloat162": 4, "char4": 4, "uchar4": 4,
    "long long": 8, "unsigned long long": 8, "int64_t": 8, "uint64_t": 8, "double": 8, "size_t": 8,
    "float2": 8, "int2": 8, "uint2": 8,
    "float4": 16, "int4": 16, "uint4": 16, "double2": 16, "longlong2": 16, "ulonglong2": 16,
}
_CONST_DEF = re.compile(
    r"#\s*define\s+(?P<m>[A-Za-z_]\w*)[ \t]+(?P<mv>[^\n]+)"
    r"|(?:static\s+)?(?:constexpr|const)\s+(?:static\s+)?(?:unsigned\s+|signed\s+)?(?:int|long|long long|short|size_t|auto|uint32_t|int32_t|uint64_t|int64_t|unsigned)?\s*"
    r"(?P<c>[A-Za-z_]\w*)\s*=\s*(?P<cv>[^;]+);")
_INT = re.compile(r"\b(0[xX][0-9a-fA-F]+|\d+)[uUlL]*\b")
_SIZEOF = re.compile(r"sizeof\s*\(\s*([A-Za-z_][\w ]*?)\s*\)")


def _constants(code: str) -> dict[str, int]:
    """Integer constants defined by #define or const/constexpr in this file, in order."""
    consts: dict[str, int] = {}
    for m in _CONST_DEF.finditer(code):
        name, value = (m.group("m"), m.group("mv")) if m.group("m") else (m.group("c"), m.group("cv"))
        v = evaluate(value, consts)
        if v is not None:
            consts[name] = v
    return consts


def evaluate(expr: str, consts: dict[str, int] | None = None) -> int | None:
    """The value of a small integer expression (literals, known constants, sizeof of a known
    type, + - * / % << >> and parentheses), or None when it cannot be known here."""
    consts = consts or {}
    expr = _SIZEOF.sub(lambda m: str(_TYPE_BYTES.get(" ".join(m.group(1).split()), "sizeof_unknown")), expr)
    expr = _INT.sub(lambda m: str(int(m.group(1), 0)), expr)
    expr = re.sub(r"\(\s*(?:unsigned|int|size_t|long|long long|unsigned long long|uint32_t|uint64_t)\s*\)", "", expr)
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except SyntaxError:
        return None

    def value(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name) and node.id in consts:
            return consts[node.id]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = value(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.BinOp):
            a, b = value(node.left), value(node.right)
            ops = {ast.Add: int.__add__, ast.Sub: int.__sub__, ast.Mult: int.__mul__,
                   ast.Div: int.__floordiv__, ast.FloorDiv: int.__floordiv__, ast.Mod: int.__mod__,
                   ast.LShift: int.__lshift__, ast.RShift: int.__rshift__}
            if type(node.op) in ops and (b != 0 or not isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod))):
                return ops[type(node.op)](a, b)
        raise ValueError(node)
    try:
        return value(tree.body)
    except (ValueError, TypeError, OverflowError):
        return None


# ---------------------------------------------------------------- the checks

class Audit:
    """One source against a set of targets; each check_* method adds findings."""

    def __init__(self, source: Source, targets: list[Target]):
        self.src, self.targets = source, targets
        self.wave64 = [t for t in targets if t.wave != 32]      # wave-size hazards exist only here
        self.amd = [t for t in targets if t.vendor == "amd"]
        self.findings: list[Finding] = []
        self.consts = _constants(source.code)

    def add(self, offset: int, length: int, severity: str, kind: str, message: str, targets,
            row: dict | None = None, fix: str = "") -> None:
        names = tuple(t.name if isinstance(t, Target) else t for t in targets)
        if not names:
            return
        line, col = self.src.position(offset)
        text = " ".join(self.src.text[offset:offset + length].split()) or self.src.line_text(line)
        if row is not None and not fix:
            fix = _fix(row)
        self.findings.append(Finding(self.src.path, line, col, severity, kind, text, message, fix, names,
                                     row["file"] if row else ""))

    def run(self) -> list[Finding]:
        for check in (self.check_warp_arithmetic, self.check_warp_constants, self.check_shuffle_reductions,
                      self.check_lane_masks, self.check_ballot_width, self.check_warp_sync_semantics,
                      self.check_inline_asm, self.check_unavailable_names, self.check_static_shared,
                      self.check_dynamic_shared, self.check_fp8_formats, self.check_launch_bounds):
            check()
        return sorted(self.findings, key=lambda f: (f.line, f.column, f.kind))

    # -- warp / wavefront size ---------------------------------------------------------------

    # an expression that is a thread or lane index: threadIdx.x, tid, lane_id, idx, ...
    _THREADISH = r"(?:threadIdx\s*\.\s*[xyz]|\b\w*(?:tid|Tid|TID|lane|Lane|LANE|thread|Thread|THREAD|idx|Idx|IDX)\w*)"
    _LANE_ARITH = re.compile(_THREADISH + r"\s*(?:&\s*(?:31|0[xX]1[fF])|%\s*32)(?![\w.])")
    _WARP_ARITH = re.compile(_THREADISH + r"\s*(?:/\s*32|>>\s*5)(?![\w.])")
    _WARP_SCALE = re.compile(r"\b\w*[Ww]arp\w*\s*(?:\*\s*32|<<\s*5)(?![\w.])|\b32\s*\*\s*\w*[Ww]arp\w*")

    def check_warp_arithmetic(self) -> None:
        for m in self._LANE_ARITH.finditer(self.src.code):
            self.add(m.start(), len(m.group()), "warning", "warp-size",
                     "lane index computed for 32-lane warps; a wave has 64 lanes here",
                     self.wave64, table_row("threadIdx.x % 32 (or %laneid)"))
        for m in self._WARP_ARITH.finditer(self.src.code):
            self.add(m.start(), len(m.group()), "warning", "warp-size",
                     "warp index computed for 32-lane warps; a wave has 64 lanes here",
                     self.wave64, table_row("threadIdx.x >> 5 / threadIdx.x / 32 (warp index hard-coded)"))
        for m in self._WARP_SCALE.finditer(self.src.code):
            self.add(m.start(), len(m.group()), "warning", "warp-size",
                     "offset scaled by a hard-coded warp size of 32",
                     self.wave64, table_row("threadIdx.x >> 5 / threadIdx.x / 32 (warp index hard-coded)"))

    # names that say "warp size": WARP_SIZE, kWarpSize, warp_size, THREADS_PER_WARP, WARP
    _WARP_NAME = (r"(?:\w*(?:WARP|[Ww]arp)_?(?:SIZE|[Ss]ize|THREADS|[Tt]hreads|LANES|[Ll]anes)\w*"
                  r"|\w*(?:THREADS|[Tt]hreads|LANES|[Ll]anes)_?(?:PER|[Pp]er)_?(?:WARP|[Ww]arp)\w*|WARP|kWarp)")
    _WARP_CONST = re.compile(r"#\s*define\s+" + _WARP_NAME + r"\s+\(?32\)?(?![\w.])"
                             r"|\b" + _WARP_NAME + r"\s*=\s*32(?![\w.])")

    def check_warp_constants(self) -> None:
        for m in self._WARP_CONST.finditer(self.src.code):
            self.add(m.start(), len(m.group()), "warning", "warp-size",
                     "warp size hard-coded as 32", self.wave64,
                     table_row("constexpr int WARP_SIZE = 32; / #define WARP_SIZE 32"))

    _HALVING_LOOP = re.compile(
        r"\bfor\s*\(\s*(?:(?:const|unsigned|signed|int|auto|uint32_t|int32_t|size_t)\s+)*(?P<v>\w+)\s*=\s*16[uU]?\s*;"
        r"\s*(?P=v)\s*(?:>|>=|!=)\s*[01][uU]?\s*;\s*(?:(?P=v)\s*(?:>>=\s*1|/=\s*2)|(?P=v)\s*=\s*(?P=v)\s*(?:/\s*2|>>\s*1))\s*\)")
    _SHUFFLE = re.compile(r"\b__shfl(?:_xor|_down|_up)?(?:_sync)?\s*\(|\.shfl(?:_xor|_down|_up)?\s*\(")

    def check_shuffle_reductions(self) -> None:
        code = self.src.code
        for m in self._HALVING_LOOP.finditer(code):
            rest = code[m.end():]
            body = rest[:_matching_brace(rest)] if rest.lstrip().startswith("{") else rest[:rest.find(";") + 1]
            if self._SHUFFLE.search(body):
                self.add(m.start(), len(m.group()), "error", "shuffle-reduction",
                         "shuffle reduction starts at offset 16: on a 64-lane wave lanes 0-31 and 32-63 are never combined",
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

    _FULL_MASK = re.compile(r"\b0[xX][fF]{8}(?![0-9a-fA-F])[uUlL]*|~\s*0[uU]\b")

    def check_lane_masks(self) -> None:
        code, row = self.src.code, table_row("0xffffffffu")
        message = "32-bit full lane mask: covers lanes 0-31 only, and HIP's *_sync functions reject a 32-bit mask"
        for m in self._FULL_MASK.finditer(code):
            if re.search(r"_sync\s*\(|__syncwarp|__ballot|__activemask|[Mm][Aa][Ss][Kk]", _statement(code, m.start())):
                self.add(m.start(), len(m.group()), "error", "lane-mask", message, self.wave64, row)
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
            row = table_row("__popc") if uses_popc else \
                table_row("unsigned mask = __ballot_sync(...) (32-bit ballot variable)")
            self.add(m.start(), len(m.group()), "error", "ballot-width",
                     "ballot result held in 32 bits: lanes 32-63 of a 64-lane wave are lost", self.wave64, row)

    def check_warp_sync_semantics(self) -> None:
        for m in re.finditer(r"\b__activemask\s*\(", self.src.code):
            self.add(m.start(), len("__activemask"), "warning", "warp-sync-semantics",
                     "__activemask is 64-bit on HIP and only a snapshot of converged lanes on CUDA",
                     self.wave64, table_row("__activemask()"))
        for m in re.finditer(r"\b__syncwarp\s*\(", self.src.code):
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
            if first is not None:
                message += f"; it uses {first['cuda'].split(' (')[0]}"
            self.add(m.start(), end - m.start(), "error", "inline-asm", message, self.amd, first,
                     fix="" if first else "replace it with a builtin or intrinsic: `portable ref <instruction>` lists them")
            for _, row in rows:
                missing = [t for t in self.targets if t.vendor == "nvidia" and row[t.name] == "no"]
                kind = "matrix-unavailable" if row["category"] == "matrix" else "unavailable-on-target"
                self.add(m.start(), end - m.start(), "error", kind,
                         f"{row['cuda'].split(' (')[0]} is not available on these targets", missing, row)

    def check_unavailable_names(self) -> None:
        code = self.src.code
        for name, (pattern, cuda_rows, hip_rows) in _name_index().items():
            for m in pattern.finditer(code):
                if self.src.code_line(m.start()).lstrip().startswith("#"):
                    continue            # a feature test in #if / #ifdef is not a use
                for severity, kind, message, targets, row in _name_verdicts(name, cuda_rows, hip_rows, self.targets):
                    self.add(m.start(), len(m.group()), severity, kind, message, targets, row)

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
            if len(args) >= 2:
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


# ---------------------------------------------------------------- entry points

def _resolve(targets) -> list[Target]:
    if targets is None:
        return list(all_targets().values())
    if isinstance(targets, str):
        if targets.strip() == "all":
            return list(all_targets().values())
        targets = [t for t in targets.split(",") if t.strip()]
    resolved = [t if isinstance(t, Target) else get_target(str(t).strip()) for t in targets]
    if not resolved:
        raise InputError("targets: no target given; expected one or more of " + ", ".join(all_targets()))
    return resolved


def audit_source(text: str, path: str = "<source>", targets=None) -> list[Finding]:
    """Hazards in one source text for `targets` (names, a comma-separated string, or None for all)."""
    return Audit(Source(text, path), _resolve(targets)).run()


def source_files(paths) -> list[Path]:
    files = []
    for p in map(Path, paths):
        if p.is_dir():
            files += sorted(f for f in p.rglob("*") if f.suffix in SOURCE_SUFFIXES and f.is_file())
        elif p.is_file():
            files.append(p)
        else:
            raise InputError(f"path: {str(p)!r} is neither a file nor a folder")
    return files


def audit_paths(paths, targets=None) -> list[Finding]:
    """Hazards in every file given, or every source file under each folder given."""
    resolved = _resolve(targets)
    findings = []
    for f in source_files(paths):
        findings += audit_source(f.read_text(errors="replace"), str(f), resolved)
    return findings


def at_or_above(findings: list[Finding], severity: str) -> list[Finding]:
    if severity not in SEVERITIES:
        raise InputError(f"fail-on: unknown severity {severity!r}; expected one of {', '.join(SEVERITIES)}")
    floor = SEVERITIES.index(severity)
    return [f for f in findings if SEVERITIES.index(f.severity) >= floor]


def cmd_audit(args) -> int:
    targets = _resolve(args.target)
    findings = audit_paths(args.paths, targets)
    if args.format == "json":
        print(json.dumps([f.to_dict() for f in findings], indent=2))
    else:
        for f in findings:
            print(f.format())
        counts = {s: sum(f.severity == s for f in findings) for s in reversed(SEVERITIES)}
        files = len(source_files(args.paths))
        print(f"{len(findings)} finding(s): " + ", ".join(f"{n} {s}" for s, n in counts.items())
              + f" in {files} file(s) for {', '.join(t.name for t in targets)}")
    return 1 if at_or_above(findings, args.fail_on) else 0


def add_cli(subparsers) -> None:
    p = subparsers.add_parser("audit", help="report portability hazards in CUDA/HIP sources",
                              description="Report portability hazards (file:line:column, severity, fix from the mapping table).")
    p.add_argument("paths", nargs="+", metavar="PATH", help="source files, or folders to search for them")
    p.add_argument("--target", default="all", help="targets to judge against: a comma-separated list or 'all' (default)")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument("--fail-on", choices=SEVERITIES, default="error",
                   help="exit with status 1 when a hazard at or above this severity is found (default: error)")
    p.set_defaults(func=cmd_audit)
