"""Workload documents: pod sets of processes, priority, and (optionally) status."""

from __future__ import annotations

import copy
import re

from sluicegate.controller.model import (
    Admission,
    ClusterQueueName,
    Condition,
    Container,
    FlavorName,
    PodSet,
    PodSetAssignment,
    RequeueState,
    Workload,
    WorkloadStatus,
)
from sluicegate.manifest.dialect import Dialect, Meta
from sluicegate.manifest.reader import Amount, Fields, Problems, join, keyed, read_quantity
from sluicegate.manifest.syntax import (
    container_resource_name_problem,
    dns_label_problem,
    dns_subdomain_problem,
    label_value_problem,
    qualified_name_problem,
    show,
)
from sluicegate.manifest.timefmt import parse_rfc3339

MAX_POD_SETS = 8
DEFAULT_POD_SET_NAME = "main"
DEFAULT_GRACE_PERIOD_SECONDS = 30
# Kubernetes reserves this name: the count of pods is derived, never requested.
RESERVED_RESOURCE = "pods"

WORKLOAD_PRIORITY_GROUP = "kueue.x-k8s.io"
POD_PRIORITY_GROUP = "scheduling.k8s.io"
KIND_FOR_GROUP = {WORKLOAD_PRIORITY_GROUP: "WorkloadPriorityClass", POD_PRIORITY_GROUP: "PriorityClass"}
# The pre-priorityClassRef spelling: spec.priorityClassName plus a source.
KIND_FOR_SOURCE = {
    "kueue.x-k8s.io/workloadpriorityclass": "WorkloadPriorityClass",
    "scheduling.k8s.io/priorityclass": "PriorityClass",
}
RESTART_POLICIES = ("Never", "OnFailure")
CONDITION_STATUSES = ("True", "False", "Unknown")
_CONDITION_REASON = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
MAX_REASON = 1024
MAX_MESSAGE = 32 * 1024

WORKLOAD_SPEC_FIELDS = (
    "podSets",
    "queueName",
    "priorityClassRef",
    "priority",
    "active",
    "maximumExecutionTimeSeconds",
    "priorityClassName",
    "priorityClassSource",
)
POD_SET_UNSUPPORTED = {"topologyRequest": "Topology Aware Scheduling is not implemented"}
POD_SPEC_FIELDS = (
    "containers",
    "initContainers",
    "nodeSelector",
    "priorityClassName",
    "restartPolicy",
    "terminationGracePeriodSeconds",
)
_NO_API = "there is no Kubernetes API server for a pod to talk to"
_HOST_NET = "pods are processes on the node and use its own network and DNS"
POD_SPEC_UNSUPPORTED = {
    "priority": "the value comes from priorityClassName (a PriorityClass); set that instead",
    "volumes": "pods are processes on the node; there are no volumes to mount",
    "affinity": "affinity is not supported; constrain placement with nodeSelector",
    "nodeName": "the controller places pods; constrain placement with nodeSelector",
    "tolerations": "sluicegate nodes carry no taints, so there is nothing to tolerate",
    "topologySpreadConstraints": "spreading constraints are not implemented",
    "schedulerName": "the sluicegate controller is the only scheduler",
    "serviceAccountName": _NO_API,
    "serviceAccount": _NO_API,
    "automountServiceAccountToken": _NO_API,
    "enableServiceLinks": _NO_API,
    "hostNetwork": _HOST_NET,
    "hostPID": "pods are plain processes on the node already",
    "hostIPC": "pods are plain processes on the node already",
    "hostUsers": "processes run as the user the agent is configured with",
    "dnsPolicy": _HOST_NET,
    "dnsConfig": _HOST_NET,
    "hostname": _HOST_NET,
    "subdomain": _HOST_NET,
    "hostAliases": _HOST_NET,
    "setHostnameAsFQDN": _HOST_NET,
    "securityContext": "processes run as the user the agent is configured with",
    "imagePullSecrets": "sluicegate runs processes, not container images",
    "runtimeClassName": "sluicegate runs processes, not container images",
    "overhead": "pod overhead is not modelled",
    "activeDeadlineSeconds": "set spec.maximumExecutionTimeSeconds on the Workload instead",
    "preemptionPolicy": "comes from the PriorityClass named by priorityClassName",
    "ephemeralContainers": "debug containers are not supported",
    "readinessGates": "readiness gates are not implemented",
    "shareProcessNamespace": "processes of a pod already share the node's process namespace",
    "os": "pods run on the node's own operating system",
    "resourceClaims": "dynamic resource allocation is not supported",
    "schedulingGates": "scheduling gates are not supported; set spec.active=false to hold a workload",
    "resources": "pod-level resources are not supported; set them per container",
}
CONTAINER_FIELDS = ("name", "command", "args", "env", "workingDir", "resources")
_NO_IMAGES = "sluicegate runs processes, not container images"
CONTAINER_UNSUPPORTED = {
    "image": _NO_IMAGES,
    "imagePullPolicy": _NO_IMAGES,
    "ports": "processes share the node's network; there is no port mapping",
    "volumeMounts": "there are no volumes to mount",
    "volumeDevices": "there are no volumes to mount",
    "livenessProbe": "probes are not implemented; a pod is running while its processes run",
    "readinessProbe": "probes are not implemented; a pod is running while its processes run",
    "startupProbe": "probes are not implemented; a pod is running while its processes run",
    "lifecycle": "lifecycle hooks are not implemented",
    "securityContext": "processes run as the user the agent is configured with",
    "envFrom": "there are no ConfigMaps or Secrets; list the variables in env",
    "stdin": "pods are batch processes without a terminal",
    "stdinOnce": "pods are batch processes without a terminal",
    "tty": "pods are batch processes without a terminal",
    "terminationMessagePath": "exit codes and logs are reported instead",
    "terminationMessagePolicy": "exit codes and logs are reported instead",
    "resizePolicy": "in-place resizing is not implemented",
    "restartPolicy": "per-container restart policies (sidecars) are not implemented; set the pod's restartPolicy",
}
ENV_UNSUPPORTED = {"valueFrom": "there are no ConfigMaps, Secrets or downward API; give the value directly"}
RESOURCES_UNSUPPORTED = {"claims": "dynamic resource allocation is not supported"}
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
    "topologyAssignment": "Topology Aware Scheduling is not implemented",
    "delayedTopologyRequest": "Topology Aware Scheduling is not implemented",
}
ACCUMULATED_V1BETA2 = "accumulatedPastExecutionTimeSeconds"
# kueue.x-k8s.io/v1beta1 shipped the field with this misspelling.
ACCUMULATED_V1BETA1 = "accumulatedPastExexcutionTimeSeconds"


