"""A cheaper ``__init__`` for the frozen, slotted dataclasses the controller makes by the hundred thousand.

A frozen dataclass's generated ``__init__`` sets each field with
``object.__setattr__(self, name, value)``, which looks the name up through the
class to find the slot before it sets it.  :func:`slot_init` writes the same
``__init__`` (the same parameters, defaults, default factories and
``__post_init__`` call) with each slot set through its own descriptor: a
Condition is made in 0.45 instead of 0.75 us, a PodRecord in 0.75 instead of
1.45.  The class is otherwise the one ``dataclass`` made; ``tests/unit/
test_slotinit.py`` checks each decorated class against its original
``__init__``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

T = TypeVar("T", bound=type)

_MEMBER = type(type("_Slotted", (), {"__slots__": ("x",)}).__dict__["x"])


class _Factory:
    """The default of a parameter whose field has a default factory (shown as dataclasses shows it)."""

    def __repr__(self) -> str:
        return "<factory>"


_HAS_FACTORY = _Factory()


def slot_init(cls: T) -> T:
    """Replace the ``__init__`` of a frozen, slotted dataclass ``cls`` by one that sets slots directly."""
    params = dataclasses.fields(cls)
    if len(params) != len(cls.__dataclass_fields__):  # type: ignore[attr-defined]
        raise TypeError(f"{cls.__name__}: InitVar and ClassVar fields are not supported")
    scope: dict[str, Any] = {"_HAS_FACTORY": _HAS_FACTORY}
    positional: list[str] = []
    keyword: list[str] = []
    body: list[str] = []
    for f in params:
        slot: Any = vars(cls).get(f.name)
        if type(slot) is not _MEMBER:
            raise TypeError(f"{cls.__name__}.{f.name} is not a slot")
        scope[f"_set_{f.name}"] = slot.__set__
        if f.default is not dataclasses.MISSING:
            scope[f"_default_{f.name}"] = f.default
            value = f"_default_{f.name}"
        elif f.default_factory is not dataclasses.MISSING:
            scope[f"_factory_{f.name}"] = f.default_factory
            value = "_HAS_FACTORY"
            if f.init:
                body.append(f"    if {f.name} is _HAS_FACTORY: {f.name} = _factory_{f.name}()")
            else:
                body.append(f"    {f.name} = _factory_{f.name}()")
        else:
            value = ""
        if f.init:
            (keyword if f.kw_only else positional).append(f"{f.name}={value}" if value else f.name)
            body.append(f"    _set_{f.name}(self, {f.name})")
        elif value and value != "_HAS_FACTORY":
            body.append(f"    _set_{f.name}(self, {value})")
        elif value:
            body.append(f"    _set_{f.name}(self, {f.name})")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    signature = ", ".join(["self", *positional, *(["*", *keyword] if keyword else [])])
    source = "\n".join([f"def __init__({signature}) -> None:", *(body or ["    pass"])])
    exec(source, scope)  # written from the class's own field names, as dataclasses writes its __init__
    init = scope["__init__"]
    original: Any = vars(cls)["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__doc__ = original.__doc__
    init.__annotations__ = dict(getattr(original, "__annotations__", {}))
    cls.__init__ = init  # type: ignore[misc]
    cls.__dataclass_init__ = original  # type: ignore[attr-defined]  # kept for the equivalence tests
    return cls
