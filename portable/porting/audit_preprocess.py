"""What each target compiles: the #if / #ifdef / #elif / #else / #endif of a source evaluated
per target (host and device pass) against the macros each compiler predefines (`Conditional`)."""
from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from pathlib import Path

from .audit_reading import _and3, _blank, _int_literal, _not3, _or3, evaluate, int_value
from ..targets import Target


# ---------------------------------------------------------------- what each target compiles

# The macros each compiler defines (checked: clang 22 -x hip -dM -E for gfx942 defines __HIP__,
# __HIPCC__, __HIP_DEVICE_COMPILE__, __AMDGCN__, __gfx942__ and none of __CUDA_ARCH__,
# __CUDACC__, __CUDACC_VER_MAJOR__). HIP's headers add __HIP_PLATFORM_AMD__, and a PyTorch
# extension built for ROCm gets USE_ROCM. Names in neither list are unknown: both branches of
# a test on them stay live.
_UNDEF = object()
_NVCC_MACROS = {"__CUDACC__": 1, "__NVCC__": 1, "__CUDACC_VER_MAJOR__": 13, "__CUDACC_VER_MINOR__": 0,
                "__HIP__": _UNDEF, "__HIPCC__": _UNDEF, "__HIP_PLATFORM_AMD__": _UNDEF, "__HIP_PLATFORM_HCC__": _UNDEF,
                "__HIP_DEVICE_COMPILE__": _UNDEF, "USE_ROCM": _UNDEF, "__AMDGCN__": _UNDEF, "__HIPCC_RTC__": _UNDEF}
_HIPCC_MACROS = {"__HIP__": 1, "__HIPCC__": 1, "__HIP_PLATFORM_AMD__": 1, "USE_ROCM": 1,
                 "__CUDA_ARCH__": _UNDEF, "__CUDACC__": _UNDEF, "__NVCC__": _UNDEF, "__CUDACC_VER_MAJOR__": _UNDEF,
                 "__CUDACC_VER_MINOR__": _UNDEF, "__CUDACC_RTC__": _UNDEF, "__HIP_PLATFORM_NVIDIA__": _UNDEF,
                 "__HIP_PLATFORM_NVCC__": _UNDEF}
# a condition that names the AMD side: its author already chose what AMD compiles
_NAMES_AMD = re.compile(r"HIP|ROCM|ROCm|AMD|amdgcn|AMDGCN|__gfx\d")
# the body of a branch that only stops the program or says "not here"
_STUB_STATEMENT = re.compile(
    r"\b\w*(?:assert|ASSERT|trap|brkpt|NOT_IMPLEMENTED|UNREACHABLE|unreachable|abort|printf|throw|THROW|fail|FAIL)\w*\b"
    r"(?:\s*\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\))?\s*;?|\breturn\s*(?:\{\s*\}|0|nullptr|false)?\s*;")


def _macro_env(target: Target, device: bool) -> dict:
    if target.vendor == "amd":
        env = dict(_HIPCC_MACROS)
        if device:
            env.update({"__HIP_DEVICE_COMPILE__": 1, "__AMDGCN__": 1, f"__{target.name}__": 1,
                        "__AMDGCN_WAVEFRONT_SIZE__": target.wave, "__AMDGCN_WAVEFRONT_SIZE": target.wave})
        else:
            env["__HIP_DEVICE_COMPILE__"] = _UNDEF
        return env
    env = dict(_NVCC_MACROS)
    arch = re.match(r"sm_(\d+)", target.name)
    env["__CUDA_ARCH__"] = int(arch.group(1)) * 10 if device and arch else _UNDEF
    if device and arch and target.name.endswith("a"):
        env[f"__CUDA_ARCH_FEAT_SM{arch.group(1)}_ALL"] = 1
    return env


def _condition(expr: str, env: dict):
    """A #if expression under `env`: True, False, or None when it rests on an unknown name."""
    expr = re.sub(r"\bdefined\s*\(\s*(\w+)\s*\)|\bdefined\s+(\w+)", lambda m: f"__defined__{m.group(1) or m.group(2)}", expr)
    expr = re.sub(r"\b(0[xX][0-9a-fA-F]+|\d+)[uUlL]*\b", lambda m: str(_int_literal(m.group(1))), expr)
    expr = expr.replace("&&", " and ").replace("||", " or ")
    expr = re.sub(r"!(?!=)", " not ", expr)
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except SyntaxError:
        return None

    def name(identifier: str):
        if identifier.startswith("__defined__"):
            v = env.get(identifier[len("__defined__"):])
            return None if v is None else int(v is not _UNDEF)
        if identifier in ("true", "false"):
            return int(identifier == "true")
        v = env.get(identifier)
        return 0 if v is _UNDEF else v
    v = int_value(tree.body, name)
    return None if v is None else bool(v)


