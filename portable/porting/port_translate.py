"""CUDA -> HIP translation of one source text, every rule read from the mapping table.

Names: a row whose CUDA and HIP cells have the same shape gives name pairs (`cudaMalloc` /
`hipMalloc`; `cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync)` / `hipSetDeviceFlags(hipDevice
ScheduleBlockingSync)`; a trailing ` (annotation)` and ` / ` lists are read too). A row says a
name stays when its HIP cell is `none ...`, when its columns say `no` on every AMD target asked
for, when the HIP call takes other arguments, or when one CUDA name has several HIP spellings (one
per target). Hand-written rows speak first; generated rows (generated_*.csv) only for names no
hand-written row speaks of. Calls: a keyed row's cuda_expr / hip_expr pair is a call pattern
(`__shfl_xor_sync(0xffffffffu, {v}, {lane_mask})` -> `__shfl_xor({v}, {lane_mask})`,
`__stcs({ptr}, {v})` -> `__builtin_nontemporal_store({v}, {ptr})`); a `__*_sync` call with no
pattern has its full 32-bit mask widened to the table's 64-bit one; any other mask stays.
Only code is touched, never comments or string literals, and every edit keeps the line count,
so line N of the output is line N of the input.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from .audit_reading import _constants, evaluate
from .audit_reading import call_spans as call_args
from ..data import load_table

ID = re.compile(r"[A-Za-z_]\w*")
_ANNOTATION = re.compile(r"\s+\((?:[^()]|\([^()]*\))*\)\s*$")       # "__half (cuda_fp16.h)"
_TOKEN = re.compile(r"[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*|\d[\w.]*|\S")
# the leading name of a complex cell counts only if it is an API name, not a word ("compute capability")
_API = re.compile(r"^(?:__\w+|cu[A-Z]\w*|cuda\w+|CU_\w+|CUDA_?\w+|nv[A-Z]\w*|NV\w+|cublas\w*|curand\w*|cufft\w*"
                  r"|cusparse\w*|cusolver\w*|cudnn\w*|nccl\w*|\w+::\w+|[a-z]+[A-Z]\w*)$")
_SWAP = re.compile(r"^(?:cuda|cu|CUDA_|CU_|__CUDA|__NV_|nv)")         # cudaX -> hipX, CU_X -> HIP_X, ...
# names that look like CUDA API though no row mentions them: reported, never guessed at
CUDA_LOOKING = re.compile(r"^(?:cuda[A-Z]\w*|cu[A-Z][a-z]\w*|CU_[A-Z0-9_]+|cublas[A-Z]\w*|curand[A-Z_]\w*|cufft[A-Z]\w*"
                          r"|cusparse[A-Z]\w*|cudnn[A-Z]\w*|nvrtc[A-Z]\w*|__nv_\w+|__NV_\w+|nv_bfloat16\w*)$")
_LEX = re.compile(r'//[^\n]*|/\*.*?(?:\*/|\Z)|R"([^()\\ ]{0,16})\(.*?\)\1"|"(?:\\.|[^"\\\n])*"?'
                  r"|(?<![\w'])'(?:\\.|[^'\\\n])*'?", re.S)
FULL32, FULL64 = 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF
DEVICE_PASS = "__HIP_DEVICE_COMPILE__"     # defined(__CUDA_ARCH__) in HIP (the __CUDA_ARCH__ row of ref_rtc.csv)


def blank(text: str) -> str:
    """`text` with comments and string / char literals turned to spaces (newlines kept)."""
    return _LEX.sub(lambda m: re.sub(r"[^\n]", " ", m.group()), text)


def _items(cell: str) -> list[str]:
    """A cell's ` / `-separated spellings (outside parentheses), each without its ` (annotation)`."""
    items, depth, start = [], 0, 0
    for k, ch in enumerate(cell):
        depth += (ch == "(") - (ch == ")")
        if depth == 0 and cell.startswith(" / ", k):
            items.append(cell[start:k])
            start = k + 3
    return [_ANNOTATION.sub("", i.strip()) for i in items + [cell[start:]]]


def _swapped(a: str, b: str) -> bool:
    """b is a with the vendor prefix swapped: cudaMemcpyHostToDevice / hipMemcpyHostToDevice."""
    rest = _SWAP.sub("", a).lstrip("_").lower()
    return rest == re.sub(r"^(?:hip|HIP_|__HIP|__hip|roc)", "", b).lstrip("_").lower() and bool(rest)


