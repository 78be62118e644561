"""Kernel arguments packed once into C memory, for the launch APIs' `void** kernelParams`.

Both launch APIs copy the parameters when the launch is enqueued, so one buffer per
kernel serves every call; a lock keeps two host threads from packing into it at once.
"""
from __future__ import annotations

import ctypes
import functools
import struct
import threading

# Each scalar gets an 8-byte slot (the largest scalar we pass; the driver reads the real size
# of each parameter from the kernel image); a tensor map ("tmap", the driver's 128-byte
# descriptor, passed by value) a 64-byte aligned slot of its own size.
_SLOT = {"ptr": "Q", "i64": "q", "u64": "Q", "i32": "i4x", "u32": "I4x", "f32": "f4x", "f64": "d",
         "i16": "h6x", "u16": "H6x", "i8": "b7x", "u8": "B7x", "f16": "H6x", "bf16": "H6x",   # f16/bf16: the bits
         "tmap": "128s"}
_ALIGN = {"tmap": 64}


class ParamPacker:
    def __init__(self, kinds: tuple[str, ...]):
        unknown = [k for k in kinds if k not in _SLOT]
        if unknown:
            raise ValueError(f"kernel signature: unknown argument kind(s) {unknown}; expected {list(_SLOT)}")
        self.kinds = tuple(kinds)
        fmt, offsets, at = "<", [], 0
        for k in kinds:
            pad = -at % _ALIGN.get(k, 8)
            fmt, at = fmt + f"{pad}x" * bool(pad), at + pad
            offsets.append(at)
            fmt += _SLOT[k]
            at += struct.calcsize("<" + _SLOT[k])
        self._struct = struct.Struct(fmt)
        # 64 bytes of slack: the buffer's own address is only 16-byte aligned
        self._raw = ctypes.create_string_buffer(max(8, at) + 64)
        base = ctypes.addressof(self._raw)
        self._shift = -base % 64
        base += self._shift
        self._ptrs = (ctypes.c_void_p * max(1, len(kinds)))(*[base + o for o in offsets])
        self.address = ctypes.addressof(self._ptrs)
        self.lock = threading.Lock()
        # pack_into(*values): the same as pack() as one C call (the launch hot path's)
        self.pack_into = functools.partial(self._struct.pack_into, self._raw, self._shift)

    def pack(self, values) -> int:
        """Write `values` into the slots (call under self.lock); returns the void** address."""
        self._struct.pack_into(self._raw, self._shift, *values)
        return self.address

    def slots(self) -> bytes:
        return self._raw.raw[self._shift:self._shift + self._struct.size]
