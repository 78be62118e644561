"""The Python face: clear errors before any launch, packaging, the cost model."""
import subprocess
import sys

import pytest
import torch

import portable


@pytest.fixture
def add():
    return portable.load("vector_add", dtype=torch.float32)


def test_cpu_tensor_is_refused_by_name(add):
    with pytest.raises(portable.InputError, match=r"^vector_add: argument a \(`const float\* __restrict__ a`\): expected a tensor on a GPU \(device 'cuda'\), got device 'cpu'"):
        add(torch.randn(8), torch.randn(8))


def test_dtype_mismatch_names_argument_and_loaded_dtype(add):
    with pytest.raises(portable.InputError, match=r"^vector_add: argument b \(`const float\* __restrict__ b`\): expected dtype float32, got torch.bfloat16"):
        add(torch.randn(8), torch.randn(8, dtype=torch.bfloat16))


def test_shape_mismatch(add):
    with pytest.raises(portable.InputError, match=r"^b: expected shape \(8,\) like a, got \(9,\)"):
        add(torch.randn(8), torch.randn(9))
    with pytest.raises(portable.InputError, match=r"^out: expected shape \(8,\) like a, got \(4, 2\)"):
        add(torch.randn(8), torch.randn(8), torch.empty(4, 2))


def test_non_contiguous(add):
    x = torch.randn(4, 6)[:, ::2]
    with pytest.raises(portable.InputError, match=r"^vector_add: argument a \(`const float\* __restrict__ a`\): expected a contiguous tensor, got strides \(6, 2\)"):
        add(x, x)


def test_not_a_tensor(add):
    with pytest.raises(portable.InputError, match=r"^a: expected a torch.Tensor, got list"):
        add([1.0], torch.randn(1))


def test_unsupported_dtype_and_unknown_target():
    with pytest.raises(portable.InputError, match=r"dtype: expected one of \['float32', 'bfloat16'\], got 'float16'"):
        portable.load("vector_add", dtype=torch.float16)
    with pytest.raises(portable.TargetError, match="unknown target 'gfx1100'"):
        portable.load("vector_add", target="gfx1100")


def test_device_architecture_maps_to_targets():
    from portable.targets import target_for_arch
    assert target_for_arch("9.0").name == "sm_90a"
    assert target_for_arch("12.0").name == "sm_120a"
    assert target_for_arch("gfx942:sramecc+:xnack-").name == "gfx942"
    with pytest.raises(portable.TargetError, match=r"device architecture '8.9' matches no target"):
        target_for_arch("8.9")


def test_cost_model_by_hand():
    assert portable.load("vector_add").cost(1000) == {"flops": 1000, "bytes": 12000}
    assert portable.load("vector_add", dtype="bfloat16").cost(1 << 28) == {"flops": 1 << 28, "bytes": 3 * 2 * (1 << 28)}


def test_grid_covers_every_vector_in_one_pass():
    k = portable.load("vector_add", dtype="bfloat16", tuning={"block": 128, "vecs": 4})   # 128 * 4 * 8 = 4096 elements a block
    assert [k.grid(n) for n in (1, 7, 4096, 4097, 1 << 20)] == [1, 1, 1, 2, 256]


def test_non_editable_install_finds_templates_and_mapping(tmp_path):
    """A plain `pip install .` (not editable) must carry templates/ and mapping/."""
    target = tmp_path / "site"
    repo = __import__("pathlib").Path(__file__).resolve().parents[1]
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--target", str(target), str(repo)], check=True, capture_output=True, cwd=tmp_path)
    code = ("import portable, portable.data as d; print(d.templates_dir()); "
            "print(len(portable.render('vector_add', target='gfx950')))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path, env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert str(target) in out.splitlines()[0] and int(out.splitlines()[1]) > 500
