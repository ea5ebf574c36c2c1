"""The pending queues: which queues offer heads, in what order, and what a wake-up brings back."""

from __future__ import annotations

from sluicegate.controller.cache import ReleaseBudget
from sluicegate.controller.queues import ClusterQueueQueue, QueueManager
from sluicegate.controller.scheduling.cycle import Entry, Head, RequeueReason
from sluicegate.model.config import RequeuingTimestamp
from sluicegate.model.names import ClusterQueueName, WorkloadKey
from sluicegate.model.queues import QueueingStrategy
from sluicegate.model.workloads import Workload
from tests.builders import pod_set as podset
from tests.builders import workload as wl

BEST_EFFORT = QueueingStrategy.BEST_EFFORT_FIFO


def queues(*names: str) -> QueueManager:
    qm = QueueManager()
    for n in names:
        qm.ensure_queue(ClusterQueueName(n), BEST_EFFORT, active=True)
    return qm


def park(qm: QueueManager, head: Head, reason: RequeueReason, *, node_bound: bool = False) -> None:
    entry = Entry(head=head, requeue_reason=reason)
    assert qm.requeue(entry, node_bound=node_bound) is False  # parked, not back in the heap


def head_names(qm: QueueManager) -> list[tuple[str, str]]:
    return [(h.cluster_queue, h.workload.name) for h in qm.heads()]


def test_heads_come_from_queues_with_work_in_creation_order() -> None:
    qm = queues("c", "a", "b")
    assert not qm.has_heads()
    qm.add_or_update(wl("in-b", created=1), ClusterQueueName("b"))
    qm.add_or_update(wl("in-c", created=2), ClusterQueueName("c"))
    assert qm.has_heads()
    assert head_names(qm) == [("c", "in-c"), ("b", "in-b")]
    # Both heads are in flight now: nothing more to offer until they come back.
    assert not qm.has_heads()
    assert head_names(qm) == []


def test_an_inactive_queue_offers_no_head_until_it_is_active_again() -> None:
    qm = queues("a")
    qm.add_or_update(wl("w"), ClusterQueueName("a"))
    qm.ensure_queue(ClusterQueueName("a"), BEST_EFFORT, active=False)
    assert not qm.has_heads()
    qm.ensure_queue(ClusterQueueName("a"), BEST_EFFORT, active=True)
    assert head_names(qm) == [("a", "w")]


def test_node_capacity_brings_back_only_workloads_parked_for_lack_of_a_node() -> None:
    qm = queues("a", "b")
    qm.add_or_update(wl("no-node"), ClusterQueueName("a"))
    qm.add_or_update(wl("no-quota"), ClusterQueueName("b"))
    heads = {h.workload.name: h for h in qm.heads()}
    park(qm, heads["no-node"], RequeueReason.NO_PLACEMENT, node_bound=True)
    park(qm, heads["no-quota"], RequeueReason.NO_FIT)
    assert not qm.has_heads()

    assert qm.node_capacity_freed() is True
    assert head_names(qm) == [("a", "no-node")]
    # Nothing else was waiting for a node: a second wake-up brings nothing back.
    assert qm.node_capacity_freed() is False
    assert head_names(qm) == []


class CountingBudget(ReleaseBudget):
    """The controller's release budget, counting how many workloads it was asked about."""

    def __init__(self, cpu: int) -> None:
        super().__init__({"cpu": cpu}, {"cpu"})
        self.asked = 0

    def take(self, wl: Workload) -> bool:
        self.asked += 1
        return super().take(wl)


def parked_queue(*workloads: Workload) -> ClusterQueueQueue:
    q = ClusterQueueQueue(ClusterQueueName("a"), BEST_EFFORT, RequeuingTimestamp.EVICTION)
    for w in workloads:
        q.add_or_update(w)
    # Each head tried parks itself and, unasked, the rest of its scheduling shape (Kueue's bulk move).
    for _ in workloads:
        head = q.pop()
        if head is None:
            break
        assert q.requeue(Entry(head=head, requeue_reason=RequeueReason.NO_FIT), quota_bound=True) is False
    assert not q.has_heads and len(q) == len(workloads)
    return q


def popped(q: ClusterQueueQueue) -> list[str]:
    out = []
    for _ in range(100):
        head = q.pop()
        if head is None:
            return out
        out.append(head.workload.name)
    raise AssertionError("queue never emptied")


def test_freed_quota_goes_to_the_first_parked_workloads_it_can_hold_in_queue_order() -> None:
    q = parked_queue(wl("big-1", podset(cpu="5"), created=1), wl("small", podset(cpu="1"), created=2),
                     wl("big-2", podset(cpu="5"), created=3), wl("small-2", podset(cpu="1"), created=4))
    assert q.queue_inadmissible(CountingBudget(cpu=2000)) is True
    assert popped(q) == ["small", "small-2"]
    assert q.deferred  # big-1 and big-2 stay parked: 2 cpus cannot hold either


def test_a_release_too_small_for_any_parked_workload_looks_at_none_of_them() -> None:
    q = parked_queue(*(wl(f"w{i:03d}", podset(cpu="2"), created=i) for i in range(200)))
    budget = CountingBudget(cpu=1000)
    assert q.queue_inadmissible(budget) is False
    assert (budget.asked, popped(q), q.deferred) == (0, [], True)
    # Enough for two: exactly the two oldest are offered, and the walk stops there.
    budget = CountingBudget(cpu=4000)
    assert q.queue_inadmissible(budget) is True
    assert (budget.asked, popped(q)) == (2, ["w000", "w001"])


