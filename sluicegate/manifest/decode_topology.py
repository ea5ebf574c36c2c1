"""A pod set's topology request: Workload ``podSets[].topologyRequest`` or the podset annotations
Kueue reads on a pod template (pkg/controller/jobframework/tas_validation.go)."""

from __future__ import annotations

from collections.abc import Mapping

from sluicegate.manifest.reader import Fields, Problems, keyed
from sluicegate.manifest.syntax import qualified_name_problem, show
from sluicegate.model.topology import (
    PREFERRED_TOPOLOGY_ANNOTATION,
    REQUIRED_TOPOLOGY_ANNOTATION,
    SLICE_REQUIRED_TOPOLOGY_ANNOTATION,
    SLICE_SIZE_ANNOTATION,
    UNCONSTRAINED_TOPOLOGY_ANNOTATION,
    TopologyAssignment,
    TopologyDomain,
    TopologyRequest,
)

MAX_LEVEL_LENGTH = 63
REQUEST_FIELDS = ("required", "preferred", "unconstrained", "podSetSliceRequiredTopology", "podSetSliceSize")
REQUEST_UNSUPPORTED = {
    "podIndexLabel": "pods are indexed by sluicegate itself; there is no pod index label to name",
    "subGroupIndexLabel": "there are no replicated Jobs (JobSet) in sluicegate",
    "subGroupCount": "there are no replicated Jobs (JobSet) in sluicegate",
    "podSetGroupName": "PodSet groups (leader/worker placement) are not implemented",
    "podsetSliceRequiredTopologyConstraints": "multi-layer slice constraints (alpha TASMultiLayerTopology) "
                                              "are not implemented",
}


def _check_level(value: str) -> str | None:
    if len(value) > MAX_LEVEL_LENGTH:
        return f"must be at most {MAX_LEVEL_LENGTH} characters, got {len(value)}"
    return qualified_name_problem(value)


def _checked(request: TopologyRequest, count: int, problems: Problems, where: str,
             names: tuple[str, str, str, str, str]) -> TopologyRequest | None:
    """The rules shared by both spellings; ``names`` are the five field or annotation paths."""
    required, preferred, unconstrained, slice_level, slice_size = names
    given = [n for n, v in ((required, request.required), (preferred, request.preferred),
                            (unconstrained, request.unconstrained or None)) if v is not None]
    if len(given) > 1:
        problems.add(where, f"must not contain more than one topology request: [{', '.join(given)}]")
    if request.slice_required is not None and request.slice_size is None:
        problems.add(slice_size, f"must be set when {slice_level} is specified")
    if request.slice_required is None and request.slice_size is not None:
        problems.add(slice_size, f"may not be set when {slice_level} is not specified")
    if request.slice_size is not None and request.slice_size >= 1 and count % request.slice_size:
        problems.add(slice_size, f"must divide the pod set's count ({count}), got {request.slice_size}")
    return request if request.explicit else None


def read_topology_request(ps: Fields, annotations: Mapping[str, str], annotations_path: str,
                          count: int) -> TopologyRequest | None:
    """The pod set's request: its topologyRequest field, else its template's podset annotations."""
    tr = ps.mapping("topologyRequest", known=REQUEST_FIELDS, unsupported=REQUEST_UNSUPPORTED)
    if tr is not None:
        size = tr.integer("podSetSliceSize", minimum=1)
        request = TopologyRequest(
            required=tr.optional_string("required", check=_check_level),
            preferred=tr.optional_string("preferred", check=_check_level),
            unconstrained=tr.boolean("unconstrained", default=False),
            slice_required=tr.optional_string("podSetSliceRequiredTopology", check=_check_level),
            slice_size=size,
        )
        f = REQUEST_FIELDS
        names = (tr.path(f[0]), tr.path(f[1]), tr.path(f[2]), tr.path(f[3]), tr.path(f[4]))
        return _checked(request, count, ps.problems, tr.base, names)
    return read_annotations(annotations, annotations_path, ps.problems, count)


