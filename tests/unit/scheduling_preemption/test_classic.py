"""Classic preemption: policies, heuristics, minimisation, hierarchy, lending limits.

Scenarios are ported from Kueue's ``preemption_test.go`` (TestPreemption and
TestHierarchicalPreemptions); each asserts the exact set of (victim, reason).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Unpack

import pytest

from sluicegate.controller.scheduling.cycle import (
    IN_CLUSTER_QUEUE,
    IN_COHORT_RECLAIM_WHILE_BORROWING,
    IN_COHORT_RECLAMATION,
)
from sluicegate.controller.scheduling.flavors import Assignment, Mode
from sluicegate.controller.scheduling.preemption import Preemptor
from sluicegate.controller.scheduling.snapshot import AdmittedWorkload
from sluicegate.model import ClusterQueueName, ClusterQueueSpec, CohortSpec, Workload
from tests.builders import Policy, Qty, QuotaArg, cluster_queue, cohort, workload

from .builders import admitted, assignment, overlay_state, reasons, snapshot

CQ = IN_CLUSTER_QUEUE
RECLAIM = IN_COHORT_RECLAMATION
WHILE_BORROWING = IN_COHORT_RECLAIM_WHILE_BORROWING


def default_queues() -> list[ClusterQueueSpec]:
    """Kueue's defaultClusterQueues: several independent cohorts exercising each policy."""
    lp, any_ = "LowerPriority", "Any"
    return [
        cluster_queue(
            "standalone",
            groups=[{"default": {"cpu": 6}}, {"alpha": {"memory": "3Gi"}, "beta": {"memory": "3Gi"}}],
            within=lp,
        ),
        cluster_queue("c1", cohort="cohort", quota={"default": {"cpu": (6, 6, None), "memory": ("3Gi", "3Gi", None)}},
                      within=lp, reclaim=lp),
        cluster_queue("c2", cohort="cohort", quota={"default": {"cpu": (6, 6, None), "memory": ("3Gi", "3Gi", None)}},
                      reclaim=any_),
        cluster_queue("d1", cohort="cohort-no-limits", quota={"default": {"cpu": 6, "memory": "3Gi"}},
                      within=lp, reclaim=lp),
        cluster_queue("d2", cohort="cohort-no-limits", quota={"default": {"cpu": 6, "memory": "3Gi"}}, reclaim=any_),
        cluster_queue("l1", cohort="legion", quota={"default": {"cpu": (6, 12, None), "memory": ("3Gi", "6Gi", None)}},
                      within=lp, reclaim=lp),
        cluster_queue("preventStarvation", quota={"default": {"cpu": 6}}, within="LowerOrNewerEqualPriority"),
        cluster_queue("a_standard", cohort="with_shared_cq", quota={"default": {"cpu": (1, 12, None)}},
                      reclaim=lp, borrow_within=lp, threshold=0),
        cluster_queue("b_standard", cohort="with_shared_cq", quota={"default": {"cpu": (1, 12, None)}},
                      within=lp, reclaim=any_, borrow_within=lp, threshold=0),
        cluster_queue("a_best_effort", cohort="with_shared_cq", quota={"default": {"cpu": (1, 12, None)}},
                      reclaim=lp, borrow_within=lp, threshold=0),
        cluster_queue("b_best_effort", cohort="with_shared_cq", quota={"default": {"cpu": (0, 13, None)}},
                      reclaim=lp, borrow_within=lp, threshold=0),
        cluster_queue("shared", cohort="with_shared_cq", quota={"default": {"cpu": 10}}),
        cluster_queue("lend1", cohort="cohort-lend", quota={"default": {"cpu": (6, None, 4)}}, within=lp, reclaim=lp),
        cluster_queue("lend2", cohort="cohort-lend", quota={"default": {"cpu": (6, None, 2)}}, within=lp, reclaim=lp),
        cluster_queue("a", cohort="cohort-three", quota={"default": {"cpu": 2, "memory": 2}}, within=lp, reclaim=any_),
        cluster_queue("b", cohort="cohort-three", quota={"default": {"cpu": 2, "memory": 2}}),
        cluster_queue("c", cohort="cohort-three", quota={"default": {"cpu": 2, "memory": 2}}),
    ]