def test_a_parked_workload_updated_or_deleted_is_not_offered_quota() -> None:
    q = parked_queue(wl("gone", podset(cpu="1"), created=1), wl("changed", podset(cpu="1"), created=2),
                     wl("kept", podset(cpu="1"), created=3))
    q.delete(WorkloadKey("default/gone"))
    q.add_or_update(wl("changed", podset(cpu="1"), created=2, priority=5))  # back in the heap, not parked
    assert q.queue_inadmissible(CountingBudget(cpu=1000)) is True
    assert popped(q) == ["changed", "kept"]
    assert not q.deferred


def _drain_as_no_fit(q: ClusterQueueQueue) -> list[str]:
    """Pop every head, each one tried (keeping its last flavor tried) and parked for NoFit (parking its shape);
    the names tried, in order."""
    tried: list[str] = []
    while (h := q.pop()) is not None:
        tried.append(h.workload.name)
        assert q.requeue(Entry(head=h, requeue_reason=RequeueReason.NO_FIT, last_tried=h.last_tried)) is False
    return tried


def test_released_workloads_come_back_in_queue_order_with_their_last_flavor_tried() -> None:
    # Many parked workloads of three shapes, released many at once (one heapify) and a few at a time
    # (pushes), must be offered exactly as a fresh queue of the same workloads would offer them.
    q = ClusterQueueQueue(ClusterQueueName("cq"), BEST_EFFORT, RequeuingTimestamp.EVICTION)
    members = [wl(f"w{i:03d}", created=float(i % 17), priority=10 * (i % 3), requests={"cpu": 1 + i % 3})
               for i in range(120)]
    for w in members:
        q.add_or_update(w)
    expected = [w.name for w in sorted(members, key=lambda w: (-w.priority, w.creation_timestamp, w.uid))]
    order: list[str] = []
    while (h := q.pop()) is not None:
        order.append(h.workload.name)
        q.requeue(Entry(head=h, requeue_reason=RequeueReason.GENERIC, last_tried=({"cpu": len(order)},)))
    assert order == expected and len(q) == 120  # each parked (a generic requeue), none in the heap
    q.queue_inadmissible()
    for _round in range(3):
        heads = _drain_as_no_fit(q)
        # One of each of the three (shape, priority) classes is tried per release; the rest are parked
        # with it, untried.
        assert len(heads) == 3 and len(q) == 120
        q.queue_inadmissible()
    # After the releases, the order and each workload's last flavor tried are what they were.
    again: list[tuple[str, int]] = []
    while (h := q.pop()) is not None:
        assert h.last_tried is not None
        again.append((h.workload.name, h.last_tried[0]["cpu"]))
        q.forget_in_flight(h.workload.key)
    assert [name for name, _ in again] == expected
    assert all(n == expected.index(name) + 1 for name, n in again)
    # A few released into a long heap go in one by one, in order among the others.
    for w in members:
        q.add_or_update(w)
    head = q.pop()
    assert head is not None and head.workload.name == expected[0]
    q.requeue(Entry(head=head, requeue_reason=RequeueReason.NO_FIT))
    q.queue_inadmissible()
    names = [h.workload.name for h in iter(q.pop, None)]
    assert names == expected


def test_released_workloads_go_back_to_their_local_queues_heaps_under_fair_sharing() -> None:
    usage = {("default", "lq-a"): 0.5, ("default", "lq-b"): 0.1}
    q = ClusterQueueQueue(ClusterQueueName("cq"), BEST_EFFORT, RequeuingTimestamp.EVICTION)
    q.set_fair_sharing(lambda lq: usage[lq])
    members = [wl(f"{lq}-{i}", queue=lq, created=float(i)) for lq in ("lq-a", "lq-b") for i in range(40)]
    for w in members:
        q.add_or_update(w)
    assert _drain_as_no_fit(q) == ["lq-b-0"]  # one shape: the first head parks everyone
    q.queue_inadmissible()
    first = q.pop()
    assert first is not None and first.workload.name == "lq-b-0"  # lq-b uses less
    q.forget_in_flight(first.workload.key)
    usage[("default", "lq-b")] = 0.9
    names = [h.workload.name for h in iter(q.pop, None)]
    assert names == [f"lq-a-{i}" for i in range(40)] + [f"lq-b-{i}" for i in range(1, 40)]


def test_a_release_asks_about_a_parked_shape_only_until_one_of_it_does_not_fit() -> None:
    # 50 of one shape, parked with the first (tried, NoFit): how much is free is not known exactly (several
    # flavors), so nothing is ruled out unasked; the first member refused ends the walk over its shape, since
    # the others need just as much from a budget that only shrinks.
    q = parked_queue(*(wl(f"w{i:03d}", podset(cpu="2"), created=i) for i in range(50)))
    budget = CountingBudget(cpu=1000)
    budget.exact.clear()
    assert q.queue_inadmissible(budget) is False
    assert (budget.asked, popped(q), q.deferred) == (2, [], True)  # the head parked on its own, and w001
    budget = CountingBudget(cpu=5000)
    budget.exact.clear()
    assert q.queue_inadmissible(budget) is True  # inexact: each is asked against the same 5 cpus
    assert len(popped(q)) == 50

