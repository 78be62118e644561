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


def maybe_row(*cudas: str) -> dict | None:
    """The first of these rows the table has, or None (a check then words its fix itself)."""
    rows = _rows_by_cuda()
    return next((rows[c] for c in cudas if c in rows), None)


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


def _int_literal(text: str) -> int | str:
    """A C integer literal's value: hex, octal (a leading 0) or decimal; a malformed one
    (08) becomes a name that evaluates to nothing."""
    if text[:2] in ("0x", "0X"):
        return int(text, 16)
    if len(text) > 1 and text[0] == "0":
        return int(text, 8) if set(text) <= set("01234567") else "bad_literal"
    return int(text)


def evaluate(expr: str, consts: dict[str, int] | None = None) -> int | None:
    """The value of a small integer expression (literals, known constants, sizeof of a known
    type, + - * / % << >> and parentheses), or None when it cannot be known here."""
    consts = consts or {}
    expr = _SIZEOF.sub(lambda m: str(_TYPE_BYTES.get(" ".join(m.group(1).split()), "sizeof_unknown")), expr)
    expr = _INT.sub(lambda m: str(_int_literal(m.group(1))), expr)
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


# ---------------------------------------------------------------- what each target compiles

# The macros each compiler defines (checked: clang 22 -x hip -dM -E for gfx942 defines __HIP__,
# __HIPCC__, __HIP_DEVICE_COMPILE__, __AMDGCN__, __gfx942__ and none of __CUDA_ARCH__,
# __CUDACC__, __CUDACC_VER_MAJOR__). HIP's headers add __HIP_PLATFORM_AMD__, and a PyTorch
# extension built for ROCm gets USE_ROCM. Names in neither list are unknown: both branches of
# a test on them stay live.
_UNDEF = object()
_NVCC_MACROS = {"__CUDACC__": 1, "__NVCC__": 1, "__CUDACC_VER_MAJOR__": 13, "__CUDACC_VER_MINOR__": 0,
                "__HIP__": _UNDEF, "__HIPCC__": _UNDEF, "__HIP_PLATFORM_AMD__": _UNDEF, "__HIP_PLATFORM_HCC__": _UNDEF,
                "__HIP_DEVICE_COMPILE__": _UNDEF, "USE_ROCM": _UNDEF, "__AMDGCN__": _UNDEF, "__HIPCC_RTC__": _UNDEF}
_HIPCC_MACROS = {"__HIP__": 1, "__HIPCC__": 1, "__HIP_PLATFORM_AMD__": 1, "USE_ROCM": 1,
                 "__CUDA_ARCH__": _UNDEF, "__CUDACC__": _UNDEF, "__NVCC__": _UNDEF, "__CUDACC_VER_MAJOR__": _UNDEF,
                 "__CUDACC_VER_MINOR__": _UNDEF, "__CUDACC_RTC__": _UNDEF, "__HIP_PLATFORM_NVIDIA__": _UNDEF,
                 "__HIP_PLATFORM_NVCC__": _UNDEF}
# a condition that names the AMD side: its author already chose what AMD compiles
_NAMES_AMD = re.compile(r"HIP|ROCM|ROCm|AMD|amdgcn|AMDGCN|__gfx\d")
# the body of a branch that only stops the program or says "not here"
_STUB_STATEMENT = re.compile(
    r"\b\w*(?:assert|ASSERT|trap|brkpt|NOT_IMPLEMENTED|UNREACHABLE|unreachable|abort|printf|throw|THROW|fail|FAIL)\w*\b"
    r"(?:\s*\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\))?\s*;?|\breturn\s*(?:\{\s*\}|0|nullptr|false)?\s*;")


def _macro_env(target: Target, device: bool) -> dict:
    if target.vendor == "amd":
        env = dict(_HIPCC_MACROS)
        if device:
            env.update({"__HIP_DEVICE_COMPILE__": 1, "__AMDGCN__": 1, f"__{target.name}__": 1,
                        "__AMDGCN_WAVEFRONT_SIZE__": target.wave, "__AMDGCN_WAVEFRONT_SIZE": target.wave})
        else:
            env["__HIP_DEVICE_COMPILE__"] = _UNDEF
        return env
    env = dict(_NVCC_MACROS)
    arch = re.match(r"sm_(\d+)", target.name)
    env["__CUDA_ARCH__"] = int(arch.group(1)) * 10 if device and arch else _UNDEF
    if device and arch and target.name.endswith("a"):
        env[f"__CUDA_ARCH_FEAT_SM{arch.group(1)}_ALL"] = 1
    return env


def _and3(a, b):
    return False if a is False or b is False else None if a is None or b is None else True


def _or3(a, b):
    return True if a is True or b is True else None if a is None or b is None else False


def _not3(a):
    return None if a is None else not a


