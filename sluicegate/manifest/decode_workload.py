"""Workload documents: pod sets of processes and their priority (status is in decode_status)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import NamedTuple, TypeVar

from sluicegate.manifest.decode_status import DEFAULT_POD_SET_NAME, MAX_POD_SETS, read_status
from sluicegate.manifest.decode_topology import read_topology_request
from sluicegate.manifest.dialect import Dialect, Meta
from sluicegate.manifest.reader import INT64_MAX, Amount, Fields, Problems, keyed, read_quantity
from sluicegate.manifest.syntax import (
    container_resource_name_problem,
    dns_label_problem,
    dns_subdomain_problem,
    label_value_problem,
    qualified_name_problem,
    show,
)
from sluicegate.manifest.taints import read_tolerations
from sluicegate.model import Container, PodSet, Workload
from sluicegate.model.podgroups import group_name
from sluicegate.model.workloads import NO_STATUS, Probe, SecurityContext
from sluicegate.quantity import MAX_MILLI_VALUE, MILLI_RESOURCES

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
MAX_LINUX_ID = 2**32 - 2

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
POD_SPEC_FIELDS = (
    "containers",
    "initContainers",
    "nodeSelector",
    "tolerations",
    "priorityClassName",
    "restartPolicy",
    "terminationGracePeriodSeconds",
    "securityContext",
)
K = TypeVar("K")
V = TypeVar("V")

_NO_API = "there is no Kubernetes API server for a pod to talk to"
_HOST_NET = "pods are processes on the node and use its own network and DNS"
POD_SPEC_UNSUPPORTED = {
    "priority": "the value comes from priorityClassName (a PriorityClass); set that instead",
    "volumes": "pods are processes on the node; there are no volumes to mount",
    "affinity": "affinity is not supported; constrain placement with nodeSelector",
    "nodeName": "the controller places pods; constrain placement with nodeSelector",
    "topologySpreadConstraints": "spreading constraints are not implemented",
    "schedulerName": "the sluicegate controller is the only scheduler",
    "serviceAccountName": _NO_API,
    "serviceAccount": _NO_API,
    "automountServiceAccountToken": _NO_API,
    "enableServiceLinks": _NO_API,
    "hostNetwork": _HOST_NET,
    "hostPID": "pods are plain processes on the node already",
    "hostIPC": "pods are plain processes on the node already",
    "hostUsers": "pods run as the user their namespace's policy gives them; see securityContext",
    "dnsPolicy": _HOST_NET,
    "dnsConfig": _HOST_NET,
    "hostname": _HOST_NET,
    "subdomain": _HOST_NET,
    "hostAliases": _HOST_NET,
    "setHostnameAsFQDN": _HOST_NET,
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
CONTAINER_FIELDS = ("name", "command", "args", "env", "workingDir", "resources", "readinessProbe", "securityContext")
PROBE_FIELDS = ("exec", "tcpSocket", "httpGet", "initialDelaySeconds", "periodSeconds", "timeoutSeconds",
                "successThreshold", "failureThreshold")
PROBE_UNSUPPORTED = {
    "grpc": "gRPC probes are not implemented; use exec, tcpSocket or httpGet",
    "terminationGracePeriodSeconds": "only meaningful for liveness probes",
}
_NO_IMAGES = "sluicegate runs processes, not container images"
CONTAINER_UNSUPPORTED = {
    "image": _NO_IMAGES,
    "imagePullPolicy": _NO_IMAGES,
    "ports": "processes share the node's network; there is no port mapping",
    "volumeMounts": "there are no volumes to mount",
    "volumeDevices": "there are no volumes to mount",
    "livenessProbe": "probes are not implemented; a pod is running while its processes run",
    "startupProbe": "probes are not implemented; a pod is running while its processes run",
    "lifecycle": "lifecycle hooks are not implemented",
    "envFrom": "there are no ConfigMaps or Secrets; list the variables in env",
    "stdin": "pods are batch processes without a terminal",
    "stdinOnce": "pods are batch processes without a terminal",
    "tty": "pods are batch processes without a terminal",
    "terminationMessagePath": "exit codes and logs are reported instead",
    "terminationMessagePolicy": "exit codes and logs are reported instead",
    "resizePolicy": "in-place resizing is not implemented",
    "restartPolicy": "per-container restart policies (sidecars) are not implemented; set the pod's restartPolicy",
}
# securityContext: who the processes run as (checked against the namespace's
# policy, see sluicegate.security.podsecurity); nothing else of it applies to
# plain processes on the node.
SECURITY_CONTEXT_FIELDS = ("runAsUser", "runAsGroup", "runAsNonRoot")
CONTAINER_SECURITY_CONTEXT_FIELDS = (*SECURITY_CONTEXT_FIELDS, "allowPrivilegeEscalation")
_NOT_CONFINED = "pods are processes confined by their user and cgroups only; this is not applied"
SECURITY_CONTEXT_UNSUPPORTED = {
    "fsGroup": "there are no volumes whose group could be set",
    "fsGroupChangePolicy": "there are no volumes whose group could be set",
    "supplementalGroups": "supplementary groups are dropped: a pod has only its user's group",
    "supplementalGroupsPolicy": "supplementary groups are dropped: a pod has only its user's group",
    "seLinuxOptions": _NOT_CONFINED,
    "seLinuxChangePolicy": _NOT_CONFINED,
    "seccompProfile": _NOT_CONFINED,
    "appArmorProfile": _NOT_CONFINED,
    "windowsOptions": "pods run on the node's own (Linux) operating system",
    "sysctls": "sysctls are the node's, not a pod's",
    "capabilities": "capabilities are not granted; a pod runs as an unprivileged user with no_new_privs",
    "privileged": "privileged pods are not supported; set runAsUser: 0 where the namespace allows root",
    "readOnlyRootFilesystem": "pods share the node's file system",
    "procMount": "pods share the node's /proc",
}
ENV_UNSUPPORTED = {"valueFrom": "there are no ConfigMaps, Secrets or downward API; give the value directly"}
RESOURCES_UNSUPPORTED = {"claims": "dynamic resource allocation is not supported"}

# Workloads are submitted by the thousand from a few templates (a job array,
# Kueue's generator): their podSets are the same text, so they decode to the
# same value.  Valid podSets are decoded once per distinct text and the frozen
# PodSets are shared by every workload of that shape, which also keeps one
# copy of each pod template in memory instead of one per workload.  Keyed by
# ``repr`` of the parsed value, which tells apart everything JSON and safe
# YAML produce (1 from True from "1", key order included); bounded, the
# oldest entry goes first.
POD_SETS_MEMO_SIZE = 4096
_pod_sets_memo: dict[str, tuple[PodSet, ...]] = {}

# What tens of thousands of workloads have in common is held once, not once
# per workload: their namespace's and queue's names (interned), their
# priority class reference (one tuple per distinct class, bounded like the
# pod sets' memo) and "no annotations" (one empty, read-only mapping).
_NO_ANNOTATIONS: Mapping[str, str] = MappingProxyType({})
PRIORITY_REFS_SIZE = 4096
_priority_refs: dict[tuple[str, str], tuple[str, str]] = {}
_GROUP_OPTIONS = {g: g for g in KIND_FOR_GROUP}
_KIND_OPTIONS = {k: k for k in KIND_FOR_GROUP.values()}


def _shared_ref(ref: tuple[str, str]) -> tuple[str, str]:
    shared = _priority_refs.get(ref)
    if shared is None:
        shared = _kept(_priority_refs, ref, (ref[0], sys.intern(ref[1])), PRIORITY_REFS_SIZE)
    return shared


class _Spec(NamedTuple):
    """What a workload's spec decodes to (every field immutable: one value may serve many workloads)."""

    queue_name: str
    pod_sets: tuple[PodSet, ...]
    priority: int
    priority_class: tuple[str, str] | None
    active: bool
    maximum_execution_time_seconds: int | None


