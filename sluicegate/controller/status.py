"""Observed status of queues and cohorts, computed from the live cache on read.

Kueue writes these into each object's status; here they are derived when
asked for, so a scheduling cycle never pays for status bookkeeping.
"""

from __future__ import annotations

from typing import Any

from sluicegate.controller.cache import Cache
from sluicegate.manifest.encode import admission_fair_sharing_status
from sluicegate.model.names import ClusterQueueName, CohortName
from sluicegate.model.queues import AdmissionFairSharingStatus, LocalQueueSpec
from sluicegate.model.resources import FlavorResource
from sluicegate.quantity import format_canonical


def _flavor_usage(cache: Cache, cq: ClusterQueueName, *, admitted_only: bool) -> list[dict[str, Any]]:
    spec = cache.cluster_queues[cq]
    node = cache.tree.cluster_queues.get(cq)
    usage: dict[FlavorResource, int] = {}
    if node is not None and not admitted_only:
        usage = dict(node.usage)
    elif admitted_only:
        for info in cache.admitted.get(cq, {}).values():
            if info.workload.is_admitted:
                for fr, v in info.usage.items():
                    usage[fr] = usage.get(fr, 0) + v
    out: list[dict[str, Any]] = []
    for rg in spec.resource_groups:
        for fq in rg.flavors:
            resources = []
            for res in rg.covered_resources:
                fr = FlavorResource(fq.name, res)
                total = usage.get(fr, 0)
                nominal = fq.resources[res].nominal if res in fq.resources else 0
                resources.append(
                    {
                        "name": res,
                        "total": format_canonical(res, total),
                        "borrowed": format_canonical(res, max(0, total - nominal)),
                    }
                )
            out.append({"name": fq.name, "resources": resources})
    return out


def cluster_queue_status(cache: Cache, cq: ClusterQueueName, *, weighted_share: float | None = None) -> dict[str, Any]:
    held = cache.admitted.get(cq, {})
    admitted = sum(1 for info in held.values() if info.workload.is_admitted)
    reason = cache.inactive_reason(cq)
    status: dict[str, Any] = {
        "conditions": [
            {
                "type": "Active",
                "status": "False" if reason else "True",
                "reason": ("Stopped" if "stopped" in (reason or "") else "FlavorNotFound") if reason else "Ready",
                "message": reason or "Can admit new workloads",
            }
        ],
        "pendingWorkloads": cache.queues.pending_count(cq),
        "reservingWorkloads": len(held),
        "admittedWorkloads": admitted,
        "flavorsReservation": _flavor_usage(cache, cq, admitted_only=False),
        "flavorsUsage": _flavor_usage(cache, cq, admitted_only=True),
    }
    if weighted_share is not None:
        status["fairSharing"] = {"weightedShare": weighted_share}
    return status


def local_queue_status(cache: Cache, lq: LocalQueueSpec) -> dict[str, Any]:
    pending = reserving = admitted = 0
    usage: dict[FlavorResource, int] = {}
    for wl in cache.workloads_of_local_queue(lq.namespace, lq.name):
        if wl.is_finished:
            continue
        if cache.holds_quota(wl.key):
            reserving += 1
            if wl.is_admitted:
                admitted += 1
            if wl.status.admission is not None:
                for fr, v in wl.status.admission.usage().items():
                    usage[fr] = usage.get(fr, 0) + v
        elif wl.active:
            pending += 1
    flavors: dict[str, list[dict[str, str]]] = {}
    for fr, v in sorted(usage.items()):
        flavors.setdefault(fr.flavor, []).append({"name": fr.resource, "total": format_canonical(fr.resource, v)})
    cq_exists = lq.cluster_queue in cache.cluster_queues
    return {
        "conditions": [
            {
                "type": "Active",
                "status": "True" if cq_exists else "False",
                "reason": "Ready" if cq_exists else "ClusterQueueDoesNotExist",
                "message": "Can submit new workloads to localQueue" if cq_exists
                else f"ClusterQueue {lq.cluster_queue} doesn't exist",
            }
        ],
        "pendingWorkloads": pending,
        "reservingWorkloads": reserving,
        "admittedWorkloads": admitted,
        "flavorsReservation": [{"name": f, "resources": r} for f, r in flavors.items()],
        **_local_queue_fair_sharing(cache, lq),
    }


def _local_queue_fair_sharing(cache: Cache, lq: LocalQueueSpec) -> dict[str, Any]:
    """Kueue's status.fairSharing of a LocalQueue whose ClusterQueue uses Admission Fair Sharing: the decayed
    usage (consumedResources, lastUpdate).  The weighted usage it is ordered by is the
    kueue_local_queue_admission_fair_sharing_usage metric."""
    key = (lq.namespace, lq.name)
    cq = cache.cluster_queues.get(lq.cluster_queue)
    if cq is not None and cq.dominant_share_admission:
        # The sluicegate extension: the current dominant share over the weight it is ordered by.
        return {"fairSharing": {"weightedShare": cache.afs_usage(key)}}
    if not cache.uses_afs(lq.cluster_queue):
        return {}
    afs = cache.afs.get(key) or AdmissionFairSharingStatus({}, 0.0)
    status = admission_fair_sharing_status(afs)
    if afs.last_update == 0.0:
        del status["lastUpdate"]  # never sampled nor charged yet
    return {"fairSharing": {"admissionFairSharingStatus": status}}


def cohort_status(cache: Cache, name: CohortName, *, weighted_share: float | None = None) -> dict[str, Any]:
    node = cache.tree.cohorts.get(name)
    status: dict[str, Any] = {}
    if node is not None:
        status["clusterQueues"] = sorted(node.child_cqs)
        status["childCohorts"] = sorted(node.child_cohorts)
    if weighted_share is not None:
        status["fairSharing"] = {"weightedShare": weighted_share}
    return status