@dataclass
class Rules:
    names: dict = field(default_factory=dict)        # CUDA name -> HIP name
    same: set = field(default_factory=set)           # CUDA names HIP spells alike
    blocked: dict = field(default_factory=dict)      # CUDA name -> why it stays
    calls: dict = field(default_factory=dict)        # name -> [(pattern args, hip_expr)], from keyed rows
    mask_fns: dict = field(default_factory=dict)     # __popc -> __popcll: for 64-bit ballot results
    cuda_width: str = "32"                            # CUDA's warp, the width of its shuffles
    mask_type: str = "unsigned long long"
    full_mask64: str = "0xffffffffffffffffull"
    headers: list = field(default_factory=list)      # (CUDA header or "dir/*", HIP header or None, row)


def _verdicts(row: dict, amd: list[str]):
    """(CUDA name, kind, value) pairs a row says: kind is map | same | blocked."""
    hip, cuda_items = row["hip"].strip(), _items(row["cuda"])
    if row["cuda"].startswith("none"):
        return
    if hip.startswith("none"):
        for item in cuda_items:
            name = next(iter(_TOKEN.findall(item)), "")
            if _API.match(name):
                yield name, "blocked", f"no HIP equivalent ({hip})"
        return
    hip_items = [h for h in _items(hip) if ID.match(h)]
    if len(cuda_items) != len(hip_items):
        if len(cuda_items) == 1 and re.fullmatch(r"\w+(?:::\w+)*", cuda_items[0]) and _API.match(cuda_items[0]):
            yield cuda_items[0], "blocked", f"HIP spells it per target: {hip}"
        return
    unavailable = bool(amd) and all(row[t] == "no" for t in amd)
    for c, h in zip(cuda_items, hip_items):
        ct, ht = _TOKEN.findall(c), _TOKEN.findall(h)
        if not ct or not ID.match(ct[0]) or not ID.match(ht[0]) or (len(ct) > 1 and not _API.match(ct[0])):
            continue                    # a phrase ("nvidia-smi", "compute capability"), not a name
        if unavailable:
            if _API.match(ct[0]):
                why = f"{hip}{'; ' + row['note'] if row['note'] else ''}"
                yield ct[0], "blocked", f"not available on {', '.join(amd)} ({why})"
            continue
        same_shape = len(ct) == len(ht) and all(bool(ID.match(a)) == bool(ID.match(b)) and (ID.match(a) or a == b)
                                                 for a, b in zip(ct, ht))
        inner = [(a, b) for a, b in zip(ct[1:], ht[1:]) if ID.match(a)] if same_shape else []
        reordered = any(a != b and not _API.match(a) for a, b in inner)        # __stcs(p, v) / store(v, p)
        if same_shape and not reordered:
            if ct[0] == ht[0]:
                yield ct[0], "same", ct[0]
            elif ht[0].startswith("__builtin_amdgcn_") and len(ct) == 1:
                yield ct[0], "blocked", f"HIP's nearest is the builtin {h}, not a drop-in"
            else:
                yield ct[0], "map", ht[0]
            yield from ((a, "map", b) for a, b in inner if a != b and _swapped(a, b))
        elif ct[0] != ht[0] and _API.match(ct[0]) and ("(" in ct or reordered):
            yield ct[0], "blocked", f"HIP's form takes other arguments: {h}"


