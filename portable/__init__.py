"""portable: GPU kernels written once as Jinja2 templates, rendered to CUDA or HIP,
compiled at run time (NVRTC / hipRTC) and launched on torch tensors.

    import portable, torch
    add = portable.load("vector_add", dtype=torch.bfloat16)
    c = add(a, b)                       # target taken from a's device
    print(portable.render("vector_add", target="gfx950"))
"""
from __future__ import annotations

import difflib

import torch

from .dtypes import dtype_name
from .errors import CompileError, InputError, LaunchError, PortableError, TargetError, ToolchainMissing
from .kernels import KERNELS
from .program import Entry, Program, load_program
from .torch_op import custom_op
from .targets import Target, all_targets, get_target

__all__ = ["load", "render", "kernels", "targets", "target_of", "Program", "Entry", "custom_op", "CompileError", "InputError", "LaunchError",
           "PortableError", "TargetError", "ToolchainMissing"]


def kernels() -> list[str]:
    return list(KERNELS)


def targets() -> list[str]:
    return list(all_targets())


def target_of(device) -> "Target":
    """The target of a GPU tensor's device, or of device index `device`: its name, vendor,
    wave size and limits (mapping/targets.toml)."""
    from .device import device_target
    if isinstance(device, torch.Tensor):
        if device.device.type != "cuda":
            raise InputError(f"device: expected a GPU tensor or a device index, got a tensor on {device.device}")
        device = device.device.index if device.device.index is not None else torch.cuda.current_device()
    return device_target(device)


def load(kernel, target: str | None = None, lang: str | None = None, options: dict | None = None,
         tuning: dict | None = None, **params):
    """A kernel object, built for a target on first use (by default the tensors' device).

    `kernel` is a built-in name ("vector_add"), a path to a template (.j2) or a raw CUDA
    (.cu) or HIP (.hip) source, or the text of one (`lang` "template" by default, "cuda" or
    "hip"). Parameters (what the kernel computes) and `tuning` knobs (how: tile sizes, depths)
    are checked against what the template declares."""
    if isinstance(kernel, str) and kernel in KERNELS:
        if "dtype" in params:
            params["dtype"] = dtype_name(params["dtype"])
        return KERNELS[kernel](target=target, tuning=tuning, **params)
    if isinstance(kernel, str) and "\n" not in kernel and "/" not in kernel and "." not in kernel:
        near = difflib.get_close_matches(kernel, list(KERNELS), n=1)
        raise InputError(f"kernel: unknown kernel {kernel!r}{f' (did you mean {near[0]!r}?)' if near else ''}; expected "
                         f"one of {', '.join(KERNELS)}, a .j2/.cu/.hip file, or a template's text")
    return load_program(kernel, target=target, lang=lang, options=options, tuning=tuning, **params)


def render(kernel, target: str, **params) -> str:
    """The rendered source of `kernel` (a built-in name, a file or a template's text) for `target`."""
    return load(kernel, target=target, **params).source(get_target(target).name)
