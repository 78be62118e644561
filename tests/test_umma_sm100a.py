"""mapping/prelude/sm_100a.h: the tcgen05 block-scaled MXFP4 helpers (umma_*) compile for sm_100a
into a block-scaled UTC*MMA, without local memory. Compile-only: NVRTC builds sm_100a cubins
without a GPU, nvdisasm prints their SASS."""
import re

import pytest

from portable.backends import nvrtc
from portable.data import mapping_dir
from portable.report import static_report
from portable.targets import instruction_classes

from conftest import toolchain_or_skip

# What the project's CUDA prelude (mapping/prelude/cuda.h) provides before a target prelude.
PRELUDE = r"""
struct u32x4 { unsigned x, y, z, w; };
__device__ __forceinline__ unsigned smem_addr(const void* p) {
    unsigned a;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
    return a;
}
"""

# A 128 x N tile of C over `ksteps` BK slices: global -> padded row-major shared tiles -> umma_*.
KERNEL = r"""
template <int N, int BK>
__device__ void umma_tile(const unsigned char* gA, const unsigned char* gAs, const unsigned char* gB,
                          const unsigned char* gBs, float* gC, int K, int ksteps) {
    extern __shared__ __align__(1024) unsigned char smem[];
    constexpr int scratch = (umma_scratch_bytes<N, BK>() + 1023) / 1024 * 1024;
    constexpr int lda = BK / 2 + 16, ldas = BK / 32 + 4;   // padded like a real kernel would
    unsigned char* sA4 = smem + scratch;
    unsigned char* sB4 = sA4 + 128 * lda;
    unsigned char* sAs = sB4 + N * lda;
    unsigned char* sBs = sAs + 128 * ldas;
    float* sC = reinterpret_cast<float*>(smem + scratch);   // reused once the slices are done
    umma_state st;
    umma_init<N, BK>(st, smem);
    for (int s = 0; s < ksteps; ++s) {
        for (int i = threadIdx.x; i < 128 * (BK / 2); i += 128)
            sA4[(i / (BK / 2)) * lda + i % (BK / 2)] = gA[(i / (BK / 2)) * (K / 2) + s * (BK / 2) + i % (BK / 2)];
        for (int i = threadIdx.x; i < N * (BK / 2); i += 128)
            sB4[(i / (BK / 2)) * lda + i % (BK / 2)] = gB[(i / (BK / 2)) * (K / 2) + s * (BK / 2) + i % (BK / 2)];
        for (int i = threadIdx.x; i < 128 * (BK / 32); i += 128)
            sAs[(i / (BK / 32)) * ldas + i % (BK / 32)] = gAs[(i / (BK / 32)) * (K / 32) + s * (BK / 32) + i % (BK / 32)];
        for (int i = threadIdx.x; i < N * (BK / 32); i += 128)
            sBs[(i / (BK / 32)) * ldas + i % (BK / 32)] = gBs[(i / (BK / 32)) * (K / 32) + s * (BK / 32) + i % (BK / 32)];
        __syncthreads();
        umma_mxf4_step<N, BK>(st, sA4, lda, sAs, ldas, sB4, lda, sBs, ldas, s > 0);
    }
    umma_store<N>(st, sC, N + 4);
    for (int i = threadIdx.x; i < 128 * N; i += 128)
        gC[i] = sC[(i / N) * (N + 4) + i % N];
    umma_release<N>(st);
}

extern "C" __global__ void __launch_bounds__(128) umma_test(
        const unsigned char* gA, const unsigned char* gAs, const unsigned char* gB,
        const unsigned char* gBs, float* gC, int K) {
    umma_tile<TEST_N, TEST_BK>(gA, gAs, gB, gBs, gC, K, K / TEST_BK);
}
"""


# What nvdisasm (CUDA 13) prints for tcgen05.mma: UTCHMMA (kind::f16), UTCQMMA (f8f6f4 and
# mxf8f6f4), UTCIMMA (i8), UTCOMMA (mxf4; UTCOMMA.4X for mxf4nvf4). No .BLOCK/.SCALE suffix: a
# block-scaled MMA shows as a third tmem[] operand, the B scales, after idesc[], e.g.
#   UTCOMMA gdesc[UR10], gdesc[UR12], tmem[UR20], tmem[UR18], idesc[UR19], tmem[UR22], UP0 ;
BLOCK_SCALED_UTC_MMA = r"\bUTC[A-Z]*MMA\b[^\n;]*idesc\[[^\]]*\],\s*tmem\["

# The TMEM / scratch plan the header documents, checked at compile time.
PLAN = r"""
static_assert(umma_tmem_cols<64, 128>() == 128 && umma_tmem_cols<64, 256>() == 128, "N=64");
static_assert(umma_tmem_cols<128, 128>() == 256 && umma_tmem_cols<128, 256>() == 256, "N=128");
static_assert(umma_tmem_cols<256, 128>() == 512 && umma_tmem_cols<256, 256>() == 512, "N=256");
static_assert(umma_scratch_bytes<64, 128>() == 13328 && umma_scratch_bytes<128, 256>() == 34832, "scratch");
static_assert(umma_scratch_bytes<256, 256>() == 52240, "scratch");
"""


