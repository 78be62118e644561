"""portable: GPU kernels written once as Jinja2 templates, rendered to CUDA or HIP,
compiled at run time (NVRTC / hipRTC) and launched on torch tensors.

    import portable, torch
    add = portable.load("vector_add", dtype=torch.bfloat16)
    c = add(a, b)                       # target taken from a's device
    print(portable.render("vector_add", target="gfx950"))
"""
from __future__ import annotations

from .dtypes import dtype_name
from .errors import CompileError, InputError, LaunchError, PortableError, TargetError, ToolchainMissing
from .kernels import KERNELS
from .targets import all_targets, get_target

__all__ = ["load", "render", "kernels", "targets", "CompileError", "InputError", "LaunchError",
           "PortableError", "TargetError", "ToolchainMissing"]


def kernels() -> list[str]:
    return list(KERNELS)


def targets() -> list[str]:
    return list(all_targets())


def load(name: str, target: str | None = None, **params):
    """A kernel object called on torch tensors. `target` defaults to the tensors' device."""
    if name not in KERNELS:
        raise InputError(f"kernel: unknown kernel {name!r}; expected one of {', '.join(KERNELS)}")
    if "dtype" in params:
        params["dtype"] = dtype_name(params["dtype"])
    return KERNELS[name](target=target, **params)


def render(name: str, target: str, **params) -> str:
    """The rendered source of kernel `name` for `target`."""
    return load(name, target=target, **params).source(get_target(target).name)
