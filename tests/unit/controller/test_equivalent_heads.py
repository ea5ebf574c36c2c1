"""A cycle's work follows what changed: heads equivalent to one that did not fit are not tried.

Kueue's semantics, read from its sources:

- ``pkg/cache/queue/cluster_queue.go`` (``requeueIfNotPresent``,
  ``handleInadmissibleHash``, ``PushOrUpdate``): under BestEffortFIFO, a head
  parked for NoFit or PreemptionNoCandidates moves every pending workload of
  the same scheduling hash (``computeSchedulingHash`` in
  ``pkg/workload/workload.go``: pod sets' shape, counts, requests, minCount,
  topology request, and the priority) to the inadmissible set, and a new
  arrival of that hash goes straight there; StrictFIFO never does this.  The
  feature gate SchedulingEquivalenceHashing is on by default since v0.18.
- ``pkg/cache/queue/inadmissible_workloads.go`` (``queueInadmissibleWorkloads``):
  a release of parked workloads (a workload in the cohort finished or was
  deleted, quota changed) forgets those hashes, so the released ones are
  judged afresh.
- ``pkg/scheduler/scheduler.go`` (``requeueAndUpdate``) patches the status of
  a head that was tried and not admitted only when
  ``UnsetQuotaReservationWithCondition`` reports a change: an unchanged
  Pending condition is not written again.  Workloads moved in bulk are not
  tried, so nothing is written for them.
"""

from __future__ import annotations

import json

from sluicegate.controller.manager import Manager
from sluicegate.controller.queues import ClusterQueueQueue
from sluicegate.controller.scheduling.cycle import Entry, RequeueReason
from sluicegate.manifest.encode import encode
from sluicegate.manifest.loader import parse_text
from sluicegate.model.config import RequeuingTimestamp
from sluicegate.model.names import ClusterQueueName
from sluicegate.model.queues import QueueingStrategy
from tests.builders import pod_set as podset
from tests.builders import workload as wl

from .test_manager import QUEUES, manager, settle, states, workload

# test_manager's queue, flavor and LocalQueue again, as ClusterQueue "cq2" with LocalQueue "lq2".
SECOND_QUEUE = (QUEUES % {"strategy": "BestEffortFIFO"}).replace("{name: cq}", "{name: cq2}").replace(
    "clusterQueue: cq}", "clusterQueue: cq2}").replace("{name: lq,", "{name: lq2,")


def _version(m: Manager, name: str) -> int:
    return m.versions[("Workload", "default", name)]


def _condition(m: Manager, name: str) -> tuple[str, str] | None:
    c = m.get_workload("default", name).status.condition("QuotaReserved")
    return None if c is None else (c.status, c.reason)


def _fill(m: Manager, n: int) -> None:
    for i in range(n):
        m.create_workload(workload(f"fill-{i}", "1"))
    settle(m)
    assert set(states(m, [f"fill-{i}" for i in range(n)]).values()) == {"Admitted"}


def test_a_head_that_does_not_fit_parks_its_equivalents_untried_and_unwritten() -> None:
    m = manager("BestEffortFIFO")
    _fill(m, 4)  # the queue's whole nominal quota (4 cpus)
    names = [f"w{i}" for i in range(6)]
    for n in names:
        m.create_workload(workload(n, "1"))
    created = {n: _version(m, n) for n in names}
    settle(m)
    # The first was tried and says why it waits; the five like it were parked with it, untried:
    # no condition, not one store write since their creation.
    assert _condition(m, "w0") == ("False", "Pending")
    assert _version(m, "w0") > created["w0"]
    assert {n: _condition(m, n) for n in names[1:]} == dict.fromkeys(names[1:])
    assert {n: _version(m, n) for n in names[1:]} == {n: created[n] for n in names[1:]}
    q = m.cache.queues.queues[ClusterQueueName("cq")]
    assert (q.bulk_parked, q.has_heads, len(q)) == (5, False, 6)
    assert m.cache.queues.pending_count(ClusterQueueName("cq")) == 6

    # A workload of another shape or priority is still tried: only the equivalents are passed over.
    m.create_workload(workload("wide", "2"))
    m.create_workload(workload("urgent", "1", priority=9))
    settle(m)
    assert _condition(m, "wide") == ("False", "Pending")
    assert _condition(m, "urgent") == ("False", "Pending")

    # A workload of the parked shape arriving now is parked at once, as Kueue's PushOrUpdate does.
    m.create_workload(workload("late", "1"))
    settle(m)
    assert _condition(m, "late") is None
    assert q.bulk_parked == 6

    # A workload in the queue's tree finished (here: deleted), freeing one cpu: the parked are released
    # and the first of them in queue order (priority, then age) is admitted; the rest wait, unwritten.
    assert m.delete_workload("default", "fill-0")
    settle(m)
    assert states(m, ["urgent"]) == {"urgent": "Admitted"}
    assert all(_version(m, n) == created[n] for n in names[1:])
    assert m.delete_workload("default", "fill-1")
    settle(m)
    assert states(m, ["w0", "w1"]) == {"w0": "Admitted", "w1": "Pending"}


