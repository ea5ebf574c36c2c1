"""Node placement: bind every pod of an admitted workload to a node, or none.

A pod may go to a node that is Ready, has no pressure condition, carries
every label of the flavors its pod set was assigned (and the pod set's node
selector), whose NoSchedule and NoExecute taints the pod tolerates (its
own tolerations plus those of its assigned flavors, which Kueue adds to
admitted pods), and whose allocatable minus what is already requested there
holds the pod's requests.  The workload is a gang: if any pod finds no node, no
pod is bound.

Nodes are ranked, in this order: fewest PreferNoSchedule taints the pod
does not tolerate (the scheduler's TaintToleration score, a soft
preference), then to pack: a node this workload already uses, then the node
with the least room left after the pod (best fit), then by name, so the
same inputs always give the same placement.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter

from sluicegate.controller.scheduling.tas import Domain, TopologyFailure, TopologyTree, pods_that_fit
from sluicegate.model.names import FlavorName
from sluicegate.model.objects import ResourceFlavor
from sluicegate.model.taints import PREFER_NO_SCHEDULE, Taint, Toleration, first_untolerated, untolerated_count
from sluicegate.model.topology import Topology, TopologyAssignment
from sluicegate.model.workloads import PodSet
from sluicegate.quantity import format_canonical


@dataclass(frozen=True, slots=True)
class NodeView:
    name: str
    labels: Mapping[str, str]
    allocatable: Mapping[str, int]
    # Requests of every pod already bound to the node (static pods included).
    requested: Mapping[str, int] = field(default_factory=dict)
    ready: bool = True
    # MemoryPressure, DiskPressure...: nothing new lands here while set.
    conditions: tuple[str, ...] = ()
    taints: tuple[Taint, ...] = ()

    @property
    def schedulable(self) -> bool:
        return self.ready and not self.conditions


@dataclass(frozen=True, slots=True)
class PodPlacement:
    pod_set: str
    index: int
    node: str
    requests: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class PlacementFailure:
    message: str


def _free(node: NodeView, extra: Mapping[str, int]) -> dict[str, int]:
    out = {}
    for res, alloc in node.allocatable.items():
        out[res] = alloc - node.requested.get(res, 0) - extra.get(res, 0)
    return out


def _fits(free: Mapping[str, int], requests: Mapping[str, int], pods_free: int | None) -> str | None:
    """None if it fits, else the first resource that does not."""
    for res, qty in requests.items():
        if qty <= 0:
            continue
        if free.get(res, 0) < qty:
            return res
    if pods_free is not None and pods_free < 1:
        return "pods"
    return None


def labels_required(
    pod_set: PodSet, flavors: Mapping[str, FlavorName], all_flavors: Mapping[FlavorName, ResourceFlavor]
) -> dict[str, str]:
    required: dict[str, str] = {}
    for flavor_name in sorted(set(flavors.values())):
        flavor = all_flavors.get(flavor_name)
        if flavor is not None:
            required.update(flavor.node_labels)
    required.update(pod_set.node_selector)
    return required


def tolerations_of(
    pod_set: PodSet, flavors: Mapping[str, FlavorName], all_flavors: Mapping[FlavorName, ResourceFlavor]
) -> tuple[Toleration, ...]:
    """A pod's tolerations: its own, then those of the flavors its pod set was admitted with."""
    out = list(pod_set.tolerations)
    for flavor_name in sorted(set(flavors.values())):
        flavor = all_flavors.get(flavor_name)
        if flavor is not None:
            out.extend(flavor.tolerations)
    return tuple(out)


def _untolerated_text(taint: Taint) -> str:
    # kube-scheduler's TaintToleration filter message.
    return f"{{{taint.key}: {taint.value}}}"


@dataclass(slots=True)
class _Eligible:
    nodes: list[NodeView]
    avoid: dict[str, int]
    tainted: str
    by_name: dict[str, NodeView]
    # Each node's position in ``nodes``.
    index: dict[str, int]


