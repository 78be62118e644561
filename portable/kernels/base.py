"""What every kernel's Python face shares: parameters, render, build, report, launch."""
from __future__ import annotations

import sys
from pathlib import Path

import torch

from .. import backends
from ..build import build
from ..device import current_device, current_stream, device_target
from ..errors import InputError, TargetError
from .. import declare
from ..data import templates_dir
from ..program import Origin, Program, launch_checked
from ..report import static_report
from ..targets import get_target
from ..backends.params import ParamPacker

# a tensor-map argument ("tmap") that the launched code does not read: kernels whose signature
# carries a map for one path (the copy engine's) pass these 128 zero bytes on the others
NO_MAP = bytes(128)


class Launcher:
    """One kernel loaded on one device: launches on torch's current stream.

    __call__ is the hot path of every kernel call: one frame around the runtime's launcher,
    which packs the arguments (backends/params.py)."""

    def __init__(self, kernel: "Kernel", device_index: int):
        self.device_index, self.name = device_index, kernel.ENTRY
        self.target = target = device_target(device_index).name
        binary = kernel.binary(target, purpose="run")
        self.runtime = runtime = backends.runtime_for(target)
        self.module = runtime.load(binary.code, device_index)
        self.signatures = kernel.program.signatures(target)     # argument kinds read from the rendered source
        # every kernel of the module by name -> (function, launcher); the further ones (e.g. a
        # combine step) looked up on first launch (a variant's module may leave some out)
        self.others: dict = {}
        self.function, self.go = self.other(kernel.ENTRY)
        if kernel.DYNAMIC_SMEM:
            runtime.set_max_dynamic_smem(self.function, kernel.dynamic_smem(target))
        for name, nbytes in kernel.entry_smem(self.target).items():
            runtime.set_max_dynamic_smem(self.other(name)[0], nbytes)
        self._overlap_packers: dict = {}     # name -> ParamPacker, for launch_overlapped
        # with one GPU the current device is always this one: skip asking on every call
        self.check_device = torch.cuda.device_count() > 1
        self.sm_count = torch.cuda.get_device_properties(device_index).multi_processor_count   # CUs on AMD

    def other(self, name: str):
        if name not in self.others:
            function = self.runtime.get_function(self.module, name)
            self.others[name] = (function, self.runtime.launcher(function, self.signatures[name].kinds))
        return self.others[name]

    def __call__(self, grid, block, smem, args):
        index = self.device_index
        if (self.check_device and current_device() != index) or \
                self.go(grid[0], grid[1], grid[2], block[0], block[1], block[2], smem, current_stream(index), *args):
            # another device current, or a failed launch (nothing queued; e.g. a thread torch has
            # not used yet): the checked launch handles both
            launch_checked(self.runtime, self.go, index, grid, block, smem, args, self.name)

    def launch_other(self, name: str, grid, block, smem, args, overlap: bool = False):
        """Launch a kernel of the module by name (not the hot path: errors are checked by name).
        overlap: a programmatic dependent launch where the backend has one (the kernel must
        call sync.grid_wait before it reads what the kernel before it wrote, or writes)."""
        function, go = self.other(name)
        if overlap:
            packer = self._overlap_packers.get(name) or self._overlap_packers.setdefault(
                name, ParamPacker(self.signatures[name].kinds))

            def go(*a):
                with packer.lock:
                    packer.pack(a[8:])
                    return self.runtime.launch_overlapped(function, a[:3], a[3:6], a[6], a[7], packer.address)
        index = self.device_index
        if (self.check_device and current_device() != index) or \
                go(grid[0], grid[1], grid[2], block[0], block[1], block[2], smem, current_stream(index), *args):
            launch_checked(self.runtime, go, index, grid, block, smem, args, name)