@functools.cache
def rules(amd: tuple[str, ...] = ("gfx942", "gfx950")) -> Rules:
    """The translation rules for the AMD targets `amd`, from every row of the table."""
    r, table = Rules(), load_table()
    by_key = {row["key"]: row for row in table if row["key"]}
    r.mask_type = by_key.get("warp.mask_t", {}).get("hip_expr") or r.mask_type
    r.full_mask64 = by_key.get("warp.full_mask", {}).get("hip_expr") or r.full_mask64
    r.cuda_width = by_key.get("warp.size", {}).get("cuda_expr") or r.cuda_width
    for row in table:
        ce, he = row["cuda_expr"], row["hip_expr"]
        m, lead = re.fullmatch(r"(\w+)\((.+)\)", ce), re.match(r"\s*(\w+)", row["cuda"])
        if m and lead and lead.group(1) == m.group(1) and re.fullmatch(r"\w+\(.*\)", he) and ce != he:
            args = [a.strip() for a in m.group(2).split(",")]
            if args == ["{mask}"]:
                r.mask_fns[m.group(1)] = he.split("(")[0]
            else:
                r.calls.setdefault(m.group(1), []).append((args, he))
        if row["category"] == "headers":
            hip = None if row["hip"].startswith("none") else row["hip"].strip("<>")
            r.headers.append((row["cuda"].strip("<>"), hip, row))
    special = set(r.calls) | set(r.mask_fns) | {"__syncwarp"}
    said: dict[str, dict[int, list]] = {}
    for row in table:
        if row["category"] == "headers":
            continue
        tier = 1 if row["file"].startswith("generated_") else 0
        for name, kind, value in _verdicts(row, list(amd)):
            if name not in special and not name.endswith("_sync"):
                said.setdefault(name, {}).setdefault(tier, []).append((kind, value, row["file"]))
    for name, tiers in said.items():
        verdicts = tiers[min(tiers)]
        maps = {v for k, v, _ in verdicts if k == "map"} | ({name} if any(k == "same" for k, _, _ in verdicts) else set())
        if len(maps) > 1:
            r.blocked[name] = f"the table gives several HIP names: {', '.join(sorted(maps))}"
        elif maps == {name}:
            r.same.add(name)
        elif maps:
            r.names[name] = maps.pop()
        else:
            _, why, where = next(v for v in verdicts if v[0] == "blocked")
            r.blocked[name] = f"{why} [{where}]"
    return r


# ---------------------------------------------------------------- translating one text

@dataclass
class Note:
    line: int
    rule: str
    message: str


@dataclass
class Result:
    text: str
    notes: list = field(default_factory=list)      # what stays untranslated, and what to check
    counts: dict = field(default_factory=lambda: {"names": 0, "headers": 0, "masks": 0, "launches": 0})
    rtc_guard: set = field(default_factory=set)    # lines of HIP runtime includes hipRTC does without


class _Text:
    """The text and its blanked view, edited together; positions before an edit stay valid."""

    def __init__(self, text: str):
        self.text, self.code = text, blank(text)

    def line(self, offset: int) -> int:
        return self.text.count("\n", 0, offset) + 1

    def edit(self, start: int, end: int, new: str) -> int:
        """Replace text[start:end] by `new`; the offset after it."""
        old, new = self.text[start:end], new.replace(", \n", ",\n")
        missing = old.count("\n") - new.count("\n")
        if missing > 0:      # keep the line count; a macro's continued lines stay continued
            new += "".join(" \\\n" if re.search(r"\\[ \t]*\n", old) else "\n" for _ in range(missing))
        self.text = self.text[:start] + new + self.text[end:]
        self.code = self.code[:start] + blank(new) + self.code[end:]
        return start + len(new)


def _keep_lines(arg: str) -> str:
    """An argument without its surrounding spaces, but still on its own line if it was."""
    lead = arg[:len(arg) - len(arg.lstrip())]
    return (lead[lead.rfind("\n"):] if "\n" in lead else "") + arg.strip()


def mask_value(expr: str, consts: dict) -> int | None:
    """The 32-bit value of a small mask expression (`0xffffffff`, `~0U`, `uint32_t(-1)`, a
    constant of the file), or None."""
    e = re.sub(r"\s+", "", expr)
    e = re.sub(r"^(?:static_cast<[\w:]+>|\((?:unsigned|unsignedint|uint32_t|int|unsignedlong|uint)\)|"
               r"(?:uint32_t|unsigned|uint))\((.*)\)$|^\((?:unsigned|unsignedint|uint32_t|int)\)(.*)$",
               lambda m: m.group(1) or m.group(2), e)
    if e in consts:
        return consts[e]
    if re.fullmatch(r"~\(?0[uUlL]*\)?|-1[uUlL]*", e):
        return FULL64 if "ll" in e.lower() else FULL32
    v = evaluate(e, consts)
    return None if v is None else v & 0xFFFFFFFFFFFFFFFF


def translate(text: str, amd: tuple[str, ...] = ("gfx942", "gfx950"), launch: str = "keep",
              rename_cu: bool = False, defined: frozenset = frozenset()) -> Result:
    """`text` (a CUDA source) in HIP, with notes for what stays and what to check. `defined`:
    names the project defines in other files (its own wrappers are not CUDA API)."""
    r, out, t = rules(tuple(amd)), Result(text), _Text(text)
    _names(t, r, out, defined_names(t.code) | defined)
    _calls(t, r, out)
    _launches(t, out, launch)
    _includes(t, r, out, rename_cu)
    out.text = t.text
    out.notes = sorted({(n.line, n.message): n for n in out.notes}.values(), key=lambda n: n.line)
    return out


