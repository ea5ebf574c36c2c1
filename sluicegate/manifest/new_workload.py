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
parse and a decode.  Label sets and annotations (JSON too) are checked once
per distinct text the same way.  Anything not known valid at once (a spec
not seen yet, metadata that fails a check) takes the document's path, so
the problems are reported as for the document, by the same code, field
paths included.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import NamedTuple

from sluicegate.manifest.decode import decode
from sluicegate.manifest.decode_workload import _NO_ANNOTATIONS, SPECS_MEMO_SIZE, _kept, _Spec
from sluicegate.manifest.dialect import _ANNOTATIONS_MAX_BYTES, DEFAULT_NAMESPACE, SLUICEGATE_V1BETA2
from sluicegate.manifest.errors import ManifestError
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
from sluicegate.strictjson import DECODER

__all__ = ["NewWorkload", "decode_new_workload"]


class NewWorkload(NamedTuple):
    """The document ``{"apiVersion", "kind": "Workload", "metadata": {name, namespace, labels, annotations},
    "spec"}`` as fields; ``labels``, ``annotations`` and ``spec`` are their JSON text.  Empty stands for
    absent.  (A tuple: one is made per item of a bulk creation, at a third of a frozen dataclass's cost.)"""

    source: str
    namespace: str
    name: str
    spec: bytes
    labels: bytes = b""
    annotations: bytes = b""
    api_version: str = ""

    @property
    def ref(self) -> tuple[str, str]:
        """(namespace, name) of the workload it creates (the decoder's default namespace applied)."""
        return self.namespace or DEFAULT_NAMESPACE, self.name

    def document(self) -> dict[str, object]:
        """The equivalent document (its JSON parts parsed): what the slow path decodes, and what tests
        compare.  Raises ManifestError, naming the field, for a part that does not parse."""
        meta: dict[str, object] = {}
        if self.name:
            meta["name"] = self.name
        if self.namespace:
            meta["namespace"] = self.namespace
        if self.labels:
            meta["labels"] = self._parsed(self.labels, "metadata.labels")
        if self.annotations:
            meta["annotations"] = self._parsed(self.annotations, "metadata.annotations")
        doc: dict[str, object] = {"apiVersion": self.api_version or SLUICEGATE_V1BETA2, "kind": "Workload",
                                  "metadata": meta}
        if self.spec:
            doc["spec"] = self._parsed(self.spec, "spec")
        return doc

    def _parsed(self, text: bytes, path: str) -> object:
        try:
            return parse_json_part(text.decode("utf-8", errors="replace"), self.source, path)
        except ManifestError as exc:
            raise ManifestError(exc.source, exc.errors, kind="Workload", name="/".join(self.ref)) from None


# (apiVersion, the spec's bytes, whether spec.queueName is required) -> the decoded spec; valid specs only.
_specs: dict[tuple[str, bytes, bool], _Spec] = {}
# Label sets and annotations by their JSON, checked once each and shared by every workload that has them
# (as the decoder's labels memo); valid ones only.
MAPS_MEMO_SIZE = 4096
# Texts longer than this are decoded each time rather than kept: the memos are bounded in entries (at
# most 4096 x 16 KiB each), and what bulk submitters repeat is small (a spec of a few pod sets is 1-2 KiB).
MEMO_MAX_TEXT = 16 * 1024
_labels: dict[bytes, dict[str, str]] = {}
# Valid namespaces seen, each as its interned string.
_namespaces: dict[str, str] = {}
_annotations: dict[bytes, Mapping[str, str]] = {}


def _string_map(text: bytes) -> dict[str, str] | None:
    """The JSON mapping of strings ``text`` holds, or None (it does not parse, repeats a key, holds another value)."""
    try:
        value = DECODER.decode(text.decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    if type(value) is not dict or not all(type(v) is str for v in value.values()):
        return None
    return value


def _valid_labels(text: bytes) -> dict[str, str] | None:
    """The labels as a (shared) dict when every one is valid, else None (the document's path says why)."""
    if not text:
        return {}
    shared = _labels.get(text)
    if shared is not None:
        return shared
    labels = _string_map(text)
    if labels is None:
        return None
    for k, v in labels.items():
        if qualified_name_problem(k) is not None or label_value_problem(v) is not None:
            return None
    return _kept(_labels, text, labels, MAPS_MEMO_SIZE) if len(text) <= MEMO_MAX_TEXT else labels


def _valid_annotations(text: bytes) -> Mapping[str, str] | None:
    if not text:
        return _NO_ANNOTATIONS
    shared = _annotations.get(text)
    if shared is not None:
        return shared
    annotations = _string_map(text)
    if annotations is None:
        return None
    size = 0
    for k, v in annotations.items():
        if qualified_name_problem(k) is not None:
            return None
        size += len(k.encode()) + len(v.encode())
    if size > _ANNOTATIONS_MAX_BYTES:
        return None
    if len(text) > MEMO_MAX_TEXT:
        return annotations or _NO_ANNOTATIONS
    return _kept(_annotations, text, annotations or _NO_ANNOTATIONS, MAPS_MEMO_SIZE)


def decode_new_workload(item: NewWorkload) -> Workload:
    """The Workload ``decode(item.document())`` returns; raises the ManifestError it raises."""
    api = item.api_version or SLUICEGATE_V1BETA2
    annotations = _valid_annotations(item.annotations)
    labels = _valid_labels(item.labels)
    name, namespace = item.name, item.namespace
    # A namespace checked before is known valid (bulk submitters use a few): its interned string, kept.
    known = _namespaces.get(namespace) if namespace else DEFAULT_NAMESPACE
    if known is None and dns_label_problem(namespace) is None:
        known = _kept(_namespaces, namespace, sys.intern(namespace), MAPS_MEMO_SIZE)
    if annotations is None or labels is None or not name or dns_subdomain_problem(name) is not None or known is None:
        return _decoded(item, api)
    spec = _specs.get((api, item.spec, not (annotations and group_name(annotations))))
    if spec is None:
        return _decoded(item, api)
    # Every field given, in WORKLOAD_FIELDS' order: passed by position, since binding fourteen keywords
    # cost as much again as making the workload (test_new_workload checks the order).
    return Workload(known, name, "", 0.0, spec.queue_name, spec.pod_sets,
                    spec.priority, spec.priority_class, spec.active, spec.maximum_execution_time_seconds, labels,
                    annotations, 1, NO_STATUS)


# The order of Workload's parameters that decode_new_workload passes by position.
WORKLOAD_FIELDS = ("namespace", "name", "uid", "creation_timestamp", "queue_name", "pod_sets", "priority",
                   "priority_class", "active", "maximum_execution_time_seconds", "labels", "annotations",
                   "generation", "status")


def _decoded(item: NewWorkload, api: str) -> Workload:
    """The document's path: decoded in full, its spec kept for the next item when it is valid."""
    obj = decode(item.document(), source=item.source)
    assert isinstance(obj, Workload), obj  # kind is Workload: anything else failed decoding
    if item.spec and len(item.spec) <= MEMO_MAX_TEXT:
        _kept(_specs, (api, item.spec, not group_name(obj.annotations)), _Spec(
            queue_name=obj.queue_name, pod_sets=obj.pod_sets, priority=obj.priority,
            priority_class=obj.priority_class, active=obj.active,
            maximum_execution_time_seconds=obj.maximum_execution_time_seconds), SPECS_MEMO_SIZE)
    return obj
