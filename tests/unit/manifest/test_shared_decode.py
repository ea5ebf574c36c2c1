"""Workloads of one shape share their decoded pod sets and labels; what is shared stays correct.

Bulk submissions (a job array, Kueue's performance generator) send thousands
of documents that differ only in their names: the decoder checks each
distinct podSets and label set once and hands out one frozen value, and the
store's JSON of those pod sets is written once.  Nothing about validation
may change: an invalid value is reported every time, with its field.
"""

from __future__ import annotations

import copy
import json
from dataclasses import replace

import pytest

from sluicegate.manifest import ManifestError, decode, encode, parse_text
from sluicegate.manifest.encode import encode_json
from sluicegate.model import Workload

from . import samples


def workload(name: str, **spec: object) -> Workload:
    doc = samples.workload()
    doc["metadata"] = {"name": name, "namespace": "team-a", "labels": {"class": "small", "run-ms": "150"}}
    doc["spec"].update(spec)
    wl = decode(parse_text(json.dumps(doc), f"{name}.json", fmt="json")[0])
    assert isinstance(wl, Workload)
    return wl


def test_workloads_of_one_shape_share_pod_sets_and_labels() -> None:
    a, b = workload("a"), workload("b")
    assert (a.name, b.name) == ("a", "b")
    assert a.pod_sets is b.pod_sets
    assert a.labels is b.labels and a.labels == {"class": "small", "run-ms": "150"}


def test_another_pod_set_value_is_decoded_on_its_own() -> None:
    pod_sets = copy.deepcopy(samples.workload()["spec"]["podSets"])  # type: ignore[index]
    pod_sets[0]["count"] = 7
    a, b = workload("a"), workload("b", podSets=pod_sets)
    assert a.pod_sets is not b.pod_sets
    assert (a.pod_sets[0].count, b.pod_sets[0].count) == (4, 7)
    assert replace(b.pod_sets[0], count=4) == a.pod_sets[0]


@pytest.mark.parametrize("attempt", [1, 2, 3])
def test_an_invalid_pod_set_is_reported_every_time(attempt: int) -> None:
    pod_sets = copy.deepcopy(samples.workload()["spec"]["podSets"])  # type: ignore[index]
    pod_sets[0]["count"] = -1
    with pytest.raises(ManifestError) as info:
        workload(f"bad{attempt}", podSets=pod_sets)
    assert "spec.podSets[0].count: must be non-negative, got -1" in str(info.value)


def test_true_and_one_are_not_confused() -> None:
    """The memo's key tells apart values that compare equal in Python (1 == True)."""
    pod_sets = copy.deepcopy(samples.workload()["spec"]["podSets"])  # type: ignore[index]
    pod_sets[0]["count"] = 1
    ok = workload("one", podSets=pod_sets)
    assert ok.pod_sets[0].count == 1
    pod_sets[0]["count"] = True
    with pytest.raises(ManifestError) as info:
        workload("true", podSets=pod_sets)
    assert "spec.podSets[0].count" in str(info.value)


def test_the_stored_json_of_shared_pod_sets_is_the_encoded_document() -> None:
    a, b = workload("a"), workload("b")
    for wl in (a, b, a, replace(b, pod_sets=(replace(b.pod_sets[0], count=2),))):
        assert encode_json(wl).body == json.dumps(encode(wl), separators=(",", ":")).encode()
    assert json.loads(encode_json(b).body)["spec"]["podSets"] == encode(a)["spec"]["podSets"]  # type: ignore[index]


@pytest.mark.parametrize(("text", "problem"), [
    ('{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"\\ud800"}}', "metadata.name: contains a lone surrogate"),
    ('{"apiVersion":"v1","kind":"Namespace","metadata":{"labels":{"a":"\\uDC00"}}}', "lone surrogate"),
    ('{"a":' + "[" * 120 + "]" * 120 + "}", "nested deeper than 100 levels"),
], ids=["lone-surrogate", "lone-surrogate-uppercase", "too-deep"])
def test_json_text_outside_the_bounds_is_still_refused(text: str, problem: str) -> None:
    with pytest.raises(ManifestError) as info:
        parse_text(text, "t.json", fmt="json")
    assert problem in str(info.value)


def test_workloads_share_their_namespace_queue_priority_class_and_empty_annotations() -> None:
    """What thousands of workloads have in common is held once: their namespace's and queue's names,
    their priority class reference, and "no annotations" (read-only, so no workload can change it)."""
    ref = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"}
    a, b = workload("a", priorityClassRef=ref), workload("b", priorityClassRef=dict(ref))
    assert a.namespace is b.namespace and a.queue_name is b.queue_name
    assert a.priority_class is b.priority_class and a.priority_class == ("WorkloadPriorityClass", "high")
    assert a.annotations is b.annotations and a.annotations == {}
    with pytest.raises(TypeError):
        a.annotations["x"] = "y"  # type: ignore[index]
    # Encoded as before: no annotations key at all.
    assert "annotations" not in encode(a)["metadata"]
    low = workload("c", priorityClassRef={**ref, "name": "low"})
    assert low.priority_class == ("WorkloadPriorityClass", "low")


def _decode_doc(doc: dict[str, object], source: str) -> Workload:
    wl = decode(parse_text(json.dumps(doc), source, fmt="json")[0])
    assert isinstance(wl, Workload)
    return wl


def test_workloads_of_one_spec_share_its_decoded_value_and_keep_their_own_metadata() -> None:
    a = workload("a", priority=7, active=False, maximumExecutionTimeSeconds=60)
    b = workload("b", priority=7, active=False, maximumExecutionTimeSeconds=60)
    assert (a.priority, a.active, a.maximum_execution_time_seconds) == (7, False, 60)
    assert replace(b, name="a") == a and b.name == "b" and b.key != a.key
    # A spec that differs in a value Python finds equal (1 == True) is a spec of its own.
    c = workload("c", priority=1)
    with pytest.raises(ManifestError, match="spec.priority"):
        workload("d", priority=True)
    assert c.priority == 1


@pytest.mark.parametrize("attempt", [1, 2, 3])
def test_an_invalid_spec_is_reported_every_time(attempt: int) -> None:
    with pytest.raises(ManifestError) as info:
        workload(f"bad{attempt}", queueName="Not_A_Name")
    assert "spec.queueName" in str(info.value)


def test_a_spec_without_queue_name_is_valid_only_for_a_job_of_a_pod_group() -> None:
    """Whether queueName is required comes from the annotations, not the spec: the memo tells them apart."""
    doc = samples.workload()
    del doc["spec"]["queueName"]  # type: ignore[attr-defined]
    grouped = {**doc, "metadata": {"name": "g", "namespace": "team-a",
                                   "annotations": {"scheduling.k8s.io/group-name": "pg"}}}
    for attempt in range(2):
        assert _decode_doc(grouped, f"g{attempt}.json").queue_name == ""
        with pytest.raises(ManifestError, match="spec.queueName: required"):
            _decode_doc(doc, f"plain{attempt}.json")


def test_a_status_problem_is_reported_after_a_shared_spec_too() -> None:
    doc = samples.workload()
    workload("first")  # its spec is decoded and shared
    for attempt in range(2):
        bad = {**doc, "metadata": {"name": f"s{attempt}", "namespace": "team-a"},
               "status": {"conditions": "not a list"}}
        with pytest.raises(ManifestError, match="status.conditions"):
            _decode_doc(bad, f"s{attempt}.json")
