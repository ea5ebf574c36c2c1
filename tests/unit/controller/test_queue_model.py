"""One ClusterQueue's pending workloads against a model of Kueue's semantics, on random histories.

The model is the plain statement of what the queue must do under
BestEffortFIFO (``pkg/cache/queue/cluster_queue.go`` and
``inadmissible_workloads.go`` in Kueue): heads come in order (priority, then
creation, then uid); a head that does not fit is parked and parks its
scheduling shape with it, so the workloads of that shape are passed over
untried until a release; a release makes every parked workload pending
again.  The queue keeps parked shapes in chains (``queues._Chain``) so that a
release costs a step per shape; whatever the history, it must offer the same
heads, with the same last flavor tried, and count the same workloads pending
and parked as the model.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import example, given, settings
from hypothesis import strategies as st

from sluicegate.controller.queues import ClusterQueueQueue
from sluicegate.controller.scheduling.cycle import Entry, RequeueReason, scheduling_shape
from sluicegate.model.config import RequeuingTimestamp
from sluicegate.model.names import ClusterQueueName
from sluicegate.model.queues import QueueingStrategy
from sluicegate.model.workloads import Workload
from tests.builders import workload as wl

NAMES = [f"w{i}" for i in range(8)]
# Anything the model does not pin down (see Model.update).
ANY = object()


def _workload(name: str, size: int, priority: int, created: int, lq: int) -> Workload:
    return wl(name, created=float(created), priority=priority, requests={"cpu": size}, queue=f"lq{lq}")


def _order(w: Workload) -> tuple[int, float, str]:
    return (-w.priority, w.creation_timestamp, w.uid)


@dataclass
class Model:
    pending: dict[str, Workload] = field(default_factory=dict)
    last_tried: dict[str, object] = field(default_factory=dict)
    parked: set[str] = field(default_factory=set)
    bulk: set[object] = field(default_factory=set)

    def parked_now(self, name: str) -> bool:
        """Parked, or behind a parked shape (which Kueue moves to the parked set at once)."""
        return name in self.parked or scheduling_shape(self.pending[name]) in self.bulk

    def update(self, w: Workload) -> None:
        old = self.pending.get(w.name)
        if old is None:
            self.last_tried[w.name] = None
        elif self.parked_now(w.name):
            # A workload parked with its shape but not yet reached in the heap keeps its last flavor tried;
            # one reached, or parked on its own, starts its search afresh: either is Kueue's (an update
            # makes it pending again), and which applies depends on where the heap stood.
            self.last_tried[w.name] = None if w.name in self.parked and scheduling_shape(old) not in self.bulk \
                else ANY
        self.pending[w.name] = w
        self.parked.discard(w.name)

    def delete(self, name: str) -> None:
        self.pending.pop(name, None)
        self.parked.discard(name)

    def pop(self) -> str | None:
        for name in sorted((n for n in self.pending if n not in self.parked), key=lambda n: _order(self.pending[n])):
            if scheduling_shape(self.pending[name]) in self.bulk:
                self.parked.add(name)  # passed over untried
                continue
            return name
        return None

    def release(self) -> None:
        self.parked.clear()
        self.bulk.clear()


ops = st.lists(st.one_of(
    st.tuples(st.just("put"), st.sampled_from(NAMES), st.integers(1, 2), st.sampled_from([0, 10]),
              st.integers(0, 5), st.integers(0, 1)),
    st.tuples(st.just("put"), st.sampled_from(NAMES), st.just(1), st.just(0), st.integers(0, 5), st.integers(0, 1)),
    st.tuples(st.just("delete"), st.sampled_from(NAMES)),
    st.tuples(st.just("cycle"), st.booleans()),
    st.tuples(st.just("cycle"), st.booleans()),
    st.tuples(st.just("release")),
    st.tuples(st.just("fair"), st.booleans()),
), max_size=80)

# Five of one shape: the first does not fit and parks the rest with it; after a release they come back one
# after another (a chain feeding the heap).
FIVE_OF_A_SHAPE = [*(("put", f"w{i}", 1, 0, i, 0) for i in range(5)), ("cycle", False), ("cycle", False),
                   ("release",), *(("cycle", True) for _ in range(6))]
# After the release the chain's first is in the heap: updated, then (in a second round) deleted, the next
# takes its turn.
FED_ONE_UPDATED = [*(("put", f"w{i}", 1, 0, i, 0) for i in range(5)), ("cycle", False), ("cycle", False),
                   ("release",), ("put", "w1", 1, 0, 1, 1), *(("cycle", True) for _ in range(3)),
                   ("put", "w0", 1, 0, 0, 0), ("cycle", False), ("cycle", False), ("release",), ("cycle", True),
                   ("delete", "w4"), ("cycle", True), ("cycle", True)]
# The same with an update and a delete among the chained ones, a second round, and fair sharing switched on.
UPDATES_AMONG_THEM = [*(("put", f"w{i}", 1, 0, i, i % 2) for i in range(6)), ("cycle", False), ("cycle", False),
                      ("release",), ("cycle", True), ("put", "w3", 1, 0, 3, 1), ("delete", "w2"), ("cycle", False),
                      ("cycle", True), ("release",), ("cycle", True), ("fair", True), ("cycle", False),
                      ("release",), *(("cycle", True) for _ in range(4))]


@settings(max_examples=1000, deadline=None)
@given(ops)
@example(FIVE_OF_A_SHAPE)
@example(UPDATES_AMONG_THEM)
@example(FED_ONE_UPDATED)
def test_the_queue_offers_what_the_model_says_whatever_the_history(history: list[tuple[object, ...]]) -> None:
    q = ClusterQueueQueue(ClusterQueueName("cq"), QueueingStrategy.BEST_EFFORT_FIFO, RequeuingTimestamp.EVICTION)
    model = Model()
    tries = 0
    for op in history:
        if op[0] == "put":
            _, name, size, priority, created, lq = op
            w = _workload(str(name), int(size), int(priority), int(created), int(lq))
            q.add_or_update(w)
            model.update(w)
        elif op[0] == "delete":
            q.delete(_workload(str(op[1]), 1, 0, 0, 0).key)
            model.delete(str(op[1]))
        elif op[0] == "cycle":
            head = q.pop()
            expected = model.pop()
            assert (head.workload.name if head else None) == expected
            if head is None or expected is None:
                continue
            if model.last_tried[expected] is not ANY:
                assert head.last_tried == model.last_tried[expected]
            if op[1]:  # admitted
                q.forget_in_flight(head.workload.key)
                model.delete(expected)
                continue
            tries += 1
            tried = ({"cpu": tries},)
            assert q.requeue(Entry(head=head, requeue_reason=RequeueReason.NO_FIT, last_tried=tried)) is False
            model.parked.add(expected)
            model.bulk.add(scheduling_shape(model.pending[expected]))
            model.last_tried[expected] = tried
        elif op[0] == "release":
            q.queue_inadmissible()
            model.release()
        else:
            # Admission Fair Sharing with every LocalQueue at the same usage: the same order, other heaps.
            q.set_fair_sharing((lambda lq: 0.5) if op[1] else None)
        assert len(q) == len(model.pending)
        active, parked = q.pending_by_status()
        assert sorted(w.name for w in parked) == sorted(n for n in model.pending if model.parked_now(n))
        assert sorted(w.name for w in active) == sorted(n for n in model.pending if not model.parked_now(n))
        assert sorted(p.workload.name for p in q.page(offset=0, limit=100)) == sorted(model.pending)