def test_strict_fifo_never_passes_over_equivalent_heads() -> None:
    m = manager("StrictFIFO")
    _fill(m, 4)
    for i in range(3):
        m.create_workload(workload(f"w{i}", "1"))
    settle(m)
    q = m.cache.queues.queues[ClusterQueueName("cq")]
    assert q.bulk_parked == 0
    # The head blocks the queue and the others behind it were never tried.
    assert _condition(m, "w0") == ("False", "Pending")
    assert (_condition(m, "w1"), _condition(m, "w2")) == (None, None)


def test_an_unchanged_pending_condition_is_not_written_again() -> None:
    """requeueAndUpdate writes only when the condition changes: a head tried again with the same answer
    costs no store write and keeps its resourceVersion."""
    m = manager("BestEffortFIFO")
    _fill(m, 4)
    m.create_workload(workload("w", "1"))
    settle(m)
    first = m.get_workload("default", "w").status.condition("QuotaReserved")
    assert first is not None and first.reason == "Pending"
    version = _version(m, "w")
    # A cpu is freed and offered to "w", but a higher-priority arrival takes it first: "w" is tried again
    # and gets the answer it already shows.
    assert m.delete_workload("default", "fill-0")
    m.create_workload(workload("vip", "1", priority=9))
    stats = [m.schedule_once() for _ in range(3)]
    assert any(s.pending for s in stats), "w was not tried again"
    assert states(m, ["vip", "w"]) == {"vip": "Admitted", "w": "Pending"}
    assert m.get_workload("default", "w").status.condition("QuotaReserved") == first
    assert _version(m, "w") == version


def _queue(strategy: QueueingStrategy) -> ClusterQueueQueue:
    return ClusterQueueQueue(ClusterQueueName("a"), strategy, RequeuingTimestamp.EVICTION)


def test_only_no_fit_reasons_without_a_retry_time_park_the_shape() -> None:
    for reason, retry_at, strategy, parks in [
        (RequeueReason.NO_FIT, None, QueueingStrategy.BEST_EFFORT_FIFO, True),
        (RequeueReason.PREEMPTION_NO_CANDIDATES, None, QueueingStrategy.BEST_EFFORT_FIFO, True),
        (RequeueReason.NO_PLACEMENT, None, QueueingStrategy.BEST_EFFORT_FIFO, False),
        (RequeueReason.NAMESPACE_MISMATCH, None, QueueingStrategy.BEST_EFFORT_FIFO, False),
        # A minimum runtime's end re-queues the head by a timer; its equivalents would have none.
        (RequeueReason.PREEMPTION_NO_CANDIDATES, 5.0, QueueingStrategy.BEST_EFFORT_FIFO, False),
        (RequeueReason.NO_FIT, None, QueueingStrategy.STRICT_FIFO, False),
    ]:
        q = _queue(strategy)
        for i in range(3):
            q.add_or_update(wl(f"w{i}", podset(cpu="1"), created=i))
        q.add_or_update(wl("other", podset(cpu="2"), created=9))
        head = q.pop()
        assert head is not None and head.workload.name == "w0"
        q.requeue(Entry(head=head, requeue_reason=reason, retry_at=retry_at), quota_bound=True)
        nxt = q.pop()
        assert nxt is not None
        expected = "other" if parks else ("w0" if strategy is QueueingStrategy.STRICT_FIFO else "w1")
        assert (reason, strategy, nxt.workload.name) == (reason, strategy, expected)


def test_a_release_forgets_parked_shapes_and_metrics_count_the_passed_over_as_inadmissible() -> None:
    q = _queue(QueueingStrategy.BEST_EFFORT_FIFO)
    for i in range(3):
        q.add_or_update(wl(f"w{i}", podset(cpu="1"), created=i))
    head = q.pop()
    assert head is not None
    q.requeue(Entry(head=head, requeue_reason=RequeueReason.NO_FIT), quota_bound=True)
    # Not yet popped, w1 and w2 are parked in all but name: counted as Kueue counts them.
    active, parked = q.pending_by_status()
    assert ([w.name for w in active], sorted(w.name for w in parked)) == ([], ["w0", "w1", "w2"])
    assert q.pop() is None and q.bulk_parked == 2
    q.queue_inadmissible()
    assert [h.workload.name for h in iter(q.pop, None)] == ["w0", "w1", "w2"]


def test_workloads_admitted_alike_share_their_admission_and_store_what_unshared_ones_would() -> None:
    """Workloads admitted alike share one admission value, so the encoder, which keeps JSON by
    identity, writes it once; the stored documents are unchanged."""
    m = manager("BestEffortFIFO")
    m.apply(parse_text(SECOND_QUEUE, "q2.yaml"))
    for n in ("a", "b"):
        m.create_workload(workload(n, "1"))
        m.create_workload(workload(n + "2", "1", queue="lq2"))
    settle(m)
    a, b, a2 = (m.get_workload("default", n) for n in ("a", "b", "a2"))
    assert a.status.admission is not None and a.status.admission is b.status.admission
    assert a2.status.admission is not None and a2.status.admission.cluster_queue == "cq2"
    stored = {o.name: json.loads(o.body) for o in m.store.load() if o.kind == "Workload"}
    for w in (a, b, a2):
        assert stored[w.name] == json.loads(json.dumps(encode(w)))
