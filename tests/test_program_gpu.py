"""The public kernel path on a GPU: a user's template file, raw source and template string
launch correctly; CuPy arrays, CUDA graphs, dynamic shared memory and torch.compile work."""
import pytest
import torch

import portable
from test_program import RAW_CUDA, SAXPY, HELPERS

pytestmark = pytest.mark.gpu


@pytest.fixture
def saxpy(tmp_path):
    (tmp_path / "helpers.j2").write_text(HELPERS)
    (tmp_path / "saxpy.j2").write_text(SAXPY)
    return tmp_path / "saxpy.j2"


def _fresh(n, dtype=torch.float32):
    return torch.randn(n, device="cuda", dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("n", [1, 255, 4097, 1 << 20])
def test_template_file_launches(saxpy, dtype, n):
    k = portable.load(saxpy, dtype=dtype)
    x, y = _fresh(n, dtype), _fresh(n, dtype)
    ref = (2.5 * x.double() + y.double()).to(dtype)
    k.saxpy[-(-n // 256), 256](x, y, 2.5, n)
    if dtype is torch.float32:
        torch.testing.assert_close(y, ref.float(), rtol=1e-6, atol=1e-6)
    else:      # one rounding of the fp32 result to bf16
        torch.testing.assert_close(y.float(), ref.float(), rtol=8e-3, atol=1e-2)


def test_multi_entry_warp_reduction_matches_torch(saxpy):
    k = portable.load(saxpy)
    wave = portable.program.device_target(0).wave
    n = 64 * 1000
    x = _fresh(n)
    out = torch.full((n // wave,), float("nan"), device="cuda")
    k.warp_sum[n // 256, 256](x, out, n)
    torch.testing.assert_close(out, x.view(-1, wave).double().sum(1).float(), rtol=1e-5, atol=1e-4)


def test_raw_source_and_template_string(tmp_path):
    path = tmp_path / "scale.cu"
    path.write_text(RAW_CUDA)
    for k in (portable.load(path), portable.load(RAW_CUDA, lang="cuda")):
        x = _fresh(1000)
        y = torch.full_like(x, float("nan"))
        k[4, 256](y, x, -3.0, 1000)
        torch.testing.assert_close(y, -3.0 * x)
    fill = portable.load("{{ fn.kernel }} void fill(float* y, float v, int n) {\n"
                         "  int i = {{ idx.block_x }} * {{ idx.block_dim_x }} + {{ idx.thread_x }};\n"
                         "  if (i < n) y[i] = v; }")
    y = torch.full((300,), float("nan"), device="cuda")
    fill[(2, 1, 1), (256, 1, 1)](y, 7.0, 300)
    assert torch.all(y == 7.0)


def test_hip_source_refused_on_an_nvidia_gpu(tmp_path):
    path = tmp_path / "k.hip"
    path.write_text(RAW_CUDA)
    k = portable.load(path)
    with pytest.raises(portable.TargetError, match="a HIP source compiles for AMD targets only"):
        k[1, 32](_fresh(4), _fresh(4), 1.0, 4)


def test_pinned_target_mismatch_is_named(saxpy):
    k = portable.load(saxpy, target="gfx942")
    with pytest.raises(portable.TargetError, match=r"built for gfx942, but the tensors are on cuda:0, a sm_90a device"):
        k.saxpy[1, 256](_fresh(8), _fresh(8), 1.0, 8)


def test_tensors_on_different_devices_or_cpu_are_refused(saxpy):
    k = portable.load(saxpy)
    with pytest.raises(portable.InputError, match=r"argument y .* expected a tensor on a GPU"):
        k.saxpy[1, 256](_fresh(8), torch.randn(8), 1.0, 8)


def test_cupy_arrays_are_accepted(saxpy):
    cupy = pytest.importorskip("cupy")
    k = portable.load(saxpy)
    x = cupy.random.standard_normal(1000, dtype=cupy.float32)
    y = cupy.random.standard_normal(1000, dtype=cupy.float32)
    ref = 2.0 * x + y
    torch.cuda.synchronize()
    k.saxpy[4, 256](x, y, 2.0, 1000)
    torch.cuda.synchronize()
    assert float(cupy.abs(y - ref).max()) < 1e-5


def test_cuda_graph_capture_and_replay(saxpy):
    k = portable.load(saxpy)
    x, y = _fresh(4096), _fresh(4096)
    k.saxpy[16, 256](x, y, 1.0, 4096)          # build and load outside the capture
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        with torch.cuda.graph(graph, stream=stream):
            k.saxpy[16, 256](x, y, 3.0, 4096)
    for _ in range(2):
        x.copy_(_fresh(4096))
        y0 = _fresh(4096)
        y.copy_(y0)
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(y, 3.0 * x + y0)


def test_dynamic_shared_memory_past_the_default(tmp_path):
    """64 KB of dynamic shared memory: the launcher raises the kernel's limit first."""
    k = portable.load("""{{ fn.kernel }} void rev(const float* x, float* y, int n) {
    {{ smem.dynamic('buf') }};
    float* s = reinterpret_cast<float*>(buf);
    for (int i = {{ idx.thread_x }}; i < n; i += {{ idx.block_dim_x }}) s[i] = x[i];
    {{ sync.block }};
    for (int i = {{ idx.thread_x }}; i < n; i += {{ idx.block_dim_x }}) y[i] = s[n - 1 - i];
}""")
    n = 16384
    x = _fresh(n)
    y = torch.full_like(x, float("nan"))
    k[1, 1024, 4 * n](x, y, n)
    assert torch.equal(y, x.flip(0))


def test_custom_op_under_torch_compile_matches_eager(saxpy):
    k = portable.load(saxpy)

    def axpy(x: torch.Tensor, y: torch.Tensor, a: float) -> torch.Tensor:
        out = y.clone()
        k.saxpy[-(-x.numel() // 256), 256](x, out, a, x.numel())
        return out
    op = portable.custom_op("portable_gpu_test::axpy", axpy, like="y")

    def f(x, y):
        return op(x, y, 2.0).relu() * 3

    x, y = _fresh(5000), _fresh(5000)
    eager = f(x, y)
    compiled = torch.compile(f, fullgraph=True)(x, y)
    torch.testing.assert_close(compiled, eager)
    torch.testing.assert_close(eager, (2.0 * x + y).relu() * 3)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_readme_kernel_runs(tmp_path, dtype):
    from test_program import readme_template
    (tmp_path / "row_sum.j2").write_text(readme_template())
    k = portable.load(tmp_path / "row_sum.j2", dtype=dtype)
    x = torch.randn(300, 1000, device="cuda", dtype=dtype)
    out = torch.full((300,), float("nan"), device="cuda")
    k[300, portable.target_of(x).wave](x, out, 1000)
    torch.testing.assert_close(out, x.double().sum(1).float(), rtol=1e-4, atol=1e-3)


def test_threads_launch_one_entry_at_once(saxpy):
    """Each host thread packs its own argument buffer: concurrent launches keep their arguments."""
    import threading
    k = portable.load(saxpy)
    n = 1 << 16
    pairs = [(_fresh(n), _fresh(n)) for _ in range(8)]
    expected = [2.0 * x + y for x, y in pairs]
    errors = []

    def work(i):
        try:
            x, y = pairs[i]
            k.saxpy[n // 256, 256](x, y, 2.0, n)
            torch.cuda.synchronize()
        except Exception as e:      # reported below, with the thread's index
            errors.append((i, e))
    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for (x, y), ref in zip(pairs, expected):
        torch.testing.assert_close(y, ref)
