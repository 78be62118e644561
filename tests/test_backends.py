"""The CUDA and HIP runtimes mirror each other; what can run without a GPU runs here.

Fake driver modules record the calls each backend makes, so the argument order, error
handling and the hipRTC path are checked on a machine with neither vendor's driver."""
import re
import struct
from pathlib import Path

import pytest

from portable.backends import cuda_driver, hip_runtime, hiprtc, launch_stub
from portable.backends.params import ParamPacker
from portable.data import load_table
from portable.errors import CompileError, LaunchError


class Recorder:
    """Any attribute is a function that records its call and returns (0, handle)."""

    def __init__(self, fail=None):
        self.calls, self.fail = [], fail or set()

    def __getattr__(self, name):
        if name == "CUstream":
            return lambda raw: ("CUstream", raw)
        if name[0].isupper() or name in ("hipFuncAttribute", "CUfunction_attribute"):
            return type("Enum", (), {"__getattr__": lambda s, a: a})()

        def call(*args):
            self.calls.append((name, args))
            if name in self.fail:
                return (7,)
            if name.endswith("GetErrorString"):
                return (0, b"boom") if name.startswith("cu") else b"boom"
            return (0, f"<{name}>")
        return call


@pytest.fixture
def binding_launch(monkeypatch):
    """Launches through the bindings (the fakes below), not the C stub."""
    monkeypatch.setattr(launch_stub, "launcher", lambda library, symbol, function, kinds: None)


@pytest.mark.parametrize("backend,fake_name", [(cuda_driver, "_cu"), (hip_runtime, "_hip")])
def test_load_get_launch_in_the_same_order(backend, fake_name, monkeypatch, binding_launch):
    fake = Recorder()
    monkeypatch.setattr(backend, fake_name, lambda: fake)
    module = backend.load(b"CODE", 0)
    function = backend.get_function(module, "vector_add")
    go = backend.launcher(function, ("ptr", "i32", "f32"))
    assert go(3, 1, 1, 256, 1, 1, 0, 1234, 0xABC0, 7, 0.5) == 0
    names = [n for n, _ in fake.calls]
    launch = names[-1]
    assert launch in ("cuLaunchKernel", "hipModuleLaunchKernel")
    _, args = fake.calls[-1]
    assert args[:8] == ("<" + names[-2] + ">", 3, 1, 1, 256, 1, 1, 0)
    assert args[8] == (1234 if backend is hip_runtime else ("CUstream", 1234))
    load_call = next(c for c in fake.calls if c[0] in ("cuModuleLoadData", "hipModuleLoadData"))
    assert load_call[1] == (b"CODE",)
    assert next(c for c in fake.calls if c[0].endswith("GetFunction"))[1][1] == b"vector_add"
    # the arguments the driver reads: void** at args[9], each slot as laid out
    import ctypes
    ptrs = ctypes.cast(args[9], ctypes.POINTER(ctypes.c_void_p))
    assert ctypes.c_uint64.from_address(ptrs[0]).value == 0xABC0
    assert ctypes.c_int32.from_address(ptrs[1]).value == 7
    assert ctypes.c_float.from_address(ptrs[2]).value == 0.5


@pytest.mark.parametrize("backend,fake_name,launch", [(cuda_driver, "_cu", "cuLaunchKernel"),
                                                       (hip_runtime, "_hip", "hipModuleLaunchKernel")])
def test_launch_failure_raises_with_the_call_named(backend, fake_name, launch, monkeypatch, binding_launch):
    fake = Recorder(fail={launch})
    monkeypatch.setattr(backend, fake_name, lambda: fake)
    err = backend.launcher("<f>", ())(3, 1, 1, 64, 1, 1, 0, 0)
    assert err == 7 and fake.calls[-1][0] == launch
    with pytest.raises(LaunchError, match=r"launch of \(3, 1, 1\) failed: 7 \(boom\)"):
        backend.raise_for(err, "launch of (3, 1, 1)")


class FakeHiprtc:
    """Just enough of hip-python's hiprtc module to drive backends/hiprtc.py."""

    def __init__(self, ok=True):
        self.ok, self.options = ok, None

    def hiprtcVersion(self):
        return (0, 7, 2)

    def hiprtcCreateProgram(self, src, name, n, headers, names):
        self.source = src
        return (0, "prog")

    def hiprtcCompileProgram(self, prog, n, options):
        self.options = options
        return (0 if self.ok else 6,)

    def hiprtcGetProgramLogSize(self, prog):
        return (0, 64)

    def hiprtcGetProgramLog(self, prog, buf):
        msg = b"kernel.hip:2:5: error: use of undeclared identifier 'q'" if not self.ok else b""
        buf[: len(msg)] = msg
        return (0,)

    def hiprtcGetCodeSize(self, prog):
        return (0, 4)

    def hiprtcGetCode(self, prog, buf):
        buf[:4] = b"\x7fELF"
        return (0,)

    def hiprtcDestroyProgram(self, prog):
        return (0,)

    def hiprtcGetErrorString(self, err):
        return "HIPRTC_ERROR"


