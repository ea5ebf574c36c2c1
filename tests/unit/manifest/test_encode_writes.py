"""A workload's successive writes, encoded from what was kept for it, are json.dumps's bytes of ``encode``.

``encode_json`` keeps, per workload, its head's JSON, its conditions' and admission's, and its pods';
each write encodes what changed and splices in the rest.  Whatever a sequence of writes changes (the
conditions appended, replaced, dropped; the admission set, kept, changed, cleared; pods reported; the
rarer status fields set and cleared; the workload finished, or finished and written again; its head
changed), every write must be the very bytes the reference gives: ``json.dumps(encode(obj))``, encoded
from the plain document, which shares nothing with those paths.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import random
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sluicegate.manifest import encode
from sluicegate.manifest.encode import EncodedObject, encode_json
from sluicegate.model import Admission, Condition, PodSetAssignment, Workload
from sluicegate.model.pods import PodRecord
from sluicegate.model.workloads import RequeueState, WorkloadStatus

from .test_roundtrip import workload

encode_module = importlib.import_module("sluicegate.manifest.encode")  # the package's ``encode`` is the function


def _reference(obj: Workload) -> bytes:
    return json.dumps(encode(obj), separators=(",", ":")).encode()


def _same(obj: Workload) -> None:
    enc = encode_json(obj)
    assert enc.body == _reference(obj)
    doc = encode(obj)
    doc["metadata"] = {**doc["metadata"], "resourceVersion": "12"}  # type: ignore[dict-item]
    assert enc.with_resource_version(12) == json.dumps(doc, separators=(",", ":")).encode()


_TEXTS = st.sampled_from(["", "x", "Quota reserved in ClusterQueue cq-5", 'naïve "quoted"\n', ',"phase":"Running"',
                          "\x00\u2028", "]},{"])
_TIMES = st.sampled_from([1_700_000_000.0, 1_700_000_000.0066931, 1_700_000_000.25, 0.1 + 0.2, 5, 1e12 / 7])


def _admission(cq: str, count: int) -> Admission:
    return Admission(cluster_queue=cq, pod_set_assignments=(  # type: ignore[arg-type]
        PodSetAssignment(name="main", flavors={"cpu": "default"}, resource_usage={"cpu": 1000 * count},  # type: ignore[dict-item]
                         count=count),))


_SHARED_ADMISSIONS = (_admission("cq-a", 1), _admission("cq-b", 2))


@st.composite
def _steps(draw: st.DrawFn) -> list[tuple[str, Any]]:
    step = st.one_of(
        st.tuples(st.just("append"), st.tuples(st.sampled_from(["QuotaReserved", "Admitted", "PodsReady", "Finished",
                                                                 "Evicted"]),
                                               st.sampled_from(["True", "False"]), _TEXTS, _TIMES)),
        st.tuples(st.just("replace"), st.tuples(st.integers(0, 5), _TEXTS, _TIMES)),
        st.tuples(st.just("drop"), st.integers(0, 5)),
        st.tuples(st.just("same-values"), st.integers(0, 5)),  # an equal record, not the same one
        st.tuples(st.just("admission"), st.integers(0, 3)),
        st.tuples(st.just("report"), st.tuples(st.integers(0, 3), st.sampled_from(["Running", "Succeeded", "Failed"]),
                                               _TEXTS, st.sampled_from([None, 1_700_000_001.5, 7]),
                                               st.sampled_from([None, 0, 137]))),
        st.tuples(st.just("pods"), st.integers(0, 3)),
        st.tuples(st.just("rare"), st.integers(0, 6)),
        st.tuples(st.just("head"), st.integers(0, 3)),
    )
    return draw(st.lists(step, min_size=1, max_size=14))


def _pod(i: int) -> PodRecord:
    return PodRecord(uid=f"u{i}", name=f"w-main-{i}", pod_set="main", index=i, node="n1", requests={"cpu": 1000})


def _apply(obj: Workload, kind: str, args: Any) -> Workload:
    st_ = obj.status
    conditions = st_.conditions
    if kind == "append":
        type_, truth, message, at = args
        return replace(obj, status=replace(st_, conditions=conditions + (Condition(type_, truth, "R", message, at),)))
    if kind in ("replace", "drop", "same-values"):
        if not conditions:
            return obj
        i = (args[0] if kind == "replace" else args) % len(conditions)
        if kind == "replace":
            new: tuple[Condition, ...] = (replace(conditions[i], message=args[1], last_transition_time=args[2]),)
        elif kind == "same-values":
            new = (dataclasses.replace(conditions[i]),)
        else:
            new = ()
        return replace(obj, status=replace(st_, conditions=conditions[:i] + new + conditions[i + 1:]))
    if kind == "admission":
        choice = [None, *_SHARED_ADMISSIONS, _admission("cq-new", 3)][args]
        return replace(obj, status=replace(st_, admission=choice))
    if kind == "report":
        if not st_.pods:
            return obj
        i, phase, message, started, code = args
        i %= len(st_.pods)
        pod = replace(st_.pods[i], phase=phase, message=message, started_at=started, exit_code=code,
                      ready=phase == "Running")
        return replace(obj, status=replace(st_, pods=st_.pods[:i] + (pod,) + st_.pods[i + 1:]))
    if kind == "pods":
        return replace(obj, status=replace(st_, pods=tuple(_pod(i) for i in range(args))))
    if kind == "rare":
        rare: list[dict[str, Any]] = [
            {"requeue_state": RequeueState(count=1, requeue_at=1_700_000_100.0)}, {"reclaimable_pods": {"main": 1}},
            {"accumulated_past_execution_time_seconds": 9}, {"extra": {"note": "x"}}, {"last_pods": (_pod(7),)},
            {"deleting": True}, {"terminate": ("Failed", "DeadlineExceeded")},
        ]
        field, value = next(iter(rare[args].items()))
        default = getattr(WorkloadStatus(), field)
        return replace(obj, status=replace(st_, **{field: default if getattr(st_, field) == value else value}))
    # head
    return [replace(obj, labels={"team": "b"}), replace(obj, generation=obj.generation + 1),
            replace(obj, uid=obj.uid + "-again"), replace(obj, priority=obj.priority + 1)][args]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=_steps(), name=st.sampled_from(["enc-a", "enc-b"]), seed=st.integers(0, 3))
def test_every_write_of_a_workload_is_json_dumps_whatever_changed(steps: list[tuple[str, Any]], name: str,
                                                                  seed: int) -> None:
    base = workload(random.Random(f"json-Workload-{seed}"))
    obj = replace(base, name=name, status=WorkloadStatus())
    _same(obj)
    for kind, args in steps:
        obj = _apply(obj, kind, args)
        _same(obj)
        _same(obj)  # the same object again: all from what was kept


def test_a_workloads_four_writes_are_json_dumps(monkeypatch: pytest.MonkeyPatch) -> None:
    """Created, admitted (two conditions of one time, a shared admission, its first pod), running, finished: the
    life of most workloads; finished, what was kept for it goes."""
    monkeypatch.setattr(encode_module, "_workload_heads", type(encode_module._workload_heads)())
    monkeypatch.setattr(encode_module, "_pod_lists", type(encode_module._pod_lists)())
    created = replace(workload(random.Random("json-Workload-5")), name="life", status=WorkloadStatus())
    ref = (created.namespace, created.name)
    _same(created)
    now = 1_700_000_000.026173
    admitted = replace(created, status=replace(created.status, conditions=(
        Condition("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cq-a", now),
        Condition("Admitted", "True", "Admitted", "The workload is admitted", now)),
        admission=_SHARED_ADMISSIONS[0], pods=(_pod(0),)))
    _same(admitted)
    pod = replace(_pod(0), phase="Running", ready=True, started_at=1_700_000_000.0663319, qos_class="Burstable")
    running = replace(admitted, status=replace(admitted.status, conditions=admitted.status.conditions + (
        Condition("PodsReady", "True", "PodsReady", "All pods reached readiness", 1_700_000_000.0669312),),
        pods=(pod,)))
    _same(running)
    assert ref in encode_module._workload_heads and ref in encode_module._pod_lists
    done = replace(pod, phase="Succeeded", ready=False, exit_code=0, finished_at=1_700_000_000.0864112)
    finished = replace(running, status=replace(running.status, conditions=running.status.conditions + (
        Condition("Finished", "True", "Succeeded", "Job finished successfully", 1_700_000_000.0870106),),
        pods=(done,)))
    _same(finished)
    assert ref not in encode_module._workload_heads and ref not in encode_module._pod_lists
    _same(finished)


def test_a_condition_after_finished_leaves_the_bytes_alone() -> None:
    """Only the last condition is looked at for Finished: one after it keeps the workload's entries (memory,
    until they are the oldest), never other bytes."""
    base = replace(workload(random.Random("json-Workload-6")), name="after-finished")
    fin = Condition("Finished", "True", "Succeeded", "done", 1_700_000_009.0)
    obj = replace(base, status=replace(base.status, conditions=(fin,)))
    _same(obj)
    obj = replace(obj, status=replace(obj.status, conditions=(fin, Condition("Evicted", "True", "R", "m", 2.5))))
    _same(obj)
    _same(replace(obj, status=replace(obj.status, conditions=obj.status.conditions[1:])))


def test_condition_heads_are_bounded_and_keyed_by_every_text(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(encode_module, "_CONDITION_HEADS_SIZE", 3)
    monkeypatch.setattr(encode_module, "_condition_heads", type(encode_module._condition_heads)())
    conditions = [Condition(t, s, r, m, 1_700_000_000.5) for t in ("A", "B") for s in ("True", "False")
                  for r in ("R", "") for m in ("m", 'q"\n')]
    for c in conditions * 2:
        assert encode_module._condition_json(c) == json.dumps(encode_module._condition(c), separators=(",", ":"))
        assert len(encode_module._condition_heads) <= 3


def test_encoded_object_is_made_as_dataclass_makes_it() -> None:
    """slot_init's __init__: the same values as the dataclass's own, and still frozen."""
    made = EncodedObject(b'{"metadata":{}}', 13)
    original = object.__new__(EncodedObject)
    EncodedObject.__dataclass_init__(original, b'{"metadata":{}}', 13)  # type: ignore[attr-defined]
    assert made == original and hash(made) == hash(original)
    assert made.with_resource_version(4) == b'{"metadata":{"resourceVersion":"4"}}'
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.body = b""  # type: ignore[misc]
