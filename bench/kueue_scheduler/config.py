"""The generator configuration of Kueue's scheduler performance test, and the plan it expands to.

The YAML schema is Kueue's (``test/performance/scheduler/runner/generator``):
cohorts → queuesSets → workloadsSets → workloads.  A field outside that
schema is an error naming the field, so a typo never silently changes what
is measured.

Names follow Kueue's generator so the objects read the same in both
systems: cohort ``<class>-<i>``; ClusterQueue, its namespace and its
LocalQueue ``<queue class>-<queue set>-<j>-<cohort>``; workload
``<class>-<workload set>-<k>-<template>``.  Each workload set waits one
creation interval *before* each creation, as Kueue's does.

The TAS configuration adds Kueue's optional ``topology`` (levels, each a
node label and a count; the last level's ``capacity`` sizes every node) and
``resourceFlavor`` (name, the node label it selects, the topology it names),
and per workload template ``podCount``, ``tasConstraint`` (required,
preferred or balanced), ``tasLevel`` and ``sliceSize`` (Kueue's
``topology_generator.go`` and ``generator.go``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import yaml

from sluicegate.quantity import QuantityError, parse_canonical

PREEMPTION_POLICIES = ("Never", "LowerPriority", "LowerOrNewerEqualPriority", "Any")
TAS_CONSTRAINTS = ("required", "preferred", "balanced")
# Kueue's generator puts every topology node in this group and the flavor selects it (value "tas").
TAS_NODE_GROUP_VALUE = "tas"
# Kueue's topology_generator.go defaults for a node level without capacity.
DEFAULT_NODE_CPU_M = 96_000
DEFAULT_NODE_MEMORY = 256 << 30


class ConfigError(Exception):
    """The generator file cannot be used; ``key`` names the offending field."""

    def __init__(self, source: str, key: str, problem: str) -> None:
        self.source = source
        self.key = key
        self.problem = problem
        super().__init__(f"{source}: {key}: {problem}; fix the generator file and run again")


@dataclass(frozen=True, slots=True)
class WorkloadTemplate:
    class_name: str
    runtime_ms: int
    priority: int
    # CPU requested by each of the workload's pods, in millicores.
    request_m: int
    pod_count: int = 1
    # TAS: "required", "preferred" or "balanced" at the node label tas_level; balanced slices pods by slice_size.
    tas_constraint: str | None = None
    tas_level: str | None = None
    slice_size: int | None = None


@dataclass(frozen=True, slots=True)
class WorkloadsSet:
    count: int
    creation_interval_ms: int
    workloads: tuple[WorkloadTemplate, ...]


@dataclass(frozen=True, slots=True)
class QueuesSet:
    class_name: str
    count: int
    nominal_m: int
    borrowing_limit_m: int | None
    reclaim_within_cohort: str
    within_cluster_queue: str
    workloads_sets: tuple[WorkloadsSet, ...]


@dataclass(frozen=True, slots=True)
class CohortSet:
    class_name: str
    count: int
    queues_sets: tuple[QueuesSet, ...]


@dataclass(frozen=True, slots=True)
class TopologyLevel:
    name: str
    count: int
    node_label: str


@dataclass(frozen=True, slots=True)
class TopologyConfig:
    name: str
    # Outermost first (block, rack, hostname); the product of the counts is the number of nodes.
    levels: tuple[TopologyLevel, ...]
    node_cpu_m: int = DEFAULT_NODE_CPU_M
    node_memory: int = DEFAULT_NODE_MEMORY

    @property
    def node_labels(self) -> tuple[str, ...]:
        return tuple(lv.node_label for lv in self.levels)


@dataclass(frozen=True, slots=True)
class FlavorConfig:
    name: str
    # With a topology: the flavor selects nodes carrying node_label=TAS_NODE_GROUP_VALUE.
    node_label: str | None = None
    topology_name: str | None = None


@dataclass(frozen=True, slots=True)
class GeneratorConfig:
    source: str
    cohorts: tuple[CohortSet, ...]
    topology: TopologyConfig | None = None
    resource_flavor: FlavorConfig | None = None


# ------------------------------------------------------------------ loading


class _Reader:
    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, key: str, problem: str) -> ConfigError:
        return ConfigError(self.source, key, problem)

    def mapping(self, raw: object, key: str, *, known: Sequence[str], required: Sequence[str]) -> Mapping[str, object]:
        if not isinstance(raw, dict):
            raise self.fail(key, f"expected a mapping, got {type(raw).__name__}")
        for k in raw:
            if k not in known:
                raise self.fail(f"{key}.{k}", f"unknown field; the schema has {', '.join(known)}")
        for k in required:
            if k not in raw:
                raise self.fail(f"{key}.{k}", "required field is missing")
        return raw

    def items(self, raw: object, key: str) -> list[object]:
        if not isinstance(raw, list) or not raw:
            raise self.fail(key, "expected a non-empty list")
        return raw

    def count(self, raw: object, key: str) -> int:
        if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
            raise self.fail(key, f"expected a non-negative integer, got {raw!r}")
        return raw

    def text(self, raw: object, key: str) -> str:
        if not isinstance(raw, str) or not raw:
            raise self.fail(key, f"expected a non-empty string, got {raw!r}")
        return raw

    def cpu(self, raw: object, key: str) -> int:
        if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
            raise self.fail(key, f"expected a CPU quantity such as 20 or \"500m\", got {raw!r}")
        try:
            value = parse_canonical("cpu", raw)
        except QuantityError as exc:
            raise self.fail(key, str(exc)) from None
        if value < 0:
            raise self.fail(key, f"must not be negative, got {raw!r}")
        return value

    def memory(self, raw: object, key: str) -> int:
        if isinstance(raw, bool) or not isinstance(raw, (int, str)):
            raise self.fail(key, f"expected a memory quantity such as \"256Gi\", got {raw!r}")
        try:
            value = parse_canonical("memory", raw)
        except QuantityError as exc:
            raise self.fail(key, str(exc)) from None
        if value <= 0:
            raise self.fail(key, f"must be positive, got {raw!r}")
        return value

    def policy(self, raw: object, key: str) -> str:
        if raw not in PREEMPTION_POLICIES:
            raise self.fail(key, f"expected one of {', '.join(PREEMPTION_POLICIES)}, got {raw!r}")
        assert isinstance(raw, str)
        return raw


def parse_config(raw: object, *, source: str) -> GeneratorConfig:
    r = _Reader(source)
    top = r.mapping(raw, "$", known=("topology", "resourceFlavor", "cohorts"), required=("cohorts",))
    topology = _topology(r, top["topology"]) if "topology" in top else None
    flavor = _flavor(r, top["resourceFlavor"], topology) if "resourceFlavor" in top else None
    cohorts = []
    for ci, c_raw in enumerate(r.items(top["cohorts"], "cohorts")):
        ck = f"cohorts[{ci}]"
        c = r.mapping(c_raw, ck, known=("className", "count", "queuesSets"), required=("className", "count", "queuesSets"))
        queues_sets = []
        for qi, q_raw in enumerate(r.items(c["queuesSets"], f"{ck}.queuesSets")):
            qk = f"{ck}.queuesSets[{qi}]"
            q = r.mapping(q_raw, qk, known=("className", "count", "nominalQuota", "borrowingLimit", "reclaimWithinCohort",
                                            "withinClusterQueue", "workloadsSets"),
                          required=("className", "count", "nominalQuota", "workloadsSets"))
            wl_sets = []
            for wi, w_raw in enumerate(r.items(q["workloadsSets"], f"{qk}.workloadsSets")):
                wk = f"{qk}.workloadsSets[{wi}]"
                w = r.mapping(w_raw, wk, known=("count", "creationIntervalMs", "workloads"),
                              required=("count", "creationIntervalMs", "workloads"))
                templates = []
                for ti, t_raw in enumerate(r.items(w["workloads"], f"{wk}.workloads")):
                    tk = f"{wk}.workloads[{ti}]"
                    t = r.mapping(t_raw, tk, known=("className", "runtimeMs", "priority", "request", "podCount",
                                                    "tasConstraint", "tasLevel", "sliceSize"),
                                  required=("className", "runtimeMs", "request"))
                    priority = t.get("priority", 0)
                    if isinstance(priority, bool) or not isinstance(priority, int):
                        raise r.fail(f"{tk}.priority", f"expected an integer, got {priority!r}")
                    templates.append(_template(r, t, tk, priority, topology))
                wl_sets.append(WorkloadsSet(
                    count=r.count(w["count"], f"{wk}.count"),
                    creation_interval_ms=r.count(w["creationIntervalMs"], f"{wk}.creationIntervalMs"),
                    workloads=tuple(templates),
                ))
            queues_sets.append(QueuesSet(
                class_name=r.text(q["className"], f"{qk}.className"),
                count=r.count(q["count"], f"{qk}.count"),
                nominal_m=r.cpu(q["nominalQuota"], f"{qk}.nominalQuota"),
                borrowing_limit_m=r.cpu(q["borrowingLimit"], f"{qk}.borrowingLimit") if "borrowingLimit" in q else None,
                reclaim_within_cohort=r.policy(q.get("reclaimWithinCohort", "Never"), f"{qk}.reclaimWithinCohort"),
                within_cluster_queue=r.policy(q.get("withinClusterQueue", "Never"), f"{qk}.withinClusterQueue"),
                workloads_sets=tuple(wl_sets),
            ))
        cohorts.append(CohortSet(
            class_name=r.text(c["className"], f"{ck}.className"),
            count=r.count(c["count"], f"{ck}.count"),
            queues_sets=tuple(queues_sets),
        ))
    if topology is not None and (flavor is None or flavor.topology_name != topology.name):
        raise r.fail("resourceFlavor.topologyName", f"a topology is configured: the flavor must name {topology.name!r}")
    return GeneratorConfig(source=source, cohorts=tuple(cohorts), topology=topology, resource_flavor=flavor)


def _topology(r: _Reader, raw: object) -> TopologyConfig:
    t = r.mapping(raw, "topology", known=("name", "levels"), required=("name", "levels"))
    levels: list[TopologyLevel] = []
    node_cpu_m, node_memory = DEFAULT_NODE_CPU_M, DEFAULT_NODE_MEMORY
    level_items = r.items(t["levels"], "topology.levels")
    if len(level_items) < 2:
        # As Kueue's generateTopologyNodes: at least a rack-like level and the node level.
        raise r.fail("topology.levels", f"expected at least 2 levels, got {len(level_items)}")
    for li, l_raw in enumerate(level_items):
        lk = f"topology.levels[{li}]"
        last = li == len(level_items) - 1
        lv = r.mapping(l_raw, lk, known=("name", "count", "nodeLabel", *(("capacity",) if last else ())),
                       required=("name", "count", "nodeLabel"))
        count = r.count(lv["count"], f"{lk}.count")
        if count == 0:
            raise r.fail(f"{lk}.count", "expected at least 1")
        level = TopologyLevel(name=r.text(lv["name"], f"{lk}.name"), count=count,
                              node_label=r.text(lv["nodeLabel"], f"{lk}.nodeLabel"))
        if level.node_label in (x.node_label for x in levels):
            raise r.fail(f"{lk}.nodeLabel", f"{level.node_label!r} is already an outer level's label")
        levels.append(level)
        if last and "capacity" in lv:
            cap = r.mapping(lv["capacity"], f"{lk}.capacity", known=("cpu", "memory"), required=())
            if "cpu" in cap:
                node_cpu_m = r.cpu(cap["cpu"], f"{lk}.capacity.cpu")
            if "memory" in cap:
                node_memory = r.memory(cap["memory"], f"{lk}.capacity.memory")
    return TopologyConfig(name=r.text(t["name"], "topology.name"), levels=tuple(levels), node_cpu_m=node_cpu_m,
                          node_memory=node_memory)


def _flavor(r: _Reader, raw: object, topology: TopologyConfig | None) -> FlavorConfig:
    f = r.mapping(raw, "resourceFlavor", known=("name", "nodeLabel", "topologyName"), required=("name",))
    flavor = FlavorConfig(
        name=r.text(f["name"], "resourceFlavor.name"),
        node_label=r.text(f["nodeLabel"], "resourceFlavor.nodeLabel") if "nodeLabel" in f else None,
        topology_name=r.text(f["topologyName"], "resourceFlavor.topologyName") if "topologyName" in f else None,
    )
    if flavor.topology_name is not None:
        if topology is None or topology.name != flavor.topology_name:
            raise r.fail("resourceFlavor.topologyName", f"no topology named {flavor.topology_name!r} in this file")
        if flavor.node_label is None:
            # Kueue's generateResourceFlavor: "resourceFlavor.nodeLabel is required when TAS is enabled".
            raise r.fail("resourceFlavor.nodeLabel", "required when the flavor names a topology")
    return flavor


def _template(r: _Reader, t: Mapping[str, object], tk: str, priority: int,
              topology: TopologyConfig | None) -> WorkloadTemplate:
    pod_count = r.count(t.get("podCount", 1), f"{tk}.podCount") or 1  # Kueue: 0 means 1
    constraint = t.get("tasConstraint")
    level = r.text(t["tasLevel"], f"{tk}.tasLevel") if "tasLevel" in t else None
    slice_size = r.count(t["sliceSize"], f"{tk}.sliceSize") if "sliceSize" in t else None
    if constraint is not None and constraint not in TAS_CONSTRAINTS:
        raise r.fail(f"{tk}.tasConstraint", f"expected one of {', '.join(TAS_CONSTRAINTS)}, got {constraint!r}")
    if level is not None:
        if topology is None:
            raise r.fail(f"{tk}.tasLevel", "set, but the file has no topology")
        if level not in topology.node_labels:
            raise r.fail(f"{tk}.tasLevel", f"{level!r} is not a level of topology {topology.name!r} "
                                           f"({', '.join(topology.node_labels)})")
        if constraint is None:
            raise r.fail(f"{tk}.tasConstraint", "required when tasLevel is set")
    elif constraint is not None:
        raise r.fail(f"{tk}.tasLevel", f"required when tasConstraint is {constraint!r}")
    if constraint == "balanced":
        # Kueue's validation: podset-slice-size must be set with podset-slice-required-topology, 1..podCount;
        # the controller also wants whole slices.
        if slice_size is None or not 1 <= slice_size <= pod_count or pod_count % slice_size:
            raise r.fail(f"{tk}.sliceSize", f"a balanced template needs a slice size from 1 to podCount ({pod_count}) "
                                            f"that divides it, got {slice_size!r}")
    elif slice_size is not None:
        raise r.fail(f"{tk}.sliceSize", "only a balanced template is sliced")
    assert constraint is None or isinstance(constraint, str)
    return WorkloadTemplate(
        class_name=r.text(t["className"], f"{tk}.className"),
        runtime_ms=r.count(t["runtimeMs"], f"{tk}.runtimeMs"),
        priority=priority,
        request_m=r.cpu(t["request"], f"{tk}.request"),
        pod_count=pod_count,
        tas_constraint=constraint,
        tas_level=level,
        slice_size=slice_size,
    )


def load_config(path: Path) -> GeneratorConfig:
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(str(path), "$", f"cannot read the file ({exc})") from None
    return parse_config(raw, source=str(path))


# ------------------------------------------------------------------ scaling


def _scaled_count(count: int, factor: float) -> int:
    # Never scale a set away entirely: a smoke run still exercises every class.
    return count if factor == 1 else max(1, round(count * factor))


def scaled(cfg: GeneratorConfig, *, count_scale: float = 1.0, queue_scale: float = 1.0, time_scale: float = 1.0) -> GeneratorConfig:
    """A smaller or faster variant: workload counts × count_scale, ClusterQueue
    counts × queue_scale, runtimes and creation intervals × time_scale."""
    def wl_set(w: WorkloadsSet) -> WorkloadsSet:
        return replace(
            w,
            count=_scaled_count(w.count, count_scale),
            creation_interval_ms=round(w.creation_interval_ms * time_scale),
            workloads=tuple(replace(t, runtime_ms=round(t.runtime_ms * time_scale)) for t in w.workloads),
        )

    def q_set(q: QueuesSet) -> QueuesSet:
        return replace(q, count=_scaled_count(q.count, queue_scale), workloads_sets=tuple(wl_set(w) for w in q.workloads_sets))

    return replace(cfg, cohorts=tuple(replace(c, queues_sets=tuple(q_set(q) for q in c.queues_sets)) for c in cfg.cohorts))


def without_tas(cfg: GeneratorConfig) -> GeneratorConfig:
    """The same queues, workloads and labelled nodes with no topology constraint: a flavor without
    ``topologyName`` and workloads without TAS annotations (the control that Kueue's TAS file's header
    compares against: "direct comparison of TAS overhead vs baseline scheduling")."""
    def wl_set(w: WorkloadsSet) -> WorkloadsSet:
        return replace(w, workloads=tuple(replace(t, tas_constraint=None, tas_level=None, slice_size=None)
                                          for t in w.workloads))

    def q_set(q: QueuesSet) -> QueuesSet:
        return replace(q, workloads_sets=tuple(wl_set(w) for w in q.workloads_sets))

    flavor = None if cfg.resource_flavor is None else replace(cfg.resource_flavor, topology_name=None)
    return replace(cfg, resource_flavor=flavor,
                   cohorts=tuple(replace(c, queues_sets=tuple(q_set(q) for q in c.queues_sets)) for c in cfg.cohorts))


# --------------------------------------------------------------------- plan


@dataclass(frozen=True, slots=True)
class QueuePlan:
    name: str  # ClusterQueue, namespace and LocalQueue share it, as in Kueue's generator
    cohort: str
    class_name: str
    nominal_m: int
    borrowing_limit_m: int | None
    reclaim_within_cohort: str
    within_cluster_queue: str
    # ClusterQueue minAdmitDuration (a sluicegate extension), seconds; None: not set.
    min_admit_duration_s: float | None = None


@dataclass(frozen=True, slots=True)
class WorkloadPlan:
    # Seconds after the queue's creation at which the workload is created.
    due: float
    namespace: str
    name: str
    class_name: str
    cluster_queue: str
    cohort: str
    request_m: int  # per pod
    runtime_ms: int
    priority: int
    pod_count: int = 1
    tas_constraint: str | None = None
    tas_level: str | None = None
    slice_size: int | None = None

    @property
    def total_request_m(self) -> int:
        """CPU the workload holds while admitted: every pod's request."""
        return self.request_m * self.pod_count


