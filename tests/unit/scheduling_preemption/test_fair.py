"""Fair-sharing preemption (Kueue ``preemption_fair_test.go``, TestFairPreemptions).

Kueue's current defaults are assumed: FairSharingPreemptWithinNominal is on,
so a preemptor that stays within its nominal quota reclaims it regardless of
shares (reason InCohortReclamation).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from sluicegate.controller.scheduling.cycle import IN_CLUSTER_QUEUE, IN_COHORT_FAIR_SHARING, IN_COHORT_RECLAMATION
from sluicegate.controller.scheduling.preemption import Preemptor
from sluicegate.controller.scheduling.snapshot import AdmittedWorkload
from sluicegate.model import ClusterQueueName, ClusterQueueSpec, CohortSpec, Workload
from tests.builders import Policy, Qty, cluster_queue, cohort, workload

from .builders import admitted, assignment, overlay_state, reasons, snapshot

CQ = IN_CLUSTER_QUEUE
FAIR = IN_COHORT_FAIR_SHARING
RECLAIM = IN_COHORT_RECLAMATION
LE_FINAL = "LessThanOrEqualToFinalShare"
LT_INITIAL = "LessThanInitialShare"


def base_queues() -> list[ClusterQueueSpec]:
    policy: Policy = {"within": "LowerPriority", "reclaim": "Any", "borrow_within": "LowerPriority", "threshold": -3}
    return [
        *(cluster_queue(n, cohort="all", quota={"default": {"cpu": 3}}, **policy) for n in "abc"),
        cluster_queue("preemptible", cohort="all", quota={"default": {"cpu": 0}}),
    ]


def weighted_queues(weights: dict[str, Qty]) -> list[ClusterQueueSpec]:
    return [
        cluster_queue(n, cohort="all", quota={"default": {"cpu": 3}}, within="LowerPriority", reclaim="Any",
                      weight=w)
        for n, w in weights.items()
    ]


@dataclass(frozen=True)
class Case:
    id: str
    admitted: Sequence[AdmittedWorkload]
    incoming: Workload
    cq: str
    want: set[tuple[str, str]]
    cqs: Sequence[ClusterQueueSpec] = field(default_factory=base_queues)
    cohorts: Sequence[CohortSpec] = ()
    strategies: Sequence[str] | None = None
    flavor: str = "default"


def units(cq: str, *names: str, priority: int = 0, flavor: str = "default") -> list[AdmittedWorkload]:
    return [admitted(n, cq, {"cpu": 1}, priority=priority, flavor=flavor) for n in names]


A = admitted


def W(name: str, cpu: Qty = 1, priority: int = 0) -> Workload:
    return workload(name, requests={"cpu": cpu}, priority=priority)


CASES = [
    Case(
        "reclaim nominal from user using the most",
        units("a", "a1", "a2", "a3") + units("b", "b1", "b2", "b3", "b4", "b5") + units("c", "c1"),
        W("c_incoming"), "c", {("b1", RECLAIM)},
    ),
    Case(
        "can reclaim from queue using less, if taking from the queue using the most isn't enough",
        [A("a1", "a", {"cpu": 3}), A("a2", "a", {"cpu": 1}), A("b1", "b", {"cpu": 2}), A("b2", "b", {"cpu": 3})],
        W("c_incoming", 3), "c", {("a1", RECLAIM)},
    ),
    Case(
        "reclaim borrowable quota from user using the most",
        units("a", "a1", "a2", "a3") + units("b", "b1", "b2", "b3", "b4", "b5") + units("c", "c1"),
        W("a_incoming"), "a", {("b1", FAIR)},
    ),
    Case(
        "preempt one from each CQ borrowing",
        [A("a1", "a", {"cpu": "0.5"}), A("a2", "a", {"cpu": "0.5"}), A("a3", "a", {"cpu": 3}),
         A("b1", "b", {"cpu": "0.5"}), A("b2", "b", {"cpu": "0.5"}), A("b3", "b", {"cpu": 3})],
        W("c_incoming", 2), "c", {("a1", RECLAIM), ("b1", RECLAIM)},
    ),
    Case(
        "can't preempt when everyone under nominal",
        units("a", "a1", "a2", "a3") + units("b", "b1", "b2", "b3") + units("c", "c1", "c2", "c3"),
        W("c_incoming"), "c", set(),
    ),
    Case(
        "can't preempt when it would switch the imbalance",
        units("a", "a1", "a2", "a3") + units("b", "b1", "b2", "b3", "b4", "b5"),
        W("a_incoming", 2), "a", set(),
    ),
    Case(
        "can preempt lower priority workloads from same CQ",
        units("a", "a1_low", "a2_low", priority=-1) + units("a", "a3", "a4") + units("b", "b1", "b2", "b3", "b4", "b5"),
        W("a_incoming", 2), "a", {("a1_low", CQ), ("a2_low", CQ)},
    ),
    Case(
        "can preempt a combination of same CQ and highest user",
        units("a", "a_low", priority=-1) + units("a", "a2", "a3") + units("b", "b1", "b2", "b3", "b4", "b5", "b6"),
        W("a_incoming", 2), "a", {("a_low", CQ), ("b1", FAIR)},
    ),
    Case(
        "preempt huge workload if there is no other option, as long as the target CQ gets a lower share",
        [A("b1", "b", {"cpu": 9})],
        W("a_incoming", 2), "a", {("b1", RECLAIM)},
    ),
    Case(
        "can't preempt huge workload if the incoming is also huge",
        [A("a1", "a", {"cpu": 2}), A("b1", "b", {"cpu": 7})],
        W("a_incoming", 5), "a", set(),
    ),
    Case(
        "can't preempt 2 smaller workloads if the incoming is huge",
        [A("b1", "b", {"cpu": 2}), A("b2", "b", {"cpu": 2}), A("b3", "b", {"cpu": 3})],
        W("a_incoming", 6), "a", set(),
    ),
    Case(
        "preempt from target and others even if over nominal",
        [A("a1_low", "a", {"cpu": 2}, priority=-1), A("a2_low", "a", {"cpu": 1}, priority=-1),
         A("b1", "b", {"cpu": 3}), A("b2", "b", {"cpu": 3})],
        W("a_incoming", 4), "a", {("a1_low", CQ), ("b1", FAIR)},
    ),
    Case(
        # b1 would also pass rule S2-b, but S2-a finds b2 first.
        "prefer to preempt workloads that don't make the target CQ have the biggest share",
        [A("b1", "b", {"cpu": 2}), A("b2", "b", {"cpu": 1}), A("b3", "b", {"cpu": 2}), A("c1", "c", {"cpu": 1})],
        W("a_incoming", "3.5"), "a", {("b2", FAIR)},
    ),
    Case(
        "preempt from different cluster queues if the end result has a smaller max share",
        [A("b1", "b", {"cpu": 2}), A("b2", "b", {"cpu": "2.5"}),
         A("c1", "c", {"cpu": 2}), A("c2", "c", {"cpu": "2.5"})],
        W("a_incoming", "3.5"), "a", {("b1", FAIR), ("c1", FAIR)},
    ),
    Case(
        "scenario above does not flap",
        [A("a1", "a", {"cpu": "3.5"}), A("b2", "b", {"cpu": "2.5"}), A("c2", "c", {"cpu": "2.5"})],
        W("b_incoming", 2), "b", set(),
    ),
    Case(
        "cannot preempt if it would make the candidate CQ go under nominal after preempting one element",
        [A("b1", "b", {"cpu": 3}), A("b2", "b", {"cpu": 3}), A("c1", "c", {"cpu": 3})],
        W("a_incoming", 4), "a", set(),
    ),
    Case(
        # borrowWithinCohort plays no part in fair sharing.
        "workloads under priority threshold not capriciously preempted",
        units("a", "a1", "a2", "a3") + units("b", "b1", "b2", "b3")
        + units("preemptible", "preemptible1", "preemptible2", "preemptible3", priority=-3),
        W("a_incoming", 2), "a", set(),
    ),
    Case(
        "LessThanInitialShare alone: preempt lower priority first, even if big",
        [A("a1", "a", {"cpu": 3}), A("b_low", "b", {"cpu": 5}), A("b_high", "b", {"cpu": 1}, priority=1)],
        W("a_incoming"), "a", {("b_low", FAIR)}, strategies=[LT_INITIAL],
    ),
    Case(
        "LessThanOrEqualToFinalShare alone: preempt the workload that doesn't transfer the imbalance",
        [A("a1", "a", {"cpu": 3}), A("b_low", "b", {"cpu": 5}), A("b_high", "b", {"cpu": 1}, priority=1)],
        W("a_incoming"), "a", {("b_high", FAIR)}, strategies=[LE_FINAL],
    ),
    Case(
        "CQ with higher weight can preempt more",
        units("a", "a1", "a2", "a3") + units("b", "b1", "b2", "b3", "b4", "b5", "b6"),
        W("a_incoming", 2), "a", {("b1", FAIR), ("b2", FAIR)},
        cqs=weighted_queues({"a": 2, "b": 1, "c": 1}),
    ),
    Case(
        "can preempt anything borrowing from CQ with 0 weight",
        units("a", "a1", "a2", "a3") + units("b", "b1", "b2", "b3", "b4", "b5", "b6"),
        W("a_incoming", 3), "a", {("b1", FAIR), ("b2", FAIR), ("b3", FAIR)},
        cqs=weighted_queues({"a": 1, "b": 0, "c": 1}),
    ),
    Case(
        "can't preempt nominal from CQ with 0 weight",
        units("a", "a1", "a2", "a3") + units("b", "b1", "b2", "b3"),
        W("a_incoming"), "a", set(),
        cqs=weighted_queues({"a": 1, "b": 0}),
    ),
    Case(
        "can't preempt nominal from Cohort with 0 weight",
        units("right-cq", "right-1"),
        W("left-1"), "left-cq", set(),
        cqs=[cluster_queue("left-cq", cohort="root", quota={"default": {"cpu": 0}}, reclaim="Any"),
             cluster_queue("right-cq", cohort="right-cohort", quota={"default": {"cpu": 0}}, reclaim="Any", weight=0)],
        cohorts=[cohort("right-cohort", parent="root", quota={"default": {"cpu": 1}}, weight=0)],
    ),
    Case(
        "can preempt within cluster queue when no cohort",
        units("a", "a1"),
        W("a_incoming", priority=1000), "a", {("a1", CQ)},
        cqs=[cluster_queue("a", quota={"default": {"cpu": 1}}, within="LowerPriority")],
    ),
    Case(
        #                ROOT(20,5,20)
        #             /       |         \
        #       LEFT(5,5,7)  c(5,1,1)   RIGHT(10,5,7)
        #       /       \               /      \
        #     a(0,1,1)    b(5,1,1)   d(5,1,1)    e(5,1,1)
        # (usage, quota, subtree quota). Weight 2 on a and LEFT lets a reach
        # into every queue; e's weight 0.99 makes the d/e choice deterministic.
        "hierarchical preemption through almost-LCAs",
        [admitted(f"{q_}{i}", q_, {"cpu": 1}, priority=i) for q_ in "bcde" for i in range(1, 6)],
        W("unit", 5), "a",
        {("b1", FAIR), ("b2", FAIR), ("c1", FAIR), ("c2", FAIR), ("e1", FAIR)},
        cqs=[cluster_queue("a", cohort="LEFT", quota={"default": {"cpu": 1}}, reclaim="Any", weight=2),
             cluster_queue("b", cohort="LEFT", quota={"default": {"cpu": 1}}),
             cluster_queue("c", cohort="ROOT", quota={"default": {"cpu": 1}}),
             cluster_queue("d", cohort="RIGHT", quota={"default": {"cpu": 1}}),
             cluster_queue("e", cohort="RIGHT", quota={"default": {"cpu": 1}}, weight="0.99")],
        cohorts=[cohort("ROOT", quota={"default": {"cpu": 5}}),
                 cohort("LEFT", parent="ROOT", quota={"default": {"cpu": 5}}, weight=2),
                 cohort("RIGHT", parent="ROOT", quota={"default": {"cpu": 5}})],
    ),
    Case(
        #        ROOT
        #      /      \
        #  a(3,5,5)   RIGHT(1,1,1)
        #                 |
        #              b(1,0,0)
        "borrowing cq in non-borrowing cohort is protected",
        units("a", "a1", "a2", "a3", priority=-1) + units("b", "b1", priority=-1),
        W("unit", 5), "a", {("a1", CQ), ("a2", CQ), ("a3", CQ)},
        cqs=[cluster_queue("a", cohort="ROOT", quota={"default": {"cpu": 5}}, reclaim="Any", within="LowerPriority",
                           weight=10),
             cluster_queue("b", cohort="RIGHT", weight="0.1")],
        cohorts=[cohort("ROOT"), cohort("RIGHT", parent="ROOT", quota={"default": {"cpu": 1}}, weight="0.1")],
    ),
    Case(
        "forced to preempt within clusterqueue because borrowing workload too important",
        units("a", "a1", "a2", "a3", priority=-1) + [A("b1", "b", {"cpu": 4}, priority=100)],
        W("unit", 4), "a", {("a1", CQ), ("a2", CQ), ("a3", CQ)},
        cqs=[cluster_queue("a", cohort="ROOT", quota={"default": {"cpu": 5}}, reclaim="LowerPriority",
                           within="LowerPriority", weight=10),
             cluster_queue("b", cohort="RIGHT", weight="0.1")],
        cohorts=[cohort("ROOT"), cohort("RIGHT", parent="ROOT", quota={"default": {"cpu": 3}}, weight="0.1")],
    ),
    Case(
        # Preemptor and target are compared at their almost-LCAs A and B;
        # A's weight 1.01 against B's 0.99 decides it.
        "deep preemption",
        units("b", "b1"),
        W("a1"), "a", {("b1", FAIR)},
        cqs=[cluster_queue("a", cohort="AAA", quota={"default": {"cpu": 0}}, reclaim="Any"),
             cluster_queue("b", cohort="BBB", quota={"default": {"cpu": 0}})],
        cohorts=[cohort("ROOT"), cohort("A", parent="ROOT", weight="1.01"), cohort("AA", parent="A"),
                 cohort("AAA", parent="AA"), cohort("B", parent="ROOT", weight="0.99"), cohort("BB", parent="B"),
                 cohort("BBB", parent="BB"), cohort("C", parent="ROOT"), cohort("CC", parent="C"),
                 cohort("CCC", parent="CC"), cohort("CCCC", parent="CCC", quota={"default": {"cpu": 1}})],
    ),
    Case(
        "cq with zero weight can reclaim nominal quota",
        units("b", "b1"),
        W("a1"), "a", {("b1", RECLAIM)},
        cqs=[cluster_queue("a", cohort="ROOT", quota={"default": {"cpu": 1}}, reclaim="Any", weight=0),
             cluster_queue("b", cohort="ROOT", quota={"default": {"cpu": 0}})],
    ),
    Case(
        # a stays within its own (zero) nominal quota only by borrowing from
        # A, so the share comparison decides, at A vs b.
        "cohort with zero weight can reclaim nominal quota",
        units("b", "b1"),
        W("a1"), "a", {("b1", FAIR)},
        cqs=[cluster_queue("a", cohort="A", quota={"default": {"cpu": 0}}, reclaim="Any", weight=0),
             cluster_queue("b", cohort="ROOT", quota={"default": {"cpu": 0}})],
        cohorts=[cohort("A", parent="ROOT", quota={"default": {"cpu": 1}}, weight=0)],
    ),
    Case(
        # a is within nominal on "premium" although its aggregate share is high.
        "nominal first: workload within nominal can preempt despite high aggregate DRS",
        units("a", "a_prem1", "a_prem2", flavor="premium")
        + units("a", "a_cheap1", "a_cheap2", "a_cheap3", "a_cheap4", "a_cheap5", flavor="cheap")
        + units("b", "b_prem1", flavor="premium"),
        W("a_incoming"), "a", {("b_prem1", RECLAIM)},
        cqs=[cluster_queue("a", cohort="all", quota={"premium": {"cpu": 3}, "cheap": {"cpu": 0}}, reclaim="Any"),
             cluster_queue("b", cohort="all", quota={"premium": {"cpu": 0}, "cheap": {"cpu": 6}})],
        flavor="premium",
    ),
]


def _run(case: Case) -> set[tuple[str, str]]:
    snap = snapshot(cqs=case.cqs, cohorts=case.cohorts, admitted=case.admitted, fair=True, strategies=case.strategies)
    before = overlay_state(snap)
    cpu = case.incoming.pod_sets[0].requests["cpu"]
    targets = Preemptor().get_targets(
        workload=case.incoming,
        cq=ClusterQueueName(case.cq),
        assignment=assignment({"cpu": (case.flavor, f"{cpu}m")}),
        snapshot=snap,
    )
    assert overlay_state(snap) == before
    return reasons(targets)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_fair_preemption(case: Case) -> None:
    assert _run(case) == case.want