def read_workload(doc: Fields, meta: Meta, dialect: Dialect) -> Workload:
    spec = doc.mapping("spec", known=WORKLOAD_SPEC_FIELDS, required=True)
    if spec is None:
        return Workload(
            namespace=meta.namespace,
            name=meta.name,
            uid=meta.uid,
            creation_timestamp=meta.creation_timestamp,
            queue_name="",
            pod_sets=(),
        )
    queue_name = spec.string("queueName", required=True, check=dns_subdomain_problem)
    pod_sets = _read_pod_sets(spec)
    status = WorkloadStatus()
    if doc.has("status"):
        status = _read_status(doc, pod_sets, dialect)
    return Workload(
        namespace=meta.namespace,
        name=meta.name,
        uid=meta.uid,
        creation_timestamp=meta.creation_timestamp,
        queue_name=queue_name,
        pod_sets=pod_sets,
        priority=spec.integer("priority", default=0) or 0,
        priority_class=_read_priority_class(spec),
        active=spec.boolean("active", default=True),
        maximum_execution_time_seconds=spec.integer("maximumExecutionTimeSeconds", minimum=1),
        labels=meta.labels,
        annotations=meta.annotations,
        generation=meta.generation,
        status=status,
    )


def _read_priority_class(spec: Fields) -> tuple[str, str] | None:
    result: tuple[str, str] | None = None
    ref = spec.mapping("priorityClassRef", known=("group", "kind", "name"))
    if ref is not None:
        group = ref.choice("group", {g: g for g in KIND_FOR_GROUP}, default="", required=True)
        kind = ref.choice("kind", {k: k for k in KIND_FOR_GROUP.values()}, default="", required=True)
        if group and kind and KIND_FOR_GROUP[group] != kind:
            ref.error("kind", f"must be {KIND_FOR_GROUP[group]} for group {group}, got {show(kind)}")
        name = ref.string("name", required=True, check=dns_subdomain_problem)
        if kind and name:
            result = (kind, name)
    class_name = spec.optional_string("priorityClassName", check=dns_subdomain_problem) or ""
    source = spec.optional_string("priorityClassSource") or ""
    if class_name or source:
        if ref is not None:
            spec.error("priorityClassName", "set priorityClassRef or priorityClassName/priorityClassSource, not both")
        elif not source:
            spec.error("priorityClassSource", f"required with priorityClassName: one of {', '.join(KIND_FOR_SOURCE)}")
        elif source not in KIND_FOR_SOURCE:
            spec.error("priorityClassSource", f"must be one of {', '.join(KIND_FOR_SOURCE)}, got {show(source)}")
        elif not class_name:
            spec.error("priorityClassName", "required with priorityClassSource")
        else:
            result = (KIND_FOR_SOURCE[source], class_name)
    return result


