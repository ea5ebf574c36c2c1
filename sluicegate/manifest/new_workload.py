"""A new Workload given as fields (the typed creation item) rather than as a document's text.

Bulk submitters create thousands of workloads that share a few specs and
differ in their metadata.  A :class:`NewWorkload` carries the metadata as
fields and the spec as JSON text; :func:`decode_new_workload` returns exactly
what :func:`sluicegate.manifest.decode.decode` returns for the equivalent
document (:meth:`NewWorkload.document`), or raises the same error.

Each distinct valid spec is decoded once: the decoded spec is kept, keyed by
the spec's exact bytes and by everything else its decoding depends on (the
apiVersion, and whether the metadata names a kube-batch PodGroup, which makes
spec.queueName optional).  A repeated spec then costs a dict lookup, not a
parse and a decode.  Anything not known valid at once (a spec not seen yet,
metadata that fails a check) takes the document's path, so the problems are
reported as for the document, by the same code, field paths included.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass

from sluicegate.manifest.decode import decode
from sluicegate.manifest.decode_workload import _NO_ANNOTATIONS, SPECS_MEMO_SIZE, _kept, _Spec
from sluicegate.manifest.dialect import _ANNOTATIONS_MAX_BYTES, DEFAULT_NAMESPACE, SLUICEGATE_V1BETA2
from sluicegate.manifest.errors import FieldError, ManifestError
from sluicegate.manifest.loader import parse_json_part
from sluicegate.manifest.syntax import (
    dns_label_problem,
    dns_subdomain_problem,
    label_value_problem,
    qualified_name_problem,
)
from sluicegate.model import Workload
from sluicegate.model.podgroups import group_name
from sluicegate.model.workloads import NO_STATUS

__all__ = ["NewWorkload", "decode_new_workload"]

Entries = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class NewWorkload:
    """The document ``{"apiVersion", "kind": "Workload", "metadata": {name, namespace, labels, annotations},
    "spec"}`` as fields; ``spec`` is the spec's JSON text.  Empty strings stand for absent fields."""

    source: str
    namespace: str
    name: str
    spec: bytes
    labels: Entries = ()
    annotations: Entries = ()
    api_version: str = ""

    @property
    def ref(self) -> tuple[str, str]:
        """(namespace, name) of the workload it creates (the decoder's default namespace applied)."""
        return self.namespace or DEFAULT_NAMESPACE, self.name

    def document(self) -> dict[str, object]:
        """The equivalent document (the spec parsed): what the slow path decodes, and what tests compare."""
        meta: dict[str, object] = {}
        if self.name:
            meta["name"] = self.name
        if self.namespace:
            meta["namespace"] = self.namespace
        if self.labels:
            meta["labels"] = _entries(self.labels, "metadata.labels", self)
        if self.annotations:
            meta["annotations"] = _entries(self.annotations, "metadata.annotations", self)
        doc: dict[str, object] = {"apiVersion": self.api_version or SLUICEGATE_V1BETA2, "kind": "Workload",
                                  "metadata": meta}
        if self.spec:
            doc["spec"] = parse_json_part(self.spec.decode("utf-8", errors="replace"), self.source, "spec")
        return doc


def _entries(entries: Entries, path: str, item: NewWorkload) -> dict[str, str]:
    out = dict(entries)
    if len(out) != len(entries):
        seen: set[str] = set()
        for key, _ in entries:
            if key in seen:
                raise ManifestError(item.source, [FieldError(path, f"found the key {key!r} twice; each field may "
                                                                   "appear only once")],
                                    kind="Workload", name="/".join(item.ref))
            seen.add(key)
    return out


# (apiVersion, the spec's bytes, whether spec.queueName is required) -> the decoded spec; valid specs only.
_specs: dict[tuple[str, bytes, bool], _Spec] = {}
# Label sets, checked once each and shared by every workload that has them (as the decoder's labels memo).
LABELS_MEMO_SIZE = 4096
_labels: dict[Entries, dict[str, str]] = {}


def _valid_labels(entries: Entries) -> dict[str, str] | None:
    """The labels as a (shared) dict when every one is valid and no key repeats, else None."""
    if not entries:
        return {}
    shared = _labels.get(entries)
    if shared is not None:
        return shared
    out = dict(entries)
    if len(out) != len(entries):
        return None
    for k, v in entries:
        if qualified_name_problem(k) is not None or label_value_problem(v) is not None:
            return None
    return _kept(_labels, entries, out, LABELS_MEMO_SIZE)


def _valid_annotations(entries: Entries) -> Mapping[str, str] | None:
    if not entries:
        return _NO_ANNOTATIONS
    out = dict(entries)
    if len(out) != len(entries):
        return None
    size = 0
    for k, v in entries:
        if qualified_name_problem(k) is not None:
            return None
        size += len(k.encode()) + len(v.encode())
    return out if size <= _ANNOTATIONS_MAX_BYTES else None


def decode_new_workload(item: NewWorkload) -> Workload:
    """The Workload ``decode(item.document())`` returns; raises the ManifestError it raises."""
    api = item.api_version or SLUICEGATE_V1BETA2
    annotations = _valid_annotations(item.annotations)
    labels = _valid_labels(item.labels)
    name, namespace = item.name, item.namespace
    if (annotations is None or labels is None or not name or dns_subdomain_problem(name) is not None
            or (namespace and dns_label_problem(namespace) is not None)):
        return _decoded(item, api, annotations)
    spec = _specs.get((api, item.spec, not group_name(annotations)))
    if spec is None:
        return _decoded(item, api, annotations)
    return Workload(
        namespace=sys.intern(namespace or DEFAULT_NAMESPACE),
        name=name,
        uid="",
        creation_timestamp=0.0,
        queue_name=spec.queue_name,
        pod_sets=spec.pod_sets,
        priority=spec.priority,
        priority_class=spec.priority_class,
        active=spec.active,
        maximum_execution_time_seconds=spec.maximum_execution_time_seconds,
        labels=labels,
        annotations=annotations,
        generation=1,
        status=NO_STATUS,
    )


def _decoded(item: NewWorkload, api: str, annotations: Mapping[str, str] | None) -> Workload:
    """The document's path: decoded in full, its spec kept for the next item when it is valid."""
    obj = decode(item.document(), source=item.source)
    assert isinstance(obj, Workload), obj  # kind is Workload: anything else failed decoding
    if annotations is not None and item.spec:
        _kept(_specs, (api, item.spec, not group_name(annotations)), _Spec(
            queue_name=obj.queue_name, pod_sets=obj.pod_sets, priority=obj.priority,
            priority_class=obj.priority_class, active=obj.active,
            maximum_execution_time_seconds=obj.maximum_execution_time_seconds), SPECS_MEMO_SIZE)
    return obj
