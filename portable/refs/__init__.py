"""Torch references, input makers, cost models and torch peers for the fused kernels.

The references are the contract a kernel is checked against (fp32, written for clarity);
the peers are what a user would write in plain torch, timed beside the kernels.
"""
from ..kernels.mla_decode.reference import (dequantize_kv, make_mla_inputs, mla_cost, mla_reference, mla_torch_bf16,
                  page_kv)
from .moe import make_moe_inputs, moe_cost, moe_reference, moe_torch_bf16

__all__ = ["dequantize_kv", "make_mla_inputs", "mla_cost", "mla_reference", "mla_torch_bf16", "page_kv",
           "make_moe_inputs", "moe_cost", "moe_reference", "moe_torch_bf16"]
