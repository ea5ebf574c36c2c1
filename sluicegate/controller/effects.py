"""What a decision says must happen, as one typed value (issue 14: effects).

A decision function reads the current state and returns :class:`Effects`;
:meth:`sluicegate.controller.commit.Committer.commit` carries them out in the
fixed order: store writes, then cache and queue changes, then commands to
agents, then watch events.  A refused store write stops there: nothing else
of those effects happens.  Pure data: no asyncio, gRPC or SQLite here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sluicegate.controller.nodes import Command
from sluicegate.controller.scheduling.cycle import Entry
from sluicegate.model.names import WorkloadKey
from sluicegate.model.pods import PodRecord
from sluicegate.model.queues import LocalQueueSpec
from sluicegate.model.slotinit import slot_init
from sluicegate.model.workloads import Workload

Ref = tuple[str, str, str]


# ----------------------------------------------------------- cache and queue changes, applied in order


@slot_init
@dataclass(frozen=True, slots=True)
class SetWorkload:
    """The cache holds this state of the workload."""

    workload: Workload


@slot_init
@dataclass(frozen=True, slots=True)
class DropWorkload:
    """The workload is gone: out of the cache and its queue."""

    key: WorkloadKey


@slot_init
@dataclass(frozen=True, slots=True)
class Bind:
    """A pod now runs (or is to run) on its node: its requests count there."""

    key: WorkloadKey
    pod: PodRecord
    now: float


@slot_init
@dataclass(frozen=True, slots=True)
class Unbind:
    """A pod's processes are gone: its node's capacity is free, and the pod no longer has an owner."""

    pod: PodRecord


@slot_init
@dataclass(frozen=True, slots=True)
class RefreshUsage:
    """Reclaimable pods grew: the admission holds less; parked workloads of its tree are offered the rest."""

    workload: Workload


@slot_init
@dataclass(frozen=True, slots=True)
class Release:
    """The workload's quota goes back; parked workloads of its tree are offered it, once.

    ``budget=False``: offered without the release budget (an API change gave the quota back).
    """

    key: WorkloadKey
    budget: bool = True


@slot_init
@dataclass(frozen=True, slots=True)
class NodeCapacityFreed:
    """Workloads parked for lack of a node may fit now."""


@slot_init
@dataclass(frozen=True, slots=True)
class UpdateAdmitted:
    """The admission record holds this state of the workload (when it holds quota)."""

    workload: Workload


@slot_init
@dataclass(frozen=True, slots=True)
class Enqueue:
    """The workload waits for admission again (if it may)."""

    workload: Workload


@slot_init
@dataclass(frozen=True, slots=True)
class Track:
    """Arm the workload's timers for this state."""

    workload: Workload


@slot_init
@dataclass(frozen=True, slots=True)
class Settle:
    """Settle the workload's pods now: a decision of its own (``decide_pods``), committed in place."""

    workload: Workload


@slot_init
@dataclass(frozen=True, slots=True)
class Uncache:
    """A finished workload is gone for good: out of the cache (it waits in no queue)."""

    key: WorkloadKey


@slot_init
@dataclass(frozen=True, slots=True)
class Disown:
    """The pod belongs to no workload any more."""

    uid: str


@slot_init
@dataclass(frozen=True, slots=True)
class Dequeue:
    """The workload leaves its queue (it stays in the cache)."""

    key: WorkloadKey


@slot_init
@dataclass(frozen=True, slots=True)
class ApplyObject:
    """A stored object of another kind than Workload goes into the cache, with what follows from it."""

    obj: Any


@slot_init
@dataclass(frozen=True, slots=True)
class RemoveObject:
    """An object of another kind than Workload is gone from the cache."""

    ref: Ref


@slot_init
@dataclass(frozen=True, slots=True)
class SetLocalQueues:
    """The cache holds these LocalQueues, with the Admission Fair Sharing usage their status records."""

    local_queues: tuple[LocalQueueSpec, ...]


@slot_init
@dataclass(frozen=True, slots=True)
class RefreshQueueActivity:
    """Which queues are active follows the objects the cache holds now."""


@slot_init
@dataclass(frozen=True, slots=True)
class Admit:
    """A scheduling cycle admitted the entry's workload, stored in this state; in order: the cache holds
    it, it holds quota from ``now`` (and its LocalQueue pays Admission Fair Sharing's entry penalty), its
    timers are armed, its head leaves its queue, and its pods count on their nodes and belong to it.
    One operation for what every admission does (a cycle admits up to one per ClusterQueue)."""

    workload: Workload
    entry: Entry
    now: float


@slot_init
@dataclass(frozen=True, slots=True)
class Requeue:
    """The entry's head goes back to its queue, carrying this state of its workload
    (parked when ``quota_bound`` or ``node_bound``); counted when the queue takes it."""

    entry: Entry
    workload: Workload
    quota_bound: bool
    node_bound: bool


@slot_init
@dataclass(frozen=True, slots=True)
class PutBack:
    """The cycle's store write was refused: the head goes back to its queue untried (SKIPPED)."""

    entry: Entry


@slot_init
@dataclass(frozen=True, slots=True)
class Evict:
    """The workload was just marked Evicted (as stored here): stop its pods, or release its quota at
    once where nothing runs; a decision of its own, committed in place."""

    workload: Workload
    now: float


CacheOp = SetWorkload | DropWorkload | Bind | Unbind | RefreshUsage | Release | NodeCapacityFreed | UpdateAdmitted \
    | Enqueue | Track | Settle | Uncache | Disown | Dequeue | ApplyObject | RemoveObject | RefreshQueueActivity \
    | SetLocalQueues \
    | Admit | Requeue | PutBack | Evict


@slot_init
@dataclass(frozen=True, slots=True)
class Effects:
    # Store: objects written and references deleted, in one transaction.
    puts: tuple[Any, ...] = ()
    deletes: tuple[Ref, ...] = ()
    # Cache and queues, in order.
    cache: tuple[CacheOp, ...] = ()
    # Commands to agents, by node name (sent to the nodes connected now), in order.
    agents: tuple[tuple[str, Command], ...] = ()
    # Watch events: (ADDED | MODIFIED | DELETED, workload).
    events: tuple[tuple[str, Workload], ...] = ()
    # Something changed that may let the scheduler admit more.
    wake: bool = False

    def merge(self, other: Effects) -> Effects:
        """Both, this one's first in every part."""
        return Effects(self.puts + other.puts, self.deletes + other.deletes, self.cache + other.cache,
                       self.agents + other.agents, self.events + other.events, self.wake or other.wake)
