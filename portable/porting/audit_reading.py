"""How `portable audit` reads a source: `Source` (comments and string literals blanked,
positions kept), call arguments, and the integer constant expressions it can `evaluate`."""
from __future__ import annotations

import ast
import bisect
import functools
import re


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


def call_spans(code: str, open_paren: int) -> tuple[list[tuple[int, int]], int]:
    """(start, end) spans of the top-level arguments of the call whose '(' is at `open_paren`,
    and the offset after its ')'; ([], -1) when it does not close."""
    depth, start, spans = 0, open_paren + 1, []
    for k in range(open_paren, len(code)):
        ch = code[k]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                if code[start:k].strip():
                    spans.append((start, k))
                return spans, k + 1
        elif ch == "," and depth == 1:
            spans.append((start, k))
            start = k + 1
    return [], -1


def _call_args(code: str, open_paren: int) -> tuple[list[tuple[int, str]], int]:
    """Top-level arguments (offset, text) of the call whose '(' is at `open_paren`, and the end."""
    spans, end = call_spans(code, open_paren)
    if end < 0:
        return [], len(code)
    args = [(s, code[s:e]) for s, e in spans]
    return [(o + len(a) - len(a.lstrip()), a.strip()) for o, a in args if a.strip()], end


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


def _constants(code: str, value=None) -> dict[str, int]:
    """Integer constants defined by #define or const/constexpr in this file, in order, each
    worked out by value(expression, constants so far) (default: evaluate)."""
    value = value or evaluate
    consts: dict[str, int] = {}
    for m in _CONST_DEF.finditer(code):
        name, text = (m.group("m"), m.group("mv")) if m.group("m") else (m.group("c"), m.group("cv"))
        v = value(text, consts)
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
    type, arithmetic, bitwise, comparison and logical operators, parentheses), or None when it
    cannot be known here."""
    consts = consts or {}
    expr = _SIZEOF.sub(lambda m: str(_TYPE_BYTES.get(" ".join(m.group(1).split()), "sizeof_unknown")), expr)
    expr = _INT.sub(lambda m: str(_int_literal(m.group(1))), expr)
    expr = re.sub(r"\(\s*(?:unsigned|int|size_t|long|long long|unsigned long long|uint32_t|uint64_t)\s*\)", "", expr)
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except SyntaxError:
        return None
    return int_value(tree.body, consts.get)


def _and3(a, b):
    return False if a is False or b is False else None if a is None or b is None else True


def _or3(a, b):
    return True if a is True or b is True else None if a is None or b is None else False


def _not3(a):
    return None if a is None else not a


_BINARY = {ast.Add: int.__add__, ast.Sub: int.__sub__, ast.Mult: int.__mul__, ast.Div: int.__floordiv__,
           ast.FloorDiv: int.__floordiv__, ast.Mod: int.__mod__, ast.LShift: int.__lshift__,
           ast.RShift: int.__rshift__, ast.BitAnd: int.__and__, ast.BitOr: int.__or__, ast.BitXor: int.__xor__}
_COMPARE = {ast.Lt: int.__lt__, ast.LtE: int.__le__, ast.Gt: int.__gt__, ast.GtE: int.__ge__,
            ast.Eq: int.__eq__, ast.NotEq: int.__ne__}


def int_value(node, name) -> int | None:
    """The integer value of a parsed C expression (Python's ast of it), or None where it rests on
    something unknown. name(identifier) gives a name's value (None: unknown). `and`/`or` are
    three-valued, so `A or 1` is 1 with A unknown; `~`, function-like macros, ternaries and the
    like are unknown."""
    def value(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name):
            v = name(node.id)
            return v if isinstance(v, int) else None
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
            if isinstance(node.op, ast.Invert):
                return None             # ~ needs the operand's C width, unknown here
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.Compare):
            left, out = value(node.left), True
            for op, right in zip(node.ops, node.comparators):
                r = value(right)
                if left is None or r is None or type(op) not in _COMPARE:
                    return None
                out, left = out and _COMPARE[type(op)](left, r), r
            return int(out)
        if isinstance(node, ast.BinOp):
            a, b = value(node.left), value(node.right)
            if a is None or b is None or type(node.op) not in _BINARY or (
                    b == 0 and isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod))):
                return None
            return _BINARY[type(node.op)](a, b)
        return None

    def truth(node):
        v = value(node)
        return None if v is None else bool(v)
    try:
        return value(node)
    except (TypeError, ValueError, OverflowError, RecursionError):
        return None