_CHAIN = re.compile(r"(?<![\w.])(?<!->)[A-Za-z_]\w*(?:\s*::\s*[A-Za-z_]\w*)*")
_DEFINED = re.compile(r"#\s*define\s+(\w+)|\b(?:struct|class|enum|union|namespace)\s+(\w+)|\btypedef\b[^;]*?(\w+)\s*;|\busing\s+(\w+)\s*=")
# a variable or parameter the file declares: `int cudaMalloc_count = 1`, `(cudaStream_t s)`
_DECLARED = re.compile(r"(?:(?<![\w])(?!return\b|case\b|throw\b|else\b|goto\b|delete\b|new\b|sizeof\b)[A-Za-z_]\w*[\s*&]+"
                       r"|[*&]\s*|(?<!-)>\s*)([A-Za-z_]\w*)\s*(?=[=;,\[)]|\{)|,\s*([A-Za-z_]\w*)\s*=(?!=)")
_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include\b[^\n]*", re.M)


def defined_names(code: str, variables: bool = True) -> set[str]:
    """Macros, types and functions a (blanked) source defines, and the CUDA-looking variables it
    declares: none of them is the CUDA API, whatever its spelling."""
    names = {next(g for g in m.groups() if g) for m in _DEFINED.finditer(code)}
    names |= {m.group(1) for m in _FUNCTION.finditer(code)} - _KEYWORDS
    if variables:
        names |= {n for m in _DECLARED.finditer(code) for n in m.groups() if n and CUDA_LOOKING.match(n)}
    return names


_FUNCTION = re.compile(r"\b([A-Za-z_]\w*)\s*\([^;{}()]*(?:\([^;{}()]*\)[^;{}()]*)*\)\s*(?:const\s*)?(?:noexcept\s*)?\{")
_KEYWORDS = {"if", "for", "while", "switch", "catch", "return", "sizeof", "decltype", "alignas", "__launch_bounds__"}
_ARCH_TEST = re.compile(r"__CUDA_ARCH__\s*[<>=!]|[<>=!]=?\s*__CUDA_ARCH__")


def _names(t: _Text, r: Rules, out: Result, defined: set) -> None:
    """API names, types and constants at identifier boundaries (never after `.` or `->`)."""
    edits = []
    code = _INCLUDE.sub(lambda i: " " * len(i.group()), t.code)                  # not in #include lines
    for m in _CHAIN.finditer(code):
        if m.group() == "__CUDA_ARCH__":
            # "is this the device pass?" (#ifdef, defined()) has a HIP spelling; a version test has none
            start = code.rfind("\n", 0, m.start()) + 1
            directive = re.match(r"[ \t]*#(?:[^\n]*\\\n)*[^\n]*", code[start:])
            if directive and directive.end() > m.start() - start and not _ARCH_TEST.search(directive.group()):
                edits.append((m.start(), m.end(), DEVICE_PASS))
                continue
        ids = list(ID.finditer(m.group()))
        for k in range(len(ids), 0, -1):
            name = "::".join(i.group() for i in ids[:k])
            if name in r.names or name in r.blocked or name in r.same:
                break
        else:
            if len(ids) == 1 and CUDA_LOOKING.match(m.group()) and m.group() not in defined:
                out.notes.append(Note(t.line(m.start()), "untranslated", f"{m.group()}: no row of the table maps it"))
            continue
        if name in defined:
            continue                    # the file defines its own (a compatibility macro, a wrapper)
        if name in r.names:
            edits.append((m.start(), m.start() + ids[k - 1].end(), r.names[name]))
        elif name in r.blocked:
            out.notes.append(Note(t.line(m.start()), "untranslated", f"{name}: {r.blocked[name]}"))
    for start, end, new in reversed(edits):
        t.edit(start, end, new)
    out.counts["names"] += len(edits)


_NARROW = re.compile(r"(?:^|[;{}(,])\s*(?:(?:const|static|volatile|register)\s+)*"
                     r"(?P<type>unsigned\s+int|unsigned(?!\s+long)|uint32_t|int32_t|int|uint)\s+(?P<var>\w+)\s*=\s*$")
