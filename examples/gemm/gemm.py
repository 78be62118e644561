"""C = A @ B.T in bf16 with fp32 accumulation: examples/gemm/gemm.j2 behind one function.

    c = gemm(a, b)          # a: (M, K) bf16, b: (N, K) bf16 -> c: (M, N) float32
    gemm(a, b, out=c16)     # a bfloat16 `out` gets the bf16 kernel

B is taken N x K (each column of C a contiguous row of B, as nn.Linear keeps its weight; for
a @ w with w K x N pass w.T.contiguous()): its fragments then load K-contiguous, one ldmatrix
on NVIDIA either way but one 8-byte LDS read on AMD where a K x N B takes four 2-byte reads.
M and N must be multiples of 64, K of 32; the block tile is the largest that divides the
shape and still gives every SM a block, K goes 64 deep a stage where it can (on the H100 the
warpgroup instructions then run; K = 32 mod 64 takes 32-deep stages and the warp fragments).
Other tuning knobs of the template (gemm.j2's MMA, STAGES, INFLIGHT, ...) pass through as keywords.
"""
import functools
import re
from pathlib import Path

import torch

import portable

TEMPLATE = Path(__file__).with_name("gemm.j2")
TILES = ((128, 256, 8), (128, 128, 8), (64, 64, 4))    # (BM, BN, warps), largest first


@functools.cache
def kernel(bm: int = 128, bn: int = 256, warps: int = 8, out: str = "float32", **knobs) -> portable.Program:
    """The template for C of type `out` at one tiling; `knobs` are its other tuning knobs (BK, MMA, ...)."""
    return portable.load(TEMPLATE, OUT=out, tuning=dict(BM=bm, BN=bn, WARPS=warps, **knobs))


@functools.cache
def smem_bytes(k: portable.Program, target: str) -> int:
    """The dynamic shared memory the template asks for on `target` (its GEMM_SMEM_BYTES line)."""
    return int(re.search(r"#define GEMM_SMEM_BYTES (\d+)", k.source(target)).group(1))


@functools.cache
def stage_depth(k: portable.Program, target: str) -> int:
    """The K depth of a stage the template settled on for `target` (its GEMM_BK line)."""
    return int(re.search(r"#define GEMM_BK (\d+)", k.source(target)).group(1))


def pick_tile(m: int, n: int, sms: int) -> tuple:
    fits = [t for t in TILES if m % t[0] == 0 and n % t[1] == 0]
    return next((t for t in fits if (m // t[0]) * (n // t[1]) >= sms), fits[-1])


def gemm(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None, tile: tuple | None = None, **knobs):
    """a (M, K) and b (N, K) bf16 on one GPU -> out (M, N) = a @ b.T, float32 unless `out` is bf16.
    `tile` = (BM, BN, warps) overrides the choice; `knobs` are more of the template's (BK, MMA, ...)."""
    for name, t in (("a", a), ("b", b)):
        if not isinstance(t, torch.Tensor) or t.dtype != torch.bfloat16 or t.dim() != 2:
            raise portable.InputError(f"{name}: expected a 2-D torch.bfloat16 tensor, got "
                                      f"{getattr(t, 'dtype', type(t).__name__)} of shape {tuple(getattr(t, 'shape', ()))}")
    (m, k), (n, kb) = a.shape, b.shape
    if kb != k:
        raise portable.InputError(f"b: expected shape (N, {k}) (K-contiguous, C = a @ b.T), got {tuple(b.shape)}")
    if m % 64 or n % 64 or k % 32 or not m * n * k:
        raise portable.InputError(f"shape: M={m}, N={n}, K={k}: expected M and N positive multiples of 64 and K "
                                  f"a positive multiple of 32 (no edge tiles; pad the operands)")
    if out is None:
        out = torch.empty(m, n, dtype=torch.float32, device=a.device)
    if out.shape != (m, n) or out.dtype not in (torch.float32, torch.bfloat16):
        raise portable.InputError(f"out: expected a ({m}, {n}) float32 or bfloat16 tensor, got {out.dtype} {tuple(out.shape)}")
    if a.device.type != "cuda":          # the launch checks devices too, after these shape checks
        raise portable.InputError(f"a: expected a tensor on a GPU, got device '{a.device}'")
    bad = [name for name, t in (("a", a), ("b", b), ("out", out)) if t.data_ptr() % 16]
    if bad:
        raise portable.InputError(f"{bad[0]}: expected 16-byte aligned data (the kernel moves 16-byte pieces)")
    sms = torch.cuda.get_device_properties(a.device).multi_processor_count
    bm, bn, warps = tile or pick_tile(m, n, sms)
    if m % bm or n % bn:
        raise portable.InputError(f"tile: ({bm}, {bn}) does not divide M={m}, N={n}")
    knobs = {"BK": 64 if k % 64 == 0 else 32, **knobs}
    prog = kernel(bm, bn, warps, "float32" if out.dtype == torch.float32 else "bfloat16", **knobs)
    target = portable.target_of(a)
    if k % stage_depth(prog, target.name):
        raise portable.InputError(f"K={k}: expected a multiple of the kernel's {stage_depth(prog, target.name)}-deep stages (BK)")
    prog.gemm[(m // bm) * (n // bn), warps * target.wave, smem_bytes(prog, target.name)](a, b, out, m, n, k)
    return out
