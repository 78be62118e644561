"""Generate the machine-derived rows of the CUDA<->HIP table (mapping/cuda_hip/generated_*.csv).

Every row comes from a machine-readable source of a pinned package version and is kept only
when both spellings are found in a header or binding of a pinned package:

- host APIs: AMD's CUDA->HIP aliases in hip-python-interop (cuda/bindings/runtime.pyx,
  driver.pyx, nvrtc.pyx: `cudaMemcpyAsync = hip.hipMemcpyAsync`, enum members, struct
  classes; cuFile's in cycufile.pxd);
- libraries: the HIP names declared by the rocm-bindings (hipBLAS, hipBLASLt, hipRAND, hipFFT,
  hipSPARSE, hipSOLVER, hipDNN backend, hipFile, roctx, RCCL), with the CUDA name by the
  libraries' documented prefix rule (hipblasSgemm -> cublasSgemm, HIPFFT_C2C -> CUFFT_C2C,
  roctxMarkA -> nvtxMarkA; RCCL keeps NCCL's names);
- device functions and cooperative groups: the names both vendors' device headers declare
  with the same spelling (HIP: the triton wheel's hip/amd_detail/*.h and hiprtc_runtime.h from
  rocm-llvm-python; CUDA: the nvidia-cuda-crt / nvidia-cuda-runtime headers);
- CUB: the primitives CUB's headers declare, spelt hipcub:: by hipCUB's namespace rule. No
  hipCUB header is on the package index, so these rows say they are unchecked on the HIP side.

CUDA names are checked against the NVIDIA wheels' headers; HIP names against the triton wheel's
HIP headers, hiprtc_runtime.h, or the rocm-bindings .pxd declarations. A CUDA name that a
hand-written row of mapping/cuda_hip/ already answers (the whole cell, or the first name of the
cell or of one of its ' / ' alternatives) is not generated: the hand-written row, with its
notes and per-target availability, wins.

    python mapping/generate/cuda_hip.py [--cache DIR] [--out DIR] [--check]

--cache keeps the downloaded wheels (default: a temporary folder); --out is where the CSVs go
(default: mapping/cuda_hip beside this script); --check writes nothing and exits 1 when the
committed files differ from what the sources give.
"""
from __future__ import annotations

import argparse
import csv
import io
import re
import subprocess
import sys
import tempfile
import zipfile
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
TABLE_DIR = HERE.parent / "cuda_hip"
PREFIX = "generated_"

TARGETS = ("sm_90a", "sm_100a", "sm_120a", "gfx942", "gfx950")
COLUMNS = ("key", "category", "cuda", "hip", "cuda_expr", "hip_expr", *TARGETS, "note", "source")

# Every source, pinned. The NVIDIA wheels are CUDA 13.0's (cuda-toolkit 13.0.3's pins, the
# NVRTC CI tests against); triton and rocm-llvm-python are the versions the AMD offline path uses.
PINS = {
    "hip-python-interop": "10.0.0.0.1.2",
    "rocm-bindings-hip": "10.0.0.0.1.2",
    "rocm-bindings-libraries": "10.0.0.0.1.2",
    "rocm-bindings-systems": "10.0.0.0.1.2",
    "triton": "3.9.0",
    "rocm-llvm-python": "7.2.2.562.46",
    "nvidia-cuda-runtime": "13.0.96",
    "nvidia-cuda-crt": "13.0.88",
    "nvidia-cuda-nvrtc": "13.0.88",
    "nvidia-cuda-cccl": "13.0.85",
    "nvidia-cublas": "13.1.1.3",
    "nvidia-curand": "10.4.0.35",
    "nvidia-cufft": "12.0.0.61",
    "nvidia-cusparse": "12.6.3.3",
    "nvidia-cusolver": "12.0.4.66",
    "nvidia-cufile": "1.15.1.6",
    "nvidia-nvtx": "13.1.68",
    "nvidia-nccl-cu13": "2.27.7",
    "nvidia-cudnn-cu13": "9.13.0.50",
}

YES = ("yes",) * len(TARGETS)


# ---------------------------------------------------------------- fetching and reading wheels

