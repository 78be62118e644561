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


TARGET_COLUMNS = ("sm_90a", "sm_100a", "sm_120a", "gfx942", "gfx950")
TABLE_COLUMNS = ("key", "category", "cuda", "hip", "cuda_expr", "hip_expr", *TARGET_COLUMNS, "note", "source")


@functools.cache
def load_table() -> tuple[dict, ...]:
    """Every row of the CUDA<->HIP table (all CSV files under mapping/cuda_hip/)."""
    rows = []
    for path in sorted((mapping_dir() / "cuda_hip").glob("*.csv")):
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            if tuple(reader.fieldnames or ()) != TABLE_COLUMNS:
                raise ValueError(f"{path.name}: columns must be {TABLE_COLUMNS}, got {reader.fieldnames}")
            for line, row in enumerate(reader, start=2):
                if None in row:          # csv puts fields past the last column under None
                    raise ValueError(f"{path.name}:{line}: {len(row[None])} fields past the {TABLE_COLUMNS[-1]!r} "
                                     f"column (a field with commas must be quoted)")
                row["file"] = f"{path.name}:{line}"
                rows.append(row)
    return tuple(rows)
