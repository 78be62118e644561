"""Timing-only edits of mla_decode's rendered source, for the bench scripts that ask where a
loop's time goes (mla_ablation.py, mla_regcap_probe.py) or when and where it waits
(mla_timeline.py, mla_waits.py). While an edit holds, every source the kernel renders has its
(old, new) pairs replaced, then its `then` applied, before it compiles; the kernel is otherwise
built, planned and launched as a user's call is. The first pair of a set must be in the source
(a misspelt edit then fails instead of timing the unedited loop); later pairs may be absent
(a cut's other pieces, where the loop has them).
"""
from portable.kernels.mla_decode import MLADecode

EDITS: list = []
THEN: list = []                 # the edit's function of the whole source, if any
_source = MLADecode.source


def _edited(self, target):
    src = _source(self, target)
    for n, (old, new) in enumerate(EDITS):
        if n == 0 and old not in src:
            raise ValueError(f"edit: {old!r} is not in the rendered source")
        src = src.replace(old, new)
    for then in THEN:
        src = then(src)
    return src


def edit(pairs, then=None) -> None:
    """Apply `pairs`, then `then` (source -> source), to every source rendered from now on
    (an empty list and no `then`: none)."""
    EDITS[:] = list(pairs)
    THEN[:] = [then] if then else []


def unedited(kernel, target: str) -> str:
    """The kernel's source for `target` as it renders without any edit."""
    return _source(kernel, target)


def with_device_code(source: str, code: str) -> str:
    """`code` (device variables and helpers) placed ahead of the source's first kernel."""
    first = source.index('extern "C"')
    return source[:first] + code + source[first:]


def kernel_end(source: str, start: int) -> int:
    """Where the kernel defined at `start` ends: the next kernel's `extern "C"`, or the end."""
    end = source.find('extern "C"', start)
    return len(source) if end < 0 else end


MLADecode.source = _edited