def fetch(cache: Path) -> dict[str, Path]:
    """The pinned wheels in `cache`, downloaded (pip download --no-deps) when not there yet."""
    cache.mkdir(parents=True, exist_ok=True)

    def present(name, version):
        return sorted(cache.glob(f"{name.replace('-', '_')}-{version}-*.whl"))

    missing = [f"{name}=={version}" for name, version in PINS.items() if not present(name, version)]
    if missing:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q",
               "--disable-pip-version-check", "-d", str(cache), *missing]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"pip download failed for {' '.join(missing)}:\n{done.stderr[-2000:]}")
    wheels = {}
    for name, version in PINS.items():
        found = present(name, version)
        if not found:
            raise RuntimeError(f"pip download gave no wheel for {name}=={version} in {cache}")
        wheels[name] = found[0]
    return wheels


class Wheel:
    """The text files of one pinned wheel."""

    def __init__(self, name: str, path: Path):
        self.name, self.version, self.zip = name, PINS[name], zipfile.ZipFile(path)
        self.label = f"{name} {self.version}"

    def files(self, pattern: str) -> dict[str, str]:
        """Member path -> text for the members whose path matches `pattern` (a regex)."""
        rx = re.compile(pattern)
        return {m: self.zip.read(m).decode("utf-8", "replace")
                for m in sorted(self.zip.namelist()) if rx.search(m)}


# ---------------------------------------------------------------- C and Cython text

_C_NOISE = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])\'', re.S)
_PY_NOISE = re.compile(r'#[^\n]*|"""(?:.|\n)*?"""|"(?:\\.|[^"\\\n])*"')
_IDENT = re.compile(r"[A-Za-z_]\w*")


def c_code(text: str) -> str:
    """C/C++ text without comments, string and character literals (line breaks kept)."""
    return _C_NOISE.sub(lambda m: "\n" * m.group(0).count("\n") or " ", text)


def c_code_no_pp(text: str) -> str:
    """c_code() without preprocessor lines (continuations included)."""
    out = []
    cont = False
    for line in c_code(text).split("\n"):
        directive = cont or line.lstrip().startswith("#")
        cont = directive and line.rstrip().endswith("\\")
        out.append("" if directive else line)
    return "\n".join(out)


class Evidence:
    """Where names are declared: identifier -> 'file (package version)' of the first file (top
    folder first, then path order) that declares it (typedef, tag, function, macro, enum
    member), else of the first whose code names it. `parts`: (wheel, member-path regex) pairs."""

    def __init__(self, *parts: tuple["Wheel", str], python: bool = False):
        self.where: dict[str, str] = {}
        self.code: dict[str, str] = {}           # 'file (package version)' -> comment-free text
        mentioned: dict[str, str] = {}
        for wheel, pattern in parts:
            files = wheel.files(pattern)
            for path in sorted(files, key=lambda p: (p.count("/"), p)):
                code = _PY_NOISE.sub(" ", files[path]) if python else c_code(files[path])
                where = f"{short_path(path)} ({wheel.label})"
                self.code[where] = code
                for name in set(_IDENT.findall(code)):
                    mentioned.setdefault(name, where)
                if not python:
                    types, funcs = c_kinds([code])
                    for name in types | funcs | c_constants(code):
                        self.where.setdefault(name, where)
        for name, where in mentioned.items():
            self.where.setdefault(name, where)

    def find(self, name: str) -> str | None:
        return self.where.get(name.split("::")[-1])


def short_path(path: str) -> str:
    """A wheel member's path from its include folder on (cuda_runtime_api.h, hip/hip_runtime_api.h)."""
    return path.split("/include/", 1)[-1] if "/include/" in path else path


def first_of(name: str, *evidence: Evidence) -> str | None:
    for ev in evidence:
        hit = ev.find(name)
        if hit:
            return hit
    return None


# ---------------------------------------------------------------- declarations by scope

_TOKEN = re.compile(r"[A-Za-z_]\w*|::|[{}();<>*&,=:\[\]]")
_KEYWORDS = {
    "if", "else", "for", "while", "do", "switch", "case", "return", "sizeof", "alignof", "decltype",
    "static_assert", "alignas", "noexcept", "throw", "new", "delete", "operator", "template", "typename",
    "using", "typedef", "defined", "static_cast", "reinterpret_cast", "const_cast", "dynamic_cast",
    "__attribute__", "__declspec", "__align__", "__launch_bounds__", "asm", "__asm__", "__asm", "volatile",
    "const", "static", "inline", "extern", "constexpr", "explicit", "virtual", "friend", "public", "private",
    "protected", "struct", "class", "union", "enum", "namespace", "goto", "break", "continue", "default",
    "__forceinline__", "__noinline__", "__host__", "__device__", "__global__", "void", "int", "float",
    "double", "char", "bool", "long", "short", "unsigned", "signed", "auto", "main", "__builtin_expect",
}


