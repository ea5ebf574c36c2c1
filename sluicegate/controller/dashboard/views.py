"""What the dashboard shows, as JSON-ready dicts, read through the Manager.

Every function takes the Manager and, where namespaces matter, the set the
caller may see (None: all).  Nothing here writes; numbers come from the same
sources as the API's (``status.py`` for queue status, the quota tree for
usage), so the page and ``sluicectl`` agree.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sluicegate.controller.manager import Manager, workload_state
from sluicegate.controller.scheduling.quota import QuotaNode
from sluicegate.controller.status import cluster_queue_status, local_queue_status
from sluicegate.model.queues import ClusterQueueSpec, CohortSpec, LocalQueueSpec, ResourceGroup
from sluicegate.model.resources import FlavorResource
from sluicegate.model.workloads import Workload
from sluicegate.quantity import format_canonical

# The workload list returns at most this many rows (the newest first); the count says how many matched.
MAX_WORKLOAD_ROWS = 500


def _amount(resource: str, value: int | None) -> dict[str, Any] | None:
    """A quantity both as its canonical integer (for bars) and as a person writes it."""
    if value is None:
        return None
    return {"value": value, "text": format_canonical(resource, value)}


def _measured(value: int) -> dict[str, Any]:
    """Bytes an agent measured, rounded for reading (they are seldom a whole number of Mi)."""
    for suffix, factor in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if value >= factor:
            return {"value": value, "text": f"{value / factor:.1f}{suffix}"}
    return {"value": value, "text": str(value)}


def _quota_rows(m: Manager, groups: tuple[ResourceGroup, ...], node: QuotaNode | None) -> list[dict[str, Any]]:
    """One row per flavor/resource of a queue or cohort: quota, limits, usage, borrowing."""
    live = m.cache.tree.live
    rows: list[dict[str, Any]] = []
    for rg in groups:
        for fq in rg.flavors:
            for res in rg.covered_resources:
                q = fq.resources.get(res)
                fr = FlavorResource(fq.name, res)
                if node is None:
                    used = borrowed = 0
                elif node.is_cohort:
                    used = sum(cq.usage.get(fr, 0) for cq in node.subtree_cluster_queues())
                    borrowed = live.borrowed(node, fr)
                else:
                    used, borrowed = node.usage.get(fr, 0), live.borrowed(node, fr)
                rows.append({
                    "flavor": fq.name, "resource": res,
                    "nominal": _amount(res, q.nominal if q else 0),
                    "borrowingLimit": _amount(res, q.borrowing_limit if q else None),
                    "lendingLimit": _amount(res, q.lending_limit if q else None),
                    "usage": _amount(res, used),
                    "borrowed": _amount(res, borrowed),
                })
    return rows


def tree(m: Manager) -> dict[str, Any]:
    """Cohorts (explicit, or named only by a queue) and ClusterQueues with quota and usage per flavor."""
    t = m.cache.tree
    cohorts: list[dict[str, Any]] = []
    specs = {c.name: c for c in m.list("Cohort") if isinstance(c, CohortSpec)}
    for name in sorted(set(t.cohorts) | set(specs)):
        node = t.cohorts.get(name)
        spec = specs.get(name)
        cohorts.append({
            "name": name,
            "parent": (spec.parent if spec else (node.parent.name if node and node.parent else None)),
            "explicit": spec is not None,
            "resources": _quota_rows(m, spec.resource_groups if spec else (), node),
            "weightedShare": m.weighted_share(name, cohort=True),
        })
    queues: list[dict[str, Any]] = []
    for cq in m.list("ClusterQueue"):
        assert isinstance(cq, ClusterQueueSpec)
        st = cluster_queue_status(m.cache, cq.name)
        active = st["conditions"][0]
        queues.append({
            "name": cq.name, "cohort": cq.cohort,
            "pending": st["pendingWorkloads"], "reserving": st["reservingWorkloads"],
            "admitted": st["admittedWorkloads"],
            "active": active["status"] == "True", "reason": active["reason"], "message": active["message"],
            "resources": _quota_rows(m, cq.resource_groups, t.cluster_queues.get(cq.name)),
            "weightedShare": m.weighted_share(cq.name, cohort=False),
        })
    return {"cohorts": cohorts, "clusterQueues": queues}


def local_queues(m: Manager, namespaces: Collection[str] | None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for lq in m.list("LocalQueue"):
        assert isinstance(lq, LocalQueueSpec)
        if namespaces is not None and lq.namespace not in namespaces:
            continue
        st = local_queue_status(m.cache, lq)
        active = st["conditions"][0]
        out.append({
            "namespace": lq.namespace, "name": lq.name, "clusterQueue": lq.cluster_queue,
            "pending": st["pendingWorkloads"], "reserving": st["reservingWorkloads"],
            "admitted": st["admittedWorkloads"], "active": active["status"] == "True", "message": active["message"],
        })
    return out


def _cluster_queue_of(m: Manager, wl: Workload) -> str:
    if wl.status.admission is not None:
        return wl.status.admission.cluster_queue
    lq = m.cache.local_queue_for(wl)
    return lq.cluster_queue if lq is not None else ""


def _why(wl: Workload) -> str:
    """The newest condition's message: why it waits, or how it ended."""
    conds = sorted(wl.status.conditions, key=lambda c: c.last_transition_time)
    return conds[-1].message if conds else ""