def read_annotations(annotations: Mapping[str, str], path: str, problems: Problems,
                     count: int) -> TopologyRequest | None:
    """Kueue's podset annotations on a pod template's metadata."""
    names = (REQUIRED_TOPOLOGY_ANNOTATION, PREFERRED_TOPOLOGY_ANNOTATION, UNCONSTRAINED_TOPOLOGY_ANNOTATION,
             SLICE_REQUIRED_TOPOLOGY_ANNOTATION, SLICE_SIZE_ANNOTATION)
    if not any(n in annotations for n in names):
        return None
    paths = (keyed(path, names[0]), keyed(path, names[1]), keyed(path, names[2]), keyed(path, names[3]),
             keyed(path, names[4]))

    def level(i: int) -> str | None:
        value = annotations.get(names[i])
        if value is not None and (problem := _check_level(value)) is not None:
            problems.add(paths[i], problem)
        return value

    unconstrained = False
    raw = annotations.get(UNCONSTRAINED_TOPOLOGY_ANNOTATION)
    if raw is not None:
        # Go's strconv.ParseBool, as Kueue parses it.
        if raw in ("1", "t", "T", "TRUE", "true", "True"):
            unconstrained = True
        elif raw not in ("0", "f", "F", "FALSE", "false", "False"):
            problems.add(paths[2], f"must be a boolean value, got {show(raw)}")
    size: int | None = None
    raw = annotations.get(SLICE_SIZE_ANNOTATION)
    if raw is not None:
        try:
            size = int(raw)
        except ValueError:
            problems.add(paths[4], f"must be a numeric value, got {show(raw)}")
        else:
            if size < 1:
                problems.add(paths[4], f"must be greater than or equal to 1, got {size}")
    request = TopologyRequest(required=level(0), preferred=level(1), unconstrained=unconstrained,
                              slice_required=level(3), slice_size=size)
    return _checked(request, count, problems, path, paths)


def _slice_values(level: Fields, n: int) -> list[str]:
    """One level's values in a v1beta2 slice: ``universal``, or ``individual`` prefix + roots + suffix."""
    if level.has("universal") == level.has("individual"):
        level.error("universal", "exactly one of the fields in [universal individual] must be set")
        return []
    if level.has("universal"):
        return [level.string("universal", required=True)] * n
    ind = level.mapping("individual", known=("prefix", "roots", "suffix"))
    if ind is None:
        return []
    roots = ind.strings("roots")
    if len(roots) != n:
        ind.error("roots", f"must have length equal to domainCount ({n}), got {len(roots)}")
        return []
    prefix, suffix = ind.string("prefix"), ind.string("suffix")
    return [f"{prefix}{r}{suffix}" for r in roots]


def read_topology_assignment(psa: Fields) -> TopologyAssignment | None:
    """``topologyAssignment`` in v1beta2's slices form or v1beta1's ``domains`` form."""
    ta = psa.mapping("topologyAssignment", known=("levels", "slices", "domains"))
    if ta is None:
        return None
    levels = ta.strings("levels", check=qualified_name_problem)
    if not levels:
        ta.error("levels", "must list at least 1 item(s)")
    domains: list[TopologyDomain] = []
    for path, raw in ta.items("domains"):
        d = Fields.of(raw, path, ta.problems, known=("values", "count"))
        if d is None:
            continue
        values = d.strings("values")
        if len(values) != len(levels):
            d.error("values", f"must have one value per level ({len(levels)}), got {len(values)}")
        domains.append(TopologyDomain(values=values, count=d.integer("count", required=True, minimum=1) or 0))
    for path, raw in ta.items("slices"):
        s = Fields.of(raw, path, ta.problems, known=("domainCount", "valuesPerLevel", "podCounts"))
        if s is None:
            continue
        n = s.integer("domainCount", required=True, minimum=1) or 0
        columns: list[list[str]] = []
        for lpath, lraw in s.items("valuesPerLevel", required=True):
            level = Fields.of(lraw, lpath, s.problems, known=("universal", "individual"))
            if level is not None:
                columns.append(_slice_values(level, n))
        if len(columns) != len(levels):
            s.error("valuesPerLevel", "valuesPerLevel must have the same length as the number of levels in this "
                                      "TopologyAssignment")
            continue
        pc = s.mapping("podCounts", known=("universal", "individual"), required=True)
        counts: list[int] = []
        if pc is not None:
            if pc.has("universal"):
                counts = [pc.integer("universal", minimum=1) or 0] * n
            else:
                for cpath, c in pc.items("individual"):
                    if isinstance(c, bool) or not isinstance(c, int) or c < 1:
                        pc.problems.add(cpath, f"must be a positive integer, got {show(c)}")
                        continue
                    counts.append(c)
            if len(counts) != n:
                pc.error("individual", f"podCounts.individual must have length equal to domainCount ({n})")
                continue
        if any(len(col) != n for col in columns):
            continue
        for i in range(n):
            domains.append(TopologyDomain(values=tuple(col[i] for col in columns), count=counts[i]))
    return TopologyAssignment(levels=levels, domains=tuple(domains))