@dataclass(frozen=True, slots=True)
class NodePlan:
    name: str
    labels: Mapping[str, str]
    cpu_m: int
    memory: int


@dataclass(frozen=True, slots=True)
class Plan:
    queues: tuple[QueuePlan, ...]
    # Sorted by due time, then name: the order of creation.
    workloads: tuple[WorkloadPlan, ...]
    topology: TopologyConfig | None = None
    flavor: FlavorConfig | None = None

    @property
    def nodes(self) -> tuple[NodePlan, ...]:
        """The topology's nodes (none without a topology: the bench sizes plain fake nodes itself)."""
        return topology_nodes(self.topology, self.flavor) if self.topology is not None else ()

    @property
    def priorities(self) -> tuple[int, ...]:
        return tuple(sorted({w.priority for w in self.workloads}))

    @property
    def total_nominal_m(self) -> int:
        return sum(q.nominal_m for q in self.queues)


def expand(cfg: GeneratorConfig) -> Plan:
    queues: list[QueuePlan] = []
    workloads: list[WorkloadPlan] = []
    for c_set in cfg.cohorts:
        for ci in range(c_set.count):
            cohort = f"{c_set.class_name}-{ci}"
            for qsi, q_set in enumerate(c_set.queues_sets):
                for qi in range(q_set.count):
                    q = QueuePlan(
                        name=f"{q_set.class_name}-{qsi}-{qi}-{cohort}", cohort=cohort, class_name=q_set.class_name,
                        nominal_m=q_set.nominal_m, borrowing_limit_m=q_set.borrowing_limit_m,
                        reclaim_within_cohort=q_set.reclaim_within_cohort, within_cluster_queue=q_set.within_cluster_queue,
                    )
                    queues.append(q)
                    for wsi, w_set in enumerate(q_set.workloads_sets):
                        step = 0
                        for si in range(w_set.count):
                            for ti, t in enumerate(w_set.workloads):
                                step += 1
                                workloads.append(WorkloadPlan(
                                    due=step * w_set.creation_interval_ms / 1000, namespace=q.name,
                                    name=f"{t.class_name}-{wsi}-{si}-{ti}", class_name=t.class_name, cluster_queue=q.name,
                                    cohort=cohort, request_m=t.request_m, runtime_ms=t.runtime_ms, priority=t.priority,
                                    pod_count=t.pod_count, tas_constraint=t.tas_constraint, tas_level=t.tas_level,
                                    slice_size=t.slice_size,
                                ))
    workloads.sort(key=lambda w: (w.due, w.namespace, w.name))
    return Plan(queues=tuple(queues), workloads=tuple(workloads), topology=cfg.topology, flavor=cfg.resource_flavor)


