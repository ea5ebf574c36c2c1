"""The controller's Prometheus metrics, with Kueue's names, types and labels.

One :class:`ControllerMetrics` lives as long as the process. Its counters and
histograms (admissions, evictions, preemptions, scheduling attempts) are
counted as things happen: the :class:`~sluicegate.controller.manager.Manager`
it is passed to as ``observer`` tells it of every workload the store takes
(``workload_stored``: the transitions to QuotaReserved, Admitted, Evicted and
Finished are counted there, whichever path caused them), every scheduling
cycle and every preemption a cycle issues. They survive a new Manager (a
follower taking over builds one). Everything else (pending counts, quota,
usage, queue status, shares) is read from the attached Manager at scrape
time, so it never goes stale; with no Manager attached (a follower) those
families are empty.

The series follow Kueue's ``pkg/metrics`` for the ``kueue.x-k8s.io/v1beta2``
era: ``replica_role`` on every kueue_* series (``leader``, ``follower`` or
``standalone``), ``priority_class`` and ``underlying_cause`` where Kueue has
them, LocalQueue series labelled ``name``/``namespace``, resources in their
base unit (cpu in cores, memory in bytes), and an unlimited borrowing or
lending limit as +Inf. ``docs/metrics.md`` lists every series.
"""

from __future__ import annotations

import asyncio
import math
import time
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping, Sequence
from fractions import Fraction
from typing import Final

from prometheus_client.core import CounterMetricFamily, Metric

from sluicegate.common.heapgc import HEAP_GC
from sluicegate.common.metrics import (
    CounterFamily,
    GaugeFamily,
    HistogramFamily,
    Registry,
    ScrapeCollector,
    gauge_family,
    new_registry,
)
from sluicegate.controller.cache import Cache
from sluicegate.controller.manager import Manager
from sluicegate.controller.scheduling.fairsharing import dominant_resource_share
from sluicegate.model.names import ClusterQueueName, WorkloadKey
from sluicegate.model.resources import FlavorResource
from sluicegate.model.workloads import Condition, Workload
from sluicegate.quantity import MILLI_RESOURCES

__all__ = ["ROLES", "ControllerMetrics", "wait_buckets"]

ROLES: Final = ("leader", "follower", "standalone")
"""Kueue's replica_role values: standalone is a controller without leader election."""

# Kueue's names for the reasons where ours still carry v1beta1's (a deactivated
# workload is evicted with reason InactiveWorkload in the stored condition).
_EVICTION_REASON: Final = {"InactiveWorkload": "Deactivated"}

_CQ_STATUSES: Final = ("pending", "active", "terminating")
_LQ_ACTIVE: Final = ("True", "False", "Unknown")
_PENDING: Final = ("active", "inadmissible")

_CQ_RESOURCE: Final = ("cohort", "cluster_queue", "flavor", "resource", "replica_role")
_LQ_RESOURCE: Final = ("name", "namespace", "flavor", "resource", "replica_role")

# (key in _cq_resources' output, family name, what it holds)
_CQ_RESOURCE_FAMILIES: Final = (
    ("reservation", "kueue_cluster_queue_resource_reservation", "quota reserved by workloads"),
    ("usage", "kueue_cluster_queue_resource_usage", "quota used by admitted workloads"),
    ("nominal", "kueue_cluster_queue_nominal_quota", "nominal quota"),
    ("borrowing", "kueue_cluster_queue_borrowing_limit", "borrowing limit (+Inf: unlimited)"),
    ("lending", "kueue_cluster_queue_lending_limit", "lending limit (+Inf: unlimited)"),
)

Samples = list[tuple[Sequence[str], float]]


def wait_buckets(count: int) -> list[float]:
    """Kueue's wait-time buckets: 1s, then 2.5s doubling, ``count`` bounds in all (14: up to ~2.8h)."""
    return [1.0] + [2.5 * 2**i for i in range(count - 1)]


def _base_unit(resource: str, amount: int) -> float:
    """A canonical amount in the resource's base unit (cores for cpu), as Kueue reports quantities."""
    return amount / 1000 if resource in MILLI_RESOURCES else float(amount)


def _queued_at_in(conditions: Mapping[str, Condition], created: float) -> float:
    """When the workload last started waiting: created (at ``created``), or requeued after an eviction or a
    backoff; ``conditions``: its conditions by type."""
    at = created
    for type_ in ("Requeued", "Evicted"):
        cond = conditions.get(type_)
        if cond is not None and cond.status == "True" and cond.last_transition_time > at:
            at = cond.last_transition_time
    return at


