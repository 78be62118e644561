"""MXFP4 and fp8 formats against hand-computed encodings and torch's own fp8/e8m0 dtypes."""
import math

import pytest
import torch

from portable.errors import InputError
from portable.formats import (E4M3FN_AS_FNUZ_SCALE, dequantize_fp8, dequantize_mxfp4, e4m3fn_to_e4m3fnuz,
                              e8m0_to_float, pack_nibbles, qdq_mxfp4, quantize_fp8_e4m3, quantize_mxfp4,
                              reinterpret_e4m3fn_as_fnuz, scale_row_max, unpack_nibbles)

# Every E2M1 code with its value, worked out by hand from S.EE.M (exponent bias 1, E=0 subnormal):
#   0.00.0 = 0   0.00.1 = 0.5 (subnormal 0.1b * 2^0)   0.01.0 = 1   0.01.1 = 1.5
#   0.10.0 = 2   0.10.1 = 3   0.11.0 = 4   0.11.1 = 6 ; sign bit 8 negates (code 8 is -0)
E2M1 = {0x0: 0.0, 0x1: 0.5, 0x2: 1.0, 0x3: 1.5, 0x4: 2.0, 0x5: 3.0, 0x6: 4.0, 0x7: 6.0,
        0x8: -0.0, 0x9: -0.5, 0xA: -1.0, 0xB: -1.5, 0xC: -2.0, 0xD: -3.0, 0xE: -4.0, 0xF: -6.0}


def block(values, fill=0.0):
    """One 32-element block starting with `values`."""
    return torch.tensor(list(values) + [fill] * (32 - len(values)), dtype=torch.float32)


def codes_of(packed):
    return unpack_nibbles(packed).tolist()


# --- E2M1 codes and nibble order -----------------------------------------------------------------

def test_dequantize_every_code_with_unit_scale():
    # bytes 0x10, 0x32, ... hold codes (0,1), (2,3), ... : low nibble first
    packed = torch.tensor([[0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE] * 2], dtype=torch.uint8)
    scales = torch.tensor([[127]], dtype=torch.uint8)       # 2^0
    got = dequantize_mxfp4(packed, scales)[0, :16]
    want = torch.tensor([E2M1[c] for c in range(16)])
    assert torch.equal(got, want)
    assert torch.equal(torch.signbit(got), torch.signbit(want))     # code 8 decodes to -0


def test_quantize_every_code():
    x = block([E2M1[c] for c in range(16)])
    packed, scales = quantize_mxfp4(x)
    # amax 6: floor(log2 6) - 2 = 0 -> scale code 127, elements unchanged
    assert scales.tolist() == [127]
    assert codes_of(packed)[:16] == list(range(16))
    assert packed.tolist()[:8] == [0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE]


def test_nibble_order_low_nibble_is_even_element():
    packed, _ = quantize_mxfp4(block([1.0, 6.0, -0.5, 3.0]))
    # element 0 (1.0 = code 2) low, element 1 (6.0 = code 7) high -> 0x72; then -0.5 (9) | 3.0 (5) -> 0x59
    assert packed.tolist()[:2] == [0x72, 0x59]
    assert dequantize_mxfp4(torch.tensor([0x72] + [0] * 15, dtype=torch.uint8),
                            torch.tensor([127], dtype=torch.uint8))[:2].tolist() == [1.0, 6.0]
    assert pack_nibbles(torch.tensor([2, 7], dtype=torch.uint8)).tolist() == [0x72]


# --- scales --------------------------------------------------------------------------------------