def topology_nodes(topology: TopologyConfig, flavor: FlavorConfig | None) -> tuple[NodePlan, ...]:
    """One node per leaf of the level tree, outermost level varying slowest, as Kueue's
    generateNodesRecursive: label values ``<level name>-<i>``, node name ``node-b0-r2-n15``.

    One deliberate difference: Kueue labels the innermost level ``<name>-<i>`` too, so its
    ``kubernetes.io/hostname`` values repeat in every rack (harmless there: its fake job controller
    never binds pods).  Here real placement follows the recorded assignment to a node, so the
    innermost label carries the node's own (unique) name, as a kubelet's hostname label does.
    """
    group = {flavor.node_label: TAS_NODE_GROUP_VALUE} if flavor is not None and flavor.node_label else {}
    nodes: list[NodePlan] = []
    levels = topology.levels
    total = math.prod(lv.count for lv in levels)
    for n in range(total):
        idx: list[int] = []
        rest = n
        for lv in reversed(levels):
            rest, i = divmod(rest, lv.count)
            idx.append(i)
        idx.reverse()
        name = "node-" + "-".join(f"{lv.name[0]}{i}" for lv, i in zip(levels, idx, strict=True))
        labels = {lv.node_label: f"{lv.name}-{i}" for lv, i in zip(levels[:-1], idx[:-1], strict=True)}
        labels[levels[-1].node_label] = name
        nodes.append(NodePlan(name=name, labels={**group, **labels}, cpu_m=topology.node_cpu_m, memory=topology.node_memory))
    return tuple(nodes)


