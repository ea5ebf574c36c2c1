"""Manifest documents -> model values, with every problem reported by field path.

:func:`decode` validates one document the way Kueue's CRD schema and
webhooks would, and returns the model object it describes.  Checks that
need several documents (duplicates, cycles among cohorts) are in
:func:`decode_all`; :func:`find_cohort_cycle` is exported for the controller,
which meets cohorts one at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from sluicegate.manifest.decode_config import configuration_fields, read_configuration
from sluicegate.manifest.decode_job import is_job, job_to_workload, remap_errors  # noqa: E402
from sluicegate.manifest.decode_objects import (
    read_namespace,
    read_node,
    read_priority_class,
    read_resource_flavor,
    read_topology,
    read_workload_priority_class,
)
from sluicegate.manifest.decode_podgroups import STATUS_UNSUPPORTED as GROUP_STATUS_UNSUPPORTED
from sluicegate.manifest.decode_podgroups import read_batch_queue, read_pod_group
from sluicegate.manifest.decode_queues import (
    STATUS_UNSUPPORTED,
    read_cluster_queue,
    read_cohort,
    read_local_queue,
)
from sluicegate.manifest.decode_workload import read_workload
from sluicegate.manifest.dialect import KINDS_BY_API_VERSION, Dialect, peek_identity, read_metadata
from sluicegate.manifest.errors import FieldError, ManifestError, ManifestErrors
from sluicegate.manifest.loader import RawDocument
from sluicegate.manifest.reader import Fields, Problems
from sluicegate.manifest.refs import Decoded, object_ref
from sluicegate.manifest.syntax import show
from sluicegate.model import CohortSpec

__all__ = ["Decoded", "decode", "decode_all", "find_cohort_cycle"]

_OBJECT_FIELDS = ("apiVersion", "kind", "metadata")
_TOP_FIELDS: dict[str, tuple[str, ...]] = {
    "ResourceFlavor": (*_OBJECT_FIELDS, "spec"),
    "Cohort": (*_OBJECT_FIELDS, "spec"),
    "ClusterQueue": (*_OBJECT_FIELDS, "spec"),
    # Its status holds the Admission Fair Sharing usage the controller stores (a user's apply refuses it).
    "LocalQueue": (*_OBJECT_FIELDS, "spec", "status"),
    "WorkloadPriorityClass": (*_OBJECT_FIELDS, "value", "description"),
    "PriorityClass": (*_OBJECT_FIELDS, "value", "globalDefault", "description", "preemptionPolicy"),
    "Namespace": _OBJECT_FIELDS,
    "Workload": (*_OBJECT_FIELDS, "spec", "status"),
    "PodGroup": (*_OBJECT_FIELDS, "spec"),
    "Queue": (*_OBJECT_FIELDS, "spec"),
    "Topology": (*_OBJECT_FIELDS, "spec"),
    "Node": (*_OBJECT_FIELDS, "spec", "status"),
}
_TOP_UNSUPPORTED: dict[str, dict[str, str]] = {
    "ResourceFlavor": {"status": STATUS_UNSUPPORTED},
    "Cohort": {"status": STATUS_UNSUPPORTED},
    "ClusterQueue": {"status": STATUS_UNSUPPORTED},
    "Namespace": {
        "spec": "only a namespace's labels matter here (ClusterQueue namespaceSelectors match them)",
        "status": STATUS_UNSUPPORTED,
    },
    "PodGroup": {"status": GROUP_STATUS_UNSUPPORTED},
    "Topology": {"status": STATUS_UNSUPPORTED},
    "Queue": {"status": GROUP_STATUS_UNSUPPORTED},
}

_Reader = Callable[[Fields, Dialect], Decoded]


def _object_reader(kind: str) -> _Reader:
    def read(doc: Fields, dialect: Dialect) -> Decoded:
        meta = read_metadata(doc, kind)
        if kind == "ResourceFlavor":
            return read_resource_flavor(doc, meta)
        if kind == "Cohort":
            return read_cohort(doc, meta, dialect)
        if kind == "ClusterQueue":
            return read_cluster_queue(doc, meta, dialect)
        if kind == "LocalQueue":
            return read_local_queue(doc, meta)
        if kind == "WorkloadPriorityClass":
            return read_workload_priority_class(doc, meta)
        if kind == "PriorityClass":
            return read_priority_class(doc, meta)
        if kind == "Namespace":
            return read_namespace(meta)
        if kind == "PodGroup":
            return read_pod_group(doc, meta, dialect.api_version)
        if kind == "Node":
            return read_node(doc, meta)
        if kind == "Topology":
            return read_topology(doc, meta)
        if kind == "Queue":
            return read_batch_queue(doc, meta, dialect.api_version)
        return read_workload(doc, meta, dialect)

    return read


def _identify(body: Mapping[object, object], problems: Problems) -> tuple[str, str]:
    api_version = body.get("apiVersion")
    kind = body.get("kind")
    if api_version is None:
        problems.add("apiVersion", "required field is missing (for example sluicegate.io/v1beta2)")
    elif not isinstance(api_version, str) or api_version not in KINDS_BY_API_VERSION:
        known = "; ".join(f"{v} ({', '.join(k)})" for v, k in KINDS_BY_API_VERSION.items())
        problems.add("apiVersion", f"unsupported apiVersion {show(api_version)}; sluicegate reads {known}")
    if kind is None:
        problems.add("kind", "required field is missing")
    elif not isinstance(kind, str):
        problems.add("kind", f"must be a string, got {show(kind)}")
    elif isinstance(api_version, str) and api_version in KINDS_BY_API_VERSION:
        kinds = KINDS_BY_API_VERSION[api_version]
        if kind not in kinds:
            problems.add("kind", f"must be one of {', '.join(kinds)} for apiVersion {api_version}, got {show(kind)}")
    if problems:
        return "", ""
    assert isinstance(api_version, str) and isinstance(kind, str)
    return api_version, kind


def decode(doc: RawDocument | Mapping[str, object], *, source: str = "") -> Decoded:
    """Validate one document and return the model object it describes.

    Raises :class:`ManifestError` listing every problem of the document;
    nothing is returned for a document with any problem.
    """
    raw: object = doc
    if isinstance(doc, RawDocument):
        raw = doc.body
        source = source or doc.source
    elif isinstance(doc, Mapping) and not isinstance(doc, dict):
        raw = dict(doc)
    if not isinstance(raw, dict):
        raise ManifestError(
            source, [FieldError("", f"a document must be a mapping with apiVersion and kind, got {show(raw)}")]
        )
    body: dict[object, object] = raw
    if is_job(body):
        # A Job is submitted as the Workload it stands for (Kueue's Job integration).
        translated = job_to_workload(body, source)
        try:
            return decode(translated, source=source)
        except ManifestError as exc:
            raise remap_errors(exc) from None
    hint_kind, hint_name = peek_identity(body)
    problems = Problems()
    api_version, kind = _identify(body, problems)
    if problems:
        raise ManifestError(source, problems.items, kind=hint_kind, name=hint_name)
    dialect = Dialect(api_version)
    if kind == "Configuration":
        known, unsupported = configuration_fields()
        fields = Fields(body, "", problems, known=known, unsupported=unsupported)
        obj: Decoded = read_configuration(fields, dialect)
    else:
        fields = Fields(body, "", problems, known=_TOP_FIELDS[kind], unsupported=_TOP_UNSUPPORTED.get(kind))
        obj = _object_reader(kind)(fields, dialect)
    if problems:
        raise ManifestError(source, problems.items, kind=hint_kind, name=hint_name)
    return obj


def decode_all(docs: Iterable[RawDocument]) -> list[Decoded]:
    """Decode a set of documents meant to be applied together.

    On top of each document's own rules: an object (kind, namespace, name)
    may be defined once, there is at most one Configuration, and cohort
    parents may not form a cycle.  Raises :class:`ManifestErrors` with the
    problems of every failing document.
    """
    decoded: list[Decoded] = []
    failures: list[ManifestError] = []
    first_source: dict[tuple[str, str, str], str] = {}
    cohort_source: dict[str, str] = {}
    parents: dict[str, str | None] = {}
    for doc in docs:
        try:
            obj = decode(doc)
        except ManifestError as exc:
            failures.append(exc)
            continue
        ref = object_ref(obj)
        kind, namespace, name = ref
        label = f"{namespace}/{name}" if namespace else name
        if ref in first_source:
            what = "a second Configuration" if kind == "Configuration" else f"{kind} {label} is also defined"
            failures.append(
                ManifestError(
                    doc.source,
                    [FieldError("metadata.name" if name else "", f"duplicate: {what} in {first_source[ref]}")],
                    kind=kind,
                    name=label,
                )
            )
            continue
        first_source[ref] = doc.source
        if isinstance(obj, CohortSpec):
            parents[obj.name] = obj.parent
            cohort_source[obj.name] = doc.source
        decoded.append(obj)
    # Each cycle is reported once, then cut, so every cycle gets named.
    for _ in range(len(parents)):
        cycle = find_cohort_cycle(parents)
        if cycle is None:
            break
        loop = " -> ".join([*cycle, cycle[0]])
        failures.append(
            ManifestError(
                cohort_source[cycle[0]],
                [FieldError("spec.parentName", f"cohort parents form a cycle: {loop}; a cohort tree must have a root")],
                kind="Cohort",
                name=cycle[0],
            )
        )
        for member in cycle:
            parents[member] = None
    if failures:
        raise ManifestErrors(failures)
    return decoded


def find_cohort_cycle(parents: Mapping[str, str | None]) -> list[str] | None:
    """The first cycle among cohort parents, or None.

    ``parents`` maps each cohort to its parentName (None for a root; a
    parent missing from the mapping is an implicit root, as in Kueue).  The
    cycle is returned in parent order starting from the cohort met first
    when walking cohorts by name: a->b->a gives ``["a", "b"]``, a cohort that
    is its own parent gives ``["a"]``.
    """
    finished: set[str] = set()
    for start in sorted(parents):
        path: list[str] = []
        position: dict[str, int] = {}
        node: str | None = start
        # Each step visits a new cohort, so the walk ends within len(parents).
        while node is not None and node in parents and node not in finished:
            if node in position:
                return path[position[node] :]
            position[node] = len(path)
            path.append(node)
            node = parents[node]
        finished.update(path)
    return None
