"""What every compiler returns, and the compile-error message all of them share."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..errors import CompileError


@dataclass
class Binary:
    target: str
    format: str              # "cubin" | "hsaco"
    code: bytes
    compiler: str            # name and version, e.g. "nvrtc 13.0"
    options: tuple = ()
    log: str = ""
    asm: str = ""            # SASS or AMDGPU assembly, when the compiler can give it
    meta: dict = field(default_factory=dict)


# "kernel.cu(12): error: ..." (NVRTC) and "kernel.hip:12:5: error: ..." (clang, hipRTC)
_ERROR_LINE = re.compile(r"\((\d+)\): (?:error|catastrophic)|:(\d+):\d+: (?:fatal )?error")


def raise_compile_error(compiler: str, target: str, log: str, source: str, context: int = 3):
    """Raise CompileError with the compiler's log and the rendered lines around each error,
    each with the template file and line it came from (portable.linemap)."""
    from ..linemap import describe, origins_of
    lines, origins = source.splitlines(), origins_of(source)
    shown, places = [], []
    for m in _ERROR_LINE.finditer(log):
        n = int(m.group(1) or m.group(2))
        if describe(origins, n) and describe(origins, n) not in places:
            places.append(describe(origins, n))
        lo, hi = max(1, n - context), min(len(lines), n + context)
        block = "\n".join(f"{'>' if i == n else ' '}{i:5d} | {lines[i - 1]}"
                          + (f"    <- {describe(origins, i)}" if describe(origins, i) else "")
                          for i in range(lo, hi + 1))
        if block not in shown:
            shown.append(block)
    excerpt = "\n   ...\n".join(shown) if shown else "(no line number in the log)"
    at = f" (template {', '.join(places)})" if places else ""
    raise CompileError(
        f"{compiler} failed to compile for {target}{at}:\n{log.strip()}\n\nrendered source around the error:\n{excerpt}",
        log=log, source=source)