# ------------------------------------------------------------- ideal bound


@dataclass(frozen=True, slots=True)
class IdealBound:
    """The shortest wall time any scheduler could reach on this plan.

    ``work_s``: the busiest cohort's CPU-seconds of work (every pod's
    request × runtime) over its nominal quota (every ClusterQueue here may
    borrow its cohort's whole quota, so a cohort is one pool);
    ``creation_s``: the last creation plus that workload's runtime.  The
    bound is the larger of the two.  Nodes never bind in Kueue's files: the
    TAS file's smallest domain that a constraint names, a rack (64 × 96 =
    6,144 CPUs), holds ten times the whole cluster's quota (600 CPUs), so a
    rack-level constraint cannot lengthen the bound either.
    """

    work_s: float
    busiest_cohort: str
    creation_s: float
    # All cohorts: CPU-seconds of work and nominal CPUs (for the best usage % the bound allows).
    total_work_cpu_s: float
    total_nominal_cpu: float

    @property
    def wall_s(self) -> float:
        return max(self.work_s, self.creation_s)

    @property
    def usage_pct(self) -> float:
        """CPU usage % over the ideal wall time, if the run took exactly that long."""
        denominator = self.total_nominal_cpu * self.wall_s
        return 100 * self.total_work_cpu_s / denominator if denominator else 0.0


def ideal_bound(plan: Plan) -> IdealBound:
    work: dict[str, float] = {}
    nominal: dict[str, int] = {}
    for q in plan.queues:
        nominal[q.cohort] = nominal.get(q.cohort, 0) + q.nominal_m
    for w in plan.workloads:
        work[w.cohort] = work.get(w.cohort, 0.0) + w.total_request_m * w.runtime_ms / 1e6
    per_cohort = {c: (work.get(c, 0.0) / (nominal[c] / 1000) if nominal[c] else math.inf) for c in nominal}
    busiest = max(sorted(per_cohort), key=lambda c: per_cohort[c]) if per_cohort else ""
    creation = max((w.due + w.runtime_ms / 1000 for w in plan.workloads), default=0.0)
    return IdealBound(work_s=per_cohort.get(busiest, 0.0), busiest_cohort=busiest, creation_s=creation,
                      total_work_cpu_s=sum(work.values()), total_nominal_cpu=sum(nominal.values()) / 1000)