def declarations(text: str, namespace: str = "", transparent: tuple = ()) -> tuple[set[str], set[str]]:
    """(functions, types) declared or defined in `text` at the scope of `namespace` ('' for the
    global scope; 'extern "C"' blocks and the `transparent` namespaces count as the scope around
    them). Functions declared in a class at that scope come as 'Class::name', and so do
    out-of-class definitions 'Class::name(...)'."""
    toks = _TOKEN.findall(c_code_no_pp(text))
    want = [n for n in namespace.split("::") if n]
    stack: list[tuple[str, str]] = []        # (kind, name): ns | class | block | extern
    funcs, types = set(), set()
    pending_class = pending_ns = None
    parens = stmt = 0
    for i, t in enumerate(toks):
        prev = toks[i - 1] if i else ""
        if t == "(":
            parens += 1
        elif t == ")":
            parens = max(0, parens - 1)
        if t == "{":
            stmt = i + 1
            if pending_ns is not None:
                stack.append(("ns", pending_ns) if pending_ns not in transparent else ("extern", ""))
            elif pending_class is not None:
                stack.append(("class", pending_class))
            elif prev == "extern":
                stack.append(("extern", ""))
            else:
                stack.append(("block", ""))
            pending_class = pending_ns = None
            continue
        if t == "}":
            stmt = i + 1
            if stack:
                stack.pop()
            pending_class = pending_ns = None
            continue
        if t in (";", "(", ")", "="):
            pending_class = None
        if t in (";", "{", "}"):
            stmt = i + 1
        if prev == "namespace" and _IDENT.fullmatch(t):
            pending_ns = t
            continue
        if prev in ("class", "struct", "union") and _IDENT.fullmatch(t) and toks[i - 2:i - 1] != ["friend"]:
            pending_class = t
            if _scope(stack) == want and i + 1 < len(toks) and toks[i + 1] in ("{", ":", "final"):
                types.add(t)
            continue
        if t != "(" or parens != 1 or i < 2:
            continue
        name = toks[i - 1]
        if not _IDENT.fullmatch(name) or name in _KEYWORDS:
            continue
        before = toks[i - 2]
        scope = _scope(stack)
        if "friend" in toks[stmt:i]:
            continue
        if before == "::" and i >= 4 and scope == want:          # Class::method( out of the class
            owner, ret = toks[i - 3], toks[i - 4]
            if _IDENT.fullmatch(owner) and (_IDENT.fullmatch(ret) or ret in ("*", "&", ">")) \
                    and ret not in ("return",):
                funcs.add(f"{owner}::{name}")
            continue
        if not (_IDENT.fullmatch(before) and before not in ("return", "else", "case", "new", "delete", "goto")
                or before in ("*", "&", ">")):
            continue
        if scope == want:
            funcs.add(name)
        elif scope[:-1] == want and stack and stack[-1][0] == "class" and name != stack[-1][1]:
            funcs.add(f"{stack[-1][1]}::{name}")
    return funcs, types


def _scope(stack) -> list[str]:
    """The namespace path of the innermost scope; a class or block scope shows as its name
    ('{class}' / '{block}') so that it never equals a namespace path."""
    out = []
    for kind, name in stack:
        if kind == "ns":
            out.append(name)
        elif kind == "class":
            out.append("{class}" + name)
        elif kind == "block":
            out.append("{block}")
    if stack and stack[-1][0] == "class":
        out[-1] = "{class}"
    return out


# ---------------------------------------------------------------- the hand-written rows

_CELL_NAME = re.compile(r"[%A-Za-z_][A-Za-z0-9_]*(?:(?:\.|::)[A-Za-z0-9_]+)*")


def hand_written(table_dir: Path) -> dict[str, str]:
    """CUDA name -> 'file:line' of the hand-written row that answers it."""
    covered = {}
    for path in sorted(table_dir.glob("*.csv")):
        if path.name.startswith(PREFIX):
            continue
        with open(path, newline="") as f:
            for line, row in enumerate(csv.DictReader(f), start=2):
                cell = row["cuda"].strip()
                names = {cell}
                for part in cell.split(" / "):
                    m = _CELL_NAME.search(part)
                    if m:
                        names.add(m.group(0))
                for n in names:
                    covered.setdefault(n, f"{path.name}:{line}")
    return covered


