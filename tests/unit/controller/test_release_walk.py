"""A release walks only the queues that popped or parked since the last one, and that changes nothing.

``QueueManager.queue_inadmissible`` is handed a whole cohort tree at every
release of quota (a workload finishing, say), and most queues of a busy tree
have nothing parked at that moment.  The manager keeps the names of the
queues a release has something to do in (``_touched``); these histories run
the same operations on two managers, one that walks every queue of the tree
as a release used to, and check that both offer the same heads, park and
count the same workloads, and that every queue left out of the walk is
exactly as a release would have left it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sluicegate.controller.cache import ReleaseBudget
from sluicegate.controller.queues import ClusterQueueQueue, QueueManager, quota_needs
from sluicegate.controller.scheduling.cycle import Entry, RequeueReason
from sluicegate.model.config import RequeuingTimestamp
from sluicegate.model.names import ClusterQueueName
from sluicegate.model.queues import QueueingStrategy
from sluicegate.model.workloads import Workload
from tests.builders import workload as wl

# Twelve queues, one tree (the tuple Cache.tree_members would hand over), two of them StrictFIFO.
TREE = tuple(ClusterQueueName(f"cq{i}") for i in range(12))
STRICT = {TREE[3], TREE[7]}


class _WalksEverything(QueueManager):
    """The walk before ``_touched``: every queue of ``cqs``, in order."""

    def _touched_among(self, cqs: Iterable[ClusterQueueName]) -> list[ClusterQueueName]:
        self._touched.update(self.queues)  # so the other shortcut (nothing touched) never applies either
        return list(cqs)


def _managers() -> tuple[QueueManager, QueueManager]:
    out = (QueueManager(RequeuingTimestamp.EVICTION), _WalksEverything(RequeuingTimestamp.EVICTION))
    for m in out:
        for name in TREE:
            strategy = QueueingStrategy.STRICT_FIFO if name in STRICT else QueueingStrategy.BEST_EFFORT_FIFO
            m.ensure_queue(name, strategy, active=True)
    return out


def _workload(n: int, size: int, priority: int) -> Workload:
    return wl(f"w{n}", created=float(n), priority=priority, requests={"cpu": size}, queue="lq")


def _budget_of(budget: ReleaseBudget) -> Callable[[ClusterQueueName], ReleaseBudget]:
    """One budget for the whole tree, as Cache.release_budget hands out."""
    return lambda _: budget


def _clean(q: ClusterQueueQueue) -> bool:
    """As a release leaves a queue with nothing parked."""
    return (q.queue_inadmissible_cycle == q.pop_cycle or q.pop_cycle == 0) and not q._bulk \
        and not q.deferred and not q._inadmissible and not q._stopped


def _state(m: QueueManager) -> list[tuple[object, ...]]:
    out: list[tuple[object, ...]] = []
    for name in TREE:
        active, parked = m.queues[name].pending_by_status()
        out.append((name, sorted(w.name for w in active), sorted(w.name for w in parked), m.queues[name].deferred))
    return out


ops = st.lists(st.one_of(
    st.tuples(st.just("put"), st.integers(0, 40), st.integers(0, 11), st.integers(1, 3), st.sampled_from([0, 10])),
    st.tuples(st.just("delete"), st.integers(0, 40)),
    # A cycle: every head is admitted, or requeued (parked: for quota alone or not), by these choices in turn.
    st.tuples(st.just("cycle"), st.lists(st.sampled_from(["admit", "nofit", "quota", "back"]), min_size=1,
                                         max_size=4)),
    st.tuples(st.just("release"), st.one_of(st.none(), st.integers(0, 6))),
    # A release in a tree of one queue (a ClusterQueue without a cohort) and one handed as a generator.
    st.tuples(st.just("alone"), st.integers(0, 11)),
    st.tuples(st.just("generator")),
    # Admission Fair Sharing switched on or off in a queue (its lanes dissolve: parked members park alone).
    st.tuples(st.just("fair"), st.integers(0, 11), st.booleans()),
), max_size=60)


@settings(max_examples=400, deadline=None)
@given(ops)
def test_a_release_that_skips_untouched_queues_does_what_walking_them_all_does(
        history: list[tuple[Any, ...]]) -> None:
    fast, slow = _managers()
    where: dict[int, ClusterQueueName] = {}
    one_cpu = quota_needs(_workload(0, 1, 0))["cpu"]
    for op in history:
        results: list[object] = []
        for m in (fast, slow):
            if op[0] == "put":
                _, n, q, size, priority = op
                cq = where.setdefault(int(n), TREE[int(q)])
                m.add_or_update(_workload(int(n), int(size), int(priority)), cq)
            elif op[0] == "delete":
                results.append(m.delete(_workload(int(op[1]), 1, 0).key))
            elif op[0] == "cycle":
                heads = m.heads()
                results.append([(h.workload.name, h.cluster_queue, h.last_tried) for h in heads])
                choices: list[str] = op[1]
                for i, h in enumerate(heads):
                    choice = choices[i % len(choices)]
                    entry = Entry(head=h, requeue_reason=RequeueReason.NO_FIT if choice != "back"
                                  else RequeueReason.FAILED_AFTER_NOMINATION, last_tried=({"cpu": i},))
                    if choice == "admit":
                        m.admitted(entry)
                    else:
                        results.append(m.requeue(entry, quota_bound=choice == "quota"))
            elif op[0] == "release":
                cpus = op[1]
                if cpus is None:
                    results.append(m.queue_inadmissible(TREE))
                else:
                    budget = ReleaseBudget({"cpu": int(cpus) * one_cpu}, {"cpu"})
                    results.append(m.queue_inadmissible(TREE, _budget_of(budget)))
            elif op[0] == "fair":
                m.queues[TREE[int(op[1])]].set_fair_sharing(
                    (lambda lq: 0.5) if op[2] else None)
            elif op[0] == "alone":
                results.append(m.queue_inadmissible((TREE[int(op[1])],)))
            else:
                results.append(m.queue_inadmissible(name for name in TREE))
        half = len(results) // 2
        assert results[:half] == results[half:], op
        assert _state(fast) == _state(slow), op
        for name in TREE:
            if name not in fast._touched:
                assert _clean(fast.queues[name]), name


def test_a_release_in_a_busy_tree_visits_only_the_queues_that_popped() -> None:
    m, _ = _managers()
    for n in range(12):
        m.add_or_update(_workload(n, 1, 0), TREE[n])
    assert m.queue_inadmissible(TREE) is False
    heads = m.heads()  # one per queue: every queue popped
    assert len(m._touched) == 12
    m.queue_inadmissible(TREE)
    assert not m._touched  # nothing parked anywhere: all left clean
    for h in heads[:11]:
        m.admitted(Entry(head=h))
    # Released after it was popped: the last head goes back into the heap, not parked (Kueue's guard).
    assert m.requeue(Entry(head=heads[11], requeue_reason=RequeueReason.NO_FIT)) is True
    assert not m._touched
    # Popped again, it does not fit and is parked: its queue alone is left for the next release.
    (head,) = m.heads()
    assert m.requeue(Entry(head=head, requeue_reason=RequeueReason.NO_FIT)) is False
    assert m._touched == {TREE[11]}
    assert m.queue_inadmissible(TREE) is True
    assert not m._touched and m.queues[TREE[11]].has_heads
