"""decide_cycle's helpers: a workload's new state made without ``dataclasses.replace`` is the same value."""

from __future__ import annotations

from dataclasses import fields, replace

from sluicegate.controller.decide_cycle import with_status
from sluicegate.model.workloads import Condition, Workload, WorkloadStatus
from tests.builders import workload


def test_with_status_is_replace_of_the_status_alone() -> None:
    wl = replace(workload("w", ns="team", priority=3, created=12.5, count=2),
                 priority_class=("WorkloadPriorityClass", "high"), active=False, maximum_execution_time_seconds=60,
                 labels={"a": "b"}, annotations={"c": "d"}, generation=4)
    status = WorkloadStatus(conditions=(Condition("QuotaReserved", "False", "Pending", "waiting", 13.0),))

    got = with_status(wl, status)
    want = replace(wl, status=status)

    assert got == want and got is not wl
    assert got.status is status and wl.status is not status  # the original is untouched
    # Every field the same value, the derived key (compare=False) included.
    assert [getattr(got, f.name) for f in fields(Workload)] == [getattr(want, f.name) for f in fields(Workload)]
    assert got.key == "team/w"
