"""A rendered source carries only the prelude helpers it uses (portable/prelude.py)."""
import re

import pytest

import portable
from portable import prelude
from portable.backends import clang_amdgpu, nvrtc
from portable.build import build
from portable.data import mapping_dir
from portable.render import render_template
from portable.targets import get_target

from conftest import toolchain_or_skip

# names of the matrix, fp8, MXFP4, tensor-map and warpgroup helpers of mapping/prelude/*.h
HEAVY = re.compile(r"\b(mma_\w+|frag_\w+|mfma\w*|\w*fp8\w*|e4m3\w*|e2m1\w*|e8m0\w*|\w*mxf4\w*|mx4_\w+|MMA4_K|"
                   r"tensor_map|tensor_box\w*|mbarrier\w*|wg_\w+|WG_MMA\w*|umma\w*|sk_\w+|SK_ROWS)\b")


def prelude_region(source: str) -> str:
    start = source.index("// ---- prelude (")
    return source[source.index("\n", start) + 1:source.index("// ---- end prelude ----")]


def helpers_in(source: str) -> set[str]:
    return set().union(*(p.defines for p in prelude.split(prelude_region(source))))


@pytest.mark.parametrize("target", ["gfx950", "sm_90a"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_vector_add_carries_no_matrix_fp8_or_tensor_map_helpers(target, dtype):
    source = portable.render("vector_add", target=target, dtype=dtype)
    assert not [name for name in prelude.identifiers(source) if HEAVY.fullmatch(name)]
    assert len(source.splitlines()) < 90
    assert "@prelude" not in source
    assert "Target prelude for" not in source       # no heading of a file it uses nothing of


# A user's template calling one helper: mma_load_a needs frag_a and mma_lane (and on NVIDIA
# smem_addr for its ldmatrix address, on AMD the vector type frag_a is made of).
USER = """{{ fn.kernel }} void first_a(const unsigned short* s, unsigned* out) {
    frag_a a = mma_load_a(s, 16, 0);
    out[threadIdx.x] = *reinterpret_cast<const unsigned*>(&a);   // mma_zero() is not called
}
"""
NEEDS = {"nvidia": {"mma_load_a", "frag_a", "mma_lane", "smem_addr"},
         "amd": {"mma_load_a", "frag_a", "mma_lane", "mma_bf16x4"}}


@pytest.mark.parametrize("target", portable.targets())
def test_user_template_gets_its_helper_and_what_that_needs_only(target):
    source = render_template("first_a.j2", target, {}, text=USER)
    assert helpers_in(source) == NEEDS[get_target(target).vendor]
    compiler = nvrtc if get_target(target).vendor == "nvidia" else clang_amdgpu
    toolchain_or_skip(compiler.available())
    assert "first_a" in build(source, target).asm


PRELUDE = """// A file's heading, set off by a blank line.

struct inner_t { int v; };
#define SCALE 2
// middle: reached only through outer
__device__ __forceinline__ int middle(inner_t x) { return x.v * SCALE; }
__device__ __forceinline__ int outer(int y) { inner_t t{y}; return middle(t); }
// never used
__device__ __forceinline__ int unused(int y) { return y; }
static_assert(sizeof(int) == 4, "kept: it declares nothing");
#define GEN(NAME) \\
__device__ __forceinline__ int NAME() { return outer(1); }
GEN(gen_one)
GEN(gen_two)
template <int N>
struct __attribute__((aligned(16))) boxed { int v[N]; };
typedef float f4 __attribute__((ext_vector_type(4)));
enum { lanes_a = 64, lanes_b = 32 };
template <class T> __device__ T twice(T x) { return x + x; } __device__ int thrice(int x) { return 3 * x; }
"""


def names(text: str) -> set[str]:
    return set().union(*(p.defines for p in prelude.split(text)))


def test_split_is_lossless_and_names_each_declaration():
    pieces = prelude.split(PRELUDE)
    assert "".join(p.text for p in pieces) == PRELUDE
    assert names(PRELUDE) == {"inner_t", "SCALE", "middle", "outer", "unused", "GEN", "gen_one", "gen_two",
                              "boxed", "f4", "lanes_a", "lanes_b", "twice", "thrice"}


def test_pruner_keeps_pieces_reached_only_through_other_pieces():
    kept = prelude.prune(PRELUDE, "int k() { return outer(2); }   // unused( in a comment, \"unused\" in a string")
    assert names(kept) == {"outer", "middle", "inner_t", "SCALE"}
    assert "// middle: reached only through outer" in kept and "// never used" not in kept
    assert "static_assert" in kept and kept.startswith("// A file's heading")


def test_macro_made_helpers_are_kept_one_by_one():
    kept = prelude.prune(PRELUDE, "int k() { return gen_two() + lanes_b; }")
    assert names(kept) == {"gen_two", "GEN", "outer", "middle", "inner_t", "SCALE", "lanes_a", "lanes_b"}


def test_nothing_used_leaves_nothing():
    without_assert = PRELUDE.replace('static_assert(sizeof(int) == 4, "kept: it declares nothing");\n', "")
    assert prelude.prune(without_assert, "int k() { return 0; }") == ""


@pytest.mark.parametrize("path", sorted((mapping_dir() / "prelude").glob("*.h")), ids=lambda p: p.name)
def test_every_helper_of_the_mapping_preludes_is_a_piece(path):
    """A helper added to a .h file is found without registration; an unreadable one fails here."""
    text = path.read_text()
    pieces = prelude.split(text)
    assert "".join(p.text for p in pieces) == text
    outside_macros = re.sub(r"^#define(?:.*\\\n)*.*\n", "", text, flags=re.M)
    declared = set(re.findall(r"^#define\s+(\w+)", text, re.M))
    declared |= set(re.findall(r"^(?:template\s*<[^>\n]*>\s*)?(?:__host__\s+)?__device__\b[^(;{]*?\b(\w+)\s*\(",
                               outside_macros, re.M))
    declared |= set(re.findall(r"^(?:template\s*<[^>\n]*>\s*)?struct\b[^{;]*?(\w+)\s*\{", outside_macros, re.M))
    assert declared and declared <= names(text)
