"""Timers come from a deadline heap: a tick costs in proportion to what is due."""

from __future__ import annotations

import json

import pytest

from sluicegate.controller import manager as manager_module
from sluicegate.controller.manager import Manager
from sluicegate.controller.store.memory import MemoryStore
from sluicegate.controller.timers import BACKOFF, EVICTION, RETENTION, Deadlines
from sluicegate.manifest import parse_text
from sluicegate.manifest.loader import RawDocument
from sluicegate.model.names import workload_key

from .test_manager import QUEUES, settle, states


def test_only_the_latest_deadline_of_a_timer_counts() -> None:
    d = Deadlines()
    a, b = workload_key("ns", "a"), workload_key("ns", "b")
    d.arm(EVICTION, a, 10.0)
    d.arm(EVICTION, a, 30.0)  # moved later: the entry at 10 is stale
    d.arm(RETENTION, b, 5.0)
    d.arm(BACKOFF, b, 20.0)
    d.disarm(RETENTION, b)
    assert d.pop_due(15.0) == []
    # Backoffs fire before evictions (as the tick always did), whatever their deadlines.
    assert d.pop_due(40.0) == [(BACKOFF, b, 20.0), (EVICTION, a, 30.0)]
    assert d.pop_due(100.0) == [] and len(d) == 0


def test_stale_entries_do_not_pile_up() -> None:
    d = Deadlines()
    key = workload_key("ns", "a")
    for i in range(10_000):
        d.arm(EVICTION, key, float(i))
    assert len(d._heap) < 300


class Clock:
    def __init__(self) -> None:
        self.t = 1_000.0

    def __call__(self) -> float:
        return self.t


def limited(name: str, seconds: int) -> RawDocument:
    body = {
        "apiVersion": "sluicegate.io/v1beta2", "kind": "Workload", "metadata": {"name": name, "namespace": "default"},
        "spec": {"queueName": "lq", "maximumExecutionTimeSeconds": seconds, "podSets": [{"name": "main", "count": 1,
                 "template": {"spec": {"containers": [{"name": "c", "command": ["true"],
                                                       "resources": {"requests": {"cpu": "10m"}}}]}}}]},
    }
    return parse_text(json.dumps(body), name, fmt="json")[0]


def test_a_tick_looks_only_at_the_workloads_whose_timer_is_due(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    m = Manager(MemoryStore(), clock=clock, placement=False)
    m.apply(parse_text(QUEUES % {"strategy": "BestEffortFIFO"}, "queues.yaml"))
    for i in range(100):
        m.create_workload(limited(f"w{i:03d}", 60 if i == 7 else 3_600))
    settle(m, bound=200)
    names = [f"w{i:03d}" for i in range(100)]
    assert set(states(m, names).values()) == {"Admitted"}
    checked: list[str] = []
    real = manager_module.due_eviction

    def counting(wl, now, wfpr):  # type: ignore[no-untyped-def]
        checked.append(wl.name)
        return real(wl, now, wfpr)

    monkeypatch.setattr(manager_module, "due_eviction", counting)
    m.tick()
    assert checked == []  # nothing due: no admitted workload is looked at
    clock.t += 61
    m.tick()
    assert checked == ["w007"]
    assert states(m, ["w007", "w008"]) == {"w007": "Inactive", "w008": "Admitted"}
