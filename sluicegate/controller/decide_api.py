"""Decisions about submitted workloads: priority, pod security, what a create or an update stores.

Pure: reads the cache, changes nothing; the manager commits the Effects these return.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any

from sluicegate.controller.cache import Cache
from sluicegate.controller.effects import (
    ApplyObject,
    CacheOp,
    Dequeue,
    Disown,
    DropWorkload,
    Effects,
    Enqueue,
    RefreshQueueActivity,
    Release,
    RemoveObject,
    Settle,
    SetWorkload,
    Track,
    Uncache,
    UpdateAdmitted,
)
from sluicegate.controller.errors import InvalidArgument
from sluicegate.controller.lifecycle import evict
from sluicegate.controller.nodes import Command, ForgetPodCommand
from sluicegate.controller.queueing import INADMISSIBLE, unqueued_reason
from sluicegate.manifest.decode_job import JOB_LABELS_ANNOTATION
from sluicegate.model.conditions import set_condition
from sluicegate.model.copying import copier, copy_with
from sluicegate.model.names import ClusterQueueName
from sluicegate.model.objects import SYSTEM_CLUSTER_CRITICAL, SYSTEM_NODE_CRITICAL
from sluicegate.model.pods import pods_or_last
from sluicegate.model.workloads import PodSet, Workload, WorkloadStatus
from sluicegate.security.podsecurity import PodSecurityError, PodUserPolicies, PodUserPolicy, resolve_pod_user


def resolve_priority(c: Cache, wl: Workload) -> Workload:
    """Fill spec.priority from the referenced class (WorkloadPriorityClass or PriorityClass)."""
    priority, priority_class = priority_of(c, wl)
    if priority == wl.priority and priority_class == wl.priority_class:
        return wl
    return replace(wl, priority=priority, priority_class=priority_class)


def priority_of(c: Cache, wl: Workload) -> tuple[int, tuple[str, str] | None]:
    """(spec.priority, the class it comes from): from the referenced class (WorkloadPriorityClass or
    PriorityClass), else a pod set's priorityClassName, else as the workload says."""
    if wl.priority_class is not None:
        kind, name = wl.priority_class
        if kind == "WorkloadPriorityClass":
            wpc = c.workload_priority_classes.get(name)
            if wpc is None:
                raise InvalidArgument("spec.priorityClassRef.name", f"WorkloadPriorityClass {name!r} not found")
            return wpc.value, wl.priority_class
        value = _pod_priority(c, name)
        if value is None:
            raise InvalidArgument("spec.priorityClassRef.name", f"PriorityClass {name!r} not found")
        return value, wl.priority_class
    for ps in wl.pod_sets:
        if ps.priority_class_name:
            value = _pod_priority(c, ps.priority_class_name)
            if value is None:
                raise InvalidArgument(
                    f"spec.podSets[{wl.pod_sets.index(ps)}].template.spec.priorityClassName",
                    f"PriorityClass {ps.priority_class_name!r} not found",
                )
            return value, ("PriorityClass", ps.priority_class_name)
    return wl.priority, wl.priority_class


# The OS's random bytes, fetched for 256 uids at a time (one getrandom call each, not one per uid) and
# turned into hex text at once; a forked child starts with none, so parent and child never hand out the
# same bytes.  Held as a list of 32-digit pieces, taken from its end.
_RANDOM_CHUNK = 16 * 256
_random: list[str] = []
# uuid4's variant: the high nibble of octet 8 keeps its two low random bits under the bits 10 (RFC 4122).
_VARIANT = {f"{n:x}": f"{8 | (n & 3):x}" for n in range(16)}


def _forget_random() -> None:
    del _random[:]


os.register_at_fork(after_in_child=_forget_random)


