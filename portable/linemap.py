"""Which template file and line each rendered line came from.

Before Jinja compiles a template, every line of its text (not of its tags) gets an invisible
mark naming the file and line; after rendering, the marks are read off each output line and
removed, so a compiler's "line 812" becomes "my_kernel.j2:14". A mark is never put where
Jinja's whitespace control would have eaten the line break (after a block tag, or next to a
`-` trim), so the rendered text without marks is exactly the text rendered without them.
"""
from __future__ import annotations

import re

# private-use characters: not whitespace (| trim and str.strip keep them), no case (| upper)
_OPEN, _CLOSE = "\ue000", "\ue001"
_MARK = re.compile(f"{_OPEN}(\\d+)\\.(\\d+){_CLOSE}")
_TAG = re.compile(r"\{%-?\s*raw\s*-?%\}.*?\{%-?\s*endraw\s*-?%\}|\{#.*?#\}|\{%.*?%\}|\{\{.*?\}\}", re.S)

_files: list[str] = []          # mark number -> file name


def file_id(name: str) -> int:
    if name not in _files:
        _files.append(name)
    return _files.index(name)


def annotate(text: str, name: str) -> str:
    """`text` with a mark before each line break that Jinja will emit as data."""
    fid = file_id(name)
    out, at = [], 0
    for tag in _TAG.finditer(text):
        out.append(_mark_data(text, at, tag.start(), fid, after_tag=text[at - 2:at] if at else ""))
        out.append(tag.group(0) if not tag.group(0).startswith(("{% raw", "{%- raw", "{%raw"))
                   else _mark_raw(tag.group(0), text.count("\n", 0, tag.start()) + 1, fid))
        at = tag.end()
    out.append(_mark_data(text, at, len(text), fid, after_tag=text[at - 2:at] if at else ""))
    return "".join(out)


def _mark_data(text: str, start: int, end: int, fid: int, after_tag: str) -> str:
    data = text[start:end]
    line = text.count("\n", 0, start) + 1
    pieces, prev = [], 0
    for i, ch in enumerate(data):
        if ch != "\n":
            continue
        lead = data[prev:i]
        # trim_blocks eats the first line break after a block or comment tag; `-%}` and `{%-`
        # eat the whitespace next to them, line breaks included: leave those line breaks bare
        blank_so_far = not data[:i].strip()
        eaten = blank_so_far and ((i == 0 and after_tag in ("%}", "#}")) or
                                  text[max(0, start - 3):start] in ("-%}", "-}}", "-#}"))
        trimmed_by_next = not data[i:].strip() and re.match(r"\{[%{#]-", text[end:end + 3] or "")
        if not eaten and not trimmed_by_next:
            pieces.append(f"{lead}{_OPEN}{fid}.{line}{_CLOSE}\n")
        else:
            pieces.append(lead + "\n")
        prev = i + 1
        line += 1
    pieces.append(data[prev:])
    return "".join(pieces)


def _mark_raw(block: str, line: int, fid: int) -> str:
    head, _, rest = block.partition("%}")
    body, tail = rest[:rest.rfind("{%")], rest[rest.rfind("{%"):]
    marked = []
    for n, piece in enumerate(body.split("\n")[:-1]):
        marked.append(f"{piece}{_OPEN}{fid}.{line + n}{_CLOSE}")
    marked.append(body.split("\n")[-1])
    return head + "%}" + "\n".join(marked) + tail


def strip(rendered: str) -> tuple[str, list]:
    """The rendered text without marks, and for each of its lines (file, line) or None."""
    origins = []
    for text_line in rendered.split("\n"):
        marks = _MARK.findall(text_line)
        origins.append((_files[int(marks[-1][0])], int(marks[-1][1])) if marks else None)
    return _MARK.sub("", rendered), origins


_remembered: dict[int, list] = {}


def remember(source: str, origins: list) -> None:
    """Keep the origins of a rendered source, so a compile error on it can name template lines."""
    if len(_remembered) > 256:
        _remembered.pop(next(iter(_remembered)))
    _remembered[hash(source)] = origins


def origins_of(source: str) -> list:
    return _remembered.get(hash(source), [])


def describe(origins: list, line: int) -> str:
    """'file.j2:12' for rendered line `line` (1-based), or '' when no template line made it."""
    if 0 < line <= len(origins) and origins[line - 1]:
        name, n = origins[line - 1]
        return f"{name}:{n}"
    return ""