# Workloads submitted in bulk (a job array, a generator's classes) carry a few
# thousand distinct specs at most: each distinct valid spec is checked once
# and its decoded value shared.  Keyed by ``repr`` of the parsed mapping (which
# tells 1 from True and 1 from 1.0) and by whether queueName is required.
SPECS_MEMO_SIZE = 4096
_specs_memo: dict[tuple[str, bool], _Spec] = {}


def _kept(memo: dict[K, V], key: K, value: V, size: int) -> V:
    """Put ``value`` into a bounded memo (the oldest entry goes first) and return it."""
    if len(memo) >= size:
        del memo[next(iter(memo))]
    memo[key] = value
    return value


def read_workload(doc: Fields, meta: Meta, dialect: Dialect) -> Workload:
    raw = doc.get("spec")
    # A Job in a kube-batch PodGroup takes its queue from the PodGroup, once it exists.
    needs_queue = not group_name(meta.annotations)
    key = (repr(raw), needs_queue) if isinstance(raw, dict) else None
    read = _specs_memo.get(key) if key is not None else None
    if read is None:
        # Counted before the spec is read: reading it reports its unknown fields at once.
        before = len(doc.problems)
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
        queue_name = spec.string("queueName", required=needs_queue, check=dns_subdomain_problem)
        pod_sets = _shared_pod_sets(spec)
        spec_problems = len(spec.problems)
        # (The status is read here, as it always was, so that problems keep their order.)
        status = read_status(doc, pod_sets, dialect) if doc.has("status") else NO_STATUS
        after_status = len(spec.problems)
        read = _Spec(
            queue_name=sys.intern(queue_name),
            pod_sets=pod_sets,
            priority=spec.integer("priority", default=0) or 0,
            priority_class=_read_priority_class(spec),
            active=spec.boolean("active", default=True),
            maximum_execution_time_seconds=spec.integer("maximumExecutionTimeSeconds", minimum=1),
        )
        if key is not None and spec_problems == before and len(spec.problems) == after_status:
            # Only a valid spec is kept: an invalid one must report its problems each time.
            _kept(_specs_memo, key, read, SPECS_MEMO_SIZE)
    else:
        status = read_status(doc, read.pod_sets, dialect) if doc.has("status") else NO_STATUS
    return Workload(
        namespace=sys.intern(meta.namespace),
        name=meta.name,
        uid=meta.uid,
        creation_timestamp=meta.creation_timestamp,
        queue_name=read.queue_name,
        pod_sets=read.pod_sets,
        priority=read.priority,
        priority_class=read.priority_class,
        active=read.active,
        maximum_execution_time_seconds=read.maximum_execution_time_seconds,
        labels=meta.labels,
        annotations=meta.annotations or _NO_ANNOTATIONS,
        generation=meta.generation,
        status=status,
    )


