"""Pod QoS class and effective pod requests, computed the way Kubernetes does.

All amounts are canonical integers (see ``sluicegate.quantity``): cpu in
millicores, memory and everything else in whole units (bytes for memory).

Two Kubernetes rules shape every function here:

* **Request defaulting.**  When the API server stores a Pod, every container
  (init containers included) that gives a limit for a resource but no request
  for it gets ``request = limit`` (``SetDefaults_Pod``).  The kubelet only ever
  sees defaulted pods, so a container with ``limits: {cpu: 1, memory: 1Gi}``
  and no requests is *Guaranteed*, not Burstable.  Our manifests are never
  defaulted by an API server, so :func:`pod_qos` and
  :func:`effective_requests` apply :func:`default_requests_from_limits`
  themselves.  Applying it twice changes nothing.
* **Init containers run one at a time, before the app containers.**  A pod
  therefore needs, per resource, the larger of "all app containers together"
  and "the largest single init container" (the scheduler's and the kubelet's
  ``computePodResourceRequest`` / ``GetResourceRequestQuantity``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType

__all__ = [
    "QOS_COMPUTE_RESOURCES",
    "QOSClass",
    "ContainerResources",
    "default_requests_from_limits",
    "pod_qos",
    "effective_requests",
]

# Only these resources decide the QoS class; a pod's GPUs or ephemeral
# storage never make it Burstable or Guaranteed (k8s "supported QoS compute
# resources").
QOS_COMPUTE_RESOURCES = frozenset({"cpu", "memory"})


class QOSClass(StrEnum):
    """Kubernetes pod QoS classes; values are the API spellings."""

    GUARANTEED = "Guaranteed"
    BURSTABLE = "Burstable"
    BESTEFFORT = "BestEffort"


def _frozen(amounts: Mapping[str, int]) -> Mapping[str, int]:
    # A private copy behind a read-only view: callers cannot change a value
    # after building it, which keeps the dataclass honestly immutable.
    return MappingProxyType(dict(amounts))


@dataclass(frozen=True, slots=True)
class ContainerResources:
    """One container's ``resources``: requests and limits in canonical units."""

    requests: Mapping[str, int] = field(default_factory=dict, hash=False)
    limits: Mapping[str, int] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "requests", _frozen(self.requests))
        object.__setattr__(self, "limits", _frozen(self.limits))


def default_requests_from_limits(container: ContainerResources) -> ContainerResources:
    """Return ``container`` with each limit copied to a missing request.

    This is the API server's ``SetDefaults_Pod`` rule, for every resource (not
    only cpu and memory).  An explicit request is never changed, even when it
    differs from the limit.
    """
    missing = {name: amount for name, amount in container.limits.items() if name not in container.requests}
    if not missing:
        return container
    return ContainerResources(requests={**container.requests, **missing}, limits=container.limits)


def pod_qos(
    *,
    containers: Sequence[ContainerResources],
    init_containers: Sequence[ContainerResources] = (),
) -> QOSClass:
    """Classify a pod exactly as Kubernetes' ``GetPodQOS`` does (after defaulting).

    Over all containers, app and init alike, and counting only cpu and memory
    amounts greater than zero:

    * no requests and no limits anywhere: BestEffort;
    * every container has a positive cpu *and* memory limit, and the summed
      requests equal the summed limits for each of cpu and memory: Guaranteed;
    * anything else: Burstable.

    Kubernetes compares the sums, not each container.  Because validation
    never lets a request exceed its limit, equal sums mean every container's
    request equals its limit, which is the rule people usually quote.
    """
    requests: dict[str, int] = {}
    limits: dict[str, int] = {}
    every_container_limits_both = True
    for container in (*containers, *init_containers):
        container = default_requests_from_limits(container)
        for name, amount in container.requests.items():
            if name in QOS_COMPUTE_RESOURCES and amount > 0:
                requests[name] = requests.get(name, 0) + amount
        limited: set[str] = set()
        for name, amount in container.limits.items():
            if name in QOS_COMPUTE_RESOURCES and amount > 0:
                limited.add(name)
                limits[name] = limits.get(name, 0) + amount
        if not limited >= QOS_COMPUTE_RESOURCES:
            every_container_limits_both = False

    if not requests and not limits:
        return QOSClass.BESTEFFORT
    if every_container_limits_both and requests == limits:
        return QOSClass.GUARANTEED
    return QOSClass.BURSTABLE


def _add_into(total: dict[str, int], amounts: Iterable[tuple[str, int]]) -> None:
    for name, amount in amounts:
        total[name] = total.get(name, 0) + amount


def effective_requests(
    *,
    containers: Sequence[ContainerResources],
    init_containers: Sequence[ContainerResources] = (),
) -> dict[str, int]:
    """Return the pod's requests: per resource, max(sum of app containers, largest init container).

    Requests are defaulted from limits first (see the module docstring).  A
    resource nobody requests is absent from the result rather than zero.
    """
    total: dict[str, int] = {}
    for container in containers:
        _add_into(total, default_requests_from_limits(container).requests.items())
    for container in init_containers:
        for name, amount in default_requests_from_limits(container).requests.items():
            if name not in total or amount > total[name]:
                total[name] = amount
    return total
