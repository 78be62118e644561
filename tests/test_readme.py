"""README examples of command output are the commands' own output (portable.readme_blocks).
A failure here means a README block drifted: `python -m portable.readme_blocks --write` makes it
again."""
import re
from pathlib import Path

import pytest

from portable import readme_blocks
from portable.readme_blocks import COMPILER_VERSION, blocks

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
TEXT = README.read_text()
# README and the pages it sends readers to: each page's blocks run in a scratch folder of its own
PAGES = {path: path.read_text() for path in [README, *sorted((ROOT / "docs").rglob("*.md"))]}
COMMAND_BLOCKS = [(path, b) for path, text in PAGES.items() for b in blocks(text) if not b.is_file]


@pytest.mark.parametrize("path, block", COMMAND_BLOCKS, ids=lambda v: v.spec if hasattr(v, "spec") else v.name)
def test_readme_block_is_the_commands_output(path, block):
    with readme_blocks.scratch(PAGES[path]):
        fresh = readme_blocks.render_block(block)
    if fresh == block.body:
        return
    made_with, here = sorted(set(COMPILER_VERSION.findall(block.body))), sorted(set(COMPILER_VERSION.findall(fresh)))
    if made_with != here:
        # a static report belongs to its compilers: compare it only under the ones it names
        pytest.skip(f"the block was made with {', '.join(made_with)}; this machine has "
                    f"{', '.join(here) or 'none of them'}")
    pytest.fail(f"{path.name}: block differs from the command's output "
                f"(python -m portable.readme_blocks --write {path.relative_to(ROOT)} regenerates it):\n"
                + readme_blocks.diff(block, fresh))


@pytest.mark.parametrize("path", list(PAGES), ids=lambda p: p.name)
def test_every_block_of_command_output_is_marked(path):
    # a fenced block showing `$ portable ...` with no marker above it could drift unnoticed
    text = PAGES[path]
    marked = {b.start for b in blocks(text)}
    for m in re.finditer(r"^```[^\n]*\n(?=\$ portable )", text, re.M):
        assert m.end() in marked, f"{path.name} line {text[:m.end()].count(chr(10))}: unmarked command output"


def test_the_readme_marks_the_examples_it_promises():
    specs = [b.spec for _, b in COMMAND_BLOCKS]
    for wanted in ("compile vector_add", "ref __shfl_xor_sync", "ref hipModuleLaunchKernel"):
        assert wanted in specs
    assert any(s.startswith("audit row_sum.cu") for s in specs)
    assert any(b.is_file and b.spec == "row_sum.cu" for b in blocks(TEXT))


def test_readme_stays_short():
    assert len(TEXT.splitlines()) <= 300


# ---------------------------------------------------------------- the mechanism itself

SAMPLE = """intro

<!-- portable-file: k.cu -->
```cuda
__global__ void k(float* v) { *v += __shfl_xor_sync(0xffffffff, *v, 16); }
```

<!-- portable: ref hipModuleLaunchKernel --format csv ; compile vector_add -p block -->
```
stale text
```

<!-- portable: ref --list | head -2 -->
```text
```

<!-- portable: audit k.cu --target gfx942 --format json | head -1 -->
```
```
outro
"""


def test_regenerate_runs_each_marked_command(tmp_path):
    new, changed = readme_blocks.regenerate(SAMPLE)
    assert len(changed) == 3
    assert new.startswith("intro\n") and new.endswith("```\noutro\n")
    assert "__global__ void k" in new                       # a file block stays as written
    first = new.split("<!-- portable: ref hipModuleLaunchKernel --format csv ; compile vector_add -p block -->\n```\n")[1]
    assert first.startswith("$ portable ref hipModuleLaunchKernel --format csv\ncategory,cuda,hip,")
    # a failing command shows its stderr and status, as a shell does
    assert ("\n$ portable compile vector_add -p block\nportable: --param: expected KEY=VALUE, got 'block'\n"
            "$ echo $?\n2\n```") in first
    listed = new.split("<!-- portable: ref --list | head -2 -->\n```text\n")[1].split("```")[0]
    assert listed.splitlines()[0] == "$ portable ref --list | head -2" and len(listed.splitlines()) == 3
    audit = new.split("--format json | head -1 -->\n```\n")[1].split("```")[0]
    assert audit == "$ portable audit k.cu --target gfx942 --format json | head -1\n[\n$ echo $?\n1\n"
    again, changed = readme_blocks.regenerate(new)
    assert again == new and changed == []


def test_module_command_checks_then_writes(tmp_path, capsys):
    readme = tmp_path / "README.md"
    readme.write_text("<!-- portable: --version -->\n```\nportable 0.0\n```\n")
    assert readme_blocks.main([str(readme)]) == 1
    assert "1 block(s) differ" in capsys.readouterr().out
    assert readme_blocks.main([str(readme), "--write"]) == 0
    assert readme.read_text().startswith("<!-- portable: --version -->\n```\n$ portable --version\nportable ")
    assert readme_blocks.main([str(readme)]) == 0
