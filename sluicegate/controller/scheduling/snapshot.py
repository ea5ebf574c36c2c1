"""What a scheduling cycle sees: the quota tree through a cycle-local overlay.

The controller's cache owns the live quota tree and the admitted-workload
maps.  A cycle runs synchronously (no awaits), so nothing mutates the live
state while it runs; the snapshot shares the live structures instead of
copying them and records everything the cycle assumes in a
:class:`UsageOverlay` that is dropped afterwards.  Taking a snapshot is
therefore O(1), whatever the number of queues or workloads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from sluicegate.controller.scheduling.quota import QuotaNode, QuotaTree, UsageOverlay
from sluicegate.model.config import ControllerConfig, RequeuingTimestamp
from sluicegate.model.names import ClusterQueueName, FlavorName, WorkloadKey
from sluicegate.model.objects import ResourceFlavor
from sluicegate.model.queues import ClusterQueueSpec
from sluicegate.model.resources import FlavorResource
from sluicegate.model.workloads import Workload


@dataclass(frozen=True, slots=True)
class AdmittedWorkload:
    """A workload holding quota, as the preemption logic sees it."""

    workload: Workload
    cluster_queue: ClusterQueueName
    usage: Mapping[FlavorResource, int]
    # When quota was reserved (QuotaReserved lastTransitionTime): the
    # "most recently admitted first" candidate order uses it.
    admitted_at: float

    @property
    def key(self) -> WorkloadKey:
        return self.workload.key

    def uses_any(self, frs: frozenset[FlavorResource] | set[FlavorResource]) -> bool:
        return any(fr in self.usage for fr in frs)


@dataclass(slots=True)
class Snapshot:
    tree: QuotaTree
    cluster_queues: Mapping[ClusterQueueName, ClusterQueueSpec]
    flavors: Mapping[FlavorName, ResourceFlavor]
    # Per ClusterQueue, the workloads that hold quota there.
    admitted: Mapping[ClusterQueueName, Mapping[WorkloadKey, AdmittedWorkload]]
    config: ControllerConfig = field(default_factory=ControllerConfig)
    # Queues that admit nothing now (stopPolicy set, or a flavor missing).
    inactive: frozenset[ClusterQueueName] = frozenset()
    # Labels of a namespace (including kubernetes.io/metadata.name).
    namespace_labels: Callable[[str], Mapping[str, str]] = lambda ns: {"kubernetes.io/metadata.name": ns}
    now: float = 0.0
    view: UsageOverlay = field(default_factory=UsageOverlay)
    # A workload's LocalQueue usage where its ClusterQueue orders by it (Admission Fair Sharing).
    local_queue_usage: Callable[[Workload], float | None] = lambda wl: None

    def node(self, cq: ClusterQueueName) -> QuotaNode:
        return self.tree.cluster_queues[cq]

    def admitted_in(self, cq: ClusterQueueName) -> Mapping[WorkloadKey, AdmittedWorkload]:
        return self.admitted.get(cq, {})

    @property
    def fair_sharing(self) -> bool:
        return self.config.fair_sharing.enabled


def queue_order_timestamp(wl: Workload, requeuing: RequeuingTimestamp = RequeuingTimestamp.EVICTION) -> float:
    """The time FIFO ordering uses: creation, or the eviction for a pods-ready timeout."""
    if requeuing is RequeuingTimestamp.EVICTION:
        cond = wl.status.condition("Evicted")
        if cond is not None and cond.is_true and cond.reason == "PodsReadyTimeout":
            return cond.last_transition_time
    return wl.creation_timestamp
