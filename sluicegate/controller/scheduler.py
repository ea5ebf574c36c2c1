"""The scheduling driver: runs cycles while there may be something to admit, and commits their decisions.

A cycle's decisions (``scheduling.run_cycle``, pure) are turned into the
workloads' new states (:meth:`Scheduler._decided`) and into Effects
(``decide_cycle.cycle_effects``): stored in one write, and only then applied
to the cache, the agents (pods launched) and the watchers by the Committer.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import sys
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol

from sluicegate.common.heapgc import HEAP_GC
from sluicegate.controller.cache import Cache
from sluicegate.controller.commit import Committer
from sluicegate.controller.decide_cycle import cycle_effects, heads_back, status_with, with_status
from sluicegate.controller.fleet import Fleet
from sluicegate.controller.lifecycle import carried_over, skip_done_indexes
from sluicegate.controller.scheduling.backfill import BackfillState, Reservation
from sluicegate.controller.scheduling.cycle import AssignmentMemo, Entry, EntryStatus, Head, Preemptor, run_cycle
from sluicegate.controller.scheduling.fairsharing import order_for
from sluicegate.controller.scheduling.flavors import Assignment, PodSetResult
from sluicegate.controller.scheduling.placement import CyclePlacer, PlacementCache, PodPlacement
from sluicegate.controller.store import StoreError
from sluicegate.model.conditions import set_condition
from sluicegate.model.copying import copier
from sluicegate.model.names import ClusterQueueName, FlavorName, WorkloadKey
from sluicegate.model.queues import QueueingStrategy
from sluicegate.model.topology import TopologyAssignment
from sluicegate.model.workloads import Admission, Condition, PodSet, PodSetAssignment, Workload, WorkloadStatus

log = logging.getLogger(__name__)

# An admitted workload's status: its conditions, admission and pods new, the rest as it was.
_status_placed = copier(WorkloadStatus, ("conditions", "admission", "pods", "last_pods"))

# A pending workload's message is refreshed at most this often when only its
# wording changes (a changed reason is always stored at once).
PENDING_MESSAGE_REFRESH_SECONDS = 5.0
# At most this many distinct admissions are kept for sharing (Scheduler._admission).
ADMISSIONS_KEPT = 10_000
# At most this many ClusterQueues' "Quota reserved in ClusterQueue X" messages are kept (one string each).
RESERVED_MESSAGES_KEPT = 10_000
_ADMITTED_MESSAGE = "The workload is admitted"


@dataclass(slots=True)
class CycleStats:
    heads: int = 0
    admitted: int = 0
    preempting: int = 0
    pending: int = 0
    # Heads put straight back into their heap: the next cycle sees them again.
    requeued: int = 0
    # Victims newly told to go (a preemptor waiting on earlier victims issues none).
    evictions_issued: int = 0
    entries: list[Entry] = field(default_factory=list)

    @property
    def made_progress(self) -> bool:
        """False when another cycle right now would see the same heads and decide the same."""
        return self.heads > self.requeued or self.admitted > 0 or self.evictions_issued > 0


# After a cycle that admitted nothing, the scheduler backs off exponentially
# between these bounds before the next one, as Kueue's scheduler does.
SLOWDOWN_INITIAL_SECONDS = 0.001
SLOWDOWN_MAX_SECONDS = 0.1
# After a cycle that admitted, the loop's other work (creations, agents' reports,
# watches) gets up to this share of the cycle's own time before the next
# cycle: a turn of the loop moves one message per stream, so with only one
# turn between cycles of 1,000 heads (~0.5 s each) a bulk creation stream
# moved one request per cycle and creations, not admissions, set the pace.
IO_SHARE = 1.0
# A turn with less than this much work in it found (almost) nothing to do.
IDLE_TURN_SECONDS = 0.002
# The pause ends early once the loop has been quiet this long (at most this
# share of the pause): a gRPC message reaches the loop from gRPC's poller
# thread, so a stream in full flow (a request answered, the next one read)
# leaves the loop idle for a turn or several between its messages.  Ending at
# the first idle turn let one 256-creation request in per cycle.
QUIET_SECONDS = 0.005
QUIET_SHARE = 0.1
# While quiet, the scheduler waits this long per turn (the loop blocks in its
# selector, so what the poller thread hands over is seen) instead of spinning.
QUIET_STEP_SECONDS = 0.001
# At most this many turns between two cycles.
MAX_TURNS_BETWEEN_CYCLES = 1000
# Kueue's cycles run back to back; a cycle takes one head per ClusterQueue, so
# with few queues it admits one or two and costs little, and its store commit
# (tens of microseconds) was a fair part of it.  After a cycle that admitted,
# the next ones run at once in the same write group, one commit for them all,
# while they keep admitting, up to this long and this many; then the loop's
# other work gets its turns (Pause) for as long as they took together.
CHAIN_SECONDS = 0.002
MAX_CHAINED_CYCLES = 16


@dataclass(slots=True)
class Pause:
    """The loop's other work between two cycles: up to ``IO_SHARE`` of the cycle's time, or until quiet.

    Pure bookkeeping (the caller reads the clock and yields): :meth:`next_wait`
    says how long to yield next, or None when the pause is over;
    :meth:`turn_took` is told how long that yield took.
    """

    deadline: float
    quiet: float
    quiet_since: float
    turns: int = 0
    # The last turn found work: the next yields for one turn only.
    busy: bool = True

    @classmethod
    def after(cls, cycle_seconds: float, now: float) -> Pause:
        budget = cycle_seconds * IO_SHARE
        return cls(deadline=now + budget, quiet=min(QUIET_SECONDS, budget * QUIET_SHARE), quiet_since=now)

    def next_wait(self, now: float) -> float | None:
        """Seconds to yield for (0: one turn of the loop), or None: run the next cycle."""
        if self.turns >= MAX_TURNS_BETWEEN_CYCLES or now >= self.deadline:
            return None
        if self.turns and now - self.quiet_since >= self.quiet:
            return None
        self.turns += 1
        if self.busy:
            return 0.0
        # Quiet so far: wait a step for what another thread may be handing over (less than a step
        # of the window left: over; spinning through turns of nothing would only burn the CPU).
        left = min(self.deadline, self.quiet_since + self.quiet) - now
        return QUIET_STEP_SECONDS if left >= QUIET_STEP_SECONDS else None

    def turn_took(self, waited: float, seconds: float, now: float) -> None:
        """A yield of ``waited`` seconds returned after ``seconds``: the rest was the loop's other work."""
        self.busy = seconds - waited >= IDLE_TURN_SECONDS
        if self.busy:
            self.quiet_since = now


