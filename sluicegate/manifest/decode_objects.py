"""ResourceFlavor, Topology, WorkloadPriorityClass, PriorityClass and Namespace documents."""

from __future__ import annotations

from sluicegate.manifest.dialect import Meta
from sluicegate.manifest.reader import Fields, keyed, read_quantity
from sluicegate.manifest.syntax import dns_subdomain_problem, label_value_problem, qualified_name_problem
from sluicegate.manifest.taints import read_taints, read_tolerations
from sluicegate.model import (
    SYSTEM_CLUSTER_CRITICAL,
    SYSTEM_NODE_CRITICAL,
    FlavorName,
    Namespace,
    PriorityClass,
    ResourceFlavor,
    WorkloadPriorityClass,
)
from sluicegate.model.objects import SimulatedNode
from sluicegate.model.topology import HOSTNAME_LABEL, Topology

MAX_NODE_LABELS = 8
# Kueue's limits on a ResourceFlavor's nodeTaints and tolerations.
MAX_NODE_TAINTS = 8
MAX_FLAVOR_TOLERATIONS = 8
MAX_DESCRIPTION = 2048
# Kubernetes keeps priorities above this for its two built-in classes.
HIGHEST_USER_DEFINABLE_PRIORITY = 1_000_000_000
BUILTIN_PRIORITY_CLASSES = {
    "system-cluster-critical": SYSTEM_CLUSTER_CRITICAL,
    "system-node-critical": SYSTEM_NODE_CRITICAL,
}
PREEMPTION_POLICIES = ("PreemptLowerPriority", "Never")

# Kueue's bounds on a Topology (apis/kueue/v1beta2/topology_types.go).
MAX_TOPOLOGY_LEVELS = 16
MAX_NODE_LABEL_LENGTH = 316

NODE_SPEC_UNSUPPORTED = {"unschedulable": "cordon a node with `sluicectl cordon`; simulate nodes are all schedulable"}

RESOURCE_FLAVOR_UNSUPPORTED = {
    "resourceWeights": "per-flavor weights in the dominant resource share are not implemented",
}


def read_resource_flavor(doc: Fields, meta: Meta) -> ResourceFlavor:
    spec = doc.mapping("spec", known=("nodeLabels", "nodeTaints", "tolerations", "topologyName"),
                       unsupported=RESOURCE_FLAVOR_UNSUPPORTED)
    if spec is None:
        return ResourceFlavor(name=FlavorName(meta.name))
    node_labels = spec.string_map(
        "nodeLabels", key_check=qualified_name_problem, value_check=label_value_problem, max_entries=MAX_NODE_LABELS
    )
    topology = spec.optional_string("topologyName", check=dns_subdomain_problem)
    if topology is not None and not node_labels:
        # Kueue's CRD rule: a TAS flavor must say which nodes are its own.
        spec.error("topologyName", "at least one nodeLabel is required when topology is set")
    return ResourceFlavor(
        name=FlavorName(meta.name),
        node_labels=node_labels,
        node_taints=read_taints(spec, "nodeTaints", max_items=MAX_NODE_TAINTS),
        tolerations=read_tolerations(spec, "tolerations", max_items=MAX_FLAVOR_TOLERATIONS),
        topology_name=topology or None,
    )


def read_topology(doc: Fields, meta: Meta) -> Topology:
    """Kueue's Topology: ordered levels, each a node label key, hostname only as the lowest."""
    spec = doc.mapping("spec", known=("levels",), required=True)
    levels: list[str] = []
    if spec is not None:
        for path, raw in spec.items("levels", required=True, min_items=1, max_items=MAX_TOPOLOGY_LEVELS):
            level = Fields.of(raw, path, spec.problems, known=("nodeLabel",))
            if level is None:
                continue
            label = level.string("nodeLabel", required=True, check=qualified_name_problem)
            if len(label) > MAX_NODE_LABEL_LENGTH:
                level.error("nodeLabel", f"must be at most {MAX_NODE_LABEL_LENGTH} characters, got {len(label)}")
            if label in levels:
                level.error("nodeLabel", f"must be unique: {label} is already level {levels.index(label)}")
            levels.append(label)
        if HOSTNAME_LABEL in levels[:-1]:
            spec.error("levels", f"the {HOSTNAME_LABEL} label can only be used at the lowest level of topology")
    return Topology(name=meta.name, levels=tuple(levels))


def read_workload_priority_class(doc: Fields, meta: Meta) -> WorkloadPriorityClass:
    value = doc.integer("value", required=True)
    description = doc.string("description")
    if len(description) > MAX_DESCRIPTION:
        doc.error("description", f"must be at most {MAX_DESCRIPTION} characters, got {len(description)}")
    return WorkloadPriorityClass(name=meta.name, value=value or 0, description=description)


def read_priority_class(doc: Fields, meta: Meta) -> PriorityClass:
    value = doc.integer("value", required=True)
    builtin = BUILTIN_PRIORITY_CLASSES.get(meta.name)
    if builtin is not None:
        if value is not None and value != builtin:
            doc.error("value", f"{meta.name} is built in with value {builtin}, got {value}")
    elif meta.name.startswith("system-"):
        doc.problems.add(
            "metadata.name",
            "names starting with system- are reserved for Kubernetes' built-in classes "
            "(system-cluster-critical, system-node-critical)",
        )
    elif value is not None and value > HIGHEST_USER_DEFINABLE_PRIORITY:
        doc.error(
            "value",
            f"must be at most {HIGHEST_USER_DEFINABLE_PRIORITY} (higher values are reserved for "
            f"system-cluster-critical and system-node-critical), got {value}",
        )
    return PriorityClass(
        name=meta.name,
        value=value or 0,
        global_default=doc.boolean("globalDefault", default=False),
        description=doc.string("description"),
        preemption_policy=doc.choice(
            "preemptionPolicy", {p: p for p in PREEMPTION_POLICIES}, default="PreemptLowerPriority"
        ),
    )


def read_node(doc: Fields, meta: Meta) -> SimulatedNode:
    """A ``v1`` Node for ``sluicectl simulate``: its labels, taints and allocatable (else capacity)."""
    spec = doc.mapping("spec", known=("taints",), unsupported=NODE_SPEC_UNSUPPORTED)
    status = doc.mapping("status", known=("allocatable", "capacity"))
    allocatable: dict[str, int] = {}
    if status is not None:
        key = "allocatable" if status.has("allocatable") else "capacity"
        raw = status.get(key)
        if raw is not None and not isinstance(raw, dict):
            status.error(key, "must be a mapping of resource names to quantities")
        elif isinstance(raw, dict):
            for name in raw:
                res = str(name)
                amount = read_quantity(raw[name], keyed(status.path(key), res), res, status.problems)
                if amount is not None:
                    allocatable[res] = amount.canonical
    return SimulatedNode(
        name=meta.name,
        labels=meta.labels,
        allocatable=allocatable,
        taints=read_taints(spec, "taints") if spec is not None else (),
    )


def read_namespace(meta: Meta) -> Namespace:
    return Namespace(name=meta.name, labels=meta.labels)