def workload_row(m: Manager, wl: Workload) -> dict[str, Any]:
    pods = wl.status.pods
    return {
        "namespace": wl.namespace, "name": wl.name, "queue": wl.queue_name,
        "clusterQueue": _cluster_queue_of(m, wl), "state": workload_state(wl), "priority": wl.priority,
        "created": wl.creation_timestamp, "pods": sum(ps.count for ps in wl.pod_sets),
        "running": sum(1 for p in pods if p.phase == "Running"), "message": _why(wl),
    }


def workloads(
    m: Manager, namespaces: Collection[str] | None, *, namespace: str = "", queue: str = "", state: str = "",
    text: str = "", limit: int = MAX_WORKLOAD_ROWS,
) -> dict[str, Any]:
    """Workloads matching every filter given (``queue`` matches the LocalQueue or the ClusterQueue)."""
    needle = text.lower()
    matched: list[Workload] = []
    for wl in m.list_workloads(namespace=namespace, state=state, namespaces=namespaces):
        if queue and queue != wl.queue_name and queue != _cluster_queue_of(m, wl):
            continue
        if needle and needle not in wl.name.lower() and not any(
            needle in f"{k}={v}".lower() for k, v in wl.labels.items()
        ):
            continue
        matched.append(wl)
    matched.reverse()  # newest first; rows are built only for those shown
    return {"total": len(matched), "items": [workload_row(m, wl) for wl in matched[:limit]]}


def workload_detail(m: Manager, wl: Workload) -> dict[str, Any]:
    adm = wl.status.admission
    return {
        **workload_row(m, wl),
        "uid": wl.uid, "active": wl.active, "labels": dict(wl.labels), "annotations": dict(wl.annotations),
        "conditions": [
            {"type": c.type, "status": c.status, "reason": c.reason, "message": c.message,
             "lastTransitionTime": c.last_transition_time}
            for c in sorted(wl.status.conditions, key=lambda c: c.last_transition_time)
        ],
        "podSets": [{"name": ps.name, "count": ps.count,
                     "requests": {r: format_canonical(r, v) for r, v in sorted(ps.requests.items())}}
                    for ps in wl.pod_sets],
        "admission": None if adm is None else {
            "clusterQueue": adm.cluster_queue,
            "podSets": [{"name": a.name, "count": a.count, "flavors": dict(a.flavors)}
                        for a in adm.pod_set_assignments],
        },
        "podRecords": [
            {"name": p.name, "podSet": p.pod_set, "node": p.node, "phase": p.phase, "reason": p.reason,
             "message": p.message, "exitCode": p.exit_code, "ready": p.ready, "restarts": p.restarts,
             "startedAt": p.started_at, "finishedAt": p.finished_at}
            for p in (wl.status.pods or wl.status.last_pods)
        ],
        "requeues": wl.status.requeue_state.count if wl.status.requeue_state else 0,
    }


def nodes(m: Manager) -> list[dict[str, Any]]:
    """Every node: allocatable, what bound pods request, and what the agent last measured."""
    out: list[dict[str, Any]] = []
    for n in sorted(m.fleet.registry.nodes.values(), key=lambda n: n.name):
        u = n.usage
        requested = n.requested()
        out.append({
            "name": n.name, "ready": n.ready, "reason": n.not_ready_reason, "labels": dict(n.labels),
            "conditions": list(n.shown_conditions), "lastHeartbeat": n.last_heartbeat, "agentVersion": n.agent_version,
            "pods": len(n.pods) + len(n.static_pods),
            "resources": [
                {"resource": r, "allocatable": _amount(r, q), "requested": _amount(r, requested.get(r, 0))}
                for r, q in sorted(n.allocatable.items())
            ],
            "usage": {
                "cpuCores": round(u.cpu_usage_cores, 3),
                "memoryUsed": _measured(max(0, u.memory_total - u.memory_available)),
                "memoryTotal": _measured(u.memory_total),
                "nodefsAvailable": _measured(u.nodefs_available),
                "observedAt": u.observed_at,
            },
        })
    return out
