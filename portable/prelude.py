"""Emit only the prelude a rendered source uses.

templates/prelude.j2 writes the whole prelude between a BEGIN and an END line. `prune_source`
cuts it into pieces (each top-level declaration with the comment lines directly above it) and
keeps, in their order, the pieces whose names the rest of the source uses, directly or through
another kept piece. A helper added to a mapping/prelude/*.h file needs no registration.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from . import linemap

BEGIN = "// @prelude-begin"
END = "// @prelude-end"

_IDENT = re.compile(r"[A-Za-z_]\w*")
_SKIP = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.S)
# attribute-like words whose parenthesised argument is no part of a declaration's name
_ATTRIBUTES = ("__attribute__", "__align__", "alignas", "__launch_bounds__", "__declspec", "__cluster_dims__")
_TYPE_KEYS = ("struct", "class", "union", "enum")


@dataclass(frozen=True)
class Piece:
    text: str
    note: bool                  # a comment block set off by a blank line: heads the pieces below it
    defines: frozenset = frozenset()    # the names it declares
    refs: frozenset = frozenset()       # every other name its code uses


def prune_source(rendered: str) -> str:
    """`rendered` with its prelude (between the BEGIN and END lines) cut to what the rest uses;
    a source without those lines is returned as it is."""
    begin = re.search(rf"^{re.escape(BEGIN)}[^\n]*\n", rendered, re.M)
    end = begin and re.search(rf"^{re.escape(END)}[^\n]*\n", rendered[begin.end():], re.M)
    if not end:
        return rendered
    head, tail = rendered[:begin.start()], rendered[begin.end() + end.end():]
    full = rendered[begin.end():begin.end() + end.start()]
    return head + prune(full, head + tail) + tail


def prune(prelude: str, body: str) -> str:
    """The pieces of `prelude` that `body` needs, in their original order."""
    pieces = split(prelude)
    definers: dict[str, list[int]] = {}
    for i, piece in enumerate(pieces):
        for name in piece.defines:
            definers.setdefault(name, []).append(i)
    # a declaration whose name we cannot tell (a static_assert, a #pragma) is kept: safe
    todo = [i for i, p in enumerate(pieces) if not p.note and not p.defines]
    todo += [i for name in identifiers(body) for i in definers.get(name, ())]
    keep: set[int] = set()
    while todo:
        i = todo.pop()
        if i not in keep:
            keep.add(i)
            todo += [j for name in pieces[i].refs for j in definers.get(name, ())]
    out, section = [], []       # a note is kept with the first kept piece of its section
    for i, piece in enumerate(pieces):
        if piece.note:
            section = [piece.text]
        elif i in keep:
            out += section + [piece.text]
            section = []
    lines = _lines("".join(out))
    while lines and not _text(lines[0]):     # a blank line left over from a piece dropped above
        lines.pop(0)
    return "".join(lines)


def identifiers(text: str) -> set[str]:
    """The names `text` uses outside comments and string literals."""
    return set(_IDENT.findall(_code_only(text)))


@functools.lru_cache(maxsize=32)
def split(prelude: str) -> tuple[Piece, ...]:
    """`prelude` cut into pieces; their texts joined give it back."""
    lines, code = _lines(prelude), _lines(_code_only(prelude))
    pieces: list[Piece] = []
    lead: list[str] = []        # blank and comment lines waiting for the declaration below them
    macros: set[str] = set()    # function-like macros so far: their uses declare their first argument
    i = 0
    while i < len(lines):
        c = code[i].strip()
        if not c:
            lead.append(lines[i])
            if not _text(lines[i]) and any(_text(ln) for ln in lead):   # comments, then a blank line
                pieces.append(Piece("".join(lead), note=True))
                lead = []
            i += 1
            continue
        start = i
        if c.startswith("#"):
            i = _directive_end(code, i)
        else:
            i = _declaration_end(code, i, macros)
        text = "".join(lines[start:i])
        body = "".join(code[start:i])
        defines = _declared(body, macros)
        m = re.match(r"\s*#\s*define\s+(\w+)\(", body)
        if m:
            macros.add(m.group(1))
        pieces.append(Piece("".join(lead) + text, note=False, defines=frozenset(defines),
                            refs=frozenset(_IDENT.findall(body)) - defines))
        lead = []
    if lead:
        pieces.append(Piece("".join(lead), note=True))
    return tuple(pieces)


def _lines(text: str) -> list[str]:
    """Lines with their breaks; only \n ends a line (str.splitlines also ends one at \x1c-\x1e)."""
    return re.findall(r"[^\n]*\n|[^\n]+$", text)


def _text(line: str) -> str:
    return linemap.strip(line)[0].strip()


def _directive_end(code: list[str], i: int) -> int:
    """The line after the preprocessor directive at line i (a conditional: after its #endif)."""
    depth = 0
    while i < len(code):
        word = re.match(r"\s*#\s*(\w*)", code[i])
        if word and word.group(1) in ("if", "ifdef", "ifndef"):
            depth += 1
        elif word and word.group(1) == "endif":
            depth -= 1
        while code[i].rstrip().endswith("\\") and i + 1 < len(code):
            i += 1
        i += 1
        if depth <= 0:
            return i
    return i


def _declaration_end(code: list[str], i: int, macros: set[str]) -> int:
    """The line after the top-level declaration starting at line i: the first line that ends
    outside all brackets with ';' or '}' (or ')' for the use of a function-like macro)."""
    depth, first = 0, _IDENT.match(code[i].strip())
    invocation = bool(first) and first.group(0) in macros
    while i < len(code):
        line = code[i]
        if not line.lstrip().startswith("#"):
            depth += sum(line.count(b) for b in "{([") - sum(line.count(b) for b in "})]")
        i += 1
        last = line.rstrip()[-1:]
        if depth <= 0 and (last in (";", "}") or (invocation and last == ")")):
            return i
    return i


def _declared(code: str, macros: set[str]) -> set[str]:
    """The names a top-level piece (comments and strings blanked) declares."""
    d = re.match(r"\s*#\s*(\w+)\s*(\w*)", code)
    if d:
        if d.group(1) == "define":
            return {d.group(2)}
        if d.group(1) in ("if", "ifdef", "ifndef"):       # what either branch declares
            inner = [ln for ln in _lines(code) if not re.match(r"\s*#\s*(if|ifdef|ifndef|elif|else|endif)\b", ln)]
            return set().union(*(p.defines for p in split("".join(inner))))
        return set()
    names: set[str] = set()
    for statement in _statements(_strip_attributes(code)):
        names |= _statement_names(statement, macros)
    return names


def _statements(code: str) -> list[str]:
    """Top-level statements: split after ';' and after a function body's closing brace."""
    out, depth, start, opened_by_body = [], 0, 0, False
    for k, ch in enumerate(code):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "{":
            if depth == 0:
                head = _flat(code[start:k])      # without `template <class T>`, whose class is no type
                opened_by_body = not ("=" in head or any(re.search(rf"\b{w}\b", head) for w in _TYPE_KEYS))
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0 and opened_by_body:
                out.append(code[start:k + 1])
                start = k + 1
        elif ch == ";" and depth == 0:
            out.append(code[start:k + 1])
            start = k + 1
    if code[start:].strip():
        out.append(code[start:])
    return [s for s in out if s.strip()]


def _statement_names(statement: str, macros: set[str]) -> set[str]:
    flat = _flat(statement)
    words = _IDENT.findall(flat)
    if not words:
        return set()
    if words[0] == "typedef":
        return set(_IDENT.findall(_flat(statement, braces=True))[-1:])
    if words[0] == "using":
        return set(words[1:2])
    head = re.split(r"[{;=]", flat, maxsplit=1)[0]
    call = re.match(r"([^(]*)\(\s*(\w*)", head)
    if call:
        before = _IDENT.findall(call.group(1))
        if len(before) == 1:        # NAME(...) with no type in front: a macro's use
            return {call.group(2)} if before[0] in macros and call.group(2) else set()
        return set(before[-1:])     # a function: the name before its parameters
    key = next((w for w in words if w in _TYPE_KEYS), None)
    if key:
        after = _IDENT.findall(head.split(key, 1)[1])
        after = [w for w in after if w not in _TYPE_KEYS]
        names = set(after[:1])
        if key == "enum" and "{" in flat:
            inner = flat[flat.index("{") + 1:flat.rindex("}")] if "}" in flat else ""
            names |= {m.group(1) for m in re.finditer(r"(?:^|,)\s*([A-Za-z_]\w*)", _flat(inner, braces=True))}
        return names
    return set(_IDENT.findall(re.sub(r"\[.*?\]", "", head))[-1:])    # a variable


def _flat(text: str, braces: bool = False) -> str:
    """`text` without template parameter lists (and brace blocks if `braces`), on one line."""
    text = re.sub(r"\s+", " ", text)
    while True:
        m = re.search(r"\btemplate\s*<", text)
        if not m:
            break
        depth, k = 0, m.end() - 1
        for k in range(m.end() - 1, len(text)):
            depth += {"<": 1, ">": -1}.get(text[k], 0)
            if depth == 0:
                break
        text = text[:m.start()] + text[k + 1:]
    while braces and re.search(r"\{[^{}]*\}", text):
        text = re.sub(r"\{[^{}]*\}", " ", text)
    return text


def _strip_attributes(code: str) -> str:
    for word in _ATTRIBUTES:
        while True:
            m = re.search(rf"\b{word}\s*\(", code)
            if not m:
                break
            depth, k = 0, m.end() - 1
            for k in range(m.end() - 1, len(code)):
                depth += {"(": 1, ")": -1}.get(code[k], 0)
                if depth == 0:
                    break
            code = code[:m.start()] + " " * (k + 1 - m.start()) + code[k + 1:]
    return code


def _code_only(text: str) -> str:
    """`text` without the template line marks (portable/linemap.py; the prelude is pruned before
    they are read) and with comments and the insides of string and character literals turned to
    spaces, line breaks kept, so brackets and names can be read off it."""
    return _SKIP.sub(_blanked, linemap.strip(text)[0])


def _blanked(m: re.Match) -> str:
    s = m.group(0)
    if s[0] in "\"'":
        return s[0] + re.sub(r"[^\n]", " ", s[1:-1]) + s[-1]
    return re.sub(r"[^\n]", " ", s)
