"""Pending workloads: one priority heap per ClusterQueue, plus parking.

Order within a queue: higher priority first, then older queue-order
timestamp (creation, or the pods-ready eviction), then uid.  A head that
cannot be admitted is *parked* as inadmissible under BestEffortFIFO so the
workloads behind it get their turn; it comes back when something that could
change the answer happens in its cohort tree (quota released, queue or
cohort changed).  Under StrictFIFO it goes straight back to the heap and
keeps blocking the queue, as Kueue does.

Under BestEffortFIFO a head parked for NoFit or PreemptionNoCandidates also
parks every pending workload of its *scheduling shape* (Kueue's
SchedulingEquivalenceHashing, on by default since v0.18): they would get the
same answer from the same quota, so they are not tried, and no "Pending"
status is written for them, until the queue's parked workloads are released.
Under BestEffortFIFO every pending workload waits in a chain per shape
(``_Chain``, its *lane*) that feeds the heap one workload at a time in queue
order: parking a shape stops its lane, whatever its length, and a release
restarts it, so parking and releasing cost a step per shape, not per
workload.  When the release frees a known amount of quota, the lanes stopped
for want of quota are offered it in queue order (``_offer``): a step per
workload requeued and per lane.

A workload whose backoff has not expired (``requeueState.requeueAt``) waits
in a timer list and enters the heap when it is due.

Under Admission Fair Sharing (``set_fair_sharing``) a queue keeps one heap
per LocalQueue instead of one for all: the next head is the top of the
LocalQueue with the least usage (ties: the usual order between the tops),
which is Kueue's order (usage first, then priority and timestamp) without
re-keying a single pending workload when usage changes.  A pop costs
O(LocalQueues with pending workloads + log n).
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from sluicegate.controller.scheduling.cycle import Entry, Head, RequeueReason, scheduling_shape
from sluicegate.controller.scheduling.snapshot import queue_order_timestamp
from sluicegate.model.config import RequeuingTimestamp
from sluicegate.model.names import ClusterQueueName, WorkloadKey
from sluicegate.model.queues import QueueingStrategy
from sluicegate.model.workloads import PodSet, Workload

# A pending workload's place in its queue's order: (-priority, timestamp, uid, key), led by its LocalQueue's
# usage under Admission Fair Sharing.
Rank = tuple[Any, ...]


class Budget(Protocol):
    """Free quota offered, in queue order, to workloads parked for want of quota.

    Its answers depend on a workload's ``quota_needs`` only, and what is left only shrinks as it is taken:
    a workload it refuses, it refuses every later one of the same pod sets (``_offer`` relies on it).
    """

    def take(self, wl: Workload) -> bool:
        """Whether ``wl`` could be admitted with what is left (and if so, count it as taken)."""
        ...

    def left(self, resource: str) -> int | None:
        """What is left of ``resource`` if that is known exactly, else None."""
        ...


def quota_needs(wl: Workload) -> dict[str, int]:
    """The least quota per resource ``wl`` can be admitted with (every pod set at its minimum count)."""
    return dict(_needs_of(wl.pod_sets))


# Needs by the identity of a workload's pod sets (one value shared by every workload of a shape,
# see scheduling.cycle._pod_sets_shape): id -> (the pod sets, kept so the id stays theirs; needs).
_NEEDS: dict[int, tuple[object, Mapping[str, int]]] = {}
_NEEDS_LIMIT = 4096


def _needs_of(pod_sets: tuple[PodSet, ...]) -> Mapping[str, int]:
    """``quota_needs`` of these pod sets, kept: read-only (quota_needs hands out copies)."""
    hit = _NEEDS.get(id(pod_sets))
    if hit is not None and hit[0] is pod_sets:
        return hit[1]
    need: dict[str, int] = {}
    for ps in pod_sets:
        count = ps.min_count if ps.min_count is not None else ps.count
        for res, per_pod in ps.requests.items():
            if per_pod > 0:
                need[res] = need.get(res, 0) + per_pod * count
    if len(_NEEDS) >= _NEEDS_LIMIT:
        _NEEDS.clear()
    _NEEDS[id(pod_sets)] = (pod_sets, need)
    return need


# Requeue reasons after which a head's scheduling shape is parked with it (Kueue's requeueIfNotPresent).
_EQUIVALENT_REASONS = (RequeueReason.NO_FIT, RequeueReason.PREEMPTION_NO_CANDIDATES)

# A quota-bound parked workload in its queue's order: (order key, version, key).
_Parked = tuple[tuple[int, float, str, str], int, WorkloadKey]


@dataclass(slots=True)
class _Pending:
    workload: Workload
    last_tried: tuple[dict[str, int], ...] | None
    # Bumped on every update so stale heap items are recognised and skipped.
    version: int
    # Parked only for want of quota, in a queue that cannot preempt: it can
    # be admitted again only once its requests fit the queue's free quota.
    quota_bound: bool = False
    # Parked because no set of nodes could run its pods.
    node_bound: bool = False
    # For a quota-bound one: its least needs (quota_needs), counted while it is parked.
    needs: Mapping[str, int] | None = None
    # (its place in the queue's order, the workload), made once: listing
    # positions then allocates nothing per pending workload (new tuples for
    # 50,000 of them cost more in garbage collection than the listing itself).
    ranked: tuple[tuple[int, float, str, str], Workload] | None = None
    # Its scheduling shape (``scheduling_shape``), worked out once: a parked shape's workloads are
    # looked up by it each time they come to the top of the heap again.
    shape: object = None
    # The chain it waits in, or was last fed from (see _Chain).
    chain: _Chain | None = None


@dataclass(slots=True, eq=False)
class _Chain:
    """The pending workloads of one scheduling shape (under Admission Fair Sharing: and LocalQueue), in
    queue order: a lane.

    A release makes every parked workload pending again, and in a busy
    cohort most of them are parked again within a cycle or two: the first
    of each shape is tried, does not fit, and its shape's others follow it
    (``_park_equivalent``).  Moving each one into the heap and back again
    cost every release as many steps as workloads were parked.  A chain
    instead feeds its members into the heap one at a time, each when the one
    before it leaves the heap, which is the order the heap would give them
    in: a release costs a step per chain, and a shape parked again stops
    its chain at the one member in the heap.  Under BestEffortFIFO a new
    pending workload joins its shape's chain (``_push``), so that the first
    time its shape is parked costs a step too: a queue with many workloads
    behind a head that does not fit parks them all at once, as Kueue's bulk
    move does.  A chain stopped for want of quota alone is not released by a
    release that frees a known amount of quota; its members are offered that
    quota instead, in queue order with the others (``_offer``).
    """

    # Its key in the queue's chains.
    key: tuple[object, tuple[str, str] | None]
    # Its members waiting to be fed: (place in the queue's order, version), the heap's own items, sorted from
    # ``head`` on (those before it were taken).  A sorted list rather than a heap: members mostly arrive in
    # order and leave from the front, and one parked again goes back to the front, each a step.
    waiting: list[tuple[int, float, str, str, int]] = field(default_factory=list)
    head: int = 0
    # Released: its members are pending, each fed when the one before it leaves the heap (else parked).
    released: bool = False
    # The member fed into the heap and not taken out yet.
    fed: _Pending | None = None
    # While stopped: the (quota_bound, node_bound) of the head whose NoFit stopped it, which says what
    # releases it (see queue_inadmissible and requeue_node_bound).
    flags: tuple[bool, bool] = (False, False)
    # How many members wait in it (``waiting`` also holds stale items).
    count: int = 0

    def put(self, item: tuple[int, float, str, str, int]) -> None:
        """Add an item to ``waiting`` in its place."""
        waiting, head = self.waiting, self.head
        if head == len(waiting) or item < waiting[head]:
            if head:
                self.head = head - 1
                waiting[head - 1] = item
            else:
                waiting.insert(0, item)
        elif waiting[-1] < item:
            waiting.append(item)
        else:
            bisect.insort(waiting, item, head)

    def first(self) -> tuple[int, float, str, str, int] | None:
        return self.waiting[self.head] if self.head < len(self.waiting) else None

    def take(self) -> None:
        """Drop the first item of ``waiting``."""
        self.head += 1
        if self.head > 64 and 2 * self.head > len(self.waiting):
            del self.waiting[:self.head]
            self.head = 0


class ClusterQueueQueue:
    """The pending workloads of one ClusterQueue."""

    def __init__(
        self,
        name: ClusterQueueName,
        strategy: QueueingStrategy,
        requeuing: RequeuingTimestamp,
        ready: set[ClusterQueueName] | None = None,
        touched: set[ClusterQueueName] | None = None,
    ) -> None:
        self.name = name
        # Shared with the QueueManager: names of queues that may have a head.
        self._ready = ready if ready is not None else set()
        # Shared with the QueueManager: names of queues that popped or parked since a release last found
        # them with nothing parked (see QueueManager.queue_inadmissible).
        self._touched = touched if touched is not None else set()
        self.strategy = strategy
        self.requeuing = requeuing
        self.active = True
        self._items: dict[WorkloadKey, _Pending] = {}
        self._heap: list[tuple[int, float, str, str, int]] = []
        # Admission Fair Sharing: a LocalQueue's usage (None: off), and one heap per LocalQueue while on.
        self._afs: Callable[[tuple[str, str]], float] | None = None
        self._lq_heaps: dict[tuple[str, str], list[tuple[int, float, str, str, int]]] = {}
        self._inadmissible: dict[WorkloadKey, _Pending] = {}
        # The workload popped for the running cycle, still counted as pending.
        self._in_flight: dict[WorkloadKey, _Pending] = {}
        self._version = 0
        # Kueue's guard against losing a wake-up: if inadmissible workloads
        # were released after a head was popped, that head must not be parked.
        self.pop_cycle = 0
        self.queue_inadmissible_cycle = -1
        # Some parked workloads were held back by a release budget (see queue_inadmissible)...
        self.deferred = False
        # ...and these were requeued because the budget said they fit.
        self._offered: set[WorkloadKey] = set()
        # Indexes over the parked workloads, so that a release costs in
        # proportion to what it can admit, not to everything parked: the
        # quota-bound ones in queue order, and the others.  Both are lazy:
        # an item whose workload left ``_inadmissible`` (or was parked again
        # under a newer version) is skipped and dropped when met.
        # (Under Admission Fair Sharing, one such order per LocalQueue, offered lowest usage first.)
        self._quota_orders: dict[tuple[str, str] | None, list[_Parked]] = {}
        self._plain_parked: set[WorkloadKey] = set()
        # Scheduling shapes (``scheduling_shape``) parked with a head that did not fit, with that
        # head's (quota_bound, node_bound): a workload of one of them reaching the top of the heap
        # is parked without being tried.  Forgotten when parked workloads are released (Kueue's
        # hashToBulkMoveReason in pkg/cache/queue/cluster_queue.go).
        self._bulk: dict[object, tuple[bool, bool]] = {}
        # How many workloads were parked so, without a try of their own.
        self.bulk_parked = 0
        # Exact counts over the quota-bound parked workloads: how many there
        # are, how many need each resource, and (lazily) the smallest need per
        # resource.  When every one of them needs a resource of which less is
        # left than the smallest need, no release budget can reach any.
        self._quota_parked = 0
        self._need_count: dict[str, int] = {}
        self._need_min: dict[str, list[tuple[int, int, WorkloadKey]]] = {}
        # Chains of workloads parked with their shape (see _Chain), by (shape, LocalQueue or None),
        # and their members not fed into the heap yet.
        self._chains: dict[tuple[object, tuple[str, str] | None], _Chain] = {}
        self._chained: dict[WorkloadKey, _Pending] = {}
        # The chains stopped since the last release: what the next one releases.
        self._stopped: list[_Chain] = []

    def __len__(self) -> int:
        return len(self._items) + len(self._inadmissible) + len(self._in_flight) + len(self._chained)

    @property
    def has_heads(self) -> bool:
        return bool(self._items)

    @property
    def has_parked(self) -> bool:
        """Some workloads are parked on their own (some of those a release budget is offered to)."""
        return bool(self._inadmissible)

    def keys(self) -> Iterator[WorkloadKey]:
        yield from self._items
        yield from self._inadmissible
        yield from self._in_flight
        yield from self._chained

    def _push(self, wl: Workload, last_tried: tuple[dict[str, int], ...] | None) -> None:
        self._ready.add(self.name)
        self._version += 1
        order = self._order_key(wl)
        p = _Pending(wl, last_tried, self._version, ranked=(order, wl))
        if self.strategy is QueueingStrategy.BEST_EFFORT_FIFO and wl.key not in self._offered:
            # Into its shape's lane: a released chain (made released if there is none), so that a NoFit
            # of its shape later stops the lane in one step instead of parking each member.  (Not one
            # offered freed quota: it stays on its own, so that if its shape is parked before it is tried,
            # it is met in the heap and the budget's guess counted wrong, see _park_equivalent.)
            p.shape = scheduling_shape(wl)
            key = (p.shape, _local_queue(wl) if self._afs is not None else None)
            chain = self._chains.get(key)
            if chain is None:
                chain = self._chains[key] = _Chain(key, released=True)
            if chain.released:
                self._join(chain, p)
                return
            # A stopped lane's members are parked; a new one is pending (see pop), on its own.
        self._items[wl.key] = p
        if self._afs is None:
            heapq.heappush(self._heap, (*order, p.version))
        else:
            heapq.heappush(self._lq_heaps.setdefault(_local_queue(wl), []), (*order, p.version))

    def set_fair_sharing(self, usage: Callable[[tuple[str, str]], float] | None) -> None:
        """Order by Admission Fair Sharing (``usage`` of a LocalQueue, lowest first) or, with None, as usual."""
        if (usage is None) == (self._afs is None):
            self._afs = usage
            return
        self._afs = usage
        self._dissolve_chains()
        self._heap = []
        self._lq_heaps = {}
        parked = [e for entries in self._quota_orders.values() for e in entries if self._parked_as(e[2], e[1])]
        self._quota_orders = {}
        for entry in sorted(parked):
            group = self._group(self._inadmissible[entry[2]].workload)
            self._quota_orders.setdefault(group, []).append(entry)
        for p in self._items.values():
            item = (*(p.ranked[0] if p.ranked else self._order_key(p.workload)), p.version)
            if usage is None:
                self._heap.append(item)
            else:
                self._lq_heaps.setdefault(_local_queue(p.workload), []).append(item)
        heapq.heapify(self._heap)
        for heap in self._lq_heaps.values():
            heapq.heapify(heap)

    def _live(self, item: tuple[int, float, str, str, int]) -> bool:
        p = self._items.get(WorkloadKey(item[3]))
        return p is not None and p.version == item[4]

    def _fair_heap(self) -> list[tuple[int, float, str, str, int]] | None:
        """The heap of the LocalQueue whose top goes next: least usage, then the usual order of the tops."""
        assert self._afs is not None
        best: tuple[float, tuple[int, float, str, str, int]] | None = None
        chosen: list[tuple[int, float, str, str, int]] | None = None
        for lq, heap in list(self._lq_heaps.items()):
            while heap and not self._live(heap[0]):
                heapq.heappop(heap)
            if not heap:
                del self._lq_heaps[lq]
                continue
            cand = (self._afs(lq), heap[0])
            if best is None or cand < best:
                best, chosen = cand, heap
        return chosen

    def add_or_update(self, wl: Workload) -> None:
        key = wl.key
        self._unpark(key)
        old = self._items.get(key) or self._in_flight.get(key)
        chained = self._unchain(key)
        if chained is not None and chained.chain is not None and chained.chain.released:
            old = chained  # pending, as if in the heap: it keeps its last flavor tried
        if old is not None:
            self._unfeed(old)
        if key in self._in_flight:
            # Updated while its cycle runs: the requeue after the cycle uses this version.
            self._in_flight[key] = _Pending(wl, None, 0, ranked=(self._order_key(wl), wl))
            return
        self._push(wl, old.last_tried if old is not None else None)

    def delete(self, key: WorkloadKey) -> bool:
        self._offered.discard(key)
        found = self._unpark(key) is not None or self._unchain(key) is not None
        fed = self._items.get(key)
        if fed is not None:
            self._unfeed(fed)
        for d in (self._items, self._in_flight):
            if d.pop(key, None) is not None:
                found = True
        return found

    def pop(self) -> Head | None:
        items, bulk, heappop = self._items, self._bulk, heapq.heappop
        while True:
            heap = self._heap if self._afs is None else self._fair_heap()
            if not heap:
                return None
            item = heappop(heap)
            wk: WorkloadKey = item[3]  # type: ignore[assignment]  # a WorkloadKey is a str
            p = items.get(wk)
            if p is None or p.version != item[4]:
                continue
            del items[wk]
            chain = p.chain
            if chain is not None and chain.fed is not p:
                chain = None
            if bulk:
                shape = p.shape
                if shape is None:
                    shape = p.shape = scheduling_shape(p.workload)
                flags = bulk.get(shape)
                if flags is not None and self.strategy is QueueingStrategy.BEST_EFFORT_FIFO:
                    if chain is not None:
                        chain.fed = None
                    self._park_equivalent(p, flags)
                    continue
            if chain is not None:
                # The chain's next member comes after this one in the order: its turn in the heap now.
                chain.fed = None
                if chain.released:
                    self._feed(chain)
            self._in_flight[wk] = p
            self.pop_cycle += 1
            self._touched.add(self.name)
            return Head(workload=p.workload, cluster_queue=self.name, last_tried=p.last_tried)

    def set_strategy(self, strategy: QueueingStrategy) -> None:
        if strategy is not self.strategy:
            self.strategy = strategy
            self._bulk.clear()  # only BestEffortFIFO passes over a shape

    def _park_equivalent(self, p: _Pending, flags: tuple[bool, bool]) -> None:
        """Park a workload taken off the heap because a head of its scheduling shape was parked for NoFit
        since the last release (``flags``: that head's), as Kueue's bulk move would have done when that head
        was parked."""
        key = p.workload.key
        offered = False
        if self._offered:
            offered = key in self._offered
            self._offered.discard(key)
        self.bulk_parked += 1
        # The same workload as when it was pushed: its place in the order (``ranked``) still holds.
        p.version, (p.quota_bound, p.node_bound) = self._version + 1, flags
        if p.ranked is not None and p.ranked[1] is p.workload and self._chain(p, flags):
            self._version = p.version
        else:
            self._park(p)
        if self.deferred and offered:
            # As in requeue: freed quota offered to it was a wrong guess, so the deferred get their turn.
            self._requeue_all_parked()

    def requeue(self, entry: Entry, *, quota_bound: bool = False, node_bound: bool = False) -> bool:
        """Put a head back after its cycle; True if it went back into the heap.

        False means it was parked as inadmissible, or deleted meanwhile.  A
        BestEffortFIFO head parked for NoFit or PreemptionNoCandidates parks
        its scheduling shape with it (see ``_park_equivalent``); one with a
        retry time of its own (a minimum runtime ending) does not, since the
        others would have no timer to bring them back.
        """
        key = entry.key
        offered = key in self._offered
        self._offered.discard(key)
        p = self._in_flight.pop(key, None)
        if p is None:
            return False
        wl = p.workload if p.version == 0 else entry.workload
        last_tried = entry.last_tried
        if self.strategy is QueueingStrategy.STRICT_FIFO:
            immediate = entry.requeue_reason is not RequeueReason.NAMESPACE_MISMATCH
        else:
            immediate = entry.requeue_reason in (
                RequeueReason.FAILED_AFTER_NOMINATION,
                RequeueReason.PENDING_PREEMPTION,
            )
        if p.version == 0 or immediate or self.queue_inadmissible_cycle >= self.pop_cycle:
            self._push(wl, last_tried)
            return True
        if self.deferred and offered:
            # A workload the freed quota was offered to did not fit after all:
            # the ones deferred behind it get their turn the ordinary way.
            # (Any other head failing, say one just created, says nothing
            # about whether the budget's guess was right.)
            self._requeue_all_parked()
        self._park(_Pending(wl, last_tried, self._version + 1, quota_bound, node_bound))
        if self.strategy is QueueingStrategy.BEST_EFFORT_FIFO and entry.retry_at is None \
                and entry.requeue_reason in _EQUIVALENT_REASONS:
            self._bulk[scheduling_shape(wl)] = (quota_bound, node_bound)
        return False

    def _park(self, p: _Pending) -> None:
        self._version = max(self._version, p.version)
        key = p.workload.key
        if p.ranked is None or p.ranked[1] is not p.workload:
            p.ranked = (self._order_key(p.workload), p.workload)
        self._inadmissible[key] = p
        self._touched.add(self.name)
        if p.quota_bound:
            self._quota_parked += 1
            p.needs = _needs_of(p.workload.pod_sets)
            for res, qty in p.needs.items():
                self._need_count[res] = self._need_count.get(res, 0) + 1
                heapq.heappush(self._need_min.setdefault(res, []), (qty, p.version, key))
            order = self._quota_orders.setdefault(self._group(p.workload), [])
            entry = (p.ranked[0], p.version, key)
            if not order or order[-1] < entry:
                order.append(entry)  # most arrive in queue order (the heap gives them so)
            else:
                bisect.insort(order, entry)
            if len(order) > 2 * len(self._inadmissible) + 64:
                # Drop the items of workloads no longer parked (the indexes are lazy).
                for group, items in list(self._quota_orders.items()):
                    self._quota_orders[group] = [item for item in items if self._parked_as(item[2], item[1])]
                for res, heap in self._need_min.items():
                    self._need_min[res] = [item for item in heap if self._parked_as(item[2], item[1])]
                    heapq.heapify(self._need_min[res])
        else:
            self._plain_parked.add(key)

    def _parked_as(self, key: WorkloadKey, version: int) -> bool:
        p = self._inadmissible.get(key)
        return p is not None and p.version == version

    def _unpark(self, key: WorkloadKey) -> _Pending | None:
        """Take a workload out of the parked set, keeping the counts exact."""
        p = self._inadmissible.pop(key, None)
        if p is not None and p.needs is not None:
            self._quota_parked -= 1
            for res in p.needs:
                self._need_count[res] -= 1
        return p

    def _smallest_need(self, res: str) -> int | None:
        heap = self._need_min.get(res)
        while heap and not self._parked_as(heap[0][2], heap[0][1]):
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def _out_of_reach(self, budget: Budget) -> bool:
        """No quota-bound parked workload can take anything from ``budget``."""
        if self._quota_parked == 0:
            return True
        for res, count in self._need_count.items():
            if count != self._quota_parked:
                continue
            left = budget.left(res)
            smallest = self._smallest_need(res)
            if left is not None and smallest is not None and left < smallest:
                return True
        return False

    def _chain(self, p: _Pending, flags: tuple[bool, bool]) -> bool:
        """Park ``p`` (taken off the heap, its shape parked for NoFit with ``flags``) in its shape's chain,
        which stops (its other members are parked with it, untouched).  False, and nothing done, if the
        chain was stopped already by a head parked for another reason (``p`` is then parked on its own)."""
        assert p.ranked is not None
        key = (p.shape, _local_queue(p.workload) if self._afs is not None else None)
        chain = self._chains.get(key)
        self._touched.add(self.name)
        if chain is None:
            chain = self._chains[key] = _Chain(key, flags=flags)
            self._stopped.append(chain)
        elif chain.released:
            chain.released = False
            chain.flags = flags
            self._stopped.append(chain)
            self.bulk_parked += chain.count  # its waiting members are parked with it, untried
        elif chain.flags != flags:
            return False
        p.chain = chain
        chain.put((*p.ranked[0], p.version))
        self._chained[p.workload.key] = p
        chain.count += 1
        return True

    def _unchain(self, key: WorkloadKey) -> _Pending | None:
        """Take a workload out of the chain it waits in, if any."""
        p = self._chained.pop(key, None)
        if p is not None and p.chain is not None:
            p.chain.count -= 1
        return p

    def _join(self, chain: _Chain, p: _Pending) -> None:
        """Add the new pending ``p`` to the released ``chain``: it waits, or if it comes before the member fed
        into the heap, takes that one's place (which waits again, under a new version: its heap item goes
        stale), so that the member in the heap is always the chain's first."""
        assert p.ranked is not None
        key = p.workload.key
        p.chain = chain
        fed = chain.fed
        if fed is not None and fed.ranked is not None and fed.ranked[0] < p.ranked[0]:
            self._items.pop(key, None)
            self._chained[key] = p
            chain.count += 1
            chain.put((*p.ranked[0], p.version))
            return
        if fed is not None:
            assert fed.ranked is not None
            self._items.pop(fed.workload.key, None)
            self._version += 1
            fed.version = self._version
            self._chained[fed.workload.key] = fed
            chain.count += 1
            chain.put((*fed.ranked[0], fed.version))
        chain.fed = p
        self._items[key] = p
        heap = self._heap if self._afs is None else self._lq_heaps.setdefault(_local_queue(p.workload), [])
        heapq.heappush(heap, (*p.ranked[0], p.version))

    def _feed(self, chain: _Chain) -> None:
        """Move the chain's first live member into the heap (its place in the order and version kept)."""
        chained = self._chained
        while (item := chain.first()) is not None:
            chain.take()
            key: WorkloadKey = item[3]  # type: ignore[assignment]  # a WorkloadKey is a str
            p = chained.get(key)
            if p is None or p.version != item[4] or p.chain is not chain:
                continue  # updated, deleted or parked again since: not this chain's any more
            del chained[key]
            chain.count -= 1
            chain.fed = p
            p.quota_bound = p.node_bound = False
            self._items[key] = p
            heap = self._heap if self._afs is None else self._lq_heaps.setdefault(_local_queue(p.workload), [])
            heapq.heappush(heap, item)
            self._ready.add(self.name)
            return
        chain.fed = None
        if chain.released and self._chains.get(chain.key) is chain:
            del self._chains[chain.key]  # empty: made again when its shape is parked next

    def _unfeed(self, p: _Pending) -> None:
        """``p`` leaves the heap other than by pop (updated, deleted): its chain feeds the next member."""
        chain = p.chain
        if chain is not None and chain.fed is p:
            chain.fed = None
            if chain.released:
                self._feed(chain)

    def _release_chains(self, keep: Callable[[tuple[bool, bool]], bool] | None = None) -> bool:
        """Every stopped chain's members are pending again (a step per chain), but for the chains whose flags
        ``keep`` holds to, which stay stopped; True if any released had members."""
        if not self._stopped:
            return False
        stopped, self._stopped = self._stopped, []
        moved = False
        for chain in stopped:
            if chain.released:
                continue
            if keep is not None and keep(chain.flags):
                self._stopped.append(chain)
                continue
            chain.released = True
            moved = moved or chain.first() is not None
            if chain.fed is None:
                self._feed(chain)
        return moved

    def _dissolve_chains(self) -> None:
        """Chains no more: a released chain's members go into the heap's items, a parked one's into the
        parked set (the heaps are then rebuilt from the items by the caller)."""
        for p in self._chained.values():
            chain = p.chain
            p.chain = None
            if chain is not None and chain.released:
                self._items[p.workload.key] = p
            else:
                p.quota_bound, p.node_bound = chain.flags if chain is not None else (False, False)
                p.needs = None
                self._park(p)
        for p in self._items.values():
            p.chain = None
        self._chained.clear()
        self._chains.clear()
        self._stopped.clear()

    def _restore(self, parked: Iterable[_Pending]) -> None:
        """Put parked workloads back into the heap as they were.

        Nothing about a parked workload changed while it waited (an update
        replaces it), so its place in the order, its version and its last
        flavor tried are kept; only the parking marks go.  Its version is
        its own already (given when it was parked, after every item in the
        heap), so no stale item can match it.  Many at once go in with one
        heapify instead of a push each: a release in a busy cohort moves
        every parked workload of every queue in it, and most are parked
        again within a few cycles (see ``_park_equivalent``).
        """
        items = self._items
        # The items for each heap they go to (under Admission Fair Sharing, their LocalQueue's).
        by_heap: dict[int, tuple[list[tuple[int, float, str, str, int]], list[tuple[int, float, str, str, int]]]] = {}
        for p in parked:
            p.quota_bound = p.node_bound = False
            p.needs = None
            ranked = p.ranked
            if ranked is None or ranked[1] is not p.workload:
                ranked = p.ranked = (self._order_key(p.workload), p.workload)
            items[p.workload.key] = p
            heap = self._heap if self._afs is None else self._lq_heaps.setdefault(_local_queue(p.workload), [])
            by_heap.setdefault(id(heap), (heap, []))[1].append((*ranked[0], p.version))
        if not by_heap:
            return
        self._ready.add(self.name)
        for heap, new in by_heap.values():
            if len(new) * 8 >= len(heap):
                heap.extend(new)
                heapq.heapify(heap)
            else:
                for item in new:
                    heapq.heappush(heap, item)

    def _requeue_all_parked(self) -> bool:
        moved = bool(self._inadmissible)
        self._restore(self._inadmissible.values())
        self._inadmissible.clear()
        moved = self._release_chains() or moved
        self._quota_orders.clear()
        self._plain_parked.clear()
        self._quota_parked = 0
        self._need_count.clear()
        self._need_min.clear()
        self.deferred = False
        return moved

    def requeue_node_bound(self) -> bool:
        """Node capacity came back: only workloads parked for lack of a node are retried."""
        back: list[_Pending] = []
        for key in list(self._plain_parked):
            p = self._inadmissible.get(key)
            if p is not None and p.node_bound:
                self._unpark(key)
                self._plain_parked.discard(key)
                back.append(p)
        self._restore(back)
        # So are the chains stopped by a head parked for lack of a node only.
        moved = self._release_chains(keep=lambda flags: flags != (False, True))
        return moved or bool(back)

    def forget_in_flight(self, key: WorkloadKey) -> None:
        """The head was admitted: it is no longer pending."""
        self._offered.discard(key)
        self._in_flight.pop(key, None)

    def queue_inadmissible(self, budget: Budget | None = None) -> bool:
        """Move parked workloads back into the heap.

        With a ``budget`` (quota was released), workloads parked only for want
        of quota are offered the freed quota in queue order, and only those it
        can hold are requeued; the rest stay parked (*deferred*), since trying
        them now would give the same NoFit again.  This keeps a release from
        costing one cycle per parked workload.  If a requeued one then turns
        out not to fit after all, :meth:`requeue` puts every deferred workload
        back, so nothing waits on a wrong guess.
        """
        self.queue_inadmissible_cycle = self.pop_cycle
        self._bulk.clear()  # released workloads are judged afresh
        if not self._inadmissible and not self._stopped:
            # Nothing parked (a release touches every queue of its cohort tree, most of them idle).
            self.deferred = False
            return False
        if budget is None or not (self._inadmissible or any(c.flags[0] for c in self._stopped)):
            return self._requeue_all_parked()
        # Workloads offered quota by an earlier release and not tried yet
        # still count on it: several releases can land between two cycles.
        for key in self._offered:
            p = self._items.get(key)
            if p is not None:
                budget.take(p.workload)
        back: list[_Pending] = []
        for key in self._plain_parked:
            p = self._inadmissible.get(key)
            if p is not None and not p.quota_bound:
                self._unpark(key)
                back.append(p)
        self._plain_parked.clear()
        self._restore(back)
        # Chains stopped for want of quota stay stopped: their members are offered the budget below.
        moved = self._release_chains(keep=_quota_flag) or bool(back)
        by_group: dict[tuple[str, str] | None, list[_Chain]] = {}
        for chain in self._stopped:
            by_group.setdefault(chain.key[1], []).append(chain)
        for group in self._offer_order(by_group):
            if self._offer(budget, group, by_group.get(group, [])):
                moved = True
        # Chains left with no member are done with; the others wait for the next release.
        stopped, self._stopped = self._stopped, []
        for chain in stopped:
            if self._chain_top(chain) is None:
                chain.released = True
                self._feed(chain)  # nothing to feed: forgets the chain
            else:
                self._stopped.append(chain)
        self.deferred = bool(self._inadmissible) or bool(self._stopped)
        return moved

    def _offer(self, budget: Budget, group: tuple[str, str] | None, chains: list[_Chain]) -> bool:
        """Offer ``budget`` to the group's quota-bound parked workloads, on their own (``_quota_orders``) and in
        stopped chains, in queue order: each it can hold is requeued.  A chain's members share their needs
        (their pod sets are one shape), and what is left only shrinks as the walk goes on, so the first
        member the budget cannot hold ends its chain's part of the walk: the walk costs a step per workload
        requeued and per chain, not per workload parked.  True if any was requeued."""
        moved = False
        order, kept, i = self._quota_orders.get(group, []), [], 0
        # The next member of each chain still in the walk: (its heap item, the chain's index).
        tops: list[tuple[tuple[int, float, str, str, int], int]] = []
        for n, chain in enumerate(chains):
            top = self._chain_top(chain)
            if top is not None and self._reaches(budget, top):
                tops.append((top, n))
        heapq.heapify(tops)
        alone = True  # the ones on their own are still in the walk
        while True:
            if alone and (i >= len(order) or self._out_of_reach(budget)):
                alone = False
            if tops and (not alone or tops[0][0][:4] < order[i][0]):
                top, n = tops[0]
                key: WorkloadKey = top[3]  # type: ignore[assignment]  # a WorkloadKey is a str
                p = self._chained[key]
                if not self._reaches(budget, top) or not budget.take(p.workload):
                    heapq.heappop(tops)  # nor can any later member of its shape
                    continue
                chains[n].take()
                self._unchain(key)
                self._offered.add(key)  # before the push: it goes into the heap on its own
                self._push(p.workload, p.last_tried)
                moved = True
                nxt = self._chain_top(chains[n])
                if nxt is None:
                    heapq.heappop(tops)
                else:
                    heapq.heapreplace(tops, (nxt, n))
                continue
            if not alone:
                break
            item = order[i]
            i += 1
            _, version, key = item
            parked = self._inadmissible.get(key)
            if parked is None or parked.version != version:
                continue
            if not budget.take(parked.workload):
                kept.append(item)
                continue
            self._unpark(key)
            self._offered.add(key)
            self._push(parked.workload, parked.last_tried)
            moved = True
        if group in self._quota_orders:
            kept.extend(order[i:])
            self._quota_orders[group] = kept
        return moved

    def _chain_top(self, chain: _Chain) -> tuple[int, float, str, str, int] | None:
        """The item of the chain's first member still waiting in it (dropping the stale ones), or None."""
        chained = self._chained
        while (item := chain.first()) is not None:
            p = chained.get(WorkloadKey(item[3]))
            if p is not None and p.version == item[4] and p.chain is chain:
                return item
            chain.take()
        return None

    def _reaches(self, budget: Budget, item: tuple[int, float, str, str, int]) -> bool:
        """Whether the chained workload of ``item`` could take its needs from what ``budget`` has left (where
        known exactly), without asking the budget."""
        p = self._chained[WorkloadKey(item[3])]
        for res, qty in _needs_of(p.workload.pod_sets).items():
            left = budget.left(res)
            if left is not None and left < qty:
                return False
        return True

    def _group(self, wl: Workload) -> tuple[str, str] | None:
        return None if self._afs is None else _local_queue(wl)

    def _offer_order(self, chains: Mapping[tuple[str, str] | None, list[_Chain]]) -> list[tuple[str, str] | None]:
        """The groups of parked workloads (on their own, or in the stopped ``chains``) in the order freed quota
        is offered: under Admission Fair Sharing the LocalQueues by usage (lowest first, ties by their first
        workload), as the scheduler would take them."""
        groups = [g for g, items in self._quota_orders.items() if items]
        groups.extend(g for g in chains if g not in self._quota_orders or not self._quota_orders[g])
        if self._afs is None or len(groups) < 2:
            return groups
        usage = self._afs

        def first(g: tuple[str, str] | None) -> tuple[object, ...]:
            tops = [tuple(top[:4]) for c in chains.get(g, []) if (top := c.first()) is not None]
            if self._quota_orders.get(g):
                tops.append(self._quota_orders[g][0][0])
            return min(tops) if tops else ()

        return sorted(groups, key=lambda g: (usage(g) if g is not None else 0.0, first(g)))

    def _order_key(self, wl: Workload) -> tuple[int, float, str, str]:
        return (-wl.priority, queue_order_timestamp(wl, self.requeuing), wl.uid, wl.key)

    def reset_last_tried(self) -> None:
        """Quota changed: every workload starts its flavor search from the first flavor."""
        for d in (self._items, self._inadmissible, self._chained):
            for p in d.values():
                p.last_tried = None

    def page(self, *, offset: int, limit: int, keep: Callable[[Workload], bool] | None = None) -> list[Position]:
        """Pending workloads in the order the scheduler takes them, from ``offset`` (0-based), at most ``limit``.

        The order is the heap's (priority, then queue-order timestamp, then
        uid), over every pending workload: in the heap, parked as
        inadmissible, or popped for the running cycle, as Kueue's visibility
        API lists them.  ``keep`` narrows what is listed (a LocalQueue, the
        namespaces a caller may see); positions stay those in the whole
        ClusterQueue and LocalQueue.  Cost: O(n log k) to select the first
        k = offset + limit (a sort only when k is a large part of n), plus
        O(n log k) for the positions when ``keep`` hides some.
        """
        everything: list[tuple[Rank, Workload]] = [
            p.ranked or (self._order_key(p.workload), p.workload)
            for d in (self._items, self._inadmissible, self._in_flight, self._chained) for p in d.values()]
        if self._afs is not None:
            # Admission Fair Sharing: the LocalQueue's usage comes first (once per LocalQueue).
            usage: dict[tuple[str, str], float] = {}
            for i, (k, wl) in enumerate(everything):
                lq = _local_queue(wl)
                u = usage.get(lq)
                if u is None:
                    u = usage[lq] = self._afs(lq)
                everything[i] = ((u, *k), wl)
        chosen = everything if keep is None else [e for e in everything if keep(e[1])]
        want = offset + limit
        if want <= 0 or not chosen:
            return []
        # The first ``want`` in order: a bounded selection (one comparison per
        # workload for most) when the page is short, a sort when it is not.
        head = heapq.nsmallest(want, chosen) if want < len(chosen) // 4 else sorted(chosen)[:want]
        page = head[offset:]
        if keep is None:
            # The page is a prefix of the whole order: positions are indexes.
            lq_seen: dict[tuple[str, str], int] = {}
            for _, wl in head[:offset]:
                lq_seen[_local_queue(wl)] = lq_seen.get(_local_queue(wl), 0) + 1
            out: list[Position] = []
            for i, (_, wl) in enumerate(page, offset):
                lq = _local_queue(wl)
                n = lq_seen.get(lq, 0)
                lq_seen[lq] = n + 1
                out.append(Position(wl, self.name, i, n))
            return out
        cq_ranks, lq_ranks = _ranks(everything, page)
        return [Position(wl, self.name, c, lq) for (_, wl), c, lq in zip(page, cq_ranks, lq_ranks, strict=True)]

    def pending_workloads(self) -> list[Workload]:
        return [p.workload for d in (self._items, self._inadmissible, self._in_flight, self._chained)
                for p in d.values()]

    def pending_by_status(self) -> tuple[list[Workload], list[Workload]]:
        """(active, inadmissible): waiting for a cycle (or in the running one), and parked until something
        changes -- the two statuses of Kueue's pending_workloads metric."""
        parked = [p.workload for p in self._inadmissible.values()]
        active: list[Workload] = []
        bulk = self._bulk if self.strategy is QueueingStrategy.BEST_EFFORT_FIFO else {}
        # A chain's members are pending while it is released (fed one at a time), parked while it is not.
        for p in self._chained.values():
            pending = p.chain is not None and p.chain.released and (p.shape is None or p.shape not in bulk)
            (active if pending else parked).append(p.workload)
        if not bulk:
            active.extend(p.workload for d in (self._items, self._in_flight) for p in d.values())
            return active, parked
        # Those waiting in the heap behind a parked shape are parked in all but name (Kueue moves them).
        active.extend(p.workload for p in self._in_flight.values())
        for p in self._items.values():
            (parked if scheduling_shape(p.workload) in bulk else active).append(p.workload)
        return active, parked


