"""Template parameters: each kernel declares the values it accepts; nothing else renders."""
from __future__ import annotations

from dataclasses import dataclass

from .errors import InputError


@dataclass(frozen=True)
class Choice:
    """A parameter that takes one of a fixed set of values."""
    values: tuple
    default: object

    def check(self, name: str, value):
        if value not in self.values or type(value) is not type(self.default):
            raise InputError(f"{name}: expected one of {list(self.values)}, got {value!r}")
        return value


@dataclass(frozen=True)
class Range:
    """A whole number (or float) parameter within [min, max], optionally a multiple of a step
    or a power of two."""
    type: type
    min: object
    max: object
    default: object
    multiple_of: int = 0
    power_of_two: bool = False

    def check(self, name: str, value):
        ok_type = isinstance(value, self.type) and not isinstance(value, bool)
        if self.type is float and isinstance(value, int) and not isinstance(value, bool):
            value, ok_type = float(value), True
        if not ok_type:
            raise InputError(f"{name}: expected {self.describe_expected()}, got {value!r}")
        bad = (not self.min <= value <= self.max or (self.multiple_of and value % self.multiple_of)
               or (self.power_of_two and (value <= 0 or value & (value - 1))))
        if bad:
            raise InputError(f"{name}: expected {self.describe_expected()}, got {value!r}")
        return value

    def describe_expected(self) -> str:
        what = f"{'an integer' if self.type is int else 'a number'} from {self.min} to {self.max}"
        if self.multiple_of:
            what += f", a multiple of {self.multiple_of}"
        if self.power_of_two:
            what += ", a power of two"
        return what


@dataclass(frozen=True)
class DTypeChoice(Choice):
    """A Choice of element-type names that also takes a torch.dtype or a short alias ('bf16')."""

    def check(self, name: str, value):
        from .dtypes import dtype_name
        return super().check(name, dtype_name(value))


def validate(declared: dict[str, Choice], given: dict, kind: str = "parameter") -> dict:
    unknown = sorted(set(given) - set(declared))
    if unknown:
        raise InputError(f"unknown {kind}(s) {', '.join(unknown)}; this kernel takes "
                         f"{', '.join(declared) or f'no {kind}'}")
    return {name: spec.check(name, given.get(name, spec.default)) for name, spec in declared.items()}


def _show(value) -> str:
    # as typed after `-p KEY=`: an empty string would otherwise vanish from the list
    return '""' if value == "" else str(value)


def describe(spec) -> str:
    """One line for help and `portable compile KERNEL --params`: the values a spec accepts and
    its default. Every spec type prints through here, so a new type only extends this; a spec
    with `values` lists them, one with `min`/`max` gives the range."""
    if getattr(spec, "values", None) is not None:
        accepted = " | ".join(_show(v) for v in spec.values)
    elif getattr(spec, "min", None) is not None or getattr(spec, "max", None) is not None:
        low, high = getattr(spec, "min", None), getattr(spec, "max", None)
        accepted = f"{'' if low is None else _show(low)}..{'' if high is None else _show(high)}"
        if getattr(spec, "multiple_of", 0):
            accepted += f", a multiple of {spec.multiple_of}"
        if getattr(spec, "power_of_two", False):
            accepted += ", a power of two"
    else:
        accepted = type(spec).__name__
    default = getattr(spec, "default", None)
    return accepted if default is None else f"{accepted} (default {_show(default)})"