# The conditions whose turning true workload_stored counts, each a bit of what one write gained.
_RESERVED, _ADMITTED, _READY, _EVICTED, _FINISHED = 1, 2, 4, 8, 16
_COUNTED: Final = {"QuotaReserved": _RESERVED, "Admitted": _ADMITTED, "PodsReady": _READY, "Evicted": _EVICTED,
                   "Finished": _FINISHED}

# A histogram's numbers (see HistogramFamily.child) and its bucket bounds.
_Child = tuple[list[float], list[float]]


class _Series:
    """The numbers one workload's writes count into, for one ClusterQueue, LocalQueue and priority class.

    A write that counts something looks its series up once (instead of each
    family looking up its label set), and adds to the numbers directly. Each
    group of label sets is taken from its families on first use, as
    ``observe`` and ``inc`` would make them then, so a label set appears in
    the scrape at the same point as when the families were called one by one.
    """

    __slots__ = ("admitted", "cq", "finished", "lq", "ready", "reserved")

    def __init__(self, cq: tuple[str, str, str], lq: tuple[str, str, str, str]) -> None:
        self.cq = cq
        self.lq = lq
        # (wait histogram, counter) per ClusterQueue, then per LocalQueue
        self.reserved: tuple[_Child, list[float], _Child, list[float]] | None = None
        self.admitted: tuple[_Child, list[float], _Child, list[float]] | None = None
        # ready_wait, local_ready_wait, admitted_until_ready, local_admitted_until_ready
        self.ready: tuple[_Child, _Child, _Child, _Child] | None = None
        # finished, local_finished
        self.finished: tuple[list[float], list[float]] | None = None

    def take_reserved(self, m: ControllerMetrics) -> tuple[_Child, list[float], _Child, list[float]]:
        self.reserved = (_child(m.quota_reserved_wait, self.cq), m.quota_reserved.cell(self.cq),
                         _child(m.local_quota_reserved_wait, self.lq), m.local_quota_reserved.cell(self.lq))
        return self.reserved

    def take_admitted(self, m: ControllerMetrics) -> tuple[_Child, list[float], _Child, list[float]]:
        self.admitted = (_child(m.admission_wait, self.cq), m.admitted.cell(self.cq),
                         _child(m.local_admission_wait, self.lq), m.local_admitted.cell(self.lq))
        return self.admitted

    def take_ready(self, m: ControllerMetrics) -> tuple[_Child, _Child, _Child, _Child]:
        self.ready = (_child(m.ready_wait, self.cq), _child(m.local_ready_wait, self.lq),
                      _child(m.admitted_until_ready, self.cq), _child(m.local_admitted_until_ready, self.lq))
        return self.ready

    def take_finished(self, m: ControllerMetrics) -> tuple[list[float], list[float]]:
        self.finished = (m.finished.cell(self.cq), m.local_finished.cell(self.lq))
        return self.finished


def _child(family: HistogramFamily, labels: tuple[str, ...]) -> _Child:
    return family.child(labels), family.bounds


def _count_wait(group: tuple[_Child, list[float], _Child, list[float]], wait: float) -> None:
    """Observe ``wait`` in both histograms of ``group`` and count it in both counters (HistogramFamily.observe
    and CounterFamily.inc, spelt out)."""
    (state, bounds), counter, (local_state, local_bounds), local_counter = group
    state[bisect_left(bounds, wait)] += 1
    state[-2] += wait
    state[-1] += 1
    counter[0] += 1.0
    local_state[bisect_left(local_bounds, wait)] += 1
    local_state[-2] += wait
    local_state[-1] += 1
    local_counter[0] += 1.0


def _count_ready(group: tuple[_Child, _Child, _Child, _Child], since_queued: float, since_admitted: float) -> None:
    """Observe the waits until ready in the four histograms of ``group`` (HistogramFamily.observe, spelt out
    without a loop, which costs more than the observations here)."""
    (state, bounds), (local_state, local_bounds), (since_state, since_bounds), (local_since_state,
                                                                                local_since_bounds) = group
    state[bisect_left(bounds, since_queued)] += 1
    state[-2] += since_queued
    state[-1] += 1
    local_state[bisect_left(local_bounds, since_queued)] += 1
    local_state[-2] += since_queued
    local_state[-1] += 1
    since_state[bisect_left(since_bounds, since_admitted)] += 1
    since_state[-2] += since_admitted
    since_state[-1] += 1
    local_since_state[bisect_left(local_since_bounds, since_admitted)] += 1
    local_since_state[-2] += since_admitted
    local_since_state[-1] += 1


