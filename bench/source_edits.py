"""Timing-only edits of mla_decode's rendered source, for the bench scripts that ask where a
loop's time goes (mla_ablation.py, mla_regcap_probe.py). While `EDITS` holds (old, new) pairs,
every source the kernel renders has them replaced before it compiles; the kernel is otherwise
built, planned and launched as a user's call is. The first pair of a set must be in the source
(a misspelt edit then fails instead of timing the unedited loop); later pairs may be absent
(a cut's other pieces, where the loop has them).
"""
from portable.kernels.mla_decode import MLADecode

EDITS: list = []
_source = MLADecode.source


def _edited(self, target):
    src = _source(self, target)
    for n, (old, new) in enumerate(EDITS):
        if n == 0 and old not in src:
            raise ValueError(f"edit: {old!r} is not in the rendered source")
        src = src.replace(old, new)
    return src


def edit(pairs) -> None:
    """Apply `pairs` to every source rendered from now on (an empty list: none)."""
    EDITS[:] = list(pairs)


MLADecode.source = _edited
