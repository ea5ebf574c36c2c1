"""Create the plan's objects over the controller's gRPC API, workloads at their due times.

Everything goes through :class:`sluicegate.client.Client`, the library
behind sluicectl: one Apply for the queue objects, then the workloads on
one bulk creation stream.  Creation follows an absolute schedule (queue creation + due), so a
slow call delays only the workloads behind it instead of stretching every
later interval as sleeping between calls would.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from bench.kueue_scheduler.config import TAS_NODE_GROUP_VALUE, Plan, QueuePlan, WorkloadPlan
from sluicegate.client import Client, Document
from sluicegate.quantity import format_canonical

API = "sluicegate.io/v1beta2"
FLAVOR = "rf"
# Kueue's generator labels: the fake nodes read the runtime from the pod's labels.
RUNNING_TIME_LABEL = "kueue.x-k8s.io/performance-scheduler-running-ms"
CLASS_LABEL = "kueue.x-k8s.io/performance-scheduler-class"
CLEANUP_LABEL = "kueue.x-k8s.io/performance-scheduler-cleanup"
# Kueue's TAS podset annotations (kueue.x-k8s.io/v1beta2 constants.go), as a Job's pod template carries them.
REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"
SLICE_REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"


def priority_class_name(priority: int) -> str:
    return f"perf-priority-{priority}" if priority >= 0 else f"perf-priority-minus-{-priority}"


def _cpu(m: int) -> str:
    return format_canonical("cpu", m)


def flavor_name(plan: Plan) -> str:
    return plan.flavor.name if plan.flavor is not None else FLAVOR


def topology_documents(plan: Plan) -> list[dict[str, object]]:
    """The Topology (when the flavor names one) and the ResourceFlavor, as Kueue's generateTopologyResource
    and generateResourceFlavor write them."""
    docs: list[dict[str, object]] = []
    flavor: dict[str, object] = {"apiVersion": API, "kind": "ResourceFlavor",
                                 "metadata": {"name": flavor_name(plan), "labels": {CLEANUP_LABEL: "true"}}}
    spec: dict[str, object] = {}
    f = plan.flavor
    if f is not None and f.node_label is not None:
        spec["nodeLabels"] = {f.node_label: TAS_NODE_GROUP_VALUE}
    if f is not None and f.topology_name is not None:
        assert plan.topology is not None and plan.topology.name == f.topology_name
        docs.append({"apiVersion": API, "kind": "Topology",
                     "metadata": {"name": plan.topology.name, "labels": {CLEANUP_LABEL: "true"}},
                     "spec": {"levels": [{"nodeLabel": label} for label in plan.topology.node_labels]}})
        spec["topologyName"] = f.topology_name
    if spec:
        flavor["spec"] = spec
    return [*docs, flavor]


def queue_documents(plan: Plan) -> list[dict[str, object]]:
    """Topology, ResourceFlavor, Cohorts, WorkloadPriorityClasses, then per queue: Namespace, ClusterQueue,
    LocalQueue."""
    docs = topology_documents(plan)
    for cohort in sorted({q.cohort for q in plan.queues}):
        docs.append({"apiVersion": API, "kind": "Cohort", "metadata": {"name": cohort, "labels": {CLEANUP_LABEL: "true"}}})
    for p in plan.priorities:
        docs.append({"apiVersion": API, "kind": "WorkloadPriorityClass", "metadata": {"name": priority_class_name(p)},
                     "value": p, "description": "scheduler performance test"})
    for q in plan.queues:
        docs.extend(_queue(q, flavor_name(plan)))
    return docs


def _queue(q: QueuePlan, flavor: str) -> list[dict[str, object]]:
    quota: dict[str, object] = {"name": "cpu", "nominalQuota": _cpu(q.nominal_m)}
    if q.borrowing_limit_m is not None:
        quota["borrowingLimit"] = _cpu(q.borrowing_limit_m)
    labels = {CLASS_LABEL: q.class_name, CLEANUP_LABEL: "true"}
    spec: dict[str, object] = {
        "cohortName": q.cohort,
        "namespaceSelector": {},
        "preemption": {"reclaimWithinCohort": q.reclaim_within_cohort, "withinClusterQueue": q.within_cluster_queue},
        "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": flavor, "resources": [quota]}]}],
    }
    if q.min_admit_duration_s is not None:
        spec["minAdmitDuration"] = f"{q.min_admit_duration_s:g}s"
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": q.name, "labels": {CLEANUP_LABEL: "true"}}},
        {
            "apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": q.name, "labels": labels}, "spec": spec,
        },
        {"apiVersion": API, "kind": "LocalQueue", "metadata": {"name": q.name, "namespace": q.name},
         "spec": {"clusterQueue": q.name}},
    ]


def topology_annotations(w: WorkloadPlan) -> dict[str, str]:
    """The pod template's TAS annotations for the workload's constraint, as Kueue's generator sets the
    podset topology request: required and preferred at the level; "balanced" is its
    SliceRequiredTopologyRequest at the level plus SliceSizeTopologyRequest."""
    if w.tas_constraint is None or w.tas_level is None:
        return {}
    if w.tas_constraint == "required":
        return {REQUIRED_TOPOLOGY: w.tas_level}
    if w.tas_constraint == "preferred":
        return {PREFERRED_TOPOLOGY: w.tas_level}
    if w.tas_constraint == "balanced":
        return {SLICE_REQUIRED_TOPOLOGY: w.tas_level, SLICE_SIZE: str(w.slice_size)}
    raise ValueError(f"workload {w.namespace}/{w.name}: unknown TAS constraint {w.tas_constraint!r}")


def workload_document(w: WorkloadPlan) -> str:
    template: dict[str, object] = {"spec": {
        # Never executed: the fake nodes only pretend to run it.
        "containers": [{"name": "main", "command": ["true"], "resources": {"requests": {"cpu": _cpu(w.request_m)}}}],
    }}
    annotations = topology_annotations(w)
    if annotations:
        template["metadata"] = {"annotations": annotations}
    return json.dumps({
        "apiVersion": API, "kind": "Workload",
        "metadata": {"name": w.name, "namespace": w.namespace,
                     "labels": {RUNNING_TIME_LABEL: str(w.runtime_ms), CLASS_LABEL: w.class_name}},
        "spec": {
            "queueName": w.cluster_queue,
            "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass",
                                 "name": priority_class_name(w.priority)},
            "podSets": [{"name": "main", "count": w.pod_count, "template": template}],
        },
    }, separators=(",", ":"))


@dataclass(slots=True)
class CreationStats:
    created: int = 0
    # How late each creation call returned relative to its due time (s).
    lag: list[float] = field(default_factory=list)
    first_at: float | None = None
    last_at: float | None = None


def queue_apply_documents(plan: Plan) -> list[Document]:
    """The queue objects as create_queues applies them (for 1,000 ClusterQueues about 0.1 s to make)."""
    return [Document(json.dumps(d), f"generator#{i}") for i, d in enumerate(queue_documents(plan))]


async def create_queues(client: Client, plan: Plan, documents: list[Document] | None = None) -> float:
    """Apply every queue object in one call; returns the monotonic time it returned.

    ``documents``: queue_apply_documents(plan) made beforehand, so that the controller does not wait
    while the bench makes them."""
    await client.apply(documents if documents is not None else queue_apply_documents(plan))
    return time.monotonic()


async def create_workloads(
    client: Client,
    plan: Plan,
    *,
    start: float,
    concurrency: int,
    on_created: Callable[[WorkloadPlan, float], None] | None = None,
) -> CreationStats:
    """Create each workload at ``start`` + its due time (monotonic seconds).

    The documents are handed to the client library's bulk creation
    (:meth:`Client.create_workloads`) as they fall due: one CreateStream
    call, whatever is due at once goes out as one request, and at most
    ``concurrency`` creations are unanswered at a time.  Each answer is
    timed when it arrives.
    """
    stats = CreationStats()
    workloads = plan.workloads

    async def due() -> AsyncIterator[Document]:
        for w in workloads:
            delay = start + w.due - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)  # pacing to the configured schedule, not synchronisation
            yield Document(workload_document(w), "generator")

    answered = 0
    async for result in client.create_workloads(due(), window=concurrency):
        w = workloads[answered]
        answered += 1
        if isinstance(result, Exception):
            raise result
        if not result.created:
            raise RuntimeError(f"workload {w.namespace}/{w.name} already existed; use a fresh store")
        now = time.monotonic()
        stats.created += 1
        stats.lag.append(now - (start + w.due))
        stats.first_at = now if stats.first_at is None else stats.first_at
        stats.last_at = now
        if on_created is not None:
            on_created(w, now)
    return stats
