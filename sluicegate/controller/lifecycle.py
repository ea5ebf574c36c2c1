"""What a workload's pods mean for the workload: finish, fail, release, requeue.

``settle`` is a pure function: given a workload (with its pod records) and
"now", it returns the workload's next state and what the caller must do —
stop pods, give back quota, queue it again, or forget it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sluicegate.controller.model.conditions import set_condition
from sluicegate.controller.model.pods import FAILED, SUCCEEDED, PodRecord, pods_of, with_extra, with_pods
from sluicegate.controller.model.workloads import Workload


@dataclass(frozen=True, slots=True)
class Settlement:
    workload: Workload
    # Pods to stop now (each asked once: their records are marked).
    stop: tuple[PodRecord, ...] = ()
    # Every pod has exited: quota and node resources go back.
    release: bool = False
    # After release, the workload waits for admission again.
    requeue: bool = False
    # After release, the workload is removed from the store (it was deleted).
    forget: bool = False


def _stop_all(pods: tuple[PodRecord, ...], reason: str) -> tuple[tuple[PodRecord, ...], tuple[PodRecord, ...]]:
    """Mark every running pod as asked to stop; returns (all pods, newly asked)."""
    out: list[PodRecord] = []
    asked: list[PodRecord] = []
    for p in pods:
        if not p.terminal and p.reason != "Stopping":
            p = replace(p, reason="Stopping", message=reason)
            asked.append(p)
        out.append(p)
    return tuple(out), tuple(asked)


def evict(wl: Workload, *, reason: str, message: str, now: float) -> Workload:
    """Set Evicted; the pods are stopped and the quota released by ``settle``."""
    conds = set_condition(wl.status.conditions, type_="Evicted", status=True, reason=reason, message=message, now=now)
    return replace(wl, status=replace(wl.status, conditions=conds))


def settle(wl: Workload, now: float) -> Settlement:
    pods = pods_of(wl)
    if not pods or wl.is_finished and all(p.terminal for p in pods):
        return Settlement(wl)
    deleting = bool(wl.status.extra.get("deleting"))
    evicted = wl.status.is_true("Evicted")
    if deleting or evicted:
        why = "the workload is being deleted" if deleting else (wl.status.condition("Evicted").message  # type: ignore[union-attr]
                                                                 or "the workload was evicted")
        pods, asked = _stop_all(pods, why)
        wl = with_pods(wl, pods)
        if not all(p.terminal for p in pods):
            return Settlement(wl, stop=asked)
        return Settlement(released(wl, now), release=True, requeue=not deleting and wl.active, forget=deleting)

    failed = [p for p in pods if p.phase == FAILED]
    if failed:
        first = min(failed, key=lambda p: (p.finished_at or now, p.name))
        pods, asked = _stop_all(pods, f"pod {first.name} of the workload failed")
        wl = with_pods(wl, pods)
        if not all(p.terminal for p in pods):
            return Settlement(wl, stop=asked)
        code = "" if first.exit_code is None else f" with exit code {first.exit_code}"
        why = f" ({first.reason})" if first.reason and first.reason != "Stopping" else ""
        msg = f"pod {first.name} failed{code}{why}" + (f": {first.message}" if first.message else "")
        return Settlement(_finished(wl, "Failed", msg, now), release=True)
    if all(p.phase == SUCCEEDED for p in pods):
        return Settlement(_finished(wl, "Succeeded", "Job finished successfully", now), release=True)
    return Settlement(wl)


def _finished(wl: Workload, reason: str, message: str, now: float) -> Workload:
    conds = set_condition(wl.status.conditions, type_="Finished", status=True, reason=reason, message=message, now=now)
    return replace(wl, status=replace(wl.status, conditions=conds))


def released(wl: Workload, now: float) -> Workload:
    """Quota given back after an eviction: the workload is pending again (or inactive)."""
    evicted = wl.status.condition("Evicted")
    message = evicted.message if evicted is not None else "The workload was evicted"
    conds = set_condition(wl.status.conditions, type_="QuotaReserved", status=False, reason="Pending", message=message, now=now)
    conds = set_condition(conds, type_="Admitted", status=False, reason="NoReservation",
                          message="The workload has no reservation", now=now)
    wl = replace(wl, status=replace(wl.status, conditions=conds, admission=None))
    return with_extra(with_pods(wl, ()), lastPods=[p.to_json() for p in pods_of(wl)] or None)


PREEMPTION_WORDING = {
    "InClusterQueue": "prioritization in the ClusterQueue",
    "InCohortReclamation": "reclamation within the cohort",
    "InCohortFairSharing": "Fair Sharing within the cohort",
    "InCohortReclaimWhileBorrowing": "reclamation within the cohort while borrowing",
}


def preempted(wl: Workload, *, reason: str, preemptor: Workload, preemptor_cq: str, now: float) -> Workload:
    """Evicted (reason Preempted) plus Preempted (why), naming the preemptor's UID and ClusterQueue."""
    message = (
        f"Preempted to accommodate a workload (UID: {preemptor.uid}, ClusterQueue: {preemptor_cq}) "
        f"due to {PREEMPTION_WORDING.get(reason, reason)}"
    )
    wl = evict(wl, reason="Preempted", message=message, now=now)
    conds = set_condition(wl.status.conditions, type_="Preempted", status=True, reason=reason, message=message, now=now)
    return replace(wl, status=replace(wl.status, conditions=conds))
