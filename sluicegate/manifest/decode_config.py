"""The controller Configuration (Kueue's ``config.kueue.x-k8s.io`` Configuration).

Three spellings are read:

* ``config.kueue.x-k8s.io/v1beta1``: sections carry an ``enable`` flag
  (default false); waitForPodsReady.blockAdmission defaults to true when
  enabled.
* ``config.kueue.x-k8s.io/v1beta2``: a section that is present is enabled;
  blockAdmission defaults to false; waitForPodsReady.timeout is required.
* ``sluicegate.io/v1beta2``: v1beta2 plus an optional ``enable`` (default
  true) on fairSharing and waitForPodsReady, so that a configured section can
  be switched off without losing its settings.  This is what
  :func:`sluicegate.manifest.encode.encode` writes.
"""

from __future__ import annotations

import math

from sluicegate.manifest.dialect import Dialect
from sluicegate.manifest.reader import Fields, index, keyed
from sluicegate.manifest.syntax import qualified_name_problem, show
from sluicegate.manifest.timefmt import parse_duration
from sluicegate.model import (
    AdmissionFairSharingConfig,
    ControllerConfig,
    FairPreemptionStrategy,
    FairSharingConfig,
    RequeuingTimestamp,
    WaitForPodsReadyConfig,
)

# Sections of Kueue's Configuration that configure Kueue as a Kubernetes
# controller (its API client, webhooks, leader election, which Job kinds it
# watches).  sluicegate has no API server, webhooks or Job integrations, so
# these carry no meaning here.  They are accepted, unread, so that Kueue's
# own default configuration file loads as it is; the reason for each is
# given so nobody mistakes them for honoured settings.
IGNORED_CONFIGURATION_SECTIONS: dict[str, str] = {
    "namespace": "the Kubernetes namespace Kueue is deployed in",
    "manageJobsWithoutQueueName": "sluicegate receives Workloads, never unmanaged Jobs",
    "managedJobsNamespaceSelector": "sluicegate receives Workloads, never unmanaged Jobs",
    "internalCertManagement": "certificates for Kueue's admission webhooks; sluicegate has none",
    "webhook": "Kueue's admission webhook server; sluicegate has none",
    "clientConnection": "rate limits of Kueue's Kubernetes API client; sluicegate talks to no API server",
    "leaderElection": (
        "Kubernetes Lease election; the sluicegate controller's high availability is set by its own flags"
    ),
    "controller": "controller-runtime reconciler concurrency and cache sync timeout",
    "metrics": "the Kueue manager's Prometheus endpoint; sluicegate's is set by its own flags",
    "health": "the Kueue manager's probe endpoint; sluicegate's is set by its own flags",
    "pprofBindAddress": "the Go profiler of the Kueue manager",
    "tls": "TLS settings of Kueue's webhook and metrics servers",
    "queueVisibility": (
        "v1beta1 pending-workload snapshots in ClusterQueue status; sluicectl asks the controller instead"
    ),
    "visibilityServer": "Kueue's visibility API server; sluicectl asks the controller instead",
}
# Inside integrations: which Kubernetes Job kinds Kueue should manage.
# sluicegate schedules Workloads directly, so there is nothing to select.
IGNORED_INTEGRATIONS_FIELDS: dict[str, str] = {
    "frameworks": "Kubernetes Job kinds Kueue manages; sluicegate schedules Workloads directly",
    "externalFrameworks": "Kubernetes Job kinds Kueue manages; sluicegate schedules Workloads directly",
    "podOptions": "which plain Pods Kueue manages; sluicegate schedules Workloads directly",
}
CONFIGURATION_UNSUPPORTED: dict[str, str] = {
    "multiKueue": "MultiKueue is not implemented",
    "resources": "resource exclusion and transformation are not implemented; quota counts requests as written",
    "featureGates": "sluicegate has no Kueue feature gates; its behaviour is that of Kueue's defaults",
    "objectRetentionPolicies": "automatic deletion of finished workloads is not implemented",
}
WAIT_FOR_PODS_READY_UNSUPPORTED: dict[str, str] = {
    "unscheduledTimeout": "not implemented",
    "maxTimeoutOnWorkload": "per-workload timeouts are not implemented",
}

