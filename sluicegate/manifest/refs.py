"""Identity of decoded objects: (kind, namespace, name)."""

from __future__ import annotations

from typing import TypeAlias

from sluicegate.model import (
    ClusterQueueSpec,
    CohortSpec,
    ControllerConfig,
    LocalQueueSpec,
    Namespace,
    PriorityClass,
    ResourceFlavor,
    Topology,
    Workload,
    WorkloadPriorityClass,
)
from sluicegate.model.objects import SimulatedNode
from sluicegate.model.podgroups import BatchQueue, PodGroup

# Everything a manifest document can decode to.
Decoded: TypeAlias = (
    ResourceFlavor
    | CohortSpec
    | ClusterQueueSpec
    | LocalQueueSpec
    | WorkloadPriorityClass
    | PriorityClass
    | Namespace
    | Workload
    | ControllerConfig
    | PodGroup
    | BatchQueue
    | Topology
    | SimulatedNode
)


def object_ref(obj: Decoded) -> tuple[str, str, str]:
    """(kind, namespace, name); namespace is "" for cluster-scoped kinds.

    The Configuration is a singleton: its name is "" too.
    """
    if isinstance(obj, ResourceFlavor):
        return ("ResourceFlavor", "", obj.name)
    if isinstance(obj, CohortSpec):
        return ("Cohort", "", obj.name)
    if isinstance(obj, ClusterQueueSpec):
        return ("ClusterQueue", "", obj.name)
    if isinstance(obj, LocalQueueSpec):
        return ("LocalQueue", obj.namespace, obj.name)
    if isinstance(obj, WorkloadPriorityClass):
        return ("WorkloadPriorityClass", "", obj.name)
    if isinstance(obj, PriorityClass):
        return ("PriorityClass", "", obj.name)
    if isinstance(obj, Namespace):
        return ("Namespace", "", obj.name)
    if isinstance(obj, Workload):
        return ("Workload", obj.namespace, obj.name)
    if isinstance(obj, PodGroup):
        return ("PodGroup", obj.namespace, obj.name)
    if isinstance(obj, SimulatedNode):
        return ("Node", "", obj.name)
    if isinstance(obj, Topology):
        return ("Topology", "", obj.name)
    if isinstance(obj, BatchQueue):
        return ("Queue", "", obj.name)
    if isinstance(obj, ControllerConfig):
        return ("Configuration", "", "")
    raise TypeError(f"not a manifest object: {type(obj).__name__}")
