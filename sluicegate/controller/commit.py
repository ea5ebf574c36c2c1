"""The one place that carries out decisions: store, then cache, then agents, then watchers.

The :class:`Committer` owns the store and everything that must follow it
exactly: resource versions, the encoded bytes of what was written (reused
for replies and watch events), the watchers, the write groups and the
degraded mode while the store refuses writes.  Decisions write through
:meth:`Committer.write` before anything else changes: a refused write raises,
so nothing that follows it (cache, agents, watchers) happens.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, Protocol

from sluicegate.controller.cache import Cache
from sluicegate.controller.effects import (
    Admit,
    ApplyObject,
    Bind,
    Dequeue,
    Disown,
    DropWorkload,
    Effects,
    Enqueue,
    Evict,
    NodeCapacityFreed,
    PutBack,
    RefreshQueueActivity,
    RefreshUsage,
    Release,
    RemoveObject,
    Requeue,
    SetLocalQueues,
    Settle,
    SetWorkload,
    Track,
    Unbind,
    Uncache,
    UpdateAdmitted,
)
from sluicegate.controller.nodes import Command
from sluicegate.controller.objects import ref_of
from sluicegate.controller.scheduling.cycle import EntryStatus
from sluicegate.controller.store import Delete, Fenced, Put, Store, StoreError
from sluicegate.controller.watch import Watchers, WatchEvent
from sluicegate.manifest.encode import EncodedObject, encode_json
from sluicegate.model.names import WorkloadKey
from sluicegate.model.pods import PodRecord
from sluicegate.model.workloads import Workload

log = logging.getLogger(__name__)

Obj = Any  # one of the decoded model objects
Ref = tuple[str, str, str]

# Encoded objects remembered for replies and watch events (see Committer.encoded).
# A write and the replies/events about it come within one synchronous call,
# so this must cover the largest batch one write holds (a cycle's heads: at
# most one per ClusterQueue, 1,000 in Kueue's large-scale test); beyond that
# it only saves re-encoding for Get and List.  They are kept in two
# generations of this many objects: writes go into the current one, which
# once full becomes the previous one (the one before is dropped).  So the
# last ENCODED_GENERATION objects written are always there, at most twice
# that many are held (a running workload's JSON is 2-4 KiB: at most ~16
# MiB), and remembering costs one dict store per object, where keeping them
# in the order of their last write (an LRU) cost a move and an eviction each.
ENCODED_GENERATION = 2_048

# Put(*ref, body) without the named tuple's __new__, a Python function: the same tuple made in C, at half
# the cost (every object written makes one, about four per workload).
_new_tuple = tuple.__new__


class Agents(Protocol):
    """Pod bindings and the agents' streams (the fleet)."""

    def bind(self, key: WorkloadKey, pod: PodRecord, now: float) -> None: ...

    def unbind(self, pod: PodRecord) -> None: ...

    def send(self, node: str, command: Command) -> None: ...

    def disown(self, uid: str) -> None: ...

    def track(self, wl: Workload) -> None: ...


def _pending(store: Store) -> bool:
    """Whether the store holds writes from a failed group commit that memory already has."""
    return bool(getattr(store, "pending", 0))


class StoreObserver(Protocol):
    """Told of each workload the store took, with the state it replaces (metrics count the transitions)."""

    def workload_stored(self, old: Workload | None, new: Workload) -> None: ...