STRATEGIES = {s.value: s for s in FairPreemptionStrategy}
# Kueue accepts exactly these sequences; order matters (later strategies are
# tried only when earlier ones do not make room).
VALID_STRATEGY_SEQUENCES: tuple[tuple[FairPreemptionStrategy, ...], ...] = (
    (FairPreemptionStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,),
    (FairPreemptionStrategy.LESS_THAN_INITIAL_SHARE,),
    (FairPreemptionStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, FairPreemptionStrategy.LESS_THAN_INITIAL_SHARE),
)
TIMESTAMPS = {t.value: t for t in RequeuingTimestamp}


def configuration_fields() -> tuple[tuple[str, ...], dict[str, str]]:
    """(known top-level fields, unsupported ones) of a Configuration document."""
    known = ("apiVersion", "kind", "fairSharing", "waitForPodsReady", "integrations", "admissionFairSharing",
             *IGNORED_CONFIGURATION_SECTIONS)
    return known, dict(CONFIGURATION_UNSUPPORTED)


def read_configuration(doc: Fields, dialect: Dialect) -> ControllerConfig:
    return ControllerConfig(
        fair_sharing=_read_fair_sharing(doc, dialect),
        wait_for_pods_ready=_read_wait_for_pods_ready(doc, dialect),
        label_keys_to_copy=_read_integrations(doc),
        admission_fair_sharing=_read_admission_fair_sharing(doc),
    )


def _read_admission_fair_sharing(doc: Fields) -> AdmissionFairSharingConfig | None:
    """admissionFairSharing: present means on (Kueue has no enable flag here, in any apiVersion).

    Kueue's defaults and validation: usageHalfLifeTime defaults to 0 and may not be negative;
    usageSamplingInterval defaults to 5m and must be positive; resourceWeights may not be negative.
    """
    afs = doc.mapping("admissionFairSharing", known=("usageHalfLifeTime", "usageSamplingInterval", "resourceWeights"))
    if afs is None:
        return None
    defaults = AdmissionFairSharingConfig()
    half_life = _duration(afs, "usageHalfLifeTime", required=False)
    sampling = _duration(afs, "usageSamplingInterval", required=False)
    if sampling is not None and sampling == 0:
        afs.error("usageSamplingInterval", "must be greater than 0")
    weights: dict[str, float] = {}
    raw = afs.get("resourceWeights")
    if raw is not None and not isinstance(raw, dict):
        afs.error("resourceWeights", f"must be a mapping of resource names to numbers, got {show(raw)}")
    elif isinstance(raw, dict):
        for res, weight in raw.items():
            path = keyed(afs.path("resourceWeights"), str(res))
            problem = qualified_name_problem(res) if isinstance(res, str) else "must be a string"
            if problem is not None:
                afs.problems.add(path, f"key {problem}")
            elif isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight):
                afs.problems.add(path, f"must be a number, got {show(weight)}")
            elif weight < 0:
                afs.problems.add(path, f"must be non-negative, got {show(weight)}")
            else:
                weights[res] = float(weight)
    return AdmissionFairSharingConfig(
        usage_half_life_seconds=defaults.usage_half_life_seconds if half_life is None else half_life,
        usage_sampling_interval_seconds=defaults.usage_sampling_interval_seconds if not sampling else sampling,
        resource_weights=weights,
    )


def _has_enable_flag(dialect: Dialect) -> bool:
    return dialect.v1beta1 or dialect.native


def _enabled(section: Fields, dialect: Dialect) -> bool:
    if dialect.v1beta1:
        return section.boolean("enable", default=False)
    if dialect.native:
        return section.boolean("enable", default=True)
    return True


def _read_fair_sharing(doc: Fields, dialect: Dialect) -> FairSharingConfig:
    known = ("enable", "preemptionStrategies") if _has_enable_flag(dialect) else ("preemptionStrategies",)
    fs = doc.mapping("fairSharing", known=known, unsupported=_no_enable(dialect))
    if fs is None:
        return FairSharingConfig()
    enabled = _enabled(fs, dialect)
    strategies: list[FairPreemptionStrategy] = []
    ok = True
    for path, raw in fs.items("preemptionStrategies"):
        if not isinstance(raw, str) or raw not in STRATEGIES:
            fs.problems.add(path, f"must be one of {', '.join(STRATEGIES)}, got {show(raw)}")
            ok = False
            continue
        strategies.append(STRATEGIES[raw])
    if not strategies:
        return FairSharingConfig(enabled=enabled)
    if ok and tuple(strategies) not in VALID_STRATEGY_SEQUENCES:
        allowed = "; ".join("[" + ", ".join(s.value for s in seq) + "]" for seq in VALID_STRATEGY_SEQUENCES)
        got = "[" + ", ".join(s.value for s in strategies) + "]"
        fs.error("preemptionStrategies", f"must be one of {allowed}, got {got}")
    return FairSharingConfig(enabled=enabled, preemption_strategies=tuple(strategies))


