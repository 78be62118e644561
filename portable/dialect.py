"""A target's dialect: the mapping table's rendered spellings, grouped by key prefix.

Row key "warp.shfl_xor" with cuda_expr "__shfl_xor_sync(0xffffffffu, {v}, {lane_mask})"
becomes `warp.shfl_xor('v', 'o')` in a template rendered for a CUDA target. A spelling
without fields renders as itself: `{{ sync.block }}`. `portable dialect` and docs/dialect.md
list every name (portable/dialect_doc.py); a misspelt one fails with the nearest names.
"""
from __future__ import annotations

import difflib
import functools
import re
import string
from dataclasses import dataclass

import jinja2

from .data import TARGET_COLUMNS, load_table
from .errors import DialectNameError, TargetError
from .targets import Target, all_targets, get_target

# Arguments a template passes to a spelling: identifiers, numbers and simple expressions
# written in the template itself. Anything else is refused so no text can be smuggled in.
_SAFE_ARG = re.compile(r"^[A-Za-z0-9_ .\[\]()+\-*/&|^<>~!%,]*$")

# Namespaces of host-side rows (compiler flags, driver calls): never part of device source.
HOST_SPACES = {"rtc", "mod", "ctx", "dev", "stream", "event"}

# Names every template gets besides the namespaces (render.py's context); the docs and the
# nearest-name search read them from here.
TEMPLATE_NAMES = {
    "WARP": "the target's warp/wave width as an int: 32 on NVIDIA, 64 on AMD (the same as target.wave)",
    "target": "the target being rendered: read its fields (target.name, target.wave, target.mma_shape, ...) "
              "and ask for a feature with target.has('wgmma')",
    "dialect_prelude": "the helpers (mapping/prelude/) the dialect's spellings call, as source text; "
                       "prelude.j2 emits it, and a template that does not include prelude.j2 gets it first",
}

# The Target fields a template reads beside its limits (mapping/targets.toml rows).
TARGET_FIELDS = {
    "name": "the target's name",
    "vendor": '"nvidia" or "amd"',
    "dialect": '"cuda" or "hip": which spelling column renders',
    "wave": "threads in a warp (32) or wave (64)",
    "features": "the instruction families the target has (tuple of names)",
    "has": "target.has(feature) -> bool: whether the feature is in target.features",
}
_NEAREST_COUNT = 3
_NEAREST_CUTOFF = 0.6


@dataclass(frozen=True)
class Entry:
    """One keyed row of the table as every target sees it: what `portable dialect` lists."""
    key: str
    space: str
    name: str
    fields: tuple[str, ...]     # the arguments, from either dialect's pattern: one call fits every target
    cuda_expr: str
    hip_expr: str
    cuda: str                   # the names a person would search for, beside the patterns
    hip: str
    availability: dict          # target name -> the table's cell: yes | no | emulated | ...
    category: str
    note: str
    source: str
    row: str                    # file:line of the row

    @property
    def host(self) -> bool:
        return self.space in HOST_SPACES

    def pattern(self, dialect: str) -> str:
        return {"cuda": self.cuda_expr, "hip": self.hip_expr}[dialect]


@functools.cache
def entries() -> dict[str, Entry]:
    """Every keyed row of the mapping table, by key, in table order."""
    out: dict[str, Entry] = {}
    for row in load_table():
        key = row["key"]
        if not key:
            continue
        if key in out:
            raise ValueError(f"mapping table: key {key} appears twice ({row['file']})")
        space, _, name = key.partition(".")
        fields = tuple(dict.fromkeys(f for expr in (row["cuda_expr"], row["hip_expr"])
                                     for _, f, _, _ in string.Formatter().parse(expr) if f))
        out[key] = Entry(key, space, name, fields, row["cuda_expr"], row["hip_expr"], row["cuda"], row["hip"],
                         {t: row[t] for t in TARGET_COLUMNS}, row["category"], row["note"], row["source"], row["file"])
    return out