def test_hiprtc_compile_translates_options_through_the_table(monkeypatch):
    fake = FakeHiprtc()
    monkeypatch.setattr(hiprtc, "_hiprtc", lambda: fake)
    binary = hiprtc.compile("src", "gfx950", {"fast_math": True, "defines": {"N": 4}})
    assert binary.code == b"\x7fELF" and binary.format == "hsaco" and binary.compiler == "hiprtc 7.2"
    assert fake.options == [b"--offload-arch=gfx950", b"-std=c++17", b"-O3", b"-ffast-math", b"-DN=4"]


def test_hiprtc_compile_error_shows_the_line(monkeypatch):
    monkeypatch.setattr(hiprtc, "_hiprtc", lambda: FakeHiprtc(ok=False))
    with pytest.raises(CompileError, match=r"(?s)undeclared identifier.*>    2 \| int x = q;"):
        hiprtc.compile("void f() {\nint x = q;\n}\n", "gfx942")


def test_param_packer_slots():
    p = ParamPacker(("ptr", "i64", "i32", "f32"))
    addr = p.pack((0x1000, -5, 7, 1.5))
    assert addr == p.address
    assert struct.unpack("<Qqi4xf4x", p.slots()) == (0x1000, -5, 7, 1.5)   # one 8-byte slot each
    with pytest.raises(ValueError, match="unknown argument kind"):
        ParamPacker(("ptr", "half"))


def test_param_packer_tensor_map_slot():
    """A tensor map travels by value: 128 bytes at a 64-byte aligned address, the scalars around
    it in their own slots; each kernelParams entry points at its argument's bytes."""
    import ctypes
    p = ParamPacker(("i32", "tmap", "ptr"))
    desc = bytes(range(128))
    p.pack((3, desc, 0xABC))
    ptrs = (ctypes.c_void_p * 3).from_address(p.address)
    assert ptrs[1] % 64 == 0 and ptrs[1] - ptrs[0] == 64
    assert ctypes.string_at(ptrs[1], 128) == desc
    assert struct.unpack("<i", ctypes.string_at(ptrs[0], 4)) == (3,)
    assert struct.unpack("<Q", ctypes.string_at(ptrs[2], 8)) == (0xABC,)


def _api_calls(path: Path, prefix: str) -> set[str]:
    return set(re.findall(rf"\.({prefix}[A-Z]\w+)\(", path.read_text()))


# CUDA calls whose HIP counterpart is deliberately not called, and why.
NOT_MIRRORED = {
    "cuGetErrorString": "the HIP backend reads the text with hipGetErrorString; hipDrvGetErrorString is the "
                        "signature-for-signature port the table gives",
    "cuDeviceGet": "HIP binds a device to the thread (hipSetDevice), no context to look up",
    "cuDevicePrimaryCtxRetain": "same: no primary-context handle in HIP",
    "cuFuncSetAttribute": "AMD gives a kernel the whole LDS without an opt-in",
    "cuTensorMapEncodeTiled": "AMD has no tensor-map copy engine: the tiles that read through one are sm_90a's",
    "cuLaunchKernelEx": "used only for programmatic dependent launch, which HIP lacks: launch_overlapped launches plainly",
}


def test_every_driver_call_is_a_mirrored_row_of_the_table():
    """The backends call what the table documents: each CUDA call's row names the HIP call
    the HIP backend makes, so the table and the code cannot drift apart."""
    here = Path(cuda_driver.__file__).parent
    cuda_calls = _api_calls(here / "cuda_driver.py", "cu")
    hip_calls = _api_calls(here / "hip_runtime.py", "hip")
    table = {row["cuda"]: row["hip"] for row in load_table()}
    hip_side = set(table.values())
    assert cuda_calls and hip_calls
    for call in cuda_calls:
        assert call in table, f"{call} is not in the mapping table"
        if call not in NOT_MIRRORED:
            assert table[call] in hip_calls, f"table maps {call} -> {table[call]}, which hip_runtime.py does not call"
    for call in hip_calls:
        assert call in hip_side, f"{call} (hip_runtime.py) is not the HIP side of any table row"
