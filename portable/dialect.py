"""A target's dialect: the mapping table's rendered spellings, grouped by key prefix.

Row key "warp.shfl_xor" with cuda_expr "__shfl_xor_sync(0xffffffffu, {v}, {lane_mask})"
becomes `warp.shfl_xor('v', 'o')` in a template rendered for a CUDA target. A spelling
without fields renders as itself: `{{ sync.block }}`.
"""
from __future__ import annotations

import functools
import re
import string
from types import SimpleNamespace

from .data import load_table
from .errors import TargetError
from .targets import Target, get_target

# Arguments a template passes to a spelling: identifiers, numbers and simple expressions
# written in the template itself. Anything else is refused so no text can be smuggled in.
_SAFE_ARG = re.compile(r"^[A-Za-z0-9_ .\[\]()+\-*/&|^<>~!%,]*$")


class Spelling:
    """One row of the table as seen from one target: a constant or a small call pattern."""

    def __init__(self, key: str, pattern: str, target: Target, availability: str, fields: list[str]):
        self.key = key
        self.pattern = pattern
        self.target = target
        self.availability = availability
        self.fields = fields       # the row's arguments in either dialect: one call fits every target

    def _check_available(self):
        if self.availability == "no" or not self.pattern:
            raise TargetError(f"{self.key} is not available on target {self.target.name} (mapping table says {self.availability or 'no spelling'})")

    def __call__(self, *args, **kwargs) -> str:
        self._check_available()
        if len(args) > len(self.fields):
            raise TypeError(f"{self.key} takes {len(self.fields)} arguments ({', '.join(self.fields)}), got {len(args)}")
        values = dict(zip(self.fields, args))
        values.update(kwargs)
        missing = [f for f in self.fields if f not in values]
        if missing:
            raise TypeError(f"{self.key}: missing argument(s) {', '.join(missing)}")
        for name, value in values.items():
            if not isinstance(value, (str, int)) or not _SAFE_ARG.match(str(value)):
                raise ValueError(f"{self.key}: argument {name}={value!r} is not a plain expression")
        return self.pattern.format(**values)

    def __str__(self) -> str:
        self._check_available()
        if self.fields:
            raise TypeError(f"{self.key} needs arguments ({', '.join(self.fields)}): write {self.key}(...)")
        return self.pattern

    __html__ = __str__


@functools.cache
def dialect_for(target_name: str) -> dict[str, SimpleNamespace]:
    """Namespaces (idx, warp, sync, mem, ...) of Spellings for one target."""
    target = get_target(target_name)
    column = f"{target.dialect}_expr"
    spaces: dict[str, dict[str, Spelling]] = {}
    for row in load_table():
        key = row["key"]
        if not key:
            continue
        space, _, name = key.partition(".")
        if name in spaces.setdefault(space, {}):
            raise ValueError(f"mapping table: key {key} appears twice ({row['file']})")
        fields = list(dict.fromkeys(f for expr in (row["cuda_expr"], row["hip_expr"])
                                    for _, f, _, _ in string.Formatter().parse(expr) if f))
        spaces[space][name] = Spelling(key, row[column], target, row[target.name], fields)
    return {space: SimpleNamespace(**names) for space, names in spaces.items()}


# Namespaces of host-side rows (compiler flags, driver calls): never part of device source.
HOST_SPACES = {"rtc", "mod", "ctx", "dev", "stream", "event"}
_C_WORDS = {"unsigned", "long", "short", "int", "char", "float", "double", "const", "void", "extern",
            "struct", "return", "aligned", "attribute"}


def vendor_only_spellings() -> set[str]:
    """Identifiers the table uses in one dialect's device spellings and never in the other's.

    A template that contains one of these has written a vendor into itself."""
    ident = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")
    cuda_ids, hip_ids = set(), set()
    for row in load_table():
        if row["key"] and row["key"].partition(".")[0] not in HOST_SPACES:
            cuda_ids |= set(ident.findall(row["cuda_expr"]))
            hip_ids |= set(ident.findall(row["hip_expr"]))
    return (cuda_ids ^ hip_ids) - _C_WORDS
