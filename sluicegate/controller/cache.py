"""The live cluster state: objects, the quota tree, admitted workloads, queues.

One coroutine owns it (the controller's :class:`~sluicegate.controller.manager.Manager`);
nothing here awaits, so every method runs to completion without another
request interleaving.  The store is the durable copy; this is the fast one,
rebuilt from the store at start-up.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace

from sluicegate.controller.queues import QueueManager, quota_needs
from sluicegate.controller.scheduling import afs
from sluicegate.controller.scheduling.quota import QuotaNode, QuotaTree, potential_available
from sluicegate.controller.scheduling.snapshot import AdmittedWorkload, Snapshot
from sluicegate.model.config import ControllerConfig
from sluicegate.model.names import ClusterQueueName, CohortName, FlavorName, WorkloadKey
from sluicegate.model.objects import Namespace, PriorityClass, ResourceFlavor, WorkloadPriorityClass
from sluicegate.model.podgroups import PodGroup, group_name
from sluicegate.model.queues import (
    AdmissionFairSharingStatus,
    BorrowWithinCohortPolicy,
    ClusterQueueSpec,
    CohortSpec,
    LocalQueueSpec,
    PreemptionPolicy,
    ReclaimPolicy,
    StopPolicy,
)
from sluicegate.model.resources import FlavorResource
from sluicegate.model.topology import Topology
from sluicegate.model.workloads import Admission, PodSet, Workload


@dataclass(slots=True)
class Cache:
    config: ControllerConfig = field(default_factory=ControllerConfig)
    flavors: dict[FlavorName, ResourceFlavor] = field(default_factory=dict)
    cohorts: dict[CohortName, CohortSpec] = field(default_factory=dict)
    cluster_queues: dict[ClusterQueueName, ClusterQueueSpec] = field(default_factory=dict)
    local_queues: dict[tuple[str, str], LocalQueueSpec] = field(default_factory=dict)
    workload_priority_classes: dict[str, WorkloadPriorityClass] = field(default_factory=dict)
    priority_classes: dict[str, PriorityClass] = field(default_factory=dict)
    # Topology Aware Scheduling: Topology objects by name (docs/topology.md).
    topologies: dict[str, Topology] = field(default_factory=dict)
    namespaces: dict[str, Namespace] = field(default_factory=dict)
    # kube-batch PodGroups by (namespace, name).
    pod_groups: dict[tuple[str, str], PodGroup] = field(default_factory=dict)
    workloads: dict[WorkloadKey, Workload] = field(default_factory=dict)
    tree: QuotaTree = field(default_factory=QuotaTree)
    admitted: dict[ClusterQueueName, dict[WorkloadKey, AdmittedWorkload]] = field(default_factory=dict)
    queues: QueueManager = field(default_factory=QueueManager)
    # Which ClusterQueue each quota-holding workload holds quota in.
    holder: dict[WorkloadKey, ClusterQueueName] = field(default_factory=dict)
    # Admission Fair Sharing (only while the configuration has it): each LocalQueue's decayed usage (what its
    # status stores), and what its admitted workloads hold now, by resource.
    afs: dict[tuple[str, str], AdmissionFairSharingStatus] = field(default_factory=dict)
    afs_admitted: dict[tuple[str, str], dict[str, float]] = field(default_factory=dict)
    # Each namespace's effective labels, with the Namespace object (or None) they were read from.
    _labels: dict[str, tuple[Namespace | None, Mapping[str, str]]] = field(default_factory=dict)
    # tree_members' answers per cohort tree (by its root), for the tree shape they were made for.
    _members: dict[int, tuple[QuotaNode, tuple[ClusterQueueName, ...]]] = field(default_factory=dict)
    _members_shape: int = -1
    # Whether ``afs_admitted`` is kept up to date: from the first time it is read (see _afs_ledger).  Until
    # then no admission or release counts into it: without Admission Fair Sharing or a DominantResourceShare
    # queue nothing ever reads it, and every admission and release paid for the counting.
    _afs_counting: bool = False

    def __post_init__(self) -> None:
        # Admission Fair Sharing reads the ledger's every count, zeros included: kept from the start.
        self._afs_counting = self.config.admission_fair_sharing is not None

    # -- queues and cohorts ---------------------------------------------------

    def inactive_reason(self, cq: ClusterQueueName) -> str | None:
        spec = self.cluster_queues.get(cq)
        if spec is None:
            return f"ClusterQueue {cq} not found"
        if spec.stop_policy is not StopPolicy.NONE:
            return f"ClusterQueue {cq} is stopped (spec.stopPolicy={spec.stop_policy.value})"
        flavors = self.flavors
        for rg in spec.resource_groups:  # loops, not any(...): every head's queue is looked at each cycle
            for f in rg.flavors:
                if f.name not in flavors:
                    missing = [f for f in spec.flavors if f not in flavors]
                    return f"ClusterQueue {cq} references missing ResourceFlavor(s): {', '.join(missing)}"
        return None

    def inactive_queues(self) -> frozenset[ClusterQueueName]:
        return frozenset(cq for cq in self.cluster_queues if self.inactive_reason(cq) is not None)

    def set_cluster_queue(self, spec: ClusterQueueSpec) -> None:
        old = self.cluster_queues.get(spec.name)
        self.cluster_queues[spec.name] = spec
        self.tree.set_cluster_queue(
            spec.name, quotas=spec.quotas(), cohort=spec.cohort, weight=spec.fair_sharing_weight
        )
        self.admitted.setdefault(spec.name, {})
        q = self.queues.ensure_queue(spec.name, spec.queueing_strategy, active=self.inactive_reason(spec.name) is None)
        q.set_fair_sharing(self.afs_usage if self.orders_by_local_queue(spec.name) else None)
        if old is None or old.resource_groups != spec.resource_groups:
            q.reset_last_tried()

    # -- admission fair sharing -----------------------------------------------

    def uses_afs(self, cq: ClusterQueueName) -> bool:
        """Whether Admission Fair Sharing orders ``cq``: the configuration has it and the queue asks for it."""
        spec = self.cluster_queues.get(cq)
        return self.config.admission_fair_sharing is not None and spec is not None and spec.usage_based_admission

    def orders_by_local_queue(self, cq: ClusterQueueName) -> bool:
        """Whether ``cq``'s pending workloads go by their LocalQueue's usage (AFS, or current dominant share)."""
        spec = self.cluster_queues.get(cq)
        return self.uses_afs(cq) or (spec is not None and spec.dominant_share_admission)

    def _capacity(self, cq: ClusterQueueName) -> dict[str, float]:
        """The most ``cq`` could hold of each resource: its flavors' quota plus what it may borrow."""
        spec = self.cluster_queues.get(cq)
        node = self.tree.cluster_queues.get(cq)
        out: dict[str, float] = {}
        if spec is None or node is None:
            return out
        for fr in spec.quotas():
            out[fr.resource] = out.get(fr.resource, 0.0) + potential_available(node, fr)
        return out

    def set_local_queue(self, lq: LocalQueueSpec) -> None:
        """Hold a LocalQueue; its stored usage seeds the ledger the first time it is seen (a start or takeover)."""
        key = (lq.namespace, lq.name)
        self.local_queues[key] = lq
        if lq.admission_fair_sharing_status is not None:
            self.afs.setdefault(key, lq.admission_fair_sharing_status)

    def with_afs_status(self, lq: LocalQueueSpec) -> LocalQueueSpec:
        """``lq`` carrying the usage the controller holds for it (what its stored status must keep)."""
        status = self.afs.get((lq.namespace, lq.name))
        return lq if status is None else replace(lq, admission_fair_sharing_status=status)

    def afs_usage(self, lq: tuple[str, str]) -> float:
        """A LocalQueue's Admission Fair Sharing usage: its weighted decayed consumption over its weight.

        In a ``DominantResourceShare`` ClusterQueue: its current dominant share over its weight (kube-batch's DRF).
        """
        spec = self.local_queues.get(lq)
        cq_spec = self.cluster_queues.get(spec.cluster_queue) if spec is not None else None
        if spec is not None and cq_spec is not None and cq_spec.dominant_share_admission:
            return afs.dominant_share(self._afs_ledger().get(lq, {}), self._capacity(spec.cluster_queue),
                                      spec.fair_sharing_weight)
        cfg = self.config.admission_fair_sharing
        if cfg is None:
            return 0.0
        status = self.afs.get(lq)
        # A LocalQueue not yet charged nor sampled has consumed nothing (a weight of 0 still puts it last).
        return afs.usage(status.consumed_resources if status is not None else {},
                         spec.fair_sharing_weight if spec is not None else 1, cfg.resource_weights)

    def _afs_ledger(self) -> dict[tuple[str, str], dict[str, float]]:
        """``afs_admitted``, counted from the admitted workloads when it is first read.

        Under Admission Fair Sharing it is kept from the start (see
        __post_init__), so its counts, zeros included, are those the
        admissions and releases made one by one.  Otherwise only
        DominantResourceShare queues read it, and only its positive amounts,
        which a count from scratch gives the same.
        """
        if not self._afs_counting:
            self._afs_counting = True
            self.afs_admitted.clear()
            for held in self.admitted.values():
                for info in held.values():
                    self._afs_count(info.workload, info.usage, 1)
        return self.afs_admitted

    def _afs_count(self, wl: Workload, usage: Mapping[FlavorResource, int], sign: int) -> None:
        key = (wl.namespace, wl.queue_name)
        held = self.afs_admitted.get(key)
        if held is None:
            held = self.afs_admitted[key] = {}
        for fr, v in usage.items():
            res = fr.resource
            held[res] = held.get(res, 0.0) + sign * v

    def afs_charge(self, wl: Workload, now: float) -> None:
        """``wl`` was just admitted in an Admission Fair Sharing queue: its LocalQueue pays the entry penalty."""
        cfg = self.config.admission_fair_sharing
        if cfg is None or wl.status.admission is None or not self.uses_afs(wl.status.admission.cluster_queue):
            return
        key = (wl.namespace, wl.queue_name)
        old = self.afs.get(key)
        consumed = old.consumed_resources if old is not None else {}
        last = old.last_update if old is not None else now
        penalty = afs.entry_penalty(afs.total_requests(wl), cfg)
        new = afs.charged(consumed, self._afs_ledger().get(key, {}), penalty, now - last, cfg.usage_half_life_seconds)
        self.afs[key] = AdmissionFairSharingStatus(new, max(now, last))

    def afs_sample(self, now: float) -> list[LocalQueueSpec]:
        """A sampling tick: every LocalQueue of an Admission Fair Sharing queue, with its usage decayed to now."""
        cfg = self.config.admission_fair_sharing
        if cfg is None:
            return []
        out: list[LocalQueueSpec] = []
        for key, lq in sorted(self.local_queues.items()):
            if not self.uses_afs(lq.cluster_queue):
                continue
            old = self.afs.get(key)
            consumed = old.consumed_resources if old is not None else {}
            elapsed = now - old.last_update if old is not None else 0.0
            new = afs.sampled(consumed, self._afs_ledger().get(key, {}), elapsed, cfg.usage_half_life_seconds)
            last = max(now, old.last_update) if old is not None else now
            out.append(replace(lq, admission_fair_sharing_status=AdmissionFairSharingStatus(new, last)))
        return out

    def remove_cluster_queue(self, name: ClusterQueueName) -> list[Workload]:
        self.cluster_queues.pop(name, None)
        self.tree.remove_cluster_queue(name)
        return self.queues.remove_queue(name)

    def set_cohort(self, spec: CohortSpec) -> None:
        self.cohorts[spec.name] = spec
        self.tree.set_cohort(spec.name, quotas=spec.quotas(), parent=spec.parent, weight=spec.fair_sharing_weight)

    def remove_cohort(self, name: CohortName) -> None:
        self.cohorts.pop(name, None)
        self.tree.remove_cohort(name)

    def remove_object(self, kind: str, namespace: str, name: str) -> None:
        """An object of another kind than Workload is gone (its workloads, if any, are dequeued apart)."""
        if kind == "ResourceFlavor":
            self.flavors.pop(FlavorName(name), None)
        elif kind == "Cohort":
            self.remove_cohort(CohortName(name))
        elif kind == "ClusterQueue":
            self.remove_cluster_queue(ClusterQueueName(name))
        elif kind == "LocalQueue":
            self.local_queues.pop((namespace, name), None)
            self.afs.pop((namespace, name), None)
        elif kind == "WorkloadPriorityClass":
            self.workload_priority_classes.pop(name, None)
        elif kind == "PriorityClass":
            self.priority_classes.pop(name, None)
        elif kind == "Namespace":
            self.namespaces.pop(name, None)
        elif kind == "Topology":
            self.topologies.pop(name, None)
        elif kind == "PodGroup":
            self.pod_groups.pop((namespace, name), None)

    def refresh_queue_activity(self) -> None:
        for name, spec in self.cluster_queues.items():
            self.queues.ensure_queue(name, spec.queueing_strategy, active=self.inactive_reason(name) is None)

    def tree_members(self, cq: ClusterQueueName) -> Sequence[ClusterQueueName]:
        """Every ClusterQueue in the same cohort tree as ``cq`` (itself included).

        Asked at every release of quota; kept per tree while the trees keep their shape."""
        tree = self.tree
        node = tree.cluster_queues.get(cq)
        if node is None:
            return (cq,)
        root = node.root()
        if self._members_shape != tree.shape:
            self._members.clear()
            self._members_shape = tree.shape
        hit = self._members.get(id(root))
        if hit is not None and hit[0] is root:
            return hit[1]
        members = tuple(ClusterQueueName(n.name) for n in root.subtree_cluster_queues())
        self._members[id(root)] = (root, members)
        return members

    # -- namespaces and local queues -----------------------------------------

    def namespace_labels(self, namespace: str) -> Mapping[str, str]:
        ns = self.namespaces.get(namespace)
        known = self._labels.get(namespace)
        if known is not None and known[0] is ns:
            return known[1]
        labels = (ns or Namespace(namespace)).effective_labels()
        # Kept with the object they came from: a changed Namespace is a new object.
        self._labels[namespace] = (ns, labels)
        return labels

    def local_queue_for(self, wl: Workload) -> LocalQueueSpec | None:
        return self.local_queues.get((wl.namespace, wl.queue_name))

    def workloads_of_local_queue(self, namespace: str, name: str) -> Iterator[Workload]:
        for wl in self.workloads.values():
            if wl.namespace == namespace and wl.queue_name == name:
                yield wl

    def workloads_of_pod_group(self, namespace: str, name: str) -> Iterator[Workload]:
        """The Jobs' workloads that name a kube-batch PodGroup (annotation scheduling.k8s.io/group-name)."""
        for wl in self.workloads.values():
            if wl.namespace == namespace and group_name(wl.annotations) == name:
                yield wl

    # -- admitted workloads ---------------------------------------------------

    @staticmethod
    def held_usage(wl: Workload) -> dict[FlavorResource, int]:
        """The quota an admission holds now: its usage minus the pods that became reclaimable.

        A value (see model.resources.Quantities): workloads admitted alike with no reclaimable pods
        share one, as they share their Admission and pod sets.
        """
        adm = wl.status.admission
        assert adm is not None
        if wl.status.reclaimable_pods:
            return _held_usage(adm, wl)
        hit = _HELD.get(id(adm))
        if hit is not None and hit[0] is adm and hit[1] is wl.pod_sets:
            return hit[2]
        out = _held_usage(adm, wl)
        if len(_HELD) >= _HELD_LIMIT:
            _HELD.clear()
        _HELD[id(adm)] = (adm, wl.pod_sets, out)
        return out

    def refresh_usage(self, wl: Workload) -> ClusterQueueName | None:
        """Reclaimable pods changed: hold only what the admission still needs."""
        if wl.status.admission is None:
            return None
        cq = wl.status.admission.cluster_queue
        old = self.admitted.get(cq, {}).get(wl.key)
        if old is None:
            return None
        new_usage = self.held_usage(wl)
        node = self.tree.cluster_queues.get(cq)
        if node is not None:
            self.tree.live.remove_all(node, old.usage)
            self.tree.live.add_all(node, new_usage)
        self.admitted[cq][wl.key] = AdmittedWorkload(wl, cq, new_usage, old.admitted_at)
        if self._afs_counting:
            self._afs_count(wl, old.usage, -1)
            self._afs_count(wl, new_usage, 1)
        return cq

    def add_admitted(self, wl: Workload, admitted_at: float) -> AdmittedWorkload:
        assert wl.status.admission is not None
        cq = wl.status.admission.cluster_queue
        info = AdmittedWorkload(wl, cq, self.held_usage(wl), admitted_at)
        held = self.admitted.get(cq)
        if held is None:
            held = self.admitted[cq] = {}
        held[wl.key] = info
        self.holder[wl.key] = cq
        tree = self.tree
        node = tree.cluster_queues.get(cq)
        if node is not None:
            add = tree.live.add_usage
            for fr, v in info.usage.items():
                if v:
                    add(node, fr, v)
        if self._afs_counting:
            self._afs_count(wl, info.usage, 1)
        return info

    def update_admitted(self, wl: Workload) -> None:
        """Refresh the workload object held with an admission (usage unchanged)."""
        if wl.status.admission is None:
            return
        holder = self.admitted.get(wl.status.admission.cluster_queue, {})
        old = holder.get(wl.key)
        if old is not None:
            holder[wl.key] = AdmittedWorkload(wl, old.cluster_queue, old.usage, old.admitted_at)

    def release(self, key: WorkloadKey) -> ClusterQueueName | None:
        """Give back the quota a workload holds; returns its ClusterQueue."""
        cq = self.holder.pop(key, None)
        if cq is None:
            return None
        held = self.admitted.get(cq)
        info = held.pop(key, None) if held is not None else None
        if info is None:
            return cq
        tree = self.tree
        node = tree.cluster_queues.get(cq)
        if node is not None:
            remove = tree.live.remove_usage
            for fr, v in info.usage.items():
                if v:
                    remove(node, fr, v)
        if self._afs_counting:
            self._afs_count(info.workload, info.usage, -1)
        return cq

    def quota_bound(self, cq: ClusterQueueName) -> bool:
        """Whether a NoFit in this queue can only change when its free quota grows (no preemption)."""
        spec = self.cluster_queues.get(cq)
        if spec is None or self.config.fair_sharing.enabled:
            return False
        p = spec.preemption
        return (
            p.within_cluster_queue is PreemptionPolicy.NEVER
            and p.reclaim_within_cohort is ReclaimPolicy.NEVER
            and p.borrow_within_cohort is BorrowWithinCohortPolicy.NEVER
        )

    def release_budget(self, cq: ClusterQueueName) -> ReleaseBudget | None:
        """The free quota of ``cq`` to offer its parked workloads (None: offer nothing, requeue all)."""
        spec = self.cluster_queues.get(cq)
        node = self.tree.cluster_queues.get(cq)
        if spec is None or node is None:
            return None
        view = self.tree.live
        free: dict[str, int] = {}
        exact: set[str] = set()
        for group in spec.resource_groups:
            for res in group.covered_resources:
                amounts = [view.available(node, FlavorResource(f.name, res)) for f in group.flavors]
                free[res] = max(amounts) if amounts else 0
                if len(amounts) == 1:
                    # One flavor: an admission takes exactly its requests from it.
                    exact.add(res)
        return ReleaseBudget(free, exact)

    def could_fit(self, wl: Workload, cq: ClusterQueueName) -> bool:
        budget = self.release_budget(cq)
        return budget is None or budget.fits(wl)

    def holds_quota(self, key: WorkloadKey) -> bool:
        return key in self.holder

    def snapshot(self, now: float, cluster_queues: Iterable[ClusterQueueName] | None = None) -> Snapshot:
        """The cycle's view of the live state; ``cluster_queues``: the queues whose heads it examines
        (only their activity is looked up, so a cycle costs what its heads do; None: every queue)."""
        inactive = self.inactive_queues() if cluster_queues is None else frozenset(
            cq for cq in set(cluster_queues) if self.inactive_reason(cq) is not None)
        return Snapshot(
            tree=self.tree,
            cluster_queues=self.cluster_queues,
            flavors=self.flavors,
            admitted=self.admitted,
            config=self.config,
            inactive=inactive,
            namespace_labels=self.namespace_labels,
            now=now,
            local_queue_usage=self._local_queue_usage_of,
        )

    def _local_queue_usage_of(self, wl: Workload) -> float | None:
        """The usage preemption orders ``wl`` by: its LocalQueue's, where its ClusterQueue orders by it."""
        adm = wl.status.admission
        if adm is None or not self.orders_by_local_queue(adm.cluster_queue):
            return None
        return self.afs_usage((wl.namespace, wl.queue_name))


