"""Peers from other libraries, used by `portable bench` beside the torch paths when the library
imports here: each is a callable on a kernel's benchmark inputs that returns what the kernel's
run() returns (so the kernel's own verify() checks it), with a `prepare(inputs)` that does the
library's per-batch setup (planning, host syncs) before the timed calls.

FlashInfer's MLA decode (BatchMLAPagedAttentionWrapper) reads the fused (rows, 576) bf16 cache
through strided views: the latent part is its ckv cache and the rope part its kpe cache, each
row a page of one.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util

import torch

from .kernels.mla_decode.reference import D_QK, D_V

WORKSPACE_BYTES = 128 << 20         # FlashInfer's recommended float workspace for split-KV


def available(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "?"


class FlashInferMLA:
    """FlashInfer MLA decode on bf16 inputs of mla_decode's make_inputs(); returns (out, lse)."""

    def __init__(self):
        import flashinfer
        self.flashinfer = flashinfer
        self.state = {}                 # id(q) -> (wrapper, views)

    def prepare(self, inputs):
        q, kv = inputs["q"], inputs["kv"]
        if kv.dtype != torch.bfloat16:
            raise ValueError(f"FlashInfer peer: bf16 caches only, got {kv.dtype}")
        qo, kvp = inputs["qo_indptr"], inputs["kv_indptr"]
        page = inputs.get("page_size", 1) if inputs.get("kv_indices") is not None else 1
        lens = (kvp[1:] - kvp[:-1]).int()
        if inputs.get("kv_indices") is None:
            indices = torch.arange(int(kvp[-1]), device=kv.device, dtype=torch.int32)
            pages_indptr = kvp.int()
        else:               # (B, max_pages) table -> the flat page list FlashInfer takes
            table = inputs["kv_indices"]
            npages = (lens + page - 1) // page
            keep = torch.arange(table.shape[1], device=kv.device)[None, :] < npages[:, None]
            indices = table[keep].int()
            pages_indptr = torch.cat([torch.zeros(1, device=kv.device, dtype=torch.int32), npages.cumsum(0).int()])
        wrapper = self.flashinfer.mla.BatchMLAPagedAttentionWrapper(
            torch.empty(WORKSPACE_BYTES, dtype=torch.int8, device=kv.device))
        h = q.shape[1]
        sm_scale = D_QK ** -0.5 if inputs.get("sm_scale") is None else inputs["sm_scale"]
        wrapper.plan(qo.int(), pages_indptr, indices, lens, h, D_V, D_QK - D_V, page, True, sm_scale,
                     torch.bfloat16, torch.bfloat16)
        rows = kv.view(-1, page, D_QK)
        self.state[id(q)] = (wrapper, q[..., :D_V], q[..., D_V:], rows[..., :D_V], rows[..., D_V:])
        torch.cuda.synchronize()

    def __call__(self, inputs):
        if id(inputs["q"]) not in self.state:
            self.prepare(inputs)
        wrapper, q_nope, q_pe, ckv, kpe = self.state[id(inputs["q"])]
        out, lse = wrapper.run(q_nope, q_pe, ckv, kpe, return_lse=True)
        return out, lse * LN2           # FlashInfer keeps the log-sum-exp in base 2 (log2(d) + m)


LN2 = 0.6931471805599453
