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

A head parked for want of quota alone (in a queue that cannot preempt) parks
its shape *quota-bound*.  A release that frees a known amount of quota (a
budget) makes the others pending, and offers the freed quota to the
quota-bound ones in queue order: those it can hold are requeued, the rest stay
parked (deferred) -- until one that was offered quota is tried and does not fit
after all, or is passed over, which puts back every deferred one.  The queue
may park a shape's workloads that the heap has not reached yet (Kueue moves
them all at once), and then offers them quota too, or leave them in the heap to
be tried; the model checks that whatever it kept parked the budget could not
hold at its turn, that the quota it handed out fits the budget, and that every
workload it had parked on its turn was either offered quota or kept parked.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import example, given, settings
from hypothesis import strategies as st

from sluicegate.controller.cache import ReleaseBudget
from sluicegate.controller.queues import ClusterQueueQueue, quota_needs
from sluicegate.controller.scheduling.cycle import Entry, RequeueReason, scheduling_shape
from sluicegate.model.config import RequeuingTimestamp
from sluicegate.model.names import ClusterQueueName, WorkloadKey
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
    # Parked (name: parked for want of quota alone), and the shapes parked with a head (shape: the same).
    parked: dict[str, bool] = field(default_factory=dict)
    bulk: dict[object, bool] = field(default_factory=dict)
    # Requeued because a release's budget could hold them, not tried since; some others were deferred.
    offered: set[str] = field(default_factory=set)
    deferred: bool = False

    def parked_now(self, name: str) -> bool:
        """Parked, or behind a parked shape (which Kueue moves to the parked set at once)."""
        return name in self.parked or scheduling_shape(self.pending[name]) in self.bulk

    def quota_bound(self, name: str) -> bool:
        """Parked now, for want of quota alone."""
        if name in self.parked:
            return self.parked[name]
        return self.bulk.get(scheduling_shape(self.pending[name]), False)

    def order(self) -> list[str]:
        return sorted(self.pending, key=lambda n: _order(self.pending[n]))

    def failed_guess(self) -> None:
        """A workload offered freed quota did not fit after all: the deferred ones are put back."""
        if self.deferred:
            self.parked.clear()
            self.deferred = False

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
        self.parked.pop(w.name, None)

    def delete(self, name: str) -> None:
        self.pending.pop(name, None)
        self.parked.pop(name, None)
        self.offered.discard(name)

    def pop(self) -> str | None:
        while True:
            name = next((n for n in self.order() if n not in self.parked), None)
            if name is None:
                return None
            shape = scheduling_shape(self.pending[name])
            if shape not in self.bulk:
                return name
            self.parked[name] = self.bulk[shape]  # passed over untried
            if name in self.offered:
                self.offered.discard(name)
                self.failed_guess()

    def requeue(self, name: str, quota_bound: bool) -> None:
        """The head ``name`` did not fit: parked, with its shape."""
        if name in self.offered:
            self.offered.discard(name)
            self.failed_guess()
        self.parked[name] = quota_bound
        self.bulk[scheduling_shape(self.pending[name])] = quota_bound

    def release(self) -> None:
        self.parked.clear()
        self.bulk.clear()
        self.deferred = False


