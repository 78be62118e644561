"""vector_add: c = a + b for fp32 and bf16 (vector_add.j2 beside this file)."""
from __future__ import annotations

import torch

from ...dtypes import DTYPES
from ...errors import InputError
from ..base import Kernel


class VectorAdd(Kernel):
    """The documented example of wrapping a template in a friendlier function: the template
    declares the parameters and the launcher reads and checks the arguments; this face only
    picks the grid, allocates the output, and checks what the signature cannot say (equal
    shapes, 16-byte alignment)."""
    NAME = "vector_add"
    TEMPLATE = "vector_add.j2"
    ENTRY = "vector_add"
    CHECK_VARIANTS = [{"dtype": "float32"}, {"dtype": "bfloat16"}]

    def __init__(self, target=None, **params):
        super().__init__(target, **params)
        self.dtype = DTYPES[self.params["dtype"]]
        self._per_block = self.tuning["block"] * self.tuning["vecs"] * (16 // self.dtype.bytes)
        self._kernel = None

    def template_context(self, target):
        return {**self.params, **self.tuning}

    def block_threads(self, target):
        return self.tuning["block"]

    def grid(self, n: int) -> int:
        """Blocks for one pass: each thread moves VECS vectors (the tail needs no extra block)."""
        return -(-n // self._per_block)

    def check(self, a, b, out):
        """What the kernel's signature cannot say, as an InputError naming the argument."""
        for name, t in [("a", a), ("b", b)] + ([("out", out)] if out is not None else []):
            if not isinstance(t, torch.Tensor):
                raise InputError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
            if t.shape != a.shape:
                raise InputError(f"{name}: expected shape {tuple(a.shape)} like a, got {tuple(t.shape)}")
            if t.dtype is not self.dtype.torch:
                raise InputError(f"{name}: expected dtype {self.dtype.torch} (this kernel was loaded with "
                                 f"dtype={self.dtype.name!r}), got {t.dtype}")
            if t.is_cuda and t.data_ptr() % 16:
                raise InputError(f"{name}: expected a 16-byte aligned data pointer for 16-byte vector access, "
                                 f"got address % 16 = {t.data_ptr() % 16} (a view at an offset? pass .clone())")

    def __call__(self, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        try:
            ok = a.shape == b.shape and (out is None or out.shape == a.shape) and not (
                a.data_ptr() | b.data_ptr() | (out.data_ptr() if out is not None else 0)) & 15
        except AttributeError:
            ok = False
        if not ok:
            self.check(a, b, out)
        if out is None:
            out = torch.empty_like(a)
        n = a.numel()
        if n:
            kernel = self._kernel or self._entry()
            kernel[-(-n // self._per_block), self.tuning["block"]](a, b, out, n)   # dtype, device, layout checked there
        return out

    def _entry(self):
        self._kernel = self.program.entry(self.ENTRY)
        return self._kernel

    # --- reference and cost model --------------------------------------------------
    @staticmethod
    def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """float64 sum, rounded once to the input dtype."""
        return (a.double() + b.double()).to(a.dtype)

    def cost(self, n: int) -> dict:
        """Minimum traffic: read a and b once, write c once; one add per element."""
        return {"flops": n, "bytes": 3 * n * self.dtype.bytes}

    # --- benchmark face (portable bench) ---------------------------------------------
    SHAPE_SETS = {
        "default": [({"n": n}, {"dtype": d}) for d in ("float32", "bfloat16") for n in (1 << 20, 1 << 24, 1 << 28)],
        "quick": [({"n": 1 << 20}, {"dtype": "float32"})],
    }

    def make_inputs(self, shape: dict, device: int):
        n = shape["n"]
        a, b = (torch.randn(n, device=f"cuda:{device}", dtype=self.dtype.torch) for _ in range(2))
        return a, b, torch.full_like(a, float("nan"))

    def run(self, inputs):
        return self(*inputs)

    def verify(self, inputs, out) -> tuple[bool, str]:
        a, b, _ = inputs
        ref = self.reference(a, b)
        if torch.equal(out, ref if self.dtype.name == "float32" else a + b):
            return True, ""
        bad = (out != ref).sum().item()
        return False, f"{bad} of {out.numel()} elements differ from the reference"

    def peers(self) -> dict:
        peers = {"torch.add": lambda inputs: torch.add(inputs[0], inputs[1], out=inputs[2])}
        try:
            import cupy
        except ImportError:            # CuPy is optional: a peer where installed
            return peers
        if self.dtype.name == "float32":   # CuPy has no bfloat16 dtype
            def cupy_add(inputs):          # CuPy writes into the torch output through a shared view
                cupy.add(cupy.asarray(inputs[0]), cupy.asarray(inputs[1]), out=cupy.asarray(inputs[2]))
                return inputs[2]
            peers["cupy.add"] = cupy_add
        return peers

    def cost_of(self, shape: dict) -> dict:
        return {**self.cost(shape["n"]), "peak": "fp32"}

    def selftest(self, device: int, n: int = (1 << 24) + 3) -> dict:
        """Fresh random inputs, poisoned output, compare, then time: one line of `portable check`."""
        from ...timing import time_gpu
        gen = torch.Generator(device=f"cuda:{device}").manual_seed(torch.seed() % (1 << 31))
        a = torch.randn(n, device=f"cuda:{device}", dtype=self.dtype.torch, generator=gen)
        b = torch.randn(n, device=f"cuda:{device}", dtype=self.dtype.torch, generator=gen)
        out = torch.full_like(a, float("nan"))
        self(a, b, out)
        ok = bool(torch.equal(out, self.reference(a, b)))
        median_us = time_gpu(lambda: self(a, b, out))["median_us"]
        return {"ok": ok, "shape": f"n={n}", "median_us": median_us,
                "tbps": self.cost(n)["bytes"] / median_us / 1e6}