class Kernel:
    """A built-in kernel's Python face over its Program: the template, rendered with the
    context this class derives from its parameters, on the same public path as any user's
    kernel. PARAMS default to what the template declares."""
    NAME = ""
    TEMPLATE = ""
    ENTRY = ""
    PARAMS: dict = {}
    DYNAMIC_SMEM = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.TEMPLATE:
            cls.ORIGIN = _builtin_origin(cls, cls.__dict__.get("PARAMS"), cls.__dict__.get("TUNING"))
            cls.PARAMS = cls.ORIGIN.declaration.params
            cls.TUNING = cls.ORIGIN.declaration.tuning

    def __init__(self, target: str | None = None, tuning: dict | None = None, **params):
        self.program = _KernelProgram(self, target, tuning=tuning, **params)
        self.params = self.program.params
        self.tuning = self.program.tuning
        self.target = self.program.target
        self._launchers: dict[int, Launcher] = {}

    def __repr__(self):
        return self.program.call_text(self.NAME)

    # --- per kernel -------------------------------------------------------------------
    def template_context(self, target: str) -> dict:
        """Values the template sees besides the dialect: derived from self.params only."""
        return dict(self.params)

    def block_threads(self, target: str) -> int:
        raise NotImplementedError

    def dynamic_smem(self, target: str) -> int:
        return 0

    def entry_smem(self, target: str) -> dict:
        """Dynamic shared memory of the module's other entries that take some: name -> bytes."""
        return {}

    # --- shared -----------------------------------------------------------------------
    def source(self, target: str) -> str:
        return self.program.source(target)

    def binary(self, target: str, purpose: str = "report"):
        return build(self.source(target), get_target(target).name, self.compile_options(), purpose=purpose)

    def compile_options(self) -> dict:
        return {}

    def report(self, target: str) -> dict:
        return static_report(self.binary(target), self.ENTRY, self.block_threads(target), self.dynamic_smem(target))

    def reports(self, target: str) -> list[dict]:
        """One static report per kernel worth reading (the entry by default)."""
        return [self.report(target)]

    def launcher(self, tensor: torch.Tensor) -> Launcher:
        index = tensor.device.index
        return self.launcher_at(torch.cuda.current_device() if index is None else index)

    def launcher_at(self, index: int) -> Launcher:
        """The kernel loaded on GPU `index` (built and loaded on first use)."""
        launcher = self._launchers.get(index)
        if launcher is None:
            found = device_target(index).name
            if self.target and self.target != found:
                raise TargetError(f"target: this kernel was built for {self.target}, but the tensors are on "
                                  f"cuda:{index}, a {found} device")
            launcher = self._launchers[index] = Launcher(self, index)
        return launcher


def _builtin_origin(cls, params: dict | None, tuning: dict | None) -> Origin:
    """A built-in kernel's template as a Program origin, looked up in the kernel's own package
    folder first (then among the shared templates, for the prelude); a class that still
    declares PARAMS in Python (not yet in its template) passes them here."""
    folder = Path(sys.modules[cls.__module__].__file__).resolve().parent
    search = (str(folder),) if folder != Path(__file__).resolve().parent else ()
    path = next(p for p in (*(Path(d) / cls.TEMPLATE for d in search), templates_dir() / cls.TEMPLATE) if p.exists())
    declaration = declare.parse(path.read_text(), cls.TEMPLATE)
    if params is not None or tuning is not None:
        declaration = declare.Declaration(params=params or {}, tuning=tuning or {})
    return Origin(cls.TEMPLATE, "template", template=cls.TEMPLATE, search=search, declaration=declaration)


class _KernelProgram(Program):
    """The Program of a built-in kernel: its template's context comes from the kernel's face."""

    def __init__(self, kernel: Kernel, target, tuning=None, **params):
        self.kernel = kernel
        super().__init__(type(kernel).ORIGIN, target=target, tuning=tuning, **params)

    def context(self, target: str) -> dict:
        return self.kernel.template_context(target)


def same_device(names_tensors) -> None:
    first_name, first = names_tensors[0]
    for name, t in names_tensors[1:]:
        if t.device != first.device:
            raise InputError(f"{name}: expected a tensor on {first.device} like {first_name}, got {t.device}")