def _held_usage(adm: Admission, wl: Workload) -> dict[FlavorResource, int]:
    out: dict[FlavorResource, int] = {}
    # As Kueue's totalRequestsFromAdmission: an admission made for fewer
    # pods (partial, or after earlier pods became reclaimable) shrinks only
    # once the pods still to run drop below what it was made for.
    after_reclaim = dict(zip((ps.name for ps in wl.pod_sets), wl.counts_after_reclaim(), strict=True))
    for psa in adm.pod_set_assignments:
        keep = min(psa.count, after_reclaim.get(psa.name, psa.count))
        for res, qty in psa.resource_usage.items():
            flavor = psa.flavors.get(res)
            if flavor is None:
                continue
            amount = qty * keep // psa.count if psa.count else 0
            key = FlavorResource(flavor, res)
            out[key] = out.get(key, 0) + amount
    return out


# Held usage by the identity of an Admission (shared by the workloads admitted alike, see
# Scheduler._admission), for workloads without reclaimable pods: id -> (admission and pod sets,
# kept so the ids stay theirs; the usage).
_HELD: dict[int, tuple[Admission, tuple[PodSet, ...], dict[FlavorResource, int]]] = {}
_HELD_LIMIT = 16_384


class ReleaseBudget:
    """Quota freed by a release, handed out in queue order (see ClusterQueueQueue.queue_inadmissible).

    Exact for resources served by a single flavor; with several flavors it
    only rules out what no flavor could hold and hands out nothing.
    """

    def __init__(self, free: dict[str, int], exact: set[str]) -> None:
        self.free = free
        self.exact = exact

    def fits(self, wl: Workload) -> bool:
        return all(res not in self.free or qty <= self.free[res] for res, qty in quota_needs(wl).items())

    def left(self, resource: str) -> int | None:
        # Only exact amounts can run out: a multi-flavor resource is never ruled out here.
        return self.free[resource] if resource in self.exact else None

    def take(self, wl: Workload) -> bool:
        need = quota_needs(wl)
        if not all(res not in self.free or qty <= self.free[res] for res, qty in need.items()):
            return False
        for res, qty in need.items():
            if res in self.exact:
                self.free[res] -= qty
        return True