# -- pod sets and containers ---------------------------------------------------


def _read_pod_sets(spec: Fields) -> tuple[PodSet, ...]:
    pod_sets: list[PodSet] = []
    seen: dict[str, int] = {}
    partial = 0
    for i, (path, raw) in enumerate(spec.items("podSets", required=True, min_items=1, max_items=MAX_POD_SETS)):
        ps = Fields.of(raw, path, spec.problems, known=("name", "template", "count", "minCount"), unsupported=POD_SET_UNSUPPORTED)
        if ps is None:
            continue
        name = ps.string("name", default=DEFAULT_POD_SET_NAME, check=dns_label_problem) or DEFAULT_POD_SET_NAME
        if name in seen:
            ps.error("name", f"duplicate: podSets[{seen[name]}] is already named {show(name)}")
        else:
            seen[name] = i
        count = ps.integer("count", default=1, minimum=0)
        count = 1 if count is None else count
        min_count = ps.integer("minCount", minimum=1)
        if min_count is not None:
            partial += 1
            if min_count > count:
                ps.error("minCount", f"must be at most count ({count}), got {min_count}")
        pod_sets.append(_read_template(ps, name=name, count=count, min_count=min_count))
    if partial > 1:
        spec.error("podSets", f"at most one podSet may set minCount (partial admission), got {partial}")
    return tuple(pod_sets)


def _read_template(ps: Fields, *, name: str, count: int, min_count: int | None) -> PodSet:
    template = ps.mapping("template", known=("metadata", "spec"), required=True)
    if template is None:
        return PodSet(name=name, count=count, min_count=min_count)
    tmeta = template.mapping("metadata", known=("labels", "annotations"))
    if tmeta is not None:
        # Validated like any labels so a manifest that works here works in
        # Kubernetes, but not kept: nothing in sluicegate selects pods by
        # label (no Services, no affinity).  See the package notes.
        tmeta.string_map("labels", key_check=qualified_name_problem, value_check=label_value_problem)
        tmeta.string_map("annotations", key_check=qualified_name_problem)
    pod = template.mapping("spec", known=POD_SPEC_FIELDS, unsupported=POD_SPEC_UNSUPPORTED, required=True)
    if pod is None:
        return PodSet(name=name, count=count, min_count=min_count)
    names: dict[str, str] = {}
    init = tuple(
        c
        for path, raw in pod.items("initContainers")
        if (c := _read_container(raw, path, pod.problems, names)) is not None
    )
    containers = tuple(
        c
        for path, raw in pod.items("containers", required=True, min_items=1)
        if (c := _read_container(raw, path, pod.problems, names)) is not None
    )
    restart = "Never"
    if pod.get("restartPolicy") == "Always":
        pod.error(
            "restartPolicy",
            "Always is not valid for a batch pod, whose processes must run to completion; use Never or OnFailure",
        )
    else:
        restart = pod.choice("restartPolicy", {p: p for p in RESTART_POLICIES}, default="Never")
    grace = pod.integer("terminationGracePeriodSeconds", default=DEFAULT_GRACE_PERIOD_SECONDS, minimum=0, maximum=None)
    return PodSet(
        name=name,
        count=count,
        min_count=min_count,
        requests=effective_requests(containers, init),
        node_selector=pod.string_map("nodeSelector", key_check=qualified_name_problem, value_check=label_value_problem),
        containers=containers,
        init_containers=init,
        restart_policy=restart,
        termination_grace_period_seconds=DEFAULT_GRACE_PERIOD_SECONDS if grace is None else grace,
        priority_class_name=pod.string("priorityClassName", check=dns_subdomain_problem),
    )