def test_python_layout_mirrors_umma_cfg():
    """portable/kernels/mxfp4_moe.py lays out the scratch (and keeps sC off its mbarrier) from
    umma_offsets: the same offsets as umma_cfg, checked by the compiler."""
    from portable.kernels.mxfp4_moe import umma_offsets
    toolchain_or_skip(nvrtc.available())
    fields = {"off_b": "OFF_B", "off_sfa": "OFF_SFA", "off_sfb": "OFF_SFB", "off_bar": "OFF_BAR",
              "off_tmem": "OFF_TMEM", "bytes": "BYTES"}
    checks = "".join(f"static_assert(umma_cfg<{n}, {bk}>::{c} == {umma_offsets(n, bk)[p]}, \"{p} {n} {bk}\");\n"
                     for n, bk in [(64, 128), (128, 128), (64, 256), (128, 256), (256, 128), (256, 256), (16, 64)]
                     for p, c in fields.items())
    nvrtc.compile(PRELUDE + header() + checks + 'extern "C" __global__ void k(float* x) { x[0] = 1.f; }\n', "sm_100a", {})


def header() -> str:
    return (mapping_dir() / "prelude" / "sm_100a.h").read_text()


def counts(asm: str) -> dict[str, int]:
    return {name: len(re.findall(pattern, asm)) for name, pattern in instruction_classes("nvidia").items()}


@pytest.mark.parametrize("n,bk", [(64, 128), (64, 256), (128, 128), (128, 256), (16, 64), (256, 256)])
def test_umma_mxf4_compiles_to_block_scaled_utc_mma(n, bk):
    toolchain_or_skip(nvrtc.available())
    src = PRELUDE + header() + PLAN + f"#define TEST_N {n}\n#define TEST_BK {bk}\n" + KERNEL
    b = nvrtc.compile(src, "sm_100a", {})
    if not b.asm:
        pytest.skip("nvdisasm not installed: no SASS to inspect")
    c = counts(b.asm)
    mma = [line.strip() for line in b.asm.splitlines() if re.search(r"\bUTC[A-Z]*MMA\b", line)]
    assert c["tcgen05"] > 0, "no UTC*MMA in the SASS"
    assert all(re.search(r"\bUTCOMMA\b", line) for line in mma), mma   # kind::mxf4, 2X (no .4X)
    scaled = len(re.findall(BLOCK_SCALED_UTC_MMA, b.asm))
    assert scaled > 0, f"UTC*MMA without block scaling: {mma}"
    assert c["tcgen05"] == scaled == bk // 64, mma   # one MMA per 64-deep K slice (thread 0, unrolled)
    # scales: one tcgen05.cp 32x128b.warpx4 per 4-byte scale group of A and per 128 rows of B
    kc, rb = (bk + 127) // 128, (n + 127) // 128
    assert len(re.findall(r"\bUTCCP\b[^\n]*4x32dp128bit", b.asm)) == kc * (1 + rb)
    assert c["local_memory"] == 0 and not re.search(r"\b(LDL|STL)\b", b.asm)
    report = static_report(b, "umma_test", block=128)
    assert report["stack_bytes"] == 0 and report["spill_bytes"] in (0, None), report
    assert report["instructions"]["tcgen05"] == c["tcgen05"]


def test_targets_toml_counts_the_block_scaled_utc_mma():
    toolchain_or_skip(nvrtc.available())
    b = nvrtc.compile(PRELUDE + header() + "#define TEST_N 64\n#define TEST_BK 128\n" + KERNEL, "sm_100a", {})
    if not b.asm:
        pytest.skip("nvdisasm not installed: no SASS to inspect")
    assert counts(b.asm)["block_scaled_mma"] > 0


def test_header_under_the_cuda_prelude_costs_nothing_when_unused():
    """render.py appends sm_100a.h to every sm_100a kernel; one that never calls umma_* still builds."""
    toolchain_or_skip(nvrtc.available())
    cuda_h = (mapping_dir() / "prelude" / "cuda.h").read_text()
    src = cuda_h + header() + 'extern "C" __global__ void k(float* x) { x[threadIdx.x] *= 2.f; }\n'
    b = nvrtc.compile(src, "sm_100a", {})
    assert not re.search(r"\bUTC", b.asm)


@pytest.mark.parametrize("target", ["sm_90a", "sm_120a"])
def test_header_included_on_other_targets_still_compiles(target):
    """sm_100a-only, but all templates: wrongly included elsewhere and unused, it emits nothing."""
    toolchain_or_skip(nvrtc.available())
    src = PRELUDE + header() + 'extern "C" __global__ void k(float* x) { x[threadIdx.x] += 1.f; }\n'
    nvrtc.compile(src, target, {})
