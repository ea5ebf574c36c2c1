"""Builders for the object model (``sluicegate.model``), shared by every test directory.

Import as ``from tests.builders import ...`` (pyproject puts the repository
root on pytest's path).  Compact specs in, model values out:

* quantities are Kubernetes quantity strings or numbers ("6", "500m", "3Gi",
  0.5), converted to canonical units, so tables read like Kueue's own;
* a quota is a nominal amount, or ``(nominal, borrowingLimit, lendingLimit)``
  with None (or a shorter tuple) for "no limit";
* workload uids default to their names, so every FIFO tie-break is predictable;
* cluster queues select every namespace (``LabelSelector()``).

``workload_doc`` builds the same object as a manifest (the dict a YAML or
JSON file holds), for tests that go through decoding, sluicectl or the wire.

Builders of scheduler or controller internals (snapshots, caches, heads)
stay beside the tests that need them and build on these.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from fractions import Fraction
from typing import Any, TypedDict, Unpack

from sluicegate.model import (
    Admission,
    BorrowWithinCohortPolicy,
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
    Preemption,
    PreemptionPolicy,
    QueueingStrategy,
    ReclaimPolicy,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    Workload,
    WorkloadStatus,
)
from sluicegate.quantity import parse_canonical

Qty = int | float | str
# nominal, or (nominal, borrowingLimit, lendingLimit); a missing or None limit is "no limit".
QuotaArg = Qty | tuple[Qty | None, ...]
# flavor -> resource -> quota: one resource group.
FlavorQuotaSpec = Mapping[str, Mapping[str, QuotaArg]]

DEFAULT_NAMESPACE = "default"


class Policy(TypedDict, total=False):
    """spec.preemption of a ClusterQueue, by Kueue field value."""

    within: str
    reclaim: str
    borrow_within: str
    threshold: int | None


def qty(resource: str, value: Qty) -> int:
    """A quantity of ``resource`` in canonical units."""
    return parse_canonical(resource, value)


def resource_quota(resource: str, arg: QuotaArg) -> ResourceQuota:
    if not isinstance(arg, tuple):
        return ResourceQuota(nominal=qty(resource, arg))
    nominal, *limits = arg
    assert nominal is not None, "a quota needs a nominal amount"
    borrowing = limits[0] if len(limits) > 0 else None
    lending = limits[1] if len(limits) > 1 else None
    return ResourceQuota(
        nominal=qty(resource, nominal),
        borrowing_limit=None if borrowing is None else qty(resource, borrowing),
        lending_limit=None if lending is None else qty(resource, lending),
    )


def flavor(name: str, **resources: QuotaArg) -> FlavorQuotas:
    """One flavor's quotas in a resource group: ``flavor("spot", cpu="10", memory=("4Gi", None, "1Gi"))``."""
    return FlavorQuotas(FlavorName(name), {r: resource_quota(r, a) for r, a in resources.items()})


def group(*flavors: FlavorQuotas) -> ResourceGroup:
    """A resource group covering the first flavor's resources."""
    return ResourceGroup(covered_resources=tuple(flavors[0].resources), flavors=tuple(flavors))


def quota_group(spec: FlavorQuotaSpec) -> ResourceGroup:
    """A resource group from ``{flavor: {resource: quota}}``, covering every resource named."""
    covered: list[str] = []
    for resources in spec.values():
        covered.extend(r for r in resources if r not in covered)
    flavors = tuple(flavor(f, **resources) for f, resources in spec.items())
    return ResourceGroup(covered_resources=tuple(covered), flavors=flavors)


def cluster_queue(
    name: str,
    *resource_groups: ResourceGroup,
    cohort: str | None = None,
    quota: FlavorQuotaSpec | None = None,
    groups: Sequence[FlavorQuotaSpec] = (),
    strategy: QueueingStrategy = QueueingStrategy.BEST_EFFORT_FIFO,
    fungibility: FlavorFungibility | None = None,
    when_can_borrow: str | None = None,
    when_can_preempt: str | None = None,
    preference: str | None = None,
    weight: Qty = 1,
    **policy: Unpack[Policy],
) -> ClusterQueueSpec:
    """A ClusterQueue: resource groups given built, or as ``quota`` (one group) or ``groups`` (several)."""
    specs = list(groups) if groups else ([quota] if quota is not None else [])
    default = fungibility or FlavorFungibility()
    return ClusterQueueSpec(
        name=ClusterQueueName(name),
        resource_groups=(*resource_groups, *(quota_group(s) for s in specs)),
        cohort=None if cohort is None else CohortName(cohort),
        namespace_selector=LabelSelector(),
        queueing_strategy=strategy,
        preemption=Preemption(
            within_cluster_queue=PreemptionPolicy(policy.get("within", "Never")),
            reclaim_within_cohort=ReclaimPolicy(policy.get("reclaim", "Never")),
            borrow_within_cohort=BorrowWithinCohortPolicy(policy.get("borrow_within", "Never")),
            max_priority_threshold=policy.get("threshold"),
        ),
        flavor_fungibility=FlavorFungibility(
            when_can_borrow=default.when_can_borrow
            if when_can_borrow is None
            else FlavorFungibilityPolicy(when_can_borrow),
            when_can_preempt=default.when_can_preempt
            if when_can_preempt is None
            else FlavorFungibilityPolicy(when_can_preempt),
            preference=default.preference if preference is None else FungibilityPreference(preference),
        ),
        fair_sharing_weight=Fraction(str(weight)),
    )


