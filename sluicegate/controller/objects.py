"""The nine kinds the controller stores: their names, references, lookup and validation.

Pure: reads the cache, changes nothing.  The manager applies, gets, lists
and deletes objects through these functions; the committer names what it
stores with :func:`ref_of`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from sluicegate.controller.cache import Cache
from sluicegate.controller.errors import InvalidArgument
from sluicegate.controller.store import StoredObject
from sluicegate.manifest.decode import decode, find_cohort_cycle
from sluicegate.manifest.decode_queues import STATUS_UNSUPPORTED
from sluicegate.manifest.errors import ManifestError
from sluicegate.manifest.loader import RawDocument
from sluicegate.model.names import workload_key
from sluicegate.model.objects import Namespace, PriorityClass, ResourceFlavor, WorkloadPriorityClass
from sluicegate.model.podgroups import BatchQueue, PodGroup
from sluicegate.model.queues import ClusterQueueSpec, CohortSpec, LocalQueueSpec
from sluicegate.model.topology import HOSTNAME_LABEL, Topology
from sluicegate.model.workloads import Workload

log = logging.getLogger(__name__)

Obj = Any  # one of the decoded model objects
Ref = tuple[str, str, str]

KIND_OF: dict[type, str] = {
    ResourceFlavor: "ResourceFlavor",
    CohortSpec: "Cohort",
    ClusterQueueSpec: "ClusterQueue",
    LocalQueueSpec: "LocalQueue",
    WorkloadPriorityClass: "WorkloadPriorityClass",
    PriorityClass: "PriorityClass",
    Namespace: "Namespace",
    Topology: "Topology",
    Workload: "Workload",
    PodGroup: "PodGroup",
    # A kube-batch Queue is stored as the ClusterQueue it becomes (controller/podgroups.py).
    BatchQueue: "ClusterQueue",
}
NAMESPACED = {"LocalQueue", "Workload", "PodGroup"}
# The order objects are loaded in: each after what it refers to.
LOAD_ORDER = {"Namespace": 0, "Topology": 0, "ResourceFlavor": 1, "WorkloadPriorityClass": 2, "PriorityClass": 2,
              "Cohort": 3, "ClusterQueue": 4, "LocalQueue": 5, "PodGroup": 5, "Workload": 6}
KIND_ALIASES = {
    "resourceflavor": "ResourceFlavor",
    "resourceflavors": "ResourceFlavor",
    "flavor": "ResourceFlavor",
    "flavors": "ResourceFlavor",
    "rf": "ResourceFlavor",
    "topology": "Topology",
    "topologies": "Topology",
    "cohort": "Cohort",
    "cohorts": "Cohort",
    "clusterqueue": "ClusterQueue",
    "clusterqueues": "ClusterQueue",
    "cq": "ClusterQueue",
    "localqueue": "LocalQueue",
    "localqueues": "LocalQueue",
    "queue": "LocalQueue",
    "queues": "LocalQueue",
    "lq": "LocalQueue",
    "workloadpriorityclass": "WorkloadPriorityClass",
    "workloadpriorityclasses": "WorkloadPriorityClass",
    "wpc": "WorkloadPriorityClass",
    "priorityclass": "PriorityClass",
    "priorityclasses": "PriorityClass",
    "pc": "PriorityClass",
    "namespace": "Namespace",
    "namespaces": "Namespace",
    "ns": "Namespace",
    "workload": "Workload",
    "workloads": "Workload",
    "wl": "Workload",
    "podgroup": "PodGroup",
    "podgroups": "PodGroup",
    "pg": "PodGroup",
}


def canonical_kind(kind: str) -> str:
    k = KIND_ALIASES.get(kind.lower())
    if k is None:
        raise InvalidArgument(
            "kind", f"unknown kind {kind!r}; expected one of {', '.join(sorted(set(KIND_ALIASES.values())))}")
    return k


def ref_of(obj: Obj) -> Ref:
    kind = KIND_OF[type(obj)]
    if isinstance(obj, LocalQueueSpec):
        return kind, obj.namespace, obj.name
    if isinstance(obj, (Workload, PodGroup)):
        return kind, obj.namespace, obj.name
    return kind, "", str(obj.name)


def _table(c: Cache, kind: str) -> dict[Any, Any]:
    tables: dict[str, dict[Any, Any]] = {
        "ResourceFlavor": c.flavors,
        "Cohort": c.cohorts,
        "ClusterQueue": c.cluster_queues,
        "WorkloadPriorityClass": c.workload_priority_classes,
        "PriorityClass": c.priority_classes,
        "Namespace": c.namespaces,
        "Topology": c.topologies,
    }
    return tables[kind]


def existing(c: Cache, kind: str, ns: str, name: str) -> Obj | None:
    """The object of that kind and name as the controller has it (None: there is none)."""
    if kind == "LocalQueue":
        return c.local_queues.get((ns, name))
    if kind == "Workload":
        return c.workloads.get(workload_key(ns, name))
    if kind == "PodGroup":
        return c.pod_groups.get((ns, name))
    return _table(c, kind).get(name)


def listed(c: Cache, kind: str, namespace: str = "") -> list[Obj]:
    """Every object of a kind other than Workload, in name order."""
    if kind == "LocalQueue":
        return [lq for (ns, _), lq in sorted(c.local_queues.items()) if not namespace or ns == namespace]
    if kind == "PodGroup":
        return [pg for (ns, _), pg in sorted(c.pod_groups.items()) if not namespace or ns == namespace]
    table = _table(c, kind)
    return [table[k] for k in sorted(table)]


def action(c: Cache, obj: Obj) -> str:
    """What applying ``obj`` does: created, configured or unchanged."""
    old = existing(c, *ref_of(obj))
    if old is None:
        return "created"
    return "unchanged" if old == obj else "configured"


def decode_for_apply(docs: Sequence[RawDocument]) -> list[Obj]:
    """The documents' objects, or InvalidArgument naming every problem (apply is all or nothing)."""
    objs: list[Obj] = []
    errors: list[str] = []
    for doc in docs:
        try:
            obj = decode(doc, source=doc.source)
        except ManifestError as exc:
            errors.append(str(exc))
            continue
        if KIND_OF.get(type(obj)) is None:
            errors.append(
                f"{doc.source}: kind {type(obj).__name__} is not applied to a running controller "
                "(the Configuration is read from the controller's --config file; nodes register through "
                "their agents, Node documents are for sluicectl simulate)"
            )
            continue
        if isinstance(obj, LocalQueueSpec) and obj.admission_fair_sharing_status is not None:
            # Only the controller writes a LocalQueue's status (its Admission Fair Sharing usage).
            errors.append(f"{doc.source}: LocalQueue/{obj.name}: status: {STATUS_UNSUPPORTED}")
            continue
        objs.append(obj)
    if errors:
        raise InvalidArgument("", "\n".join(errors))
    seen: set[Ref] = set()
    for obj in objs:
        r = ref_of(obj)
        if r in seen:
            raise InvalidArgument("metadata.name",
                                  f"{r[0]} {r[1] + '/' if r[1] else ''}{r[2]} appears twice in one apply")
        seen.add(r)
    return objs


