"""Where the project's data lives, and loaders for it.

The source tree keeps `templates/` and `mapping/` beside `portable/`; an installed
wheel puts them inside the package (see pyproject.toml). Both layouts resolve here.
"""
from __future__ import annotations

import csv
import functools
import tomllib
from pathlib import Path

_HERE = Path(__file__).resolve().parent


def _find(name: str) -> Path:
    for candidate in (_HERE / name, _HERE.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"portable: data folder {name!r} not found beside {_HERE}")


def templates_dir() -> Path:
    return _find("templates")


def mapping_dir() -> Path:
    return _find("mapping")


@functools.cache
def load_toml(name: str) -> dict:
    with open(mapping_dir() / name, "rb") as f:
        return tomllib.load(f)


def _target_names() -> tuple[str, ...]:
    data = load_toml("targets.toml")
    return tuple(n for n, row in data.items() if isinstance(row, dict) and ("vendor" in row or "like" in row))


# The targets in targets.toml's order: the table's availability columns, read once from the data.
TARGET_COLUMNS = _target_names()
_LIKE = {n: load_toml("targets.toml")[n].get("like") for n in TARGET_COLUMNS}
HEAD_COLUMNS = ("key", "category", "cuda", "hip", "cuda_expr", "hip_expr")
TABLE_COLUMNS = (*HEAD_COLUMNS, *TARGET_COLUMNS, "note", "source")


@functools.cache
def load_table() -> tuple[dict, ...]:
    """Every row of the CUDA<->HIP table (all CSV files under mapping/cuda_hip/)."""
    rows = []
    for path in sorted((mapping_dir() / "cuda_hip").glob("*.csv")):
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            fields = tuple(reader.fieldnames or ())
            columns = tuple(c for c in fields if c in TARGET_COLUMNS)
            if fields != (*HEAD_COLUMNS, *columns, "note", "source"):
                raise ValueError(f"{path.name}: columns must be {HEAD_COLUMNS}, then targets of "
                                 f"{TARGET_COLUMNS}, then note, source; got {reader.fieldnames}")
            # a target the file has no column for takes the column of the target it is like
            missing = {t: _LIKE[t] for t in TARGET_COLUMNS if t not in columns}
            unfilled = [t for t, like in missing.items() if like not in columns]
            if unfilled:
                raise ValueError(f"{path.name}: no column for {', '.join(unfilled)} (nor for a target they are like)")
            for line, row in enumerate(reader, start=2):
                if None in row:          # csv puts fields past the last column under None
                    raise ValueError(f"{path.name}:{line}: {len(row[None])} fields past the {TABLE_COLUMNS[-1]!r} "
                                     f"column (a field with commas must be quoted)")
                for t, like in missing.items():
                    row[t] = row[like]
                row["file"] = f"{path.name}:{line}"
                rows.append(row)
    return tuple(rows)