def _included_macros(path: Path | None, code_str: str, targets: list[Target], seen: frozenset = frozenset()) -> dict:
    if path is None or len(seen) > 2:
        return {}
    out: dict = {}
    for name in re.findall(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', code_str, re.M):
        header = (path.parent / name)
        if header in seen or not header.is_file():
            continue
        try:
            envs = _header_envs(header.resolve(), tuple(targets), seen)
        except (OSError, RecursionError):
            continue
        for w, env in envs.items():
            out.setdefault(w, {}).update(env)
    return out


@functools.lru_cache(maxsize=256)
def _header_envs(header: Path, targets: tuple, seen: frozenset) -> dict:
    cond = Conditional.of_file(header, list(targets), seen)
    own = set(re.findall(r"^[ \t]*#[ \t]*define[ \t]+(\w+)", cond.code, re.M))
    return {w: {k: v for k, v in env.items() if k in own} for w, env in cond.envs.items()}


@dataclass
class _Branch:
    line: int                 # the directive's line
    cond: str                 # its condition text ('' for #else)
    first: int                # first and last line of its body
    last: int = 0
    live: dict = None         # (target name, device) -> True / False / None
    parent: dict = None       # the same for the lines around the group


class Conditional:
    """Which lines each target compiles, from the #if / #ifdef / #elif / #else / #endif of one
    source evaluated per target, for the host pass and the device pass, with the macros the
    file itself defines. A line is dead for a target only when every pass surely skips it."""

    def __init__(self, code: str, targets: list[Target], seed: dict | None = None):
        self.worlds = [(t, device) for t in targets for device in (False, True)]
        self.envs = {(t.name, d): _macro_env(t, d) for t, d in self.worlds}
        for w, env in (seed or {}).items():         # what the file's own headers defined
            if w in self.envs:
                self.envs[w].update(env)
        # a macro this file defines is its own: undefined until the file defines it
        for name in set(re.findall(r"^[ \t]*#[ \t]*define[ \t]+(\w+)", code, re.M)):
            for env in self.envs.values():
                env.setdefault(name, _UNDEF)
        self.code = code
        lines = code.split("\n")
        self.dead: dict[int, frozenset] = {}      # line -> names of the targets that never compile it
        self.groups: list[list[_Branch]] = []
        stack: list[dict] = []                      # per open #if: parent, taken, current per world, branches
        current = {(t.name, d): True for t, d in self.worlds}
        directives = [(i, ln) for i, ln in enumerate(lines, start=1) if ln.lstrip().startswith("#")]
        guard = self._include_guard(directives)
        i = 0
        while i < len(lines):
            number, text = i + 1, lines[i]
            full = text
            while full.rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                full = full.rstrip()[:-1] + " " + lines[i]
            m = re.match(r"\s*#\s*(\w+)\s*(.*)", full)
            dead_here = frozenset(n for n in {t.name for t, _ in self.worlds}
                                  if all(current[(n, d)] is False for d in (False, True)))
            if m:
                word, rest = m.group(1), m.group(2).strip()
                if word in ("if", "ifdef", "ifndef"):
                    cond = rest if word == "if" else (f"defined({rest.split()[0]})" if word == "ifdef" else f"!defined({rest.split()[0]})") if rest else "0"
                    values = {}
                    for w, env in self.envs.items():
                        values[w] = True if number == guard else _condition(cond, env)
                    branch = _Branch(number, cond, number + 1, live={w: _and3(current[w], values[w]) for w in values},
                                     parent=dict(current))
                    stack.append({"parent": dict(current), "taken": values, "branches": [branch]})
                    current = dict(branch.live)
                elif word in ("elif", "else") and stack:
                    top = stack[-1]
                    top["branches"][-1].last = number - 1
                    cond = rest if word == "elif" else ""
                    live = {}
                    for w, env in self.envs.items():
                        c = _condition(cond, env) if word == "elif" else True
                        live[w] = _and3(_and3(top["parent"][w], _not3(top["taken"][w])), c)
                        top["taken"][w] = _or3(top["taken"][w], c)
                    top["branches"].append(_Branch(number, cond, number + 1, live=live, parent=top["parent"]))
                    current = live
                elif word == "endif" and stack:
                    top = stack.pop()
                    top["branches"][-1].last = number - 1
                    self.groups.append(top["branches"])
                    current = top["parent"]
                elif word in ("define", "undef"):
                    name_m = re.match(r"(\w+)(\()?\s*(.*)", rest)
                    if name_m:
                        name = name_m.group(1)
                        for w, env in self.envs.items():
                            if current[w] is False:
                                continue
                            if current[w] is None:
                                env.pop(name, None)              # maybe defined: unknown from here on
                            elif word == "undef":
                                env[name] = _UNDEF
                            else:
                                v = None if name_m.group(2) else evaluate(name_m.group(3) or "1")
                                env[name] = v if v is not None else "defined"
            for k in range(number, i + 2):
                if dead_here:
                    self.dead[k] = dead_here
            i += 1

    @staticmethod
    def _include_guard(directives) -> int:
        """The line of an include guard's #ifndef X (followed by #define X), which is taken."""
        if len(directives) >= 2:
            (n1, a), (_, b) = directives[0], directives[1]
            m1 = re.match(r"\s*#\s*ifndef\s+(\w+)", a)
            m2 = re.match(r"\s*#\s*define\s+(\w+)", b)
            if m1 and m2 and m1.group(1) == m2.group(1):
                return n1
        return 0

    @classmethod
    def of_file(cls, path: Path, targets: list[Target], seen: frozenset = frozenset()) -> "Conditional":
        """The conditions of a file on disk, seeded with what its quoted includes (found beside
        it, two levels deep) define: a feature macro set in a header decides this file's #ifdefs."""
        text = path.read_text(errors="replace")
        code = _blank(text)[0]
        return cls(code, targets, seed=_included_macros(path, _blank(text)[1], targets, seen | {path}))

    def live_targets(self, line: int, targets) -> list:
        dead = self.dead.get(line, frozenset())
        return [t for t in targets if (t.name if isinstance(t, Target) else t) not in dead]
