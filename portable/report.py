"""Static report of a compiled kernel: registers, spills, shared/LDS, occupancy, instruction classes."""
from __future__ import annotations

import math
import re

from .backends import clang_amdgpu, nvrtc
from .errors import PortableError
from .targets import get_target, instruction_classes


def _amd_kernels(asm: str) -> dict[str, dict]:
    """Per-kernel numbers from the AMDGPU metadata block of `clang -S` output."""
    section = asm.split("amdhsa.kernels:", 1)[-1].split("amdhsa.target:", 1)[0]
    kernels = {}
    for entry in re.split(r"^  - ", section, flags=re.M)[1:]:
        fields = dict(re.findall(r"^\s*\.(\w+):\s+(\S+)\s*$", entry, flags=re.M))
        if "name" not in fields:
            continue
        vgpr, agpr = int(fields.get("vgpr_count", 0)), int(fields.get("agpr_count", 0))
        kernels[fields["name"]] = {
            "vgprs": vgpr, "agprs": agpr, "sgprs": int(fields.get("sgpr_count", 0)),
            # gfx90a+: AGPRs follow the arch VGPRs (4-aligned) in one unified file
            "vgprs_total": (-(-vgpr // 4) * 4 + agpr) if agpr else vgpr,
            "scratch_bytes": int(fields.get("private_segment_fixed_size", 0)),
            "spills": int(fields.get("vgpr_spill_count", 0)) + int(fields.get("sgpr_spill_count", 0)),
            "smem_bytes": int(fields.get("group_segment_fixed_size", 0)),
        }
    return kernels


def occupancy_nvidia(target, regs: int, smem: int, block: int) -> float:
    warps = math.ceil(block / target.wave)
    regs_per_warp = math.ceil(max(regs, 1) * target.wave / target.reg_alloc_unit) * target.reg_alloc_unit
    by_regs = (target.regs_per_sm // regs_per_warp) // warps
    by_threads = target.max_threads_per_sm // (warps * target.wave)
    # smem: cuobjdump's SHARED (+ dynamic), which already holds the bytes the system reserves
    # a block (a kernel declaring 4096 bytes reports 5120 on sm_90a/sm_100a/sm_120a)
    by_smem = target.smem_per_sm // max(smem, target.smem_reserved_per_block) if smem else target.max_blocks_per_sm
    blocks = min(by_regs, by_threads, by_smem, target.max_blocks_per_sm)
    return blocks * warps * target.wave / target.max_threads_per_sm


def occupancy_amd(target, vgprs: int, smem: int, block: int) -> float:
    waves_per_group = math.ceil(block / target.wave)
    alloc = math.ceil(max(vgprs, 1) / target.vgpr_alloc_unit) * target.vgpr_alloc_unit
    waves_per_simd = min(target.max_waves_per_simd, target.vgprs_per_simd_lane // alloc)
    groups = (waves_per_simd * target.simds_per_cu) // waves_per_group
    if smem:
        groups = min(groups, target.smem_per_sm // smem)
    return min(1.0, groups * waves_per_group / (target.simds_per_cu * target.max_waves_per_simd))


# the matrix-instruction classes (targets.toml [instruction_classes]) a report's matrix column names
MATRIX_CLASSES = ("hmma", "fp8_mma", "hgmma", "tcgen05", "block_scaled_mma", "mfma", "mfma_scale")


def _instruction_counts(binary, kernel: str, vendor: str) -> dict[str, int]:
    """Instruction classes in `kernel`'s own code: the module's other kernels would count too."""
    try:
        asm = (nvrtc.kernel_sass if vendor == "nvidia" else clang_amdgpu.kernel_asm)(binary.asm, kernel)
    except ValueError:
        raise PortableError(f"static report: kernel {kernel!r} not found in the {binary.target} assembly") from None
    return {name: len(re.findall(pattern, asm)) for name, pattern in instruction_classes(vendor).items()}


def static_report(binary, kernel: str, block: int, dynamic_smem: int = 0) -> dict:
    """One row: the numbers a kernel engineer reads before a profile."""
    target = get_target(binary.target)
    res = (binary.meta.get("kernels", {}) if target.vendor == "nvidia" else _amd_kernels(binary.asm)).get(kernel)
    if not res:
        raise PortableError(f"static report: kernel {kernel!r} not found in the {binary.target} binary")
    if target.vendor == "nvidia":
        regs, smem = res.get("registers", 0), res.get("smem_bytes", 0) + dynamic_smem
        # spills unknown (None) when the compile log had no ptxas lines: local memory still shows them
        row = {"registers": regs, "sgprs": None, "spill_bytes": res.get("spill_bytes"),
               "stack_bytes": res.get("stack_bytes", 0) + res.get("local_bytes", 0), "smem_bytes": smem,
               "occupancy": occupancy_nvidia(target, regs, smem, block)}
    else:
        smem = res.get("smem_bytes", 0) + dynamic_smem
        row = {"registers": res.get("vgprs_total", 0), "sgprs": res.get("sgprs"),
               "spill_bytes": res.get("spills", 0), "stack_bytes": res.get("scratch_bytes", 0), "smem_bytes": smem,
               "occupancy": occupancy_amd(target, res.get("vgprs_total", 0), smem, block)}
    row["occupancy"] = round(row["occupancy"], 3)
    row["instructions"] = _instruction_counts(binary, kernel, target.vendor) if binary.asm else {}
    return {"target": target.name, "kernel": kernel, "compiler": binary.compiler, "bytes": len(binary.code), **row}
