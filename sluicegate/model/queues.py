"""ClusterQueues, Cohorts and LocalQueues, with Kueue v1beta2 defaults."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from sluicegate.model.labels import LabelSelector
from sluicegate.model.names import ClusterQueueName, CohortName, FlavorName
from sluicegate.model.resources import FlavorResource


class QueueingStrategy(enum.Enum):
    STRICT_FIFO = "StrictFIFO"
    BEST_EFFORT_FIFO = "BestEffortFIFO"
    # A sluicegate extension (sluicegate.io/v1beta2 only): BestEffortFIFO
    # that holds a reservation for a blocked head and lets later workloads
    # run ahead only where they cannot delay it (scheduling/backfill.py).
    BACKFILL = "Backfill"


class StopPolicy(enum.Enum):
    NONE = "None"
    HOLD = "Hold"
    HOLD_AND_DRAIN = "HoldAndDrain"


class PreemptionPolicy(enum.Enum):
    """withinClusterQueue."""

    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    LOWER_OR_NEWER_EQUAL_PRIORITY = "LowerOrNewerEqualPriority"


class ReclaimPolicy(enum.Enum):
    """reclaimWithinCohort."""

    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    ANY = "Any"


class BorrowWithinCohortPolicy(enum.Enum):
    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"


class AdmissionMode(enum.Enum):
    """ClusterQueue spec.admissionScope.admissionMode."""

    USAGE_BASED_ADMISSION_FAIR_SHARING = "UsageBasedAdmissionFairSharing"
    NO_ADMISSION_SCOPE = "NoAdmissionScope"
    # A sluicegate extension (sluicegate.io/v1beta2 only): kube-batch's DRF
    # order of LocalQueues by their current dominant share, no history.
    DOMINANT_RESOURCE_SHARE = "DominantResourceShare"


class FlavorFungibilityPolicy(enum.Enum):
    MAY_STOP_SEARCH = "MayStopSearch"
    TRY_NEXT_FLAVOR = "TryNextFlavor"


class FungibilityPreference(enum.Enum):
    BORROWING_OVER_PREEMPTION = "BorrowingOverPreemption"
    PREEMPTION_OVER_BORROWING = "PreemptionOverBorrowing"


@dataclass(frozen=True, slots=True)
class ResourceQuota:
    nominal: int
    # None means "no limit", exactly as in Kueue.
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(frozen=True, slots=True)
class FlavorQuotas:
    name: FlavorName
    resources: Mapping[str, ResourceQuota]


@dataclass(frozen=True, slots=True)
class ResourceGroup:
    covered_resources: tuple[str, ...]
    flavors: tuple[FlavorQuotas, ...]


@dataclass(frozen=True, slots=True)
class Preemption:
    within_cluster_queue: PreemptionPolicy = PreemptionPolicy.NEVER
    reclaim_within_cohort: ReclaimPolicy = ReclaimPolicy.NEVER
    borrow_within_cohort: BorrowWithinCohortPolicy = BorrowWithinCohortPolicy.NEVER
    max_priority_threshold: int | None = None


@dataclass(frozen=True, slots=True)
class FlavorFungibility:
    # v1beta2 defaults: stop at a flavor that fits by borrowing, but look at
    # the next flavor before preempting.
    when_can_borrow: FlavorFungibilityPolicy = FlavorFungibilityPolicy.MAY_STOP_SEARCH
    when_can_preempt: FlavorFungibilityPolicy = FlavorFungibilityPolicy.TRY_NEXT_FLAVOR
    preference: FungibilityPreference | None = None


def quotas_of(groups: tuple[ResourceGroup, ...]) -> dict[FlavorResource, ResourceQuota]:
    return {
        FlavorResource(fq.name, res): quota
        for rg in groups
        for fq in rg.flavors
        for res, quota in fq.resources.items()
    }


@dataclass(frozen=True, slots=True)
class ClusterQueueSpec:
    name: ClusterQueueName
    resource_groups: tuple[ResourceGroup, ...] = ()
    cohort: CohortName | None = None
    # None is Kueue's "nothing" selector: no namespace may use the queue.
    namespace_selector: LabelSelector | None = None
    queueing_strategy: QueueingStrategy = QueueingStrategy.BEST_EFFORT_FIFO
    preemption: Preemption = field(default_factory=Preemption)
    flavor_fungibility: FlavorFungibility = field(default_factory=FlavorFungibility)
    fair_sharing_weight: Fraction = Fraction(1)
    stop_policy: StopPolicy = StopPolicy.NONE
    # A sluicegate extension (sluicegate.io/v1beta2 only): for this many
    # seconds after its quota reservation, a workload admitted here is no
    # candidate for reclaim or fair-sharing preemption (None: no protection).
    min_admit_duration: float | None = None
    # spec.admissionScope.admissionMode (None: no admissionScope).
    admission_mode: AdmissionMode | None = None

    @property
    def usage_based_admission(self) -> bool:
        """Whether Admission Fair Sharing orders this queue's pending workloads (given the configuration has it)."""
        return self.admission_mode is AdmissionMode.USAGE_BASED_ADMISSION_FAIR_SHARING

    @property
    def dominant_share_admission(self) -> bool:
        """Whether pending workloads here go by their LocalQueue's current dominant share (needs no configuration)."""
        return self.admission_mode is AdmissionMode.DOMINANT_RESOURCE_SHARE

    def quotas(self) -> dict[FlavorResource, ResourceQuota]:
        return quotas_of(self.resource_groups)

    def group_for(self, resource: str) -> ResourceGroup | None:
        for rg in self.resource_groups:
            if resource in rg.covered_resources:
                return rg
        return None

    @property
    def flavors(self) -> tuple[FlavorName, ...]:
        return tuple(f.name for rg in self.resource_groups for f in rg.flavors)


@dataclass(frozen=True, slots=True)
class CohortSpec:
    name: CohortName
    parent: CohortName | None = None
    resource_groups: tuple[ResourceGroup, ...] = ()
    fair_sharing_weight: Fraction = Fraction(1)

    def quotas(self) -> dict[FlavorResource, ResourceQuota]:
        return quotas_of(self.resource_groups)


@dataclass(frozen=True, slots=True)
class AdmissionFairSharingStatus:
    """LocalQueue status.fairSharing.admissionFairSharingStatus: the decayed usage Admission Fair Sharing orders by.

    ``consumed_resources`` is in each resource's base unit (millicores for cpu, bytes for memory), as a float:
    decay makes fractions.  ``last_update`` is a Unix time.
    """

    consumed_resources: Mapping[str, float]
    last_update: float


@dataclass(frozen=True, slots=True)
class LocalQueueSpec:
    namespace: str
    name: str
    cluster_queue: ClusterQueueName
    stop_policy: StopPolicy = StopPolicy.NONE
    # spec.fairSharing.weight: Admission Fair Sharing divides the queue's usage by it.
    fair_sharing_weight: Fraction = Fraction(1)
    # Observed state the controller keeps durably (it is not part of what a user applies, so it does not count
    # when two LocalQueues are compared).
    admission_fair_sharing_status: AdmissionFairSharingStatus | None = field(default=None, compare=False)