def cohort(
    name: str,
    *resource_groups: ResourceGroup,
    parent: str | None = None,
    quota: FlavorQuotaSpec | None = None,
    weight: Qty = 1,
) -> CohortSpec:
    return CohortSpec(
        name=CohortName(name),
        parent=None if parent is None else CohortName(parent),
        resource_groups=(*resource_groups, *(() if quota is None else (quota_group(quota),))),
        fair_sharing_weight=Fraction(str(weight)),
    )


def resource_flavor(name: str, **node_labels: str) -> ResourceFlavor:
    return ResourceFlavor(FlavorName(name), dict(node_labels))


def local_queue(name: str, cluster_queue: str, ns: str = DEFAULT_NAMESPACE) -> LocalQueueSpec:
    return LocalQueueSpec(ns, name, ClusterQueueName(cluster_queue))


def pod_set(
    name: str = "main",
    count: int = 1,
    min_count: int | None = None,
    node_selector: Mapping[str, str] | None = None,
    **requests: Qty,
) -> PodSet:
    """A pod set; ``requests`` are per pod."""
    return PodSet(
        name=name,
        count=count,
        min_count=min_count,
        requests={r: qty(r, v) for r, v in requests.items()},
        node_selector=dict(node_selector or {}),
    )


def workload(
    name: str,
    *pod_sets: PodSet,
    ns: str = DEFAULT_NAMESPACE,
    queue: str = "lq",
    priority: int = 0,
    created: float = 0.0,
    uid: str | None = None,
    requests: Mapping[str, Qty] | None = None,
    count: int = 1,
) -> Workload:
    """A pending workload: the given pod sets, or one pod set "main" of ``count`` pods
    requesting ``requests`` each (one cpu when neither is given)."""
    if not pod_sets:
        per_pod = {r: qty(r, v) for r, v in (requests if requests is not None else {"cpu": 1}).items()}
        pod_sets = (PodSet(name="main", count=count, requests=per_pod),)
    return Workload(
        namespace=ns,
        name=name,
        uid=name if uid is None else uid,
        creation_timestamp=created,
        queue_name=queue,
        pod_sets=tuple(pod_sets),
        priority=priority,
    )


def admission(cq: str, *assignments: PodSetAssignment) -> Admission:
    return Admission(ClusterQueueName(cq), tuple(assignments))


def assignment_of(ps: PodSet, flavors: Mapping[str, str]) -> PodSetAssignment:
    """The assignment of all of ``ps``'s pods, each resource from ``flavors[resource]``."""
    return PodSetAssignment(
        name=ps.name,
        flavors={r: FlavorName(flavors[r]) for r in ps.requests},
        resource_usage=ps.total_requests(),
        count=ps.count,
    )


def with_admission(w: Workload, cq: str, flavors: Mapping[str, str], at: float = 0.0) -> Workload:
    """``w`` as if it held quota in ``cq`` (and were admitted), each resource from ``flavors[resource]``."""
    conds = (
        Condition("QuotaReserved", "True", "QuotaReserved", f"Quota reserved in ClusterQueue {cq}", at),
        Condition("Admitted", "True", "Admitted", "The workload is admitted", at),
    )
    adm = admission(cq, *(assignment_of(ps, flavors) for ps in w.pod_sets))
    return replace(w, status=WorkloadStatus(conditions=conds, admission=adm))


def container_doc(
    command: Sequence[str] = ("true",),
    *,
    name: str = "main",
    requests: Mapping[str, str] | None = None,
    security: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A container of a pod template, as a manifest holds it."""
    out: dict[str, Any] = {"name": name, "command": list(command),
                           "resources": {"requests": dict(requests if requests is not None else {"cpu": "1"})}}
    if security is not None:
        out["securityContext"] = dict(security)
    return out


def workload_doc(
    name: str,
    *containers: Mapping[str, Any],
    ns: str = DEFAULT_NAMESPACE,
    queue: str = "lq",
    count: int = 1,
    priority: int | None = None,
    labels: Mapping[str, str] | None = None,
    pod_spec: Mapping[str, Any] | None = None,
    api_version: str = "sluicegate.io/v1beta2",
) -> dict[str, Any]:
    """A Workload manifest with one pod set "main" of ``count`` pods running ``containers``
    (one ``container_doc()`` when none); ``pod_spec`` adds pod-level fields."""
    metadata: dict[str, Any] = {"name": name, "namespace": ns}
    if labels is not None:
        metadata["labels"] = dict(labels)
    spec: dict[str, Any] = {"queueName": queue, "podSets": [{"name": "main", "count": count, "template": {"spec": {
        **(pod_spec or {}), "containers": [dict(c) for c in containers] or [container_doc()]}}}]}
    if priority is not None:
        spec["priority"] = priority
    return {"apiVersion": api_version, "kind": "Workload", "metadata": metadata, "spec": spec}