class Committer:
    def __init__(self, store: Store, cache: Cache, *, observer: StoreObserver | None = None) -> None:
        self.store = store
        self.cache = cache
        self.observer = observer
        # Attached once the pieces that carry out cache and agent effects exist (see attach).
        self._agents: Agents | None = None
        self._enqueue: Callable[[Workload], None] = lambda wl: None
        self._track: Callable[[Workload], None] = lambda wl: None
        self._settle: Callable[[Workload], None] = lambda wl: None
        self._apply_object: Callable[[Obj], None] = lambda obj: None
        self._evict: Callable[[Workload, float], None] = lambda wl, now: None
        # The store's last write failure while writes fail (disk full,
        # read-only, I/O error): the controller is degraded, refuses writes,
        # serves reads, and probes the store until a write succeeds.
        self.store_problem: StoreError | None = None
        # Under leader election: called (synchronously, before anything queued
        # leaves the process) when writes memory holds can no longer be trusted
        # to reach the store -- another leader fenced us, or a group commit
        # failed with writes pending.  The leader steps down; the next one
        # rebuilds from the store.  None: stay up degraded (one controller).
        self.on_lost_writes: Callable[[StoreError], None] | None = None
        self._group_depth = 0
        self._group_wrote = False
        self.versions: dict[Ref, int] = {}
        # The version of the last write (a deletion's watch event carries it).
        self.last_version = 0
        # ref -> (object, its JSON): valid only while the object is that very
        # instance (model objects are immutable, so identity means "unchanged");
        # the current generation and the previous one (see ENCODED_GENERATION).
        self._encoded: dict[Ref, tuple[Obj, EncodedObject]] = {}
        self._encoded_before: dict[Ref, tuple[Obj, EncodedObject]] = {}
        self.watchers = Watchers()
        # Set when something happened that may let the scheduler admit more.
        self.woken = asyncio.Event()

    def wake(self) -> None:
        self.woken.set()

    def attach(self, agents: Agents, *, enqueue: Callable[[Workload], None], track: Callable[[Workload], None],
               settle: Callable[[Workload], None] | None = None,
               apply_object: Callable[[Obj], None] | None = None,
               evict: Callable[[Workload, float], None] | None = None) -> None:
        """Who binds pods and talks to agents, queues workloads, arms their timers, settles a
        workload's pods or evicts it (nested decisions, committed in place), and puts other kinds into
        the cache."""
        self._agents = agents
        self._enqueue = enqueue
        self._track = track
        if settle is not None:
            self._settle = settle
        if apply_object is not None:
            self._apply_object = apply_object
        if evict is not None:
            self._evict = evict

    # ------------------------------------------------------------ commit

    def commit(self, e: Effects) -> int:
        """Carry out a decision: store, then cache and queues, then agents, then watchers.

        A refused store write raises StoreError before anything else changes.
        Returns how many Requeue heads their queues took back.
        """
        if e.puts or e.deletes:
            self.write(e.puts, e.deletes)
        c = self.cache
        agents = self._agents
        requeued = 0
        # Most frequent first (a workload's life: SetWorkload and Track three times each, then one each
        # of Admit, Enqueue, UpdateAdmitted, Unbind, Release, NodeCapacityFreed): the op types are
        # unrelated classes, so the order of the tests decides nothing but how many are made.
        for op in e.cache:
            if isinstance(op, SetWorkload):
                c.workloads[op.workload.key] = op.workload
            elif isinstance(op, Track):
                self._track(op.workload)
            elif type(op) is Admit:
                wl = op.workload
                c.workloads[wl.key] = wl
                c.add_admitted(wl, op.now)
                c.afs_charge(wl, op.now)
                self._track(wl)
                c.queues.admitted(op.entry)
                assert agents is not None
                agents.track(wl)
            elif isinstance(op, Enqueue):
                self._enqueue(op.workload)
            elif isinstance(op, UpdateAdmitted):
                c.update_admitted(op.workload)
            elif isinstance(op, Unbind):
                assert agents is not None
                agents.unbind(op.pod)
            elif isinstance(op, Release):
                cq = c.release(op.key)
                if cq is not None:
                    if op.budget:
                        c.queues.queue_inadmissible(c.tree_members(cq), c.release_budget)
                    else:
                        c.queues.queue_inadmissible(c.tree_members(cq))
            elif isinstance(op, NodeCapacityFreed):
                c.queues.node_capacity_freed()
            elif isinstance(op, Bind):
                assert agents is not None
                agents.bind(op.key, op.pod, op.now)
            elif isinstance(op, Requeue):
                entry = op.entry
                if entry.workload is not op.workload:
                    entry.head = replace(entry.head, workload=op.workload)
                if c.queues.requeue(entry, quota_bound=op.quota_bound, node_bound=op.node_bound):
                    requeued += 1
            elif isinstance(op, RefreshUsage):
                c.workloads[op.workload.key] = op.workload
                cq = c.refresh_usage(op.workload)
                if cq is not None:
                    c.queues.queue_inadmissible(c.tree_members(cq), c.release_budget)
            elif isinstance(op, Settle):
                self._settle(op.workload)
            elif isinstance(op, DropWorkload):
                c.workloads.pop(op.key, None)
                c.queues.delete(op.key)
            elif isinstance(op, Evict):
                self._evict(op.workload, op.now)
            elif isinstance(op, PutBack):
                op.entry.status = EntryStatus.SKIPPED
                c.queues.requeue(op.entry)
            elif isinstance(op, SetLocalQueues):
                for lq in op.local_queues:
                    c.local_queues[(lq.namespace, lq.name)] = lq
                    if lq.admission_fair_sharing_status is not None:
                        c.afs[(lq.namespace, lq.name)] = lq.admission_fair_sharing_status
            elif isinstance(op, ApplyObject):
                self._apply_object(op.obj)
            elif isinstance(op, RemoveObject):
                c.remove_object(*op.ref)
            elif isinstance(op, RefreshQueueActivity):
                c.refresh_queue_activity()
            elif isinstance(op, Dequeue):
                c.queues.delete(op.key)
            elif isinstance(op, Uncache):
                c.workloads.pop(op.key, None)
            elif isinstance(op, Disown):
                assert agents is not None
                agents.disown(op.uid)
        if e.agents:
            assert agents is not None
            for node, command in e.agents:
                agents.send(node, command)
        if e.wake:
            self.woken.set()
        if e.events and self.watchers:
            self.watchers.publish_all(e.events, self.event)
        return requeued

    # ------------------------------------------------------------- store

    def write(self, puts: Iterable[Obj] = (), deletes: Iterable[Ref] = ()) -> int:
        """Store objects and deletions in one transaction; StoreError (and degraded mode) if refused."""
        changes: list[Put | Delete] = []
        written: list[tuple[Ref, Obj, EncodedObject]] = []
        for obj in puts:
            ref = ("Workload", obj.namespace, obj.name) if type(obj) is Workload else ref_of(obj)
            enc = encode_json(obj)
            changes.append(_new_tuple(Put, (*ref, enc.body)))
            written.append((ref, obj, enc))
        if deletes:
            deletes = list(deletes)
            for kind, ns, name in deletes:
                changes.append(Delete(kind, ns, name))
        try:
            version = self.store.write(changes)
        except StoreError as exc:
            self._store_failed(exc)
            raise
        if self._group_depth:
            self._group_wrote = True  # known durable only once the group commits
        elif self.store_problem is not None:
            self._store_recovered()
        # Versions, the JSON remembered (see encoded) and the metrics, per object, in one pass: every
        # workload is written about four times in its life, so this loop runs for each of those writes.
        versions, encoded, observer = self.versions, self._encoded, self.observer
        known = self.cache.workloads
        for ref, obj, enc in written:
            versions[ref] = version
            encoded[ref] = (obj, enc)
            if len(encoded) >= ENCODED_GENERATION:
                self._encoded_before, encoded = encoded, {}
                self._encoded = encoded
            if observer is not None and ref[0] == "Workload":
                observer.workload_stored(known.get(obj.key), obj)
        if deletes:
            for r in deletes:
                versions.pop(r, None)
        self.last_version = version
        return version

    def _store_failed(self, exc: StoreError) -> None:
        if self.on_lost_writes is not None and (isinstance(exc, Fenced) or _pending(self.store)):
            self.on_lost_writes(exc)
        if self.store_problem is None:
            log.error("store writes fail; refusing writes, serving reads, retrying until a write succeeds: %s", exc)
        self.store_problem = exc

    def _store_recovered(self) -> None:
        if self.store_problem is not None:
            log.warning("store writes succeed again; ready (was: %s)", self.store_problem)
            self.store_problem = None
            self.woken.set()

    def check_store(self) -> bool:
        """While degraded, probe the store with a real write (which also commits writes a failed
        group commit left to redo); True once writes succeed."""
        if self.store_problem is None:
            return True
        try:
            self.store.flush()
        except StoreError as exc:
            if self.on_lost_writes is not None and isinstance(exc, Fenced):
                self.on_lost_writes(exc)
            self.store_problem = exc
            return False
        self._store_recovered()
        return True

    @contextmanager
    def write_group(self) -> Iterator[None]:
        """Writes inside share one commit (``Store.group``); no ``await`` inside.

        Every mutation writes before it changes memory, so a write refused
        inside the group leaves memory as it was.  A failed commit leaves
        memory ahead of the store by the group's writes: the store keeps them
        and redoes them first in the next transaction that commits (a later
        write or ``check_store``'s probe), so the process stays up, degraded,
        instead of exiting into a restart loop while the disk stays full.
        """
        if self._group_depth == 0:
            self._group_wrote = False
        self._group_depth += 1
        try:
            with self.store.group():
                yield
        except StoreError as exc:
            self._store_failed(exc)
            raise
        finally:
            self._group_depth -= 1
        if self._group_depth == 0 and self._group_wrote and self.store_problem is not None:
            self._store_recovered()

    # ----------------------------------------------------------- encoded

    def _remember(self, ref: Ref, obj: Obj, enc: EncodedObject) -> None:
        cache = self._encoded
        cache[ref] = (obj, enc)
        if len(cache) >= ENCODED_GENERATION:
            self._encoded_before, self._encoded = cache, {}

    def _recalled(self, ref: Ref, obj: Obj) -> EncodedObject | None:
        """The JSON remembered for ``obj`` (that very instance), or None."""
        hit = self._encoded.get(ref)
        if hit is None:
            hit = self._encoded_before.get(ref)
        return hit[1] if hit is not None and hit[0] is obj else None

    def encoded(self, obj: Obj) -> EncodedObject:
        """The object's JSON as stored: the bytes its last write encoded, or encoded now.

        Replies and watch events use this, so a write is encoded once for the
        store and everyone who reads it right after.
        """
        ref = ref_of(obj)
        enc = self._recalled(ref, obj)
        if enc is not None:
            return enc
        enc = encode_json(obj)
        self._remember(ref, obj, enc)
        return enc

    # ---------------------------------------------------------- watchers

    def event(self, type_: str, wl: Workload) -> WatchEvent:
        ref = ("Workload", wl.namespace, wl.name)
        version = self.versions.get(ref, 0)
        if type_ == "DELETED":
            # Its version left with it: the deletion is the write just made.
            version = max(version, self.last_version)
        # Committer.encoded, its lookup done here with the ref at hand (an event follows each write).
        hit = self._encoded.get(ref)
        if hit is not None and hit[0] is wl:
            return WatchEvent(type_, wl, version, hit[1])
        return WatchEvent(type_, wl, version, self.encoded(wl))

    def listed(self, workloads: list[Workload]) -> Iterator[WatchEvent]:
        """ADDED events for a new watch's initial state: versions as they are now, JSON made as
        each is taken (and not remembered: a listing must not push out the recent writes' JSON)."""
        at = time.time()
        versions = [self.versions.get(("Workload", wl.namespace, wl.name), 0) for wl in workloads]
        for wl, version in zip(workloads, versions, strict=True):
            enc = self._recalled(("Workload", wl.namespace, wl.name), wl)
            if enc is None:
                enc = encode_json(wl)
            yield WatchEvent("ADDED", wl, version, enc, at)
