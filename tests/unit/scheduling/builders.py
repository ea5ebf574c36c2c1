"""Small builders for scheduling tests: compact specs in, model values out."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from fractions import Fraction

from sluicegate.controller.cache import Cache
from sluicegate.model import (
    Admission,
    ClusterQueueName,
    ClusterQueueSpec,
    CohortName,
    CohortSpec,
    Condition,
    FlavorFungibility,
    FlavorFungibilityPolicy,
    FlavorName,
    FlavorQuotas,
    FungibilityPreference,
    LabelSelector,
    LocalQueueSpec,
    PodSet,
    PodSetAssignment,
    QueueingStrategy,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    Workload,
    WorkloadStatus,
)
from sluicegate.quantity import parse_canonical

Q = tuple[str, ...] | str  # "10" or ("10", borrowingLimit, lendingLimit)


def quota(res: str, spec: Q) -> ResourceQuota:
    if isinstance(spec, str):
        return ResourceQuota(nominal=parse_canonical(res, spec))
    nominal, *rest = spec
    borrow = rest[0] if len(rest) > 0 else None
    lend = rest[1] if len(rest) > 1 else None
    return ResourceQuota(
        nominal=parse_canonical(res, nominal),
        borrowing_limit=None if borrow is None else parse_canonical(res, borrow),
        lending_limit=None if lend is None else parse_canonical(res, lend),
    )


def flavor(name: str, **resources: Q) -> FlavorQuotas:
    return FlavorQuotas(FlavorName(name), {r: quota(r, q) for r, q in resources.items()})


def group(*flavors: FlavorQuotas) -> ResourceGroup:
    covered = tuple(flavors[0].resources)
    return ResourceGroup(covered_resources=covered, flavors=tuple(flavors))


def cq(
    name: str,
    *groups: ResourceGroup,
    cohort: str | None = None,
    strategy: QueueingStrategy = QueueingStrategy.BEST_EFFORT_FIFO,
    when_can_borrow: str = "MayStopSearch",
    when_can_preempt: str = "TryNextFlavor",
    preference: str | None = None,
    weight: str = "1",
) -> ClusterQueueSpec:
    return ClusterQueueSpec(
        name=ClusterQueueName(name),
        resource_groups=tuple(groups),
        cohort=None if cohort is None else CohortName(cohort),
        namespace_selector=LabelSelector(),
        queueing_strategy=strategy,
        flavor_fungibility=FlavorFungibility(
            when_can_borrow=FlavorFungibilityPolicy(when_can_borrow),
            when_can_preempt=FlavorFungibilityPolicy(when_can_preempt),
            preference=None if preference is None else FungibilityPreference(preference),
        ),
        fair_sharing_weight=Fraction(weight),
    )


def cohort(name: str, *groups: ResourceGroup, parent: str | None = None) -> CohortSpec:
    return CohortSpec(name=CohortName(name), parent=None if parent is None else CohortName(parent), resource_groups=tuple(groups))


def podset(name: str = "main", count: int = 1, min_count: int | None = None,
           node_selector: Mapping[str, str] | None = None, **requests: str) -> PodSet:
    return PodSet(
        name=name,
        count=count,
        min_count=min_count,
        requests={r: parse_canonical(r, q) for r, q in requests.items()},
        node_selector=dict(node_selector or {}),
    )


def wl(name: str, *pod_sets: PodSet, ns: str = "default", queue: str = "lq", priority: int = 0,
       created: float = 0.0, uid: str | None = None) -> Workload:
    return Workload(
        namespace=ns,
        name=name,
        uid=uid or f"uid-{name}",
        creation_timestamp=created,
        queue_name=queue,
        pod_sets=tuple(pod_sets) or (podset(cpu="1"),),
        priority=priority,
    )


def admitted(w: Workload, cq_name: str, flavors: Mapping[str, str], at: float = 0.0) -> Workload:
    """The workload as if it held quota in ``cq_name`` with the given resource->flavor map."""
    psas = tuple(
        PodSetAssignment(
            name=ps.name,
            flavors={r: FlavorName(flavors[r]) for r in ps.requests},
            resource_usage=ps.total_requests(),
            count=ps.count,
        )
        for ps in w.pod_sets
    )
    conds = (
        Condition("QuotaReserved", "True", "QuotaReserved", f"Quota reserved in ClusterQueue {cq_name}", at),
        Condition("Admitted", "True", "Admitted", "The workload is admitted", at),
    )
    return replace(w, status=WorkloadStatus(conditions=conds, admission=Admission(ClusterQueueName(cq_name), psas)))


def build_cache(
    *,
    flavors: Iterable[str | ResourceFlavor] = ("default",),
    cohorts: Iterable[CohortSpec] = (),
    queues: Iterable[ClusterQueueSpec] = (),
    local_queues: Mapping[str, str] | None = None,
    admitted_workloads: Iterable[Workload] = (),
) -> Cache:
    c = Cache()
    for f in flavors:
        rf = f if isinstance(f, ResourceFlavor) else ResourceFlavor(FlavorName(f))
        c.flavors[rf.name] = rf
    for co in cohorts:
        c.set_cohort(co)
    for q in queues:
        c.set_cluster_queue(q)
    for lq, target in (local_queues or {}).items():
        c.local_queues[("default", lq)] = LocalQueueSpec("default", lq, ClusterQueueName(target))
    for w in admitted_workloads:
        c.workloads[w.key] = w
        c.add_admitted(w, 0.0)
    return c
