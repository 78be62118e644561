"""Render a kernel template for one target."""
from __future__ import annotations

import difflib
import functools
import traceback
from pathlib import Path

import jinja2

from . import linemap
from .data import mapping_dir, templates_dir
from . import dialect as dialect_module
from .dialect import dialect_for
from .errors import PortableError, TemplateError
from .targets import get_target, like


_KERNELS = (Path(__file__).resolve().parent / "kernels")     # the built-in kernels' own templates


class _MarkingLoader(jinja2.FileSystemLoader):
    """Finds templates on a search path and marks each text line with its file and line
    (portable.linemap), so errors in rendered source point back into the template."""

    def get_source(self, environment, template):
        source, filename, uptodate = super().get_source(environment, template)
        return linemap.annotate(source, display_name(filename)), filename, uptodate


def display_name(filename: str) -> str:
    """A template's name as messages show it: relative to the working directory when under
    it, else as given (a built-in's path inside the package)."""
    path = Path(filename).resolve()
    if path.parent == templates_dir().resolve() or _KERNELS in path.parents:
        return f"{path.name} (built-in)"
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


@functools.cache
def environment(search: tuple[str, ...] = ()) -> jinja2.Environment:
    """Templates are looked up in `search` (a user template's own folder) and then among the
    built-in templates, so a user's template can include `prelude.j2` or its own files."""
    return jinja2.Environment(
        loader=_MarkingLoader([*search, str(templates_dir())]),
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
    lack (block-scaled FP4 on sm_120a and gfx950, tcgen05 on sm_100a); a target with no file of
    its own takes the one of the target it is `like`; empty otherwise."""
    path = mapping_dir() / "prelude" / f"{target}.h"
    if not path.exists() and like(target):
        path = mapping_dir() / "prelude" / f"{like(target)}.h"
    return path.read_text() if path.exists() else ""


def render_template(template: str, target_name: str, params: dict, search: tuple[str, ...] = (),
                    text: str | None = None) -> str:
    """Render `template` (a name on the search path, or the template `text` itself, named
    `template` in messages) with the target's dialect and already validated parameters."""
    target = get_target(target_name)
    context = dict(dialect_for(target.name))
    context.update(target=target, WARP=target.wave, dialect_prelude=dialect_prelude(target.dialect) + target_prelude(target.name))
    context.update(params)
    try:
        rendered = _compiled(template, search, text).render(**context)
    except Exception as e:
        raise _located(e, template, context) from None
    from .prelude import prune_source
    # pruned while the lines still carry their template origins, so the origins stay right
    source, origins = linemap.strip(prune_source(rendered))
    linemap.remember(source, origins)
    return source


_PRELUDE = '{% include "prelude.j2" %}'


@functools.lru_cache(maxsize=64)
def _compiled(template: str, search: tuple[str, ...], text: str | None) -> jinja2.Template:
    """The compiled template. A template that does not include prelude.j2 itself gets it first."""
    env = environment(search)
    try:
        if text is not None:
            marked = linemap.annotate(text, template)
            return env.from_string(marked if "prelude.j2" in text else _PRELUDE + marked)
        own = env.loader.get_source(env, template)[0]
        if "prelude.j2" in own:
            return env.get_template(template)
        return env.from_string(f"{_PRELUDE}{{% include {template!r} %}}")
    except jinja2.TemplateSyntaxError as e:
        raise TemplateError(f"{e.filename or template}:{e.lineno}: {e.message}") from None
    except jinja2.TemplateNotFound as e:
        raise TemplateError(f"template {e.name!r} not found (looked in {', '.join([*search, 'the built-in templates'])})") from None


def _located(error: Exception, template: str, context: dict) -> Exception:
    """The error with the template file and line where rendering failed in front of it; an
    undefined name also gets the nearest names the template could have meant."""
    where = ""
    for frame in traceback.extract_tb(error.__traceback__):
        if frame.filename.endswith((".j2", ".jinja", ".jinja2")) or frame.filename == "<template>":
            name = template if frame.filename == "<template>" else display_name(frame.filename)
            where = f"{name}:{frame.lineno}: "
    if isinstance(error, jinja2.UndefinedError):
        message = str(error)
        word = message.split("'")[1] if message.count("'") >= 2 else ""
        near = difflib.get_close_matches(word, [k for k in context if not k.startswith("_")], n=3, cutoff=0.6)
        near += [n for n in dialect_module.nearest_names(word) if n not in near][:3]
        hint = f"; nearest names: {', '.join(near)}" if near else ""
        return TemplateError(f"{where}{message}{hint}")
    if isinstance(error, PortableError):
        error.args = (f"{where}{error}",) + error.args[1:]
        return error
    return TemplateError(f"{where}{type(error).__name__}: {error}")
