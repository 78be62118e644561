import importlib.util
import os
import pathlib

import pytest
import torch


def has_gpu() -> bool:
    return torch.cuda.is_available() and torch.cuda.device_count() > 0


def pytest_collection_modifyitems(config, items):
    if has_gpu():
        return
    skip = pytest.mark.skip(reason="needs a CUDA or ROCm GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    """Each test session compiles into its own cache, so tests never see stale binaries."""
    root = tmp_path_factory.getbasetemp() / "portable-cache"
    monkeypatch.setenv("PORTABLE_CACHE_DIR", str(root))


def bench_module(name: str):
    """bench/<name>.py as a module (the bench scripts are not a package)."""
    spec = importlib.util.spec_from_file_location(name, pathlib.Path(__file__).parents[1] / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def toolchain_or_skip(available: tuple[bool, str]):
    """Skip when a compiler is missing, unless PORTABLE_REQUIRE_TOOLCHAINS=1 (CI) makes it a failure."""
    ok, why = available
    if ok:
        return
    if os.environ.get("PORTABLE_REQUIRE_TOOLCHAINS") == "1":
        pytest.fail(f"toolchain required but missing: {why}")
    pytest.skip(why)


def refill(inputs: dict, fresh: dict) -> None:
    """Copy a fresh input set into the tensors of `inputs` (a captured graph reads them); the
    sizes, which the graph baked in, must be the same."""
    for name, t in inputs.items():
        if isinstance(t, torch.Tensor):
            t.copy_(fresh[name])
        else:
            assert t == fresh[name], name


def assert_register_pool(kernel, raised, lowered: int) -> None:
    """The sm_90a kernel's setmaxnreg moves fit the block's pool and ptxas kept them: `raised`
    warpgroups run its one setmaxnreg.inc (a tuple: its inc sites in SASS order, and how many
    warpgroups run each) and `lowered` its one setmaxnreg.dec, and together they ask for at most
    what the launch holds (warpgroups x its register count a thread): setmaxnreg.inc waits for
    registers the others gave back, so asking for more hangs the block. ptxas drops both, and
    spills, where a warpgroup's code needs more than it is given."""
    import re
    from portable.backends import nvrtc
    toolchain_or_skip(nvrtc.available())
    b, regs = kernel.binary("sm_90a"), kernel.report("sm_90a")["registers"]
    asm = nvrtc.kernel_sass(b.asm, "mla_decode")
    raised = (raised,) if isinstance(raised, int) else tuple(raised)
    incs = [int(n, 16) for n in re.findall(r"USETMAXREG\.TRY_ALLOC\.CTAPOOL \w+, (0x[0-9a-f]+)", asm)]
    (dec,) = [int(n, 16) for n in re.findall(r"USETMAXREG\.DEALLOC\.CTAPOOL (0x[0-9a-f]+)", asm)]
    assert len(incs) == len(raised), (incs, raised)
    assert sum(n * inc for n, inc in zip(raised, incs)) + lowered * dec <= (sum(raised) + lowered) * regs, (incs, dec, regs)
    assert "'setmaxnreg' ignored" not in b.log


def assert_wgmma_pipelined(kernel, what="") -> None:
    """ptxas kept the sm_90a kernel's wgmma pipelined: no "wgmma.mma_async instructions are
    serialized" advisory in its compile log (C7511, C7514 and the other reasons ptxas gives;
    skipped without NVRTC)."""
    from portable.backends import nvrtc
    toolchain_or_skip(nvrtc.available())
    log = kernel.binary("sm_90a").log
    assert "ptxas info" in log and "instructions are serialized" not in log, (what, log[-600:])
