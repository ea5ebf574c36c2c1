"""Checks across documents: cohort cycles, duplicates, all failures reported together."""

from __future__ import annotations

import pytest

from sluicegate.manifest import ManifestErrors, decode_all, find_cohort_cycle, parse_text


@pytest.mark.parametrize(
    ("parents", "expected"),
    [
        pytest.param({}, None, id="no-cohorts"),
        pytest.param({"org": None, "research": "org", "ml": "research"}, None, id="tree"),
        pytest.param({"a": "not-defined"}, None, id="parent-not-defined-is-an-implicit-root"),
        pytest.param({"a": "a"}, ["a"], id="own-parent"),
        pytest.param({"a": "b", "b": "a"}, ["a", "b"], id="two-cycle"),
        pytest.param({"x": "y", "y": "z", "z": "x", "root": None}, ["x", "y", "z"], id="three-cycle"),
        pytest.param({"leaf": "b", "b": "c", "c": "b"}, ["b", "c"], id="tail-into-cycle-names-only-the-cycle"),
        pytest.param({"d": "e", "e": "d", "a": "b", "b": "a"}, ["a", "b"], id="first-cycle-by-name"),
    ],
)
def test_find_cohort_cycle(parents: dict[str, str | None], expected: list[str] | None) -> None:
    assert find_cohort_cycle(parents) == expected


def _cohort(name: str, parent: str | None = None) -> str:
    spec = f"\nspec:\n  parentName: {parent}" if parent else ""
    return f"apiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata:\n  name: {name}{spec}\n"


def test_decode_all_reports_every_cohort_cycle() -> None:
    text = "---\n".join(
        [_cohort("a", "b"), _cohort("b", "a"), _cohort("c", "c"), _cohort("root"), _cohort("leaf", "root")]
    )
    with pytest.raises(ManifestErrors) as info:
        decode_all(parse_text(text, "cohorts.yaml"))
    assert str(info.value).splitlines() == [
        "cohorts.yaml#3 Cohort/c: spec.parentName: a cohort cannot be its own parent, got \"c\"",
        "cohorts.yaml#1 Cohort/a: spec.parentName: cohort parents form a cycle: a -> b -> a; "
        "a cohort tree must have a root",
    ]


def test_decode_all_rejects_duplicate_objects_and_collects_document_errors() -> None:
    text = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: q, namespace: team-a}
spec: {clusterQueue: cq}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: q, namespace: team-b}
spec: {clusterQueue: cq}
---
apiVersion: sluicegate.io/v1beta2
kind: LocalQueue
metadata: {name: q, namespace: team-a}
spec: {clusterQueue: other}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: Bad_Flavor}
---
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
---
apiVersion: config.kueue.x-k8s.io/v1beta1
kind: Configuration
"""
    with pytest.raises(ManifestErrors) as info:
        decode_all(parse_text(text, "all.yaml"))
    assert str(info.value).splitlines() == [
        "all.yaml#3 LocalQueue/team-a/q: metadata.name: duplicate: LocalQueue team-a/q is also defined in all.yaml#1",
        "all.yaml#4 ResourceFlavor/Bad_Flavor: metadata.name: must be a DNS-1123 subdomain (lower-case letters, "
        "digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters), got \"Bad_Flavor\"",
        "all.yaml#6 Configuration: duplicate: a second Configuration in all.yaml#5",
    ]
    assert [e.source for e in info.value.errors] == ["all.yaml#3", "all.yaml#4", "all.yaml#6"]
