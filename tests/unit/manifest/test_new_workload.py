"""The typed creation item: decoded exactly as its equivalent document, each distinct spec only once.

A NewWorkload is a Workload document's metadata as fields and its spec as
JSON text.  Whatever the item holds, the outcome must be the document's: the
same Workload, or the same error naming the same field; the memo of decoded
specs must never let through what the document's path would refuse.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sluicegate.client import _typed
from sluicegate.manifest import ManifestError, decode
from sluicegate.manifest import new_workload as nw
from sluicegate.manifest.loader import parse_text
from sluicegate.manifest.new_workload import WORKLOAD_FIELDS, NewWorkload, decode_new_workload
from sluicegate.model.workloads import Workload

from . import samples


def item(doc: dict[str, Any], source: str = "bulk#1") -> NewWorkload:
    meta = doc.get("metadata", {})
    return NewWorkload(
        source=source, namespace=meta.get("namespace", ""), name=meta.get("name", ""),
        spec=json.dumps(doc["spec"]).encode() if "spec" in doc else b"",
        labels=as_json(meta.get("labels")), annotations=as_json(meta.get("annotations")),
        api_version=doc.get("apiVersion", ""),
    )


def as_json(value: object) -> bytes:
    return json.dumps(value).encode() if value else b""


def outcome(fn: Any, *args: Any, **kwargs: Any) -> object:
    try:
        return fn(*args, **kwargs)
    except ManifestError as exc:
        return f"error: {exc}"


def document_outcome(doc: dict[str, Any], source: str = "bulk#1") -> object:
    return outcome(decode, parse_text(json.dumps(doc), "bulk", fmt="json")[0], source=source)


def test_a_repeated_spec_is_decoded_once_and_shared(monkeypatch: pytest.MonkeyPatch) -> None:
    doc = samples.workload()
    first = decode_new_workload(item(doc))
    assert first == decode(copy.deepcopy(doc))

    def no_parse(*args: object) -> object:
        raise AssertionError("a spec already decoded was parsed again")

    monkeypatch.setattr(nw, "parse_json_part", no_parse)
    doc["metadata"] = {"name": "other", "namespace": "team-b", "labels": {"run": "2"}}
    second = decode_new_workload(item(doc))
    assert second == decode(copy.deepcopy(doc))
    assert second.pod_sets is first.pod_sets and (second.name, second.namespace) == ("other", "team-b")


def test_an_invalid_spec_names_the_field_as_the_document_does_every_time() -> None:
    doc = samples.workload()
    doc["spec"]["podSets"][0]["count"] = -1
    for _ in range(2):
        with pytest.raises(ManifestError) as info:
            decode_new_workload(item(doc))
        assert "spec.podSets[0].count: must be non-negative, got -1" in str(info.value)
        assert str(info.value) == document_outcome(doc).removeprefix("error: ")  # type: ignore[union-attr]


def test_bad_metadata_with_a_known_spec_is_refused_as_the_document_is() -> None:
    doc = samples.workload()
    decode_new_workload(item(doc))  # the spec is known now
    for meta in ({"name": "Bad_Name"}, {"name": "ok", "namespace": "no.dots"},
                 {"name": "ok", "labels": {"bad key!": "v"}}, {"name": "ok", "labels": {"k": "x" * 64}},
                 {"name": "ok", "annotations": {"a": "x" * (256 * 1024)}}, {"name": "ok", "labels": {"k": 1}},
                 {"name": "ok", "labels": ["k"]}, {"name": "ok", "annotations": {"a": None}}):
        doc["metadata"] = meta
        got = outcome(decode_new_workload, item(doc))
        assert isinstance(got, str) and got == document_outcome(doc), meta


def test_labels_that_do_not_parse_or_repeat_a_key_are_an_error() -> None:
    spec = json.dumps(samples.workload()["spec"]).encode()
    for labels, problem in ((b'{"k": "1", "k": "2"}', "found the key 'k' twice"), (b'{"k": ', "Expecting value")):
        wl = NewWorkload(source="s", namespace="", name="a", spec=spec, labels=labels)
        with pytest.raises(ManifestError, match=f"Workload/default/a: metadata.labels: could not parse JSON: {problem}"):
            decode_new_workload(wl)


def test_spec_text_that_does_not_parse_names_the_spec() -> None:
    for text, problem in ((b'{"queueName": "q",}', "Expecting property name"),
                          (b'{"queueName": "q", "queueName": "r"}', "found the key 'queueName' twice"),
                          (b'{"priority": NaN}', "NaN is not a JSON value")):
        with pytest.raises(ManifestError, match=f"spec: could not parse JSON: .*{problem}"):
            decode_new_workload(NewWorkload(source="s", namespace="", name="a", spec=text))


def test_the_spec_memo_tells_apart_what_decoding_depends_on() -> None:
    """A kube-batch PodGroup's Job needs no queueName: a spec valid with the annotation is not valid without."""
    doc = samples.workload()
    del doc["spec"]["queueName"]
    doc["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": "gang"}
    assert outcome(decode_new_workload, item(doc)) == document_outcome(doc)
    del doc["metadata"]["annotations"]
    got = outcome(decode_new_workload, item(doc))
    assert isinstance(got, str) and "spec.queueName" in got and got == document_outcome(doc)


