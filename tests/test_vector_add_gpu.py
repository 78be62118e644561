"""vector_add on a real GPU: correctness at awkward sizes, errors before launch."""
import pytest
import torch

import portable
from portable.device import device_target

pytestmark = pytest.mark.gpu

SIZES = [0, 1, 7, (1 << 20) + 3, 1 << 28]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("n", SIZES)
def test_matches_reference_every_element_written(dtype, n):
    k = portable.load("vector_add", dtype=dtype)
    a = torch.randn(n, device="cuda", dtype=dtype)
    b = torch.randn(n, device="cuda", dtype=dtype)
    out = torch.full_like(a, float("nan"))            # poison: an unwritten element stays NaN
    assert k(a, b, out) is out
    ref = k.reference(a, b)
    assert not torch.isnan(out).any(), "some elements were not written"
    if dtype is torch.float32:
        assert torch.equal(out, ref)                    # fp32 add is exact once rounded
    else:
        assert torch.equal(out, a + b)                  # same rounding as torch's bf16 add
        assert torch.allclose(out.float(), ref.float(), rtol=2 ** -8, atol=0)
    del a, b, out, ref
    torch.cuda.empty_cache()


@pytest.mark.parametrize("block,vecs", [(64, 1), (128, 4), (512, 2), (1024, 8)])
def test_other_tilings(block, vecs):
    k = portable.load("vector_add", dtype="bfloat16", tuning={"block": block, "vecs": vecs})
    for n in (5, 1000, 123457):
        a, b = (torch.randn(n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        out = torch.full_like(a, float("nan"))
        k(a, b, out)
        assert torch.equal(out, a + b)


def test_allocates_output_and_keeps_shape():
    k = portable.load("vector_add")
    a, b = torch.randn(3, 5, 7, device="cuda"), torch.randn(3, 5, 7, device="cuda")
    c = k(a, b)
    assert c.shape == (3, 5, 7) and torch.equal(c, a + b)


def test_runs_on_torch_current_stream():
    k = portable.load("vector_add")
    a, b = torch.randn(1 << 22, device="cuda"), torch.randn(1 << 22, device="cuda")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        out = torch.full_like(a, float("nan"))
        k(a, b, out)
        done = torch.equal(out, a + b)                  # ordered on s after the launch
    torch.cuda.synchronize()
    assert done


def test_errors_before_launch_on_gpu():
    k = portable.load("vector_add")
    a = torch.randn(64, device="cuda")
    with pytest.raises(portable.InputError, match=r"^vector_add: argument b .*: expected a tensor on a GPU"):
        k(a, torch.randn(64))
    with pytest.raises(portable.InputError, match=r"^a: expected a 16-byte aligned"):
        k(a[1:17], a[:16])                              # contiguous, but 4 bytes past an aligned start
    here = device_target(0).name
    other = "gfx942" if here != "gfx942" else "sm_90a"
    with pytest.raises(portable.TargetError, match=f"built for {other}"):
        portable.load("vector_add", target=other)(a, a)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_tensors_on_different_devices():
    k = portable.load("vector_add")
    with pytest.raises(portable.InputError, match="expected a tensor on cuda:0"):
        k(torch.randn(8, device="cuda:0"), torch.randn(8, device="cuda:1"))
