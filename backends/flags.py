"""The portable compile options (fast_math, lineinfo, defines) as a compiler's flags, spelled by
the mapping table's rtc.* rows; each compiler puts its own fixed flags in front."""
from __future__ import annotations

from ..dialect import dialect_for


def option_flags(target: str, opts: dict, lineinfo: bool = True) -> list[str]:
    rtc = dialect_for(target)["rtc"]
    flags = [str(rtc.fast_math)] if opts.get("fast_math") else []
    if lineinfo and opts.get("lineinfo"):
        flags.append(str(rtc.lineinfo))
    return flags + [rtc.define(name, value) for name, value in sorted(opts.get("defines", {}).items())]
