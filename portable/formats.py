"""Number formats the kernels read, as exact torch code: OCP MXFP4 and fp8 e4m3 (fn / fnuz).

These are the oracles: a kernel's packing, rounding and scale choice must match them bit
for bit, so everything here is integer logic or exact power-of-two arithmetic, never
"close enough" float tricks.

MXFP4 (OCP Microscaling Formats spec v1.0):
  - element E2M1: bit 3 sign, bits 2..1 exponent (bias 1), bit 0 mantissa;
    codes 0..7 are 0, 0.5, 1, 1.5, 2, 3, 4, 6 and codes 8..15 their negatives (8 is -0).
  - two elements per byte, the even-indexed element in the low nibble.
  - one E8M0 scale per 32 consecutive elements of the last dim: value 2^(code-127),
    code 0xFF is NaN (so 2^-127 .. 2^127 are representable).
"""
from __future__ import annotations

import torch

from .errors import InputError

MX_BLOCK = 32               # elements sharing one E8M0 scale
E2M1_EMAX = 2               # exponent of E2M1's largest power of two (6 = 1.5 * 2^2)
E2M1_MAX = 6.0
E8M0_BIAS = 127
E8M0_NAN = 0xFF
FP8_E4M3FN_MAX = 448.0      # OCP e4m3fn: S.1111.111 is NaN, so the largest value is 1.75 * 2^8
FP8_E4M3FNUZ_MAX = 240.0    # fnuz: exponent bias 8, so the largest value is 1.875 * 2^7

# Magnitudes of E2M1 codes 0..7; codes 8..15 are the same with the sign bit set.
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)

# Round to nearest, ties to even, on the E2M1 magnitude grid: a magnitude is at least code c
# when it passes the midpoint below c. At a tie the even code wins, so a midpoint whose lower
# neighbour is even (code 0, 2, 4, 6) must be strictly exceeded, one whose lower neighbour is
# odd (code 1, 3, 5) only reached. Counting the passed midpoints gives the code.
_MIDPOINTS_TIE_DOWN = (0.25, 1.25, 2.5, 5.0)    # between codes 0|1, 2|3, 4|5, 6|7
_MIDPOINTS_TIE_UP = (0.75, 1.75, 3.5)           # between codes 1|2, 3|4, 5|6

_QUANTIZABLE = (torch.float32, torch.bfloat16, torch.float16)


def _e2m1_byte_table(device) -> torch.Tensor:
    """(256, 2) fp32: the (low nibble, high nibble) values of every byte. Looking bytes up in
    it decodes two elements per index with int32 indices, which matters for expert weights of
    a billion elements (int64 nibble indices would take 8 bytes per element)."""
    mags = torch.tensor(E2M1_VALUES, dtype=torch.float32, device=device)
    codes = torch.cat([mags, -mags])
    byte = torch.arange(256, device=device)
    return torch.stack([codes[byte & 0xF], codes[byte >> 4]], dim=1)


def pow2(e: torch.Tensor) -> torch.Tensor:
    """2^e as fp32 for int32 e in [-149, 127], built from the bit pattern so it is exact on every
    device (pow/exp2 on a GPU need not be). Below 2^-126 the value is a subnormal: one mantissa bit."""
    e = e.to(torch.int32)
    normal = ((e + 127).clamp(min=1) << 23)
    subnormal = torch.ones_like(e) << (e + 149).clamp(0, 22)
    return torch.where(e >= -126, normal, subnormal).view(torch.float32)


def e8m0_to_float(scales: torch.Tensor) -> torch.Tensor:
    """E8M0 codes (uint8) -> fp32 scale values 2^(code-127); 0xFF -> NaN. Exact (2^-127 is an fp32 subnormal)."""
    _require_dtype("scales", scales, torch.uint8)
    values = pow2(scales.to(torch.int32) - E8M0_BIAS)
    return torch.where(scales == E8M0_NAN, torch.full_like(values, float("nan")), values)


