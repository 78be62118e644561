"""The dialect as a vocabulary: `portable dialect`, docs/dialect.md in sync with the table,
misspelt names failing with the nearest ones, and built-ins rendering as before."""
import copy
import sys
from pathlib import Path
from types import SimpleNamespace

import jinja2
import pytest

import portable
from portable import dialect_doc
from portable.data import TARGET_COLUMNS
from portable.dialect import TEMPLATE_NAMES, dialect_for, entries, nearest_names
from portable.errors import DialectNameError, PortableError

DOC = Path(__file__).resolve().parents[1] / dialect_doc.DOC_PATH


def run(capsys, *argv):
    rc = dialect_doc.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


# ---- the command -------------------------------------------------------------------------

def test_listing_names_every_device_name_and_the_template_level_names(capsys):
    rc, out, _ = run(capsys)
    assert rc == 0
    for e in entries().values():
        if not e.host:
            assert f"  {dialect_doc.signature(e)} " in out, e.key
    for name in TEMPLATE_NAMES:
        assert f"\n  {name}\n" in out
    assert "target.mma_shape" in out and "warp.shfl_xor(v, lane_mask)" in out
    assert "rtc.arch" not in out           # host rows are listed only when asked for


def test_space_lists_only_that_namespace(capsys):
    rc, out, _ = run(capsys, "warp")
    assert rc == 0
    assert out.startswith("warp: ")
    assert "__shfl_xor_sync(0xffffffffu, {v}, {lane_mask})" in out and "__shfl_xor({v}, {lane_mask})" in out
    assert "sync.block" not in out and "idx." not in out


def test_name_shows_the_whole_entry(capsys):
    rc, out, _ = run(capsys, "warp.shfl_xor")
    assert rc == 0
    e = entries()["warp.shfl_xor"]
    assert out.startswith("warp.shfl_xor(v, lane_mask)\n")
    assert "{{ warp.shfl_xor('v', 'lane_mask') }}" in out
    assert e.cuda_expr in out and e.hip_expr in out and e.row in out
    assert all(f"  {t:<10} yes" in out for t in TARGET_COLUMNS)
    assert " ".join(out.split()).count("HIP's form has no mask") == 1     # the note, wrapped


def test_target_gives_that_spelling_and_its_availability(capsys):
    rc, out, _ = run(capsys, "warp.shfl_xor", "--target", "gfx942")
    assert rc == 0 and "gfx942     yes: __shfl_xor({v}, {lane_mask})" in out and "__shfl_xor_sync" not in out
    rc, out, _ = run(capsys, "umma", "--target", "gfx950")
    assert rc == 0 and "umma.state" in out and all(" no " in line for line in out.splitlines()[1:])
    rc, out, _ = run(capsys, "--target", "sm_90a")
    assert rc == 0 and "__syncthreads()" in out and "__shfl_xor(" not in out
    rc, out, _ = run(capsys, "target.wave", "--target", "gfx942")
    assert rc == 0 and out.splitlines()[-1].split() == ["gfx942", "64"]
    rc, out, _ = run(capsys, "WARP")
    assert rc == 0 and [line.split()[-1] for line in out.splitlines()[-5:]] == ["32", "32", "32", "64", "64"]


def test_host_namespace_is_listed_on_request(capsys):
    rc, out, _ = run(capsys, "rtc")
    assert rc == 0 and "rtc.arch(arch)" in out and "[nvrtcCreateProgram]" in out


@pytest.mark.parametrize("query, nearest", [("wrp", "warp"), ("warp.shfl_xorr", "warp.shfl_xor"),
                                            ("target.wav", "target.wave")])
def test_unknown_name_exits_2_with_the_nearest(capsys, query, nearest):
    rc, out, err = run(capsys, query)
    assert rc == 2 and out == ""
    assert err.startswith(f"portable: dialect: no name {query!r}; nearest: {nearest}")


def test_unknown_target_exits_2(capsys):
    rc, _, err = run(capsys, "warp", "--target", "sm_99")
    assert rc == 2 and "unknown target 'sm_99'" in err


def test_the_portable_command_has_the_subcommand(capsys):
    from portable import cli
    if "portable.dialect_doc" not in cli._PLUGINS:
        pytest.skip("portable.dialect_doc is not yet in portable.cli._PLUGINS")
    assert cli.main(["dialect", "warp.shfl_xor", "--target", "sm_90a"]) == 0
    assert "__shfl_xor_sync" in capsys.readouterr().out


# ---- docs/dialect.md ---------------------------------------------------------------------

