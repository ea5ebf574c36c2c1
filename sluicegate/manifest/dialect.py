"""API versions we read, and the object metadata common to every kind."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sluicegate.manifest.reader import INT64_MAX, Fields
from sluicegate.manifest.syntax import (
    dns_label_problem,
    dns_subdomain_problem,
    label_value_problem,
    qualified_name_problem,
)
from sluicegate.manifest.timefmt import parse_rfc3339
from sluicegate.model.podgroups import KUBE_BATCH_V1ALPHA1, VOLCANO_V1BETA1

SLUICEGATE_V1BETA2 = "sluicegate.io/v1beta2"
KUEUE_V1BETA2 = "kueue.x-k8s.io/v1beta2"
KUEUE_V1BETA1 = "kueue.x-k8s.io/v1beta1"
CONFIG_V1BETA2 = "config.kueue.x-k8s.io/v1beta2"
CONFIG_V1BETA1 = "config.kueue.x-k8s.io/v1beta1"
SCHEDULING_V1 = "scheduling.k8s.io/v1"
CORE_V1 = "v1"

KUEUE_KINDS = (
    "ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass", "Workload", "Topology"
)

# The kinds each apiVersion carries.  sluicegate.io/v1beta2 is Kueue
# v1beta2 under our own group, plus our Configuration (Kueue's v1beta2
# Configuration with an explicit ``enable`` on its optional sections, so a
# section can be written down and still be switched off).
KINDS_BY_API_VERSION: dict[str, tuple[str, ...]] = {
    SLUICEGATE_V1BETA2: (*KUEUE_KINDS, "Configuration"),
    KUEUE_V1BETA2: KUEUE_KINDS,
    KUEUE_V1BETA1: KUEUE_KINDS,
    SCHEDULING_V1: ("PriorityClass",),
    CORE_V1: ("Namespace", "Node"),
    CONFIG_V1BETA2: ("Configuration",),
    CONFIG_V1BETA1: ("Configuration",),
    # kube-batch and Volcano gangs (docs/kube-batch.md).
    KUBE_BATCH_V1ALPHA1: ("PodGroup", "Queue"),
    VOLCANO_V1BETA1: ("PodGroup", "Queue"),
}

NAMESPACED_KINDS = frozenset({"LocalQueue", "Workload", "PodGroup"})
DEFAULT_NAMESPACE = "default"


@dataclass(frozen=True, slots=True)
class Dialect:
    """Which spelling of the API a document uses."""

    api_version: str

    @property
    def v1beta1(self) -> bool:
        """Kueue's older API: ClusterQueue ``cohort``, fungibility ``Borrow``/``Preempt``, ``enable`` flags."""
        return self.api_version in (KUEUE_V1BETA1, CONFIG_V1BETA1)

    @property
    def native(self) -> bool:
        """Our own apiVersion, which may carry sluicegate extensions (``status.extra``)."""
        return self.api_version == SLUICEGATE_V1BETA2


METADATA_FIELDS = (
    "name",
    "namespace",
    "uid",
    "labels",
    "annotations",
    "creationTimestamp",
    "generation",
    "resourceVersion",
)
# Metadata fields refused, with the reason: one table for every kind and for batch/v1 Jobs.
METADATA_UNSUPPORTED = {
    "generateName": "only creation draws a name (sluicectl create, the Create call): apply needs metadata.name",
    "finalizers": "sluicegate manages object lifetimes itself",
    "ownerReferences": "there is no garbage collector of owned objects",
    "managedFields": "server-side apply bookkeeping has no meaning here; remove it",
    "deletionTimestamp": "an object being deleted cannot be applied",
    "deletionGracePeriodSeconds": "an object being deleted cannot be applied",
    "selfLink": "remove it; it is output-only in Kubernetes",
}
# Kubernetes' cap on the total size of an object's annotations.
_ANNOTATIONS_MAX_BYTES = 256 * 1024


@dataclass(frozen=True, slots=True)
class Meta:
    name: str = ""
    namespace: str = ""
    uid: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    creation_timestamp: float = 0.0
    generation: int = 1


def read_metadata(doc: Fields, kind: str) -> Meta:
    meta = doc.mapping("metadata", known=METADATA_FIELDS, unsupported=METADATA_UNSUPPORTED, required=True)
    if meta is None:
        return Meta()
    # Namespaces are DNS labels; everything else may be a dotted subdomain.
    name_check = dns_label_problem if kind == "Namespace" else dns_subdomain_problem
    name = meta.string("name", required=True, check=name_check)
    namespace = ""
    if kind in NAMESPACED_KINDS:
        namespace = meta.string("namespace", default=DEFAULT_NAMESPACE, check=dns_label_problem) or DEFAULT_NAMESPACE
    elif meta.has("namespace"):
        meta.error("namespace", f"{kind} is cluster-scoped and takes no namespace; remove metadata.namespace")
    uid = meta.string("uid")
    labels = _shared_labels(meta)
    annotations = meta.string_map("annotations", key_check=qualified_name_problem)
    size = sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items())
    if size > _ANNOTATIONS_MAX_BYTES:
        meta.error("annotations", f"must total at most {_ANNOTATIONS_MAX_BYTES} bytes, got {size}")
    created = 0.0
    stamp = meta.optional_string("creationTimestamp")
    if stamp:
        try:
            created = parse_rfc3339(stamp)
        except ValueError as exc:
            meta.error("creationTimestamp", str(exc))
    generation = meta.integer("generation", default=1, minimum=0, maximum=INT64_MAX)
    # resourceVersion is the API server's optimistic-concurrency token: text
    # exported from a cluster carries it, and it means nothing to us.
    meta.optional_string("resourceVersion")
    return Meta(
        name=name,
        namespace=namespace,
        uid=uid,
        labels=labels,
        annotations=annotations,
        creation_timestamp=created,
        generation=generation if generation is not None else 1,
    )


# Objects submitted in bulk carry a handful of distinct label sets (a job
# array's, a generator's class): each distinct valid set is checked once and
# its dict shared by every object that has it (models treat them as
# immutable).  Keyed by ``repr`` of the parsed mapping; bounded, oldest first out.
LABELS_MEMO_SIZE = 4096
_labels_memo: dict[str, dict[str, str]] = {}


def _shared_labels(meta: Fields) -> dict[str, str]:
    raw = meta.get("labels")
    if not isinstance(raw, dict) or not raw:
        return meta.string_map("labels", key_check=qualified_name_problem, value_check=label_value_problem)
    key = repr(raw)
    shared = _labels_memo.get(key)
    if shared is not None:
        return shared
    before = len(meta.problems)
    labels = meta.string_map("labels", key_check=qualified_name_problem, value_check=label_value_problem)
    if len(meta.problems) == before:
        if len(_labels_memo) >= LABELS_MEMO_SIZE:
            del _labels_memo[next(iter(_labels_memo))]
        _labels_memo[key] = labels
    return labels


def peek_identity(body: Mapping[Any, object]) -> tuple[str, str]:
    """Best-effort (kind, "name" or "namespace/name") for error headers, before validation."""
    kind = body.get("kind")
    kind_s = kind if isinstance(kind, str) else ""
    meta = body.get("metadata")
    if not isinstance(meta, dict):
        return kind_s, ""
    name = meta.get("name")
    name_s = name if isinstance(name, str) else ""
    if kind_s in NAMESPACED_KINDS and name_s:
        ns = meta.get("namespace")
        return kind_s, f"{ns if isinstance(ns, str) and ns else DEFAULT_NAMESPACE}/{name_s}"
    return kind_s, name_s