def _condition(expr: str, env: dict):
    """A #if expression under `env`: True, False, or None when it rests on an unknown name."""
    expr = re.sub(r"\bdefined\s*\(\s*(\w+)\s*\)|\bdefined\s+(\w+)", lambda m: f"__defined__{m.group(1) or m.group(2)}", expr)
    expr = re.sub(r"\b(0[xX][0-9a-fA-F]+|\d+)[uUlL]*\b", lambda m: str(_int_literal(m.group(1))), expr)
    expr = expr.replace("&&", " and ").replace("||", " or ").replace("/", "//")
    expr = re.sub(r"!(?!=)", " not ", expr)
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except SyntaxError:
        return None

    def value(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name):
            if node.id.startswith("__defined__"):
                v = env.get(node.id[len("__defined__"):])
                return None if v is None else int(v is not _UNDEF)
            if node.id in ("true", "false"):
                return int(node.id == "true")
            v = env.get(node.id)
            return 0 if v is _UNDEF else v if isinstance(v, int) else None
        if isinstance(node, ast.BoolOp):
            vals = [truth(v) for v in node.values]
            out = vals[0]
            for v in vals[1:]:
                out = _and3(out, v) if isinstance(node.op, ast.And) else _or3(out, v)
            return None if out is None else int(out)
        if isinstance(node, ast.UnaryOp):
            v = value(node.operand)
            if v is None:
                return None
            if isinstance(node.op, ast.Not):
                return int(not v)
            return -v if isinstance(node.op, ast.USub) else ~v if isinstance(node.op, ast.Invert) else v
        if isinstance(node, ast.Compare):
            left, out = value(node.left), True
            for op, right in zip(node.ops, node.comparators):
                r = value(right)
                if left is None or r is None:
                    return None
                ops = {ast.Lt: int.__lt__, ast.LtE: int.__le__, ast.Gt: int.__gt__, ast.GtE: int.__ge__,
                       ast.Eq: int.__eq__, ast.NotEq: int.__ne__}
                if type(op) not in ops:
                    return None
                out, left = out and ops[type(op)](left, r), r
            return int(out)
        if isinstance(node, ast.BinOp):
            a, b = value(node.left), value(node.right)
            ops = {ast.Add: int.__add__, ast.Sub: int.__sub__, ast.Mult: int.__mul__, ast.FloorDiv: int.__floordiv__,
                   ast.Mod: int.__mod__, ast.LShift: int.__lshift__, ast.RShift: int.__rshift__,
                   ast.BitAnd: int.__and__, ast.BitOr: int.__or__, ast.BitXor: int.__xor__}
            if a is None or b is None or type(node.op) not in ops or (b == 0 and isinstance(node.op, (ast.FloorDiv, ast.Mod))):
                return None
            return ops[type(node.op)](a, b)
        return None                          # function-like macros, __has_include, ternaries

    def truth(node):
        v = value(node)
        return None if v is None else bool(v)
    try:
        return truth(tree.body)
    except (TypeError, ValueError, OverflowError, RecursionError):
        return None


