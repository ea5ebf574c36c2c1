"""Small cluster-scoped objects: flavors, priority classes, namespaces."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sluicegate.model.names import FlavorName
from sluicegate.model.taints import Taint, Toleration

# Kubernetes' built-in priority classes.  The kubelet treats any pod at or
# above SYSTEM_CLUSTER_CRITICAL as critical.
SYSTEM_CLUSTER_CRITICAL = 2_000_000_000
SYSTEM_NODE_CRITICAL = 2_000_001_000


@dataclass(frozen=True, slots=True)
class ResourceFlavor:
    name: FlavorName
    # Nodes whose labels include all of these serve this flavor.
    node_labels: Mapping[str, str] = field(default_factory=dict)
    # Taints of those nodes: a pod set that does not tolerate one of the NoSchedule/NoExecute ones
    # (with this flavor's tolerations added) cannot use the flavor.
    node_taints: tuple[Taint, ...] = ()
    # Added to the tolerations of every pod admitted with this flavor (Kueue injects them).
    tolerations: tuple[Toleration, ...] = ()
    # Topology Aware Scheduling: the Topology whose levels this flavor's nodes are grouped by.
    topology_name: str | None = None


@dataclass(frozen=True, slots=True)
class WorkloadPriorityClass:
    name: str
    value: int
    description: str = ""


@dataclass(frozen=True, slots=True)
class PriorityClass:
    """Pod priority class (scheduling.k8s.io/v1 PriorityClass)."""

    name: str
    value: int
    global_default: bool = False
    description: str = ""
    preemption_policy: str = "PreemptLowerPriority"


@dataclass(frozen=True, slots=True)
class SimulatedNode:
    """A ``v1`` Node document, read only by ``sluicectl simulate``: on a controller, nodes are the
    agents that register."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    allocatable: Mapping[str, int] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()


@dataclass(frozen=True, slots=True)
class Namespace:
    """A tenant.  Only its labels matter: ClusterQueue namespaceSelectors match them."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)

    def effective_labels(self) -> dict[str, str]:
        # Kubernetes stamps every namespace with its own name as a label.
        return {**self.labels, "kubernetes.io/metadata.name": self.name}
