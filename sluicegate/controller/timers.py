"""Deadlines: when a workload's timer may fire, kept in a heap.

A workload gets a deadline when it is stored with one (requeue backoff,
maximumExecutionTimeSeconds, a Job's activeDeadlineSeconds, waitForPodsReady,
retention of a finished workload); a tick pops only what is due and
re-checks it against the workload as it is now.  A deadline that changed or
was dropped is left in the heap and skipped when it comes up (lazy deletion):
only the latest deadline armed per (kind, workload) counts.  A tick costs in
proportion to what is due, not to the number of workloads.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import replace

from sluicegate.controller.effects import Effects, Enqueue, SetLocalQueues, SetWorkload
from sluicegate.controller.lifecycle import job_of
from sluicegate.model.conditions import set_condition
from sluicegate.model.config import WaitForPodsReadyConfig
from sluicegate.model.names import WorkloadKey
from sluicegate.model.queues import LocalQueueSpec
from sluicegate.model.workloads import Workload

BACKOFF, EVICTION, RETENTION = "backoff", "eviction", "retention"
# Admission Fair Sharing's usage sampling: one controller-wide timer (armed under AFS_KEY), every
# usageSamplingInterval.
AFS_SAMPLE = "afs-sample"
AFS_KEY = WorkloadKey("")
# A pending workload waits for the minimum runtime of the workloads it could preempt to end.
PROTECTION = "protection"
# The order a tick fires what is due: backoffs, then evictions, then retention, then the usage
# sample, then minimum-runtime retries.
KIND_ORDER = {BACKOFF: 0, EVICTION: 1, RETENTION: 2, AFS_SAMPLE: 3, PROTECTION: 4}


class Deadlines:
    def __init__(self) -> None:
        self._heap: list[tuple[float, int, str, WorkloadKey]] = []
        self._seq = itertools.count()
        self._armed: dict[tuple[str, WorkloadKey], float] = {}

    def __len__(self) -> int:
        return len(self._armed)

    def arm(self, kind: str, key: WorkloadKey, at: float | None) -> None:
        """The workload's ``kind`` timer fires at ``at`` (None: it has none)."""
        slot = (kind, key)
        if at is None:
            self._armed.pop(slot, None)
            return
        if self._armed.get(slot) == at:
            return
        self._armed[slot] = at
        heapq.heappush(self._heap, (at, next(self._seq), kind, key))
        if len(self._heap) > 64 and len(self._heap) > 4 * len(self._armed):
            self._compact()

    def disarm(self, kind: str, key: WorkloadKey) -> None:
        self._armed.pop((kind, key), None)

    def armed(self, kind: str, key: WorkloadKey) -> float | None:
        return self._armed.get((kind, key))

    def pop_due(self, now: float) -> list[tuple[str, WorkloadKey, float]]:
        """What is due at ``now`` (disarmed), backoffs first, then evictions, then retention."""
        heap, armed = self._heap, self._armed
        out: list[tuple[str, WorkloadKey, float]] = []
        while heap and heap[0][0] <= now:
            at, _, kind, key = heapq.heappop(heap)
            if armed.get((kind, key)) == at:
                del armed[(kind, key)]
                out.append((kind, key, at))
        out.sort(key=lambda d: KIND_ORDER[d[0]])
        return out

    def _compact(self) -> None:
        """Drop stale entries once they outnumber the live ones (keeps memory bounded)."""
        self._heap = [e for e in self._heap if self._armed.get((e[2], e[3])) == e[0]]
        heapq.heapify(self._heap)


def eviction_deadline(wl: Workload, wfpr: WaitForPodsReadyConfig) -> float | None:
    """The earliest time ``lifecycle.due_eviction`` may fire for the workload as it is (None: never)."""
    st = wl.status
    # The conditions read below, in one pass (the first of each type, as WorkloadStatus.condition finds
    # it): this runs at every write of a workload that holds quota.
    admitted = finished = evicted = pods_ready = None
    for c in st.conditions:
        t = c.type
        if t == "Admitted":
            if admitted is None:
                admitted = c
        elif t == "PodsReady":
            if pods_ready is None:
                pods_ready = c
        elif t == "Finished":
            if finished is None:
                finished = c
        elif t == "Evicted" and evicted is None:
            evicted = c
    if (admitted is None or admitted.status != "True" or (finished is not None and finished.status == "True")
            or (evicted is not None and evicted.status == "True")):
        return None
    start = admitted.last_transition_time
    limit = wl.maximum_execution_time_seconds
    job = _active_deadline(wl)
    wait = wfpr.enabled and bool(st.pods)
    if limit is None and job is None and not wait:
        return None  # nearly every admitted workload: no timer
    out: list[float] = []
    if limit is not None:
        out.append(start + limit - st.accumulated_past_execution_time_seconds)
    if job is not None and st.terminate is None:
        out.append(start + job)
    if wait:
        cond = pods_ready
        if cond is None or not cond.is_true:
            if cond is not None and cond.reason == "WaitForRecovery":
                timeout = (wfpr.recovery_timeout_seconds if wfpr.recovery_timeout_seconds is not None
                           else wfpr.timeout_seconds)
                out.append(cond.last_transition_time + timeout)
            else:
                out.append(start + wfpr.timeout_seconds)
    return min(out) if out else None


def _active_deadline(wl: Workload) -> float | None:
    job = job_of(wl)
    return None if job is None or job.active_deadline_seconds is None else float(job.active_deadline_seconds)


def retention_deadline(wl: Workload, retention: float | None) -> float | None:
    """When a finished workload is deleted (None: it is not finished, or finished ones are kept)."""
    if retention is None:
        return None
    fin = wl.status.condition("Finished")
    if fin is None or not fin.is_true:
        return None
    # Deleted once strictly more than ``retention`` seconds have passed.
    return fin.last_transition_time + retention


def afs_sampled(local_queues: list[LocalQueueSpec]) -> Effects:
    """A usage sample: the LocalQueues' decayed usage is stored in their status, then held in the cache."""
    return Effects(puts=tuple(local_queues), cache=(SetLocalQueues(tuple(local_queues)),))


def backoff_finished(wl: Workload, now: float) -> Effects:
    """A requeue backoff ended: the workload says so (Requeued) and waits for admission again."""
    conds = set_condition(wl.status.conditions, type_="Requeued", status=True, reason="BackoffFinished",
                          message="The workload backoff was finished", now=now)
    new = replace(wl, status=replace(wl.status, conditions=conds))
    return Effects(puts=(new,), cache=(SetWorkload(new), Enqueue(new)), events=(("MODIFIED", new),), wake=True)
