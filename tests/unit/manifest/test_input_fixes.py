"""Issue 16's input fixes: count 0, every refused Job field says why, generateName, label selectors."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from sluicegate.manifest.decode import decode
from sluicegate.manifest.decode_job import _SPEC_UNSUPPORTED
from sluicegate.manifest.dialect import METADATA_UNSUPPORTED
from sluicegate.manifest.errors import ManifestError
from sluicegate.manifest.generate import ATTEMPTS, MAX_PREFIX, NameTaken, generate_name
from sluicegate.manifest.loader import RawDocument
from sluicegate.manifest.selectors import SelectorError, parse_selector

from . import samples


def job(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "sample", "namespace": "team-a", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {"parallelism": 2, "template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "c", "command": ["true"], "resources": {"requests": {"cpu": "1"}}}]}}, **spec},
    }


def errors(doc: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ManifestError) as info:
        decode(doc, source="t.yaml#1")
    return [(e.path, e.message) for e in info.value.errors]


def test_count_zero_is_refused_naming_the_field() -> None:
    doc = samples.workload()
    doc["spec"]["podSets"][0]["count"] = 0
    doc["spec"]["podSets"][0].pop("minCount", None)
    assert errors(doc) == [("spec.podSets[0].count", "must be at least 1, got 0: a pod set of no pods would hold "
                                                     "quota with nothing to run")]


def test_a_job_of_no_pods_is_refused_naming_parallelism() -> None:
    [(path, message)] = errors(job(parallelism=0))
    assert path == "spec.parallelism" and message.startswith("must be at least 1, got 0")


@pytest.mark.parametrize("field", sorted(METADATA_UNSUPPORTED))
def test_refused_job_metadata_says_why_as_the_workload_path_does(field: str) -> None:
    doc = job()
    doc["metadata"][field] = "x"
    wl = samples.workload()
    wl["metadata"][field] = "x"
    expected = ("metadata." + field, f"not supported: {METADATA_UNSUPPORTED[field]}")
    assert expected in errors(doc)
    assert expected in errors(wl)


@pytest.mark.parametrize("field", sorted(_SPEC_UNSUPPORTED))
def test_refused_job_spec_fields_say_why(field: str) -> None:
    [(path, message)] = errors(job(**{field: 1}))
    assert path == f"spec.{field}"
    assert message.startswith("not supported: ") and len(message) > len("not supported: ") + 5


def test_unknown_job_fields_suggest_the_known_one() -> None:
    doc = job(paralelism=3)
    doc["metadata"]["lables"] = {}
    assert ("spec.paralelism", 'unknown field; did you mean "parallelism"?') in errors(doc)
    assert ("metadata.lables", 'unknown field; did you mean "labels"?') in errors(doc)


# ------------------------------------------------------------------ generateName


def raw(meta: dict[str, Any]) -> RawDocument:
    return RawDocument(source="t.yaml#1", body={"kind": "Workload", "metadata": meta})


def suffixes(*values: str) -> Any:
    it = iter(values)
    return lambda: next(it)


def test_generate_name_draws_again_while_taken() -> None:
    taken = {("default", "job-aaaaa"), ("default", "job-bbbbb")}
    doc = generate_name(raw({"generateName": "job-"}), lambda ns, n: (ns, n) in taken,
                        suffix=suffixes("aaaaa", "bbbbb", "ccccc"))
    assert doc.body["metadata"] == {"name": "job-ccccc"}


def test_generate_name_gives_up_after_its_attempts() -> None:
    with pytest.raises(NameTaken, match=f"after {ATTEMPTS} tries"):
        generate_name(raw({"generateName": "job-", "namespace": "ns"}), lambda ns, n: True)


def test_a_name_wins_over_generate_name_and_a_long_prefix_is_cut() -> None:
    assert generate_name(raw({"name": "x", "generateName": "y-"}), lambda ns, n: False).body["metadata"] == {
        "name": "x"}
    long = generate_name(raw({"generateName": "p" * 80}), lambda ns, n: False, suffix=lambda: "zzzzz")
    assert long.body["metadata"]["name"] == "p" * MAX_PREFIX + "zzzzz" and len(long.body["metadata"]["name"]) == 63


def test_generate_name_leaves_the_input_alone() -> None:
    doc = raw({"generateName": "a-"})
    before = copy.deepcopy(doc.body)
    generate_name(doc, lambda ns, n: False)
    assert doc.body == before


# -------------------------------------------------------------------- selectors


@pytest.mark.parametrize(
    ("text", "labels", "matches"),
    [
        ("a=b", {"a": "b"}, True),
        ("a==b", {"a": "c"}, False),
        ("a!=b", {}, True),
        ("a!=b", {"a": "b"}, False),
        ("a in (x, y)", {"a": "y"}, True),
        ("a in (x,y),b", {"a": "y"}, False),
        ("a notin (x)", {}, True),
        ("a notin (x)", {"a": "x"}, False),
        ("a", {"a": ""}, True),
        ("!a", {"a": ""}, False),
        ("example.com/team=a, tier in (gold)", {"example.com/team": "a", "tier": "gold"}, True),
        ("", {"anything": "x"}, True),
    ],
)
def test_selector_matching(text: str, labels: dict[str, str], matches: bool) -> None:
    assert parse_selector(text).matches(labels) is matches


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a in (x", "unbalanced '('"),
        ("a in x", "'a in x': expected key=value"),
        ("a=b,,c=d", "empty requirement"),
        ("a in ()", "a set needs at least one value"),
        ("-a=b", "label key '-a'"),
        ("a=b c", "expected key=value"),
    ],
)
def test_bad_selectors_name_the_requirement(text: str, message: str) -> None:
    with pytest.raises(SelectorError, match=message.replace("(", r"\(")):
        parse_selector(text)


def test_equalities_are_the_cheap_prefilter() -> None:
    assert parse_selector("a=b,c!=d,e in (f),g==h").equalities() == {"a": "b", "g": "h"}