ops = st.lists(st.one_of(
    st.tuples(st.just("put"), st.sampled_from(NAMES), st.integers(1, 2), st.sampled_from([0, 10]),
              st.integers(0, 5), st.integers(0, 1)),
    st.tuples(st.just("put"), st.sampled_from(NAMES), st.just(1), st.just(0), st.integers(0, 5), st.integers(0, 1)),
    st.tuples(st.just("delete"), st.sampled_from(NAMES)),
    st.tuples(st.just("cycle"), st.booleans()),
    st.tuples(st.just("cycle"), st.booleans()),
    st.tuples(st.just("release")),
    st.tuples(st.just("fair"), st.booleans()),
    # A head tried and parked for want of quota alone, and a release that frees ``cpu`` of it.
    st.tuples(st.just("cycle"), st.just(False), st.just(True)),
    st.tuples(st.just("cycle"), st.just(False), st.just(True)),
    st.tuples(st.just("budget"), st.integers(0, 5)),
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

# Freed quota offered to w0 (parked on its own), not to w1 (2 cpus); w0 then waits behind w2 and w3, of its
# shape: w2 is tried and does not fit, w3 is passed over, and so must w0 be -- offered quota, never tried --
# which puts back the deferred w1, the next head.
OFFERED_THEN_PASSED_OVER = [("put", "w0", 1, 0, 5, 0), ("cycle", False, True), ("put", "w1", 2, 0, 9, 0),
                            ("cycle", False, True), ("put", "w2", 1, 0, 0, 0), ("put", "w3", 1, 0, 1, 0),
                            ("budget", 1), ("cycle", False, True), ("cycle", False)]
# A shape parked for want of quota (w1, w2 behind w0) and, after a release that could hold none of them,
# parked again by a head that did not fit for another reason (w3): w4, passed over then, is not quota-bound,
# and the next release must bring it back.
PARKED_FOR_TWO_REASONS = [*(("put", f"w{i}", 1, 0, i, 0) for i in range(3)), ("cycle", False, True),
                          ("cycle", False, True), ("budget", 0), ("put", "w3", 1, 0, 3, 0), ("cycle", False),
                          ("put", "w4", 1, 0, 4, 0), ("cycle", False), ("budget", 0), ("cycle", False)]

# w0 tried, w1 and w2 passed over (its shape parked for want of quota): a release that can hold one offers it
# to w0 and defers the other two, which come back when w0, tried again, does not fit after all.
DEFERRED_IN_A_SHAPE = [*(("put", f"w{i}", 1, 0, i, 0) for i in range(3)), ("cycle", False, True),
                       ("cycle", False, True), ("budget", 1), ("cycle", False, True), ("cycle", False),
                       ("cycle", True)]


@settings(max_examples=1000, deadline=None)
@given(ops)
@example(FIVE_OF_A_SHAPE)
@example(UPDATES_AMONG_THEM)
@example(FED_ONE_UPDATED)
@example(OFFERED_THEN_PASSED_OVER)
@example(PARKED_FOR_TWO_REASONS)
@example(DEFERRED_IN_A_SHAPE)
def test_the_queue_offers_what_the_model_says_whatever_the_history(history: list[tuple[object, ...]]) -> None:
    q = ClusterQueueQueue(ClusterQueueName("cq"), QueueingStrategy.BEST_EFFORT_FIFO, RequeuingTimestamp.EVICTION)
    model = Model()
    tries = 0
    fair = False
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
            quota_bound = len(op) > 2 and bool(op[2])
            entry = Entry(head=head, requeue_reason=RequeueReason.NO_FIT, last_tried=tried)
            assert q.requeue(entry, quota_bound=quota_bound) is False
            model.requeue(expected, quota_bound)
            model.last_tried[expected] = tried
        elif op[0] == "release":
            q.queue_inadmissible()
            model.release()
        elif op[0] == "budget":
            _release_with_budget(q, model, int(op[1]), fair)
        else:
            # Admission Fair Sharing with every LocalQueue at the same usage: the same order, other heaps.
            q.set_fair_sharing((lambda lq: 0.5) if op[1] else None)
            fair = bool(op[1])
        assert len(q) == len(model.pending)
        active, parked = q.pending_by_status()
        assert sorted(w.name for w in parked) == sorted(n for n in model.pending if model.parked_now(n))
        assert sorted(w.name for w in active) == sorted(n for n in model.pending if not model.parked_now(n))
        assert sorted(p.workload.name for p in q.page(offset=0, limit=100)) == sorted(model.pending)


def _release_with_budget(q: ClusterQueueQueue, model: Model, cpus: int, fair: bool) -> None:
    """A release that frees ``cpus`` cpus: see the module's docstring for what the queue may do."""
    one_cpu = quota_needs(_workload("x", 1, 0, 0, 0))["cpu"]
    names = {WorkloadKey(f"default/{n}"): n for n in model.pending}
    # What the workloads offered quota by an earlier release still count on, as the queue reckons it (in its
    # order: one offered and passed over since is no longer offered).
    budget = ReleaseBudget({"cpu": cpus * one_cpu}, {"cpu"})
    for key in list(q._offered):
        budget.take(model.pending[names[key]])
    quota_parked = [n for n in model.order() if model.parked_now(n) and model.quota_bound(n)]
    q.queue_inadmissible(ReleaseBudget({"cpu": cpus * one_cpu}, {"cpu"}))
    _, parked = q.pending_by_status()
    kept = {w.name for w in parked}
    offered = {names[k] for k in q._offered if k in names}
    newly = offered - model.offered
    # Only workloads parked for want of quota stay parked or are offered it, and each one parked on its
    # turn (not merely behind its shape) is one or the other.
    assert kept <= set(quota_parked) and newly <= set(quota_parked)
    assert {n for n, bound in model.parked.items() if bound} <= kept | newly
    if fair:
        # One LocalQueue after another: what was handed out fits, and what was kept still does not.
        for n in sorted(newly):
            assert budget.take(model.pending[n]), n
        assert not any(budget.take(model.pending[n]) for n in kept)
    else:
        # In queue order: each offered quota could take it at its turn, each kept could not.
        for n in quota_parked:
            if n in newly:
                assert budget.take(model.pending[n]), n
            elif n in kept:
                assert not budget.take(model.pending[n]), n
    assert q.deferred == bool(kept)
    model.parked = dict.fromkeys(kept, True)
    model.bulk.clear()
    model.offered = offered
    model.deferred = q.deferred