class QueueManager:
    """All ClusterQueue queues, and which of them have a head to offer."""

    def __init__(self, requeuing: RequeuingTimestamp = RequeuingTimestamp.EVICTION) -> None:
        self.requeuing = requeuing
        self.queues: dict[ClusterQueueName, ClusterQueueQueue] = {}
        self._where: dict[WorkloadKey, ClusterQueueName] = {}
        # Queues that may have a head, so that a cycle costs in proportion to
        # the queues with work rather than to every queue; heads come out in
        # the order the queues were created, as iterating ``queues`` gives.
        self._ready: set[ClusterQueueName] = set()
        self._rank: dict[ClusterQueueName, int] = {}
        self._created = 0
        # Queues that parked a workload for lack of a node since node capacity last came back.
        self._node_bound: set[ClusterQueueName] = set()
        # Queues a release has something to do in: those that popped a head or parked a workload since
        # a release last found them with nothing parked.  Every other queue is as a release would leave
        # it (nothing parked, no shape parked, its release mark at its last pop), so a release walks
        # these instead of its whole cohort tree: most queues of a busy tree are idle at any moment.
        self._touched: set[ClusterQueueName] = set()
        # Each cohort tree's members (Cache.tree_members: one tuple per tree) -> their positions.
        self._positions: dict[int, tuple[Sequence[ClusterQueueName], dict[ClusterQueueName, int]]] = {}

    def ensure_queue(self, name: ClusterQueueName, strategy: QueueingStrategy, *, active: bool) -> ClusterQueueQueue:
        q = self.queues.get(name)
        if q is None:
            q = ClusterQueueQueue(name, strategy, self.requeuing, self._ready, self._touched)
            self.queues[name] = q
            self._created += 1
            self._rank[name] = self._created
        else:
            q.set_strategy(strategy)
        q.active = active
        return q

    def remove_queue(self, name: ClusterQueueName) -> list[Workload]:
        """Drop a queue; returns the workloads that were pending in it."""
        q = self.queues.pop(name, None)
        self._ready.discard(name)
        self._touched.discard(name)
        self._rank.pop(name, None)
        if q is None:
            return []
        orphans = q.pending_workloads()
        for wl in orphans:
            self._where.pop(wl.key, None)
        return orphans

    def cluster_queue_of(self, key: WorkloadKey) -> ClusterQueueName | None:
        return self._where.get(key)

    def add_or_update(self, wl: Workload, cq: ClusterQueueName) -> None:
        old = self._where.get(wl.key)
        if old is not None and old != cq:
            self.delete(wl.key)
        q = self.queues.get(cq)
        if q is None:
            raise KeyError(cq)
        q.add_or_update(wl)
        self._where[wl.key] = cq

    def delete(self, key: WorkloadKey) -> bool:
        cq = self._where.pop(key, None)
        if cq is None:
            return False
        q = self.queues.get(cq)
        return q.delete(key) if q is not None else False

    def _with_heads(self) -> list[ClusterQueueQueue]:
        """Active queues with a head, in creation order; forgets queues left empty."""
        queues, rank = self.queues, self._rank
        names: list[ClusterQueueName] = []
        empty: list[ClusterQueueName] = []
        for name in self._ready:
            q = queues.get(name)
            if q is None or not q._items:
                empty.append(name)
            elif q.active:
                names.append(name)
        self._ready.difference_update(empty)
        names.sort(key=rank.__getitem__)
        return [queues[name] for name in names]

    def heads(self) -> list[Head]:
        out: list[Head] = []
        for q in self._with_heads():
            head = q.pop()
            if head is not None:
                out.append(head)
        return out

    def has_heads(self) -> bool:
        for name in list(self._ready):
            q = self.queues.get(name)
            if q is None or not q.has_heads:
                self._ready.discard(name)
            elif q.active:
                return True
        return False

    def requeue(self, entry: Entry, *, quota_bound: bool = False, node_bound: bool = False) -> bool:
        """Requeue a head; True if it is back in the heap (the next cycle sees it again)."""
        q = self.queues.get(entry.cluster_queue)
        if q is None:
            self._where.pop(entry.key, None)
            return False
        if node_bound:
            self._node_bound.add(entry.cluster_queue)
        return q.requeue(entry, quota_bound=quota_bound, node_bound=node_bound)

    def node_capacity_freed(self) -> bool:
        names, self._node_bound = self._node_bound, set()
        return any([q.requeue_node_bound() for name in names if (q := self.queues.get(name)) is not None])

    def admitted(self, entry: Entry) -> None:
        q = self.queues.get(entry.cluster_queue)
        if q is not None:
            q.forget_in_flight(entry.key)
        self._where.pop(entry.key, None)

    def queue_inadmissible(
        self,
        cqs: Iterable[ClusterQueueName],
        budget_for: Callable[[ClusterQueueName], Budget | None] | None = None,
    ) -> bool:
        """A release in ``cqs`` (in that order): each of them that popped or parked since the last release
        is given it (see ClusterQueueQueue.queue_inadmissible), with ``budget_for`` its budget if any."""
        touched = self._touched
        if not touched:
            return False
        moved = False
        queues = self.queues
        for name in self._touched_among(cqs):
            q = queues.get(name)
            if q is None:
                touched.discard(name)
                continue
            if not q._inadmissible and not q._stopped:
                # ClusterQueueQueue.queue_inadmissible with nothing parked, inline.
                q.queue_inadmissible_cycle = q.pop_cycle
                if q._bulk:
                    q._bulk.clear()
                q.deferred = False
                touched.discard(name)
                continue
            if q.queue_inadmissible(budget_for(name) if budget_for is not None else None):
                moved = True
            if not q._inadmissible and not q._stopped:
                touched.discard(name)
        return moved

    def _touched_among(self, cqs: Iterable[ClusterQueueName]) -> list[ClusterQueueName]:
        """The touched queues among ``cqs``, in the order of ``cqs``: found from the touched side when
        they are fewer (``cqs`` a tree's members, whose positions are kept), else by walking ``cqs``."""
        touched = self._touched
        if type(cqs) is tuple and len(cqs) > 8 and len(touched) * 4 < len(cqs):
            kept = self._positions.get(id(cqs))
            if kept is None or kept[0] is not cqs:
                if len(self._positions) >= 4096:
                    self._positions.clear()
                kept = (cqs, {name: i for i, name in enumerate(cqs)})
                self._positions[id(cqs)] = kept
            positions = kept[1]
            among = [name for name in touched if name in positions]
            among.sort(key=positions.__getitem__)
            return among
        return [name for name in cqs if name in touched]

    def pending_count(self, cq: ClusterQueueName) -> int:
        q = self.queues.get(cq)
        return len(q) if q is not None else 0

    def position(self, key: WorkloadKey) -> Position | None:
        """Where a pending workload stands in its queue (None if it waits in no heap).

        One pass over the queue, no sort: its rank is how many come before it.
        """
        cq = self._where.get(key)
        q = self.queues.get(cq) if cq is not None else None
        if q is None:
            return None
        page = q.page(offset=0, limit=1, keep=lambda wl: wl.key == key)
        return page[0] if page else None

    def pending_page(
        self, cq: ClusterQueueName, *, offset: int, limit: int, keep: Callable[[Workload], bool] | None = None,
    ) -> list[Position]:
        """The pending workloads of ``cq`` in queue order (see ClusterQueueQueue.page)."""
        q = self.queues.get(cq)
        return q.page(offset=offset, limit=limit, keep=keep) if q is not None else []


