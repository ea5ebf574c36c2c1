"""Copies of the frozen values the controller makes on every admission and pod report, cheaper than
``dataclasses.replace``.

``replace`` looks every field up by name, builds keyword arguments and runs
``__init__`` and ``__post_init__`` again: for a workload and its status that
cost more than the rest of a pod report's work.  Here a copier is written
out once per class (one statement per field, as ``dataclasses`` writes
``__init__``) and reused.  ``copy_with`` runs ``__post_init__`` (a
workload's key from its namespace and name) where the class has one, so the
value is the one ``replace`` makes; ``copier`` copies the derived fields, for
changes none of them come from.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_new = object.__new__
_set = object.__setattr__
_MISSING: Any = object()
# The descriptor type of a ``__slots__`` attribute.
_MEMBER = type(type("_Slotted", (), {"__slots__": ("x",)}).__dict__["x"])
_COPIERS: dict[type, Callable[..., Any]] = {}


def _compile(cls: type, head: str, value: Callable[[str], str], *, post: bool) -> Callable[..., Any]:
    """``def copy(<head>)``: a new ``cls`` with every init field set to ``value(name)``; the derived fields
    made by ``__post_init__`` where ``post`` and the class has one, else copied."""
    fields = dataclasses.fields(cls)
    scope: dict[str, Any] = {"_new": _new, "_set": _set, "cls": cls, "_MISSING": _MISSING}

    def setter(name: str) -> str:
        # A slot's own descriptor sets it directly: object.__setattr__ first looks the name up
        # through the class (a Workload copy: 1.3 -> 0.85 us).  Any other attribute goes through it.
        slot: Any = vars(cls).get(name)
        if type(slot) is _MEMBER:
            scope[f"_set_{name}"] = slot.__set__
            return f"_set_{name}(new, "
        return f"_set(new, {name!r}, "

    lines = [f"def copy({head}):", "    new = _new(cls)"]
    lines += [f"    {setter(f.name)}{value(f.name)})" for f in fields if f.init]
    if post and hasattr(cls, "__post_init__"):
        lines.append("    new.__post_init__()")
    else:
        lines += [f"    {setter(f.name)}old.{f.name})" for f in fields if not f.init]
    lines.append("    return new")
    exec("\n".join(lines), scope)  # written from the class's own field names, as dataclasses does
    return scope["copy"]  # type: ignore[no-any-return]


def copier(cls: type, changed: tuple[str, ...]) -> Callable[..., Any]:
    """A function ``(old, *values of changed) -> new``: ``replace(old, **dict(zip(changed, values)))``,
    for a hot path that always changes the same fields, none of which a derived field (``__post_init__``)
    comes from: the derived fields are copied."""
    return _compile(cls, ", ".join(("old", *changed)), lambda n: n if n in changed else f"old.{n}", post=False)


def copy_with(obj: T, **changes: Any) -> T:
    """``dataclasses.replace(obj, **changes)`` for a frozen dataclass: the same value, made cheaper."""
    c = _COPIERS.get(type(obj))
    if c is None:
        init = [f.name for f in dataclasses.fields(type(obj)) if f.init]  # type: ignore[arg-type]
        c = _COPIERS[type(obj)] = _compile(type(obj), f"old, *, {', '.join(f'{n}=_MISSING' for n in init)}",
                                           lambda n: f"old.{n} if {n} is _MISSING else {n}", post=True)
    return c(obj, **changes)  # type: ignore[no-any-return]
