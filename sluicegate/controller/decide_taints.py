"""Pure: which running pods a node's NoExecute taints evict, and when.

Kubernetes' taint eviction controller (``pkg/controller/tainteviction``)
deletes a pod at once when its node has a NoExecute taint the pod does not
tolerate, and after the shortest ``tolerationSeconds`` of the tolerations
that matched when every such taint is tolerated for a limited time; an
eviction already scheduled keeps the time it was first scheduled at, and is
cancelled when the taints go or the pod tolerates them for ever.

The controller, not the agent, decides this: it alone knows a pod's full
tolerations (its own plus those of the flavors it was admitted with), and it
is the one that requeues the workload; the agent keeps no scheduling state.
The schedule lives in memory, as in Kubernetes: after a controller restart
the agents register again and the allowances count from then.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sluicegate.model.taints import NO_EXECUTE, Taint, Toleration, first_untolerated, no_execute_allowance

# The reason Kubernetes gives a pod it deletes for a NoExecute taint (its DisruptionTarget condition).
TAINT_EVICTION_REASON = "DeletionByTaintManager"


@dataclass(frozen=True, slots=True)
class PodTolerations:
    uid: str
    name: str
    tolerations: tuple[Toleration, ...]


@dataclass(frozen=True, slots=True)
class TaintEviction:
    uid: str
    # When the eviction was first scheduled, and when it is due (the caller's clock).
    since: float
    due: float
    message: str


def _no_execute(taint: Taint) -> bool:
    return taint.effect == NO_EXECUTE


def taint_evictions(
    *,
    node: str,
    taints: Sequence[Taint],
    pods: Sequence[PodTolerations],
    scheduled: Mapping[str, TaintEviction],
    now: float,
    bound_at: Mapping[str, float] | None = None,
) -> dict[str, TaintEviction]:
    """The evictions the node's pods are under now, by pod uid (due <= now: evict at once).

    ``scheduled`` holds the ones decided before; a pod missing from the
    result has none (tolerated for ever, or no NoExecute taint left).
    ``bound_at``: when pods were bound to the node since it was last looked
    at (Kubernetes' controller sees the binding as it happens); a new
    eviction counts from then, else from ``now``.
    """
    out: dict[str, TaintEviction] = {}
    if not any(_no_execute(t) for t in taints):
        return out
    for pod in pods:
        allowance = no_execute_allowance(taints, pod.tolerations)
        if allowance is None:
            continue
        before = scheduled.get(pod.uid)
        since = before.since if before is not None else min(now, (bound_at or {}).get(pod.uid, now))
        untolerated = first_untolerated(taints, pod.tolerations, _no_execute)
        if untolerated is not None:
            why = f"pod {pod.name} does not tolerate taint {untolerated} of node {node}"
        else:
            shown = ", ".join(str(t) for t in taints if _no_execute(t))
            why = f"pod {pod.name} tolerates taint(s) {shown} of node {node} for only {allowance:g}s"
        out[pod.uid] = TaintEviction(pod.uid, since, since + allowance,
                                     f"Taint manager: deleting due to NoExecute taint: {why}")
    return out