NAMES = st.sampled_from(["a", "train", "x" * 254, "Bad", "", "a.b", "-a"])
LABEL_KEYS = st.sampled_from(["class", "example.com/run", "bad key", "x" * 64, "scheduling.k8s.io/group-name"])
LABEL_VALUES = st.sampled_from(["", "small", "150", "x" * 64, "bad value!"])
SPEC_CHANGES = st.sampled_from([
    {}, {"queueName": ""}, {"queueName": "Bad Queue"}, {"priority": "high"}, {"priority": 7}, {"active": 1},
    {"podSets": []}, {"podSets": "x"}, {"maximumExecutionTimeSeconds": 0}, {"unknown": True},
    {"priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"}},
])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=NAMES, namespace=st.sampled_from(["", "team-a", "Bad_NS"]),
       labels=st.dictionaries(LABEL_KEYS, LABEL_VALUES, max_size=3),
       annotations=st.dictionaries(LABEL_KEYS, LABEL_VALUES, max_size=2), change=SPEC_CHANGES,
       api=st.sampled_from(["", "kueue.x-k8s.io/v1beta1", "sluicegate.io/v1beta2", "v1"]))
def test_an_item_decodes_as_its_document_whether_or_not_its_spec_is_known(
    name: str, namespace: str, labels: dict[str, str], annotations: dict[str, str], change: dict[str, Any],
    api: str,
) -> None:
    doc = samples.workload()
    doc["spec"].update(change)
    meta: dict[str, Any] = {}
    if name:
        meta["name"] = name
    if namespace:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = labels
    if annotations:
        meta["annotations"] = annotations
    doc["metadata"] = meta
    if api:
        doc["apiVersion"] = api
    else:
        doc["apiVersion"] = "sluicegate.io/v1beta2"
    typed = NewWorkload(source="bulk#1", namespace=namespace, name=name, spec=json.dumps(doc["spec"]).encode(),
                        labels=as_json(labels), annotations=as_json(annotations), api_version=api)
    expected = document_outcome(doc)
    for _ in range(2):  # the spec unknown, then (when valid) known
        assert outcome(decode_new_workload, typed) == expected


def test_the_client_sends_a_plain_workload_document_as_a_typed_item() -> None:
    doc = samples.workload()
    doc["metadata"]["labels"] = {"class": "small"}
    t = _typed(json.dumps(doc), "jobs.json", b"")
    assert t is not None
    assert (t.api_version, t.namespace, t.name, t.labels, t.source) == (
        doc["apiVersion"], "team-a", "train", b'{"class":"small"}', "jobs.json#1")
    assert json.loads(t.spec) == doc["spec"]


@pytest.mark.parametrize("change", [
    lambda d: d.update(status={}),
    lambda d: d["metadata"].update(uid="u"),
    lambda d: d["metadata"].update(name=""),
    lambda d: d["metadata"].update(labels={"a": 1}),
    lambda d: d.update(kind="Job"),
    lambda d: d.update(spec=None),
])
def test_the_client_sends_anything_else_as_the_document(change: Any) -> None:
    doc = samples.workload()
    change(doc)
    assert _typed(json.dumps(doc), "jobs.json", b"") is None


def test_the_client_sends_documents_it_cannot_read_as_they_are() -> None:
    body = json.dumps(samples.workload())
    assert _typed(body.replace('"kind"', '"kind": "Workload", "kind"', 1), "j", b"") is None  # a repeated key
    assert _typed("kind: Workload\n", "j", b"") is None  # YAML
    assert _typed(body.replace('"train"', '"tr\\ud800ain"'), "j", b"") is None  # a lone surrogate


