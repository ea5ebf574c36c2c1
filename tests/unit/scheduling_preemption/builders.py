"""Small builders: quota trees, snapshots, workloads and assignments from compact specs.

Quantities are Kubernetes quantity strings or numbers ("6", "500m", "3Gi",
0.5) and are converted to canonical units, so tables read like Kueue's own.
Workload uids equal their names, which makes every tie-break predictable.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from typing import TypedDict, Unpack

from sluicegate.controller.scheduling.cycle import Head, Target
from sluicegate.controller.scheduling.flavors import Assignment, FlavorChoice, Mode, PodSetResult
from sluicegate.controller.scheduling.quota import QuotaTree
from sluicegate.controller.scheduling.snapshot import AdmittedWorkload, Snapshot
from sluicegate.model import (
    Admission,
    BorrowWithinCohortPolicy,
    ClusterQueueName,
    ClusterQueueSpec,
    CohortName,
    CohortSpec,
    Condition,
    ControllerConfig,
    FairPreemptionStrategy,
    FairSharingConfig,
    FlavorFungibility,
    FlavorName,
    FlavorQuotas,
    FlavorResource,
    LabelSelector,
    PodSet,
    PodSetAssignment,
    Preemption,
    PreemptionPolicy,
    ReclaimPolicy,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    Workload,
    WorkloadKey,
    WorkloadStatus,
)
from sluicegate.quantity import parse_canonical

Qty = int | float | str
# nominal, or (nominal, borrowingLimit, lendingLimit) with None for "no limit".
QuotaArg = Qty | tuple[Qty, Qty | None, Qty | None]
# flavor -> resource -> quota
FlavorQuotaSpec = Mapping[str, Mapping[str, QuotaArg]]

NAMESPACE = "ns"


class Policy(TypedDict, total=False):
    """spec.preemption of a ClusterQueue, by Kueue field value."""

    within: str
    reclaim: str
    borrow_within: str
    threshold: int | None


def q(resource: str, value: Qty) -> int:
    return parse_canonical(resource, value)


def _resource_quota(resource: str, arg: QuotaArg) -> ResourceQuota:
    if isinstance(arg, tuple):
        nominal, borrowing, lending = arg
        return ResourceQuota(
            nominal=q(resource, nominal),
            borrowing_limit=None if borrowing is None else q(resource, borrowing),
            lending_limit=None if lending is None else q(resource, lending),
        )
    return ResourceQuota(nominal=q(resource, arg))


def _group(spec: FlavorQuotaSpec) -> ResourceGroup:
    covered: list[str] = []
    flavors: list[FlavorQuotas] = []
    for flavor, resources in spec.items():
        for res in resources:
            if res not in covered:
                covered.append(res)
        flavors.append(
            FlavorQuotas(FlavorName(flavor), {res: _resource_quota(res, a) for res, a in resources.items()})
        )
    return ResourceGroup(covered_resources=tuple(covered), flavors=tuple(flavors))


def cluster_queue(
    name: str,
    *,
    cohort: str | None = None,
    quota: FlavorQuotaSpec | None = None,
    groups: Sequence[FlavorQuotaSpec] = (),
    weight: Qty = 1,
    fungibility: FlavorFungibility | None = None,
    **policy: Unpack[Policy],
) -> ClusterQueueSpec:
    """A ClusterQueue; ``quota`` is one resource group, ``groups`` several."""
    specs = list(groups) if groups else ([quota] if quota is not None else [])
    return ClusterQueueSpec(
        name=ClusterQueueName(name),
        resource_groups=tuple(_group(s) for s in specs),
        cohort=None if cohort is None else CohortName(cohort),
        namespace_selector=LabelSelector(),
        preemption=Preemption(
            within_cluster_queue=PreemptionPolicy(policy.get("within", "Never")),
            reclaim_within_cohort=ReclaimPolicy(policy.get("reclaim", "Never")),
            borrow_within_cohort=BorrowWithinCohortPolicy(policy.get("borrow_within", "Never")),
            max_priority_threshold=policy.get("threshold"),
        ),
        flavor_fungibility=fungibility or FlavorFungibility(),
        fair_sharing_weight=Fraction(str(weight)),
    )


def cohort(
    name: str, *, parent: str | None = None, quota: FlavorQuotaSpec | None = None, weight: Qty = 1
) -> CohortSpec:
    return CohortSpec(
        name=CohortName(name),
        parent=None if parent is None else CohortName(parent),
        resource_groups=() if quota is None else (_group(quota),),
        fair_sharing_weight=Fraction(str(weight)),
    )


def _conditions(*, admitted_at: float | None, evicted: bool) -> tuple[Condition, ...]:
    out: list[Condition] = []
    if admitted_at is not None:
        out.append(Condition("QuotaReserved", "True", "QuotaReserved", "", admitted_at))
    if evicted:
        out.append(Condition("Evicted", "True", "Preempted", "", admitted_at or 0.0))
    return tuple(out)


def workload(
    name: str,
    *,
    priority: int = 0,
    created: float = 0.0,
    requests: Mapping[str, Qty] | None = None,
    count: int = 1,
    pod_sets: Sequence[PodSet] = (),
) -> Workload:
    """A pending workload; ``requests`` are per pod of a single pod set."""
    if not pod_sets:
        per_pod = {res: q(res, v) for res, v in (requests if requests is not None else {"cpu": 1}).items()}
        pod_sets = (PodSet(name="main", count=count, requests=per_pod),)
    return Workload(
        namespace=NAMESPACE,
        name=name,
        uid=name,
        creation_timestamp=created,
        queue_name="lq",
        pod_sets=tuple(pod_sets),
        priority=priority,
    )


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
    frs = {FlavorResource(FlavorName(flavor), res): q(res, v) for res, v in raw.items()}
    assignment = PodSetAssignment(
        name="main",
        flavors={fr.resource: fr.flavor for fr in frs},
        resource_usage={fr.resource: v for fr, v in frs.items()},
        count=1,
    )
    wl = Workload(
        namespace=NAMESPACE,
        name=name,
        uid=name,
        creation_timestamp=created,
        queue_name="lq",
        pod_sets=(PodSet(name="main", count=1),),
        priority=priority,
        status=WorkloadStatus(
            conditions=_conditions(admitted_at=admitted_at, evicted=evicted),
            admission=Admission(ClusterQueueName(cq), (assignment,)),
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
            flavor, qty = spec[0], spec[1]
            mode = spec[2] if len(spec) == 3 else Mode.PREEMPT
            amount = q(res, qty)
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