@dataclass(slots=True)
class PlacementCache:
    """What placements share: nodes in name order, the eligible nodes per set of required labels
    and tolerations, and the topology trees with how many pods of each shape their domains still
    hold (counted again for a node when a placement commits to it, or its requests change).

    The scheduler keeps one across cycles and :meth:`refresh` es it with each cycle's nodes: the
    trees and eligible sets are rebuilt only when a node comes or goes or its labels, taints or
    readiness change, so a TAS admission costs one pass over the leaves, not a rebuild."""

    ordered: list[NodeView]
    eligible: dict[tuple[object, ...], _Eligible] = field(default_factory=dict)
    trees: dict[tuple[str, tuple[object, ...]], TopologyTree] = field(default_factory=dict)
    # Nodes placed on since the last refresh: their cached fits are dropped again at the next one.
    dirty: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, nodes: Sequence[NodeView]) -> PlacementCache:
        return cls(sorted(nodes, key=lambda n: n.name))

    def committed(self, node_names: Iterable[str]) -> None:
        names = set(node_names)
        self.dirty |= names
        self._drop(names)

    def _drop(self, names: set[str]) -> None:
        for tree in self.trees.values():
            tree.invalidate(names)

    def refresh(self, nodes: Sequence[NodeView]) -> None:
        """Take a new cycle's node views, keeping what they leave valid.

        The registry hands the views over in name order, each node keeping its view object until
        it changes: then this costs one identity check per node, and work per changed node only."""
        changed = self.dirty
        self.dirty = set()
        previous = self.ordered
        replaced: list[NodeView] = []
        structural = len(previous) != len(nodes)
        if not structural:
            for old, new in zip(previous, nodes, strict=True):
                if old is new:
                    continue
                if (old.name != new.name or old.labels != new.labels or old.taints != new.taints
                        or old.ready != new.ready or old.conditions != new.conditions):
                    structural = True
                    break
                replaced.append(new)
                if old.requested != new.requested or old.allocatable != new.allocatable:
                    changed.add(new.name)
        if structural:
            self.ordered = sorted(nodes, key=attrgetter("name"))
            self.eligible.clear()
            self.trees.clear()
            return
        self.ordered = list(nodes) if replaced else previous
        self._drop(changed)
        for found in self.eligible.values():
            for view in replaced:
                at = found.index.get(view.name)
                if at is not None:
                    found.nodes[at] = view
                    found.by_name[view.name] = view


def _eligible(
    ordered: Sequence[NodeView], required: Mapping[str, str], tolerations: tuple[Toleration, ...]
) -> _Eligible:
    eligible: list[NodeView] = []
    repelled: dict[str, int] = {}
    for n in ordered:
        if not n.schedulable or any(n.labels.get(k) != v for k, v in required.items()):
            continue
        taint = first_untolerated(n.taints, tolerations)
        if taint is None:
            eligible.append(n)
        else:
            repelled[_untolerated_text(taint)] = repelled.get(_untolerated_text(taint), 0) + 1
    tainted = "".join(f"; {c} node(s) had untolerated taint {t}" for t, c in sorted(repelled.items()))
    avoid = {n.name: untolerated_count(n.taints, tolerations, PREFER_NO_SCHEDULE) for n in eligible}
    return _Eligible(eligible, avoid, tainted, {n.name: n for n in eligible},
                     {n.name: i for i, n in enumerate(eligible)})