# Template rows (kernel.csv) whose CUDA cell is a plain function name but whose answer is
# about one use of it: a generated row for the function itself goes first (generated_*.csv
# sorts before kernel.csv), so `portable ref NAME` answers the function before the use.
NARROWER_TEMPLATE_ROWS = {
    "__popc": "the same 32-bit population count on both (int __popc(unsigned int)); the warp.popc_mask "
              "row is for counting a ballot mask, which is 64 bits on HIP (__popcll)",
    "__ffs": "the same 32-bit find-first-set on both (int __ffs(int)); the warp.ffs_mask row is for "
             "a ballot mask, which is 64 bits on HIP (__ffsll)",
}

_WARP_MASK = re.compile(r"^__(shfl|ballot|any|all|match_any|match_all|reduce_\w+|activemask|syncwarp|lanemask)")
WARP_NOTE = ("HIP's warp functions work on a 64-lane wavefront on gfx942/gfx950: lane masks are 64-bit "
             "(unsigned long long) and width defaults to warpSize = 64")


# ---------------------------------------------------------------- rows

class Rows:
    def __init__(self, covered: dict[str, str]):
        self.covered = covered
        self.by_category: dict[str, dict[str, dict]] = {}
        self.dropped: Counter = Counter()
        self.dropped_names: dict[str, list] = {}
        self.skipped_hand_written: Counter = Counter()

    def add(self, category: str, cuda: str, hip: str, source: str, note: str = "",
            cuda_hit: str | None = "", hip_hit: str | None = "", unchecked_hip: bool = False,
            availability: tuple = YES) -> None:
        if cuda_hit is None or (hip_hit is None and not unchecked_hip):
            why = ("CUDA name not in a pinned CUDA header" if cuda_hit is None
                   else "HIP name not in a pinned HIP header or binding")
            self.dropped[(category, why)] += 1
            self.dropped_names.setdefault(f"{category}: {why}", []).append(f"{cuda} -> {hip}")
            return
        if cuda in self.covered and cuda.split("::")[-1] not in NARROWER_TEMPLATE_ROWS:
            self.skipped_hand_written[category] += 1
            return
        if any(cuda in rows for rows in self.by_category.values()):
            return                                   # first source wins (e.g. cuBLASLt vs cuBLAS)
        note = note or NARROWER_TEMPLATE_ROWS.get(cuda, "")
        checked = "; ".join(x for x in (cuda_hit and f"CUDA: {cuda_hit}", hip_hit and f"HIP: {hip_hit}") if x)
        src = f"generated: {source}" + (f"; checked: {checked}" if checked else "")
        self.by_category.setdefault(category, {})[cuda] = dict(
            zip(COLUMNS, ("", category, cuda, hip, "", "", *availability, note, src)))

    def files(self) -> dict[str, str]:
        """file name -> CSV text, one file a category, rows sorted by CUDA name."""
        out = {}
        for category, rows in sorted(self.by_category.items()):
            buf = io.StringIO()
            w = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
            w.writeheader()
            for cuda in sorted(rows, key=lambda n: (n.lower(), n)):
                w.writerow(rows[cuda])
            out[f"{PREFIX}{re.sub(r'[^a-z0-9]+', '_', category.lower()).strip('_')}.csv"] = buf.getvalue()
        return out


# ---------------------------------------------------------------- host APIs: hip-python-interop

_TOP_ALIAS = re.compile(r"^(\w+) = (?:hip|hiprtc)\.(\w+)\s*$", re.M)
_ENUM_CLASS = re.compile(r"^class (\w+)\((?:hip|hiprtc)\._(\w+)__Base,metaclass=", re.M)
_STRUCT_CLASS = re.compile(r"^cdef class (\w+)\((?:hip|hiprtc)\.(\w+)\):", re.M)
_MEMBER = re.compile(r"^    (\w+) = cy(?:hip|hiprtc)\.(\w+)\s*$", re.M)
_CIMPORT_AS = re.compile(r"\b(hip\w+|HIP\w+|ihip\w+)\s+as\s+(\w+)")


