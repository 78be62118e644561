"""README examples of command output, made by the command itself so they cannot drift.

A fenced block preceded by a marker comment is that command's output:

    <!-- portable: ref __shfl_xor_sync -->
    ```
    $ portable ref __shfl_xor_sync
    ...what the command prints...
    ```

The marker may hold several commands separated by ` ; ` (one block, a blank line between them)
and a command may end in `| head -N` (its first N lines). A command that exits non-zero is
followed by `$ echo $?` and its status, as a shell shows it. Sample inputs come from the README
too: the fenced block after `<!-- portable-file: NAME -->` is written to NAME in the scratch
folder the commands run in, so an example's input and output are read from the same page.

Commands run in this process through `portable.cli.main` (stdout and stderr together, in the
order written, not on a terminal: the widths a pipe gets). Regenerate with
`python -m portable.readme_blocks --write [README.md]`; without `--write` it only reports the
blocks that differ (exit status 1), which is what tests/test_readme.py checks.
"""
from __future__ import annotations

import argparse
import contextlib
import difflib
import io
import os
import re
import shlex
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

# a marker line, the fence that opens the next line, the body, the closing fence
_BLOCK = re.compile(r"^<!-- portable(?P<file>-file)?: (?P<spec>.+?) -->\n(?P<fence>```[^\n]*)\n(?P<body>.*?)^```$",
                    re.M | re.S)
_HEAD = re.compile(r"^(?P<cmd>.+?)\s*\|\s*head -(?P<n>\d+)$")
# what a compile table depends on besides this tree: the compilers' versions
COMPILER_VERSION = re.compile(r"nvrtc \d+(?:\.\d+)+|clang version \S+|hiprtc \d+(?:\.\d+)+")


@dataclass(frozen=True)
class Block:
    spec: str          # the marker's commands (or, for a file, its name)
    is_file: bool
    body: str          # the block's text as the README has it, without the fences
    start: int         # offsets of the body in the README text
    end: int

    @property
    def commands(self) -> list[str]:
        return [c.strip() for c in self.spec.split(" ; ") if c.strip()]


def blocks(text: str) -> list[Block]:
    return [Block(m["spec"].strip(), bool(m["file"]), m["body"], m.start("body"), m.end("body"))
            for m in _BLOCK.finditer(text)]


def run_command(command: str) -> tuple[str, int]:
    """`portable ARGS` as a user types it: what it prints (stdout and stderr) and its exit status."""
    from .cli import main
    m = _HEAD.match(command)
    argv = shlex.split(m["cmd"] if m else command)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        try:
            status = main(argv)
        except SystemExit as e:              # argparse, --help, a command that exits
            if isinstance(e.code, str):      # SystemExit("message"): Python prints it and exits 1
                print(e.code, file=sys.stderr)
                status = 1
            else:
                status = e.code
    out = buf.getvalue()
    if m:
        out = "".join(out.splitlines(keepends=True)[:int(m["n"])])
    return out, status or 0


def render_block(block: Block) -> str:
    """The body a command block should have (run in the current folder)."""
    parts = []
    for command in block.commands:
        out, status = run_command(command)
        text = f"$ portable {command}\n{out}"
        if not text.endswith("\n"):
            text += "\n"
        if status:
            text += f"$ echo $?\n{status}\n"
        parts.append(text)
    return "\n".join(parts)


@contextlib.contextmanager
def scratch(text: str):
    """A scratch folder holding the README's sample files, as the current folder."""
    here = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="portable-readme-") as d:
        for b in blocks(text):
            if b.is_file:
                (Path(d) / b.spec).write_text(b.body)
        results = Path(__file__).resolve().parents[1] / "bench" / "results"
        if results.is_dir():            # a checkout: the committed result files, as bench/results/
            (Path(d) / "bench").mkdir()
            (Path(d) / "bench" / "results").symlink_to(results)
        os.chdir(d)
        try:
            yield Path(d)
        finally:
            os.chdir(here)


def regenerate(text: str) -> tuple[str, list[tuple[Block, str]]]:
    """(the README with every command block made afresh, [(block, new body)] of those that changed)."""
    changed, out, last = [], [], 0
    with scratch(text):
        for b in blocks(text):
            if b.is_file:
                continue
            body = render_block(b)
            if body != b.body:
                changed.append((b, body))
            out += [text[last:b.start], body]
            last = b.end
    return "".join(out) + text[last:], changed


def diff(block: Block, body: str) -> str:
    return "".join(difflib.unified_diff(block.body.splitlines(keepends=True), body.splitlines(keepends=True),
                                        f"README: portable {block.spec}", "the command now"))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m portable.readme_blocks",
                                description="Check (or --write) the README blocks marked <!-- portable: ... -->.")
    p.add_argument("readme", nargs="?", default="README.md")
    p.add_argument("--write", action="store_true", help="rewrite the marked blocks in place")
    args = p.parse_args(argv)
    path = Path(args.readme).resolve()
    text = path.read_text()
    new, changed = regenerate(text)
    for block, body in changed:
        sys.stdout.write(diff(block, body))
    if args.write:
        if new != text:
            path.write_text(new)
        print(f"{path.name}: {len(changed)} block(s) rewritten of {sum(not b.is_file for b in blocks(text))}")
        return 0
    print(f"{path.name}: {len(changed)} block(s) differ from the tool's output"
          + ("; run with --write to regenerate" if changed else ""))
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