@dataclass(frozen=True)
class Case:
    id: str
    admitted: Sequence[AdmittedWorkload]
    incoming: Workload
    cq: str
    assign: Assignment
    want: set[tuple[str, str]]
    cqs: Sequence[ClusterQueueSpec] = field(default_factory=default_queues)
    cohorts: Sequence[CohortSpec] = ()


def cpu(qty: Qty, flavor: str = "default") -> Assignment:
    return assignment({"cpu": (flavor, qty)})


A = admitted
W = workload

CLASSIC_CASES = [
    Case(
        "preempt lowest priority",
        [A("low", "standalone", {"cpu": 2}, priority=-1), A("mid", "standalone", {"cpu": 2}),
         A("high", "standalone", {"cpu": 2}, priority=1)],
        W("in", priority=1), "standalone", cpu(2), {("low", CQ)},
    ),
    Case(
        "preempt multiple",
        [A("low", "standalone", {"cpu": 2}, priority=-1), A("mid", "standalone", {"cpu": 2}),
         A("high", "standalone", {"cpu": 2}, priority=1)],
        W("in", priority=1), "standalone", cpu(3), {("low", CQ), ("mid", CQ)},
    ),
    Case(
        "no preemption for low priority",
        [A("low", "standalone", {"cpu": 3}, priority=-1), A("mid", "standalone", {"cpu": 3})],
        W("in", priority=-1), "standalone", cpu(1), set(),
    ),
    Case(
        "not enough low priority workloads",
        [A("low", "standalone", {"cpu": 3}, priority=-1), A("mid", "standalone", {"cpu": 3})],
        W("in"), "standalone", cpu(4), set(),
    ),
    Case(
        "some free quota, preempt low priority",
        [A("low", "standalone", {"cpu": 1}, priority=-1), A("mid", "standalone", {"cpu": 1}),
         A("high", "standalone", {"cpu": 3}, priority=1)],
        W("in", priority=1), "standalone", cpu(2), {("low", CQ)},
    ),
    Case(
        # The minimisation pass puts "low" back: "mid" alone makes room.
        "minimal set excludes low priority",
        [A("low", "standalone", {"cpu": 1}, priority=-1), A("mid", "standalone", {"cpu": 2}),
         A("high", "standalone", {"cpu": 3}, priority=1)],
        W("in", priority=1), "standalone", cpu(2), {("mid", CQ)},
    ),
    Case(
        "only preempt workloads using the chosen flavor",
        [A("low", "standalone", {"memory": "2Gi"}, flavor="alpha", priority=-1),
         A("mid", "standalone", {"memory": "1Gi"}, flavor="beta"),
         A("high", "standalone", {"memory": "1Gi"}, flavor="beta", priority=1)],
        W("in", priority=1), "standalone",
        assignment({"cpu": ("default", 1, Mode.FIT), "memory": ("beta", "2Gi")}),
        {("mid", CQ)},
    ),
    Case(
        "reclaim quota from borrower",
        [A("c1-low", "c1", {"cpu": 3}, priority=-1), A("c2-mid", "c2", {"cpu": 3}),
         A("c2-high", "c2", {"cpu": 6}, priority=1)],
        W("in", priority=1), "c1", cpu(3), {("c2-mid", RECLAIM)},
    ),
    Case(
        "reclaim quota if workload requests 0 resources for a resource at nominal quota",
        [A("c1-low", "c1", {"cpu": 3, "memory": "3Gi"}, priority=-1), A("c2-mid", "c2", {"cpu": 3}),
         A("c2-high", "c2", {"cpu": 6}, priority=1)],
        W("in", priority=1), "c1",
        assignment({"cpu": ("default", 3), "memory": ("default", 0, Mode.FIT)}),
        {("c2-mid", RECLAIM)},
    ),
    Case(
        "no workloads borrowing",
        [A("c1-high", "c1", {"cpu": 4}, priority=1), A("c2-low-1", "c2", {"cpu": 4}, priority=-1)],
        W("in", priority=1), "c1", cpu(4), set(),
    ),
    Case(
        "not enough workloads borrowing",
        [A("c1-high", "c1", {"cpu": 4}, priority=1), A("c2-low-1", "c2", {"cpu": 4}, priority=-1),
         A("c2-low-2", "c2", {"cpu": 4}, priority=-1)],
        W("in", priority=1), "c1", cpu(4), set(),
    ),
    Case(
        "preempting locally and borrowing other resources in cohort, without cohort candidates",
        [A("c1-low", "c1", {"cpu": 4}, priority=-1), A("c2-low-1", "c2", {"cpu": 4}, priority=-1),
         A("c2-high-2", "c2", {"cpu": 4}, priority=1)],
        W("in", priority=1), "c1",
        assignment({"cpu": ("default", 4), "memory": ("default", "5Gi")}),
        {("c1-low", CQ)},
    ),
    Case(
        "preempting locally and borrowing same resource in cohort",
        [A("c1-med", "c1", {"cpu": 4}), A("c1-low", "c1", {"cpu": 4}, priority=-1),
         A("c2-low-1", "c2", {"cpu": 4}, priority=-1)],
        W("in", priority=1), "c1", cpu(4), {("c1-low", CQ)},
    ),
    Case(
        "preempting locally and borrowing same resource in cohort; no borrowing limit in the cohort",
        [A("d1-med", "d1", {"cpu": 4}), A("d1-low", "d1", {"cpu": 4}, priority=-1),
         A("d2-low-1", "d2", {"cpu": 4}, priority=-1)],
        W("in", priority=1), "d1", cpu(4), {("d1-low", CQ)},
    ),
    Case(
        "preempting locally and borrowing other resources in cohort, with cohort candidates",
        [A("c1-med", "c1", {"cpu": 4}), A("c2-low-1", "c2", {"cpu": 5}, priority=-1),
         A("c2-low-2", "c2", {"cpu": 1}, priority=-1), A("c2-low-3", "c2", {"cpu": 1}, priority=-1)],
        W("in", priority=1), "c1",
        assignment({"cpu": ("default", 2), "memory": ("default", "5Gi")}),
        {("c1-med", CQ)},
    ),
    Case(
        "preempting locally and not borrowing same resource in 1-queue cohort",
        [A("l1-med", "l1", {"cpu": 4}), A("l1-low", "l1", {"cpu": 2}, priority=-1)],
        W("in", priority=1), "l1", cpu(4), {("l1-med", CQ)},
    ),
    Case(
        "reclaimWithinCohort LowerPriority: do not reclaim borrowed quota from the same priority",
        [A("c1", "c1", {"cpu": 2}), A("c2-1", "c2", {"cpu": 4}), A("c2-2", "c2", {"cpu": 4})],
        W("in"), "c1", cpu(4), set(),
    ),
    Case(
        "reclaimWithinCohort Any: reclaim borrowed quota from the same priority",
        [A("c1-1", "c1", {"cpu": 4}), A("c1-2", "c1", {"cpu": 4}, priority=1), A("c2", "c2", {"cpu": 2})],
        W("in"), "c2", cpu(4), {("c1-1", RECLAIM)},
    ),
    Case(
        "preempt from all ClusterQueues in cohort",
        [A("c1-low", "c1", {"cpu": 3}, priority=-1), A("c1-mid", "c1", {"cpu": 2}),
         A("c2-low", "c2", {"cpu": 3}, priority=-1), A("c2-mid", "c2", {"cpu": 4})],
        W("in"), "c1", cpu(4), {("c1-low", CQ), ("c2-low", RECLAIM)},
    ),
    Case(
        "withinClusterQueue Never: can't preempt workloads in the ClusterQueue",
        [A("c2-low", "c2", {"cpu": 3}, priority=-1)],
        W("in", priority=1), "c2", cpu(4), set(),
    ),
    Case(
        "each podset preempts a different flavor",
        [A("low-alpha", "standalone", {"memory": "2Gi"}, flavor="alpha", priority=-1),
         A("low-beta", "standalone", {"memory": "2Gi"}, flavor="beta", priority=-1)],
        W("in"), "standalone",
        assignment({"memory": ("alpha", "2Gi")}, {"memory": ("beta", "2Gi")}),
        {("low-alpha", CQ), ("low-beta", CQ)},
    ),
    Case(
        "withinClusterQueue LowerOrNewerEqualPriority: preempt newer workloads with the same priority",
        [A("wl1", "preventStarvation", {"cpu": 2}, priority=2),
         A("wl2", "preventStarvation", {"cpu": 2}, priority=1, created=100.0, admitted_at=101.0),
         A("wl3", "preventStarvation", {"cpu": 2}, priority=1, created=100.0, admitted_at=100.0)],
        W("in", priority=1, created=85.0), "preventStarvation", cpu(2), {("wl2", CQ)},
    ),
    Case(
        "withinClusterQueue LowerOrNewerEqualPriority: an older equal-priority workload is safe",
        [A("older", "preventStarvation", {"cpu": 6}, priority=1, created=50.0)],
        W("in", priority=1, created=85.0), "preventStarvation", cpu(2), set(),
    ),
    Case(
        "borrowWithinCohort: preempt a lower-priority workload of another queue while borrowing",
        [A("a_best_effort_low", "a_best_effort", {"cpu": 10}, priority=-1),
         A("b_best_effort_low", "b_best_effort", {"cpu": 1}, priority=-1)],
        W("in"), "a_standard", cpu(10), {("a_best_effort_low", WHILE_BORROWING)},
    ),
    Case(
        "borrowWithinCohort: no preemption above maxPriorityThreshold when still borrowing after it",
        [A("b_standard", "b_standard", {"cpu": 10}, priority=1)],
        W("in", priority=2), "a_standard", cpu(10), set(),
    ),
    Case(
        "borrowWithinCohort: preemption above maxPriorityThreshold when no borrowing remains",
        [A("b_standard", "b_standard", {"cpu": 13}, priority=1)],
        W("in", priority=2), "a_standard", cpu(1), {("b_standard", RECLAIM)},
    ),
    Case(
        "borrowWithinCohort: withinClusterQueue Never still protects the own queue",
        [A("a_standard", "a_standard", {"cpu": 13}, priority=1)],
        W("in", priority=2), "a_standard", cpu(1), set(),
    ),
    Case(
        "borrowWithinCohort: only the own queue when nothing is below the threshold",
        [A("a_standard_1", "a_standard", {"cpu": 10}, priority=1),
         A("a_standard_2", "a_standard", {"cpu": 1}, priority=1),
         A("b_standard_1", "b_standard", {"cpu": 1}, priority=1),
         A("b_standard_2", "b_standard", {"cpu": 1}, priority=2)],
        W("in", priority=3), "b_standard", cpu(1), {("b_standard_1", CQ)},
    ),
    Case(
        "borrowWithinCohort: own queue and other queues below the threshold",
        [A("b_standard_high", "b_standard", {"cpu": 10}, priority=2),
         A("b_standard_mid", "b_standard", {"cpu": 1}, priority=1),
         A("a_best_effort_low", "a_best_effort", {"cpu": 1}, priority=-1),
         A("a_best_effort_lower", "a_best_effort", {"cpu": 1}, priority=-2)],
        W("in", priority=2), "b_standard", cpu(2),
        {("b_standard_mid", CQ), ("a_best_effort_lower", WHILE_BORROWING)},
    ),
    Case(
        "lendingLimit: reclaim quota from lender",
        [A("lend1-low", "lend1", {"cpu": 3}, priority=-1), A("lend2-mid", "lend2", {"cpu": 3}),
         A("lend2-high", "lend2", {"cpu": 4}, priority=1)],
        W("in", priority=1), "lend1", cpu(3), {("lend2-mid", RECLAIM)},
    ),
    Case(
        "lendingLimit: preempt from all ClusterQueues in cohort-lend",
        [A("lend1-low", "lend1", {"cpu": 3}, priority=-1), A("lend1-mid", "lend1", {"cpu": 2}),
         A("lend2-low", "lend2", {"cpu": 3}, priority=-1), A("lend2-mid", "lend2", {"cpu": 4})],
        W("in"), "lend1", cpu(4), {("lend1-low", CQ), ("lend2-low", RECLAIM)},
    ),
    Case(
        "lendingLimit: cannot preempt beyond the requestable quota",
        [A("lend2-low", "lend2", {"cpu": 10}, priority=-1)],
        W("in"), "lend1", cpu(9), set(),
    ),
    Case(
        "target queue exhausted for the single requested resource: only its own workloads",
        [A("a1", "a", {"cpu": 1}, priority=-2), A("a2", "a", {"cpu": 1}, priority=-2),
         A("a3", "a", {"cpu": 1}, priority=-1),
         A("b1", "b", {"cpu": 1}), A("b2", "b", {"cpu": 1}), A("b3", "b", {"cpu": 1})],
        W("in"), "a", cpu(2), {("a1", CQ), ("a2", CQ)},
    ),
    Case(
        "target queue exhausted for both requested resources",
        [A(n, "a", {"cpu": 1, "memory": 1}, priority=p) for n, p in (("a1", -2), ("a2", -2), ("a3", -1))]
        + [A(n, "b", {"cpu": 1, "memory": 1}) for n in ("b1", "b2", "b3")],
        W("in"), "a", assignment({"cpu": ("default", 2), "memory": ("default", 2)}), {("a1", CQ), ("a2", CQ)},
    ),
    Case(
        "target queue exhausted for one requested resource but not the other",
        [A(n, "a", {"cpu": 1}, priority=p) for n, p in (("a1", -2), ("a2", -2), ("a3", -1))]
        + [A(n, "b", {"cpu": 1}) for n in ("b1", "b2", "b3")],
        W("in"), "a", assignment({"cpu": ("default", 2), "memory": ("default", 2)}), {("a1", CQ), ("a2", CQ)},
    ),
    Case(
        # Four candidates are taken before it fits; minimisation keeps two.
        "other queues allowed when the target queue is not exhausted",
        [A("a1", "a", {"cpu": 1}, priority=-1)]
        + [A(n, "b", {"cpu": 1}) for n in ("b1", "b2", "b3", "b4")]
        + [A("b5", "b", {"cpu": 1}, priority=-1)],
        W("in"), "a", cpu(2), {("a1", CQ), ("b5", RECLAIM)},
    ),
    Case(
        "long range preemption across cohorts",
        [A("to-be-preempted", "cq-right", {"cpu": 5})],
        W("incoming"), "cq-left", cpu(8), {("to-be-preempted", RECLAIM)},
        cqs=[cluster_queue("cq-left", cohort="cohort-left", quota={"default": {"cpu": 10}}, reclaim="Any"),
             cluster_queue("cq-right", cohort="cohort-right", quota={"default": {"cpu": 0}})],
        cohorts=[cohort("cohort-left", parent="root"), cohort("cohort-right", parent="root")],
    ),
]


