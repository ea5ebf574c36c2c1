"""Pure: kube-batch PodGroups and Queues on Kueue's machinery (see docs/kube-batch.md).

- :func:`resolve` gives a Job's workload what its PodGroup says: the
  LocalQueue, the priority class, and the gang (``minCount``, Kueue's partial
  admission) of ``minMember`` pods, raised until ``minResources`` is covered.
- :func:`waiting_reason` says why a Job whose group cannot be honoured yet
  waits in no queue (the PodGroup is missing or asks for more than the Job has).
- :func:`group_status` is kube-batch's ``jobStatus`` (pkg/scheduler/framework/session.go):
  the phase and the pods by state.
- :func:`batch_cluster_queue` turns a kube-batch Queue into a ClusterQueue
  that borrows everything from the cohort ``kube-batch`` with its weight as
  fair-sharing weight; :func:`deserved_shares` and :func:`overused` are
  kube-batch's proportion plugin (pkg/scheduler/plugins/proportion/proportion.go),
  kept to state and test what that mapping reproduces.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from fractions import Fraction
from typing import Any

from sluicegate.model.labels import LabelSelector
from sluicegate.model.names import ClusterQueueName, CohortName
from sluicegate.model.podgroups import (
    COMPLETED,
    INQUEUE,
    PENDING,
    RUNNING,
    UNKNOWN,
    VOLCANO_V1BETA1,
    BatchQueue,
    PodGroup,
    PodGroupStatus,
    group_name,
)
from sluicegate.model.pods import FAILED, SUCCEEDED
from sluicegate.model.pods import RUNNING as POD_RUNNING
from sluicegate.model.queues import (
    ClusterQueueSpec,
    CohortSpec,
    FlavorQuotas,
    Preemption,
    PreemptionPolicy,
    ReclaimPolicy,
    ResourceGroup,
    ResourceQuota,
)
from sluicegate.model.workloads import PodSet, Workload

# The cohort every kube-batch Queue's ClusterQueue borrows from: its quota is the cluster.
KUBE_BATCH_COHORT = CohortName("kube-batch")

GroupKey = tuple[str, str]


def gang_size(pg: PodGroup, ps: PodSet) -> int | None:
    """How many pods must start together: minMember, raised until their requests cover minResources.

    None when even all of the Job's pods cannot cover minResources (a resource none of them requests).
    """
    size = pg.min_member
    for res, wanted in pg.min_resources.items():
        if wanted <= 0:
            continue
        per_pod = ps.requests.get(res, 0)
        if per_pod <= 0:
            return None
        size = max(size, math.ceil(wanted / per_pod))
    return size


def resolve(groups: Mapping[GroupKey, PodGroup], wl: Workload) -> Workload:
    """The Job's workload as its PodGroup makes it; unchanged when it names none.

    Until the PodGroup exists (or while it asks for more pods than the Job
    has) the workload names no LocalQueue: it is stored and waits, and
    :func:`waiting_reason` says why.
    """
    name = group_name(wl.annotations)
    if not name or len(wl.pod_sets) != 1:
        return wl
    pg = groups.get((wl.namespace, name))
    ps = wl.pod_sets[0]
    size = gang_size(pg, ps) if pg is not None else None
    if pg is None or size is None or size > ps.count:
        return replace(wl, queue_name="", pod_sets=(replace(ps, min_count=None),))
    gang = replace(ps, min_count=size if size < ps.count else None)
    priority_class = ("PriorityClass", pg.priority_class_name) if pg.priority_class_name else wl.priority_class
    return replace(wl, queue_name=pg.queue, pod_sets=(gang,), priority_class=priority_class)


def waiting_reason(groups: Mapping[GroupKey, PodGroup], wl: Workload) -> str | None:
    """Why a Job in a PodGroup waits in no queue (None: it names its LocalQueue, or no group)."""
    if wl.queue_name or not wl.annotations:
        return None  # asked at every enqueue: the usual workload names its queue, so no annotation is read
    name = group_name(wl.annotations)
    if not name:
        return None
    pg = groups.get((wl.namespace, name))
    if pg is None:
        return f"PodGroup {wl.namespace}/{name} doesn't exist"
    ps = wl.pod_sets[0]
    size = gang_size(pg, ps)
    if size is None:
        missing = sorted(r for r, q in pg.min_resources.items() if q > 0 and ps.requests.get(r, 0) <= 0)
        return (f"PodGroup {wl.namespace}/{name} spec.minResources asks for {', '.join(missing)}, "
                "which the Job's pods do not request")
    return (f"PodGroup {wl.namespace}/{name} needs {size} pods to start together "
            f"(spec.minMember {pg.min_member}{', spec.minResources' if size > pg.min_member else ''}), "
            f"but the Job has {ps.count}")


def group_status(pg: PodGroup, workloads: Iterable[Workload]) -> PodGroupStatus:
    """kube-batch's jobStatus over the workload(s) of the group.

    1. Running pods of a workload that lost its quota (evicted, its pods
       being stopped): Unknown, as kube-batch says of a group with running
       tasks that is unschedulable in this session.
    2. Allocated pods (bound or running: every pod not yet finished of a
       workload that holds quota) >= minMember: Running.
    3. Volcano (v1beta1) only: a finished workload is Completed, and one
       holding quota before its pods are placed is Inqueue.
    4. Else Pending (kube-batch v1alpha1 also reports a finished group so:
       its succeeded pods are no longer allocated).
    Counts are the group's pods by phase, every pod the Job has had.
    """
    wls = sorted(workloads, key=lambda w: (w.is_finished, -w.creation_timestamp, w.name))
    running = succeeded = failed = 0
    for w in wls:
        for p in w.status.pods:
            running += p.phase == POD_RUNNING
            succeeded += p.phase == SUCCEEDED
            failed += p.phase == FAILED
    wl = wls[0] if wls else None
    if wl is None:
        return PodGroupStatus(PENDING, message="no Job names this PodGroup yet")
    phase, message = _phase(pg, wl)
    return PodGroupStatus(phase, running=running, succeeded=succeeded, failed=failed, workload=wl.name,
                          message=message)


def _phase(pg: PodGroup, wl: Workload) -> tuple[str, str]:
    volcano = pg.api_version == VOLCANO_V1BETA1
    live = [p for p in wl.status.pods if not p.terminal]
    if wl.status.is_true("Evicted") and any(p.phase == POD_RUNNING for p in live):
        return UNKNOWN, "its pods are being stopped: the workload was evicted"
    allocated = len(live) if wl.has_quota_reservation and not wl.is_finished else 0
    if allocated >= pg.min_member and allocated > 0:
        return RUNNING, ""
    if volcano and wl.is_finished:
        return COMPLETED, ""
    if volcano and wl.has_quota_reservation and not wl.is_finished:
        return INQUEUE, "admitted; its pods are being placed"
    cond = wl.status.condition("QuotaReserved")
    return PENDING, cond.message if cond is not None and cond.status == "False" else ""


def batch_cluster_queue(queue: BatchQueue, cohort: CohortSpec) -> ClusterQueueSpec:
    """The ClusterQueue a kube-batch Queue becomes.

    Nominal quota 0 for every flavor and resource of the cohort
    ``kube-batch`` (which holds the cluster's capacity), so everything it runs
    is borrowed and its weighted share is its usage over its weight; Volcano's
    ``capability`` caps the borrowing.  Any namespace may use it (kube-batch
    queues are cluster-wide); priority preemption inside the queue, and
    reclaim from any queue above its share (fair-sharing preemption).
    """
    groups = tuple(
        ResourceGroup(
            covered_resources=rg.covered_resources,
            flavors=tuple(
                FlavorQuotas(name=fq.name, resources={
                    res: ResourceQuota(nominal=0, borrowing_limit=queue.capability.get(res)) for res in fq.resources
                })
                for fq in rg.flavors
            ),
        )
        for rg in cohort.resource_groups
    )
    return ClusterQueueSpec(
        name=ClusterQueueName(queue.name),
        resource_groups=groups,
        cohort=KUBE_BATCH_COHORT,
        namespace_selector=LabelSelector(),
        preemption=Preemption(within_cluster_queue=PreemptionPolicy.LOWER_PRIORITY,
                              reclaim_within_cohort=ReclaimPolicy.ANY),
        fair_sharing_weight=Fraction(queue.weight),
    )


def _share(allocated: float, deserved: float) -> float:
    # kube-batch's helpers.Share: nothing deserved counts as full once anything is allocated.
    if deserved == 0:
        return 0.0 if allocated == 0 else 1.0
    return allocated / deserved


def deserved_shares(total: Mapping[str, float], queues: Mapping[str, tuple[int, Mapping[str, float]]],
                    *, max_rounds: int = 1000) -> dict[str, dict[str, float]]:
    """kube-batch's proportion: each queue's deserved resources.

    ``queues``: name -> (weight, request).  Rounds of water-filling: what
    remains is split among the queues not yet satisfied by weight; a queue
    whose request is below its deserved amount in every resource is capped
    at its request and drops out.  Ends when no queue is left or nothing
    remains (bounded by ``max_rounds``).
    """
    resources = sorted(set(total) | {r for _, req in queues.values() for r in req})
    deserved = {q: dict.fromkeys(resources, 0.0) for q in queues}
    remaining = {r: float(total.get(r, 0)) for r in resources}
    met: set[str] = set()
    for _ in range(max_rounds):
        weight = sum(w for q, (w, _) in queues.items() if q not in met)
        if weight == 0:
            break
        grown = dict.fromkeys(resources, 0.0)
        for q in sorted(queues):
            if q in met:
                continue
            w, request = queues[q]
            old = dict(deserved[q])
            mine = {r: deserved[q][r] + remaining[r] * w / weight for r in resources}
            if all(request.get(r, 0.0) < mine[r] for r in resources):
                mine = {r: min(mine[r], request.get(r, 0.0)) for r in resources}
                met.add(q)
            deserved[q] = mine
            for r in resources:
                grown[r] += mine[r] - old[r]
        for r in resources:
            remaining[r] -= grown[r]
        if all(v <= 1e-9 for v in remaining.values()):
            break
    return deserved


def overused(deserved: Mapping[str, float], allocated: Mapping[str, float]) -> bool:
    """kube-batch's Overused: the queue holds at least what it deserves in every resource."""
    return all(deserved.get(r, 0.0) <= allocated.get(r, 0.0) for r in set(deserved) | set(allocated))


def share(deserved: Mapping[str, float], allocated: Mapping[str, float]) -> float:
    """kube-batch's queue share (the order of queues): the largest allocated/deserved over resources."""
    return max((_share(allocated.get(r, 0.0), d) for r, d in deserved.items()), default=0.0)


# -- apply: what PodGroups and Queues change ---------------------------------


class GroupProblem(ValueError):
    """A PodGroup, Queue or grouped Job that cannot be applied; ``field`` names the offending field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def queues_as_cluster_queues(objs: Sequence[Any], cohorts: Mapping[CohortName, CohortSpec], *,
                             fair_sharing: bool) -> list[Any]:
    """The applied objects with each kube-batch Queue replaced by its ClusterQueue.

    The cohort ``kube-batch`` may come in the same apply.  GroupProblem when
    fair sharing is off (the mapping needs it) or the cohort is missing.
    """
    if not any(isinstance(o, BatchQueue) for o in objs):
        return list(objs)
    if not fair_sharing:
        raise GroupProblem("kind", "a kube-batch Queue needs fair sharing: add a fairSharing section to the "
                           "controller's Configuration (docs/kube-batch.md)")
    applied = {o.name: o for o in objs if isinstance(o, CohortSpec)}
    cohort = applied.get(KUBE_BATCH_COHORT) or cohorts.get(KUBE_BATCH_COHORT)
    if cohort is None or not cohort.resource_groups:
        raise GroupProblem("kind", f"a kube-batch Queue borrows everything from the Cohort {KUBE_BATCH_COHORT}: "
                           "apply that Cohort first, with resourceGroups holding the cluster's capacity")
    return [batch_cluster_queue(o, cohort) if isinstance(o, BatchQueue) else o for o in objs]


def check_pod_group(pg: PodGroup, priority_classes: Collection[str]) -> None:
    """GroupProblem when the PodGroup names a PriorityClass that does not exist."""
    name = pg.priority_class_name
    if name and name not in priority_classes and name not in ("system-node-critical", "system-cluster-critical"):
        raise GroupProblem("spec.priorityClassName", f"PriorityClass {name!r} not found")


def group_taken(wl: Workload, workloads: Iterable[Workload]) -> str:
    """The name of another unfinished workload already in ``wl``'s PodGroup ("": none)."""
    name = group_name(wl.annotations)
    if not name:
        return ""
    for other in workloads:
        if (other.namespace == wl.namespace and other.name != wl.name and not other.is_finished
                and group_name(other.annotations) == name):
            return other.name
    return ""


def regrouped(groups: Mapping[GroupKey, PodGroup], applied: Iterable[PodGroup], workloads: Iterable[Workload],
              holds_quota: Callable[[Workload], bool]) -> list[Workload]:
    """The waiting Jobs of the applied PodGroups, as the PodGroups now make them (only those that change).

    A Job already holding quota, or finished, keeps the gang it was admitted with.
    """
    keys = {(pg.namespace, pg.name) for pg in applied}
    if not keys:
        return []
    out: list[Workload] = []
    for wl in workloads:
        if (wl.namespace, group_name(wl.annotations)) not in keys or wl.is_finished or holds_quota(wl):
            continue
        new = resolve(groups, wl)
        if new != wl:
            out.append(replace(new, generation=wl.generation + 1))
    return out