_WIDE = re.compile(r"\b(?:auto|unsigned\s+long\s+long(?:\s+int)?|uint64_t|long\s+long|size_t)\s+(?P<var>\w+)\s*=\s*$")


def _calls(t: _Text, r: Rules, out: Result) -> None:
    """Calls with a pattern row, `__*_sync` calls, and where a 64-bit ballot lands; right to
    left, so a call inside another's arguments is done first."""
    consts, widened = _constants(t.code, mask_value), set()
    # a file that counts lanes with warpSize means a wave (64 on AMD); one that never does means
    # CUDA's 32-lane warp, and its shuffles keep that width (HIP's default width is warpSize)
    lanes_by_warpsize = re.search(r"\bwarpSize\b", t.code) is not None
    wanted = re.compile(r"(?<![\w.])(__\w+_sync|__syncwarp|__activemask" + "".join(f"|{re.escape(n)}" for n in r.calls)
                        + r")\s*\(")
    for s in sorted((m.start() for m in wanted.finditer(t.code)), reverse=True):
        m = wanted.match(t.code, s)
        spans, end = call_args(t.code, m.end() - 1)
        name, line = m.group(1), t.line(s)
        if end < 0:
            continue
        args = [_keep_lines(t.text[a:b]) for a, b in spans]
        masks = [mask_value(t.code[a:b], consts) for a, b in spans[:1]]
        new = None
        for pattern, hip in r.calls.get(name, []):
            fields, extra = pattern[:len(args)], args[len(pattern):]
            if len(args) < len(pattern) or (extra and not name.endswith("_sync")):
                continue
            consts_ok = all(re.fullmatch(r"\{\w+\}", p) or (i == 0 and mask_value(p, {}) == FULL32 and masks[0] == FULL32)
                            or "".join(p.split()) == "".join(a.split()) for i, (p, a) in enumerate(zip(fields, args)))
            if consts_ok:
                new = hip.format(**{p[1:-1]: a for p, a in zip(pattern, args) if re.fullmatch(r"\{\w+\}", p)})
                if not extra and name.startswith("__shfl") and not lanes_by_warpsize:
                    extra = [r.cuda_width]          # CUDA's width, 32: each half-wave stays a CUDA warp
                new = new[:-1] + "".join(", " + a for a in extra) + ")" if extra else new
                break
        if new is None and (name.endswith("_sync") or name == "__syncwarp") and spans:
            if masks[0] == FULL64:
                continue                                     # already a 64-bit mask
            if masks[0] != FULL32:
                out.notes.append(Note(line, "untranslated", f"{name}({' '.join(args[0].split())}, ...): not the full 32-bit mask; HIP's "
                                      f"{name} takes a 64-bit mask of a 64-lane wave: rewrite it by hand"))
                continue
            new = t.text[s:spans[0][0]] + r.full_mask64 + t.text[spans[0][1]:end]
        if new is not None:
            end = t.edit(s, end, new)
            out.counts["masks" if name.endswith("_sync") or name == "__syncwarp" else "names"] += 1
        if name in ("__ballot_sync", "__activemask"):
            _ballot_context(t, r, out, s, end, widened)
            if not lanes_by_warpsize:
                out.notes.append(Note(line, "ballot-width", "lanes are counted in 32s here, but a wave votes in 64 "
                                      "bits: lanes 32-63 are bits 32-63, so a lane mask made from a 32-lane index "
                                      "needs shifting by (__lane_id() & 32) in the upper half"))
    # a __popc / __ffs of a widened variable takes the 64-bit form too
    for m in reversed([m for m in re.finditer(r"(?<![\w.])(\w+)\s*\(", t.code) if m.group(1) in r.mask_fns]):
        spans, _ = call_args(t.code, m.end() - 1)
        if len(spans) == 1 and set(ID.findall(t.code[slice(*spans[0])])) & widened:
            t.edit(m.start(), m.start() + len(m.group(1)), r.mask_fns[m.group(1)])