def new_uid() -> str:
    """A random version-4 UUID in its text form, as ``str(uuid.uuid4())`` writes it, at a tenth of its cost:
    122 random bits, the version nibble 4 and the variant bits 10, as uuid4 sets them."""
    if not _random:
        text = os.urandom(_RANDOM_CHUNK).hex()
        _random.extend([text[i:i + 32] for i in range(0, len(text), 32)])
    h = _random.pop()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{_VARIANT[h[16]]}{h[17:20]}-{h[20:]}"


def _pod_priority(c: Cache, name: str) -> int | None:
    builtin = {"system-node-critical": SYSTEM_NODE_CRITICAL, "system-cluster-critical": SYSTEM_CLUSTER_CRITICAL}
    if name in builtin:
        return builtin[name]
    pc = c.priority_classes.get(name)
    return pc.value if pc is not None else None


def prepare_workload(c: Cache, pod_security: PodUserPolicies, wl: Workload,
                     clock: Callable[[], float]) -> tuple[Workload, str]:
    """A submitted workload as it will be stored, and what applying it does (created, configured, unchanged)."""
    old = c.workloads.get(wl.key)
    if old is None:
        check_pod_security(pod_security, wl)
        now = clock()
        priority, priority_class = priority_of(c, wl)
        labels = wl.labels
        job_labels = wl.annotations.get(JOB_LABELS_ANNOTATION)
        if job_labels:
            # A Job's labels reach its Workload only where the Configuration says so.
            source = json.loads(job_labels)
            copied = {k: source[k] for k in c.config.label_keys_to_copy if k in source}
            labels = {**labels, **copied}
        # A new workload starts from a clean status unless the document
        # carries one (restoring from a backup or a simulate file).  Why it
        # cannot be queued yet depends on none of the fields filled in below.
        status = _inadmissible_status(c, wl, now)
        # One new value for everything the controller fills in: each copy builds a whole Workload.
        return _prepared(wl, wl.uid or new_uid(), wl.creation_timestamp or now, priority, priority_class, labels,
                         wl.status if status is None else status), "created"
    if old.pod_sets != wl.pod_sets:
        raise InvalidArgument("spec.podSets", "field is immutable once the workload exists (delete and recreate it)")
    if old.queue_name != wl.queue_name and old.has_quota_reservation:
        raise InvalidArgument("spec.queueName", "cannot change while the workload holds quota")
    wl = resolve_priority(c, wl)
    new = replace(old, active=wl.active, priority=wl.priority, priority_class=wl.priority_class,
                  queue_name=wl.queue_name, labels=wl.labels, annotations=wl.annotations,
                  maximum_execution_time_seconds=wl.maximum_execution_time_seconds)
    if new == old:
        return old, "unchanged"
    new = replace(new, generation=old.generation + 1)
    if old.active and not new.active:
        new = deactivated(new, clock)
    elif new.queue_name != old.queue_name or (new.active and not old.active):
        new = marked_inadmissible(c, new, clock())
    return new, "configured"


def marked_inadmissible(c: Cache, wl: Workload, now: float, *, reason: str | None = None) -> Workload:
    """A workload that cannot even be queued says why, as Kueue's workload controller does.

    QuotaReserved=False, reason Inadmissible, naming the missing (or
    inactive) LocalQueue or ClusterQueue.  It is queued, and admitted as
    usual, once that queue exists; the scheduler then replaces the condition.
    ``reason``: the message when the caller already knows it (the queue is being deleted).
    """
    status = _inadmissible_status(c, wl, now, reason=reason)
    return wl if status is None else copy_with(wl, status=status)


# A new workload's copy with what prepare_workload fills in (its key, from namespace and name, kept).
_prepared = copier(Workload, ("uid", "creation_timestamp", "priority", "priority_class", "labels", "status"))


