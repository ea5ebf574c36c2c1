"""Scheduler-side builders for the preemption tests: admitted workloads, snapshots,
flavor assignments and heads.  The model values come from tests.builders.

Quantities are Kubernetes quantity strings or numbers, as in tests.builders.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from sluicegate.controller.scheduling.cycle import Head, Target
from sluicegate.controller.scheduling.flavors import Assignment, FlavorChoice, Mode, PodSetResult
from sluicegate.controller.scheduling.quota import QuotaTree
from sluicegate.controller.scheduling.snapshot import AdmittedWorkload, Snapshot
from sluicegate.model import (
    ClusterQueueName,
    ClusterQueueSpec,
    CohortSpec,
    Condition,
    ControllerConfig,
    FairPreemptionStrategy,
    FairSharingConfig,
    FlavorName,
    FlavorResource,
    PodSet,
    PodSetAssignment,
    ResourceFlavor,
    Workload,
    WorkloadKey,
    WorkloadStatus,
)
from tests.builders import Qty, admission, qty, workload


def _conditions(*, admitted_at: float | None, evicted: bool) -> tuple[Condition, ...]:
    out: list[Condition] = []
    if admitted_at is not None:
        out.append(Condition("QuotaReserved", "True", "QuotaReserved", "", admitted_at))
    if evicted:
        out.append(Condition("Evicted", "True", "Preempted", "", admitted_at or 0.0))
    return tuple(out)


def admitted(
    name: str,
    cq: str,
    usage: Mapping[str, Qty] | None = None,
    *,
    flavor: str = "default",
    priority: int = 0,
    admitted_at: float = 0.0,
    created: float = 0.0,
    evicted: bool = False,
) -> AdmittedWorkload:
    """A workload holding ``usage`` (per resource, all of ``flavor``) in ``cq``."""
    raw = usage if usage is not None else {"cpu": 1}
    frs = {FlavorResource(FlavorName(flavor), res): qty(res, v) for res, v in raw.items()}
    assignment = PodSetAssignment(
        name="main",
        flavors={fr.resource: fr.flavor for fr in frs},
        resource_usage={fr.resource: v for fr, v in frs.items()},
        count=1,
    )
    wl = replace(
        workload(name, PodSet(name="main", count=1), priority=priority, created=created),
        status=WorkloadStatus(
            conditions=_conditions(admitted_at=admitted_at, evicted=evicted),
            admission=admission(cq, assignment),
        ),
    )
    return AdmittedWorkload(workload=wl, cluster_queue=ClusterQueueName(cq), usage=frs, admitted_at=admitted_at)


def snapshot(
    *,
    cqs: Iterable[ClusterQueueSpec],
    cohorts: Iterable[CohortSpec] = (),
    admitted: Iterable[AdmittedWorkload] = (),
    fair: bool = False,
    strategies: Sequence[str] | None = None,
) -> Snapshot:
    """A snapshot over a fresh live tree holding the ``admitted`` workloads."""
    tree = QuotaTree()
    specs = {spec.name: spec for spec in cqs}
    for c in cohorts:
        tree.set_cohort(c.name, quotas=c.quotas(), parent=c.parent, weight=c.fair_sharing_weight)
    for spec in specs.values():
        tree.set_cluster_queue(spec.name, quotas=spec.quotas(), cohort=spec.cohort, weight=spec.fair_sharing_weight)
    by_cq: dict[ClusterQueueName, dict[WorkloadKey, AdmittedWorkload]] = {}
    for a in admitted:
        tree.live.add_all(tree.cluster_queues[a.cluster_queue], a.usage)
        by_cq.setdefault(a.cluster_queue, {})[a.key] = a
    flavor_names = {f for spec in specs.values() for f in spec.flavors}
    fs = FairSharingConfig(enabled=fair)
    if strategies is not None:
        fs = FairSharingConfig(enabled=fair, preemption_strategies=tuple(FairPreemptionStrategy(s) for s in strategies))
    return Snapshot(
        tree=tree,
        cluster_queues=specs,
        flavors={f: ResourceFlavor(f) for f in flavor_names},
        admitted=by_cq,
        config=ControllerConfig(fair_sharing=fs),
    )


# Assignment spec per resource: (flavor, quantity) in Preempt mode, or (flavor, quantity, mode).
ResourceAssign = tuple[str, Qty] | tuple[str, Qty, Mode]


def assignment(*pod_sets: Mapping[str, ResourceAssign]) -> Assignment:
    """An assignment as the flavor assigner would return it; quantities are pod-set totals."""
    out = Assignment()
    for i, ps in enumerate(pod_sets):
        result = PodSetResult(name=f"ps{i}", count=1, requests={})
        for res, spec in ps.items():
            flavor, quantity = spec[0], spec[1]
            mode = spec[2] if len(spec) == 3 else Mode.PREEMPT
            amount = qty(res, quantity)
            result.requests[res] = amount
            result.flavors[res] = FlavorChoice(FlavorName(flavor), mode, 0)
            fr = FlavorResource(FlavorName(flavor), res)
            out.usage[fr] = out.usage.get(fr, 0) + amount
        out.pod_sets.append(result)
    return out


def head(wl: Workload, cq: str) -> Head:
    return Head(workload=wl, cluster_queue=ClusterQueueName(cq))


def reasons(targets: Iterable[Target]) -> set[tuple[str, str]]:
    """The comparable form of a target list: {(victim name, reason)}."""
    return {(t.victim.workload.name, t.reason) for t in targets}


def overlay_state(snap: Snapshot) -> dict[tuple[str, FlavorResource], int]:
    """Effective usage of every node as the cycle sees it, to prove simulations were undone."""
    nodes = [*snap.tree.cluster_queues.values(), *snap.tree.cohorts.values()]
    out: dict[tuple[str, FlavorResource], int] = {}
    for node in nodes:
        frs = set(node.usage) | set(node.subtree_quota)
        for fr in frs:
            v = snap.view.usage(node, fr)
            if v:
                out[(f"{'cohort' if node.is_cohort else 'cq'}:{node.name}", fr)] = v
    return out
