"""The controller's Configuration (Kueue's config.kueue.x-k8s.io shape)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field


class FairPreemptionStrategy(enum.Enum):
    LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"
    LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"


class RequeuingTimestamp(enum.Enum):
    EVICTION = "Eviction"
    CREATION = "Creation"


@dataclass(frozen=True, slots=True)
class FairSharingConfig:
    enabled: bool = False
    preemption_strategies: tuple[FairPreemptionStrategy, ...] = (
        FairPreemptionStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
        FairPreemptionStrategy.LESS_THAN_INITIAL_SHARE,
    )


@dataclass(frozen=True, slots=True)
class WaitForPodsReadyConfig:
    enabled: bool = False
    timeout_seconds: float = 300.0
    recovery_timeout_seconds: float | None = None
    block_admission: bool = False
    requeuing_timestamp: RequeuingTimestamp = RequeuingTimestamp.EVICTION
    backoff_base_seconds: float = 60.0
    backoff_max_seconds: float = 3600.0
    # None: requeue forever.
    backoff_limit_count: int | None = None


@dataclass(frozen=True, slots=True)
class AdmissionFairSharingConfig:
    """Kueue's Configuration admissionFairSharing (present: the feature is on)."""

    # 0: usage is reset at once (it never accumulates).
    usage_half_life_seconds: float = 0.0
    usage_sampling_interval_seconds: float = 300.0
    # Resources not listed weigh 1.
    resource_weights: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    fair_sharing: FairSharingConfig = field(default_factory=FairSharingConfig)
    wait_for_pods_ready: WaitForPodsReadyConfig = field(default_factory=WaitForPodsReadyConfig)
    label_keys_to_copy: tuple[str, ...] = ()
    admission_fair_sharing: AdmissionFairSharingConfig | None = None
