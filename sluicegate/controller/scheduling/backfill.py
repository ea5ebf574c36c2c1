"""Backfill with reservations: ClusterQueue ``queueingStrategy: Backfill`` (a sluicegate extension).

The idea is Slurm's backfill scheduler (sched/backfill), expressed on Kueue's
quota tree instead of nodes:

* a Backfill queue pops like BestEffortFIFO, but when its head cannot be
  admitted (no fit, even with preemption considered) the head gets a
  **reservation**: the earliest time its quota need fits, computed from the
  time limits (``maximumExecutionTimeSeconds``) of the workloads holding
  quota anywhere in the cohort tree, and from the reservations made before it;
* a later workload of a Backfill queue in the same cohort tree is admitted
  ahead of a reservation only if every reservation there still fits at its
  start, for its whole duration, with the newcomer running until its own
  limit: it either ends before the reservation starts, or uses only quota
  the reservation does not need.  A workload without a time limit never
  runs ahead of a reservation whose quota (flavor and resource) it uses.

Preemption is not restricted: a preemptor is entitled to what Kueue's
priority and reclaim rules give it, reservation or not.  Queues of the
cohort that are not Backfill are not restricted either (they did not opt
in); only admissions decided here are guaranteed not to delay a reservation.

Pure: everything is computed on the cycle's snapshot and usage overlay.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from sluicegate.controller.scheduling.flavors import Mode
from sluicegate.controller.scheduling.quota import QuotaNode
from sluicegate.controller.scheduling.snapshot import AdmittedWorkload, Snapshot, queue_order_timestamp
from sluicegate.model.names import ClusterQueueName, WorkloadKey
from sluicegate.model.queues import QueueingStrategy
from sluicegate.model.resources import FlavorResource
from sluicegate.model.workloads import Workload

INF = math.inf
# Like Slurm's limit on the jobs a backfill pass plans for: each queue's best-ranked
# blocked workloads hold reservations, so planning costs stay bounded.
MAX_RESERVATIONS_PER_QUEUE = 8


def time_limit(wl: Workload) -> float:
    """Seconds the workload may still run once admitted (``inf``: no limit)."""
    if wl.maximum_execution_time_seconds is None:
        return INF
    return max(0.0, wl.maximum_execution_time_seconds - wl.status.accumulated_past_execution_time_seconds)


def expected_end(a: AdmittedWorkload) -> float:
    """When an admitted workload gives its quota back at the latest (evicted at its limit)."""
    return a.admitted_at + time_limit(a.workload)


@dataclass(frozen=True, slots=True)
class Hold:
    """Quota held over ``[start, end)`` in ClusterQueue ``cq``."""

    cq: ClusterQueueName
    usage: Mapping[FlavorResource, int]
    start: float
    end: float


@dataclass(frozen=True, slots=True)
class Reservation:
    """The quota a blocked head of a Backfill queue is promised from ``start`` on."""

    cq: ClusterQueueName
    workload: WorkloadKey
    need: Mapping[FlavorResource, int]
    duration: float
    start: float
    # The head's place in its queue (priority first, then FIFO time): a
    # workload ordered before it is a new head, not a backfill candidate.
    rank: tuple[int, float, str]

    @property
    def hold(self) -> Hold:
        return Hold(self.cq, self.need, self.start, self.start + self.duration)


def queue_rank(wl: Workload, snapshot: Snapshot) -> tuple[int, float, str]:
    return (-wl.priority, queue_order_timestamp(wl, snapshot.config.wait_for_pods_ready.requeuing_timestamp), wl.uid)


def is_backfill(snapshot: Snapshot, cq: ClusterQueueName) -> bool:
    spec = snapshot.cluster_queues.get(cq)
    return spec is not None and spec.queueing_strategy is QueueingStrategy.BACKFILL


def fmt_time(t: float) -> str:
    """A moment as messages show it (UTC, whole seconds): stable from cycle to cycle, unlike "in N s"."""
    if t == INF:
        return "never"
    return datetime.datetime.fromtimestamp(t, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Timeline:
    """Quota of one cohort tree over time: running holds end at their limits, reservations start later.

    The snapshot's overlay is the usage now (admitted workloads and this
    cycle's admissions); a question about time ``t`` removes the running
    holds ended by then and adds the reservations active then, asks, and puts
    everything back.
    """

    def __init__(self, snapshot: Snapshot, running: Sequence[Hold]) -> None:
        self.snapshot = snapshot
        self.running = list(running)

    @contextmanager
    def at(self, t: float, reserved: Sequence[Hold]) -> Iterator[None]:
        view, node = self.snapshot.view, self.snapshot.node
        gone = [(node(h.cq), h.usage) for h in self.running if h.end <= t]
        active = [h for h in reserved if h.start <= t < h.end]
        with view.simulate_removal(gone):
            for h in active:
                view.add_all(node(h.cq), h.usage)
            try:
                yield
            finally:
                for h in reversed(active):
                    view.remove_all(node(h.cq), h.usage)

    def fits_over(self, node: QuotaNode, need: Mapping[FlavorResource, int], start: float, duration: float,
                  reserved: Sequence[Hold]) -> bool:
        """``need`` fits in ``node`` at every moment of ``[start, start + duration)``.

        Usage only falls between the starts of reservations, so the moments
        to look at are ``start`` and every reservation starting inside.
        """
        end = start + duration
        moments = sorted({start, *(h.start for h in reserved if start < h.start < end)})
        for t in moments:
            with self.at(t, reserved):
                if not self.snapshot.view.fits(node, need):
                    return False
        return True

    def earliest_start(self, node: QuotaNode, need: Mapping[FlavorResource, int], duration: float,
                       reserved: Sequence[Hold]) -> float | None:
        """The first moment from now on that ``need`` fits for ``duration`` (None: never)."""
        now = self.snapshot.now
        ends = {h.end for h in (*self.running, *reserved) if now < h.end < INF}
        for t in sorted({now, *ends}):
            if self.fits_over(node, need, t, duration, reserved):
                return t
        return None


@dataclass(slots=True)
class Verdict:
    admit: bool
    message: str = ""


@dataclass(slots=True)
class BackfillState:
    """The reservations held between cycles (the scheduler keeps one; a cycle updates it).

    In precedence order: each reservation is planned around the ones before
    it; within one queue, better-ranked workloads come first.
    """

    reservations: list[Reservation] = field(default_factory=list)

    def held_by(self, key: WorkloadKey) -> Reservation | None:
        return next((r for r in self.reservations if r.workload == key), None)

    def release(self, key: WorkloadKey) -> None:
        self.reservations = [r for r in self.reservations if r.workload != key]


class Planner:
    """One cycle's view of the reservations: refreshes their starts, judges candidates, makes new ones."""

    def __init__(self, snapshot: Snapshot, state: BackfillState) -> None:
        self.snapshot = snapshot
        self.state = state
        self._timelines: dict[str, Timeline] = {}
        # Refresh every start in precedence order: releases may have come
        # early, quota changed, earlier reservations went.
        kept = [r for r in state.reservations
                if r.cq in snapshot.cluster_queues and r.cq in snapshot.tree.cluster_queues
                and is_backfill(snapshot, r.cq)]
        state.reservations = kept
        self._replan(0)

    def _root(self, cq: ClusterQueueName) -> QuotaNode:
        return self.snapshot.node(cq).root()

    def timeline(self, cq: ClusterQueueName) -> Timeline:
        root = self._root(cq)
        tl = self._timelines.get(root.name)
        if tl is None:
            running: list[Hold] = []
            for node in root.subtree_cluster_queues():
                for a in self.snapshot.admitted_in(ClusterQueueName(node.name)).values():
                    running.append(Hold(a.cluster_queue, a.usage, a.admitted_at, expected_end(a)))
            tl = self._timelines[root.name] = Timeline(self.snapshot, running)
        return tl

    def _before(self, index: int) -> list[Hold]:
        """The holds of the reservations that take precedence over the one at ``index``, in its tree."""
        rs = self.state.reservations
        root = self._root(rs[index].cq) if index < len(rs) else None
        return [r.hold for r in rs[:index] if root is None or self._root(r.cq) is root]

    def _replan(self, first: int) -> None:
        """Recompute the starts from ``first`` on; a reservation that can no longer be promised goes."""
        rs = self.state.reservations
        i = first
        while i < len(rs):
            r = rs[i]
            start = self.timeline(r.cq).earliest_start(self.snapshot.node(r.cq), r.need, r.duration, self._before(i))
            if start is None:
                del rs[i]
                continue
            rs[i] = Reservation(r.cq, r.workload, r.need, r.duration, start, r.rank)
            i += 1

    # -- candidates ------------------------------------------------------------

    def _binding(self, wl: Workload, cq: ClusterQueueName) -> list[int]:
        """Indexes of the reservations a workload of ``cq`` must not delay: every one in its
        cohort tree but its own and those of workloads behind it in its own queue."""
        if not is_backfill(self.snapshot, cq):
            return []
        rank = queue_rank(wl, self.snapshot)
        root = self._root(cq)
        return [i for i, r in enumerate(self.state.reservations)
                if r.workload != wl.key and self._root(r.cq) is root and not (r.cq == cq and r.rank > rank)]

    def judge(self, wl: Workload, cq: ClusterQueueName, mode: Mode, usage: Mapping[FlavorResource, int]) -> Verdict:
        """May this workload, about to be admitted with ``usage``, go ahead of the reservations?"""
        if mode is not Mode.FIT:
            return Verdict(True)  # not admitted by this decision (or a preemption, which is not restricted)
        binding = self._binding(wl, cq)
        if not binding:
            return Verdict(True)
        rs = self.state.reservations
        now = self.snapshot.now
        limit = time_limit(wl)
        end = now + limit
        if limit == INF:
            shared = [rs[i] for i in binding if any(fr in rs[i].need for fr in usage)]
            if shared:
                r = shared[0]
                return Verdict(False, (
                    f"waits behind the reservation of {r.workload} (ClusterQueue {r.cq}, expected to start "
                    f"at {fmt_time(r.start)}): it has no time limit (maximumExecutionTimeSeconds) and needs "
                    "quota the reservation needs"))
        tl = self.timeline(cq)
        view = self.snapshot.view
        node = self.snapshot.node(cq)
        tl.running.append(Hold(cq, usage, now, end))
        view.add_all(node, usage)
        try:
            for i in binding:
                r = rs[i]
                if not tl.fits_over(self.snapshot.node(r.cq), r.need, r.start, r.duration, self._before(i)):
                    return Verdict(False, (
                        f"waits behind the reservation of {r.workload} (ClusterQueue {r.cq}, expected to "
                        f"start at {fmt_time(r.start)}): admitted now it would end at "
                        f"{fmt_time(end)} and needs quota the reservation needs"))
        finally:
            view.remove_all(node, usage)
            tl.running.pop()
        first = min((rs[i] for i in binding), key=lambda r: r.start)
        if end <= first.start:
            why = (f"backfilled: ends by {fmt_time(end)}, before the reservation of {first.workload} "
                   f"(ClusterQueue {first.cq}) at {fmt_time(first.start)}")
        else:
            why = (f"backfilled: uses only quota the reservation of {first.workload} (ClusterQueue {first.cq}, "
                   f"at {fmt_time(first.start)}) does not need")
        return Verdict(True, why)

    # -- after a decision -----------------------------------------------------

    def admitted(self, wl: Workload, cq: ClusterQueueName, usage: Mapping[FlavorResource, int]) -> None:
        """Admitted this cycle (its usage is in the overlay): it runs until its limit."""
        now = self.snapshot.now
        self.timeline(cq).running.append(Hold(cq, usage, now, now + time_limit(wl)))
        self.settled(wl)

    def settled(self, wl: Workload) -> None:
        """Admitted or preempting its way in: its reservation is no longer needed."""
        if self.state.held_by(wl.key) is not None:
            self.state.release(wl.key)

    def blocked(self, wl: Workload, cq: ClusterQueueName, need: Mapping[FlavorResource, int]) -> str:
        """A workload of a Backfill queue cannot be admitted now: reserve for it (the best-ranked
        ``MAX_RESERVATIONS_PER_QUEUE`` of each queue get one); returns what to tell it."""
        if not is_backfill(self.snapshot, cq) or not need:
            return ""
        self.state.release(wl.key)
        rs = self.state.reservations
        rank = queue_rank(wl, self.snapshot)
        own = [i for i, r in enumerate(rs) if r.cq == cq]
        worse = [i for i in own if rs[i].rank > rank]
        if len(own) >= MAX_RESERVATIONS_PER_QUEUE and not worse:
            return ""
        at = worse[0] if worse else len(rs)
        rs.insert(at, Reservation(cq, wl.key, dict(need), time_limit(wl), INF, rank))
        if len(own) >= MAX_RESERVATIONS_PER_QUEUE:
            del rs[worse[-1] + 1]  # the worst-ranked of the queue gives its place up
        self._replan(at)
        mine = self.state.held_by(wl.key)
        if mine is None:
            if time_limit(wl) == INF:
                return ("no reservation: it has no time limit (maximumExecutionTimeSeconds), so it needs the quota "
                        "for good, and no moment from which it stays free can be promised")
            return ("no reservation: the quota it needs is held by workloads without a time limit "
                    "(maximumExecutionTimeSeconds), so no start time can be promised")
        return f"reserved: expected to start at {fmt_time(mine.start)}, when admitted workloads reach their time limits"
