"""The device catalogue (mapping/devices.toml): datasheet ceilings, each with its source.

    lookup_device("NVIDIA H100 80GB HBM3")["memory_tbps"]
    -> {"value": 3.35, "source": "NVIDIA H100 Tensor Core GPU datasheet (SXM column)"}

An entry comes back with every `source` key already resolved to the document's title, so a
result file that copies the entry stays readable without this catalogue. Unknown devices give
None: callers then rely on the ceilings measured on the device itself.
"""
from __future__ import annotations

import functools
import re

from .data import load_toml
from .targets import all_targets

# The numeric fields an entry may carry; every one is { value, source, note? }.
NUMBER_FIELDS = ("memory_tbps", "fp32_tflops", "bf16_tflops", "fp8_tflops", "fp4_tflops",
                 "sm_count", "l2_mib", "llc_mib", "smem_per_sm_kib", "wave_size")
# Fields every entry must have (fp4 exists only on some devices).
REQUIRED_FIELDS = ("name", "target", "name_match", "docs", "memory_tbps", "fp32_tflops", "bf16_tflops",
                   "fp8_tflops", "sm_count", "l2_mib", "llc_mib", "smem_per_sm_kib", "wave_size")
# Compute formats with a peak field, in the order plots and tables list them.
PEAK_FORMATS = ("fp32", "bf16", "fp8", "fp4")


def _resolve(key: str, raw: dict) -> dict:
    """Check one catalogue entry and return it with sources resolved to document titles."""
    where = f"devices.toml [{key}]"
    for name in REQUIRED_FIELDS:
        if name not in raw:
            raise ValueError(f"{where}: missing field {name!r}")
    if raw["target"] not in all_targets():
        raise ValueError(f"{where}: target {raw['target']!r} is not one of {', '.join(all_targets())}")
    docs = raw["docs"]
    entry = {"key": key, "name": raw["name"], "target": raw["target"], "name_match": list(raw["name_match"])}
    for pattern in entry["name_match"]:
        try:
            re.compile(pattern)
        except re.error as e:
            raise ValueError(f"{where}: name_match pattern {pattern!r} is not a regular expression: {e}") from None
    for name in NUMBER_FIELDS:
        if name not in raw:
            continue
        number = raw[name]
        if not isinstance(number, dict) or "value" not in number or "source" not in number:
            raise ValueError(f"{where}: {name} must be {{ value = ..., source = ... }}, got {number!r}")
        if number["source"] not in docs:
            raise ValueError(f"{where}: {name}.source {number['source']!r} is not a key of docs "
                             f"(expected one of {', '.join(docs)})")
        resolved = {"value": number["value"], "source": docs[number["source"]]}
        if "note" in number:
            resolved["note"] = number["note"]
        entry[name] = resolved
    return entry


@functools.cache
def _catalogue() -> tuple[dict, ...]:
    return tuple(_resolve(key, raw) for key, raw in load_toml("devices.toml").items())


def catalogue() -> list[dict]:
    """Every catalogue entry (copies: callers may store or change them freely)."""
    return [_copy(e) for e in _catalogue()]


def _copy(entry: dict) -> dict:
    return {k: (dict(v) if isinstance(v, dict) else list(v) if isinstance(v, list) else v) for k, v in entry.items()}


def lookup_device(name: str) -> dict | None:
    """The entry whose name_match finds `name` (a torch device name), or None when none does.
    Two entries matching one name is a catalogue bug, reported as such."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"lookup_device: name must be a device name such as 'NVIDIA H100 80GB HBM3', got {name!r}")
    hits = [e for e in _catalogue() if any(re.search(p, name, re.IGNORECASE) for p in e["name_match"])]
    if len(hits) > 1:
        raise ValueError(f"devices.toml: device name {name!r} matches several entries "
                         f"({', '.join(e['key'] for e in hits)}); make their name_match patterns exclusive")
    return _copy(hits[0]) if hits else None


def number(entry: dict | None, field: str) -> float | None:
    """The value of `field` in a catalogue entry (None when the entry or the field is absent)."""
    if not entry or field not in entry:
        return None
    value = entry[field]
    return value.get("value") if isinstance(value, dict) else value