def place(
    *,
    pod_sets: Sequence[tuple[PodSet, int, Mapping[str, FlavorName]]],
    nodes: Sequence[NodeView],
    flavors: Mapping[FlavorName, ResourceFlavor],
    in_cycle: Mapping[str, Mapping[str, int]] | None = None,
    topologies: Mapping[str, Topology] | None = None,
    topology_out: dict[str, TopologyAssignment] | None = None,
    cache: PlacementCache | None = None,
) -> list[PodPlacement] | PlacementFailure:
    """Place ``count`` pods of each pod set (with its assigned flavors), all or none.

    ``in_cycle`` holds requests already placed on each node earlier in the
    same scheduling cycle; they count as used.  A pod set admitted on a flavor with a
    ``topologyName`` first gets its topology assignment (scheduling/tas.py, written to
    ``topology_out``), and its pods go only to the nodes of the assigned domains.
    ``cache`` (CyclePlacer's) must have been made from the same ``nodes`` and ``in_cycle``.
    """
    # Shares in_cycle's per-node dicts: _place_pods replaces a node's, never changes it.
    used: dict[str, Mapping[str, int]] = dict(in_cycle or {})
    touched: set[str] = set()
    out: list[PodPlacement] = []
    shared = cache if cache is not None else PlacementCache.of(nodes)
    ordered = shared.ordered
    for pod_set, count, assigned in pod_sets:
        required = labels_required(pod_set, assigned, flavors)
        tolerations = tolerations_of(pod_set, assigned, flavors)
        key = (tuple(sorted(required.items())), tolerations)
        found = shared.eligible.get(key)
        if found is None:
            found = shared.eligible[key] = _eligible(ordered, required, tolerations)
        eligible, avoid, tainted = found.nodes, found.avoid, found.tainted
        if count > 0 and not eligible:
            selector = ",".join(f"{k}={v}" for k, v in sorted(required.items())) or "<any>"
            not_ready = sum(1 for n in ordered if not n.schedulable)
            return PlacementFailure(
                f"no Ready node matches pod set {pod_set.name} (node labels {selector}); "
                f"{len(ordered)} node(s) known, {not_ready} not ready or under pressure{tainted}"
            )
        topology = _topology_of(assigned, flavors, topologies)
        if topology is None:
            failure = _place_pods(pod_set, range(count), eligible, used, touched, avoid, tainted, out)
            if failure is not None:
                return failure
            continue
        if isinstance(topology, PlacementFailure):
            return topology
        tree_key = (topology.name, key)
        tree = shared.trees.get(tree_key)
        if tree is None:
            tree = shared.trees[tree_key] = TopologyTree(topology, [(n.name, n.labels) for n in eligible])
        chosen = tree.assign(count, pod_set.topology_request, _leaf_fit(pod_set, found.by_name, used),
                             shape=tuple(sorted(pod_set.requests.items())), volatile=touched)
        if isinstance(chosen, TopologyFailure):
            return PlacementFailure(f"pod set {pod_set.name}: {chosen.message}")
        if topology_out is not None:
            topology_out[pod_set.name] = chosen
        index = 0
        for domain in chosen.domains:
            domain_nodes = [found.by_name[n] for n in tree.nodes_of(domain.values)]
            failure = _place_pods(pod_set, range(index, index + domain.count), domain_nodes, used, touched, avoid,
                                  tainted, out)
            if failure is not None:
                return failure
            index += domain.count
    return out


def _topology_of(
    assigned: Mapping[str, FlavorName],
    flavors: Mapping[FlavorName, ResourceFlavor],
    topologies: Mapping[str, Topology] | None,
) -> Topology | PlacementFailure | None:
    """The Topology of the pod set's TAS flavor (None: no flavor of it has a topologyName)."""
    for flavor_name in sorted(set(assigned.values())):
        flavor = flavors.get(flavor_name)
        if flavor is None or flavor.topology_name is None:
            continue
        topology = (topologies or {}).get(flavor.topology_name)
        if topology is None:
            return PlacementFailure(f"flavor {flavor_name} names topology {flavor.topology_name}, which does not exist")
        return topology
    return None


def _leaf_fit(
    pod_set: PodSet, by_name: Mapping[str, NodeView], used: Mapping[str, Mapping[str, int]]
) -> Callable[[Domain], int]:
    """How many of the pod set's pods a leaf domain holds (the tree keeps the answer until one of
    the leaf's nodes changes)."""
    empty: Mapping[str, int] = {}

    def fit(leaf: Domain) -> int:
        if len(leaf.nodes) == 1:
            name = leaf.nodes[0]
            node = by_name[name]
            return pods_that_fit(_free(node, used.get(name, empty)), pod_set.requests, "pods" in node.allocatable)
        # A leaf of several nodes counts their free capacity together, as Kueue does.
        total: dict[str, int] = {}
        limited = False
        for name in leaf.nodes:
            node = by_name[name]
            limited = limited or "pods" in node.allocatable
            for res, qty in _free(node, used.get(name, empty)).items():
                total[res] = total.get(res, 0) + max(0, qty)
        return pods_that_fit(total, pod_set.requests, limited)

    return fit


