"""The controller's one owner of state: applies objects, queues and admits workloads.

Every mutation follows the same order: validate → compute the new objects →
write them to the store in one transaction → apply them to the cache →
publish watch events.  If the store write fails nothing else happens, so
the cache never runs ahead of what would survive a crash.

The manager's methods are synchronous (they never await), so requests and
scheduling cycles never interleave half-way; the asyncio side only decides
*when* to call them.

Where each concern lives: the eight kinds' lookup and validation in
``objects``; decisions as pure functions (``decide_api`` for submissions and
deletes, ``decide_pods`` and ``lifecycle`` for pods, ``timers`` for deadlines)
returning ``effects.Effects``, carried out by ``commit.Committer`` (store,
then cache, then agents, then watchers; it also owns write groups, degraded
mode and the watchers of ``watch``); queueing policy in ``queueing``; the
scheduling driver in ``scheduler``; agents and bindings in ``fleet``.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Collection, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager, aclosing
from dataclasses import replace
from typing import Protocol

from sluicegate.controller.cache import Cache
from sluicegate.controller.commit import Committer, StoreObserver
from sluicegate.controller.decide_api import (
    deactivated,
    deleted,
    marked_inadmissible,
    prepare_workload,
    removed,
    resolve_priority,
    retention_over,
)
from sluicegate.controller.decide_api import (
    stored as decide_stored,
)
from sluicegate.controller.decide_pods import released_at_once
from sluicegate.controller.effects import Effects, Enqueue
from sluicegate.controller.errors import AlreadyExists, ControllerError, FailedPrecondition, InvalidArgument, NotFound
from sluicegate.controller.fleet import Fleet
from sluicegate.controller.lifecycle import due_eviction, evict, released
from sluicegate.controller.objects import (
    KIND_ALIASES,
    KIND_OF,
    LOAD_ORDER,
    NAMESPACED,
    Obj,
    canonical_kind,
    check_cohort_cycles,
    check_topology_updates,
    decode_for_apply,
    decode_stored,
    existing,
    listed,
    parse_label_selector,
    ref_of,
    spec_difference,
    workload_state,
)
from sluicegate.controller.objects import action as applied
from sluicegate.controller.podgroups import (
    GroupProblem,
    check_pod_group,
    group_taken,
    queues_as_cluster_queues,
    regrouped,
    resolve,
    waiting_reason,
)
from sluicegate.controller.queueing import Queueing
from sluicegate.controller.scheduler import CycleObserver, CycleStats, Scheduler, replace_entry_workload
from sluicegate.controller.scheduling.cycle import Preemptor
from sluicegate.controller.scheduling.preemption import Preemptor as DefaultPreemptor
from sluicegate.controller.store import Store, StoreError
from sluicegate.controller.timers import (
    AFS_KEY,
    AFS_SAMPLE,
    BACKOFF,
    EVICTION,
    PROTECTION,
    RETENTION,
    Deadlines,
    afs_sampled,
    backoff_finished,
    eviction_deadline,
    retention_deadline,
)
from sluicegate.controller.watch import Watcher, WatchEvent
from sluicegate.manifest.decode import decode
from sluicegate.manifest.encode import EncodedObject
from sluicegate.manifest.errors import ManifestError
from sluicegate.manifest.loader import RawDocument
from sluicegate.manifest.new_workload import NewWorkload, decode_new_workload
from sluicegate.model.config import ControllerConfig
from sluicegate.model.names import ClusterQueueName, CohortName, FlavorName, WorkloadKey, workload_key
from sluicegate.model.objects import (
    Namespace,
    PriorityClass,
    ResourceFlavor,
    WorkloadPriorityClass,
)
from sluicegate.model.podgroups import GROUP_NAME_ANNOTATIONS, PodGroup, group_name
from sluicegate.model.queues import ClusterQueueSpec, CohortSpec, LocalQueueSpec, StopPolicy
from sluicegate.model.topology import Topology
from sluicegate.model.workloads import Workload
from sluicegate.security.podsecurity import PodUserPolicies

# Names that callers import from here (their home is objects.py / watch.py).
__all__ = ["KIND_ALIASES", "KIND_OF", "NAMESPACED", "CycleStats", "Manager", "Obj", "WatchEvent", "canonical_kind",
           "parse_label_selector", "ref_of", "replace_entry_workload", "spec_difference", "workload_state"]

log = logging.getLogger(__name__)


class Observer(StoreObserver, CycleObserver, Protocol):
    """What the metrics are told as things happen (``controller.metrics.ControllerMetrics``)."""


class Manager:
    def __init__(
        self,
        store: Store,
        *,
        clock: Callable[[], float],
        config: ControllerConfig | None = None,
        preemptor: Preemptor | None = None,
        placement: bool = True,
        node_timeout: float = 40.0,
        fencing_grace: float = 45.0,
        self_fencing: bool = True,
        monotonic: Callable[[], float] | None = None,
        finished_retention: float | None = None,
        pod_security: PodUserPolicies | None = None,
        observer: Observer | None = None,
    ) -> None:
        """``observer``: told of stored workloads, cycles and preemptions (metrics); None for none.
        ``placement=False`` is quota-only mode: workloads are admitted without
        being bound to nodes or run (simulate, capacity planning, tests of queueing)."""
        self.clock = clock
        # Who pods may run as, by namespace: checked when a workload is created.
        self.pod_security = pod_security if pod_security is not None else PodUserPolicies()
        self.cache = Cache(config=config or ControllerConfig())
        # Store, versions, encoded bytes, watchers, write groups and degraded mode; carries out Effects.
        self.commit = Committer(store, self.cache, observer=observer)
        self._wake = self.commit.woken
        # Timers: backoffs, execution-time and pods-ready limits, retention (a deadline heap).
        self.deadlines = Deadlines()
        self.queueing = Queueing(self.cache, self.deadlines, clock)
        self.fleet = Fleet(self.cache, self.commit, clock=clock, enqueue=self.queueing.enqueue,
                           deadlines=self.track_deadlines, node_timeout=node_timeout, fencing_grace=fencing_grace,
                           self_fencing=self_fencing, monotonic=monotonic)
        self.finished_retention = finished_retention
        self._halted = False
        self.scheduler = Scheduler(self.cache, self.commit, self.fleet, clock=clock,
                                   preemptor=preemptor or DefaultPreemptor(), placement=placement,
                                   observer=observer,
                                   retry_at=lambda key, at: self.deadlines.arm(PROTECTION, key, at))
        self.commit.attach(self.fleet, enqueue=self.queueing.enqueue, track=self.track_deadlines,
                           settle=lambda wl: self.fleet.apply(self.fleet.settle(wl)),
                           apply_object=self.apply_to_cache, evict=self._act_on_eviction)

    # ------------------------------------------------------------------ load

    def load(self, objects: Iterable[tuple[Obj, int]] | None = None) -> int:
        """Rebuild the cache from the store; returns how many objects were loaded.

        ``objects``: the stored objects already decoded, with their versions
        (a follower's mirror taking over), instead of reading the store.
        """
        objs: list[tuple[Obj, int]] = [] if objects is None else list(objects)
        for stored in self.store.load() if objects is None else ():
            obj = decode_stored(stored)
            if obj is not None:
                objs.append((obj, stored.resource_version))
        objs.sort(key=lambda o: LOAD_ORDER[KIND_OF[type(o[0])]])
        for obj, rv in objs:
            self.commit.versions[ref_of(obj)] = rv
            if isinstance(obj, Workload):
                self._load_workload(obj)
            else:
                self.apply_to_cache(obj)
        self.cache.refresh_queue_activity()
        self._start_afs_sampling()
        self._wake.set()
        return len(objs)

    def _start_afs_sampling(self) -> None:
        """Admission Fair Sharing: usage loaded from the store decays from now on (as Kueue's ledger is seeded
        at start with lastUpdate = now), and the first sample is one interval away."""
        cfg = self.cache.config.admission_fair_sharing
        if cfg is None:
            return
        now = self.clock()
        c = self.cache
        c.afs = {k: replace(v, last_update=now) for k, v in c.afs.items()}
        self.deadlines.arm(AFS_SAMPLE, AFS_KEY, now + cfg.usage_sampling_interval_seconds)

    def _load_workload(self, wl: Workload) -> None:
        c = self.cache
        c.workloads[wl.key] = wl
        self.fleet.track(wl)
        if wl.has_quota_reservation and not wl.is_finished and wl.status.admission is not None:
            cond = wl.status.condition("QuotaReserved")
            c.add_admitted(wl, cond.last_transition_time if cond else wl.creation_timestamp)
        else:
            self.queueing.enqueue(wl)
        self.track_deadlines(wl)

    # ------------------------------------------------------------- helpers

    @property
    def store(self) -> Store:
        return self.commit.store

    @property
    def store_problem(self) -> StoreError | None:
        return self.commit.store_problem

    @property
    def versions(self) -> dict[tuple[str, str, str], int]:
        return self.commit.versions

    def readiness(self) -> tuple[bool, str]:
        """What /readyz answers: not ready while the store refuses writes, with the cause."""
        if self.store_problem is not None:
            return False, f"store refuses writes (reads are served): {self.store_problem}"
        return True, f"{len(self.cache.workloads)} workloads, cycle {self.cycle}"

    def check_store(self) -> bool:
        """While degraded, probe the store with a real write; True once writes succeed."""
        return self.commit.check_store()

    def write_group(self) -> AbstractContextManager[None]:
        """Writes inside share one commit (see Committer.write_group); no ``await`` inside."""
        return self.commit.write_group()

    def encoded(self, obj: Obj) -> EncodedObject:
        """The object's JSON as stored: the bytes its last write encoded, or encoded now."""
        return self.commit.encoded(obj)

    def wake(self) -> None:
        self._wake.set()

    # ----------------------------------------------------------- apply

    def apply(self, docs: Sequence[RawDocument], *, dry_run: bool = False) -> list[tuple[tuple[str, str, str], str]]:
        """Create or update objects of any kind: all documents or none."""
        c = self.cache
        try:
            objs = queues_as_cluster_queues(decode_for_apply(docs), c.cohorts,
                                            fair_sharing=c.config.fair_sharing.enabled)
            pod_groups = [o for o in objs if isinstance(o, PodGroup)]
            classes = set(c.priority_classes) | {o.name for o in objs if isinstance(o, PriorityClass)}
            for pg in pod_groups:
                check_pod_group(pg, classes)
        except GroupProblem as exc:
            raise InvalidArgument(exc.field, str(exc)) from None
        check_cohort_cycles(c, objs)
        check_topology_updates(c, objs)
        groups = {**c.pod_groups, **{(pg.namespace, pg.name): pg for pg in pod_groups}}
        prepared: list[tuple[Obj, str]] = []
        for obj in objs:
            new: Obj
            if isinstance(obj, Workload):
                new, action = self._prepare_workload(self._grouped(obj, groups))
            elif isinstance(obj, LocalQueueSpec):
                # The stored status keeps the Admission Fair Sharing usage the controller holds.
                new, action = self.cache.with_afs_status(obj), applied(c, obj)
            else:
                new, action = obj, applied(c, obj)
            prepared.append((new, action))
        results = [(ref_of(o), a) for o, a in prepared]
        if dry_run:
            return results
        changed = [(o, a) for o, a in prepared if a != "unchanged"]
        # Jobs that waited for these PodGroups join them (after the PodGroups, so these are in the cache first).
        now = self.clock()
        for joined in regrouped(groups, pod_groups, list(c.workloads.values()), lambda w: c.holds_quota(w.key)):
            joined = marked_inadmissible(c, resolve_priority(c, joined), now, reason=waiting_reason(groups, joined))
            changed.append((joined, "configured"))
        self._commit_stored([o for o, _ in changed], [a == "created" for _, a in changed], refresh=True)
        return results

    def _grouped(self, wl: Workload, groups: Mapping[tuple[str, str], PodGroup]) -> Workload:
        """A Job's workload as its PodGroup makes it; InvalidArgument when another Job has the group."""
        if not group_name(wl.annotations):
            return wl
        if wl.key not in self.cache.workloads:
            taken = group_taken(wl, self.cache.workloads_of_pod_group(wl.namespace, group_name(wl.annotations)))
            if taken:
                raise InvalidArgument(
                    f"metadata.annotations[{GROUP_NAME_ANNOTATIONS[0]}]",
                    f"PodGroup {wl.namespace}/{group_name(wl.annotations)} already has the Job {taken}; "
                    "sluicegate runs one Job per PodGroup")
        return resolve(groups, wl)

    def _commit_stored(self, objs: Sequence[Obj], created: Sequence[bool], *, refresh: bool = False) -> None:
        """Write objects in one transaction, then put them into the cache (decide_api.stored)."""
        for e in decide_stored(self.cache, objs, created=created, refresh=refresh):
            self.commit.commit(e)

    def apply_to_cache(self, obj: Obj) -> None:
        """Put a non-Workload object the store holds (or, for simulate, never will) into the cache."""
        c = self.cache
        if isinstance(obj, ResourceFlavor):
            c.flavors[obj.name] = obj
            c.refresh_queue_activity()
            c.queues.queue_inadmissible([cq for cq, s in c.cluster_queues.items() if obj.name in s.flavors])
        elif isinstance(obj, CohortSpec):
            c.set_cohort(obj)
            node = c.tree.cohorts.get(obj.name)
            if node is not None:
                c.queues.queue_inadmissible(ClusterQueueName(n.name) for n in node.root().subtree_cluster_queues())
        elif isinstance(obj, ClusterQueueSpec):
            c.set_cluster_queue(obj)
            if obj.stop_policy is StopPolicy.HOLD_AND_DRAIN:
                for info in list(c.admitted.get(obj.name, {}).values()):
                    wl = c.workloads.get(info.key)
                    if wl is not None and not wl.status.is_true("Evicted") and not wl.is_finished:
                        self.evict_now(wl, reason="ClusterQueueStopped", message="The ClusterQueue is stopped")
            self.queueing.requeue_unqueued(lambda wl: self.queueing.cq_for(wl) == obj.name)
            c.queues.queue_inadmissible(c.tree_members(obj.name))
        elif isinstance(obj, LocalQueueSpec):
            c.set_local_queue(obj)
            if obj.stop_policy is StopPolicy.HOLD_AND_DRAIN:
                for wl in list(c.workloads_of_local_queue(obj.namespace, obj.name)):
                    if c.holds_quota(wl.key) and not wl.status.is_true("Evicted") and not wl.is_finished:
                        self.evict_now(wl, reason="LocalQueueStopped", message="The LocalQueue is stopped")
            for wl in list(c.workloads_of_local_queue(obj.namespace, obj.name)):
                if not c.holds_quota(wl.key) and not wl.is_finished:
                    self.queueing.enqueue(wl)
        elif isinstance(obj, WorkloadPriorityClass):
            c.workload_priority_classes[obj.name] = obj
        elif isinstance(obj, PriorityClass):
            c.priority_classes[obj.name] = obj
        elif isinstance(obj, Namespace):
            c.namespaces[obj.name] = obj
            c.queues.queue_inadmissible(list(c.cluster_queues))
        elif isinstance(obj, PodGroup):
            c.pod_groups[(obj.namespace, obj.name)] = obj
        elif isinstance(obj, Topology):
            c.topologies[obj.name] = obj
            users = {f.name for f in c.flavors.values() if f.topology_name == obj.name}
            c.queues.queue_inadmissible([cq for cq, s in c.cluster_queues.items() if users & set(s.flavors)])

    # --------------------------------------------------------- workloads

    def resolve_priority(self, wl: Workload) -> Workload:
        """Fill spec.priority from the referenced class (WorkloadPriorityClass or PriorityClass)."""
        return resolve_priority(self.cache, wl)

    def _prepare_workload(self, wl: Workload) -> tuple[Workload, str]:
        return prepare_workload(self.cache, self.pod_security, wl, self.clock)

    def create_workload(self, doc: RawDocument | NewWorkload) -> tuple[Workload, bool]:
        (result,) = self.create_workloads([doc])
        if isinstance(result, ControllerError):
            raise result
        return result

    def create_workloads(
        self, docs: Sequence[RawDocument | NewWorkload],
    ) -> list[tuple[Workload, bool] | ControllerError]:
        """Create each document's workload; one result per document, in order.

        A :class:`NewWorkload` (the typed creation item) is created as its
        equivalent document would be, its spec decoded once per distinct spec.

        Idempotent by name and spec: a name that exists with the same spec
        answers the existing workload (created False); with another spec,
        AlreadyExists naming namespace/name and the first field that differs.

        A document that is invalid gets its error and changes nothing; the new
        workloads are stored in one transaction before any is queued, so each
        result holds only once that commit happened.  A store failure raises
        and nothing is created.
        """
        results: list[tuple[Workload, bool] | ControllerError] = []
        new: dict[WorkloadKey, Workload] = {}
        for doc in docs:
            try:
                obj = decode_new_workload(doc) if isinstance(doc, NewWorkload) else decode(doc, source=doc.source)
            except ManifestError as exc:
                results.append(InvalidArgument("", str(exc)))
                continue
            if not isinstance(obj, Workload):
                got = KIND_OF.get(type(obj), type(obj).__name__)
                results.append(InvalidArgument("kind", f"expected a Workload, got {got}"))
                continue
            if obj.annotations:  # without annotations it names no PodGroup (see _grouped)
                try:
                    obj = self._grouped(obj, self.cache.pod_groups)
                except ControllerError as exc:
                    results.append(exc)
                    continue
            existing = self.cache.workloads.get(obj.key) or new.get(obj.key)
            if existing is not None:
                # Idempotent by name: a retried submission (the same spec) is
                # the same workload; another spec under that name is a conflict.
                differs = spec_difference(existing, obj)
                if differs:
                    results.append(AlreadyExists("Workload", obj.namespace, obj.name, f"{differs} differs"))
                else:
                    results.append((existing, False))
                continue
            try:
                wl, _ = self._prepare_workload(obj)
            except ControllerError as exc:
                results.append(exc)
                continue
            new[wl.key] = wl
            results.append((wl, True))
        if new:
            self._commit_stored(list(new.values()), [True] * len(new))
        return results

    def get_workload(self, namespace: str, name: str) -> Workload:
        wl = self.cache.workloads.get(workload_key(namespace, name))
        if wl is None:
            raise NotFound("Workload", namespace, name)
        return wl

    def set_active(self, namespace: str, name: str, active: bool) -> Workload:
        old = self.get_workload(namespace, name)
        if old.active == active:
            return old
        new = replace(old, active=active, generation=old.generation + 1)
        if not active:
            new = deactivated(new, self.clock)
        else:
            # Reactivation resets the backoff bookkeeping, as Kueue does.
            new = replace(new, status=replace(new.status, requeue_state=None))
        self._commit_stored([new], [False])
        return new

    def delete_workload(self, namespace: str, name: str) -> bool:
        key = workload_key(namespace, name)
        wl = self.cache.workloads.get(key)
        if wl is None:
            raise NotFound("Workload", namespace, name)
        if any(not p.terminal for p in wl.status.pods):
            # Stop the pods first; the workload (and its quota) goes once they exited.
            self.fleet.apply(self.fleet.settle(replace(wl, status=replace(wl.status, deleting=True))))
            return True
        self.commit.commit(deleted(wl))
        return True

    def list_workloads(
        self, *, namespace: str = "", local_queue: str = "", cluster_queue: str = "", state: str = "",
        labels: dict[str, str] | None = None, limit: int = 0, namespaces: Collection[str] | None = None,
    ) -> list[Workload]:
        """``namespaces``: None for every namespace, else only workloads in these."""
        out: list[Workload] = []
        for wl in self.cache.workloads.values():
            if namespace and wl.namespace != namespace:
                continue
            if namespaces is not None and wl.namespace not in namespaces:
                continue
            if local_queue and wl.queue_name != local_queue:
                continue
            if cluster_queue:
                adm = wl.status.admission
                cq = adm.cluster_queue if adm is not None else self.queueing.cq_for(wl)
                if cq != cluster_queue:
                    continue
            if state and workload_state(wl) != state:
                continue
            if labels and any(wl.labels.get(k) != v for k, v in labels.items()):
                continue
            out.append(wl)
        out.sort(key=lambda w: (w.creation_timestamp, w.uid))
        return out[:limit] if limit else out

    async def watch(self, namespace: str, name: str, send_initial: bool) -> AsyncIterator[WatchEvent]:
        async with aclosing(self.watch_batches(namespace, name, send_initial, max_batch=1)) as batches:
            async for batch in batches:
                for ev in batch:
                    yield ev

    async def watch_batches(
        self, namespace: str, name: str, send_initial: bool, *, max_batch: int,
        namespaces: Collection[str] | None = None, deadline: asyncio.Timeout | None = None,
    ) -> AsyncGenerator[list[WatchEvent], None]:
        """Events in order, as lists of up to ``max_batch``: whatever is waiting, never held back.

        A sender that passes a list on in one message pays the transport's
        per-message cost once per list instead of once per event.
        ``namespaces`` (None: all) limits events to workloads in those namespaces.
        ``deadline``, the timeout around the caller's sends, is brought to now
        when the watch expires while a send is blocked (see :class:`Watcher`).
        """
        w = Watcher(namespace, name, namespaces, deadline)
        # The initial state is taken now (the objects are immutable, their versions read now);
        # each batch of it is encoded only as it goes out, so a re-list of 50,000 workloads holds
        # one batch's JSON at a time instead of every workload's at once.
        initial = (self.commit.listed([wl for wl in self.list_workloads(namespace=namespace, namespaces=namespaces)
                                       if w.wants(wl)])
                   if send_initial else iter(()))
        # Closing this closes the stream at once (its watcher is gone), not when a collection finds it.
        async with aclosing(self.commit.watchers.stream(w, initial, max_batch=max_batch)) as events:
            async for batch in events:
                yield batch

    # ------------------------------------------------------------ generic

    def get(self, kind: str, namespace: str, name: str) -> Obj:
        kind = canonical_kind(kind)
        ns = namespace if kind in NAMESPACED else ""
        if kind in NAMESPACED and not ns:
            ns = "default"
        obj = existing(self.cache, kind, ns, name)
        if obj is None:
            raise NotFound(kind, ns, name)
        return obj

    def list(self, kind: str, namespace: str = "", labels: dict[str, str] | None = None) -> list[Obj]:
        kind = canonical_kind(kind)
        c = self.cache
        if kind == "Workload":
            return list(self.list_workloads(namespace=namespace, labels=labels))
        return listed(c, kind, namespace)

    def delete(self, kind: str, namespace: str, name: str) -> bool:
        kind = canonical_kind(kind)
        if kind == "Workload":
            return self.delete_workload(namespace or "default", name)
        c = self.cache
        ns = (namespace or "default") if kind in NAMESPACED else ""
        obj = existing(self.cache, kind, ns, name)
        if obj is None:
            raise NotFound(kind, ns, name)
        if kind == "ClusterQueue":
            held = len(c.admitted.get(ClusterQueueName(name), {}))
            if held:
                raise FailedPrecondition(
                    f"ClusterQueue {name} still holds quota for {held} workload(s); set spec.stopPolicy: HoldAndDrain "
                    "or wait for them to finish, then delete it"
                )
        if kind == "PodGroup":
            users = [wl.name for wl in c.workloads_of_pod_group(ns, name) if not wl.is_finished]
            if users:
                raise FailedPrecondition(
                    f"PodGroup {ns}/{name} is used by the unfinished Job(s) {', '.join(sorted(users))}")
        if kind == "ResourceFlavor":
            users = [cq for cq, s in c.cluster_queues.items() if FlavorName(name) in s.flavors]
            if users:
                raise FailedPrecondition(f"ResourceFlavor {name} is used by ClusterQueue(s) {', '.join(sorted(users))}")
        if kind == "Topology":
            # Kueue keeps its resource-in-use finalizer on a Topology while a ResourceFlavor names it.
            users = [f for f, spec in c.flavors.items() if spec.topology_name == name]
            if users:
                raise FailedPrecondition(f"Topology {name} is used by ResourceFlavor(s) {', '.join(sorted(users))}")
        self.commit.commit(removed(c, kind, ns, name, now=self.clock()))
        return True

    # --------------------------------------------------------- scheduling

    def evict_now(self, wl: Workload, *, reason: str, message: str) -> None:
        """Evict an admitted workload: its pods are stopped, its quota released once they exit."""
        now = self.clock()
        self._act_on_eviction(evict(wl, reason=reason, message=message, now=now), now)

    def _act_on_eviction(self, new: Workload, now: float) -> None:
        """A workload just marked Evicted: stop its pods (quota comes back when they exit) or,
        in quota-only mode where nothing runs, release its quota at once."""
        if new.status.pods:
            self.fleet.apply(self.fleet.settle(new))
            return
        self.commit.commit(released_at_once(released(new, now, self.cache.config.wait_for_pods_ready)))

    def tick(self) -> None:
        """Timers: backoffs that expired, pods-ready and execution-time limits, retention, node loss."""
        if self._halted:
            return
        if not self.check_store():
            return  # degraded: every write would be refused; the timers fire once the store recovers
        try:
            with self.write_group():
                self._tick()
        except StoreError:
            pass  # logged once per episode by the committer; the next tick probes the store

    def track_deadlines(self, wl: Workload) -> None:
        """Arm (or drop) the workload's timers for the state it was just stored in."""
        key = wl.key
        wfpr = self.cache.config.wait_for_pods_ready
        holds = self.cache.holds_quota(key)
        deadlines = self.deadlines
        deadlines.arm(EVICTION, key, eviction_deadline(wl, wfpr) if holds else None)
        retention = self.finished_retention
        deadlines.arm(RETENTION, key, None if retention is None else retention_deadline(wl, retention))
        if holds and wfpr.block_admission:
            self.scheduler.note_readiness(wl)

    def _tick(self) -> None:
        now = self.clock()
        due = self.deadlines.pop_due(now)
        later: builtins.list[Workload] = []
        for n, (kind, key, _) in enumerate(due):
            try:
                self._fire(kind, key, now, later)
            except BaseException:
                # Not done (a refused write): what was due stays due for the next tick.
                for k, key2, at2 in due[n:]:
                    if self.deadlines.armed(k, key2) is None:
                        self.deadlines.arm(k, key2, at2)
                raise
        for wl in later:
            self.track_deadlines(wl)
        self.fleet.check_nodes()

    def _fire(self, kind: str, key: WorkloadKey, now: float, later: builtins.list[Workload]) -> None:
        """One due timer, checked against the workload as it is now."""
        c = self.cache
        if kind == AFS_SAMPLE:
            cfg = c.config.admission_fair_sharing
            if cfg is not None:
                sampled = c.afs_sample(now)
                if sampled:
                    self.commit.commit(afs_sampled(sampled))
                self.deadlines.arm(AFS_SAMPLE, AFS_KEY, now + cfg.usage_sampling_interval_seconds)
            return
        wl = c.workloads.get(key)
        if wl is None:
            return
        if kind == BACKOFF:
            self.commit.commit(backoff_finished(wl, now))
        elif kind == EVICTION:
            if not c.holds_quota(key):
                return
            fired = due_eviction(wl, now, c.config.wait_for_pods_ready)
            if fired is None:
                later.append(wl)  # not yet (the deadline moved): armed again after this tick
                return
            ev = fired.status.condition("Evicted")
            log.info("workload %s: %s", wl.key, ev.message if ev else fired.status.terminate)
            if ev is not None and ev.is_true:
                self.evict_now(replace(wl, active=fired.active), reason=ev.reason, message=ev.message)
            else:
                self.fleet.apply(self.fleet.settle(fired))
        elif kind == RETENTION and self.finished_retention is not None:
            fin = wl.status.condition("Finished")
            if fin is None or not fin.is_true:
                return
            if now - fin.last_transition_time <= self.finished_retention:
                later.append(wl)
                return
            self.commit.commit(retention_over(wl))
        elif kind == PROTECTION and not c.holds_quota(key):
            # A minimum runtime it waited on ended: try it again although no quota changed.
            self.commit.commit(Effects(cache=(Enqueue(wl),), wake=True))

    def weighted_share(self, name: str, *, cohort: bool) -> float | None:
        """The fair-sharing share of a queue or cohort (None when fair sharing is off)."""
        if not self.cache.config.fair_sharing.enabled:
            return None
        from sluicegate.controller.scheduling import fairsharing

        tree = self.cache.tree
        node = tree.cohorts.get(CohortName(name)) if cohort else tree.cluster_queues.get(ClusterQueueName(name))
        if node is None:
            return None
        return float(fairsharing.weighted_share(tree.live, node))

    # ---------------------------------------------------------- scheduling

    @property
    def cycle(self) -> int:
        return self.scheduler.cycle

    @property
    def cycles_admitting(self) -> int:
        return self.scheduler.cycles_admitting

    def admission_blocked(self) -> bool:
        return self.scheduler.admission_blocked()

    def schedule_once(self) -> CycleStats:
        """Run one scheduling cycle and commit its decisions."""
        return self.scheduler.schedule_once()

    async def run_scheduler(self) -> None:
        """Run cycles whenever there may be something to admit."""
        await self.scheduler.run()

    def stop(self) -> None:
        self.scheduler.stop()

    def halt(self) -> None:
        """Stop acting at once (no cycles, no timers) while the tasks are being cancelled: a leader stepping down."""
        self.scheduler.halt()
        self._halted = True

