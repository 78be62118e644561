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


def validate(declared: dict[str, Choice], given: dict) -> dict:
    unknown = sorted(set(given) - set(declared))
    if unknown:
        raise InputError(f"unknown parameter(s) {', '.join(unknown)}; this kernel takes {', '.join(declared)}")
    return {name: spec.check(name, given.get(name, spec.default)) for name, spec in declared.items()}