def spaces() -> dict[str, list[Entry]]:
    """Namespace -> its entries, both in table order."""
    out: dict[str, list[Entry]] = {}
    for entry in entries().values():
        out.setdefault(entry.space, []).append(entry)
    return out


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
            if isinstance(value, jinja2.Undefined):
                str(value)          # raises the template's own "'x' is undefined"
            if not isinstance(value, (str, int)) or not _SAFE_ARG.match(str(value)):
                raise ValueError(f"{self.key}: argument {name}={value!r} is not a plain expression")
        return self.pattern.format(**values)

    def __str__(self) -> str:
        self._check_available()
        if self.fields:
            raise TypeError(f"{self.key} needs arguments ({', '.join(self.fields)}): write {self.key}(...)")
        return self.pattern

    __html__ = __str__


class DialectSpace:
    """One namespace of a target's dialect (warp, mem, cvt, ...): its Spellings as attributes.

    A name the table lacks raises DialectNameError, which Jinja2 lets through; an
    AttributeError would become an undefined value and lose the nearest names."""

    __slots__ = ("_space", "__dict__")     # vars() holds the Spellings only

    def __init__(self, space: str, names: dict[str, Spelling]):
        self._space = space
        self.__dict__.update(names)

    def __getattr__(self, name: str):
        # only reached for names not found; private and dunder probes (copy, pickle,
        # hasattr(x, "__html__")) keep Python's own answer
        if name.startswith("_"):
            raise AttributeError(name)
        key = f"{self._space}.{name}"
        raise DialectNameError(key, nearest_names(key), self._space)

    def __repr__(self) -> str:
        return f"<dialect namespace {self._space}: {', '.join(vars(self))}>"


@functools.cache
def dialect_for(target_name: str) -> dict[str, DialectSpace]:
    """Namespaces (idx, warp, sync, mem, ...) of Spellings for one target."""
    target = get_target(target_name)
    by_space: dict[str, dict[str, Spelling]] = {}
    for entry in entries().values():
        by_space.setdefault(entry.space, {})[entry.name] = Spelling(
            entry.key, entry.pattern(target.dialect), target, entry.availability[target.name], list(entry.fields))
    return {space: DialectSpace(space, names) for space, names in by_space.items()}


def target_attributes() -> dict[str, str]:
    """`target.X` a template may read -> what it holds: the Target's fields, then every key the
    targets' rows in mapping/targets.toml give (some only on some targets)."""
    out = {f"target.{name}": text for name, text in TARGET_FIELDS.items()}
    for t in all_targets().values():
        for key in t.limits:
            out.setdefault(f"target.{key}", "from mapping/targets.toml")
    return out


@functools.cache
def _vocabulary() -> tuple[str, ...]:
    return (*spaces(), *TEMPLATE_NAMES, *entries(), *target_attributes())


def nearest_names(word: str, n: int = _NEAREST_COUNT) -> list[str]:
    """The names a template may use nearest to `word`, best first (possibly none).

    'wrp' -> ['warp', ...]; 'warp.shfl_xorr' -> ['warp.shfl_xor', ...]; a name written without
    its namespace finds it: 'shfl_xor' -> ['warp.shfl_xor', ...]; 'target.wav' -> ['target.wave']."""
    word = word.strip()
    ratio = lambda a, b: difflib.SequenceMatcher(None, a, b).ratio()
    scored = []
    for name in _vocabulary():
        whole = ratio(word.lower(), name.lower())
        part = ratio(word.lower(), name.partition(".")[2].lower()) if "." in name and "." not in word else 0.0
        score = max(whole, part)
        if score >= _NEAREST_CUTOFF:
            # ties: a whole name before a namespace's member, then the closer case
            scored.append((-score, whole < part, -ratio(word, name), name))
    return [s[-1] for s in sorted(scored)[:n]]


_C_WORDS = {"unsigned", "long", "short", "int", "char", "float", "double", "const", "void", "extern",
            "struct", "return", "aligned", "attribute"}


def vendor_only_spellings() -> set[str]:
    """Identifiers the table uses in one dialect's device spellings and never in the other's.

    A template that contains one of these has written a vendor into itself."""
    ident = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")
    cuda_ids, hip_ids = set(), set()
    for row in load_table():
        if row["key"] and row["key"].partition(".")[0] not in HOST_SPACES:
            # a {field} is the template's own argument, not a vendor word
            cuda_ids |= set(ident.findall(re.sub(r"\{\w+\}", " ", row["cuda_expr"])))
            hip_ids |= set(ident.findall(re.sub(r"\{\w+\}", " ", row["hip_expr"])))
    return (cuda_ids ^ hip_ids) - _C_WORDS
