"""What `portable audit` reports: a `Finding`, the severities, the source suffixes it reads,
and the mapping-table rows the checks take their facts and fixes from."""
from __future__ import annotations

import functools
from dataclasses import asdict, dataclass

from ..data import load_table


SEVERITIES = ("info", "warning", "error")
SOURCE_SUFFIXES = (".cu", ".cuh", ".hip", ".h", ".hpp", ".hh", ".cpp", ".cc", ".cxx", ".inl")


@dataclass(frozen=True)
class Finding:
    file: str
    line: int
    column: int
    severity: str               # info | warning | error
    kind: str                   # hazard kind, e.g. lane-mask
    text: str                   # the offending source text
    message: str
    fix: str                    # from the table row where one exists
    targets: tuple[str, ...]    # the targets the hazard applies to
    row: str = ""               # table row the fix comes from (file:line)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["targets"] = list(self.targets)
        return d

    def format(self) -> str:
        where = f"{self.file}:{self.line}:{self.column}"
        out = f"{where}: {self.severity}: [{self.kind}] {self.message} ({', '.join(self.targets)})\n    | {self.text}"
        if self.fix:
            out += f"\n    fix: {self.fix}" + (f"  [{self.row}]" if self.row else "")
        return out


# ---------------------------------------------------------------- the table, as the audit needs it

@functools.cache
def _rows_by_cuda() -> dict[str, dict]:
    return {r["cuda"]: r for r in load_table()}


def table_row(cuda: str) -> dict:
    """The table row whose CUDA cell is exactly `cuda` (checks name their rows this way)."""
    try:
        return _rows_by_cuda()[cuda]
    except KeyError:
        raise KeyError(f"audit: no mapping-table row has cuda = {cuda!r}") from None


def maybe_row(*cudas: str) -> dict | None:
    """The first of these rows the table has, or None (a check then words its fix itself)."""
    rows = _rows_by_cuda()
    return next((rows[c] for c in cudas if c in rows), None)


def _fix(row: dict) -> str:
    return f"{row['hip']}" + (f" -- {row['note']}" if row["note"] else "")