@pytest.mark.parametrize("amax, scale_code, amax_code", [
    (6.0, 127, 7),                # exponent 2 - 2 = 0
    (1.0, 125, 6),                # 2^0 -> scale 2^-2, 1 * 4 = 4
    (8.0, 128, 6),                # 2^3 -> scale 2^1, 8 / 2 = 4
    (7.99, 127, 7),               # still exponent 2: 7.99 saturates to 6
    (4.0, 127, 6),                # exponent 2 exactly: 4
    (0.75, 124, 7),               # floor(log2 0.75) = -1 -> 2^-3, 0.75 * 8 = 6
    (2.0 ** -125, 0, 6),          # exponent -127: lowest scale, 2^-125 / 2^-127 = 4
    (2.0 ** -126, 0, 4),          # exponent -128 clamps to -127: element 2^-126 / 2^-127 = 2
    (2.0 ** -140, 0, 0),          # far below: clamped scale, element rounds to 0
    (2.0 ** 127, 252, 6),         # exponent 125: 2^127 / 2^125 = 4
    (3.4028234663852886e38, 252, 7),   # fp32 max (~1.99 * 2^127): exponent 125, saturates to 6
])
def test_scale_from_block_max(amax, scale_code, amax_code):
    packed, scales = quantize_mxfp4(block([amax, -amax / 2]))
    assert scales.tolist() == [scale_code]
    assert codes_of(packed)[0] == amax_code


def test_scale_exponent_is_floor_not_rounded():
    # just below a power of two, log2 in floating point could round up to 2; frexp must not
    below_four = torch.nextafter(torch.tensor(4.0), torch.tensor(0.0)).item()     # 4 - 2^-22 in fp32
    assert below_four < 4.0
    _, scales = quantize_mxfp4(block([below_four]))
    assert scales.tolist() == [126]     # floor(log2(3.99..)) = 1 -> 2^-1


def test_zero_block_gets_valid_scale():
    packed, scales = quantize_mxfp4(torch.zeros(2, 64))
    assert scales.tolist() == [[0, 0], [0, 0]]          # 2^-127, never the NaN code
    assert packed.eq(0).all()
    assert dequantize_mxfp4(packed, scales).eq(0).all()


def test_nonfinite_block_gets_nan_scale():
    x = torch.cat([block([1.0, float("inf")]), block([float("nan")]), block([2.0])])
    _, scales = quantize_mxfp4(x)
    assert scales.tolist() == [255, 255, 127 - 1]


def test_nan_scale_decodes_whole_block_to_nan():
    packed = torch.zeros(32, dtype=torch.uint8)       # 64 zeros, two blocks
    scales = torch.tensor([0xFF, 127], dtype=torch.uint8)
    out = dequantize_mxfp4(packed, scales)
    assert out[:32].isnan().all() and out[32:].eq(0).all()


def test_e8m0_values_match_torch_dtype():
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    want = codes.view(torch.float8_e8m0fnu).float()
    got = e8m0_to_float(codes)
    assert torch.equal(got[:255], want[:255]) and got[255].isnan() and want[255].isnan()
    assert got[0].item() == 2.0 ** -127 and got[254].item() == 2.0 ** 127


def test_extreme_scales_dequantize_exactly():
    packed = torch.tensor([0x71] * 16 + [0x71] * 16, dtype=torch.uint8)    # 0.5, 6, ... in both blocks
    out = dequantize_mxfp4(packed, torch.tensor([0, 254], dtype=torch.uint8))
    assert out[:2].tolist() == [0.5 * 2.0 ** -127, 6 * 2.0 ** -127]         # subnormal, still exact
    assert out[32].item() == 0.5 * 2.0 ** 127
    assert out[33].item() == math.inf      # 6 * 2^127 is beyond fp32: E8M0 x E2M1 outgrows fp32 at the top
    assert dequantize_mxfp4(packed, torch.tensor([0, 254], dtype=torch.uint8), torch.bfloat16)[:2].float().tolist() \
        == out[:2].tolist()


# --- rounding ------------------------------------------------------------------------------------

def test_round_to_nearest_even_ties():
    # a 6 in the block keeps the scale at 2^0, so the values below are the scaled values
    ties = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]
    # 0.25 -> 0 (code 0, even) | 0.75 -> 1 (code 2) | 1.25 -> 1 | 1.75 -> 2 | 2.5 -> 2 | 3.5 -> 4 | 5 -> 4
    want = [0, 2, 2, 4, 4, 6, 6]
    packed, scales = quantize_mxfp4(block([6.0] + ties + [-t for t in ties]))
    assert scales.tolist() == [127]
    assert codes_of(packed)[1:15] == want + [c | 8 for c in want]