def _place_pods(
    pod_set: PodSet,
    indexes: range,
    eligible: Sequence[NodeView],
    used: dict[str, Mapping[str, int]],
    touched: set[str],
    avoid: Mapping[str, int],
    tainted: str,
    out: list[PodPlacement],
) -> PlacementFailure | None:
    """Bind the pods ``indexes`` of a pod set to ``eligible`` nodes, one by one (best fit)."""
    for index in indexes:
        best: tuple[tuple[int, int, int, int, str], NodeView] | None = None
        shortages: dict[str, int] = {}
        for n in eligible:
            free = _free(n, used.get(n.name, {}))
            pods_free = None
            if "pods" in n.allocatable:
                pods_free = free.get("pods", 0)
            short = _fits(free, pod_set.requests, pods_free)
            if short is not None:
                shortages[short] = shortages.get(short, 0) + 1
                continue
            # Best fit on the scarcest dimension we request: least cpu left, then memory.
            left_cpu = free.get("cpu", 0) - pod_set.requests.get("cpu", 0)
            left_mem = free.get("memory", 0) - pod_set.requests.get("memory", 0)
            key = (avoid[n.name], 0 if n.name in touched else 1, left_cpu, left_mem, n.name)
            if best is None or key < best[0]:
                best = (key, n)
        if best is None:
            detail = ", ".join(f"{c} short of {r}" for r, c in sorted(shortages.items()))
            want = ", ".join(f"{r}={format_canonical(r, q)}" for r, q in sorted(pod_set.requests.items()))
            return PlacementFailure(
                f"no node has room for pod {index} of pod set {pod_set.name} ({want}): "
                f"{len(eligible)} eligible node(s), {detail}{tainted}; the gang is not started partially"
            )
        node = best[1]
        touched.add(node.name)
        bucket = used[node.name] = dict(used.get(node.name, {}))
        for res, qty in pod_set.requests.items():
            bucket[res] = bucket.get(res, 0) + qty
        if "pods" in node.allocatable:
            bucket["pods"] = bucket.get("pods", 0) + 1
        out.append(PodPlacement(pod_set=pod_set.name, index=index, node=node.name, requests=dict(pod_set.requests)))
    return None


class CyclePlacer:
    """Places the pods of each entry admitted in one cycle, counting earlier ones."""

    def __init__(
        self,
        nodes: Sequence[NodeView],
        flavors: Mapping[FlavorName, ResourceFlavor],
        topologies: Mapping[str, Topology] | None = None,
        cache: PlacementCache | None = None,
    ) -> None:
        """``cache``: one kept from earlier cycles (refreshed here with ``nodes``), else a new one."""
        self.nodes = list(nodes)
        self.flavors = flavors
        self.topologies = topologies or {}
        self.in_cycle: dict[str, dict[str, int]] = {}
        self.placements: dict[str, list[PodPlacement]] = {}
        # Per workload key: the topology assignment of each of its TAS pod sets.
        self.topology: dict[str, dict[str, TopologyAssignment]] = {}
        if cache is None:
            cache = PlacementCache.of(self.nodes)
        else:
            cache.refresh(self.nodes)
        self._cache = cache

    def place(self, key: str, pod_sets: Sequence[tuple[PodSet, int, Mapping[str, FlavorName]]]) -> str | None:
        chosen: dict[str, TopologyAssignment] = {}
        result = place(pod_sets=pod_sets, nodes=self.nodes, flavors=self.flavors, in_cycle=self.in_cycle,
                       topologies=self.topologies, topology_out=chosen, cache=self._cache)
        if isinstance(result, PlacementFailure):
            return result.message
        if chosen:
            self.topology[key] = chosen
        self._cache.committed(p.node for p in result)
        for p in result:
            bucket = self.in_cycle.setdefault(p.node, {})
            for r, q in p.requests.items():
                bucket[r] = bucket.get(r, 0) + q
            bucket["pods"] = bucket.get("pods", 0) + 1
        self.placements[key] = result
        return None