@dataclass(frozen=True, slots=True)
class Position:
    """A pending workload and how many wait before it (Kueue's visibility API, 0 is next)."""

    workload: Workload
    cluster_queue: ClusterQueueName
    in_cluster_queue: int
    in_local_queue: int


def _quota_flag(flags: tuple[bool, bool]) -> bool:
    return flags[0]


def _local_queue(wl: Workload) -> tuple[str, str]:
    return (wl.namespace, wl.queue_name)


def _ranks(everything: list[tuple[Rank, Workload]], page: list[tuple[Rank, Workload]]) -> tuple[list[int], list[int]]:
    """For each of ``page`` (in order): how many of ``everything`` come before it, in all and in its LocalQueue.

    One pass over ``everything`` with a binary search into the page's keys:
    O(n log k) for a page of k, instead of sorting all n.
    """
    keys = [k for k, _ in page]
    before = [0] * (len(page) + 1)
    by_lq: dict[tuple[str, str], tuple[list[Rank], list[int]]] = {}
    for k, wl in page:
        lq_keys, _ = by_lq.setdefault(_local_queue(wl), ([], []))
        lq_keys.append(k)
    for lq_keys, counts in by_lq.values():
        counts.extend([0] * (len(lq_keys) + 1))
    for k, wl in everything:
        # Every page item whose key is greater than k has k before it.
        before[bisect.bisect_right(keys, k)] += 1
        group = by_lq.get(_local_queue(wl))
        if group is not None:
            group[1][bisect.bisect_right(group[0], k)] += 1
    cq_ranks: list[int] = []
    running = 0
    for i in range(len(page)):
        running += before[i]
        cq_ranks.append(running)
    lq_ranks: list[int] = []
    seen: dict[tuple[str, str], tuple[int, int]] = {}
    for _, wl in page:
        name = _local_queue(wl)
        counts = by_lq[name][1]
        i, total = seen.get(name, (0, 0))
        total += counts[i]
        seen[name] = (i + 1, total)
        lq_ranks.append(total)
    return cq_ranks, lq_ranks