def interop_aliases(wheel: Wheel) -> dict[str, tuple[str, str, str]]:
    """CUDA name -> (HIP name, kind, the .pyx files that alias it); kind: function-or-constant,
    enum-type, struct or enum-member."""
    out: dict[str, list] = {}
    for path, text in wheel.files(r"^cuda/bindings/(runtime|driver|nvrtc)\.pyx$").items():
        short = path.split("/")[-1]
        found = [(c, h, "alias") for c, h in _TOP_ALIAS.findall(text)]
        found += [(c, h, "type") for c, h in _ENUM_CLASS.findall(text)]
        found += [(c, h, "type") for c, h in _STRUCT_CLASS.findall(text)]
        found += [(c, h, "member") for c, h in _MEMBER.findall(text) if c != h]
        for cuda, hip, kind in found:
            if cuda.startswith("_") or hip.startswith("_"):
                continue
            entry = out.setdefault(cuda, [hip, kind, []])
            if short not in entry[2]:
                entry[2].append(short)
    return {c: (h, k, ", ".join(files)) for c, (h, k, files) in out.items()}


def cufile_aliases(wheel: Wheel) -> dict[str, str]:
    text = _PY_NOISE.sub(" ", wheel.files(r"^cuda/bindings/cycufile\.pxd$")["cuda/bindings/cycufile.pxd"])
    return {cuda: hip for hip, cuda in _CIMPORT_AS.findall(text)}


def c_constants(code: str) -> set[str]:
    """Macro names and enum members that comment-free C `code` defines."""
    out = set(re.findall(r"^[ \t]*#[ \t]*define[ \t]+(\w+)", code, re.M))
    for body in re.findall(r"\benum\b[^{;()]*\{([^{}]*)\}", code):
        out.update(re.findall(r"(?:^|,)\s*([A-Za-z_]\w*)", body))
    return out


def c_kinds(codes) -> tuple[set[str], set[str]]:
    """(types, functions) that comment-free C `codes` declare: typedef names, struct/enum/union
    tags and `} name;` closers; names declared as `type name(`."""
    types, funcs = set(), set()
    for code in codes:
        types.update(re.findall(r"\btypedef\b[^;{}]*?\b(\w+)\s*(?:\[[^\]]*\]\s*)?;", code))
        types.update(re.findall(r"\b(?:struct|enum|union)\s+(\w+)", code))
        types.update(re.findall(r"\}\s*(\w+)\s*;", code))
        types.update(re.findall(r"\(\s*(?:\w+\s+)?\*\s*(\w+)\s*\)\s*\(", code))
        funcs.update(re.findall(r"[\w*]\s+(\w+)\s*\(", code))
    # cuda.h declares cuMemAlloc(...) under `#define cuMemAlloc cuMemAlloc_v2`: the versioned
    # name is the function the linker sees
    for code in codes:
        for name, target in re.findall(r"^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+(\w+)[ \t]*$", code, re.M):
            if name in funcs:
                funcs.add(target)
    return types, funcs


def host_rows(rows: Rows, interop: Wheel, cuda_ev: Evidence, hip_headers: Evidence,
              hip_bindings: Evidence) -> None:
    types, funcs = c_kinds(cuda_ev.code.values())
    for cuda, (hip, kind, files) in sorted(interop_aliases(interop).items()):
        cuda_hit = cuda_ev.find(cuda)
        hip_hit = first_of(hip, hip_headers, hip_bindings)
        if kind == "member":
            category = "enums"
        elif kind == "type" or cuda in types:
            category = "types"
        elif cuda in funcs:
            category = ("runtime compilation" if cuda.startswith("nvrtc") or files == "nvrtc.pyx"
                        else "runtime" if cuda.startswith("cuda") else "driver")
        else:
            category = "enums"
        note = WARP_NOTE if _WARP_MASK.match(cuda) else ""
        rows.add(category, cuda, hip, f"{interop.label}, cuda/bindings/{files.replace(', ', ', cuda/bindings/')}",
                 note, cuda_hit, hip_hit)


# ---------------------------------------------------------------- libraries: prefix rules