def _read_priority_class(spec: Fields) -> tuple[str, str] | None:
    result: tuple[str, str] | None = None
    ref = spec.mapping("priorityClassRef", known=("group", "kind", "name"))
    if ref is not None:
        group = ref.choice("group", _GROUP_OPTIONS, default="", required=True)
        kind = ref.choice("kind", _KIND_OPTIONS, default="", required=True)
        if group and kind and KIND_FOR_GROUP[group] != kind:
            ref.error("kind", f"must be {KIND_FOR_GROUP[group]} for group {group}, got {show(kind)}")
        name = ref.string("name", required=True, check=dns_subdomain_problem)
        if kind and name:
            result = _shared_ref((kind, name))
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
            result = _shared_ref((KIND_FOR_SOURCE[source], class_name))
    return result


# -- pod sets and containers ---------------------------------------------------


def _shared_pod_sets(spec: Fields) -> tuple[PodSet, ...]:
    """``_read_pod_sets``, decoded once per distinct podSets value (see ``_pod_sets_memo``)."""
    raw = spec.get("podSets")
    if not isinstance(raw, list):
        return _read_pod_sets(spec)
    key = repr(raw)
    shared = _pod_sets_memo.get(key)
    if shared is not None:
        return shared
    before = len(spec.problems)
    pod_sets = _read_pod_sets(spec)
    if len(spec.problems) == before:
        # Only a valid value is kept: an invalid one must report its problems each time.
        _kept(_pod_sets_memo, key, pod_sets, POD_SETS_MEMO_SIZE)
    return pod_sets


