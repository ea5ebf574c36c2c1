"""kube-batch (``scheduling.incubator.k8s.io/v1alpha1``) and Volcano (``scheduling.volcano.sh/v1beta1``)
PodGroup and Queue documents.

The fields follow kube-batch's ``pkg/apis/scheduling/v1alpha1/types.go`` and
Volcano's ``scheduling/v1beta1`` types.  What sluicegate cannot honour is
refused with the reason; see docs/kube-batch.md for the mapping.
"""

from __future__ import annotations

from sluicegate.manifest.dialect import Meta
from sluicegate.manifest.reader import Fields, read_quantity
from sluicegate.manifest.syntax import dns_subdomain_problem, qualified_name_problem, show
from sluicegate.model.podgroups import KUBE_BATCH_V1ALPHA1, BatchQueue, PodGroup

POD_GROUP_FIELDS = ("minMember", "queue", "priorityClassName", "minResources")
POD_GROUP_UNSUPPORTED = {
    "minTaskMember": "a Job has one pod template (one task); use minMember",
    "networkTopology": "network topology aware scheduling is not implemented",
    "subGroupPolicy": "a Job has one pod template (one task); use minMember",
}
QUEUE_FIELDS = ("weight", "capability")
QUEUE_UNSUPPORTED = {
    "reclaimable": "every queue's borrowed share can be reclaimed (Kueue's reclaimWithinCohort: Any)",
    "guarantee": "a Queue's guaranteed quota is a ClusterQueue's nominalQuota: write a ClusterQueue",
    "deserved": "the deserved share follows spec.weight (Kueue's fair-sharing weight)",
    "extendClusters": "there is one cluster",
    "affinity": "a Queue's nodes are chosen by ResourceFlavor nodeLabels",
    "type": "there is one kind of queue",
    "parent": "hierarchical queues are Kueue Cohorts: write Cohorts and ClusterQueues",
    "priority": "queues are ordered by their share (fair sharing), not by a priority",
    "dequeueStrategy": "a ClusterQueue's queueingStrategy decides the order; write a ClusterQueue",
}
# The state fields kube-batch and Volcano write; they are reported, never applied.
STATUS_UNSUPPORTED = "status is computed by the controller from the PodGroup's workload; remove it"
# Kubernetes' PodGroup minMember is an int32.
_MAX_MEMBERS = 2**31 - 1


def _amounts(spec: Fields, key: str) -> dict[str, int]:
    raw = spec.get(key)
    if raw is None:
        return {}
    path = spec.path(key)
    if not isinstance(raw, dict):
        spec.error(key, f"must be a mapping of resource names to quantities, got {show(raw)}")
        return {}
    out: dict[str, int] = {}
    for res, value in raw.items():
        if not isinstance(res, str) or qualified_name_problem(res) is not None:
            spec.problems.add(path, f"resource names must be qualified names, got {show(res)}")
            continue
        amount = read_quantity(value, f"{path}[{res}]", res, spec.problems)
        if amount is not None:
            if amount.canonical < 0:
                spec.problems.add(f"{path}[{res}]", f"must be non-negative, got {amount.text}")
                continue
            out[res] = amount.canonical
    return out


def read_pod_group(doc: Fields, meta: Meta, api_version: str) -> PodGroup:
    spec = doc.mapping("spec", known=POD_GROUP_FIELDS, unsupported=POD_GROUP_UNSUPPORTED)
    if spec is None:
        return PodGroup(namespace=meta.namespace, name=meta.name, api_version=api_version)
    min_member = spec.integer("minMember", default=1, minimum=1, maximum=_MAX_MEMBERS)
    # kube-batch's and Volcano's default queue is called "default".
    queue = spec.string("queue", default="default", check=dns_subdomain_problem) or "default"
    min_resources = _amounts(spec, "minResources")
    if api_version == KUBE_BATCH_V1ALPHA1 and min_resources:
        spec.error("minResources", f"is a scheduling.volcano.sh/v1beta1 field; {KUBE_BATCH_V1ALPHA1} has none")
    return PodGroup(
        namespace=meta.namespace,
        name=meta.name,
        min_member=min_member or 1,
        queue=queue,
        priority_class_name=spec.string("priorityClassName", check=dns_subdomain_problem),
        min_resources=min_resources,
        api_version=api_version,
        uid=meta.uid,
        creation_timestamp=meta.creation_timestamp,
        labels=meta.labels,
        annotations=meta.annotations,
    )


def read_batch_queue(doc: Fields, meta: Meta, api_version: str) -> BatchQueue:
    spec = doc.mapping("spec", known=QUEUE_FIELDS, unsupported=QUEUE_UNSUPPORTED)
    if spec is None:
        return BatchQueue(name=meta.name, api_version=api_version)
    # kube-batch's Queue weight defaults to 1; a weight of 0 would deserve nothing at all.
    weight = spec.integer("weight", default=1, minimum=1, maximum=_MAX_MEMBERS)
    capability = _amounts(spec, "capability")
    return BatchQueue(name=meta.name, weight=weight or 1, capability=capability, api_version=api_version)
