"""Element types the kernels accept: name -> torch dtype, C type in rendered source, bytes."""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class DType:
    name: str
    torch: torch.dtype
    ctype: str      # raw storage type in rendered source (bf16 is carried as its bits)
    bytes: int


DTYPES = {d.name: d for d in (
    DType("float32", torch.float32, "float", 4),
    DType("bfloat16", torch.bfloat16, "unsigned short", 2),
)}


def dtype_name(value) -> str:
    """Accept 'float32', 'bf16'-style names or a torch.dtype."""
    if isinstance(value, torch.dtype):
        for d in DTYPES.values():
            if d.torch is value:
                return d.name
        return str(value).replace("torch.", "")
    aliases = {"fp32": "float32", "f32": "float32", "bf16": "bfloat16", "fp16": "float16", "f16": "float16",
               "half": "float16"}
    return aliases.get(value, value)


def bf16_half_ulp(values: torch.Tensor) -> torch.Tensor:
    """Half a bf16 ulp at each value (8 significant bits): how far rounding it to bf16 alone may
    move it; zero at an exact zero, which bf16 holds exactly (frexp gives 0 an exponent of 0, so
    the bare formula would allow 2^-9 there). The kernels' checks count errors past their bf16
    outputs' own rounding."""
    half = torch.ldexp(torch.ones_like(values), torch.frexp(values).exponent - 9)
    return torch.where(values == 0, torch.zeros_like(half), half)