def _read_pod_sets(spec: Fields) -> tuple[PodSet, ...]:
    pod_sets: list[PodSet] = []
    seen: dict[str, int] = {}
    partial = 0
    for i, (path, raw) in enumerate(spec.items("podSets", required=True, min_items=1, max_items=MAX_POD_SETS)):
        ps = Fields.of(
            raw, path, spec.problems, known=("name", "template", "count", "minCount", "topologyRequest")
        )
        if ps is None:
            continue
        name = ps.string("name", default=DEFAULT_POD_SET_NAME, check=dns_label_problem) or DEFAULT_POD_SET_NAME
        if name in seen:
            ps.error("name", f"duplicate: podSets[{seen[name]}] is already named {show(name)}")
        else:
            seen[name] = i
        # Kueue's schema lets a pod set have count 0, so that an integration
        # can scale one role of a job to zero.  sluicegate has no such
        # integration, and a pod set of no pods would reserve quota for
        # nothing: a workload of only such sets would be admitted and then
        # never finish, since nothing in it can.  So every pod set needs a pod.
        count = ps.integer("count", default=1, minimum=0)
        if count == 0:
            ps.error("count", "must be at least 1, got 0: a pod set of no pods would hold quota with nothing to run")
        count = 1 if not count else count
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
    annotations: dict[str, str] = {}
    if tmeta is not None:
        # Validated like any labels, so a manifest accepted here is accepted
        # by Kubernetes too, but not kept: the model's PodSet has no place
        # for them and nothing in sluicegate selects pods by label (no
        # Services, no affinity).  Kueue allows exactly these two fields in
        # a pod template's metadata, so they are read rather than rejected.
        tmeta.string_map("labels", key_check=qualified_name_problem, value_check=label_value_problem)
        annotations = tmeta.string_map("annotations", key_check=qualified_name_problem)
    topology = read_topology_request(ps, annotations, template.path("metadata") + ".annotations", count)
    pod = template.mapping("spec", known=POD_SPEC_FIELDS, unsupported=POD_SPEC_UNSUPPORTED, required=True)
    if pod is None:
        return PodSet(name=name, count=count, min_count=min_count)
    names: dict[str, str] = {}
    init = tuple(
        c
        for path, raw in pod.items("initContainers")
        if (c := read_container(raw, path, pod.problems, names)) is not None
    )
    containers = tuple(
        c
        for path, raw in pod.items("containers", required=True, min_items=1)
        if (c := read_container(raw, path, pod.problems, names)) is not None
    )
    restart = "Never"
    if pod.get("restartPolicy") == "Always":
        pod.error(
            "restartPolicy",
            "Always is not valid for a batch pod, whose processes must run to completion; use Never or OnFailure",
        )
    else:
        restart = pod.choice("restartPolicy", {p: p for p in RESTART_POLICIES}, default="Never")
    requests = effective_requests(containers, init)
    for res, qty in requests.items():
        if qty > MAX_MILLI_VALUE // (1000 if res in MILLI_RESOURCES else 1):
            # Each container's quantity is bounded; their sum must be too.
            pod.error(
                "containers",
                f"the pod's {res} requests add up to more than Kubernetes' bound "
                f"({MAX_MILLI_VALUE // 1000} units, a milli-value of 2^63-1)",
            )
    grace = pod.integer(
        "terminationGracePeriodSeconds", default=DEFAULT_GRACE_PERIOD_SECONDS, minimum=0, maximum=INT64_MAX
    )
    return PodSet(
        name=name,
        count=count,
        min_count=min_count,
        requests=requests,
        node_selector=pod.string_map("nodeSelector", key_check=qualified_name_problem, value_check=label_value_problem),
        tolerations=read_tolerations(pod, "tolerations"),
        containers=containers,
        init_containers=init,
        restart_policy=restart,
        termination_grace_period_seconds=DEFAULT_GRACE_PERIOD_SECONDS if grace is None else grace,
        priority_class_name=pod.string("priorityClassName", check=dns_subdomain_problem),
        security_context=read_security_context(pod, SECURITY_CONTEXT_FIELDS),
        topology_request=topology,
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


def read_container(
    raw: object,
    path: str,
    problems: Problems,
    names: dict[str, str],
    *,
    known: tuple[str, ...] = CONTAINER_FIELDS,
    unsupported: dict[str, str] = CONTAINER_UNSUPPORTED,
) -> Container | None:
    """One container of a pod template (also used for static pod manifests, with their own field lists)."""
    c = Fields.of(raw, path, problems, known=known, unsupported=unsupported)
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
                    f'must not exceed the limit ("{lim.text}"), got "{req.text}"',
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
        readiness_probe=_read_probe(c) if "readinessProbe" in known else None,
        security_context=read_security_context(c, CONTAINER_SECURITY_CONTEXT_FIELDS)
        if "securityContext" in known
        else None,
    )