def _ballot_context(t: _Text, r: Rules, out: Result, s: int, end: int, widened: set) -> None:
    """Where a 64-bit ballot lands: a 32-bit variable is widened, a __popc / __ffs around it
    takes its 64-bit form, anything else is reported."""
    before = t.code[max(0, s - 300):s]
    after = t.code[end:end + 40].lstrip()
    fn = re.search(r"(?<![\w.])(\w+)\s*\(\s*$", before)
    if fn and fn.group(1) in r.mask_fns and after.startswith(")"):
        start = s - len(before) + fn.start(1)
        t.edit(start, start + len(fn.group(1)), r.mask_fns[fn.group(1)])
        return
    narrow, wide = _NARROW.search(before), _WIDE.search(before)
    if narrow:
        start = s - len(before) + narrow.start("type")
        t.edit(start, start + len(narrow.group("type")), r.mask_type)
        widened.add(narrow.group("var"))
    elif wide:
        widened.add(wide.group("var"))
    elif not re.search(r"(?:\bif|\bwhile|!)\s*\(?\s*$", before):
        out.notes.append(Note(t.line(s), "ballot-width", "the ballot is 64-bit on HIP (lanes 32-63 of a wave): "
                              "check that what holds it has 64 bits"))


def _launches(t: _Text, out: Result, launch: str) -> None:
    """`kernel<<<grid, block[, smem[, stream]]>>>(args)`: kept (hipcc takes it), or rewritten to
    hipLaunchKernelGGL(kernel, grid, block, smem, stream, args) with launch="ggl"."""
    for s in sorted((m.start() for m in re.finditer(r"<<<", t.code)), reverse=True):
        close = t.code.find(">>>", s + 3)
        paren = close + 3 + len(t.code[close + 3:]) - len(t.code[close + 3:].lstrip()) if close > 0 else -1
        if close < 0 or t.code[paren:paren + 1] != "(":
            continue
        out.counts["launches"] += 1
        if launch != "ggl":
            continue
        k = s
        while k > 0 and t.code[k - 1].isspace():
            k -= 1
        if t.code[k - 1] == ">":                          # kernel<T, 4><<<...>>>
            depth = 0
            for k in range(k - 1, -1, -1):
                depth += (t.code[k] == ">") - (t.code[k] == "<")
                if depth == 0:
                    break
        k = re.search(r"[\w:]*$", t.code[:k]).start()
        kernel = " ".join(t.text[k:s].split())
        config, _ = call_args("(" + t.code[s + 3:close] + ")", 0)
        args, end = call_args(t.code, paren)
        if end < 0 or not 2 <= len(config) <= 4:
            continue
        cfg = [t.text[s + 2 + a:s + 2 + b].strip() for a, b in config]      # "(" stood for "<<<"
        cfg += ["0"] * (4 - len(cfg))
        kernel = f"({kernel})" if "<" in kernel or "," in kernel else kernel
        new = f"hipLaunchKernelGGL({kernel}, {', '.join(cfg)}" + "".join(", " + _keep_lines(t.text[a:b]) for a, b in args) + ")"
        t.edit(k, end, new)


def _includes(t: _Text, r: Rules, out: Result, rename_cu: bool) -> None:
    """`#include <cuda_runtime.h>` -> `<hip/hip_runtime.h>` from the table's header rows."""
    for m in reversed(list(_INCLUDE.finditer(t.code))):
        head = re.match(r"([ \t]*#[ \t]*include[ \t]*)([<\"])([^>\"\n]+)([>\"])", t.text[m.start():m.end()])
        if not head:
            continue
        name, line = head.group(3).strip(), t.line(m.start())
        row = next((h for h in r.headers if h[0] == name), None) or \
            next((h for h in r.headers if h[0].endswith("/*") and name.startswith(h[0][:-1])), None)
        start = m.start() + head.start(3)
        if row and row[1] and row[1] != row[0]:
            new = row[1][:-1] + name[len(row[0]) - 1:] if row[1].endswith("/*") else row[1]
            t.edit(start, start + len(head.group(3)), new)
            out.counts["headers"] += 1
            if new.startswith("hip/"):
                out.rtc_guard.add(line)
        elif row and not row[1]:
            out.notes.append(Note(line, "untranslated", f"<{name}>: {row[2]['hip']}"))
        elif not row and head.group(2) == "<" and re.match(r"(?:cuda|cu[a-z]+\.h|cu[a-z]+_|nv|cub/|cooperative_groups|mma\.h|sm_\d)", name):
            out.notes.append(Note(line, "untranslated", f"<{name}>: no header row of the table maps it"))
        elif rename_cu and head.group(2) == '"' and name.endswith(".cu"):
            t.edit(start, start + len(head.group(3)), name[:-3] + ".hip")