def _inadmissible_status(c: Cache, wl: Workload, now: float, *, reason: str | None = None) -> WorkloadStatus | None:
    """The status marked_inadmissible gives ``wl``; None when it keeps its own."""
    if wl.has_quota_reservation or wl.is_finished or not wl.active:
        return None
    message = reason or unqueued_reason(c, wl, inactive=True)
    if message is None:
        return None
    old = wl.status.condition("QuotaReserved")
    if old is not None and old.status == "False" and old.reason == INADMISSIBLE and old.message == message:
        return None
    conds = set_condition(wl.status.conditions, type_="QuotaReserved", status=False, reason=INADMISSIBLE,
                          message=message, now=now)
    return copy_with(wl.status, conditions=conds)


# Pod sets shared by workloads of one shape (decode_workload) pass their
# namespace's policy once: (namespace, id(policy), id(pod sets)) -> the policy
# and pod sets themselves, kept so that the ids stay theirs.  Bounded, oldest out.
POD_SECURITY_MEMO_SIZE = 4096
_pod_security_passed: dict[tuple[str, int, int], tuple[PodUserPolicy, tuple[PodSet, ...]]] = {}


def check_pod_security(pod_security: PodUserPolicies, wl: Workload) -> None:
    """InvalidArgument naming the field when a pod set's securityContext breaks its namespace's policy."""
    policy = pod_security.for_namespace(wl.namespace)
    key = (wl.namespace, id(policy), id(wl.pod_sets))
    passed = _pod_security_passed.get(key)
    if passed is not None and passed[0] is policy and passed[1] is wl.pod_sets:
        return
    _check_pod_security(policy, wl)
    if len(_pod_security_passed) >= POD_SECURITY_MEMO_SIZE:
        del _pod_security_passed[next(iter(_pod_security_passed))]
    _pod_security_passed[key] = (policy, wl.pod_sets)


def _check_pod_security(policy: PodUserPolicy, wl: Workload) -> None:
    for i, ps in enumerate(wl.pod_sets):
        base = f"spec.podSets[{i}].template.spec"
        containers = [(f"{base}.{kind}[{j}].securityContext", c.security_context)
                      for kind, group in (("initContainers", ps.init_containers), ("containers", ps.containers))
                      for j, c in enumerate(group)]
        try:
            resolve_pod_user(namespace=wl.namespace, policy=policy, pod_context=ps.security_context,
                             pod_path=f"{base}.securityContext", containers=containers)
        except PodSecurityError as exc:
            raise InvalidArgument(exc.field, exc.message) from None


def deactivated(wl: Workload, clock: Callable[[], float]) -> Workload:
    """active: false — evict without requeue (the status part; quota is released by the caller)."""
    now = clock()
    st = wl.status
    conds = st.conditions
    if wl.status.pods:
        # Running pods are stopped first; the quota goes back once they exit.
        return evict(wl, reason="InactiveWorkload", message="The workload is deactivated", now=now)
    if wl.has_quota_reservation:
        conds = set_condition(conds, type_="Evicted", status=True, reason="InactiveWorkload",
                              message="The workload is deactivated", now=now)
        conds = set_condition(conds, type_="QuotaReserved", status=False, reason="Pending",
                              message="The workload is deactivated", now=now)
        conds = set_condition(conds, type_="Admitted", status=False, reason="NoReservation",
                              message="The workload has no reservation", now=now)
        return replace(wl, status=replace(st, conditions=conds, admission=None))
    return wl


def deleted(wl: Workload) -> Effects:
    """A workload with no running pods is deleted: it goes, and its quota is offered to its tree's parked ones."""
    return Effects(deletes=(("Workload", wl.namespace, wl.name),), cache=(DropWorkload(wl.key), Release(wl.key)),
                   events=(("DELETED", wl),), wake=True)


def needs_settling(wl: Workload) -> bool:
    """Stored with pods that must stop (evicted or being deleted): its pods are settled next."""
    return bool(wl.status.pods) and (wl.status.is_true("Evicted") or wl.status.deleting)


