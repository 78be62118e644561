"""Kernel arguments packed into C memory for the launch APIs' `void** kernelParams`, and the
launcher a kernel is called through: `go(gx, gy, gz, bx, by, bz, smem, stream, *values) -> err`.

The layout (one slot an argument) is written here once; the C stub (launch_stub.c) packs into
it on its own stack, the binding's launcher into one ParamPacker buffer a host thread (the
launch APIs copy the parameters before they return, so a thread's buffer is free again).
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


def layout(kinds: tuple[str, ...]) -> tuple[str, list[int], int]:
    """(struct format, each argument's offset, bytes in all) of a signature's argument kinds."""
    unknown = [k for k in kinds if k not in _SLOT]
    if unknown:
        raise ValueError(f"kernel signature: unknown argument kind(s) {unknown}; expected {list(_SLOT)}")
    fmt, offsets, at = "<", [], 0
    for k in kinds:
        pad = -at % _ALIGN.get(k, 8)
        fmt, at = fmt + f"{pad}x" * bool(pad), at + pad
        offsets.append(at)
        fmt += _SLOT[k]
        at += struct.calcsize("<" + _SLOT[k])
    return fmt, offsets, at


def codes(kinds: tuple[str, ...]) -> bytes:
    """One letter an argument for the C stub: struct's letter of the slot, T for a tensor map."""
    return "".join("T" if k == "tmap" else _SLOT[k][0] for k in kinds).encode()


class ParamPacker:
    def __init__(self, kinds: tuple[str, ...]):
        self.kinds = tuple(kinds)
        fmt, offsets, at = layout(self.kinds)
        self._struct = struct.Struct(fmt)
        # 64 bytes of slack: the buffer's own address is only 16-byte aligned
        self._raw = ctypes.create_string_buffer(max(8, at) + 64)
        base = ctypes.addressof(self._raw)
        self._shift = -base % 64
        base += self._shift
        self._ptrs = (ctypes.c_void_p * max(1, len(kinds)))(*[base + o for o in offsets])
        self.address = ctypes.addressof(self._ptrs)
        self.lock = threading.Lock()
        # pack_into(*values): the same as pack() as one C call
        self.pack_into = functools.partial(self._struct.pack_into, self._raw, self._shift)

    def pack(self, values) -> int:
        """Write `values` into the slots (call under self.lock); returns the void** address."""
        self._struct.pack_into(self._raw, self._shift, *values)
        return self.address

    def slots(self) -> bytes:
        return self._raw.raw[self._shift:self._shift + self._struct.size]


def binding_launcher(call, handle, stream_handle, kinds: tuple[str, ...], extra):
    """go() through a runtime's Python binding: `call(handle, gx, gy, gz, bx, by, bz, smem,
    stream_handle(raw), params, extra) -> err`, the arguments packed into this thread's buffer."""
    packers: dict[int, ParamPacker] = {}
    stream = [(None, None)]         # (raw, handle), swapped whole: threads may race on it
    ident = threading.get_ident

    def go(gx, gy, gz, bx, by, bz, smem, raw, *values):
        p = packers.get(ident()) or packers.setdefault(ident(), ParamPacker(kinds))
        p.pack_into(*values)
        s = stream[0]
        if s[0] != raw:
            s = stream[0] = (raw, stream_handle(raw))
        return call(handle, gx, gy, gz, bx, by, bz, smem, s[1], p.address, extra)
    return go
