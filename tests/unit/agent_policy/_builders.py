"""Small builders with defaults, so test tables only spell out what matters."""

from __future__ import annotations

from collections.abc import Mapping

from sluicegate.agent.policy import (
    SYSTEM_CLUSTER_CRITICAL,
    SYSTEM_NODE_CRITICAL,
    ContainerResources,
    PodInfo,
    QOSClass,
)

Ki = 2**10
Mi = 2**20
Gi = 2**30


def container(
    *,
    cpu: int | None = None,
    memory: int | None = None,
    cpu_limit: int | None = None,
    memory_limit: int | None = None,
    extra: Mapping[str, int] | None = None,
) -> ContainerResources:
    """A container; cpu in millicores, memory in bytes; ``extra`` are further requests."""
    requests = {name: value for name, value in (("cpu", cpu), ("memory", memory)) if value is not None}
    requests.update(extra or {})
    limits = {name: value for name, value in (("cpu", cpu_limit), ("memory", memory_limit)) if value is not None}
    return ContainerResources(requests=requests, limits=limits)


def pod(
    name: str,
    *,
    qos: QOSClass = QOSClass.BURSTABLE,
    cpu: int = 0,
    memory: int = 0,
    priority: int = 0,
    static: bool = False,
    mirror: bool = False,
    admitted_at: float = 0.0,
    extra: Mapping[str, int] | None = None,
) -> PodInfo:
    """A pod whose uid is its name; ``extra`` are further requests; zero requests are left out."""
    pairs = [("cpu", cpu), ("memory", memory), *(extra or {}).items()]
    requests = {key: value for key, value in pairs if value}
    return PodInfo(
        uid=name,
        namespace="default",
        name=name,
        priority=priority,
        qos=qos,
        requests=requests,
        is_static=static,
        is_mirror=mirror,
        admitted_at=admitted_at,
    )


# The kubelet's own preemption test fixtures (pkg/kubelet/preemption/preemption_test.go),
# rebuilt as our values.  Requests equal limits for the Guaranteed ones.
BEST_EFFORT = pod("best-effort", qos=QOSClass.BESTEFFORT)
BURSTABLE = pod("burstable", cpu=100, memory=100 * Mi)
HIGH_REQUEST_BURSTABLE = pod("high-request-burstable", cpu=300, memory=300 * Mi)
HIGH_PRIORITY_BURSTABLE = pod("high-priority-burstable", cpu=200, memory=200 * Mi, priority=100)
GUARANTEED = pod("guaranteed", qos=QOSClass.GUARANTEED, cpu=100, memory=100 * Mi)
HIGH_REQUEST_GUARANTEED = pod("high-request-guaranteed", qos=QOSClass.GUARANTEED, cpu=300, memory=300 * Mi)
CLUSTER_CRITICAL = pod("cluster-critical", cpu=100, memory=100 * Mi, priority=SYSTEM_CLUSTER_CRITICAL)
NODE_CRITICAL = pod("node-critical", cpu=100, memory=100 * Mi, priority=SYSTEM_NODE_CRITICAL)
