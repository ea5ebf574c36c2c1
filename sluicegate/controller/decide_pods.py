"""Decisions about pods: what a settlement of a workload's pods means must happen.

Pure: reads the state it is given, returns :class:`~sluicegate.controller.effects.Effects`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from sluicegate.controller.effects import (
    Bind,
    CacheOp,
    DropWorkload,
    Effects,
    Enqueue,
    NodeCapacityFreed,
    RefreshUsage,
    Release,
    SetWorkload,
    Track,
    Unbind,
    UpdateAdmitted,
)
from sluicegate.controller.lifecycle import Settlement
from sluicegate.controller.nodes import Command, ForgetPodCommand, RunPodCommand, StopPodCommand
from sluicegate.model.names import WorkloadKey
from sluicegate.model.workloads import Workload


class State(Protocol):
    """What a pod decision reads (the cache, read-only)."""

    @property
    def workloads(self) -> Mapping[WorkloadKey, Workload]: ...

    def holds_quota(self, key: WorkloadKey) -> bool: ...


def settlement_effects(s: Settlement, state: State, *, now: float, block_admission: bool) -> Effects:
    """Store a settlement, then act on it: stop pods, launch replacements, release, requeue, forget."""
    wl = s.workload
    key = wl.key
    if not (s.stop or s.launch or s.reclaimed or s.release or s.forget or s.requeue):
        # Only a new state to store (nearly every pod report): what the general path below gives for it,
        # made without its lists.
        ops: tuple[CacheOp, ...] = ((SetWorkload(wl), UpdateAdmitted(wl), Track(wl)) if state.holds_quota(key)
                                    else (SetWorkload(wl), Track(wl)))
        return Effects((wl,), (), ops, (), (("MODIFIED", wl),), block_admission)
    cache: list[CacheOp] = []
    agents: list[tuple[str, Command]] = []
    wake = False
    for p in s.stop:
        grace = next((ps.termination_grace_period_seconds for ps in wl.pod_sets if ps.name == p.pod_set), 30)
        agents.append((p.node, StopPodCommand(p.uid, float(grace), "Stopping", p.message)))
    if s.launch:
        specs = {ps.name: ps for ps in wl.pod_sets}
        for p in s.launch:
            cache.append(Bind(key, p, now))
            agents.append((p.node, RunPodCommand(pod=p, workload=wl, pod_set=specs[p.pod_set])))
    holds = state.holds_quota(key)
    if s.reclaimed and holds:
        cache.append(RefreshUsage(wl))
        wake = True
    if s.release:
        # The pods as stored before this settlement: a release may have moved them aside.
        stored = state.workloads.get(key, wl)
        finished_pods = stored.status.pods or wl.status.pods
        cache += [Unbind(p) for p in finished_pods]
        cache.append(Release(key))
        cache.append(NodeCapacityFreed())
        agents += [(p.node, ForgetPodCommand(p.uid)) for p in finished_pods]
        wake = True
        holds = False
    if s.forget:
        cache.append(DropWorkload(key))
        return Effects(deletes=(("Workload", wl.namespace, wl.name),), cache=tuple(cache), agents=tuple(agents),
                       events=(("DELETED", wl),), wake=wake)
    cache.append(SetWorkload(wl))
    if holds:
        cache.append(UpdateAdmitted(wl))
    if s.requeue:
        cache.append(Enqueue(wl))
    cache.append(Track(wl))
    # By position (puts, deletes, cache, agents, events, wake), as above: a pod's end comes this way.
    return Effects((wl,), (), tuple(cache), tuple(agents), (("MODIFIED", wl),), wake or block_admission)


def released_at_once(new: Workload) -> Effects:
    """An evicted workload with no pods (quota-only mode), its quota given back (``lifecycle.released``):
    the quota goes back now and the workload waits again."""
    return Effects(puts=(new,), cache=(SetWorkload(new), Release(new.key), Enqueue(new), Track(new)),
                   events=(("MODIFIED", new),), wake=True)