class _Tally:
    """One scrape's counts over the ClusterQueues, and the LocalQueue figures gathered on the way."""

    def __init__(self, local_queues: Iterable[tuple[str, str]]) -> None:
        self.pending: Samples = []
        self.reserving: Samples = []
        self.admitted: Samples = []
        self.status: Samples = []
        self.cq_resources: dict[str, Samples] = {key: [] for key, _, _ in _CQ_RESOURCE_FAMILIES}
        # (namespace, name) -> [active, inadmissible] and [reserving, admitted]
        self.lq_pending: dict[tuple[str, str], list[int]] = {key: [0, 0] for key in local_queues}
        self.lq_reserving: dict[tuple[str, str], list[int]] = {key: [0, 0] for key in self.lq_pending}
        # (namespace, name, flavor/resource) -> [reserved, used by admitted workloads]
        self.lq_usage: dict[tuple[str, str, FlavorResource], list[int]] = {}

    def add_cluster_queue(self, c: Cache, cq: ClusterQueueName, role: str) -> dict[FlavorResource, int]:
        """Count ``cq``'s pending and quota-holding workloads; returns the quota its admitted ones use."""
        q = c.queues.queues.get(cq)
        active, parked = q.pending_by_status() if q is not None else ([], [])
        lq_pending = self.lq_pending
        for index, workloads in enumerate((active, parked)):
            self.pending.append(((cq, _PENDING[index], role), float(len(workloads))))
            for wl in workloads:
                counts = lq_pending.get((wl.namespace, wl.queue_name))
                if counts is not None:
                    counts[index] += 1
        held = c.admitted.get(cq, {})
        self.reserving.append(((cq, role), float(len(held))))
        n_admitted = 0
        used: dict[FlavorResource, int] = {}
        known, lq_reserving, lq_usage = c.workloads, self.lq_reserving, self.lq_usage
        for info in held.values():
            wl = known.get(info.key, info.workload)
            counted_as_admitted = wl.is_admitted  # quota "used" counts every admitted one, finished or not
            is_admitted = counted_as_admitted and not wl.is_finished
            n_admitted += is_admitted
            lq = (wl.namespace, wl.queue_name)
            lq_counts = lq_reserving.get(lq)
            if lq_counts is not None:
                lq_counts[0] += 1
                lq_counts[1] += is_admitted
            for fr, amount in info.usage.items():
                usage = lq_usage.get((*lq, fr))
                if usage is None:
                    usage = lq_usage[(*lq, fr)] = [0, 0]
                usage[0] += amount
                if is_admitted:
                    usage[1] += amount
                if counted_as_admitted:
                    used[fr] = used.get(fr, 0) + amount
        self.admitted.append(((cq, role), float(n_admitted)))
        current = "active" if c.inactive_reason(cq) is None else "pending"
        self.status += [((cq, s, role), 1.0 if s == current else 0.0) for s in _CQ_STATUSES]
        return used


