"""A portable kernel as a torch operator, so torch.compile (fullgraph too) can call it.

    def axpby(x: torch.Tensor, y: torch.Tensor, a: float, b: float) -> torch.Tensor:
        ...launch a portable kernel, return the new tensor...
    op = portable.custom_op("mylib::axpby", axpby, like="x")
    torch.compile(lambda x, y: op(x, y, 2.0, 1.0), fullgraph=True)(x, y)

torch traces the call through a fake implementation that only makes the output's shape
and dtype: `like="x"` (an output like that argument), or `fake=callable` returning the
empty outputs from the arguments.
"""
from __future__ import annotations

import inspect
from typing import Callable

import torch

from .errors import InputError


def custom_op(name: str, fn: Callable, *, like: str | None = None, fake: Callable | None = None,
              mutates_args=()):
    """Register `fn` (type-annotated, as torch.library asks) as the operator `name`
    ("namespace::op") and return it; call the result like `fn`."""
    if "::" not in name:
        raise InputError(f"name: expected 'namespace::op', got {name!r}")
    if (like is None) == (fake is None):
        raise InputError("custom_op: give exactly one of like= (the argument the output is shaped like) or fake=")
    params = inspect.signature(fn).parameters
    if like is not None and like not in params:
        raise InputError(f"like: {fn.__name__} has no argument {like!r}; expected one of {', '.join(params)}")
    op = torch.library.custom_op(name, fn, mutates_args=mutates_args)
    if fake is None:
        signature = inspect.signature(fn)

        def fake(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            return torch.empty_like(bound.arguments[like])
    op.register_fake(fake)
    return op
