"""The C launch stub, built with the host's compiler and driven through a C callback that
stands in for cuLaunchKernel: every argument must arrive as the driver would see it."""
import ctypes
import shutil

import pytest

from portable.backends import launch_stub

LAUNCH = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, *[ctypes.c_uint] * 7, ctypes.c_void_p,
                          ctypes.c_void_p, ctypes.c_void_p)

pytestmark = pytest.mark.skipif(not (shutil.which("cc") or shutil.which("gcc")), reason="no C compiler")


@pytest.fixture
def fake_driver():
    calls = []

    def record(*args):
        calls.append(args)
        return 42 if args[1] == 13 else 0       # an error code for grid x 13
    callback = LAUNCH(record)
    address = ctypes.cast(callback, ctypes.c_void_p).value
    stub = launch_stub.module()
    assert stub is not None, launch_stub.status()
    yield stub.bind(address), calls
    del callback


def test_every_argument_reaches_the_driver(fake_driver):
    launch, calls = fake_driver
    assert launch(0x7F00_1234_5678, 3, 2, 1, 256, 1, 1, 49152, 0x55AA_0000, 0x1000_0008, 0) == 0
    assert calls == [(0x7F00_1234_5678, 3, 2, 1, 256, 1, 1, 49152, 0x55AA_0000, 0x1000_0008, None)]
    assert launch(1, 13, 1, 1, 1, 1, 1, 0, 0, 0, 0) == 42       # the driver's error code comes back


def test_bad_calls_raise_before_the_driver(fake_driver):
    launch, calls = fake_driver
    with pytest.raises(TypeError, match="expected 11 arguments, got 3"):
        launch(1, 2, 3)
    with pytest.raises(OverflowError):
        launch(1, 1 << 32, 1, 1, 1, 1, 1, 0, 0, 0, 0)
    with pytest.raises(OverflowError):
        launch(1, -1, 1, 1, 1, 1, 1, 0, 0, 0, 0)
    with pytest.raises(TypeError):
        launch(1, 1.5, 1, 1, 1, 1, 1, 0, 0, 0, 0)
    assert calls == []
    with pytest.raises(ValueError, match="non-zero int"):
        launch_stub.module().bind(0)


def test_binding_chosen_by_environment(monkeypatch):
    monkeypatch.setenv("PORTABLE_LAUNCH", "binding")
    monkeypatch.setattr(launch_stub, "_why_not", [])
    launch_stub.module.cache_clear()
    try:
        assert launch_stub.bind("libc.so.6", "printf") is None
        assert launch_stub.status() == "binding (PORTABLE_LAUNCH=binding)"
    finally:
        launch_stub.module.cache_clear()
