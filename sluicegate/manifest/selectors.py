"""Kubernetes label selectors, equality- and set-based: what ``-l`` / ``label_selector`` accept.

    a=b  a==b  a!=b  a in (x,y)  a notin (x,y)  a  !a

Requirements are joined by commas and all must hold.  As in Kubernetes,
``a!=b`` and ``a notin (...)`` also match objects without the label ``a``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from sluicegate.manifest.syntax import label_value_problem, qualified_name_problem


class SelectorError(ValueError):
    """A selector that does not parse; the message names the requirement."""


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    # "=", "!=", "in", "notin", "exists", "!"
    op: str
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        has = self.key in labels
        if self.op == "exists":
            return has
        if self.op == "!":
            return not has
        if self.op in ("=", "in"):
            return has and labels[self.key] in self.values
        return not has or labels[self.key] not in self.values


@dataclass(frozen=True, slots=True)
class Selector:
    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)

    def equalities(self) -> dict[str, str]:
        """The ``key=value`` requirements alone: a cheap first filter (the rest still must be checked)."""
        return {r.key: next(iter(r.values)) for r in self.requirements if r.op == "=" and len(r.values) == 1}

    @property
    def empty(self) -> bool:
        return not self.requirements


_SET = re.compile(r"^\s*(?P<key>[^\s!=(),]+)\s+(?P<op>in|notin)\s*\((?P<values>[^()]*)\)\s*$")
_EQ = re.compile(r"^\s*(?P<key>[^\s!=(),]+)\s*(?P<op>==|=|!=)\s*(?P<value>[^\s!=(),]*)\s*$")
_EXISTS = re.compile(r"^\s*(?P<neg>!?)\s*(?P<key>[^\s!=(),]+)\s*$")


def _split(text: str) -> list[str]:
    """Requirements split at the commas outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise SelectorError(f"unbalanced ')' at position {i + 1}")
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise SelectorError("unbalanced '(': a set needs its closing ')'")
    parts.append(text[start:])
    return parts


def _check(part: str, key: str, values: list[str]) -> None:
    problem = qualified_name_problem(key)
    if problem:
        raise SelectorError(f"{part.strip()!r}: label key {key!r}: {problem}")
    for v in values:
        problem = label_value_problem(v)
        if problem:
            raise SelectorError(f"{part.strip()!r}: label value {v!r}: {problem}")


def parse_selector(text: str) -> Selector:
    """The selector ``text`` says; SelectorError naming the requirement that does not parse."""
    if not text.strip():
        return Selector()
    out: list[Requirement] = []
    for part in _split(text):
        if not part.strip():
            raise SelectorError(f"empty requirement in {text!r}")
        if m := _SET.match(part):
            values = [v.strip() for v in m["values"].split(",")]
            if not any(values):
                raise SelectorError(f"{part.strip()!r}: a set needs at least one value")
            _check(part, m["key"], values)
            out.append(Requirement(m["key"], m["op"], frozenset(values)))
        elif m := _EQ.match(part):
            _check(part, m["key"], [m["value"]])
            out.append(Requirement(m["key"], "!=" if m["op"] == "!=" else "=", frozenset([m["value"]])))
        elif m := _EXISTS.match(part):
            _check(part, m["key"], [])
            out.append(Requirement(m["key"], "!" if m["neg"] else "exists"))
        else:
            raise SelectorError(f"{part.strip()!r}: expected key=value, key!=value, key in (a,b), key notin (a,b), "
                                "key or !key")
    return Selector(tuple(out))