# (category, binding .pxd, [(HIP prefix, CUDA prefix)], the CUDA package's header pattern)
LIBRARIES = (
    ("cublaslt", "rocm-bindings-libraries", "rocm/bindings/cyhipblaslt.pxd",
     (("hipblasLt", "cublasLt"), ("HIPBLASLT_", "CUBLASLT_")), "nvidia-cublas"),
    ("cublas", "rocm-bindings-libraries", "rocm/bindings/cyhipblas.pxd",
     (("hipblas", "cublas"), ("HIPBLAS_", "CUBLAS_")), "nvidia-cublas"),
    ("curand", "rocm-bindings-libraries", "rocm/bindings/cyhiprand.pxd",
     (("hiprand", "curand"), ("HIPRAND_", "CURAND_")), "nvidia-curand"),
    ("cufft", "rocm-bindings-libraries", "rocm/bindings/cyhipfft.pxd",
     (("hipfft", "cufft"), ("HIPFFT_", "CUFFT_")), "nvidia-cufft"),
    ("cusparse", "rocm-bindings-libraries", "rocm/bindings/cyhipsparse.pxd",
     (("hipsparse", "cusparse"), ("HIPSPARSE_", "CUSPARSE_")), "nvidia-cusparse"),
    ("cusolver", "rocm-bindings-libraries", "rocm/bindings/cyhipsolver.pxd",
     (("hipsolver", "cusolver"), ("HIPSOLVER_", "CUSOLVER_")), "nvidia-cusolver"),
    ("cudnn", "rocm-bindings-libraries", "rocm/bindings/cyhipdnn_backend.pxd",
     (("hipdnn", "cudnn"), ("HIPDNN_", "CUDNN_")), "nvidia-cudnn-cu13"),
    ("nccl", "rocm-bindings-systems", "rocm/bindings/cyrccl.pxd",
     (("nccl", "nccl"), ("NCCL_", "NCCL_")), "nvidia-nccl-cu13"),
    ("nvtx", "rocm-bindings-systems", "rocm/bindings/cyroctx.pxd",
     (("roctx", "nvtx"),), "nvidia-nvtx"),
)
# cublas.h is the legacy API (cublasSgemm(char transa, ...)); hipBLAS mirrors the v2 API, whose
# names cublas_v2.h maps onto cublas_api.h's *_v2 functions
LIBRARY_HEADERS = {"nvidia-cublas": r"/include/(cublas_api|cublas_v2|cublasLt)\.h$"}
LIBRARY_NOTES = {
    "nccl": "RCCL keeps NCCL's names (rccl.h)",
}


def library_rows(rows: Rows, wheels: dict[str, Wheel], header_ev: dict[str, Evidence]) -> None:
    for category, package, pxd, prefixes, cuda_package in LIBRARIES:
        wheel = wheels[package]
        text = _PY_NOISE.sub(" ", wheel.files(rf"^{re.escape(pxd)}$")[pxd])
        hip_names = sorted({n for n in _IDENT.findall(text) if any(n.startswith(h) for h, _ in prefixes)})
        for hip in hip_names:
            hip_prefix, cuda_prefix = next((h, c) for h, c in prefixes if hip.startswith(h))
            cuda = cuda_prefix + hip[len(hip_prefix):]
            if cuda == cuda_prefix.rstrip("_"):
                continue
            rows.add(category, cuda, hip, f"{wheel.label}, {pxd} (HIP names; CUDA name by the prefix rule "
                     f"{hip_prefix} -> {cuda_prefix})", LIBRARY_NOTES.get(category, ""),
                     header_ev[cuda_package].find(cuda), f"{pxd.rsplit('/', 1)[-1]} ({wheel.label})")


def cufile_rows(rows: Rows, interop: Wheel, cuda_ev: Evidence, hip_ev: Evidence) -> None:
    for cuda, hip in sorted(cufile_aliases(interop).items()):
        rows.add("cufile", cuda, hip, f"{interop.label}, cuda/bindings/cycufile.pxd", "",
                 cuda_ev.find(cuda), hip_ev.find(hip))


# ---------------------------------------------------------------- device functions

CUDA_DEVICE_HEADERS = (r"^nvidia/cu13/include/(crt/(math_functions|device_functions|device_double_functions|"
                       r"sm_\d+_rt)\.h(pp)?|(device_atomic_functions|sm_\d+_atomic_functions|sm_\d+_intrinsics|"
                       r"cuda_fp16|cuda_bf16|texture_indirect_functions|surface_indirect_functions)\.h(pp)?)$")