def test_docs_match_the_table():
    assert DOC.exists(), f"{dialect_doc.DOC_PATH} is missing; run: {dialect_doc.REGENERATE}"
    assert DOC.read_text() == dialect_doc.markdown(), \
        f"{dialect_doc.DOC_PATH} differs from the mapping table; run: {dialect_doc.REGENERATE}"


def test_docs_group_by_namespace():
    text = dialect_doc.markdown()
    for space in dialect_doc.device_spaces():
        assert f"\n## {space}\n" in text
    assert "`warp.shfl_xor(v, lane_mask)`" in text and "## rtc" not in text


def test_template_level_names_are_the_renderers():
    """Every name render.py puts in a template's context besides the namespaces is documented."""
    seen = {}

    @jinja2.pass_context
    def probe(context):
        seen.update(context.get_all())
        return ""

    from portable.render import render_template
    render_template("probe", "sm_90a", {"probe": probe}, text="{{ probe() }}\n")
    given = set(seen) - set(dialect_for("sm_90a")) - set(jinja2.defaults.DEFAULT_NAMESPACE) - {"probe"}
    assert given == set(TEMPLATE_NAMES), f"undocumented: {given - set(TEMPLATE_NAMES)}; gone: {set(TEMPLATE_NAMES) - given}"


# ---- misspelt names ----------------------------------------------------------------------

def _render(text: str, target: str = "sm_90a") -> str:
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    context = dict(dialect_for(target), WARP=32)
    return env.from_string(text).render(**context)


def test_misspelt_name_fails_with_the_nearest_names():
    assert _render("{{ warp.shfl_xor('v', 'o') }}") == "__shfl_xor_sync(0xffffffffu, v, o)"
    with pytest.raises(DialectNameError) as info:
        _render("x\n{{ warp.shfl_xorr('v', 'o') }}\n")
    e = info.value
    assert str(e).startswith("warp.shfl_xorr: no such dialect name; nearest: warp.shfl_xor, ")
    assert str(e).endswith("(see portable dialect warp)")
    assert e.name == "warp.shfl_xorr" and e.nearest[0] == "warp.shfl_xor" and e.space == "warp"
    assert isinstance(e, PortableError) and not isinstance(e, AttributeError)
    # Jinja2 rewrites the traceback so the renderer can find the template line
    lines = [f.lineno for f in __import__("traceback").extract_tb(e.__traceback__) if f.filename == "<template>"]
    assert lines == [2]


def test_unknown_namespace_is_undefined_and_nearest_names_suggests():
    with pytest.raises(jinja2.UndefinedError, match="'wrp' is undefined"):
        _render("{{ wrp.shfl_xor('v', 'o') }}")
    assert nearest_names("wrp")[0] == "warp"
    assert nearest_names("shfl_xor")[0] == "warp.shfl_xor"       # the namespace left out
    assert nearest_names("WRAP")[0] == "WARP"
    assert nearest_names("target.smem_per_blok")[0] == "target.smem_per_block"
    assert nearest_names("qqqqqq") == []


def test_namespace_behaves_like_the_old_one_otherwise():
    warp = dialect_for("gfx942")["warp"]
    assert set(vars(warp)) == {e.name for e in entries().values() if e.space == "warp"}
    assert not hasattr(warp, "__html__") and not hasattr(warp, "_private")   # probes get AttributeError
    assert copy.copy(warp).shfl_xor("v", 1) == "__shfl_xor(v, 1)"
    assert dialect_for("gfx942") is dialect_for("gfx942")                     # still cached


# ---- byte-identical renders --------------------------------------------------------------

@pytest.mark.parametrize("kernel", ["vector_add", "mla_decode", "mxfp4_moe"])
def test_builtins_render_as_with_plain_namespaces(kernel, monkeypatch):
    """The namespace class changes only the error for a missing name: with SimpleNamespaces
    of the same Spellings (the earlier dialect) every built-in renders to the same bytes."""
    render_module = sys.modules["portable.render"]
    calls = []

    def plain(target):
        calls.append(target)
        return {space: SimpleNamespace(**vars(ns)) for space, ns in dialect_for(target).items()}

    for target in TARGET_COLUMNS:
        ours = portable.render(kernel, target)
        monkeypatch.setattr(render_module, "dialect_for", plain)
        theirs = portable.render(kernel, target)
        monkeypatch.undo()
        assert ours == theirs, f"{kernel} on {target} renders differently"
    assert calls == list(TARGET_COLUMNS)        # the renderer did use the substitute