def _run(case: Case) -> set[tuple[str, str]]:
    snap = snapshot(cqs=case.cqs, cohorts=case.cohorts, admitted=case.admitted)
    before = overlay_state(snap)
    live_before = {(n.name, fr): v for n in snap.tree.cluster_queues.values() for fr, v in n.usage.items()}
    targets = Preemptor().get_targets(
        workload=case.incoming, cq=ClusterQueueName(case.cq), assignment=case.assign, snapshot=snap
    )
    # Every simulated removal was undone, and the live tree was never written.
    assert overlay_state(snap) == before
    assert {(n.name, fr): v for n in snap.tree.cluster_queues.values() for fr, v in n.usage.items()} == live_before
    # A nomination pass remembers the search: asked twice, it answers as a fresh search does.
    oracle = Preemptor().oracle(snap)
    for _ in range(2):
        again = oracle.get_targets(workload=case.incoming, cq=ClusterQueueName(case.cq), assignment=case.assign)
        assert [(t.victim.key, t.reason) for t in again] == [(t.victim.key, t.reason) for t in targets]
    return reasons(targets)


@pytest.mark.parametrize("case", CLASSIC_CASES, ids=lambda c: c.id)
def test_classic_preemption(case: Case) -> None:
    assert _run(case) == case.want


