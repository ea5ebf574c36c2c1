"""Which workloads wait in which ClusterQueue's heap, and which wait out a backoff first."""

from __future__ import annotations

from collections.abc import Callable

from sluicegate.controller.cache import Cache
from sluicegate.controller.timers import BACKOFF, Deadlines
from sluicegate.model.names import ClusterQueueName
from sluicegate.model.queues import StopPolicy
from sluicegate.model.workloads import Workload


class Queueing:
    def __init__(self, cache: Cache, deadlines: Deadlines, clock: Callable[[], float]) -> None:
        self.cache = cache
        self.deadlines = deadlines
        self.clock = clock

    def cq_for(self, wl: Workload) -> ClusterQueueName | None:
        lq = self.cache.local_queue_for(wl)
        return lq.cluster_queue if lq is not None else None

    def unqueued_reason(self, wl: Workload) -> str | None:
        """Why a workload cannot even wait in a ClusterQueue (None: it can)."""
        if not wl.active:
            return None
        lq = self.cache.local_queue_for(wl)
        if lq is None:
            return f"LocalQueue {wl.namespace}/{wl.queue_name} doesn't exist"
        if lq.stop_policy is not StopPolicy.NONE:
            return f"LocalQueue {wl.namespace}/{wl.queue_name} is stopped (spec.stopPolicy={lq.stop_policy.value})"
        if lq.cluster_queue not in self.cache.cluster_queues:
            return f"ClusterQueue {lq.cluster_queue} doesn't exist"
        return None

    def enqueue(self, wl: Workload) -> None:
        """Queue a workload that holds no quota, if it may wait for admission.

        One waiting out a requeue backoff (requeueState.requeueAt) is queued
        by the tick that finds its backoff over.
        """
        c = self.cache
        if not wl.active or wl.is_finished or c.holds_quota(wl.key):
            c.queues.delete(wl.key)
            return
        cq = self.cq_for(wl)
        if cq is None or self.unqueued_reason(wl) is not None:
            c.queues.delete(wl.key)
            return
        rs = wl.status.requeue_state
        if rs is not None and rs.requeue_at is not None and rs.requeue_at > self.clock():
            c.queues.delete(wl.key)
            self.deadlines.arm(BACKOFF, wl.key, rs.requeue_at)
            return
        self.deadlines.disarm(BACKOFF, wl.key)
        c.queues.add_or_update(wl, cq)

    def requeue_unqueued(self, pred: Callable[[Workload], bool]) -> None:
        """Queue the workloads that wait in no heap, hold no quota and match ``pred``."""
        c = self.cache
        for wl in list(c.workloads.values()):
            if c.queues.cluster_queue_of(wl.key) is None and not c.holds_quota(wl.key) and pred(wl):
                self.enqueue(wl)
