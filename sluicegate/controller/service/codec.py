"""Model objects <-> protobuf messages (the controller side of the wire)."""

from __future__ import annotations

import json
from typing import Any

from sluicegate.controller.errors import InvalidArgument
from sluicegate.controller.manager import Manager, Obj, ref_of
from sluicegate.controller.podgroups import group_status
from sluicegate.controller.status import cluster_queue_status, cohort_status, local_queue_status
from sluicegate.manifest.encode import encode
from sluicegate.manifest.errors import ManifestError
from sluicegate.manifest.loader import RawDocument, parse_text
from sluicegate.model.podgroups import PodGroup
from sluicegate.model.queues import ClusterQueueSpec, CohortSpec, LocalQueueSpec
from sluicegate.v1 import objects_pb2


def document_of(manager: Manager, obj: Obj) -> dict[str, Any]:
    """The full Kubernetes-shaped document, with observed status for queues."""
    doc = encode(obj)
    cache = manager.cache
    if isinstance(obj, ClusterQueueSpec):
        doc["status"] = cluster_queue_status(
            cache, obj.name, weighted_share=manager.weighted_share(obj.name, cohort=False)
        )
    elif isinstance(obj, LocalQueueSpec):
        doc["status"] = local_queue_status(cache, obj)
    elif isinstance(obj, CohortSpec):
        doc["status"] = cohort_status(cache, obj.name, weighted_share=manager.weighted_share(obj.name, cohort=True))
    elif isinstance(obj, PodGroup):
        st = group_status(obj, cache.workloads_of_pod_group(obj.namespace, obj.name))
        status: dict[str, Any] = {"phase": st.phase, "running": st.running, "succeeded": st.succeeded,
                                  "failed": st.failed}
        if st.workload:
            status["workload"] = st.workload
        if st.message:
            status["message"] = st.message
        doc["status"] = status
    return doc


def object_to_proto(manager: Manager, obj: Obj) -> objects_pb2.Object:
    kind, ns, name = ref_of(obj)
    version = manager.versions.get((kind, ns, name), 0)
    if isinstance(obj, _OBSERVED):
        # Queues carry their live status, computed for each reply.
        doc = document_of(manager, obj)
        doc.setdefault("metadata", {})["resourceVersion"] = str(version)
        body = json.dumps(doc, separators=(",", ":")).encode()
    else:
        # Everything else is exactly what was stored: the write's own bytes.
        body = manager.encoded(obj).with_resource_version(version)
    return objects_pb2.Object(kind=kind, namespace=ns, name=name, json=body, resource_version=version)


# Kinds whose documents include observed status that no write records.
_OBSERVED = (ClusterQueueSpec, LocalQueueSpec, CohortSpec, PodGroup)


def documents_from_proto(docs: Any) -> list[RawDocument]:
    out: list[RawDocument] = []
    for i, d in enumerate(docs):
        source = d.source or f"request#{i}"
        text = d.body.decode("utf-8", errors="replace")
        # The client library sends JSON; the JSON parser is far cheaper than YAML's.
        try:
            out.extend(parse_text(text, source, fmt="json" if text.lstrip().startswith("{") else "yaml"))
        except ManifestError as exc:
            # Text that does not parse is the caller's to fix, like any invalid field.
            raise InvalidArgument("", str(exc)) from exc
    return out
