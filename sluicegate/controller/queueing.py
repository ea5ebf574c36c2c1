"""Which workloads wait in which ClusterQueue's heap, and which wait out a backoff first.

Also what a caller may learn about that waiting: why a workload waits in no
queue at all (Kueue's Inadmissible condition), and where the pending ones
stand (Kueue's visibility API).
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from sluicegate.controller.cache import Cache
from sluicegate.controller.errors import InvalidArgument, NotFound
from sluicegate.controller.podgroups import waiting_reason
from sluicegate.controller.queues import Position
from sluicegate.controller.timers import BACKOFF, Deadlines
from sluicegate.model.names import ClusterQueueName
from sluicegate.model.queues import StopPolicy
from sluicegate.model.workloads import Workload

# Kueue's reason on QuotaReserved=False for a workload that cannot even be
# queued (its LocalQueue or ClusterQueue is missing or inactive).
INADMISSIBLE = "Inadmissible"
# Kueue's PendingWorkloadOptions: limit defaults to 1000.
DEFAULT_PENDING_LIMIT = 1000
MAX_PENDING_LIMIT = 100_000


def unqueued_reason(cache: Cache, wl: Workload, *, inactive: bool = False) -> str | None:
    """Why a workload cannot even wait in a ClusterQueue (None: it can), in Kueue's words.

    ``inactive``: also when its ClusterQueue is inactive (it still waits in
    that queue's heap, which gives no heads until the queue is active again).
    """
    if not wl.active:
        return None
    group_wait = waiting_reason(cache.pod_groups, wl)
    if group_wait is not None:
        return group_wait
    lq = cache.local_queue_for(wl)
    if lq is None:
        return f"LocalQueue {wl.namespace}/{wl.queue_name} doesn't exist"
    if lq.stop_policy is not StopPolicy.NONE:
        return f"LocalQueue {wl.namespace}/{wl.queue_name} is stopped (spec.stopPolicy={lq.stop_policy.value})"
    if lq.cluster_queue not in cache.cluster_queues:
        return f"ClusterQueue {lq.cluster_queue} doesn't exist"
    if inactive and cache.inactive_reason(lq.cluster_queue) is not None:
        return f"ClusterQueue {lq.cluster_queue} is inactive"
    return None


def pending_positions(
    cache: Cache, *, cluster_queue: str = "", namespace: str = "", local_queue: str = "",
    offset: int = 0, limit: int = DEFAULT_PENDING_LIMIT, namespaces: Collection[str] | None = None,
) -> list[Position]:
    """The pending workloads of a ClusterQueue, or of one LocalQueue, in the order they will be tried.

    ``namespaces`` (None: all) hides the others' workloads without changing
    anyone's position.  NotFound when the queue does not exist.
    """
    if offset < 0:
        raise InvalidArgument("offset", f"must not be negative, got {offset}")
    if limit < 0 or limit > MAX_PENDING_LIMIT:
        raise InvalidArgument("limit", f"must be between 0 and {MAX_PENDING_LIMIT}, got {limit}")
    limit = limit or DEFAULT_PENDING_LIMIT
    if bool(cluster_queue) == bool(local_queue):
        raise InvalidArgument("cluster_queue", "name exactly one of cluster_queue or local_queue")
    keep: Callable[[Workload], bool] | None = None
    if local_queue:
        ns = namespace or "default"
        lq = cache.local_queues.get((ns, local_queue))
        if lq is None:
            raise NotFound("LocalQueue", ns, local_queue)
        cq = lq.cluster_queue
        keep = lambda wl: wl.namespace == ns and wl.queue_name == local_queue  # noqa: E731
    else:
        cq = ClusterQueueName(cluster_queue)
        if cq not in cache.cluster_queues:
            raise NotFound("ClusterQueue", "", cluster_queue)
    if namespaces is not None:
        allowed, inner = frozenset(namespaces), keep
        keep = lambda wl: wl.namespace in allowed and (inner is None or inner(wl))  # noqa: E731
    return cache.queues.pending_page(cq, offset=offset, limit=limit, keep=keep)


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
        return unqueued_reason(self.cache, wl)

    def enqueue(self, wl: Workload) -> None:
        """Queue a workload that holds no quota, if it may wait for admission.

        One waiting out a requeue backoff (requeueState.requeueAt) is queued
        by the tick that finds its backoff over.
        """
        c = self.cache
        if not wl.active or wl.is_finished or c.holds_quota(wl.key):
            c.queues.delete(wl.key)
            return
        # unqueued_reason(c, wl) is not None, with the LocalQueue looked up once (every creation and
        # requeue asks): no LocalQueue, a stopped one, a missing ClusterQueue, or a PodGroup to wait for.
        lq = c.local_queue_for(wl)
        if lq is None or lq.stop_policy is not StopPolicy.NONE or lq.cluster_queue not in c.cluster_queues \
                or waiting_reason(c.pod_groups, wl) is not None:
            c.queues.delete(wl.key)
            return
        cq = lq.cluster_queue
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