def _included_macros(path: Path | None, code_str: str, targets: list[Target], seen: frozenset = frozenset()) -> dict:
    if path is None or len(seen) > 2:
        return {}
    out: dict = {}
    for name in re.findall(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', code_str, re.M):
        header = (path.parent / name)
        if header in seen or not header.is_file():
            continue
        try:
            envs = _header_envs(header.resolve(), tuple(targets), seen)
        except (OSError, RecursionError):
            continue
        for w, env in envs.items():
            out.setdefault(w, {}).update(env)
    return out


@functools.lru_cache(maxsize=256)
def _header_envs(header: Path, targets: tuple, seen: frozenset) -> dict:
    cond = Conditional.of_file(header, list(targets), seen)
    own = set(re.findall(r"^[ \t]*#[ \t]*define[ \t]+(\w+)", cond.code, re.M))
    return {w: {k: v for k, v in env.items() if k in own} for w, env in cond.envs.items()}


@dataclass
class _Branch:
    line: int                 # the directive's line
    cond: str                 # its condition text ('' for #else)
    first: int                # first and last line of its body
    last: int = 0
    live: dict = None         # (target name, device) -> True / False / None
    parent: dict = None       # the same for the lines around the group


class Conditional:
    """Which lines each target compiles, from the #if / #ifdef / #elif / #else / #endif of one
    source evaluated per target, for the host pass and the device pass, with the macros the
    file itself defines. A line is dead for a target only when every pass surely skips it."""

    def __init__(self, code: str, targets: list[Target], seed: dict | None = None):
        self.worlds = [(t, device) for t in targets for device in (False, True)]
        self.envs = {(t.name, d): _macro_env(t, d) for t, d in self.worlds}
        for w, env in (seed or {}).items():         # what the file's own headers defined
            if w in self.envs:
                self.envs[w].update(env)
        # a macro this file defines is its own: undefined until the file defines it
        for name in set(re.findall(r"^[ \t]*#[ \t]*define[ \t]+(\w+)", code, re.M)):
            for env in self.envs.values():
                env.setdefault(name, _UNDEF)
        self.code = code
        lines = code.split("\n")
        self.dead: dict[int, frozenset] = {}      # line -> names of the targets that never compile it
        self.groups: list[list[_Branch]] = []
        stack: list[dict] = []                      # per open #if: parent, taken, current per world, branches
        current = {(t.name, d): True for t, d in self.worlds}
        directives = [(i, ln) for i, ln in enumerate(lines, start=1) if ln.lstrip().startswith("#")]
        guard = self._include_guard(directives)
        i = 0
        while i < len(lines):
            number, text = i + 1, lines[i]
            full = text
            while full.rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                full = full.rstrip()[:-1] + " " + lines[i]
            m = re.match(r"\s*#\s*(\w+)\s*(.*)", full)
            dead_here = frozenset(n for n in {t.name for t, _ in self.worlds}
                                  if all(current[(n, d)] is False for d in (False, True)))
            if m:
                word, rest = m.group(1), m.group(2).strip()
                if word in ("if", "ifdef", "ifndef"):
                    cond = rest if word == "if" else (f"defined({rest.split()[0]})" if word == "ifdef" else f"!defined({rest.split()[0]})") if rest else "0"
                    values = {}
                    for w, env in self.envs.items():
                        values[w] = True if number == guard else _condition(cond, env)
                    branch = _Branch(number, cond, number + 1, live={w: _and3(current[w], values[w]) for w in values},
                                     parent=dict(current))
                    stack.append({"parent": dict(current), "taken": values, "branches": [branch]})
                    current = dict(branch.live)
                elif word in ("elif", "else") and stack:
                    top = stack[-1]
                    top["branches"][-1].last = number - 1
                    cond = rest if word == "elif" else ""
                    live = {}
                    for w, env in self.envs.items():
                        c = _condition(cond, env) if word == "elif" else True
                        live[w] = _and3(_and3(top["parent"][w], _not3(top["taken"][w])), c)
                        top["taken"][w] = _or3(top["taken"][w], c)
                    top["branches"].append(_Branch(number, cond, number + 1, live=live, parent=top["parent"]))
                    current = live
                elif word == "endif" and stack:
                    top = stack.pop()
                    top["branches"][-1].last = number - 1
                    self.groups.append(top["branches"])
                    current = top["parent"]
                elif word in ("define", "undef"):
                    name_m = re.match(r"(\w+)(\()?\s*(.*)", rest)
                    if name_m:
                        name = name_m.group(1)
                        for w, env in self.envs.items():
                            if current[w] is False:
                                continue
                            if current[w] is None:
                                env.pop(name, None)              # maybe defined: unknown from here on
                            elif word == "undef":
                                env[name] = _UNDEF
                            else:
                                v = None if name_m.group(2) else evaluate(name_m.group(3) or "1")
                                env[name] = v if v is not None else "defined"
            for k in range(number, i + 2):
                if dead_here:
                    self.dead[k] = dead_here
            i += 1

    @staticmethod
    def _include_guard(directives) -> int:
        """The line of an include guard's #ifndef X (followed by #define X), which is taken."""
        if len(directives) >= 2:
            (n1, a), (_, b) = directives[0], directives[1]
            m1 = re.match(r"\s*#\s*ifndef\s+(\w+)", a)
            m2 = re.match(r"\s*#\s*define\s+(\w+)", b)
            if m1 and m2 and m1.group(1) == m2.group(1):
                return n1
        return 0

    @classmethod
    def of_file(cls, path: Path, targets: list[Target], seen: frozenset = frozenset()) -> "Conditional":
        """The conditions of a file on disk, seeded with what its quoted includes (found beside
        it, two levels deep) define: a feature macro set in a header decides this file's #ifdefs."""
        text = path.read_text(errors="replace")
        code = _blank(text)[0]
        return cls(code, targets, seed=_included_macros(path, _blank(text)[1], targets, seen | {path}))

    def live_targets(self, line: int, targets) -> list:
        dead = self.dead.get(line, frozenset())
        return [t for t in targets if (t.name if isinstance(t, Target) else t) not in dead]


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
        for m in self._SHARED_PER_WARP.finditer(self.src.code):
            self.add(m.start(), len(m.group()), "warning", "warp-size",
                     "shared array sized for 32-lane warps while warps are counted with warpSize elsewhere in the file",
                     self.wave64, table_row("threadIdx.x >> 5 / threadIdx.x / 32 (warp index hard-coded)"))
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
            first = [m for m in (re.search(pattern, code_str if "include" in pattern.split("|")[0] else code),
                                 re.search(pattern, code)) if m]
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
