"""The status of a Workload document: conditions, admission, requeue state.

Status is optional input: ``sluicectl simulate`` reads it to start from a
given state, and the store round-trips it.  It is checked against the
Workload's own pod sets (an admission must name existing pod sets, a
reclaimable count cannot exceed its pod set's count).
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass

from sluicegate.manifest.decode_topology import read_topology_assignment
from sluicegate.manifest.dialect import Dialect
from sluicegate.manifest.reader import Fields, join, keyed, read_quantity
from sluicegate.manifest.syntax import dns_subdomain_problem, qualified_name_problem, show
from sluicegate.manifest.timefmt import parse_rfc3339
from sluicegate.model import (
    Admission,
    ClusterQueueName,
    Condition,
    FlavorName,
    PodSet,
    PodSetAssignment,
    RequeueState,
    WorkloadStatus,
)
from sluicegate.model.pods import PodRecord

MAX_POD_SETS = 8
DEFAULT_POD_SET_NAME = "main"
CONDITION_STATUSES = ("True", "False", "Unknown")
_CONDITION_REASON = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
MAX_REASON = 1024
MAX_MESSAGE = 32 * 1024
CONDITION_UNSUPPORTED = {"observedGeneration": "sluicegate does not record it on conditions"}
STATUS_UNSUPPORTED = {
    "admissionChecks": "sluicegate has no AdmissionCheck controllers",
    "resourceRequests": "recomputed by the controller from spec.podSets",
    "schedulingStats": "eviction statistics are not recorded",
    "nominatedClusterNames": "MultiKueue is not implemented",
    "clusterName": "MultiKueue is not implemented",
    "unhealthyNodes": "Topology Aware Scheduling is not implemented",
}
PSA_UNSUPPORTED = {
    "delayedTopologyRequest": "ProvisioningRequest admission checks (delayed topology) are not implemented",
}
ACCUMULATED_V1BETA2 = "accumulatedPastExecutionTimeSeconds"
# kueue.x-k8s.io/v1beta1 shipped the field with this misspelling.
ACCUMULATED_V1BETA1 = "accumulatedPastExexcutionTimeSeconds"


def read_status(doc: Fields, pod_sets: tuple[PodSet, ...], dialect: Dialect) -> WorkloadStatus:
    accumulated_key = ACCUMULATED_V1BETA1 if dialect.v1beta1 else ACCUMULATED_V1BETA2
    other_key = ACCUMULATED_V1BETA2 if dialect.v1beta1 else ACCUMULATED_V1BETA1
    unsupported = {**STATUS_UNSUPPORTED, other_key: f"{dialect.api_version} spells it {accumulated_key}"}
    known = ["conditions", "admission", "requeueState", "reclaimablePods", accumulated_key]
    if dialect.native:
        known.append("extra")
    else:
        unsupported["extra"] = "a sluicegate extension, only read with apiVersion sluicegate.io/v1beta2"
    status = doc.mapping("status", known=known, unsupported=unsupported)
    if status is None:
        return WorkloadStatus()
    conditions = _read_conditions(status)
    by_name = {ps.name: ps for ps in pod_sets}
    admission = _read_admission(status, by_name)
    reserved = any(c.type == "QuotaReserved" and c.is_true for c in conditions)
    if reserved and admission is not None and len(admission.pod_set_assignments) != len(pod_sets):
        status.problems.add(
            join(status.path("admission"), "podSetAssignments"),
            f"must have one entry per podSet ({len(pod_sets)}) while QuotaReserved is True, "
            f"got {len(admission.pod_set_assignments)}",
        )
    requeue: RequeueState | None = None
    rq = status.mapping("requeueState", known=("count", "requeueAt"))
    if rq is not None:
        requeue = RequeueState(
            count=rq.integer("count", default=0, minimum=0) or 0,
            requeue_at=_time(rq, "requeueAt", required=False),
        )
    extra: dict[str, object] = {}
    own = _OwnStatus()
    if dialect.native and status.has("extra"):
        raw_extra = status.get("extra")
        problem = _json_problem(raw_extra)
        if not isinstance(raw_extra, dict):
            status.error("extra", f"must be a mapping, got {show(raw_extra)}")
        elif problem is not None:
            status.error("extra", problem)
        else:
            extra = copy.deepcopy(raw_extra)
            own = _read_own(status, extra)
    return WorkloadStatus(
        pods=own.pods,
        last_pods=own.last_pods,
        deleting=own.deleting,
        terminate=own.terminate,
        conditions=conditions,
        admission=admission,
        requeue_state=requeue,
        reclaimable_pods=_read_reclaimable(status, by_name),
        accumulated_past_execution_time_seconds=status.integer(accumulated_key, default=0, minimum=0) or 0,
        extra=extra,
    )


def _time(fields: Fields, key: str, *, required: bool) -> float | None:
    text = fields.string(key, required=required)
    if not text:
        return None
    try:
        return parse_rfc3339(text)
    except ValueError as exc:
        fields.error(key, str(exc))
        return None


def _read_conditions(status: Fields) -> tuple[Condition, ...]:
    out: list[Condition] = []
    seen: dict[str, int] = {}
    for i, (path, raw) in enumerate(status.items("conditions")):
        c = Fields.of(
            raw,
            path,
            status.problems,
            known=("type", "status", "reason", "message", "lastTransitionTime"),
            unsupported=CONDITION_UNSUPPORTED,
        )
        if c is None:
            continue
        ctype = c.string("type", required=True, check=qualified_name_problem)
        if ctype in seen:
            c.error("type", f"duplicate: conditions[{seen[ctype]}] already has type {show(ctype)}")
        elif ctype:
            seen[ctype] = i
        cstatus = c.choice("status", {s: s for s in CONDITION_STATUSES}, default="Unknown", required=True)
        # Kubernetes requires a reason; sluicegate writes status itself and
        # tolerates an empty one, but a reason given must be well-formed.
        reason = c.string("reason")
        if reason and (len(reason) > MAX_REASON or not _CONDITION_REASON.match(reason)):
            c.error(
                "reason",
                "must be a CamelCase word (letters, digits, '_', ',' and ':', starting with a letter, "
                f"at most {MAX_REASON} characters), got {show(reason)}",
            )
        message = c.string("message")
        if len(message) > MAX_MESSAGE:
            c.error("message", f"must be at most {MAX_MESSAGE} characters, got {len(message)}")
        when = _time(c, "lastTransitionTime", required=True)
        out.append(
            Condition(
                type=ctype,
                status=cstatus,
                reason=reason,
                message=message,
                last_transition_time=when if when is not None else 0.0,
            )
        )
    return tuple(out)


def _read_admission(status: Fields, pod_sets: dict[str, PodSet]) -> Admission | None:
    adm = status.mapping("admission", known=("clusterQueue", "podSetAssignments"))
    if adm is None:
        return None
    cq = adm.string("clusterQueue", required=True, check=dns_subdomain_problem)
    assignments: list[PodSetAssignment] = []
    seen: set[str] = set()
    for path, raw in adm.items("podSetAssignments", max_items=MAX_POD_SETS):
        psa = Fields.of(
            raw, path, adm.problems, known=("name", "flavors", "resourceUsage", "count", "topologyAssignment"),
            unsupported=PSA_UNSUPPORTED
        )
        if psa is None:
            continue
        name = psa.string("name", default=DEFAULT_POD_SET_NAME) or DEFAULT_POD_SET_NAME
        pod_set = pod_sets.get(name)
        if pod_set is None:
            psa.error("name", f"must name one of spec.podSets ({', '.join(pod_sets) or 'none'}), got {show(name)}")
        if name in seen:
            psa.error("name", f"duplicate: {show(name)} is assigned twice")
        seen.add(name)
        # Kueue: an assignment without count was made for the whole pod set.
        count = psa.integer("count", default=pod_set.count if pod_set else 0, minimum=0)
        count = 0 if count is None else count
        flavors = psa.string_map("flavors", key_check=qualified_name_problem, value_check=dns_subdomain_problem)
        usage: dict[str, int] = {}
        raw_usage = psa.get("resourceUsage")
        if raw_usage is not None and not isinstance(raw_usage, dict):
            psa.error("resourceUsage", f"must be a mapping of resource names to quantities, got {show(raw_usage)}")
        elif isinstance(raw_usage, dict):
            for rname, qraw in raw_usage.items():
                rpath = keyed(psa.path("resourceUsage"), str(rname))
                if not isinstance(rname, str):
                    psa.error("resourceUsage", f"resource names must be strings, got {show(rname)}")
                    continue
                amount = read_quantity(qraw, rpath, rname, adm.problems)
                if amount is None:
                    continue
                if amount.exact < 0:
                    adm.problems.add(rpath, f"must be non-negative, got \"{amount.text}\"")
                elif count > 0 and amount.canonical % count != 0:
                    adm.problems.add(rpath, f"must be a multiple of count ({count}), got \"{amount.text}\"")
                usage[rname] = amount.canonical
        assignments.append(
            PodSetAssignment(
                name=name,
                flavors={k: FlavorName(v) for k, v in flavors.items()},
                resource_usage=usage,
                count=count,
                topology_assignment=read_topology_assignment(psa),
            )
        )
    return Admission(cluster_queue=ClusterQueueName(cq), pod_set_assignments=tuple(assignments))


def _read_reclaimable(status: Fields, pod_sets: dict[str, PodSet]) -> dict[str, int]:
    out: dict[str, int] = {}
    for path, raw in status.items("reclaimablePods", max_items=MAX_POD_SETS):
        rp = Fields.of(raw, path, status.problems, known=("name", "count"))
        if rp is None:
            continue
        name = rp.string("name", required=True)
        count = rp.integer("count", required=True, minimum=0)
        pod_set = pod_sets.get(name)
        if name and pod_set is None:
            rp.error("name", f"must name one of spec.podSets ({', '.join(pod_sets) or 'none'}), got {show(name)}")
        elif name in out:
            rp.error("name", f"duplicate: {show(name)} is listed twice")
        elif pod_set is not None and count is not None and count > pod_set.count:
            rp.error("count", f"must be at most the podSet's count ({pod_set.count}), got {count}")
        if name and count is not None:
            out[name] = count
    return out


@dataclass(slots=True)
class _OwnStatus:
    pods: tuple[PodRecord, ...] = ()
    last_pods: tuple[PodRecord, ...] = ()
    deleting: bool = False
    terminate: tuple[str, str] | None = None


def _read_own(status: Fields, extra: dict[str, object]) -> _OwnStatus:
    """Take sluicegate's own keys out of ``status.extra`` (plain JSON) into typed values."""
    own = _OwnStatus()
    for key in ("pods", "lastPods"):
        raw = extra.pop(key, None)
        if raw is None:
            continue
        if not isinstance(raw, list):
            status.error("extra", f"{key}: must be a list of pod records, got {show(raw)}")
            continue
        records: list[PodRecord] = []
        for i, item in enumerate(raw):
            try:
                if not isinstance(item, dict):
                    raise TypeError(f"must be a mapping, got {show(item)}")
                records.append(PodRecord.from_json(item))
            except KeyError as exc:
                status.error("extra", f"{key}[{i}].{exc.args[0]}: required")
            except (TypeError, ValueError) as exc:
                status.error("extra", f"{key}[{i}]: {exc}")
        if key == "pods":
            own.pods = tuple(records)
        else:
            own.last_pods = tuple(records)
    own.deleting = bool(extra.pop("deleting", False))
    terminate = extra.pop("terminate", None)
    if isinstance(terminate, dict):
        own.terminate = (str(terminate.get("reason", "Failed")), str(terminate.get("message", "")))
    elif terminate is not None:
        status.error("extra", f"terminate: must be a mapping, got {show(terminate)}")
    return own


def _json_problem(value: object, depth: int = 0) -> str | None:
    """None when ``value`` is plain JSON data (what status.extra may hold)."""
    if depth > 32:
        return "nests deeper than 32 levels"
    if value is None or isinstance(value, (str, bool, int, float)):
        return None
    if isinstance(value, list):
        for item in value:
            problem = _json_problem(item, depth + 1)
            if problem is not None:
                return problem
        return None
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                return f"keys must be strings, got {show(k)}"
            problem = _json_problem(v, depth + 1)
            if problem is not None:
                return problem
        return None
    return f"must hold only JSON values, got {type(value).__name__}"
