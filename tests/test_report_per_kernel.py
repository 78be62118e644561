"""Static reports count the named kernel's own instructions, not those of its module's other kernels."""
import dataclasses
import re

import pytest

import portable
from portable.backends import clang_amdgpu, nvrtc
from portable.kernels.mxfp4_moe import ROUTE_THREADS, MXFP4MoE
from portable.report import static_report
from portable.targets import instruction_classes

from conftest import toolchain_or_skip

# matrix classes per target; the label that opens a kernel's code in its assembly text
MMA = {"sm_90a": ("hmma", "hgmma"), "gfx942": ("mfma",)}
LABEL = {"sm_90a": "\n.text.{}:", "gfx942": "\n{}:"}


@pytest.mark.parametrize("target", ["sm_90a", "gfx942"])
def test_mxfp4_moe_rows_count_their_own_kernel(target):
    toolchain_or_skip((nvrtc if target.startswith("sm_") else clang_amdgpu).available())
    moe = MXFP4MoE()
    binary = moe.binary(target)
    if not binary.asm:
        pytest.skip("nvdisasm not installed: no SASS to count")
    gemms = moe.reports(target)
    route = static_report(binary, "moe_route", ROUTE_THREADS)

    def mma(instr):
        return sum(instr[c] for c in MMA[target])

    assert mma(route["instructions"]) == 0, route
    assert all(mma(r["instructions"]) > 0 for r in gemms), gemms
    assert gemms[0]["instructions"] != gemms[1]["instructions"], gemms
    # only the GEMMs hold matrix instructions, so their rows share out the module's, each counted once
    vendor = portable.get_target(target).vendor
    module = {c: len(re.findall(instruction_classes(vendor)[c], binary.asm)) for c in MMA[target]}
    assert sum(mma(r["instructions"]) for r in gemms) == mma(module), (module, gemms)

    # a kernel the metadata names but whose code the assembly lacks: an error, not zero counts
    label = LABEL[target].format("moe_gemm1")
    renamed = dataclasses.replace(binary, asm=binary.asm.replace(label, label.replace("moe_gemm1", "moe_gemmX")))
    with pytest.raises(portable.PortableError, match=f"'moe_gemm1' not found in the {target} assembly"):
        static_report(renamed, "moe_gemm1", moe.block_threads(target))