# -- hierarchical cohorts (TestHierarchicalPreemptions) ----------------------------

LP_ANY: Policy = {"within": "LowerPriority", "reclaim": "Any"}
LP_ANY_BWC0: Policy = {"within": "LowerPriority", "reclaim": "Any", "borrow_within": "LowerPriority", "threshold": 0}
LP_LP_BWC0: Policy = {
    "within": "LowerPriority", "reclaim": "LowerPriority", "borrow_within": "LowerPriority", "threshold": 0
}


def q_in(name: str, parent: str, cpu_quota: QuotaArg | None = None, **policy: Unpack[Policy]) -> ClusterQueueSpec:
    quota: dict[str, dict[str, QuotaArg]] = {"default": {} if cpu_quota is None else {"cpu": cpu_quota}}
    return cluster_queue(name, cohort=parent, quota=quota, **policy)


def c_in(
    name: str, parent: str | None, cpu_quota: QuotaArg | None = None, memory: QuotaArg | None = None
) -> CohortSpec:
    resources: dict[str, QuotaArg] = {}
    if cpu_quota is not None:
        resources["cpu"] = cpu_quota
    if memory is not None:
        resources["memory"] = memory
    return cohort(name, parent=parent, quota={"default": resources} if resources else None)


HIERARCHY_CASES = [
    Case(
        #      r
        #    /   \
        #  c(2)  q_borrowing(0)
        #   |
        #   q
        "preempt with hierarchical advantage",
        [A("admitted2", "q_borrowing", {"cpu": 2})],
        W("incoming"), "q", cpu(2), {("admitted2", RECLAIM)},
        cqs=[q_in("q", "c", **LP_ANY), q_in("q_borrowing", "r", **LP_ANY)],
        cohorts=[c_in("r", None), c_in("c", "r", 2)],
    ),
    Case(
        "avoid queues within nominal quota",
        [A("admitted1", "q_nominal", {"cpu": 2}, priority=-10), A("admitted2", "q_borrowing", {"cpu": 2})],
        W("incoming"), "q", cpu(2), {("admitted2", RECLAIM)},
        cqs=[q_in("q_nominal", "r", 2, **LP_ANY), q_in("q", "c", **LP_ANY), q_in("q_borrowing", "r", **LP_ANY)],
        cohorts=[c_in("r", None), c_in("c", "r", 2)],
    ),
    Case(
        "preempt multiple with hierarchical advantage, whatever their priority",
        [A("admitted1", "q_borrowing", {"cpu": 1}, priority=1), A("admitted2", "q_borrowing", {"cpu": 1}, priority=2)],
        W("incoming"), "q", cpu(2), {("admitted1", RECLAIM), ("admitted2", RECLAIM)},
        cqs=[q_in("q", "c", **LP_ANY), q_in("q_borrowing", "r", **LP_ANY)],
        cohorts=[c_in("r", None), c_in("c", "r", 2)],
    ),
    Case(
        "preempt in cohort and own CQ",
        [A("admitted_not_preemptible", "q_same_cohort", {"cpu": 1}, priority=1),
         A("admitted_preemptible", "q_same_cohort", {"cpu": 2}),
         A("admitted_own_queue", "q", {"cpu": 1}, priority=-1)],
        W("incoming", priority=1), "q", cpu(2),
        {("admitted_preemptible", WHILE_BORROWING), ("admitted_own_queue", CQ)},
        cqs=[q_in("q", "c", **LP_ANY_BWC0), q_in("q_same_cohort", "c", **LP_ANY)],
        cohorts=[c_in("r", None), c_in("c", "r", 3)],
    ),
    Case(
        "prefer to preempt hierarchical candidate",
        [A("admitted_borrowing", "q_borrowing", {"cpu": 1}, priority=1),
         A("admitted_same_queue", "q", {"cpu": 1}, priority=-2)],
        W("incoming"), "q", cpu(1), {("admitted_borrowing", RECLAIM)},
        cqs=[q_in("q", "c", **LP_ANY), q_in("q_borrowing", "r", **LP_ANY)],
        cohorts=[c_in("r", None), c_in("c", "r", 2)],
    ),
    Case(
        "forced to preempt priority candidate",
        [A("admitted_nominal", "q_nominal", {"cpu": 2}, priority=-10),
         A("admitted_same_cohort", "q_same_cohort", {"cpu": 2}, priority=-1)],
        W("incoming"), "q", cpu(2), {("admitted_same_cohort", WHILE_BORROWING)},
        cqs=[q_in("q", "c", **LP_ANY_BWC0), q_in("q_nominal", "r", 2, **LP_ANY), q_in("q_same_cohort", "c", **LP_ANY)],
        cohorts=[c_in("r", None), c_in("c", "r", 2)],
    ),
    Case(
        "incoming workload fits in CQ nominal quota",
        [A("admitted_borrowing", "q_borrowing", {"cpu": 3}, priority=10),
         A("admitted_same_cohort", "q_same_cohort", {"cpu": 3}, priority=10)],
        W("incoming"), "q", cpu(4), {("admitted_borrowing", RECLAIM), ("admitted_same_cohort", RECLAIM)},
        cqs=[q_in("q", "c", 4, **LP_ANY), q_in("q_borrowing", "r", **LP_ANY), q_in("q_same_cohort", "c", **LP_ANY)],
        cohorts=[c_in("r", None), c_in("c", "r", 2)],
    ),
    Case(
        "preempt hierarchical and priority candidates",
        [A("admitted_borrowing", "q_borrowing", {"cpu": 2}, priority=-1),
         A("admitted_same_cohort_preemptible", "q_same_cohort", {"cpu": 1}, priority=-1),
         A("admitted_borrowing_not_preemptible", "q_borrowing", {"cpu": 2}, priority=1)],
        W("incoming"), "q", cpu(3),
        {("admitted_borrowing", RECLAIM), ("admitted_same_cohort_preemptible", WHILE_BORROWING)},
        cqs=[q_in("q", "c", **LP_LP_BWC0),
             q_in("q_borrowing", "r", **LP_ANY), q_in("q_same_cohort", "c", **LP_ANY)],
        cohorts=[c_in("r", None, 1), c_in("c", "r", 4)],
    ),
    Case(
        "preempt hierarchical candidates and inside CQ",
        [A("admitted_borrowing", "q_borrowing", {"cpu": 2}, priority=-1),
         A("admitted_same_queue_preemptible", "q", {"cpu": 1}, priority=-1),
         A("admitted_borrowing_not_preemptible", "q_borrowing", {"cpu": 2}, priority=1)],
        W("incoming"), "q", cpu(3),
        {("admitted_borrowing", RECLAIM), ("admitted_same_queue_preemptible", CQ)},
        cqs=[q_in("q", "c", **LP_LP_BWC0),
             q_in("q_borrowing", "r", **LP_ANY), q_in("q_same_cohort", "c", **LP_ANY)],
        cohorts=[c_in("r", None, 1), c_in("c", "r", 4)],
    ),
    Case(
        "reclaim nominal quota from lowest priority workload, excluding non-borrowing",
        [A("admitted_borrowing_prio_8", "q_borrowing", {"cpu": 1}, priority=8),
         A("admitted_borrowing_prio_9", "q_borrowing", {"cpu": 1}, priority=9),
         A("admitted_borrowing_prio_10", "q_borrowing", {"cpu": 1}, priority=9),
         A("admitted_nominal", "q_nominal", {"cpu": 2}, priority=-2)],
        W("incoming"), "q", cpu(1), {("admitted_borrowing_prio_8", RECLAIM)},
        cqs=[q_in("q", "c", **LP_ANY), q_in("q_borrowing", "r", **LP_ANY), q_in("q_nominal", "r", 2, **LP_ANY)],
        cohorts=[c_in("r", None), c_in("c", "r", 3)],
    ),
    Case(
        "infeasible preemption: all available workloads in pruned subtrees",
        [A("admitted_other_1", "q_other", {"cpu": 1}, priority=-10),
         A("admitted_other_2", "q_other", {"cpu": 1}, priority=-10),
         A("admitted_same_cohort", "q_same_cohort", {"cpu": 2})],
        W("incoming"), "q", cpu(2), set(),
        cqs=[q_in("q_other", "c_other", **LP_ANY), q_in("q", "c", **LP_ANY), q_in("q_same_cohort", "c", **LP_ANY)],
        cohorts=[c_in("r", None), c_in("c", "r", 2), c_in("c_other", "r", 2)],
    ),
    Case(
        "hierarchical preemption with multiple resources",
        [A("admitted_borrowing", "q_borrowing", {"cpu": 3, "memory": "1Gi"}),
         A("admitted_same_cohort", "q_same_cohort", {"cpu": 1, "memory": "3Gi"}, priority=-2)],
        W("incoming", priority=-2), "q",
        assignment({"cpu": ("default", 2), "memory": ("default", "1Gi")}),
        {("admitted_borrowing", RECLAIM)},
        cqs=[q_in("q", "c", **LP_ANY), q_in("q_borrowing", "r", **LP_ANY), q_in("q_same_cohort", "c", **LP_ANY)],
        cohorts=[c_in("r", None, 3), c_in("c", "r", 4, memory="4Gi")],
    ),
    Case(
        # Kueue issues no new eviction here because the target is already
        # evicted; the target list itself holds it.
        "prefer to preempt evicted workloads",
        [A("admitted_borrowing", "q_borrowing", {"cpu": 1}, priority=-10),
         A("evicted_same_cohort", "q_same_cohort", {"cpu": 1}, priority=-1, evicted=True)],
        W("incoming"), "q", cpu(1), {("evicted_same_cohort", WHILE_BORROWING)},
        cqs=[q_in("q", "c", **LP_ANY_BWC0), q_in("q_borrowing", "r", **LP_ANY), q_in("q_same_cohort", "c", **LP_ANY)],
        cohorts=[c_in("r", None), c_in("c", "r", 2)],
    ),
    Case(
        "respect lending limits",
        [A("admitted_borrowing", "q_borrowing", {"cpu": 4})],
        W("incoming", priority=-2), "q", cpu(5), {("admitted_borrowing", RECLAIM)},
        cqs=[q_in("q", "c", (3, None, 2), **LP_ANY), q_in("q_borrowing", "r", **LP_ANY)],
        cohorts=[c_in("r", None), c_in("c", "r", 2)],
    ),
    Case(
        #                r
        #             /     \
        #          c11       c12
        #        /  |  \       \
        #     c21  c22  c23     q1
        #    /  |   |    |
        #  c31 c32  q3   q2
        #   |   |
        #  q5  q4
        # Only one workload of q2 goes: after it, c23 is back within quota.
        "reclaim in complex hierarchy",
        [A(f"admitted_borrowing_{i}", cq, {"cpu": cpu}, priority=prio) for i, cq, cpu, prio in (
            (1, "q1", 4, -6), (2, "q1", 4, -5), (3, "q2", 4, -9), (4, "q2", 4, -10),
            (5, "q3", 4, -4), (6, "q3", 3, -3), (7, "q4", 2, 4), (8, "q4", 3, 2))],
        W("incoming", priority=-2), "q5", cpu(7),
        {("admitted_borrowing_1", RECLAIM), ("admitted_borrowing_4", RECLAIM)},
        cqs=[cluster_queue(name, cohort=parent, quota={"default": {"cpu": 0}}, **LP_ANY)
             for name, parent in (("q1", "c12"), ("q2", "c23"), ("q3", "c22"), ("q4", "c32"), ("q5", "c31"))],
        cohorts=[c_in("r", None)] + [c_in(n, p, 4) for n, p in (
            ("c11", "r"), ("c12", "r"), ("c21", "c11"), ("c22", "c11"), ("c23", "c11"),
            ("c31", "c21"), ("c32", "c21"))],
    ),
]


@pytest.mark.parametrize("case", HIERARCHY_CASES, ids=lambda c: c.id)
def test_hierarchical_preemption(case: Case) -> None:
    assert _run(case) == case.want


def test_no_resources_in_preempt_mode_means_no_targets() -> None:
    case = Case(
        "all fit",
        [A("low", "standalone", {"cpu": 6}, priority=-1)],
        W("in", priority=1), "standalone", assignment({"cpu": ("default", 1, Mode.FIT)}), set(),
    )
    assert _run(case) == set()


def test_targets_come_back_in_removal_order_after_minimisation() -> None:
    """fillBackWorkloads keeps the survivors in the order they were taken."""
    snap = snapshot(
        cqs=default_queues(),
        admitted=[A("a1", "a", {"cpu": 1}, priority=-1)]
        + [A(n, "b", {"cpu": 1}) for n in ("b1", "b2", "b3", "b4")]
        + [A("b5", "b", {"cpu": 1}, priority=-1)],
    )
    targets = Preemptor().get_targets(workload=W("in"), cq=ClusterQueueName("a"), assignment=cpu(2), snapshot=snap)
    assert [(t.victim.workload.name, t.reason) for t in targets] == [("b5", RECLAIM), ("a1", CQ)]