class CycleObserver(Protocol):
    """Told of each scheduling cycle and each preemption it issued (metrics count them)."""

    def admission_attempt(self, *, admitted: bool, seconds: float) -> None: ...

    def preempted(self, *, preempting_cluster_queue: str, reason: str) -> None: ...


class Scheduler:
    def __init__(self, cache: Cache, commit: Committer, fleet: Fleet, *, clock: Callable[[], float],
                 preemptor: Preemptor, placement: bool, observer: CycleObserver | None = None,
                 retry_at: Callable[[WorkloadKey, float], None] | None = None) -> None:
        self.cache = cache
        # Arms a timer that queues a parked workload again at a time (a minimum runtime ending).
        self.retry_at = retry_at
        # Reservations of blocked heads in Backfill queues, kept between cycles.
        self.backfill = BackfillState()
        self.observer = observer
        self.commit = commit
        self.fleet = fleet
        self.clock = clock
        self.preemptor = preemptor
        # False: quota-only mode (workloads are admitted without being bound to nodes or run).
        self.placement = placement
        # Eligible nodes, topology trees and per-node pod fits, kept across cycles (scheduling/placement.py).
        self._placement_cache = PlacementCache.of([])
        # Answers for heads that did not fit, reused while their part of the quota tree is unchanged.
        self.memo = AssignmentMemo()
        self.cycle = 0
        # Cycles by outcome, as Kueue's admission_attempts_total{result} counts them.
        self.cycles_admitting = 0
        self._wake = commit.woken
        self._stopping = False
        # When each pending workload's "why it waits" message was last stored.
        self._pending_written: dict[WorkloadKey, float] = {}
        # Admissions that workloads admitted alike share (see _admission): one object, so the store's
        # encoder (which keeps JSON by identity) writes each once.
        self._admissions: dict[Hashable, Admission] = {}
        # The same by the identity of an assignment's list of pod sets: id -> (the list, queue, admission).
        self._admission_of: dict[int, tuple[list[PodSetResult], ClusterQueueName, Admission]] = {}
        # _pod_sets_to_place's answers for kept assignments: (ids) -> (the assignment, the pod sets, the answer).
        self._to_place: dict[tuple[int, int], tuple[Assignment, tuple[PodSet, ...],
                                                    list[tuple[PodSet, int, dict[str, FlavorName]]]]] = {}
        # "Quota reserved in ClusterQueue X", one string per queue.
        self._reserved_message: dict[ClusterQueueName, str] = {}
        # The Admitted condition of the workloads admitted at one time (a cycle's): one value, one object.
        self._admitted_now: Condition | None = None
        # waitForPodsReady.blockAdmission: admitted workloads whose pods may not all be ready
        # (a superset; admission_blocked drops those that no longer are).
        self._not_ready: set[WorkloadKey] = set()
        self._halted = False

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()

    def halt(self) -> None:
        """Run no more cycles, at once, but keep the task alive until it is cancelled (a leader stepping down)."""
        self._halted = True

    def admission_blocked(self) -> bool:
        """waitForPodsReady.blockAdmission: nothing new is admitted while an admitted workload is not ready."""
        wfpr = self.cache.config.wait_for_pods_ready
        if not (wfpr.enabled and wfpr.block_admission):
            return False
        c = self.cache
        for key in list(self._not_ready):
            cq = c.holder.get(key)
            info = c.admitted.get(cq, {}).get(key) if cq is not None else None
            wl = c.workloads.get(key, info.workload) if info is not None else None
            if wl is not None and wl.status.pods and not wl.status.is_true("PodsReady") and not wl.is_finished:
                return True
            self._not_ready.discard(key)  # ready, finished or gone since it was noted
        return False

    def note_readiness(self, wl: Workload) -> None:
        """An admitted workload was stored: remember it while its pods are not ready (blockAdmission)."""
        if wl.status.pods and not wl.status.is_true("PodsReady") and not wl.is_finished \
                and self.cache.holds_quota(wl.key):
            self._not_ready.add(wl.key)

    def schedule_once(self) -> CycleStats:
        """Run one scheduling cycle and commit its decisions."""
        started = time.perf_counter()
        # A cycle holds its heads, entries and assignments until it ends, then drops them: with the
        # collector on, every young collection inside it walks them all and promotes them, and older
        # generations walk them again.  Off for the cycle (nothing else runs meanwhile), they are freed
        # by reference counting at its end without ever being walked.  What is left alive then is state
        # (the admitted workloads, their records and encodings): frozen, rather than walked and promoted by
        # the collections after (common/heapgc.py).
        collecting = gc.isenabled()
        gc.disable()
        try:
            with self.commit.write_group():
                stats = self._schedule_once()
        finally:
            if collecting:
                HEAP_GC.after_burst()
                gc.enable()
        if stats.heads and self.observer is not None:
            self.observer.admission_attempt(admitted=stats.admitted > 0, seconds=time.perf_counter() - started)
        return stats

    def _schedule_once(self) -> CycleStats:
        c = self.cache
        if self.admission_blocked():
            return CycleStats()
        heads = c.queues.heads()
        stats = CycleStats(heads=len(heads))
        if not heads:
            return stats
        self.cycle += 1
        now = self.clock()
        snapshot = c.snapshot(now, (h.cluster_queue for h in heads))
        placer = None
        if self.placement:
            registry = self.fleet.registry
            views = registry.views()
            placer = CyclePlacer(views, c.flavors, c.topologies, self._placement_cache, registry.take_changes())
        backfill = self._backfill_for(heads)
        before = list(self.backfill.reservations)
        entries = run_cycle(
            heads,
            snapshot,
            preemptor=self.preemptor,
            ordering=order_for(snapshot),
            placer=(lambda e: placer.place(e.key, self._pod_sets_to_place(e))) if placer is not None else None,
            backfill=backfill,
            memo=self.memo,
        )
        if backfill is not None:
            self._reservations_changed(before)
        stats.entries = entries
        decided: dict[WorkloadKey, Workload] = {}
        for e in entries:
            if e.retry_at is not None and self.retry_at is not None and e.status is not EntryStatus.ASSUMED:
                self.retry_at(e.key, e.retry_at)
            new = self._decided(e, now, placer.placements.get(e.key) if placer is not None else None,
                                placer.topology.get(e.key, {}) if placer is not None else {})
            if new is not None:
                decided[e.key] = new
        effects = cycle_effects(c, entries, decided, now, cycle=self.cycle)
        try:
            self.commit.commit(effects.write)
        except Exception as exc:
            if isinstance(exc, StoreError):
                # Committer.write logged the episode's one ERROR already.
                log.warning("cycle %d: %s; every head goes back to its queue", self.cycle, exc)
            else:
                log.exception("cycle %d: store write failed; every head goes back to its queue", self.cycle)
            self.commit.commit(heads_back(entries))
            stats.requeued = stats.heads
            return stats
        for step in effects.steps:
            stats.requeued += self.commit.commit(step)
        if self.observer is not None:
            for cq, reason in effects.preemptions:
                self.observer.preempted(preempting_cluster_queue=cq, reason=reason)
        stats.admitted = effects.admitted
        stats.preempting = effects.preempting
        stats.pending = effects.pending
        stats.evictions_issued = effects.evictions_issued
        if stats.admitted:
            self.cycles_admitting += 1
        return stats

    def _backfill_for(self, heads: list[Head]) -> BackfillState | None:
        """The reservations, checked against the cache, when a Backfill queue has a head (else None)."""
        c = self.cache
        state = self.backfill
        # A holder admitted, deleted or moved meanwhile: the promise goes with it.
        state.reservations = [r for r in state.reservations
                              if r.workload in c.workloads and not c.holds_quota(r.workload)
                              and c.queues.cluster_queue_of(r.workload) == r.cq]
        if any((spec := c.cluster_queues.get(h.cluster_queue)) is not None
               and spec.queueing_strategy is QueueingStrategy.BACKFILL for h in heads):
            return state
        return None

    def _reservations_changed(self, before: list[Reservation]) -> None:
        """A reservation went, changed hands or moved later: workloads parked behind it may be
        admitted now, though no quota was released."""
        after = {r.workload: r for r in self.backfill.reservations}
        moved = [r.cq for r in before if (new := after.get(r.workload)) is None or new.start > r.start]
        if not moved:
            return
        tree = self.cache.tree.cluster_queues
        names = {ClusterQueueName(n.name) for cq in moved if cq in tree
                 for n in tree[cq].root().subtree_cluster_queues()}
        self.cache.queues.queue_inadmissible(sorted(names))

    def _pod_sets_to_place(self, e: Entry) -> list[tuple[PodSet, int, dict[str, FlavorName]]]:
        assert e.assignment is not None
        kept = e.assignment.kept_last_tried is not None
        if kept:
            # A kept assignment (flavors._Plan.fits) is shared by the heads of a shape and never changed,
            # and so are their pod sets: what to place is found by the two identities.
            hit = self._to_place.get((id(e.assignment), id(e.workload.pod_sets)))
            if hit is not None and hit[0] is e.assignment and hit[1] is e.workload.pod_sets:
                return hit[2]
        specs = {ps.name: ps for ps in e.workload.pod_sets}
        out = [
            (specs[r.name], r.count, {res: fc.flavor for res, fc in r.flavors.items()})
            for r in e.assignment.pod_sets
        ]
        if kept:
            if len(self._to_place) >= ADMISSIONS_KEPT:
                self._to_place.clear()
            # Kept with the assignment and pod sets, so their ids stay theirs while the entry lives.
            self._to_place[(id(e.assignment), id(e.workload.pod_sets))] = (e.assignment, e.workload.pod_sets, out)
        return out

    def _decided(self, e: Entry, now: float, placements: list[PodPlacement] | None = None,
                 topology: Mapping[str, TopologyAssignment] | None = None) -> Workload | None:
        """The workload's new state after its cycle, or None if nothing changed."""
        wl = e.workload
        st = wl.status
        if e.status is EntryStatus.ASSUMED:
            assert e.assignment is not None
            self._pending_written.pop(wl.key, None)  # kept only while it waits (50,000 finished would stay)
            admission = self._admission(e.cluster_queue, e.assignment.pod_sets, topology or {})
            conditions = self._admitted_conditions(st, e, now)
            if placements is None:
                return with_status(wl, status_with(st, conditions, admission))
            carried = carried_over(wl)
            if carried:
                placements = skip_done_indexes(carried, placements)
            pods = (*carried, *self.fleet.pod_records(wl, placements))
            # One new status with its pods (replace() on a status made a moment before cost as much again).
            return with_status(wl, _status_placed(st, conditions, admission, pods, ()))
        message = e.message or "Workload is waiting for quota"
        old = st.condition("QuotaReserved")
        if old is not None and old.status == "False" and old.reason == "Pending":
            if old.message == message:
                return None
            # Only the wording changed ("2 more needed" -> "1 more needed"): refresh it
            # at most every few seconds instead of writing on every attempt.
            if now - self._pending_written.get(wl.key, 0.0) < PENDING_MESSAGE_REFRESH_SECONDS:
                return None
        self._pending_written[wl.key] = now
        conds = set_condition(st.conditions, type_="QuotaReserved", status=False, reason="Pending", message=message,
                              now=now)
        return with_status(wl, status_with(st, conds, st.admission))

    def _admitted_conditions(self, st: WorkloadStatus, e: Entry, now: float) -> tuple[Condition, ...]:
        """The conditions of a workload whose quota this cycle reserved: QuotaReserved and Admitted true,
        Evicted and Preempted (if true) false."""
        cq = e.cluster_queue
        reserved = self._reserved_message.get(cq)
        if reserved is None:
            if len(self._reserved_message) >= RESERVED_MESSAGES_KEPT:
                self._reserved_message.clear()
            reserved = self._reserved_message[cq] = sys.intern(f"Quota reserved in ClusterQueue {cq}")
        if e.backfill_note:
            reserved = f"{reserved}; {e.backfill_note}"
        elif not st.conditions:
            # Nothing happened to it before (the usual head): both conditions are new, and the
            # Admitted one is the same value for every workload this cycle admits, so it is one object.
            admitted = self._admitted_now
            if admitted is None or admitted.last_transition_time != now:
                admitted = self._admitted_now = Condition("Admitted", "True", "Admitted", _ADMITTED_MESSAGE, now)
            return (Condition("QuotaReserved", "True", "QuotaReserved", reserved, now), admitted)
        conds = set_condition(st.conditions, type_="QuotaReserved", status=True, reason="QuotaReserved",
                              message=reserved, now=now)
        conds = set_condition(conds, type_="Admitted", status=True, reason="Admitted",
                              message=_ADMITTED_MESSAGE, now=now)
        for t in ("Evicted", "Preempted"):
            old = st.condition(t)
            if old is not None and old.is_true:
                conds = set_condition(conds, type_=t, status=False, reason="QuotaReserved",
                                      message=f"Previously: {old.message}", now=now)
        return conds

    def _admission(self, cq: ClusterQueueName, pod_sets: list[PodSetResult],
                   topology: Mapping[str, TopologyAssignment]) -> Admission:
        """The admission for these assignments: one object for every workload admitted alike (same queue,
        pod sets, counts, flavors and requests), unless it carries a topology assignment of its own."""
        key: Hashable = None
        if not topology:
            # A kept assignment (shared by the heads of a shape, see flavors._Plan.fits) is one list of pod
            # sets: its admission is found by that list's identity, without making the key below.
            hit = self._admission_of.get(id(pod_sets))
            if hit is not None and hit[0] is pod_sets and hit[1] == cq:
                return hit[2]
            key = (cq, tuple([(ps.name, ps.count,
                               tuple([(r, fc.flavor, ps.requests[r]) for r, fc in ps.flavors.items()]))
                              for ps in pod_sets]))
            known = self._admissions.get(key)
            if known is not None:
                if len(self._admission_of) >= ADMISSIONS_KEPT:
                    self._admission_of.clear()
                self._admission_of[id(pod_sets)] = (pod_sets, cq, known)
                return known
        admission = Admission(
            cluster_queue=cq,
            pod_set_assignments=tuple(
                PodSetAssignment(
                    name=ps.name,
                    flavors={r: fc.flavor for r, fc in ps.flavors.items()},
                    resource_usage={r: ps.requests[r] for r in ps.flavors},
                    count=ps.count,
                    topology_assignment=topology.get(ps.name),
                )
                for ps in pod_sets
            ),
        )
        if key is not None:
            if len(self._admissions) >= ADMISSIONS_KEPT:
                self._admissions.clear()
            self._admissions[key] = admission
            if len(self._admission_of) >= ADMISSIONS_KEPT:
                self._admission_of.clear()
            # The list is kept with its answer, so its id stays its own while the entry lives.
            self._admission_of[id(pod_sets)] = (pod_sets, cq, admission)
        return admission

    async def run(self) -> None:
        """Run cycles whenever there may be something to admit."""
        loop = asyncio.get_running_loop()
        while not self._stopping:
            await self._wake.wait()
            self._wake.clear()
            backoff = 0.0
            while self.cache.queues.has_heads() and not self._halted:
                if self.commit.store_problem is not None:
                    break  # degraded: decisions could not be stored; recovery wakes us
                started = loop.time()
                try:
                    stats = self._chained_cycles(loop, started)
                except StoreError:
                    break  # the cycle's commit failed (logged once); the store redoes it on recovery
                if not stats.made_progress:
                    # Nothing changed: wait for an event (quota released, new
                    # workload, queue changed) instead of spinning on the same heads.
                    break
                if stats.admitted:
                    # Kueue's KeepGoing: a cycle admits one head per ClusterQueue,
                    # so the next one runs at once, after the loop's other work
                    # has had up to the cycle's own time (_turns_between_cycles).
                    backoff = 0.0
                    await self._turns_between_cycles(loop, loop.time() - started)
                else:
                    # Kueue's SlowDown: heads went back (say, a preemptor waiting
                    # for its victims to exit) but nothing was admitted; retrying
                    # at once would only burn the CPU the victims' exits need.
                    # Unlike Kueue's, the pause ends early when something that can
                    # change a decision happens (quota released, a new workload),
                    # so freed quota is not left idle for the rest of it.
                    backoff = min(max(backoff * 2, SLOWDOWN_INITIAL_SECONDS), SLOWDOWN_MAX_SECONDS)
                    self._wake.clear()
                    try:
                        await asyncio.wait_for(self._wake.wait(), backoff)
                    except TimeoutError:
                        pass


    def _chained_cycles(self, loop: asyncio.AbstractEventLoop, started: float) -> CycleStats:
        """A cycle, then more at once while each admits (see CHAIN_SECONDS), in one write group.

        Nothing else runs between them, as between Kueue's back-to-back cycles;
        the stats are the last cycle's, which says whether to go on.
        """
        with self.commit.write_group():
            stats = self.schedule_once()
            chained = 1
            while (stats.admitted and chained < MAX_CHAINED_CYCLES and loop.time() - started < CHAIN_SECONDS
                   and not self._halted and self.commit.store_problem is None and self.cache.queues.has_heads()):
                stats = self.schedule_once()
                chained += 1
        return stats

    @staticmethod
    async def _turns_between_cycles(loop: asyncio.AbstractEventLoop, cycle_seconds: float) -> None:
        """Let the loop's other work run between two cycles, for up to the cycle's own time (see Pause).

        At least one turn; more while the loop keeps finding work (a bulk
        creation, a burst of reports), so the streams progress in proportion
        to the scheduler's work instead of one message per cycle.
        """
        pause = Pause.after(cycle_seconds, loop.time())
        while (wait := pause.next_wait(loop.time())) is not None:
            turn = loop.time()
            await asyncio.sleep(wait)
            now = loop.time()
            pause.turn_took(wait, now - turn, now)


def replace_entry_workload(e: Entry, wl: Workload) -> Entry:
    """The entry, carrying the workload as the cycle left it (so the queue keeps the new status)."""
    if e.workload is not wl:
        e.head = replace(e.head, workload=wl)
    return e

