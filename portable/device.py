"""Which target a torch device is, and the current stream as a raw handle."""
from __future__ import annotations

import functools

import torch

from .errors import InputError
from .targets import Target, target_for_arch


@functools.cache
def device_target(index: int) -> Target:
    """The target of CUDA/ROCm device `index` (ROCm builds of torch also say 'cuda')."""
    if torch.version.hip:
        arch = torch.cuda.get_device_properties(index).gcnArchName
    else:
        major, minor = torch.cuda.get_device_capability(index)
        arch = f"{major}.{minor}"
    return target_for_arch(arch)


def gpu_count() -> int:
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _raw_stream():
    # torch's own fast accessor (what Triton uses); the public spelling is the fallback
    fast = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if fast is not None:
        return fast
    return lambda index: torch.cuda.current_stream(index).cuda_stream


current_stream = _raw_stream()
# torch's C accessor for the current device index; the public call is a thin wrapper around it
current_device = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device


def require_gpu_tensor(name: str, t) -> None:
    if not isinstance(t, torch.Tensor):
        raise InputError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if t.device.type != "cuda":
        raise InputError(f"{name}: expected a tensor on a GPU (device 'cuda'), got device '{t.device}'")
