"""The pending queues: which queues offer heads, in what order, and what a wake-up brings back."""

from __future__ import annotations

from sluicegate.controller.model.names import ClusterQueueName
from sluicegate.controller.model.queues import QueueingStrategy
from sluicegate.controller.queues import QueueManager
from sluicegate.controller.scheduling.cycle import Entry, Head, RequeueReason
from ..scheduling.builders import wl

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
