"""Admission Fair Sharing: the decayed usage of LocalQueues and the order it gives (pure).

Kueue's semantics (pkg/util/admissionfairsharing/admission_fair_sharing.go, the LocalQueue
reconciler's reconcileConsumedUsage and the workload reconciler's updateAfsConsumedUsage):

* ``alpha(t) = 1 - 0.5 ** (t / halfLife)``, and 0 when the half-life is 0;
* every sampling interval a LocalQueue's consumed resources become
  ``consumed * (1 - alpha(elapsed)) + admitted * alpha(elapsed)``, where ``admitted`` is what its
  admitted workloads hold now; with a half-life of 0 they are reset to nothing;
* when a workload is admitted in a UsageBasedAdmissionFairSharing ClusterQueue, its LocalQueue is charged
  an *entry penalty* ``alpha(samplingInterval) * requests`` at once (on top of the decay to now), so that
  a burst of submissions cannot all go first before the next sample;
* a LocalQueue's usage is ``sum(resourceWeight[r] * consumed[r]) / weight`` (unlisted resources weigh 1,
  a weight of 0 or less gives +inf: the queue goes last);
* pending workloads of such a ClusterQueue are ordered by their LocalQueue's usage, lowest first, then
  by the usual order (priority, then queue-order timestamp).

Quantities are in each resource's base unit (millicores, bytes), as Kueue's ``AsApproximateFloat64``
works in whole units this only scales every usage by the same factor per resource; the order is the same.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from fractions import Fraction

from sluicegate.model.config import AdmissionFairSharingConfig
from sluicegate.model.workloads import Workload


def alpha(elapsed: float, half_life: float) -> float:
    """The share of the new sample after ``elapsed`` seconds (Kueue's calculateAlphaRate)."""
    if half_life == 0:
        return 0.0
    return 1.0 - math.pow(0.5, elapsed / half_life)


def decayed(old: Mapping[str, float], new: Mapping[str, float], elapsed: float,
            half_life: float) -> dict[str, float]:
    """``old`` decayed over ``elapsed`` seconds with ``new`` blended in (Kueue's CalculateDecayedConsumed)."""
    a = alpha(max(0.0, elapsed), half_life)
    out: dict[str, float] = {}
    for res, v in old.items():
        out[res] = out.get(res, 0.0) + v * (1.0 - a)
    for res, v in new.items():
        out[res] = out.get(res, 0.0) + v * a
    return out


def sampled(old: Mapping[str, float], admitted: Mapping[str, float], elapsed: float,
            half_life: float) -> dict[str, float]:
    """A sampling tick: the decayed usage, or nothing at all when the half-life is 0 (usage resets)."""
    if half_life == 0:
        return {}
    return decayed(old, admitted, elapsed, half_life)


def entry_penalty(requests: Mapping[str, float], cfg: AdmissionFairSharingConfig) -> dict[str, float]:
    """What admitting a workload with these total requests charges its LocalQueue at once."""
    a = alpha(cfg.usage_sampling_interval_seconds, cfg.usage_half_life_seconds)
    return {res: v * a for res, v in requests.items()}


def charged(old: Mapping[str, float], admitted: Mapping[str, float], penalty: Mapping[str, float],
            elapsed: float, half_life: float) -> dict[str, float]:
    """An admission settles its penalty: decay to now (with what is admitted now), plus the penalty."""
    out = decayed(old, admitted, elapsed, half_life)
    for res, v in penalty.items():
        out[res] = out.get(res, 0.0) + v
    return out


def usage(consumed: Mapping[str, float], weight: Fraction | float,
          resource_weights: Mapping[str, float]) -> float:
    """The LocalQueue's weighted usage, the key its workloads are ordered by (Kueue's CalculateUsage)."""
    total = 0.0
    for res in sorted(consumed):
        total += resource_weights.get(res, 1.0) * consumed[res]
    if weight <= 0:
        return math.inf
    return total / float(weight)


def dominant_share(admitted: Mapping[str, float], capacity: Mapping[str, float], weight: Fraction | float) -> float:
    """A LocalQueue's current dominant share over its weight (kube-batch's drf plugin, no history).

    The share of a resource is what the LocalQueue's admitted workloads hold
    of it over what the ClusterQueue could hold; the dominant share is the
    largest.  Holding a resource the queue has no capacity for counts as
    infinite, and so does a weight of 0 or less (the queue goes last).
    """
    if weight <= 0:
        return math.inf
    share = 0.0
    for res, held in admitted.items():
        if held <= 0:
            continue
        cap = capacity.get(res, 0.0)
        share = max(share, held / cap if cap > 0 else math.inf)
    return share / float(weight)


def total_requests(wl: Workload) -> dict[str, float]:
    """The quota a workload asks for, summed over its pod sets (its admitted counts when it holds quota)."""
    out: dict[str, float] = {}
    adm = wl.status.admission
    if adm is not None:
        for psa in adm.pod_set_assignments:
            for res, qty in psa.resource_usage.items():
                out[res] = out.get(res, 0.0) + qty
        return out
    for ps in wl.pod_sets:
        for res, per_pod in ps.requests.items():
            out[res] = out.get(res, 0.0) + per_pod * ps.count
    return out


def admitted_usage(workloads: Iterable[Workload]) -> dict[str, float]:
    """What a LocalQueue's admitted workloads hold now (Kueue's GetAdmittedUsage), by resource."""
    out: dict[str, float] = {}
    for wl in workloads:
        for res, v in total_requests(wl).items():
            out[res] = out.get(res, 0.0) + v
    return out