def _no_enable(dialect: Dialect) -> dict[str, str]:
    if _has_enable_flag(dialect):
        return {}
    return {"enable": f"{dialect.api_version} has no enable flag: the section's presence enables it"}


def _read_wait_for_pods_ready(doc: Fields, dialect: Dialect) -> WaitForPodsReadyConfig:
    known = ["timeout", "blockAdmission", "requeuingStrategy", "recoveryTimeout"]
    if _has_enable_flag(dialect):
        known.append("enable")
    wfpr = doc.mapping(
        "waitForPodsReady", known=known, unsupported={**WAIT_FOR_PODS_READY_UNSUPPORTED, **_no_enable(dialect)}
    )
    defaults = WaitForPodsReadyConfig()
    if wfpr is None:
        return defaults
    enabled = _enabled(wfpr, dialect)
    # v1beta1 defaults the timeout (5m); v1beta2 makes the author choose.
    timeout = _duration(wfpr, "timeout", required=not dialect.v1beta1)
    if timeout is not None and timeout == 0:
        wfpr.error("timeout", "must be positive: pods need some time to become ready")
    recovery = _duration(wfpr, "recoveryTimeout", required=False)
    block = wfpr.boolean("blockAdmission", default=enabled if dialect.v1beta1 else False)
    timestamp = defaults.requeuing_timestamp
    base = defaults.backoff_base_seconds
    cap = defaults.backoff_max_seconds
    limit: int | None = None
    rs = wfpr.mapping(
        "requeuingStrategy", known=("timestamp", "backoffLimitCount", "backoffBaseSeconds", "backoffMaxSeconds")
    )
    if rs is not None:
        timestamp = rs.choice("timestamp", TIMESTAMPS, default=defaults.requeuing_timestamp)
        limit = rs.integer("backoffLimitCount", minimum=0)
        base = _seconds(rs, "backoffBaseSeconds", default=base, native=dialect.native)
        cap = _seconds(rs, "backoffMaxSeconds", default=cap, native=dialect.native)
    return WaitForPodsReadyConfig(
        enabled=enabled,
        timeout_seconds=defaults.timeout_seconds if timeout is None else timeout,
        recovery_timeout_seconds=recovery,
        block_admission=block,
        requeuing_timestamp=timestamp,
        backoff_base_seconds=base,
        backoff_max_seconds=cap,
        backoff_limit_count=limit,
    )


def _duration(fields: Fields, key: str, *, required: bool) -> float | None:
    value = fields.get(key)
    if value is None:
        if required:
            fields.error(key, "required field is missing (a duration such as 5m)")
        return None
    if not isinstance(value, str):
        fields.error(key, f'must be a duration string such as "5m", "30s" or "1h30m", got {show(value)}')
        return None
    try:
        seconds = parse_duration(value)
    except ValueError as exc:
        fields.error(key, str(exc))
        return None
    if seconds < 0:
        fields.error(key, f"must be non-negative, got {show(value)}")
        return None
    return seconds


def _seconds(fields: Fields, key: str, *, default: float, native: bool) -> float:
    value = fields.get(key)
    # Kueue's fields are int32; our own apiVersion also takes a fraction,
    # which is what a hand-built ControllerConfig may hold.
    if native and isinstance(value, float):
        if value < 0:
            fields.error(key, f"must be non-negative, got {value!r}")
            return default
        return value
    seconds = fields.integer(key, minimum=0)
    return default if seconds is None else float(seconds)


def _read_integrations(doc: Fields) -> tuple[str, ...]:
    integ = doc.mapping("integrations", known=("labelKeysToCopy", *IGNORED_INTEGRATIONS_FIELDS))
    if integ is None:
        return ()
    keys = integ.strings("labelKeysToCopy", check=qualified_name_problem)
    seen: set[str] = set()
    for i, key in enumerate(keys):
        if key in seen:
            integ.problems.add(index(integ.path("labelKeysToCopy"), i), f"duplicate: {show(key)} is listed twice")
        seen.add(key)
    return keys
