"""The jsonpath subset of -o jsonpath=TEMPLATE."""

from __future__ import annotations

from typing import Any

import pytest

from sluicegate.cli.jsonpath import TemplateError, render

DATA: dict[str, Any] = {
    "kind": "List",
    "items": [
        {"metadata": {"name": "a", "labels": {"example.com/team": "x"}}, "spec": {"priority": 3, "active": True}},
        {"metadata": {"name": "b", "labels": {}}, "spec": {"priority": 0, "active": False}},
    ],
}


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{.kind}", "List"),
        ("{$.kind}", "List"),
        ("{.items[*].metadata.name}", "a b"),
        ("{.items[0].metadata.name}", "a"),
        ("{.items[-1].metadata.name}", "b"),
        ("{.items[5].metadata.name}", ""),
        ("{.items[0].metadata.labels['example.com/team']}", "x"),
        ("{.items[*].spec.priority}", "3 0"),
        ("{.items[*].spec.active}", "true false"),
        ("{.items[1].metadata}", '{"name": "b", "labels": {}}'),
        ("{.items[0].spec.*}", "3 true"),
        ("{range .items[*]}{.metadata.name}:{.spec.priority}{\"\\n\"}{end}", "a:3\nb:0\n"),
        ("{range .items[*]}[{range .metadata.labels.*}{@}{end}]{end}", "[x][]"),
        ("name={.items[0].metadata.name} missing={.nope}", "name=a missing="),
        ('{"\\t"}', "\t"),
    ],
)
def test_templates(template: str, expected: str) -> None:
    assert render(template, DATA) == expected


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("{.a", "unclosed '{'"),
        ("{range .items[*]}x", r"\{range\} without \{end\}"),
        ("{end}", r"\{end\} without \{range\}"),
        ("{.items[?(@.x)]}", "supported are"),
        ("{.items[0:2]}", "supported are"),
    ],
)
def test_what_is_not_supported_says_so(template: str, message: str) -> None:
    with pytest.raises(TemplateError, match=message):
        render(template, DATA)