def read_security_context(parent: Fields, known: tuple[str, ...]) -> SecurityContext | None:
    """``parent.securityContext`` (pod or container): user and group ids, runAsNonRoot, allowPrivilegeEscalation."""
    sc = parent.mapping("securityContext", known=known, unsupported=SECURITY_CONTEXT_UNSUPPORTED)
    if sc is None:
        return None
    # Linux ids are 32-bit unsigned; (uid_t)-1 means "unchanged" to the kernel.
    return SecurityContext(
        run_as_user=sc.integer("runAsUser", minimum=0, maximum=MAX_LINUX_ID),
        run_as_group=sc.integer("runAsGroup", minimum=0, maximum=MAX_LINUX_ID),
        run_as_non_root=_optional_boolean(sc, "runAsNonRoot"),
        allow_privilege_escalation=_optional_boolean(sc, "allowPrivilegeEscalation")
        if "allowPrivilegeEscalation" in known
        else None,
    )


def _optional_boolean(f: Fields, key: str) -> bool | None:
    value = f.get(key)
    if value is None:
        return None
    if not isinstance(value, bool):
        f.error(key, f"must be true or false, got {show(value)}")
        return None
    return value


def _read_probe(c: Fields) -> Probe | None:
    p = c.mapping("readinessProbe", known=PROBE_FIELDS, unsupported=PROBE_UNSUPPORTED)
    if p is None:
        return None
    actions = [k for k in ("exec", "tcpSocket", "httpGet") if p.has(k)]
    if len(actions) != 1:
        p.error("", f"exactly one of exec, tcpSocket or httpGet is required, got {len(actions)}")
    probe = Probe(
        initial_delay_seconds=p.integer("initialDelaySeconds", default=0, minimum=0) or 0,
        period_seconds=p.integer("periodSeconds", default=10, minimum=1) or 10,
        timeout_seconds=p.integer("timeoutSeconds", default=1, minimum=1) or 1,
        success_threshold=p.integer("successThreshold", default=1, minimum=1) or 1,
        failure_threshold=p.integer("failureThreshold", default=3, minimum=1) or 3,
    )
    ex = p.mapping("exec", known=("command",))
    if ex is not None:
        cmd = ex.strings("command")
        if not cmd:
            ex.error("command", "required: the command to run")
        return replace(probe, exec_command=cmd)
    tcp = p.mapping("tcpSocket", known=("port",), unsupported={"host": "probes always target the pod's own node"})
    if tcp is not None:
        return replace(probe, tcp_port=tcp.integer("port", required=True, minimum=1, maximum=65535))
    http = p.mapping(
        "httpGet",
        known=("path", "port"),
        unsupported={
            "host": "probes always target the pod's own node",
            "scheme": "only plain HTTP is probed",
            "httpHeaders": "custom headers are not supported",
        },
    )
    if http is not None:
        return replace(
            probe,
            http_path=http.string("path", default="/"),
            http_port=http.integer("port", required=True, minimum=1, maximum=65535),
        )
    return probe


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
            res.problems.add(rpath, f'must be non-negative, got "{amount.text}"')
            continue
        out[rname] = amount
    return out
