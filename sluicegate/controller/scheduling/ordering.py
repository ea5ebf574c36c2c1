"""The order in which preemption considers its candidates, and who may be a candidate at all.

Both the classic and the fair-sharing preemptor walk candidates in this one
order (Kueue ``pkg/scheduler/preemption/common/ordering.go``), and both ask
the same question of each candidate: does the preempting queue's policy
allow evicting it (``common/preemption_policy.go``)?
"""

from __future__ import annotations

from collections.abc import Callable

from sluicegate.controller.scheduling.snapshot import AdmittedWorkload, queue_order_timestamp
from sluicegate.model.config import RequeuingTimestamp
from sluicegate.model.names import ClusterQueueName
from sluicegate.model.queues import PreemptionPolicy, ReclaimPolicy
from sluicegate.model.workloads import Workload

CandidateKey = tuple[bool, bool, float, int, float, str, str]

LocalQueueUsage = Callable[[Workload], float | None]
"""A workload's LocalQueue usage where its ClusterQueue orders by it (Admission Fair Sharing), else None."""


def _no_usage(wl: Workload) -> float | None:
    return None


def is_evicted(wl: Workload) -> bool:
    """An eviction was already issued: the workload still holds quota until it exits."""
    return wl.status.is_true("Evicted")


def candidate_order_key(
    victim: AdmittedWorkload, preemptor_cq: ClusterQueueName, usage: LocalQueueUsage = _no_usage
) -> CandidateKey:
    """Sort key for preemption candidates, cheapest victim first.

    In order:

    1. workloads already being evicted (preempting them again costs nothing);
    2. workloads of other ClusterQueues before those of the preemptor's own
       queue (reclaiming borrowed quota is preferred to hurting oneself);
    3. in the preemptor's own queue when it uses Admission Fair Sharing: the
       workloads of the LocalQueue with the higher usage first (Kueue compares
       it for two candidates of one ClusterQueue and different LocalQueues;
       candidates of other queues are left to the next criteria here);
    4. lower priority first;
    5. most recently admitted first (the least work is lost);
    6. uid, then key, so that the order never depends on dict iteration.
    """
    wl = victim.workload
    own = victim.cluster_queue == preemptor_cq
    lq_usage = usage(wl) if own else None
    return (
        not is_evicted(wl),
        own,
        -lq_usage if lq_usage is not None else 0.0,
        wl.priority,
        -victim.admitted_at,
        wl.uid,
        wl.key,
    )


def sort_candidates(
    candidates: list[AdmittedWorkload], preemptor_cq: ClusterQueueName, usage: LocalQueueUsage = _no_usage
) -> list[AdmittedWorkload]:
    return sorted(candidates, key=lambda v: candidate_order_key(v, preemptor_cq, usage))


def satisfies_policy(
    *,
    preemptor: Workload,
    candidate: Workload,
    policy: PreemptionPolicy | ReclaimPolicy,
    requeuing: RequeuingTimestamp,
) -> bool:
    """Whether ``policy`` lets ``preemptor`` evict ``candidate``.

    ``LowerOrNewerEqualPriority`` also allows an equal-priority candidate that
    entered the queue after the preemptor, which is what stops a newer
    workload from starving an older one of the same priority.
    """
    lower = preemptor.priority > candidate.priority
    if policy in (PreemptionPolicy.LOWER_PRIORITY, ReclaimPolicy.LOWER_PRIORITY):
        return lower
    if policy is PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY:
        newer_equal = preemptor.priority == candidate.priority and queue_order_timestamp(
            preemptor, requeuing
        ) < queue_order_timestamp(candidate, requeuing)
        return lower or newer_equal
    return policy is ReclaimPolicy.ANY