HIP_DEVICE_HEADERS = (r"^triton/backends/amd/include/hip/amd_detail/(amd_device_functions|amd_math_functions|"
                      r"math_fwd|amd_warp_functions|amd_warp_sync_functions|amd_hip_atomic|"
                      r"amd_hip_unsafe_atomics|hip_fp16_math_fwd|hip_ldg|texture_fetch_functions|"
                      r"texture_indirect_functions|amd_surface_functions)\.h$")
HIP_RTC_HEADER = r"^rocm/amd_comgr/hiprtc_runtime\.h$"
# vendor-internal spellings that both sides happen to share are not porting vocabulary
_INTERNAL = re.compile(r"^(__nv|__ocml|__ockl|__builtin|__hip|__cuda|__CUDA|_[a-z]|__internal|__iAtomic|__uAtomic|__ull|__ll|"
                       r"__f[a-z]*Atomic)")


def declared_names(wheel: Wheel, pattern: str, namespace: str = "", where: dict | None = None,
                   macros: dict | None = None) -> dict[str, str]:
    """name -> 'file (package version)' for the functions and types `namespace` declares in the
    wheel's files matching `pattern` (first file in path order); `macros` are expanded first."""
    where = {} if where is None else where
    for path, text in wheel.files(pattern).items():
        for macro, expansion in (macros or {}).items():
            text = re.sub(rf"\b{macro}\b", expansion, text)
        # CUDA's math functions open `namespace std` under #if (QNX) around C declarations: read
        # the global scope through it
        funcs, types = declarations(text, namespace, transparent=("std",) if not namespace else ())
        for name in sorted(funcs | types):
            where.setdefault(name, f"{short_path(path)} ({wheel.label})")
    return where


def device_rows(rows: Rows, cuda: Wheel, crt: Wheel, triton: Wheel, llvm: Wheel) -> None:
    cuda_where = declared_names(crt, CUDA_DEVICE_HEADERS)
    declared_names(cuda, CUDA_DEVICE_HEADERS, where=cuda_where)
    hip_where = declared_names(triton, HIP_DEVICE_HEADERS)
    declared_names(llvm, HIP_RTC_HEADER, where=hip_where)
    # the warp-synchronous builtins CUDA declares only below sm_70 (sm_30_intrinsics.h marks each
    # with __WSB_DEPRECATION_MESSAGE(name)): none of this project's NVIDIA targets has them
    below_sm70 = {n for text in {**cuda.files(CUDA_DEVICE_HEADERS), **crt.files(CUDA_DEVICE_HEADERS)}.values()
                  for n in re.findall(r"__WSB_DEPRECATION_MESSAGE\((\w+)\)\)", text)}
    for name in sorted(set(cuda_where) & set(hip_where)):
        if "::" in name or _INTERNAL.match(name) or len(name) < 3:
            continue
        note = WARP_NOTE if _WARP_MASK.match(name) else ""
        availability = YES
        if name in below_sm70:
            note = (f"CUDA declares {name}() only below sm_70 (deprecated in favour of {name}_sync()), so not on "
                    f"sm_90a/sm_100a/sm_120a; HIP's {name} shuffles across the 64-lane wavefront")
            availability = ("no", "no", "no", "yes", "yes")
        rows.add("device functions", name, name, "the name both vendors' device headers declare",
                 note, cuda_where[name], hip_where[name], availability=availability)


def cooperative_group_rows(rows: Rows, cuda: Wheel, llvm: Wheel) -> None:
    ns = "cooperative_groups"
    # CUDA opens the namespace through macros (details/info.h): cooperative_groups plus an inline
    # ABI namespace that `using namespace` makes transparent
    cuda_where = declared_names(cuda, r"/include/cooperative_groups(\.h|/[a-z_]+\.h)$", ns,
                                macros={"_CG_BEGIN_NAMESPACE": "namespace cooperative_groups {",
                                        "_CG_END_NAMESPACE": "}"})
    hip_where = declared_names(llvm, HIP_RTC_HEADER, ns)
    for name in sorted(set(cuda_where) & set(hip_where)):
        if any(part.startswith("_") for part in name.split("::")):
            continue
        full = f"{ns}::{name}"
        note = ("HIP's tiles and coalesced groups live on a 64-lane wavefront on gfx942/gfx950: their lane "
                "masks are 64-bit" if re.search(r"coalesced|tile|ballot|match|shfl", name) else "")
        rows.add("cooperative groups", full, full, "the name both vendors' cooperative-groups headers declare",
                 note, cuda_where[name], hip_where[name])


