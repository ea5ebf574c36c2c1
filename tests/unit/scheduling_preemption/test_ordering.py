"""Candidate ordering (Kueue ``common/ordering.go``) and preemption policies."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from sluicegate.controller.scheduling.ordering import satisfies_policy, sort_candidates
from sluicegate.controller.scheduling.snapshot import AdmittedWorkload
from sluicegate.model import ClusterQueueName, PreemptionPolicy, ReclaimPolicy, RequeuingTimestamp
from tests.builders import workload

from .builders import admitted

PREEMPTOR_CQ = ClusterQueueName("preemptor")


@pytest.mark.parametrize(
    ("candidates", "want"),
    [
        (
            [admitted("high", "preemptor", priority=10), admitted("low", "preemptor", priority=-10)],
            ["low", "high"],
        ),
        (
            [admitted("other", "preemptor", priority=10), admitted("evicted", "preemptor", priority=10, evicted=True)],
            ["evicted", "other"],
        ),
        (
            [admitted("same-queue", "preemptor", priority=10), admitted("other-queue", "other", priority=10)],
            ["other-queue", "same-queue"],
        ),
        (
            [admitted("older", "preemptor", admitted_at=9.0), admitted("younger", "preemptor", admitted_at=11.0),
             admitted("current", "preemptor", admitted_at=10.0)],
            ["younger", "current", "older"],
        ),
        (
            # Evicted beats other-queue, which beats priority.
            [admitted("own-low", "preemptor", priority=-5), admitted("other-high", "other", priority=5),
             admitted("own-evicted-high", "preemptor", priority=50, evicted=True)],
            ["own-evicted-high", "other-high", "own-low"],
        ),
        (
            [admitted("b", "preemptor"), admitted("a", "preemptor"), admitted("c", "preemptor")],
            ["a", "b", "c"],
        ),
    ],
    ids=[
        "lower-priority-first",
        "evicted-first",
        "other-queue-first",
        "most-recently-admitted-first",
        "criteria-rank-in-order",
        "uid-breaks-ties",
    ],
)
def test_candidate_order(candidates: Sequence[AdmittedWorkload], want: list[str]) -> None:
    assert [c.workload.name for c in sort_candidates(list(candidates), PREEMPTOR_CQ)] == want


@pytest.mark.parametrize(
    ("policy", "candidate_priority", "candidate_created", "want"),
    [
        (PreemptionPolicy.NEVER, -10, 0.0, False),
        (PreemptionPolicy.LOWER_PRIORITY, -1, 0.0, True),
        (PreemptionPolicy.LOWER_PRIORITY, 0, 20.0, False),
        (PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY, -1, 0.0, True),
        (PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY, 0, 20.0, True),
        (PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY, 0, 10.0, False),
        (PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY, 1, 20.0, False),
        (ReclaimPolicy.NEVER, -10, 0.0, False),
        (ReclaimPolicy.LOWER_PRIORITY, -1, 0.0, True),
        (ReclaimPolicy.LOWER_PRIORITY, 0, 0.0, False),
        (ReclaimPolicy.ANY, 0, 0.0, True),
        (ReclaimPolicy.ANY, 100, 0.0, True),
    ],
    ids=[
        "within-never",
        "within-lower-priority-lower",
        "within-lower-priority-equal",
        "within-lower-or-newer-equal-lower",
        "within-lower-or-newer-equal-newer",
        "within-lower-or-newer-equal-same-age",
        "within-lower-or-newer-equal-higher",
        "reclaim-never",
        "reclaim-lower-priority-lower",
        "reclaim-lower-priority-equal",
        "reclaim-any-equal",
        "reclaim-any-higher",
    ],
)
def test_satisfies_policy(
    policy: PreemptionPolicy | ReclaimPolicy, candidate_priority: int, candidate_created: float, want: bool
) -> None:
    preemptor = workload("preemptor", priority=0, created=10.0)
    candidate = workload("candidate", priority=candidate_priority, created=candidate_created)
    got = satisfies_policy(
        preemptor=preemptor, candidate=candidate, policy=policy, requeuing=RequeuingTimestamp.EVICTION
    )
    assert got is want


def test_admission_fair_sharing_puts_the_busier_local_queue_first_in_the_preemptors_queue() -> None:
    """Kueue's CandidatesOrdering criterion 2: with Admission Fair Sharing, two candidates of one
    ClusterQueue and different LocalQueues go by LocalQueue usage, higher first, before priority."""
    from dataclasses import replace

    def in_lq(c: AdmittedWorkload, lq: str) -> AdmittedWorkload:
        return replace(c, workload=replace(c.workload, queue_name=lq))

    usage = {"busy": 5.0, "quiet": 1.0}
    candidates = [
        in_lq(admitted("quiet-low", "preemptor", priority=-10), "quiet"),
        in_lq(admitted("busy-high", "preemptor", priority=10), "busy"),
        in_lq(admitted("other-queue", "other", priority=10), "busy"),
    ]
    got = sort_candidates(candidates, PREEMPTOR_CQ, lambda wl: usage[wl.queue_name])
    assert [c.workload.name for c in got] == ["other-queue", "busy-high", "quiet-low"]
    # Without the usage (no Admission Fair Sharing), priority decides as before.
    assert [c.workload.name for c in sort_candidates(candidates, PREEMPTOR_CQ)] == [
        "other-queue", "quiet-low", "busy-high"]