def test_a_spec_with_an_unknown_field_is_refused_every_time_as_a_document_too() -> None:
    """The decoder's own spec memo once kept such a spec (its unknown field was counted before the memo
    looked) and accepted it from the second document on."""
    doc = samples.workload()
    doc["spec"]["unknown"] = True
    for _ in range(2):
        with pytest.raises(ManifestError, match=r"spec.unknown: unknown field"):
            decode(copy.deepcopy(doc))


def test_a_document_without_a_source_is_named_in_errors_as_the_server_names_it() -> None:
    t = _typed(json.dumps(samples.workload()), "", b"")
    assert t is not None and t.source == "request#0#1"


def test_a_long_spec_is_decoded_each_time_and_not_kept() -> None:
    doc = samples.workload()
    doc["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["args"] = ["x" * 1000] * 20
    typed = item(doc)
    assert len(typed.spec) > nw.MEMO_MAX_TEXT
    assert decode_new_workload(typed) == decode_new_workload(typed) == decode(copy.deepcopy(doc))
    assert not any(key[1] == typed.spec for key in nw._specs)


def server_item(t: Any) -> NewWorkload:
    return NewWorkload(source=t.source, namespace=t.namespace, name=t.name, spec=t.spec, labels=t.labels,
                       annotations=t.annotations, api_version=t.api_version)


SPACES = st.sampled_from(["", " ", "\n  ", "\t", "\r\n"])


@st.composite
def written(draw: st.DrawFn) -> str:
    """A Workload document's JSON text as people and programs write it: any spacing and key order, and
    now and then a repeated key, NaN, a status, a second document or a cut."""
    doc = samples.workload()
    doc["metadata"]["labels"] = draw(st.dictionaries(st.sampled_from(["a", "b.io/c", "Bad Key"]),
                                                     st.sampled_from(["x", "", "spec", 1]), max_size=2))
    if draw(st.booleans()):
        doc["spec"]["podSets"][0]["count"] = draw(st.sampled_from([1, 0, 2.5, "3"]))

    def text(value: object) -> str:
        if isinstance(value, dict):
            items = list(value.items())
            if len(items) > 1 and draw(st.booleans()):
                items.reverse()
            pieces = [f"{draw(SPACES)}{json.dumps(k)}{draw(SPACES)}:{draw(SPACES)}{text(v)}" for k, v in items]
            if items and draw(st.integers(0, 39)) == 0:
                pieces.append(pieces[0])  # a key written twice
            return "{" + ",".join(pieces) + draw(SPACES) + "}"
        if isinstance(value, list):
            return "[" + ",".join(f"{draw(SPACES)}{text(v)}" for v in value) + draw(SPACES) + "]"
        return json.dumps(value)

    body = text(doc)
    tail = draw(st.sampled_from([" \n", "x", "{}", ']'])) if draw(st.integers(0, 5)) == 0 else ""
    body = draw(st.sampled_from(["", "", "", " "])) + body + tail
    if draw(st.integers(0, 9)) == 0:
        body = body.replace('"count": 4', '"count": NaN', 1)
    return body


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=written())
def test_a_document_the_client_sends_typed_is_created_as_the_document_is(body: str) -> None:
    t = _typed(body, "jobs.json", body.encode())
    if t is None:
        return  # it goes as the document
    try:
        (doc,) = parse_text(body, "jobs.json", fmt="json")
    except ManifestError as exc:
        raise AssertionError(f"the client sent a document the server cannot read as typed: {exc}") from None
    expected = outcome(decode, doc)
    for _ in range(2):
        assert outcome(decode_new_workload, server_item(t)) == expected


def test_the_client_sends_the_document_s_own_spec_text_when_the_spec_comes_last() -> None:
    doc = samples.workload()
    doc["metadata"]["labels"] = {"role": "spec"}  # "spec" before the spec's key: the cut is checked
    body = json.dumps(doc, indent=2)
    t = _typed(body, "j", b"")
    assert t is not None and t.spec == json.dumps(doc["spec"], indent=2).replace("\n", "\n  ").encode()
    assert outcome(decode_new_workload, server_item(t)) == outcome(decode, copy.deepcopy(doc))
    again = _typed(json.dumps({**doc, "metadata": {"name": "other"}}, indent=2), "j", b"")
    assert again is not None and again.spec == t.spec  # a spec text seen valid is not read again
    twice = body.replace('"kind"', '"spec": {}, "kind"', 1)
    assert _typed(twice, "j", b"") is None  # two specs: as the document


def test_a_known_spec_s_workload_is_made_with_its_fields_in_the_order_workload_takes_them() -> None:
    # decode_new_workload passes every field by position, in this order.
    assert tuple(f.name for f in dataclasses.fields(Workload) if f.init) == WORKLOAD_FIELDS