def quantize_mxfp4(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x (..., K) fp32/bf16/fp16, K a multiple of 32 -> (packed uint8 (..., K/2), scales uint8 (..., K/32)).

    Scale per OCP MX: shared exponent = floor(log2(amax)) - 2, clamped to [-127, 127].
    Elements x / 2^exp are rounded to nearest even on the E2M1 grid and saturate to +-6
    (the spec's choice: amax / 2^exp lies in [4, 8), so the block max may exceed 6).
    An all-zero block gets code 0 (2^-127): -inf clamped to the bottom, as torchao and the
    MX reference code do. A block holding Inf or NaN gets the NaN scale 0xFF.
    Signs are kept, so a tiny negative rounds to -0 (code 8), as hardware conversions do.
    """
    _require_float("x", x)
    _require_last_dim_multiple("x", x, MX_BLOCK)
    xf = x.to(torch.float32)
    blocks = xf.reshape(*xf.shape[:-1], -1, MX_BLOCK)
    amax = blocks.abs().amax(dim=-1)
    # frexp is exact where log2 may round up just below a power of two: amax = m * 2^e, m in [0.5, 1)
    _, e = torch.frexp(amax)
    shared = (e.to(torch.int32) - 1 - E2M1_EMAX).clamp(-E8M0_BIAS, E8M0_BIAS)
    shared = torch.where(amax == 0, torch.full_like(shared, -E8M0_BIAS), shared)
    codes = (shared + E8M0_BIAS).to(torch.uint8)
    codes = torch.where(torch.isfinite(amax), codes, torch.full_like(codes, E8M0_NAN))

    # Dividing by a power of two is exact unless the result underflows, and anything that
    # small rounds to 0 on the E2M1 grid anyway.
    scaled = blocks * pow2(-shared).unsqueeze(-1)
    nibbles = encode_e2m1(scaled).reshape(xf.shape)
    return pack_nibbles(nibbles), codes


def encode_e2m1(v: torch.Tensor) -> torch.Tensor:
    """fp32 values already divided by their scale -> E2M1 codes (uint8 0..15): RNE, saturating at +-6. NaN -> +-0."""
    mag = v.abs()
    code = torch.zeros(v.shape, dtype=torch.uint8, device=v.device)
    for m in _MIDPOINTS_TIE_DOWN:
        code += (mag > m).to(torch.uint8)
    for m in _MIDPOINTS_TIE_UP:
        code += (mag >= m).to(torch.uint8)
    return code | (torch.signbit(v).to(torch.uint8) << 3)


def pack_nibbles(codes: torch.Tensor) -> torch.Tensor:
    """uint8 codes (..., K), K even -> bytes (..., K/2): element 2i in the low nibble, 2i+1 in the high."""
    pairs = codes.reshape(*codes.shape[:-1], -1, 2)
    return (pairs[..., 0] & 0xF) | ((pairs[..., 1] & 0xF) << 4)


def unpack_nibbles(packed: torch.Tensor) -> torch.Tensor:
    """bytes (..., K/2) -> uint8 codes (..., K), low nibble first."""
    _require_dtype("packed", packed, torch.uint8)
    return torch.stack([packed & 0xF, packed >> 4], dim=-1).reshape(*packed.shape[:-1], -1)


def dequantize_mxfp4(packed: torch.Tensor, scales: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """packed uint8 (..., K/2) + E8M0 scales uint8 (..., K/32) -> values (..., K) in `dtype`.

    Computed in fp32, where every E2M1 value times every E8M0 scale is exact except at the very
    top: 2^127 times an element >= 2 is beyond fp32 and becomes inf (no fp32 input quantizes to
    such a scale: its block max would have to be >= 2^129). The cast to bf16 is exact too (at
    most 2 significant bits); fp16 may under/overflow for extreme scales.
    """
    _require_dtype("packed", packed, torch.uint8)
    _require_dtype("scales", scales, torch.uint8)
    k = packed.shape[-1] * 2
    if k % MX_BLOCK or scales.shape != (*packed.shape[:-1], k // MX_BLOCK):
        raise InputError(f"scales: expected shape {(*packed.shape[:-1], k // MX_BLOCK)} (one per {MX_BLOCK} "
                         f"elements of packed's {k} = 2 x {packed.shape[-1]}; packed's last dim must be a "
                         f"multiple of {MX_BLOCK // 2}), got {tuple(scales.shape)}")
    values = _e2m1_byte_table(packed.device)[packed.to(torch.int32)]       # (..., K/2, 2)
    values = values.reshape(*scales.shape, MX_BLOCK).mul_(e8m0_to_float(scales).unsqueeze(-1))
    return values.reshape(*packed.shape[:-1], k).to(dtype)


def scale_row_max(scales: torch.Tensor) -> torch.Tensor:
    """Each row's largest E8M0 scale code: uint8 of scales.shape[:-1]. Computed once where the
    weights are loaded and passed to mxfp4_moe (w13_row_max), it spares the f16 GEMM a scan of
    every row's scales before its first weight load."""
    _require_dtype("scales", scales, torch.uint8)
    return scales.amax(dim=-1)


def qdq_mxfp4(x: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Quantize then dequantize along the last dim, zero-padding it to a multiple of 32 first.

    Zero padding never changes a block's max, so this is exactly what a kernel does when it
    quantizes a row of true width K stored in a buffer padded with zeros.
    """
    _require_float("x", x)
    k = x.shape[-1]
    pad = -k % MX_BLOCK
    xp = torch.nn.functional.pad(x, (0, pad)) if pad else x
    return dequantize_mxfp4(*quantize_mxfp4(xp), dtype=dtype)[..., :k]


# --- fp8 e4m3 ---------------------------------------------------------------------------------

def quantize_fp8_e4m3(x: torch.Tensor, scale: float | torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """x -> (q torch.float8_e4m3fn, scale fp32 0-dim) with x ~= q * scale.

    Default scale = amax / 448 so the largest magnitude lands on e4m3fn's largest finite
    value; an all-zero tensor gets scale 1. Values beyond +-448 after division are clamped,
    never turned into NaN (torch's cast saturates for e4m3fn, but the clamp makes it explicit).
    """
    _require_float("x", x)
    xf = x.to(torch.float32)
    if scale is None:
        amax = xf.abs().max() if xf.numel() else torch.zeros((), device=x.device)
        if not torch.isfinite(amax):
            raise InputError("x: expected finite values to choose a per-tensor fp8 scale, found Inf or NaN")
        scale = torch.where(amax > 0, amax / FP8_E4M3FN_MAX, torch.ones_like(amax))
    scale = torch.as_tensor(scale, dtype=torch.float32, device=x.device).reshape(())
    if not (torch.isfinite(scale) and scale > 0):
        raise InputError(f"scale: expected a finite positive fp32 scale, got {scale.item()}")
    q = (xf / scale).clamp(-FP8_E4M3FN_MAX, FP8_E4M3FN_MAX).to(torch.float8_e4m3fn)
    return q, scale


def dequantize_fp8(q: torch.Tensor, scale: float | torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """fp8 tensor (e4m3fn or e4m3fnuz) times its per-tensor fp32 scale, in `dtype` (computed in fp32)."""
    if q.dtype not in (torch.float8_e4m3fn, torch.float8_e4m3fnuz):
        raise InputError(f"q: expected dtype torch.float8_e4m3fn or torch.float8_e4m3fnuz, got {q.dtype}")
    scale = torch.as_tensor(scale, dtype=torch.float32, device=q.device)
    if scale.numel() != 1:
        raise InputError(f"scale: expected one per-tensor scale, got shape {tuple(scale.shape)}")
    return (q.to(torch.float32) * scale.reshape(())).to(dtype)


def e4m3fn_to_e4m3fnuz(bits: torch.Tensor, saturate: bool = True) -> torch.Tensor:
    """Re-encode OCP e4m3fn bits as the e4m3fnuz bits of the same value (uint8 -> uint8).

    gfx942's fp8 is fnuz: exponent bias 8 instead of 7, no -0, one NaN (0x80), max 240.
    Same value means one more exponent step, so for a magnitude m (low 7 bits):
      normal  (m >= 0x08): m + 0x08          subnormal (m < 0x08): m << 1
    (a subnormal fn mantissa k means k * 2^-9, which in fnuz is 2k * 2^-10: the doubled
    pattern, landing on the first normal binade for k >= 4). Magnitudes 256..448 (fn exponent
    15) do not exist in fnuz: they saturate to +-240 or, with saturate=False, become NaN as
    torch's float -> float8_e4m3fnuz cast does. fn NaN -> 0x80; -0 -> 0x00.
    Accepts uint8 or a float8_e4m3fn tensor (its bits); returns uint8.

    The cheaper path a kernel may take instead: read the fn bits as fnuz unchanged, which
    halves every finite value, and double the scale -- see reinterpret_e4m3fn_as_fnuz.
    """
    bits = _fp8_bits("bits", bits)
    b = bits.to(torch.int32)
    sign, mag = b & 0x80, b & 0x7F
    out = torch.where(mag >= 0x08, mag + 0x08, mag << 1) | sign
    overflow = (mag >= 0x78) & (mag != 0x7F)
    out = torch.where(overflow, (0x7F | sign) if saturate else torch.full_like(b, 0x80), out)
    out = torch.where(mag == 0x7F, torch.full_like(b, 0x80), out)     # fn NaN
    out = torch.where(mag == 0, torch.zeros_like(b), out)             # fnuz has no -0: 0x80 is its NaN
    return out.to(torch.uint8)


# Multiply the per-tensor scale by this when fn bits are read as fnuz unchanged.
E4M3FN_AS_FNUZ_SCALE = 2.0


def reinterpret_e4m3fn_as_fnuz(bits: torch.Tensor) -> torch.Tensor:
    """fn bits fixed up to be read as fnuz with the scale times E4M3FN_AS_FNUZ_SCALE (uint8 -> uint8).

    Reading fn bits as fnuz gives exactly half of every finite value (bias 8 vs 7, subnormals
    included), so only two patterns need care: -0 (0x80, NaN in fnuz) becomes 0x00, and the
    fn NaNs (0x7F, 0xFF, which fnuz reads as +-240) become 0x80.
    """
    bits = _fp8_bits("bits", bits)
    mag = bits & 0x7F
    out = torch.where(bits == 0x80, torch.zeros_like(bits), bits)
    return torch.where(mag == 0x7F, torch.full_like(bits, 0x80), out)


# --- argument checks ---------------------------------------------------------------------------

def _require_dtype(name: str, t, dtype: torch.dtype):
    if not isinstance(t, torch.Tensor):
        raise InputError(f"{name}: expected a torch.Tensor of dtype {dtype}, got {type(t).__name__}")
    if t.dtype is not dtype:
        raise InputError(f"{name}: expected dtype {dtype}, got {t.dtype}")


def _require_float(name: str, t):
    if not isinstance(t, torch.Tensor):
        raise InputError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in _QUANTIZABLE:
        raise InputError(f"{name}: expected dtype float32, bfloat16 or float16, got {t.dtype}")


def _require_last_dim_multiple(name: str, t: torch.Tensor, multiple: int):
    if t.dim() == 0 or t.shape[-1] % multiple:
        raise InputError(f"{name}: expected a last dim that is a multiple of {multiple}, got shape {tuple(t.shape)}")


def _fp8_bits(name: str, t) -> torch.Tensor:
    if isinstance(t, torch.Tensor) and t.dtype is torch.float8_e4m3fn:
        return t.view(torch.uint8)
    _require_dtype(name, t, torch.uint8)
    return t