def test_round_off_ties_and_saturation():
    values = [6.0, 0.2500001, 0.7499999, 4.99, 5.01, 7.0, 7.9, -7.9, -0.1, 0.1]
    want = [7, 1, 1, 6, 7, 7, 7, 15, 8, 0]       # 7 and 7.9 saturate to 6; -0.1 keeps its sign as -0
    packed, _ = quantize_mxfp4(block(values))
    assert codes_of(packed)[:10] == want


def test_random_values_match_brute_force_nearest():
    torch.manual_seed(0)
    x = torch.randn(8, 64) * torch.logspace(-3, 3, 8)[:, None]
    packed, scales = quantize_mxfp4(x)
    got = dequantize_mxfp4(packed, scales)
    # independent oracle: the nearest of all 16 grid points times the block scale, ties to even code
    grid = torch.tensor([E2M1[c] for c in range(16)])
    scale = e8m0_to_float(scales).repeat_interleave(32, dim=-1)
    dist = ((x / scale)[..., None].clamp(-6, 6) - grid).abs()
    best = dist.min(dim=-1, keepdim=True).values
    candidates = (dist == best) & (torch.arange(16) % 2 == 0)       # prefer even codes at a tie
    pick = torch.where(candidates.any(-1), candidates.float().argmax(-1), dist.argmin(-1))
    assert torch.equal(got.abs(), (grid[pick] * scale).abs())


def test_round_trip_on_grid_is_exact_and_shapes():
    torch.manual_seed(1)
    codes = torch.randint(0, 16, (3, 2, 64), dtype=torch.uint8)
    scales = torch.randint(100, 150, (3, 2, 2), dtype=torch.uint8)
    packed = pack_nibbles(codes)
    assert packed.shape == (3, 2, 32)
    x = dequantize_mxfp4(packed, scales)
    assert x.shape == (3, 2, 64)
    p2, s2 = quantize_mxfp4(x)
    assert torch.equal(dequantize_mxfp4(p2, s2), x)
    assert torch.equal(quantize_mxfp4(x.to(torch.bfloat16))[0], p2)


def test_qdq_pads_tail_with_zeros():
    torch.manual_seed(2)
    x = torch.randn(3, 40)
    padded = torch.nn.functional.pad(x, (0, 24))
    assert torch.equal(qdq_mxfp4(x), dequantize_mxfp4(*quantize_mxfp4(padded))[:, :40])


# --- argument checks -----------------------------------------------------------------------------

def test_errors_name_argument_and_expectation():
    with pytest.raises(InputError, match=r"x: expected a last dim that is a multiple of 32"):
        quantize_mxfp4(torch.zeros(4, 48))
    with pytest.raises(InputError, match=r"x: expected dtype float32, bfloat16 or float16, got torch.int32"):
        quantize_mxfp4(torch.zeros(32, dtype=torch.int32))
    with pytest.raises(InputError, match=r"packed: expected dtype torch.uint8"):
        dequantize_mxfp4(torch.zeros(16), torch.zeros(1, dtype=torch.uint8))
    with pytest.raises(InputError, match=r"scales: expected shape \(2, 1\)"):
        dequantize_mxfp4(torch.zeros(2, 16, dtype=torch.uint8), torch.zeros(2, 2, dtype=torch.uint8))
    with pytest.raises(InputError, match=r"x: expected finite values"):
        quantize_fp8_e4m3(torch.tensor([1.0, float("inf")]))
    with pytest.raises(InputError, match=r"q: expected dtype torch.float8_e4m3fn"):
        dequantize_fp8(torch.zeros(3), 1.0)


# --- fp8 -----------------------------------------------------------------------------------------

