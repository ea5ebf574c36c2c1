"""Values of the object model: flavors, queues, cohorts, workloads, conditions.

Everything here is a frozen dataclass or a NewType over ``str``: the scheduler
reasons over these values and never sees protos, YAML dicts or rows.  Field
names follow Kueue v1beta2 in snake_case so a reader of Kueue's API finds
each concept where they expect it.
"""

from sluicegate.model.config import (
    AdmissionFairSharingConfig,
    ControllerConfig,
    FairPreemptionStrategy,
    FairSharingConfig,
    RequeuingTimestamp,
    WaitForPodsReadyConfig,
)
from sluicegate.model.labels import LabelSelector, SelectorRequirement
from sluicegate.model.names import (
    ClusterQueueName,
    CohortName,
    FlavorName,
    LocalQueueName,
    WorkloadKey,
    workload_key,
)
from sluicegate.model.objects import (
    SYSTEM_CLUSTER_CRITICAL,
    SYSTEM_NODE_CRITICAL,
    Namespace,
    PriorityClass,
    ResourceFlavor,
    WorkloadPriorityClass,
)
from sluicegate.model.queues import (
    AdmissionFairSharingStatus,
    AdmissionMode,
    BorrowWithinCohortPolicy,
    ClusterQueueSpec,
    CohortSpec,
    FlavorFungibility,
    FlavorFungibilityPolicy,
    FlavorQuotas,
    FungibilityPreference,
    LocalQueueSpec,
    Preemption,
    PreemptionPolicy,
    QueueingStrategy,
    ReclaimPolicy,
    ResourceGroup,
    ResourceQuota,
    StopPolicy,
)
from sluicegate.model.resources import FlavorResource, Quantities
from sluicegate.model.topology import Topology, TopologyAssignment, TopologyDomain, TopologyRequest
from sluicegate.model.workloads import (
    Admission,
    Condition,
    Container,
    PodSet,
    PodSetAssignment,
    RequeueState,
    Workload,
    WorkloadStatus,
)

__all__ = [
    "AdmissionFairSharingConfig",
    "AdmissionFairSharingStatus",
    "AdmissionMode",
    "ControllerConfig",
    "FairPreemptionStrategy",
    "FairSharingConfig",
    "RequeuingTimestamp",
    "WaitForPodsReadyConfig",
    "Admission",
    "BorrowWithinCohortPolicy",
    "ClusterQueueName",
    "ClusterQueueSpec",
    "CohortName",
    "CohortSpec",
    "Condition",
    "Container",
    "FlavorFungibility",
    "FlavorFungibilityPolicy",
    "FlavorName",
    "FlavorQuotas",
    "FlavorResource",
    "FungibilityPreference",
    "LabelSelector",
    "LocalQueueName",
    "LocalQueueSpec",
    "Namespace",
    "PodSet",
    "PodSetAssignment",
    "Preemption",
    "PreemptionPolicy",
    "PriorityClass",
    "Quantities",
    "QueueingStrategy",
    "ReclaimPolicy",
    "RequeueState",
    "ResourceFlavor",
    "ResourceGroup",
    "ResourceQuota",
    "SelectorRequirement",
    "StopPolicy",
    "SYSTEM_CLUSTER_CRITICAL",
    "SYSTEM_NODE_CRITICAL",
    "Workload",
    "WorkloadKey",
    "WorkloadPriorityClass",
    "Topology",
    "TopologyAssignment",
    "TopologyDomain",
    "TopologyRequest",
    "WorkloadStatus",
    "workload_key",
]
