"""The loops of a kernel's SASS (CUDA targets, no GPU needed): per loop its instructions, its
global loads, how many of them are predicated, and how far (in instructions, around the loop)
each 128-bit load is issued ahead of the first instruction that waits on its scoreboard. That
distance is ptxas's choice, not the source's, and it predicted mxfp4_moe's measured times
(bench/NOTES.md mxfp4_moe v19: a pointer walk cut the loop by 6% but the distance from ~189 to
~94 and ran 3-4% slower).

    python bench/sass_loops.py mxfp4_moe moe_gemm1 -t tiles=skinny [-p KEY=VALUE ...] [-t KEY=VALUE ...] [--target sm_90a] [--ops]
"""
from __future__ import annotations

import argparse
import collections
import re

import portable
from portable.backends.nvrtc import kernel_sass
from portable.backends.tools import nvidia_tool, run_tool
from portable.cli import parse_params

# one instruction of `nvdisasm -hex`: address, text, then the two 64-bit words
_INSN = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;\s*/\* 0x[0-9a-f]+ \*/\s*\n\s*/\* (0x[0-9a-f]+) \*/")
_LABEL = re.compile(r"\n(\.L_x_\d+):\s*\n\s*/\*([0-9a-f]{4,})\*/")
_BRANCH = re.compile(r"BRA\s+`\((\.L_x_\d+)\)")


def instructions(cubin: bytes, kernel: str) -> tuple[list[dict], dict]:
    """The kernel's instructions with their control bits (sm_70+: the high word's bits 41 and up
    hold stall 0-3, yield 4, write scoreboard 5-7, read scoreboard 8-10, wait mask 11-16), and
    its labels' addresses."""
    body = kernel_sass(run_tool([nvidia_tool("nvdisasm"), "-hex", "-c"], cubin, suffix=".cubin"), kernel)
    out = []
    for m in _INSN.finditer(body):
        ctl = int(m.group(3), 16) >> 41
        out.append({"addr": int(m.group(1), 16), "op": m.group(2).strip(), "wb": (ctl >> 5) & 7, "wait": (ctl >> 11) & 0x3F})
    return out, {m.group(1): int(m.group(2), 16) for m in _LABEL.finditer(body)}


def loops(insns: list[dict], labels: dict) -> list[list[dict]]:
    """Each backward branch's body, from its target label to the branch."""
    at = {x["addr"]: i for i, x in enumerate(insns)}
    out = []
    for i, x in enumerate(insns):
        m = _BRANCH.search(x["op"])
        if m and labels.get(m.group(1), x["addr"] + 1) < x["addr"]:
            out.append(insns[at[labels[m.group(1)]]:i + 1])
    return out


def load_distances(body: list[dict]) -> list[int]:
    """For each 128-bit global load, the instructions until the first one (around the loop) that
    waits on its write scoreboard."""
    n, out = len(body), []
    for k, x in enumerate(body):
        if "LDG" in x["op"] and ".128" in x["op"] and x["wb"] < 6:
            out += [next((j for j in range(1, n + 1) if body[(k + j) % n]["wait"] >> x["wb"] & 1), n)]
    return out


def opcode(op: str) -> str:
    return re.sub(r"^@!?U?P\w+\s+", "", op).split()[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kernel_name")
    ap.add_argument("entry", help="the __global__ function, e.g. moe_gemm1")
    ap.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("-t", "--tuning", action="append", default=[], metavar="KEY=VALUE", help="a tuning knob")
    ap.add_argument("--target", default="sm_90a")
    ap.add_argument("--ops", action="store_true", help="each loop's opcode counts too")
    args = ap.parse_args()
    k = portable.load(args.kernel_name, tuning=parse_params(args.tuning), **parse_params(args.param))
    b = k.binary(args.target)
    insns, labels = instructions(b.code, args.entry)
    print(f"{args.kernel_name} {args.entry} on {args.target}: {len(insns)} instructions, "
          f"{b.meta['kernels'][args.entry]['registers']} registers")
    for body in loops(insns, labels):
        ldg = [x for x in body if "LDG" in x["op"]]
        d = load_distances(body)
        dist = f", 128-bit loads issued {min(d)}-{max(d)} (mean {sum(d) / len(d):.0f}) instructions ahead of their use" if d else ""
        print(f"  loop {body[0]['addr']:#06x}-{body[-1]['addr']:#06x}: {len(body)} instructions, {len(ldg)} global loads "
              f"({sum(x['op'].startswith('@') for x in ldg)} predicated){dist}")
        if args.ops:
            print("    " + ", ".join(f"{op} {n}" for op, n in collections.Counter(map(opcode, (x["op"] for x in body))).most_common(24)))


if __name__ == "__main__":
    main()
