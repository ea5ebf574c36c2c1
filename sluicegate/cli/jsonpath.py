"""kubectl's ``-o jsonpath=TEMPLATE``, the subset sluicectl supports.

A template is text with ``{...}`` expressions:

- ``{.a.b}``, ``{$.a}``, ``{.a['b.c/d']}``: a field (``$`` is the root;
  inside ``range`` a leading ``.`` or ``@`` is the current item);
- ``{.items[0]}``, ``{.items[-1]}``, ``{.items[*]}``, ``{.a.*}``: one
  element, or every element or value;
- ``{range .items[*]}...{end}``: the text in between for each element;
- ``{"\\n"}``: a literal (``\\n``, ``\\t``, ``\\\\``, ``\\"`` escapes).

Several results are joined by a space.  Strings print as they are, numbers
and booleans as JSON, mappings and lists as JSON.  A missing field prints
nothing (kubectl's default, ``--allow-missing-template-keys=true``).  Not
supported: filters ``[?(...)]``, slices ``[a:b]``, recursive descent ``..``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any


class TemplateError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class _Text:
    text: str


@dataclass(frozen=True, slots=True)
class _Path:
    steps: tuple[str | int, ...]  # a key, an index, or "*" (every element)


@dataclass(frozen=True, slots=True)
class _Range:
    path: _Path
    body: tuple[_Text | _Path | _Range, ...]


_Node = _Text | _Path | _Range
_STEP = re.compile(r"\.(?P<key>[A-Za-z0-9_\-]+|\*)|\[(?P<index>-?\d+|\*)\]|\[(?P<q>['\"])(?P<qkey>.*?)(?P=q)\]")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"'}


def _path(expr: str) -> _Path:
    text = expr.strip()
    if text.startswith(("$", "@")):
        text = text[1:]
    if text in ("", "."):
        return _Path(())
    steps: list[str | int] = []
    pos = 0
    while pos < len(text):
        m = _STEP.match(text, pos)
        if m is None:
            raise TemplateError(f"cannot read {expr!r} at {text[pos:]!r}: supported are .field, ['field'], "
                                "[N], [*] and .*")
        if m["key"] is not None:
            steps.append(m["key"])
        elif m["index"] is not None:
            steps.append("*" if m["index"] == "*" else int(m["index"]))
        else:
            steps.append(m["qkey"])
        pos = m.end()
    return _Path(tuple(steps))


def _literal(expr: str) -> str:
    body = expr.strip()[1:-1]
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m[1], m[0]), body)


def parse(template: str) -> tuple[_Node, ...]:
    """The template's nodes; TemplateError naming what cannot be read."""
    stack: list[list[_Node]] = [[]]
    ranges: list[_Path] = []
    pos = 0
    while pos < len(template):
        start = template.find("{", pos)
        if start < 0:
            stack[-1].append(_Text(template[pos:]))
            break
        if start > pos:
            stack[-1].append(_Text(template[pos:start]))
        end = template.find("}", start)
        if end < 0:
            raise TemplateError(f"unclosed '{{' at position {start + 1}")
        expr = template[start + 1:end].strip()
        pos = end + 1
        if expr.startswith('"') and expr.endswith('"') and len(expr) >= 2:
            stack[-1].append(_Text(_literal(expr)))
        elif expr.startswith("range ") or expr == "range":
            ranges.append(_path(expr[len("range"):]))
            stack.append([])
        elif expr == "end":
            if not ranges:
                raise TemplateError("{end} without {range}")
            body = stack.pop()
            stack[-1].append(_Range(ranges.pop(), tuple(body)))
        else:
            stack[-1].append(_path(expr))
    if ranges:
        raise TemplateError("{range} without {end}")
    return tuple(stack[0])


def _walk(values: list[Any], steps: tuple[str | int, ...]) -> list[Any]:
    for step in steps:
        out: list[Any] = []
        for v in values:
            if step == "*":
                if isinstance(v, list):
                    out.extend(v)
                elif isinstance(v, dict):
                    out.extend(v.values())
            elif isinstance(step, int):
                if isinstance(v, list) and -len(v) <= step < len(v):
                    out.append(v[step])
            elif isinstance(v, dict) and step in v:
                out.append(v[step])
        values = out
    return values


def _show(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v)


def _render(nodes: tuple[_Node, ...], current: Any) -> str:
    out: list[str] = []
    for node in nodes:
        if isinstance(node, _Text):
            out.append(node.text)
        elif isinstance(node, _Path):
            out.append(" ".join(_show(v) for v in _walk([current], node.steps)))
        else:
            out.extend(_render(node.body, item) for item in _walk([current], node.path.steps))
    return "".join(out)


def render(template: str, data: Any) -> str:
    """``template`` filled from ``data`` (see the module docstring for what is supported)."""
    return _render(parse(template), data)