def effective_requests(containers: tuple[Container, ...], init_containers: tuple[Container, ...]) -> dict[str, int]:
    """Per-pod requests the way Kubernetes computes them.

    App containers run together, so their requests add up; init containers
    run one at a time before them, so only the largest matters.  A pod needs
    whichever of the two is larger, per resource.
    """
    total: dict[str, int] = {}
    for c in containers:
        for res, qty in c.requests.items():
            total[res] = total.get(res, 0) + qty
    for c in init_containers:
        for res, qty in c.requests.items():
            total[res] = max(total.get(res, 0), qty)
    return total


def _read_container(raw: object, path: str, problems: Problems, names: dict[str, str]) -> Container | None:
    c = Fields.of(raw, path, problems, known=CONTAINER_FIELDS, unsupported=CONTAINER_UNSUPPORTED)
    if c is None:
        return None
    name = c.string("name", required=True, check=dns_label_problem)
    if name in names:
        c.error("name", f"duplicate: {names[name]} already uses the name {show(name)}")
    elif name:
        names[name] = path
    env: list[tuple[str, str]] = []
    for epath, eraw in c.items("env"):
        var = Fields.of(eraw, epath, problems, known=("name", "value"), unsupported=ENV_UNSUPPORTED)
        if var is None:
            continue
        var_name = var.string("name", required=True)
        if "=" in var_name:
            var.error("name", f"must not contain '=', got {show(var_name)}")
        env.append((var_name, var.string("value")))
    requests: dict[str, Amount] = {}
    limits: dict[str, Amount] = {}
    res = c.mapping("resources", known=("requests", "limits"), unsupported=RESOURCES_UNSUPPORTED)
    if res is not None:
        requests = _resource_list(res, "requests")
        limits = _resource_list(res, "limits")
        for rname, req in requests.items():
            lim = limits.get(rname)
            if lim is not None and req.exact > lim.exact:
                problems.add(
                    keyed(res.path("requests"), rname),
                    f"must not exceed the limit (\"{lim.text}\"), got \"{req.text}\"",
                )
        for rname, lim in limits.items():
            # As in Kubernetes: a limit alone also sets the request, so the
            # pod is accounted for what it may use.
            requests.setdefault(rname, lim)
    return Container(
        name=name,
        command=c.strings("command"),
        args=c.strings("args"),
        env=tuple(env),
        working_dir=c.string("workingDir"),
        requests={k: a.canonical for k, a in requests.items()},
        limits={k: a.canonical for k, a in limits.items()},
    )


def _resource_list(res: Fields, key: str) -> dict[str, Amount]:
    value = res.get(key)
    if value is None:
        return {}
    path = res.path(key)
    if not isinstance(value, dict):
        res.error(key, f"must be a mapping of resource names to quantities, got {show(value)}")
        return {}
    out: dict[str, Amount] = {}
    for rname, raw in value.items():
        if not isinstance(rname, str):
            res.error(key, f"resource names must be strings, got {show(rname)}")
            continue
        rpath = keyed(path, rname)
        if rname == RESERVED_RESOURCE:
            res.problems.add(rpath, "the resource name pods is reserved: sluicegate counts a workload's pods itself")
            continue
        problem = container_resource_name_problem(rname)
        if problem is not None:
            res.problems.add(rpath, f"resource name {problem}")
            continue
        amount = read_quantity(raw, rpath, rname, res.problems)
        if amount is None:
            continue
        if amount.exact < 0:
            res.problems.add(rpath, f"must be non-negative, got \"{amount.text}\"")
            continue
        out[rname] = amount
    return out


# -- status --------------------------------------------------------------------


def _read_status(doc: Fields, pod_sets: tuple[PodSet, ...], dialect: Dialect) -> WorkloadStatus:
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
    if dialect.native and status.has("extra"):
        raw_extra = status.get("extra")
        problem = _json_problem(raw_extra)
        if not isinstance(raw_extra, dict):
            status.error("extra", f"must be a mapping, got {show(raw_extra)}")
        elif problem is not None:
            status.error("extra", problem)
        else:
            extra = copy.deepcopy(raw_extra)
    return WorkloadStatus(
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
            raw, path, adm.problems, known=("name", "flavors", "resourceUsage", "count"), unsupported=PSA_UNSUPPORTED
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
