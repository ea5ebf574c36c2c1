"""A faster ``dataclasses.replace`` for the frozen values the controller copies on every pod report."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_COPIERS: dict[type, Callable[..., Any]] = {}
_MISSING: Any = object()


def _copier(cls: type) -> Callable[..., Any]:
    fields = dataclasses.fields(cls)
    init = [f.name for f in fields if f.init]
    rest = [f.name for f in fields if not f.init]
    post = hasattr(cls, "__post_init__")
    lines = [f"def copy(o, *, {', '.join(f'{n}=_MISSING' for n in init)}):",
             "    new = _new(cls)"]
    lines += [f"    _set(new, {n!r}, o.{n} if {n} is _MISSING else {n})" for n in init]
    if post:
        lines.append("    new.__post_init__()")
    else:
        lines += [f"    _set(new, {n!r}, o.{n})" for n in rest]
    lines.append("    return new")
    scope: dict[str, Any] = {"_new": object.__new__, "_set": object.__setattr__, "cls": cls, "_MISSING": _MISSING}
    exec("\n".join(lines), scope)  # noqa: S102 - generated from the class's own field names, as dataclasses does
    return scope["copy"]  # type: ignore[no-any-return]


def copy_with(obj: T, **changes: Any) -> T:
    c = _COPIERS.get(type(obj))
    if c is None:
        c = _COPIERS[type(obj)] = _copier(type(obj))
    return c(obj, **changes)  # type: ignore[no-any-return]