def cub_rows(rows: Rows, cccl: Wheel) -> None:
    files = cccl.files(r"/cub/(block|warp|device)/(block|warp|device)_[a-z_]+\.cuh$")
    for path, text in sorted(files.items()):
        stem = path.rsplit("/", 1)[-1][:-4]
        cls = "".join(p.capitalize() for p in stem.split("_"))
        if not re.search(rf"\b(?:class|struct)\s+(?:CCCL_\w+\s+|_CCCL_\w+\s+)*{cls}\b", c_code(text)):
            continue
        rows.add("cub", f"cub::{cls}", f"hipcub::{cls}",
                 f"{cccl.label}, {short_path(path)} (CUDA); hipCUB spelling by its namespace rule, "
                 f"unchecked: no hipCUB header is on the package index",
                 "hipCUB mirrors CUB under namespace hipcub (<hipcub/hipcub.hpp>); unverified on the HIP side, "
                 "and CUB's tuning parameters (items per thread, algorithms) may differ", 
                 f"{short_path(path)} ({cccl.label})", None, unchecked_hip=True)


# ---------------------------------------------------------------- main

def generate(cache: Path, table_dir: Path = TABLE_DIR) -> tuple[dict[str, str], Rows]:
    w = {name: Wheel(name, path) for name, path in fetch(cache).items()}
    rows = Rows(hand_written(table_dir))
    top = r"/include/[^/]+\.h$"
    cuda_host = Evidence((w["nvidia-cuda-runtime"], top), (w["nvidia-cuda-nvrtc"], top))
    hip_headers = Evidence((w["triton"], r"^triton/backends/amd/include/hip/.*\.h$"))
    hip_bindings = Evidence((w["rocm-bindings-hip"], r"^rocm/bindings/cyhip(rtc)?\.pxd$"), python=True)
    host_rows(rows, w["hip-python-interop"], cuda_host, hip_headers, hip_bindings)
    library_rows(rows, w, {lib[4]: Evidence((w[lib[4]], LIBRARY_HEADERS.get(lib[4], r"/include/.*\.h$")))
                           for lib in LIBRARIES})
    cufile_rows(rows, w["hip-python-interop"], Evidence((w["nvidia-cufile"], r"/include/.*\.h$")),
                Evidence((w["rocm-bindings-systems"], r"^rocm/bindings/cyhipfile\.pxd$"), python=True))
    device_rows(rows, w["nvidia-cuda-runtime"], w["nvidia-cuda-crt"], w["triton"], w["rocm-llvm-python"])
    cooperative_group_rows(rows, w["nvidia-cuda-runtime"], w["rocm-llvm-python"])
    cub_rows(rows, w["nvidia-cuda-cccl"])
    return rows.files(), rows


def summary(files: dict[str, str], rows: Rows) -> str:
    lines = []
    total = checked = 0
    for name, text in files.items():
        n = text.count("\n") - 1
        total += n
        if "unchecked" not in text:
            checked += n
        lines.append(f"{name}: {n} rows")
    lines.append(f"total {total} rows, {checked} checked on both sides")
    for (category, why), n in sorted(rows.dropped.items()):
        lines.append(f"dropped {n} {category}: {why}")
    for category, n in sorted(rows.skipped_hand_written.items()):
        lines.append(f"left to hand-written rows: {n} {category}")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cache", type=Path, help="folder for the downloaded wheels (default: a temporary one)")
    p.add_argument("--out", type=Path, default=TABLE_DIR, help="folder for the CSVs (default: %(default)s)")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 if the files in --out differ")
    p.add_argument("--dropped", action="store_true", help="list the names dropped by the header checks")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        files, rows = generate(args.cache or Path(tmp))
    print(summary(files, rows))
    if args.dropped:
        for why, names in sorted(rows.dropped_names.items()):
            print(f"\n{why}:\n  " + "\n  ".join(names))
    old = {p.name: p.read_text() for p in args.out.glob(f"{PREFIX}*.csv")}
    if args.check:
        stale = sorted(n for n in set(old) | set(files) if old.get(n) != files.get(n))
        if stale:
            print(f"out of date: {', '.join(stale)} (run python mapping/generate/cuda_hip.py)")
            return 1
        return 0
    for name in set(old) - set(files):
        (args.out / name).unlink()
    for name, text in files.items():
        (args.out / name).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