def stored(c: Cache, objs: Sequence[Any], *, created: Sequence[bool], refresh: bool = False) -> Iterator[Effects]:
    """Objects written in one transaction (API apply, create, activation), then put into the cache in order.

    ``created``: for each object, whether it is new (its watch event is ADDED, else MODIFIED).
    Usually one Effects.  A nested decision (settling a workload's pods, or an object of
    another kind whose stop policy evicts) is committed in place and publishes its own
    events, so the Effects before it ends there: the events of the workloads before it go
    out first, and what follows is decided once that is committed (commit each Effects
    before taking the next).  The first holds every write.
    """
    puts = tuple(objs)
    cache: list[CacheOp] = []
    events: list[tuple[str, Workload]] = []
    for obj, new in zip(objs, created, strict=True):
        nested: tuple[CacheOp, ...] = ()
        if not isinstance(obj, Workload):
            nested = (ApplyObject(obj),)
        elif needs_settling(obj):
            nested = (SetWorkload(obj), Settle(obj))
        if nested:
            if events:
                yield Effects(puts=puts, cache=tuple(cache), events=tuple(events))
                puts, cache, events = (), [], []
            cache.extend(nested)
            yield Effects(puts=puts, cache=tuple(cache))
            puts, cache = (), []
            continue
        assert isinstance(obj, Workload)
        key = obj.key
        old = c.workloads.get(key)
        cache.append(SetWorkload(obj))
        holds = c.holds_quota(key)
        if old is not None and holds and not obj.has_quota_reservation:
            cache.append(Release(key, budget=False))  # no release budget: as an API change always did
        elif holds:
            cache.append(UpdateAdmitted(obj))
        cache.append(Enqueue(obj))
        cache.append(Track(obj))
        events.append(("ADDED" if new else "MODIFIED", obj))
    if refresh:
        cache.append(RefreshQueueActivity())
    yield Effects(puts=puts, cache=tuple(cache), events=tuple(events), wake=True)


def removed(c: Cache, kind: str, namespace: str, name: str, *, now: float = 0.0) -> Effects:
    """An object of another kind than Workload is deleted (the caller checked that it may be).

    The workloads that waited in a deleted LocalQueue or ClusterQueue are
    marked Inadmissible, naming it, and stored so.
    """
    cache: list[CacheOp] = [RemoveObject((kind, namespace, name))]
    orphans: list[Workload] = []
    if kind == "LocalQueue":
        waiting = [wl for wl in c.workloads_of_local_queue(namespace, name) if not c.holds_quota(wl.key)]
        cache.extend(Dequeue(wl.key) for wl in waiting)
        why = f"LocalQueue {namespace}/{name} doesn't exist"
        orphans = [marked_inadmissible(c, wl, now, reason=why) for wl in waiting]
    elif kind == "ClusterQueue":
        q = c.queues.queues.get(ClusterQueueName(name))
        why = f"ClusterQueue {name} doesn't exist"
        orphans = [marked_inadmissible(c, wl, now, reason=why) for wl in (q.pending_workloads() if q else [])]
    changed = tuple(wl for wl in orphans if c.workloads.get(wl.key) is not wl)
    cache.extend(SetWorkload(wl) for wl in changed)
    cache.append(RefreshQueueActivity())
    return Effects(puts=changed, deletes=((kind, namespace, name),), cache=tuple(cache),
                   events=tuple(("MODIFIED", wl) for wl in changed), wake=True)


def retention_over(wl: Workload) -> Effects:
    """A finished workload kept past its retention is deleted for good, and its pods' logs may go too."""
    pods = tuple(pods_or_last(wl))
    agents: tuple[tuple[str, Command], ...] = tuple((p.node, ForgetPodCommand(p.uid, purge=True)) for p in pods)
    return Effects(deletes=(("Workload", wl.namespace, wl.name),),
                   cache=(Uncache(wl.key), *(Disown(p.uid) for p in pods)), agents=agents, events=(("DELETED", wl),))
