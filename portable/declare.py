"""A template's own declaration: its parameters (allowed values, defaults) and entries.

The declaration is TOML inside a Jinja comment at the top of the template, so the template
renders as it is and the data sits with the code it describes:

    {#portable
    entries = ["saxpy"]                      # optional: default, every kernel in the source
    targets = ["sm_90a", "gfx950"]           # optional: default, every target
    [params]
    dtype = { values = ["float32", "bfloat16"], default = "float32" }   # dtype names take torch.dtype too
    unroll = { min = 1, max = 8, default = 4 }                          # a whole-number range
    [tuning]                                 # how it computes, not what: load(..., tuning={"block": 512})
    block = { values = [128, 256, 512], default = 256 }
    #}

Every parameter has a default, so a template compiles with none given.
"""
from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field

from .dtypes import DTYPES
from .errors import InputError
from .params import Choice, DTypeChoice, Range

_BLOCK = re.compile(r"\{#-?\s*portable\b(.*?)-?#\}", re.S)
_DTYPE_NAMES = {"float32", "float64", "float16", "bfloat16", "int8", "uint8", "int16", "int32", "int64", *DTYPES}
_KEYS = {"entries", "targets", "params", "tuning"}
_SPEC_KEYS = {"values", "default", "min", "max", "multiple_of", "power_of_two", "type", "help"}


@dataclass(frozen=True)
class Declaration:
    params: dict = field(default_factory=dict)     # name -> Choice | Range: what the kernel computes
    tuning: dict = field(default_factory=dict)     # name -> Choice | Range: how (tile sizes, depths)
    entries: tuple = ()                             # () = every kernel of the rendered source
    targets: tuple = ()                             # () = every target
    help: dict = field(default_factory=dict)        # name -> one line, for --help and `--params`
    line: int = 0                                   # the line the declaration starts on


def _spec(name: str, row, where: str):
    if not isinstance(row, dict):
        raise InputError(f"{where}: parameter {name}: expected a table such as "
                         f"{{ values = [...], default = ... }}, got {row!r}")
    unknown = set(row) - _SPEC_KEYS
    if unknown:
        raise InputError(f"{where}: parameter {name}: unknown key(s) {', '.join(sorted(unknown))}; "
                         f"expected {', '.join(sorted(_SPEC_KEYS))}")
    if "default" not in row:
        raise InputError(f"{where}: parameter {name}: expected a default (every parameter has one)")
    default = row["default"]
    if "values" in row:
        values = tuple(row["values"])
        if not values or len({type(v) for v in values}) != 1:
            raise InputError(f"{where}: parameter {name}: expected a non-empty list of values of one type, got {list(values)}")
        if default not in values:
            raise InputError(f"{where}: parameter {name}: default {default!r} is not one of {list(values)}")
        dtype_like = row.get("type") == "dtype" or all(isinstance(v, str) and v in _DTYPE_NAMES for v in values)
        return (DTypeChoice if dtype_like else Choice)(values, default)
    if "min" in row and "max" in row:
        kind = float if isinstance(default, float) or row.get("type") == "float" else int
        spec = Range(kind, row["min"], row["max"], default, row.get("multiple_of", 0), row.get("power_of_two", False))
        try:
            spec.check(name, default)
        except InputError as e:
            raise InputError(f"{where}: parameter {name}: default {default!r} is outside its own range ({e})") from None
        return spec
    raise InputError(f"{where}: parameter {name}: expected `values = [...]` or `min`/`max`")


def parse(text: str, where: str = "template") -> Declaration:
    """The declaration of a template's text; an empty one if it has none."""
    m = _BLOCK.search(text)
    if m is None:
        return Declaration()
    line = text.count("\n", 0, m.start()) + 1
    try:
        data = tomllib.loads(m.group(1))
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"{where}:{line}: the {{#portable ... #}} declaration is not valid TOML: {e}") from None
    unknown = set(data) - _KEYS
    if unknown:
        raise InputError(f"{where}:{line}: unknown declaration key(s) {', '.join(sorted(unknown))}; "
                         f"expected {', '.join(sorted(_KEYS))}")
    rows, knobs = data.get("params", {}), data.get("tuning", {})
    params = {name: _spec(name, row, f"{where}:{line}") for name, row in rows.items()}
    tuning = {name: _spec(name, row, f"{where}:{line}") for name, row in knobs.items()}
    both = sorted(set(params) & set(tuning))
    if both:
        raise InputError(f"{where}:{line}: {', '.join(both)} declared both as a parameter and as a tuning knob")
    help_ = {name: row["help"] for name, row in {**rows, **knobs}.items() if isinstance(row, dict) and "help" in row}
    return Declaration(params, tuning, tuple(data.get("entries", ())), tuple(data.get("targets", ())), help_, line)
