"""Render a kernel template for one target."""
from __future__ import annotations

import functools

import jinja2

from .data import mapping_dir, templates_dir
from .dialect import dialect_for
from .targets import get_target


@functools.cache
def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,   # a misspelt name fails loudly instead of rendering ""
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


@functools.cache
def dialect_prelude(dialect: str) -> str:
    """mapping/prelude/<dialect>.h: the few helpers whose bodies are vendor code (inline PTX,
    clang builtins). They live with the mapping, so templates stay vendor-free."""
    return (mapping_dir() / "prelude" / f"{dialect}.h").read_text()


@functools.cache
def target_prelude(target: str) -> str:
    """mapping/prelude/<target>.h, where a target has instructions its dialect's other targets
    lack (block-scaled FP4 on sm_120a and gfx950, tcgen05 on sm_100a); empty otherwise."""
    path = mapping_dir() / "prelude" / f"{target}.h"
    return path.read_text() if path.exists() else ""


def render_template(template: str, target_name: str, params: dict) -> str:
    """Render `template` with the target's dialect and already validated parameters."""
    target = get_target(target_name)
    context = dict(dialect_for(target.name))
    context.update(target=target, WARP=target.wave, dialect_prelude=dialect_prelude(target.dialect) + target_prelude(target.name))
    context.update(params)
    return environment().get_template(template).render(**context)
