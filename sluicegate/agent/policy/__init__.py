"""The agent's node-side decisions, as pure functions over values.

This layer holds the kubelet's guarantees, reimplemented for processes on
bare metal, and nothing else:

* ``qos``: a pod's QoS class (Guaranteed, Burstable, BestEffort) and its
  effective requests, exactly as Kubernetes computes them;
* ``admission``: whether a pod fits the node, and for a critical pod that
  does not fit, which running pods to stop so that it does (QoS tiers, as
  the kubelet's merged code has them, then its distance heuristic);
* ``eviction``: eviction thresholds, when a signal counts as under pressure
  (soft thresholds with grace periods), and which pod to evict first.

Callers pass readings, pod descriptions and "now"; functions return decisions
(admit, reject with reasons, victims in order).  Nothing here starts or stops
processes, reads a clock, or imports asyncio, psutil or logging setup: the
runtime and monitor around it do that, which keeps every decision
deterministic and testable with small tables.
"""

from sluicegate.agent.policy.admission import (
    PODS,
    PREEMPTION_FAILED_REASON,
    SYSTEM_CLUSTER_CRITICAL,
    SYSTEM_CRITICAL_PRIORITY,
    SYSTEM_NODE_CRITICAL,
    AdmissionDecision,
    AdmissionFailure,
    InsufficientResource,
    InsufficientToPreempt,
    PodInfo,
    PredicateFailure,
    admit_pod,
    fit,
    handle_admission_failure,
    is_critical,
    is_preemptable,
    pod_request,
    pods_to_preempt,
    preemption_tiers,
    requirement_distance,
)
from sluicegate.agent.policy.eviction import (
    DEFAULT_EVICTION_HARD,
    NO_PRESSURE,
    SIGNAL_TO_RANK,
    EvictionConfigError,
    PodUsage,
    PressureState,
    RankFunc,
    Signal,
    SignalObservation,
    Threshold,
    build_signal_to_rank,
    default_thresholds,
    evaluate_pressure,
    parse_duration,
    parse_eviction_config,
    parse_grace_periods,
    parse_threshold,
    parse_thresholds,
    rank_disk_pressure,
    rank_memory_pressure,
    select_eviction_victim,
    thresholds_first_observed_at,
    thresholds_met,
    thresholds_met_grace_period,
)
from sluicegate.agent.policy.qos import (
    QOS_COMPUTE_RESOURCES,
    ContainerResources,
    QOSClass,
    default_requests_from_limits,
    effective_requests,
    pod_qos,
)

__all__ = [
    # qos
    "QOS_COMPUTE_RESOURCES",
    "QOSClass",
    "ContainerResources",
    "default_requests_from_limits",
    "pod_qos",
    "effective_requests",
    # admission
    "SYSTEM_CLUSTER_CRITICAL",
    "SYSTEM_NODE_CRITICAL",
    "SYSTEM_CRITICAL_PRIORITY",
    "PODS",
    "PREEMPTION_FAILED_REASON",
    "PodInfo",
    "InsufficientResource",
    "PredicateFailure",
    "AdmissionFailure",
    "AdmissionDecision",
    "InsufficientToPreempt",
    "is_critical",
    "is_preemptable",
    "pod_request",
    "fit",
    "requirement_distance",
    "preemption_tiers",
    "pods_to_preempt",
    "handle_admission_failure",
    "admit_pod",
    # eviction
    "Signal",
    "DEFAULT_EVICTION_HARD",
    "Threshold",
    "EvictionConfigError",
    "parse_threshold",
    "parse_thresholds",
    "parse_duration",
    "parse_grace_periods",
    "parse_eviction_config",
    "default_thresholds",
    "SignalObservation",
    "thresholds_met",
    "thresholds_first_observed_at",
    "thresholds_met_grace_period",
    "PressureState",
    "NO_PRESSURE",
    "evaluate_pressure",
    "PodUsage",
    "RankFunc",
    "rank_memory_pressure",
    "rank_disk_pressure",
    "build_signal_to_rank",
    "SIGNAL_TO_RANK",
    "select_eviction_victim",
]
