"""The preemption oracle the flavor assigner consults (Kueue ``preemption_oracle.go``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Unpack

import pytest

from sluicegate.controller.scheduling.flavors import PreemptionPossibility
from sluicegate.controller.scheduling.preemption import Preemptor
from sluicegate.controller.scheduling.snapshot import AdmittedWorkload
from sluicegate.model import ClusterQueueName, ClusterQueueSpec, FlavorName, FlavorResource
from tests.builders import Policy, cluster_queue, qty, workload

from .builders import admitted, overlay_state, snapshot


def cohort_pair(**c1_policy: Unpack[Policy]) -> list[ClusterQueueSpec]:
    return [
        cluster_queue("c1", cohort="cohort", quota={"default": {"cpu": (6, 6, None)}}, **c1_policy),
        cluster_queue("c2", cohort="cohort", quota={"default": {"cpu": (6, 6, None)}}, reclaim="Any"),
    ]


@dataclass(frozen=True)
class Case:
    id: str
    cqs: Sequence[ClusterQueueSpec]
    admitted: Sequence[AdmittedWorkload]
    cq: str
    quantity: int
    priority: int
    want: tuple[PreemptionPossibility, int]
    fair: bool = False


CASES = [
    Case(
        "own lower-priority workload: Preempt, no borrowing after",
        [cluster_queue("standalone", quota={"default": {"cpu": 6}}, within="LowerPriority")],
        [admitted("low", "standalone", {"cpu": 6}, priority=-1)],
        "standalone", 2, 1, (PreemptionPossibility.PREEMPT, 0),
    ),
    Case(
        "only other queues' workloads: Reclaim",
        cohort_pair(within="LowerPriority", reclaim="LowerPriority"),
        [admitted("c1-low", "c1", {"cpu": 3}, priority=-1), admitted("c2-mid", "c2", {"cpu": 3}),
         admitted("c2-high", "c2", {"cpu": 6}, priority=1)],
        "c1", 3, 1, (PreemptionPossibility.RECLAIM, 0),
    ),
    Case(
        "preempting its own workload while still borrowing reports the borrowing level",
        cohort_pair(within="LowerPriority", reclaim="LowerPriority"),
        [admitted("c1-med", "c1", {"cpu": 4}), admitted("c1-low", "c1", {"cpu": 4}, priority=-1)],
        "c1", 7, 1, (PreemptionPossibility.PREEMPT, 1),
    ),
    Case(
        "nothing preemptible: NoCandidates with the borrowing level of the request",
        cohort_pair(within="LowerPriority", reclaim="LowerPriority"),
        [admitted("c1-high", "c1", {"cpu": 4}, priority=5), admitted("c2-high", "c2", {"cpu": 8}, priority=5)],
        "c1", 4, 1, (PreemptionPossibility.NO_CANDIDATES, 1),
    ),
    Case(
        "fair sharing within nominal: Reclaim",
        [cluster_queue(n, cohort="all", quota={"default": {"cpu": 3}}, within="LowerPriority", reclaim="Any")
         for n in "abc"],
        [admitted(f"a{i}", "a", {"cpu": 1}) for i in range(3)] + [admitted(f"b{i}", "b", {"cpu": 1}) for i in range(5)]
        + [admitted("c1", "c", {"cpu": 1})],
        "c", 2, 0, (PreemptionPossibility.RECLAIM, 0), fair=True,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_simulate_preemption(case: Case) -> None:
    snap = snapshot(cqs=case.cqs, admitted=case.admitted, fair=case.fair)
    before = overlay_state(snap)
    oracle = Preemptor().oracle(snap)
    got = oracle.simulate_preemption(
        cq=snap.node(ClusterQueueName(case.cq)),
        workload=workload("in", priority=case.priority),
        fr=FlavorResource(FlavorName("default"), "cpu"),
        quantity=qty("cpu", case.quantity),
    )
    assert got == case.want
    assert overlay_state(snap) == before
