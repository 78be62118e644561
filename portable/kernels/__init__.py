"""Kernel registry: name -> Python face (template, parameters, checks, reference, cost)."""
from .mla_decode import MLADecode
from .mxfp4_moe import MXFP4MoE
from .vector_add import VectorAdd

KERNELS = {k.NAME: k for k in (VectorAdd, MLADecode, MXFP4MoE)}