def test_fp8_round_trip_per_tensor_scale():
    torch.manual_seed(3)
    x = torch.randn(64, 96) * 3
    q, scale = quantize_fp8_e4m3(x)
    assert q.dtype is torch.float8_e4m3fn and scale.dtype is torch.float32 and scale.dim() == 0
    assert scale.item() == pytest.approx(x.abs().max().item() / 448, rel=1e-6)
    assert q.float().abs().max().item() == 448.0        # the largest magnitude lands on e4m3fn's max
    assert torch.equal(q, (x / scale).to(torch.float8_e4m3fn))       # torch's RNE cast is the oracle
    back = dequantize_fp8(q, scale)
    # 3 mantissa bits: relative error <= 2^-4 for normals; subnormals (< 2^-6 * scale) absolute
    assert ((back - x).abs() <= torch.maximum(x.abs() * 2.0 ** -4, scale * 2.0 ** -10)).all()
    assert dequantize_fp8(q, scale, torch.bfloat16).dtype is torch.bfloat16


def test_fp8_zero_tensor_and_given_scale():
    q, scale = quantize_fp8_e4m3(torch.zeros(5))
    assert scale.item() == 1.0 and q.float().eq(0).all()
    q, scale = quantize_fp8_e4m3(torch.tensor([1000.0, -1.0]), scale=0.5)
    assert q.float().tolist() == [448.0, -2.0]          # clamped, not NaN


ALL_FN = torch.arange(256, dtype=torch.int32).to(torch.uint8)


def test_fnuz_reencoding_matches_torch_for_every_representable_code():
    fn_values = ALL_FN.view(torch.float8_e4m3fn).float()
    torch_fnuz = fn_values.to(torch.float8_e4m3fnuz).view(torch.uint8)     # oracle: cast by value
    ours = e4m3fn_to_e4m3fnuz(ALL_FN)
    in_range = fn_values.abs() <= 240
    assert torch.equal(ours[in_range], torch_fnuz[in_range])
    assert torch.equal(ours.view(torch.float8_e4m3fnuz).float()[in_range], fn_values[in_range])


def test_fnuz_reencoding_special_cases():
    fn = torch.tensor([0x00, 0x80, 0x7F, 0xFF, 0x78, 0xFE, 0x01, 0x07, 0x08, 0x77], dtype=torch.uint8)
    #   +0  -0   NaN  NaN 256  -448 2^-9 7*2^-9 2^-6  240
    # fnuz: 2^-9 = subnormal 2 * 2^-10 (0x02); 7 * 2^-9 = 1.75 * 2^-7 (E=1, M=6: 0x0E); 2^-6 = E=2 (0x10)
    assert e4m3fn_to_e4m3fnuz(fn).tolist() == [0x00, 0x00, 0x80, 0x80, 0x7F, 0xFF, 0x02, 0x0E, 0x10, 0x7F]
    assert e4m3fn_to_e4m3fnuz(fn, saturate=False).tolist()[4:6] == [0x80, 0x80]
    # out of fnuz range without saturation: what torch's cast gives
    big = fn[4:6].view(torch.float8_e4m3fn).float().to(torch.float8_e4m3fnuz).view(torch.uint8)
    assert big.tolist() == [0x80, 0x80]
    assert torch.equal(e4m3fn_to_e4m3fnuz(fn.view(torch.float8_e4m3fn)), e4m3fn_to_e4m3fnuz(fn))


def test_fnuz_reinterpretation_halves_values():
    fn_values = ALL_FN.view(torch.float8_e4m3fn).float()
    read_as_fnuz = reinterpret_e4m3fn_as_fnuz(ALL_FN).view(torch.float8_e4m3fnuz).float()
    finite = fn_values.isfinite()
    assert torch.equal(read_as_fnuz[finite] * E4M3FN_AS_FNUZ_SCALE, fn_values[finite])
    assert read_as_fnuz[~finite].isnan().all()
    assert reinterpret_e4m3fn_as_fnuz(torch.tensor([0x80], dtype=torch.uint8)).tolist() == [0]


def test_scale_row_max():
    scales = torch.tensor([[[0, 3, 2], [127, 255, 1]], [[200, 200, 7], [0, 0, 0]]], dtype=torch.uint8)
    assert scale_row_max(scales).tolist() == [[3, 255], [200, 0]]
    with pytest.raises(InputError, match="scales"):
        scale_row_max(scales.float())
