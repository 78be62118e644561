"""A kernel entry's arguments, read from its rendered C signature, so nobody types them twice.

`void saxpy(const float* __restrict__ x, float* y, float a, long long n)` becomes four `Arg`s:
two pointers to float (one const) and two scalars; each knows how it is packed for the
launch APIs and which torch dtypes it takes (mapping/c_types.toml).
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import torch

from .data import load_toml
from .errors import InputError

# Words that qualify a parameter without changing how it is passed.
_QUALIFIERS = {"const", "volatile", "__restrict__", "restrict", "__restrict", "__grid_constant__",
               "struct", "__attribute__", "__align__"}
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_GLOBAL = re.compile(r"__global__\b")
# from `__global__` to the entry's name: attributes such as __launch_bounds__(256, 2) may stand between
_HEAD = re.compile(r"(?:[^;{}()]|\([^()]*\))*?\bvoid\s+([A-Za-z_]\w*)\s*\(")


@dataclass(frozen=True)
class CType:
    name: str
    slot: str                    # backends/params.py kind of a scalar ("" for void)
    tensors: tuple               # torch dtypes a pointer to it takes; ("*",) = any


@functools.cache
def c_types() -> dict[str, CType]:
    """Every spelling (name and aliases) -> its CType."""
    out = {}
    for name, row in load_toml("c_types.toml").items():
        ctype = CType(name, row["slot"], tuple(row["tensors"]))
        for spelling in (name, *row.get("aliases", ())):
            out[spelling] = ctype
    return out


@dataclass(frozen=True)
class Arg:
    name: str
    ctype: CType
    pointer: bool
    const: bool
    text: str                    # the parameter as written, for messages

    @property
    def kind(self) -> str:
        """The packing kind: "ptr" for any pointer, else the scalar's slot."""
        return "ptr" if self.pointer else self.ctype.slot

    def accepts(self, dtype: torch.dtype) -> bool:
        names = self.ctype.tensors
        return "*" in names or str(dtype).removeprefix("torch.") in names

    def expected(self) -> str:
        if self.pointer:
            names = self.ctype.tensors
            return "a GPU tensor of any dtype" if "*" in names else f"a GPU tensor of dtype {' or '.join(names)}"
        return f"a Python {'float' if self.ctype.slot in ('f32', 'f64', 'f16', 'bf16') else 'int'} ({self.ctype.name})"


def strip_comments(source: str) -> str:
    # keeps line breaks, so offsets into the result still name the same lines
    return _COMMENTS.sub(lambda m: "\n" * m.group(0).count("\n") + " ", source)


def balanced_end(text: str, start: int) -> int:
    """Index just past the parenthesis that closes text[start] == '('."""
    depth = 0
    for i in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return i + 1
    raise ValueError("unbalanced parentheses")


def _split_top(text: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "(<[":
            depth += 1
        elif ch in ")>]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def parse_arg(text: str, entry: str, index: int) -> Arg:
    words = re.sub(r"__attribute__\s*\(\(.*?\)\)|__align__\s*\(\d+\)", " ", text)
    const = bool(re.search(r"\bconst\b", words.split("*")[0]))
    pointer = words.count("*")
    words = re.sub(r"\[\s*\]", "*", words)
    tokens = [w for w in re.findall(r"[A-Za-z_]\w*", words) if w not in _QUALIFIERS]
    types = c_types()
    # the last word is the parameter's name unless the rest would then not be a type
    name = f"arg{index}"
    if len(tokens) > 1 and " ".join(tokens[:-1]) in types:
        name, tokens = tokens[-1], tokens[:-1]
    spelled = " ".join(tokens)
    if spelled not in types:
        raise InputError(f"kernel {entry}: argument {index} `{text}` has type {spelled!r}, which the launcher "
                         f"cannot pass; expected one of {', '.join(sorted({t.name for t in types.values()}))} "
                         f"or a pointer to one")
    if pointer > 1:
        raise InputError(f"kernel {entry}: argument {index} `{text}` is a pointer to a pointer; "
                         f"expected a pointer or a scalar")
    ctype = types[spelled]
    if not pointer and not ctype.slot:
        raise InputError(f"kernel {entry}: argument {index} `{text}` is void; expected a pointer or a scalar")
    return Arg(name, ctype, bool(pointer), const, text)


@dataclass(frozen=True)
class Signature:
    entry: str
    args: tuple[Arg, ...]
    line: int                    # 1-based line of the entry in the source
    max_threads: int = 0         # its __launch_bounds__, where it has one

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(a.kind for a in self.args)

    def __str__(self) -> str:
        return f"{self.entry}({', '.join(a.text for a in self.args)})"


def entries(source: str) -> dict[str, Signature]:
    """Every `__global__` function of a source, in order, by name. A kernel whose name C++
    would mangle (no `extern "C"`) is refused: the module lookup finds kernels by plain name."""
    text = strip_comments(source)
    found = {}
    for m in _GLOBAL.finditer(text):
        head = _HEAD.match(text, m.end())
        if head is None:
            continue
        name = head.group(1)
        open_paren = head.end() - 1
        close = balanced_end(text, open_paren)
        line = text.count("\n", 0, m.start()) + 1
        if text[close:].lstrip().startswith(";"):     # a declaration; the definition follows
            continue
        before = text[max(0, text.rfind("\n", 0, m.start()) - 200):m.start()]
        if not re.search(r'extern\s+"C"\s*(?:__attribute__\s*\(\(.*?\)\)\s*)?$', before.rstrip()):
            raise InputError(f"kernel {name} (line {line}): declare it `extern \"C\"` so its name is not mangled "
                             f"(templates: write {{{{ fn.kernel }}}}, which spells extern \"C\" __global__)")
        args = _split_top(text[open_paren + 1:close - 1])
        if args == ["void"]:
            args = []
        bounds = re.search(r"__launch_bounds__\s*\(\s*(\d+)", text[m.end():head.start(1)])
        found[name] = Signature(name, tuple(parse_arg(a, name, i) for i, a in enumerate(args)), line,
                                int(bounds.group(1)) if bounds else 0)
    return found