class ControllerMetrics:
    """The controller's registry: built once per process, pointed at the current Manager by :meth:`attach`."""

    def __init__(self, registry: Registry | None = None) -> None:
        self.registry = registry if registry is not None else new_registry()
        self._manager: Manager | None = None
        self._role = "standalone"
        self._epoch = 0
        # Admitted workloads whose pods have not all been ready yet: key -> (when queued, when admitted).
        self._not_ready_yet: dict[WorkloadKey, tuple[float, float]] = {}
        self._gauges: dict[str, GaugeFamily] = {}
        # (cluster queue, local queue name, namespace, priority class) -> its label sets' numbers
        self._series: dict[tuple[str, str, str, str], _Series] = {}
        # The queue families' text made by _prepare for the next render: (manager, role, text).
        self._prepared: tuple[Manager, str, bytes] | None = None
        r = self.registry
        cq = ["cluster_queue", "priority_class", "replica_role"]
        lq = ["name", "namespace", "priority_class", "replica_role"]
        self.admission_attempts = CounterFamily(
            "kueue_admission_attempts_total",
            "Scheduling cycles that had workloads to consider, by result: success when the cycle admitted "
            "at least one workload, inadmissible when it admitted none.",
            ["result", "replica_role"])
        self.admission_attempt_duration = HistogramFamily(
            "kueue_admission_attempt_duration_seconds",
            "How long one scheduling cycle took, store write included, by result (success or inadmissible).",
            ["result", "replica_role"])
        self.quota_reserved = CounterFamily(
            "kueue_quota_reserved_workloads_total", "Workloads that got a quota reservation, per ClusterQueue.",
            cq)
        self.quota_reserved_wait = HistogramFamily(
            "kueue_quota_reserved_wait_time_seconds",
            "Seconds from a workload's creation (or its last requeue) to its quota reservation, per ClusterQueue.",
            cq, buckets=wait_buckets(14))
        self.local_quota_reserved = CounterFamily(
            "kueue_local_queue_quota_reserved_workloads_total",
            "Workloads that got a quota reservation, per LocalQueue.", lq)
        self.local_quota_reserved_wait = HistogramFamily(
            "kueue_local_queue_quota_reserved_wait_time_seconds",
            "Seconds from a workload's creation (or its last requeue) to its quota reservation, per LocalQueue.",
            lq, buckets=wait_buckets(14))
        self.admitted = CounterFamily(
            "kueue_admitted_workloads_total", "Workloads admitted, per ClusterQueue.", cq)
        self.admission_wait = HistogramFamily(
            "kueue_admission_wait_time_seconds",
            "Seconds from a workload's creation (or its last requeue) to its admission, per ClusterQueue.",
            cq, buckets=wait_buckets(16))
        self.local_admitted = CounterFamily(
            "kueue_local_queue_admitted_workloads_total", "Workloads admitted, per LocalQueue.", lq)
        self.local_admission_wait = HistogramFamily(
            "kueue_local_queue_admission_wait_time_seconds",
            "Seconds from a workload's creation (or its last requeue) to its admission, per LocalQueue.",
            lq, buckets=wait_buckets(14))
        self.ready_wait = HistogramFamily(
            "kueue_ready_wait_time_seconds",
            "Seconds from a workload's creation (or its last requeue) until all its pods were first ready, "
            "per ClusterQueue.", cq, buckets=wait_buckets(14))
        self.local_ready_wait = HistogramFamily(
            "kueue_local_queue_ready_wait_time_seconds",
            "Seconds from a workload's creation (or its last requeue) until all its pods were first ready, "
            "per LocalQueue.", lq, buckets=wait_buckets(14))
        self.admitted_until_ready = HistogramFamily(
            "kueue_admitted_until_ready_wait_time_seconds",
            "Seconds from a workload's admission until all its pods were first ready, per ClusterQueue.",
            cq, buckets=wait_buckets(14))
        self.local_admitted_until_ready = HistogramFamily(
            "kueue_local_queue_admitted_until_ready_wait_time_seconds",
            "Seconds from a workload's admission until all its pods were first ready, per LocalQueue.",
            lq, buckets=wait_buckets(14))
        self.evicted = CounterFamily(
            "kueue_evicted_workloads_total",
            "Evictions of workloads that held quota, per ClusterQueue and reason (Preempted, PodsReadyTimeout, "
            "ClusterQueueStopped, LocalQueueStopped, Deactivated, NodeFailures, ...).",
            ["cluster_queue", "reason", "underlying_cause", "priority_class", "replica_role"])
        self.local_evicted = CounterFamily(
            "kueue_local_queue_evicted_workloads_total",
            "Evictions of workloads that held quota, per LocalQueue and reason.",
            ["name", "namespace", "reason", "underlying_cause", "priority_class", "replica_role"])
        self.preemptions = CounterFamily(
            "kueue_preempted_workloads_total",
            "Workloads preempted, per ClusterQueue of the preemptor and reason (InClusterQueue, "
            "InCohortReclamation, InCohortFairSharing, InCohortReclaimWhileBorrowing).",
            ["preempting_cluster_queue", "reason", "replica_role"])
        self.finished = CounterFamily(
            "kueue_finished_workloads_total", "Workloads that finished while holding quota, per ClusterQueue.",
            cq)
        self.local_finished = CounterFamily(
            "kueue_local_queue_finished_workloads_total",
            "Workloads that finished while holding quota, per LocalQueue.", lq)
        self.cycles = CounterFamily(
            "sluicegate_scheduling_cycles_total",
            "Scheduling cycles run by this process (the sum of kueue_admission_attempts_total over results).",
        )
        r.register(ScrapeCollector("controller", self._collect, self._describe))
        self._counted: list[CounterFamily | HistogramFamily] = [
            v for v in vars(self).values() if isinstance(v, CounterFamily | HistogramFamily)]
        r.add_families("controller counters", self._counted)
        r.add_text("controller queues", _family_names("".join(self._manager_families(None))), self._manager_text,
                   prepare=self._prepare)

    # ------------------------------------------------------------ wiring

    @property
    def role(self) -> str:
        return self._role

    def attach(self, manager: Manager | None) -> None:
        """Read the scrape-time series from ``manager`` from now on (None: a follower, they are empty).

        The counting hooks are the Manager's ``observer`` argument: pass this object there.
        """
        self._manager = manager
        self._not_ready_yet.clear()  # a new Manager's admissions are its own
        self._prepared = None

    def set_role(self, role: str, epoch: int) -> None:
        """This process's role (``leader``, ``follower`` or ``standalone``) and leadership epoch."""
        if role not in ROLES:
            raise ValueError(f"role must be one of {', '.join(ROLES)}, got {role!r}")
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            raise ValueError(f"epoch must be a non-negative integer, got {epoch!r}")
        if role != self._role:
            self._series.clear()  # their label sets carry the role
        self._role = role
        self._epoch = epoch

    # ------------------------------------------------------------ hooks (the Manager's observer)

    def workload_stored(self, old: Workload | None, new: Workload) -> None:
        """Count the transitions this write makes: quota reserved, admitted, pods ready, evicted, finished.

        Every write of a workload comes here (four or more per workload), and
        most change no condition that is counted: each state's conditions are
        read once, into a map, instead of scanning them again for every test.
        What is counted goes straight into the numbers of the workload's
        queues' label sets (see :class:`_Series`), which a scrape writes out.
        The loops are spelt out: a comprehension is a call of its own here.
        """
        status = new.status
        conditions = status.conditions
        if old is None:
            admission = status.admission
            if admission is None:
                return  # only a workload that holds (or held) quota changes any of these counters
            old_conditions: tuple[Condition, ...] = ()
        else:
            old_status = old.status
            old_conditions = old_status.conditions
            if old_conditions is conditions:
                return  # every counted transition is a condition turning true
            admission = status.admission or old_status.admission
            if admission is None:
                return
        # The condition of each type that WorkloadStatus.condition finds (the first of its type).
        now: dict[str, Condition] = {}
        for c in reversed(conditions):
            now[c.type] = c
        was: dict[str, Condition] = {}
        for c in reversed(old_conditions):
            was[c.type] = c
        gained = 0
        for type_, c in now.items():
            if c.status == "True" and (bit := _COUNTED.get(type_)) is not None:
                p = was.get(type_)
                if p is None or p.status != "True":
                    gained |= bit
        if not gained:
            return
        pc = new.priority_class[1] if new.priority_class is not None else ""
        series = self._series.get((admission.cluster_queue, new.queue_name, new.namespace, pc))
        if series is None:
            series = self._new_series(admission.cluster_queue, new.queue_name, new.namespace, pc)
        if gained & (_RESERVED | _ADMITTED):
            queued_at = _queued_at_in(was if old is not None else now,
                                      (old if old is not None else new).creation_timestamp)
            if gained & _RESERVED:
                wait = max(0.0, now["QuotaReserved"].last_transition_time - queued_at)
                _count_wait(series.reserved or series.take_reserved(self), wait)
            if gained & _ADMITTED:
                admitted_at = now["Admitted"].last_transition_time
                _count_wait(series.admitted or series.take_admitted(self), max(0.0, admitted_at - queued_at))
                if status.pods:
                    # PodsReady outlives an eviction, so "first ready since this admission" needs remembering.
                    self._not_ready_yet[new.key] = (queued_at, admitted_at)
        if gained & _READY and "Admitted" in now and now["Admitted"].status == "True":
            times = self._not_ready_yet.pop(new.key, None)
            if times is not None:
                ready_at = now["PodsReady"].last_transition_time
                _count_ready(series.ready or series.take_ready(self),
                             max(0.0, ready_at - times[0]), max(0.0, ready_at - times[1]))
        if gained & _EVICTED:
            reason = now["Evicted"].reason
            reason = _EVICTION_REASON.get(reason, reason)
            role = self._role
            self.evicted.inc((admission.cluster_queue, reason, "", pc, role))
            self.local_evicted.inc((new.queue_name, new.namespace, reason, "", pc, role))
            self._not_ready_yet.pop(new.key, None)
        if gained & _FINISHED:
            finished = series.finished or series.take_finished(self)
            finished[0][0] += 1.0
            finished[1][0] += 1.0
            self._not_ready_yet.pop(new.key, None)

    def _new_series(self, cluster_queue: str, queue_name: str, namespace: str, pc: str) -> _Series:
        role = self._role
        series = _Series((cluster_queue, pc, role), (queue_name, namespace, pc, role))
        self._series[(cluster_queue, queue_name, namespace, pc)] = series
        return series

    def admission_attempt(self, *, admitted: bool, seconds: float) -> None:
        result = "success" if admitted else "inadmissible"
        self.admission_attempts.inc((result, self._role))
        self.admission_attempt_duration.observe((result, self._role), seconds)
        self.cycles.inc(())

    def preempted(self, *, preempting_cluster_queue: str, reason: str) -> None:
        self.preemptions.inc((preempting_cluster_queue, reason, self._role))

    # ------------------------------------------------------------ scrape time

    def _describe(self) -> Iterator[Metric]:
        yield from self._process_families()
        yield from self._watch_families(None)

    def _collect(self) -> Iterator[Metric]:
        yield from self._process_families()
        yield from self._watch_families(self._manager)

    def _gauge(self, name: str, documentation: str, labels: Sequence[str], samples: Samples) -> str:
        family = self._gauges.get(name)
        if family is None:
            family = self._gauges[name] = GaugeFamily(name, documentation, labels)
        return family.text(samples)

    async def _prepare(self, slice_seconds: float) -> None:
        """Count the queues and write their families for the coming render in slices of ``slice_seconds``,
        the loop running between.

        Each ClusterQueue is counted in one go, each family written in one
        go; queues read in different slices are read a few milliseconds
        apart, as separate gauges of one scrape may be. A queue removed
        meanwhile is left out (or, if it goes between two families, the
        render reads everything again in one go).
        """
        m, role = self._manager, self._role
        self._prepared = None
        if m is None:
            return
        c = m.cache
        t = _Tally(sorted(c.local_queues))
        deadline = time.perf_counter() + slice_seconds
        for cq in sorted(c.cluster_queues):
            if m is not self._manager or role != self._role:
                return  # a new Manager or role: the render counts afresh
            if cq in c.cluster_queues:
                used = t.add_cluster_queue(c, cq, role)
                self._cq_resources(c, cq, used, t.cq_resources)
            if time.perf_counter() >= deadline:
                await asyncio.sleep(0)
                deadline = time.perf_counter() + slice_seconds
        parts = []
        try:
            for text in self._manager_families(m, t):
                parts.append(text)
                if time.perf_counter() >= deadline:
                    await asyncio.sleep(0)
                    deadline = time.perf_counter() + slice_seconds
                if m is not self._manager or role != self._role:
                    return
        except LookupError:
            return  # a queue went away between two families: the render reads them all in one go
        self._prepared = (m, role, "".join(parts).encode("utf-8"))

    def _manager_text(self) -> bytes:
        prepared, self._prepared = self._prepared, None
        if prepared is not None and prepared[0] is self._manager and prepared[1] == self._role:
            return prepared[2]
        return "".join(self._manager_families(self._manager)).encode("utf-8")

    def _watch_families(self, m: Manager | None) -> Iterator[Metric]:
        w = m.commit.watchers if m is not None else None
        yield gauge_family("sluicegate_watchers", "Open watches of workloads.",
                           (), [((), float(len(w)) if w is not None else 0.0)])
        yield gauge_family("sluicegate_watchers_alive",
                           "Watcher objects not yet freed: open watches and ended ones still being torn down "
                           "(above sluicegate_watchers for long: a leak).",
                           (), [((), float(w.alive) if w is not None else 0.0)])
        yield gauge_family("sluicegate_watch_events_held", "Events held for watchers that have not read them yet.",
                           (), [((), float(w.held) if w is not None else 0.0)])

    def _process_families(self) -> Iterator[Metric]:
        yield gauge_family("sluicegate_controller_leader",
                           "1 while this controller acts on the cluster (leader or standalone), 0 as a follower.",
                           (), [((), 1.0 if self._role != "follower" else 0.0)])
        yield gauge_family("sluicegate_controller_epoch",
                           "The leadership epoch this controller last saw (0 without leader election).",
                           (), [((), float(self._epoch))])
        full = CounterMetricFamily("sluicegate_gc_full_collections",
                                   "Full garbage collections of this process (see common/heapgc.py).",
                                   value=float(HEAP_GC.full_collections))
        seconds = CounterMetricFamily("sluicegate_gc_full_collection_seconds",
                                      "Seconds this process spent in full garbage collections.",
                                      value=HEAP_GC.full_seconds)
        yield full
        yield seconds

    def _manager_families(self, m: Manager | None, counted: _Tally | None = None) -> Iterator[str]:
        """The queue families' text, one family at a time; ``counted``: the queues already counted."""
        role = self._role
        c = m.cache if m is not None else None
        lqs = sorted(c.local_queues) if c is not None else []
        if counted is not None:
            t = counted
        else:
            t = _Tally(lqs)
            if c is not None:
                for cq in sorted(c.cluster_queues):
                    used = t.add_cluster_queue(c, cq, role)
                    self._cq_resources(c, cq, used, t.cq_resources)
        pending, reserving, admitted, status = t.pending, t.reserving, t.admitted, t.status
        lq_pending, lq_reserving, lq_usage, cq_resources = t.lq_pending, t.lq_reserving, t.lq_usage, t.cq_resources

        yield self._gauge("kueue_pending_workloads",
                           "Pending workloads per ClusterQueue: active ones wait for a scheduling cycle, "
                           "inadmissible ones are parked until something that could make them fit changes.",
                           ("cluster_queue", "status", "replica_role"), pending)
        yield self._gauge("kueue_local_queue_pending_workloads",
                           "Pending workloads per LocalQueue, by status (active or inadmissible).",
                           ("name", "namespace", "status", "replica_role"),
                           [((name, ns, _PENDING[i], role), float(n[i]))
                            for (ns, name), n in lq_pending.items() for i in (0, 1)])
        yield self._gauge("kueue_reserving_active_workloads", "Workloads holding quota, per ClusterQueue.",
                           ("cluster_queue", "replica_role"), reserving)
        yield self._gauge("kueue_admitted_active_workloads",
                           "Admitted workloads that have not finished, per ClusterQueue.",
                           ("cluster_queue", "replica_role"), admitted)
        yield self._gauge("kueue_local_queue_reserving_active_workloads", "Workloads holding quota, per LocalQueue.",
                           ("name", "namespace", "replica_role"),
                           [((name, ns, role), float(n[0])) for (ns, name), n in lq_reserving.items()])
        yield self._gauge("kueue_local_queue_admitted_active_workloads",
                           "Admitted workloads that have not finished, per LocalQueue.",
                           ("name", "namespace", "replica_role"),
                           [((name, ns, role), float(n[1])) for (ns, name), n in lq_reserving.items()])
        yield self._gauge("kueue_cluster_queue_status",
                           "1 for the ClusterQueue's current status (pending: cannot admit, e.g. stopped or a "
                           "flavor is missing; active; terminating), 0 for the others.",
                           ("cluster_queue", "status", "replica_role"), status)
        lq_status: Samples = []
        if c is not None:
            for ns, name in lqs:
                current = "True" if c.local_queues[(ns, name)].cluster_queue in c.cluster_queues else "False"
                lq_status += [((name, ns, s, role), 1.0 if s == current else 0.0) for s in _LQ_ACTIVE]
        yield self._gauge("kueue_local_queue_status",
                           "1 for the LocalQueue's Active condition status (True when its ClusterQueue exists), "
                           "0 for the others.", ("name", "namespace", "active", "replica_role"), lq_status)
        for family_key, metric, what in _CQ_RESOURCE_FAMILIES:
            yield self._gauge(metric, f"The ClusterQueue's {what} per flavor and resource "
                                       "(cpu in cores, memory in bytes).", _CQ_RESOURCE, cq_resources[family_key])
        for index, (metric, what) in enumerate((
                ("kueue_local_queue_resource_reservation", "quota reserved by its workloads"),
                ("kueue_local_queue_resource_usage", "quota used by its admitted workloads"))):
            yield self._gauge(metric, f"The LocalQueue's {what} per flavor and resource.", _LQ_RESOURCE,
                               [((name, ns, fr.flavor, fr.resource, role), _base_unit(fr.resource, v[index]))
                                for (ns, name, fr), v in sorted(lq_usage.items())])
        yield from self._shares(m)
        yield self._gauge("kueue_local_queue_admission_fair_sharing_usage",
                           "The LocalQueue's Admission Fair Sharing usage: its resource-weighted decayed consumption "
                           "(entry penalties included) divided by its fair sharing weight.",
                           ("name", "namespace", "cluster_queue", "replica_role"),
                           [((name, ns, str(c.local_queues[(ns, name)].cluster_queue), role),
                             c.afs_usage((ns, name)))
                            for ns, name in lqs if c.orders_by_local_queue(c.local_queues[(ns, name)].cluster_queue)]
                           if c is not None else [])
        yield self._gauge("sluicegate_workloads", "Workloads known to the controller (any state).", (),
                           [((), float(len(c.workloads)))] if c is not None else [])
        yield self._gauge("sluicegate_store_degraded",
                           "1 while the store refuses writes (the controller serves reads only and /readyz is 503).",
                           (), [((), 1.0 if m.store_problem is not None else 0.0)] if m is not None else [])
        nodes = sorted(m.fleet.registry.nodes.values(), key=lambda n: n.name) if m is not None else []
        yield self._gauge("sluicegate_node_ready", "1 while a registered node is Ready, 0 while NotReady.",
                           ("node",), [((n.name,), 1.0 if n.ready else 0.0) for n in nodes])
        yield self._gauge("sluicegate_node_stream_behind",
                           "1 while a node's stream has so many messages waiting that no new pods are placed there "
                           "(its agent reads them, or the controller writes them, slower than they come), else 0.",
                           ("node",), [((n.name,), 1.0 if n.stream_behind else 0.0) for n in nodes])

    def _cq_resources(
            self, c: Cache, cq: ClusterQueueName, used: dict[FlavorResource, int], out: dict[str, Samples]) -> None:
        role = self._role
        spec = c.cluster_queues[cq]
        node = c.tree.cluster_queues.get(cq)
        reserved = node.usage if node is not None else {}
        cohort = spec.cohort or ""
        for rg in spec.resource_groups:
            for fq in rg.flavors:
                for res in rg.covered_resources:
                    fr = FlavorResource(fq.name, res)
                    quota = fq.resources.get(res)
                    labels = (cohort, cq, fq.name, res)
                    out["reservation"].append(((*labels, role), _base_unit(res, reserved.get(fr, 0))))
                    out["usage"].append(((*labels, role), _base_unit(res, used.get(fr, 0))))
                    if quota is None:
                        continue
                    out["nominal"].append(((*labels, role), _base_unit(res, quota.nominal)))
                    out["borrowing"].append(((*labels, role), math.inf if quota.borrowing_limit is None
                                             else _base_unit(res, quota.borrowing_limit)))
                    out["lending"].append(((*labels, role), math.inf if quota.lending_limit is None
                                           else _base_unit(res, quota.lending_limit)))

    def _shares(self, m: Manager | None) -> Iterable[str]:
        role = self._role
        cq_shares: Samples = []
        cohort_shares: Samples = []
        if m is not None and m.cache.config.fair_sharing.enabled:
            tree = m.cache.tree
            for name, node in sorted(tree.cluster_queues.items()):
                spec = m.cache.cluster_queues.get(ClusterQueueName(name))
                cohort = (spec.cohort or "") if spec is not None else ""
                cq_shares.append(((name, cohort, role), _share(dominant_resource_share(tree.live, node).precise())))
            for cohort_name, cohort_node in sorted(tree.cohorts.items()):
                share = _share(dominant_resource_share(tree.live, cohort_node).precise())
                cohort_shares.append(((cohort_name, role), share))
        yield self._gauge("kueue_cluster_queue_weighted_share",
                           "The ClusterQueue's dominant resource share above its nominal quota divided by its "
                           "fair-sharing weight (0: within nominal quota; NaN: zero weight while borrowing). "
                           "Only with fair sharing enabled.", ("cluster_queue", "cohort", "replica_role"), cq_shares)
        yield self._gauge("kueue_cohort_weighted_share",
                           "The Cohort's weighted dominant resource share, as for ClusterQueues.",
                           ("cohort", "replica_role"), cohort_shares)


def _family_names(text: str) -> list[str]:
    return [line.split(" ")[2] for line in text.splitlines() if line.startswith("# TYPE ")]


def _share(value: Fraction | None) -> float:
    """Kueue's precise weighted share: an infinite one (zero weight, borrowing) is NaN."""
    return math.nan if value is None else float(value)
