"""The compile targets, read from mapping/targets.toml (the one list every table and tool reads)."""
from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from .data import TARGET_COLUMNS, load_toml
from .errors import TargetError


@dataclass(frozen=True)
class Target:
    name: str
    vendor: str           # "nvidia" | "amd"
    dialect: str          # "cuda" | "hip"
    wave: int
    limits: dict = field(hash=False, compare=False)
    features: tuple = ()

    def has(self, feature: str) -> bool:
        return feature in self.features

    def __getattr__(self, item):
        # limits from the data file read as attributes: t.smem_per_block, t.max_threads_per_sm ...
        limits = self.__dict__.get("limits", {})
        if item in limits:
            return limits[item]
        raise AttributeError(f"target {self.__dict__.get('name')!r} has no field {item!r}")


@functools.cache
def all_targets() -> dict[str, Target]:
    out = {}
    for name, row in target_rows().items():
        out[name] = Target(name=name, vendor=row["vendor"], dialect=row["dialect"], wave=row["wave"],
                           limits=row, features=tuple(row.get("features", ())))
    return out


@functools.cache
def target_rows() -> dict[str, dict]:
    """Each target's table from targets.toml, in file order; a target with `like = OTHER` takes
    every fact it does not state from OTHER (a new chip of a known family is a few lines)."""
    data = load_toml("targets.toml")
    rows = {name: data[name] for name in TARGET_COLUMNS}
    out = {}
    for name, row in rows.items():
        like = row.get("like")
        if like is not None and (like not in rows or "like" in rows[like]):
            raise TargetError(f"targets.toml [{name}]: like = {like!r} must name a target stated in full")
        out[name] = {**rows[like], **row} if like else dict(row)
    return out


def like(name: str) -> str | None:
    """The target whose facts `name` takes where it states none (targets.toml `like`)."""
    return target_rows()[name].get("like")


def get_target(name: str) -> Target:
    targets = all_targets()
    if name not in targets:
        raise TargetError(f"target: unknown target {name!r}; expected one of {', '.join(targets)}")
    return targets[name]


def resolve_targets(spec: str) -> list[Target]:
    """'all', one name, or a comma-separated list."""
    if spec == "all":
        return list(all_targets().values())
    return [get_target(s.strip()) for s in spec.split(",") if s.strip()]


def instruction_classes(vendor: str) -> dict[str, str]:
    return load_toml("targets.toml")["instruction_classes"][vendor]


def tiling(kernel: str, target: str) -> dict:
    """A kernel's tuning for a target, from its package's tuning.toml; a target with none takes
    the target it is `like`."""
    table = _tuning_table(kernel)
    if target not in table and target in target_rows() and like(target):
        target = like(target)
    return dict(table.get(target, {}))


@functools.cache
def _tuning_table(kernel: str) -> dict:
    # read once: kernels look their tiling up on every call
    own = Path(__file__).resolve().parent / "kernels" / kernel / "tuning.toml"
    if not own.exists():
        return {}
    with open(own, "rb") as f:
        return tomllib.load(f)


def target_for_arch(arch: str) -> Target:
    """Map a device's architecture string ('9.0' from NVIDIA, 'gfx942:sramecc+:xnack-' from AMD)."""
    key = arch.split(":")[0]
    for t in all_targets().values():
        if t.arch_match == key:
            return t
    known = ", ".join(f"{t.arch_match} -> {t.name}" for t in all_targets().values())
    raise TargetError(f"device architecture {arch!r} matches no target (known: {known})")
