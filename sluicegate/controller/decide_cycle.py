"""Decisions of a scheduling cycle: what its entries' outcomes mean must happen.

Pure: reads the cache, returns :class:`~sluicegate.controller.effects.Effects`
(the scheduler commits them: the store write first, then the steps in order).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from sluicegate.controller.cache import Cache
from sluicegate.controller.effects import (
    Admit,
    CacheOp,
    Effects,
    Evict,
    PutBack,
    Requeue,
    SetWorkload,
)
from sluicegate.controller.lifecycle import preempted
from sluicegate.controller.nodes import Command, RunPodCommand
from sluicegate.controller.scheduling.cycle import Entry, EntryStatus, RequeueReason
from sluicegate.model.copying import copier
from sluicegate.model.names import WorkloadKey
from sluicegate.model.pods import PENDING
from sluicegate.model.workloads import Admission, Condition, Workload, WorkloadStatus

log = logging.getLogger("sluicegate.controller.scheduler")

_NO_FIT = (RequeueReason.NO_FIT, RequeueReason.PREEMPTION_NO_CANDIDATES)

_workload_with_status = copier(Workload, ("status",))
_status_with = copier(WorkloadStatus, ("conditions", "admission"))


def with_status(wl: Workload, status: WorkloadStatus) -> Workload:
    """``dataclasses.replace(wl, status=status)``: the same value, made by copying the fields.

    A cycle makes one per workload it admits or marks pending, and the generic
    ``replace`` (fields looked up by name, keyword arguments, ``__init__`` and
    ``__post_init__`` run again) cost more than the rest of the new state.  Only
    the status changes, so the key derived from namespace and name is copied too.
    """
    return _workload_with_status(wl, status)  # type: ignore[no-any-return]


def status_with(st: WorkloadStatus, conditions: tuple[Condition, ...],
                admission: Admission | None) -> WorkloadStatus:
    """``dataclasses.replace(st, conditions=conditions, admission=admission)``, made as ``with_status`` is."""
    return _status_with(st, conditions, admission)  # type: ignore[no-any-return]


@dataclass(slots=True)
class CycleEffects:
    """A cycle's decisions: its one store write, then the steps that follow it, in order."""

    write: Effects
    # Usually one; a step ends before an eviction (a decision committed in place, with its own
    # commands and events) when commands or events came before it, so they still go out first.
    steps: list[Effects] = field(default_factory=list)
    admitted: int = 0
    preempting: int = 0
    pending: int = 0
    # Victims newly told to go (a preemptor waiting on earlier victims issues none).
    evictions_issued: int = 0
    # (preempting ClusterQueue, reason) for each of them, as Kueue's preempted_workloads_total counts them.
    preemptions: list[tuple[str, str]] = field(default_factory=list)


def cycle_effects(c: Cache, entries: Sequence[Entry], decided: Mapping[WorkloadKey, Workload], now: float,
                  *, cycle: int) -> CycleEffects:
    """What the cycle's entries mean: admissions (with their pods launched), requeues and parking,
    preemptions. ``decided``: each entry's workload as the cycle leaves it, where it changed."""
    out = CycleEffects(write=Effects(puts=tuple(decided.values())))
    cache: list[CacheOp] = []
    agents: list[tuple[str, Command]] = []
    events: list[tuple[str, Workload]] = []
    evicting: set[WorkloadKey] = set()
    workloads = c.workloads
    debug = log.isEnabledFor(logging.DEBUG)
    for e in entries:
        key = e.key
        wl = decided.get(key, e.workload)
        if e.status is EntryStatus.ASSUMED:
            cache.append(Admit(wl, e, now))
            if wl.status.pods:
                specs = {ps.name: ps for ps in wl.pod_sets}
                agents += [(p.node, RunPodCommand(pod=p, workload=wl, pod_set=specs[p.pod_set]))
                           for p in wl.status.pods if p.phase == PENDING]
            out.admitted += 1
            log.info("cycle %d: workload %s admitted by ClusterQueue %s", cycle, key, e.cluster_queue)
        else:
            if debug:
                log.debug("cycle %d: workload %s not admitted (%s, %s): %s", cycle, key, e.status.name,
                          e.requeue_reason.name if e.requeue_reason else "-", e.message)
            if key in workloads:
                cache.append(SetWorkload(wl))
                cache.append(Requeue(e, wl, e.requeue_reason in _NO_FIT and c.quota_bound(e.cluster_queue),
                                     e.requeue_reason is RequeueReason.NO_PLACEMENT))
            if e.status is EntryStatus.PREEMPTING:
                out.preempting += 1
                for t in e.targets:
                    # Each victim once: the quota comes back when its pods exit, and a later
                    # cycle admits the preemptor once it fits.
                    victim = workloads.get(t.victim.key)
                    if victim is None or victim.key in evicting or victim.status.is_true("Evicted") \
                            or not c.holds_quota(victim.key):
                        continue
                    evicting.add(victim.key)
                    out.evictions_issued += 1
                    out.preemptions.append((e.cluster_queue, str(t.reason)))
                    log.info("cycle %d: workload %s preempts %s (%s)", cycle, key, victim.key, t.reason)
                    if agents or events:
                        out.steps.append(Effects(cache=tuple(cache), agents=tuple(agents), events=tuple(events)))
                        cache, agents, events = [], [], []
                    cache.append(Evict(preempted(victim, reason=t.reason, preemptor=e.workload,
                                                 preemptor_cq=e.cluster_queue, now=now), now))
            else:
                out.pending += 1
        if key in decided:
            events.append(("MODIFIED", wl))
    out.steps.append(Effects(cache=tuple(cache), agents=tuple(agents), events=tuple(events)))
    return out


def heads_back(entries: Sequence[Entry]) -> Effects:
    """The cycle's store write was refused: every head goes back to its queue, untried."""
    return Effects(cache=tuple(PutBack(e) for e in entries))
