"""Kernel arguments packed once into C memory, for the launch APIs' `void** kernelParams`.

Both launch APIs copy the parameters when the launch is enqueued, so one buffer per
kernel serves every call; a lock keeps two host threads from packing into it at once.
"""
from __future__ import annotations

import ctypes
import struct
import threading

# Each argument gets an 8-byte slot (the largest scalar we pass); the driver reads the
# real size of each parameter from the kernel image.
_SLOT = {"ptr": "Q", "i64": "q", "u64": "Q", "i32": "i4x", "u32": "I4x", "f32": "f4x"}


class ParamPacker:
    def __init__(self, kinds: tuple[str, ...]):
        unknown = [k for k in kinds if k not in _SLOT]
        if unknown:
            raise ValueError(f"kernel signature: unknown argument kind(s) {unknown}; expected {list(_SLOT)}")
        self.kinds = tuple(kinds)
        self._struct = struct.Struct("<" + "".join(_SLOT[k] for k in kinds))
        self._buf = ctypes.create_string_buffer(max(8, 8 * len(kinds)))
        base = ctypes.addressof(self._buf)
        self._ptrs = (ctypes.c_void_p * max(1, len(kinds)))(*[base + 8 * i for i in range(len(kinds))])
        self.address = ctypes.addressof(self._ptrs)
        self.lock = threading.Lock()

    def pack(self, values) -> int:
        """Write `values` into the slots (call under self.lock); returns the void** address."""
        self._struct.pack_into(self._buf, 0, *values)
        return self.address

    def slots(self) -> bytes:
        return self._buf.raw
