"""The C launch stub, built with the host's compiler and driven through a C callback that
stands in for cuLaunchKernel: every argument must arrive as the driver would see it."""
import ctypes
import shutil

import pytest

from portable.backends import launch_stub, params

LAUNCH = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, *[ctypes.c_uint] * 7, ctypes.c_void_p,
                          ctypes.c_void_p, ctypes.c_void_p)

pytestmark = pytest.mark.skipif(not (shutil.which("cc") or shutil.which("gcc")), reason="no C compiler")


KINDS = ("ptr", "i32", "u32", "f32", "f64", "i64", "u16", "i8", "tmap")


@pytest.fixture
def fake_driver():
    """A launcher over a C callback standing in for cuLaunchKernel: it records the launch and
    reads every argument slot back as the kernel would."""
    calls = []
    codes = params.codes(KINDS)
    readers = {"Q": ctypes.c_uint64, "i": ctypes.c_int32, "I": ctypes.c_uint32, "f": ctypes.c_float,
               "d": ctypes.c_double, "q": ctypes.c_int64, "H": ctypes.c_uint16, "b": ctypes.c_int8}

    def record(f, gx, gy, gz, bx, by, bz, smem, stream, ptrs, extra):
        slots = ctypes.cast(ptrs, ctypes.POINTER(ctypes.c_void_p))
        values = [ctypes.string_at(slots[i], 128) if chr(c) == "T" else readers[chr(c)].from_address(slots[i]).value
                  for i, c in enumerate(codes)]
        calls.append((f, gx, gy, gz, bx, by, bz, smem, stream, extra, values))
        return 42 if gx == 13 else 0       # an error code for grid x 13
    callback = LAUNCH(record)
    address = ctypes.cast(callback, ctypes.c_void_p).value
    stub = launch_stub.module()
    assert stub is not None, launch_stub.status()
    _, offsets, size = params.layout(KINDS)
    yield stub.launcher(address, 0x7F00_1234_5678, codes, offsets, size), calls
    del callback


VALUES = (0xDEAD_BEEF_F00D, -7, 4_000_000_000, 0.25, -1.5e300, -(2 ** 40), 0xFFFF, -128, bytes(range(128)))


def test_every_argument_reaches_the_driver(fake_driver):
    go, calls = fake_driver
    assert go(3, 2, 1, 256, 1, 1, 49152, 0x55AA_0000, *VALUES) == 0
    assert calls == [(0x7F00_1234_5678, 3, 2, 1, 256, 1, 1, 49152, 0x55AA_0000, None, list(VALUES))]
    assert go(13, 1, 1, 1, 1, 1, 0, 0, *VALUES) == 42       # the driver's error code comes back


def test_bad_calls_raise_before_the_driver(fake_driver):
    go, calls = fake_driver
    with pytest.raises(TypeError, match="expected 17 arguments, got 3"):
        go(1, 2, 3)
    with pytest.raises(OverflowError):
        go(1 << 32, 1, 1, 1, 1, 1, 0, 0, *VALUES)
    with pytest.raises(OverflowError):
        go(-1, 1, 1, 1, 1, 1, 0, 0, *VALUES)
    with pytest.raises(TypeError):
        go(1.5, 1, 1, 1, 1, 1, 0, 0, *VALUES)
    with pytest.raises(TypeError):
        go(1, 1, 1, 1, 1, 1, 0, 0, 1.5, *VALUES[1:])           # a float for a pointer
    with pytest.raises(ValueError, match="128 bytes"):
        go(1, 1, 1, 1, 1, 1, 0, 0, *VALUES[:-1], b"short")
    assert calls == []
    with pytest.raises(ValueError, match="outside the packed size"):
        launch_stub.module().launcher(1, 1, b"QT", [0, 64], 100)


def test_binding_chosen_by_environment(monkeypatch):
    monkeypatch.setenv("PORTABLE_LAUNCH", "binding")
    monkeypatch.setattr(launch_stub, "_why_not", [])
    launch_stub.module.cache_clear()
    try:
        assert launch_stub.launcher("libc.so.6", "printf", 1, ("ptr",)) is None
        assert launch_stub.status() == "binding (PORTABLE_LAUNCH=binding)"
    finally:
        launch_stub.module.cache_clear()


def test_a_stub_that_cannot_be_built_falls_back_with_the_reason(monkeypatch, tmp_path):
    monkeypatch.setenv("PORTABLE_CACHE_DIR", str(tmp_path))     # nothing built there yet
    monkeypatch.setenv("CC", "false")                            # a compiler that always fails
    monkeypatch.setattr(launch_stub, "_why_not", [])
    launch_stub.module.cache_clear()
    try:
        assert launch_stub.module() is None
        assert launch_stub.launcher("libc.so.6", "printf", 1, ("ptr",)) is None
        assert launch_stub.status().startswith("binding (") and "false failed" in launch_stub.status()
    finally:
        launch_stub.module.cache_clear()