def check_topology_updates(c: Cache, objs: Sequence[Obj]) -> None:
    """Kueue's CRD rules on updates: a flavor's topologyName cannot change once set, and a Topology's
    levels change only when kubernetes.io/hostname is the lowest level before and after."""
    for obj in objs:
        if isinstance(obj, ResourceFlavor):
            old = c.flavors.get(obj.name)
            if old is not None and old.topology_name is not None and obj.topology_name != old.topology_name:
                raise InvalidArgument(
                    "spec.topologyName",
                    f"ResourceFlavor {obj.name}: topologyName is immutable when topologyName is set "
                    f"(it is {old.topology_name})")
        elif isinstance(obj, Topology):
            prev = c.topologies.get(obj.name)
            if prev is not None and prev.levels != obj.levels and not (
                    prev.levels[-1:] == (HOSTNAME_LABEL,) and obj.levels[-1:] == (HOSTNAME_LABEL,)):
                raise InvalidArgument(
                    "spec.levels",
                    f"Topology {obj.name}: levels are mutable only when kubernetes.io/hostname is the lowest "
                    "level both before and after the change")


def check_cohort_cycles(c: Cache, objs: Sequence[Obj]) -> None:
    parents: dict[str, str | None] = {name: spec.parent for name, spec in c.cohorts.items()}
    touched = False
    for obj in objs:
        if isinstance(obj, CohortSpec):
            parents[obj.name] = obj.parent
            touched = True
    if not touched:
        return
    cycle = find_cohort_cycle(parents)
    if cycle:
        raise InvalidArgument("spec.parentName", f"cohort parents form a cycle: {' -> '.join(cycle)}")


def spec_difference(existing: Workload, submitted: Workload) -> str:
    """The first spec field in which a submission differs from the stored workload ("" if none).

    Only what the submitter writes counts: status, uid, timestamps,
    generation, labels and annotations are metadata or filled by the server,
    the resolved priority comes from the class when one is named, and
    ``active`` is the operator's switch (SetActive), not the submission's.
    """
    if existing.queue_name != submitted.queue_name:
        return "spec.queueName"
    if existing.pod_sets != submitted.pod_sets:
        return "spec.podSets"
    if submitted.priority_class is not None:
        if existing.priority_class != submitted.priority_class:
            return "spec.priorityClassRef"
    elif not any(ps.priority_class_name for ps in submitted.pod_sets):
        # (A pod template's priorityClassName is part of podSets, compared above.)
        if existing.priority_class is not None:
            return "spec.priorityClassRef"
        if existing.priority != submitted.priority:
            return "spec.priority"
    if existing.maximum_execution_time_seconds != submitted.maximum_execution_time_seconds:
        return "spec.maximumExecutionTimeSeconds"
    return ""


def workload_state(wl: Workload) -> str:
    if wl.is_finished:
        return "Finished"
    if not wl.active:
        return "Inactive"
    if wl.is_admitted:
        return "Admitted"
    if wl.has_quota_reservation:
        return "QuotaReserved"
    return "Pending"


def parse_label_selector(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        if "=" not in part:
            raise InvalidArgument("label_selector", f"expected key=value, got {part!r}")
        k, v = part.split("=", 1)
        out[k.strip().rstrip("=")] = v.strip()
    return out


def decode_stored(stored: StoredObject) -> Any | None:
    """The model object a stored row holds, or None (logged) when it cannot be decoded: it is skipped."""
    try:
        return decode(json.loads(stored.body), source=f"store:{stored.kind}/{stored.namespace}/{stored.name}")
    except (ManifestError, ValueError) as exc:
        log.error("stored %s %s/%s cannot be decoded, skipping it: %s", stored.kind, stored.namespace, stored.name,
                  exc)
        return None
