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

from bisect import bisect_left, insort
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


_NOTHING: Mapping[str, int] = {}
_NOTHING_PER_NODE: Mapping[str, Mapping[str, int]] = {}
# Below this many eligible nodes a pod's node is found by looking at each (cheaper than the index).
BEST_FIT_INDEX_MIN_NODES = 8


def _fit_key(node: NodeView, avoid: int, extra: Mapping[str, int]) -> tuple[int, int, int, str]:
    """Where a node ranks for a pod not yet on it: (PreferNoSchedule taints, free cpu, free memory, name)."""
    alloc, req = node.allocatable, node.requested
    cpu = alloc["cpu"] - req.get("cpu", 0) - extra.get("cpu", 0) if "cpu" in alloc else 0
    memory = alloc["memory"] - req.get("memory", 0) - extra.get("memory", 0) if "memory" in alloc else 0
    return (avoid, cpu, memory, node.name)


class _BestFit:
    """The eligible nodes in the order a pod ranks them (see the module docstring), with what the cycle
    committed to them counted: a pod's best node is found by a bisection to the first with enough cpu and a
    walk to the first that holds the rest, not by looking at every node.

    Kept up to date by PlacementCache (a node's requests change, a placement commits); the nodes a
    workload's own earlier pods went to (``touched``) rank apart and are looked at directly.
    """

    __slots__ = ("entries", "entry_of", "levels")

    def __init__(self, nodes: Sequence[NodeView], avoid: Mapping[str, int],
                 committed: Mapping[str, Mapping[str, int]]) -> None:
        self.entry_of = {n.name: _fit_key(n, avoid[n.name], committed.get(n.name, _NOTHING)) for n in nodes}
        self.entries = sorted(self.entry_of.values())
        self.levels = sorted(set(avoid.values()))

    def update(self, node: NodeView, avoid: int, committed: Mapping[str, int]) -> None:
        new = _fit_key(node, avoid, committed)
        old = self.entry_of.get(node.name)
        if old == new:
            return
        entries = self.entries
        if old is not None:
            del entries[bisect_left(entries, old)]
        insort(entries, new)
        self.entry_of[node.name] = new

    def best(self, requests: Mapping[str, int], by_name: Mapping[str, NodeView],
             used: Mapping[str, Mapping[str, int]], skip: set[str], below: float) -> NodeView | None:
        """The best-ranked node not in ``skip`` that holds ``requests`` (with ``used`` counted), among
        those with fewer than ``below`` PreferNoSchedule taints; None if there is none."""
        entries = self.entries
        cpu = requests.get("cpu", 0)
        for level in self.levels:
            if level >= below:
                break
            # Fewer free cpus than requested: cannot hold the pod, and rank first; skipped at once.
            i = bisect_left(entries, (level, cpu) if cpu > 0 else (level,))
            while i < len(entries):
                entry = entries[i]
                if entry[0] != level:
                    break
                i += 1
                name = entry[3]
                if name in skip:
                    continue
                node = by_name[name]
                free = _free(node, used.get(name, _NOTHING))
                if _fits(free, requests, free.get("pods", 0) if "pods" in node.allocatable else None) is None:
                    return node
        return None


@dataclass(slots=True)
class _Eligible:
    nodes: list[NodeView]
    avoid: dict[str, int]
    tainted: str
    by_name: dict[str, NodeView]
    # Each node's position in ``nodes``.
    index: dict[str, int]
    # Built on first use (with the cycle's committed placements), then kept up to date.
    fit: _BestFit | None = None


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
    # Each node's position in ``ordered`` (built when first needed).
    at: dict[str, int] = field(default_factory=dict)
    # What a pod set admitted with given flavors requires of a node (see _requirements), by
    # (id of the pod set, its flavors by resource): the submission path shares one pod set among the
    # workloads of a shape, so a cycle's entries mostly ask the same.
    requirements: dict[tuple[int, tuple[tuple[str, FlavorName], ...]], _Requirements] = field(default_factory=dict)

    @classmethod
    def of(cls, nodes: Sequence[NodeView]) -> PlacementCache:
        return cls(sorted(nodes, key=lambda n: n.name))

    def committed(self, node_names: Iterable[str], in_cycle: Mapping[str, Mapping[str, int]]) -> None:
        """A placement was committed to these nodes; ``in_cycle``: every node's committed requests, now."""
        names = set(node_names)
        self.dirty |= names
        self._drop(names)
        for found in self.eligible.values():
            fit = found.fit
            if fit is not None:
                for name in names:
                    view = found.by_name.get(name)
                    if view is not None:
                        fit.update(view, found.avoid[name], in_cycle.get(name, _NOTHING))

    def _drop(self, names: set[str]) -> None:
        for tree in self.trees.values():
            tree.invalidate(names)

    def refresh(self, nodes: Sequence[NodeView], hint: Iterable[str] | None = None) -> None:
        """Take a new cycle's node views, keeping what they leave valid.

        The registry hands the views over in name order, each node keeping its view object until
        it changes: then this costs one identity check per node, and work per changed node only.
        ``hint``: the names of every node whose view may differ from the last refresh's, none added or
        removed (NodeRegistry.take_changes); only those are looked at."""
        changed = self.dirty
        self.dirty = set()
        previous = self.ordered
        replaced: list[NodeView] = []
        structural = len(previous) != len(nodes)
        if not structural:
            if hint is None:
                pairs: Iterable[tuple[NodeView, NodeView]] = zip(previous, nodes, strict=True)
            else:
                where = self.at
                if len(where) != len(previous):
                    where = self.at = {n.name: i for i, n in enumerate(previous)}
                positions = sorted(where[name] for name in hint if name in where)
                pairs = [(previous[i], nodes[i]) for i in positions]
            for old, new in pairs:
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
            self.at = {n.name: i for i, n in enumerate(self.ordered)}
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
            fit = found.fit
            if fit is not None:
                # A new cycle commits nothing yet: what the last one placed is in the nodes' requests now
                # (or was not bound after all).
                for name in changed:
                    now = found.by_name.get(name)
                    if now is not None:
                        fit.update(now, found.avoid[name], _NOTHING)


@dataclass(frozen=True, slots=True)
class _Requirements:
    """``labels_required`` and ``tolerations_of`` a pod set with its flavors, and their key in
    ``PlacementCache.eligible``; kept with the pod set and the flavor objects they were read from
    (a changed flavor is a new object)."""

    pod_set: PodSet
    flavors: tuple[tuple[FlavorName, ResourceFlavor | None], ...]
    required: dict[str, str]
    tolerations: tuple[Toleration, ...]
    key: tuple[object, ...]


# At most this many kept requirements (PlacementCache.requirements); all are dropped when full.
REQUIREMENTS_KEPT = 4096


def _requirements(shared: PlacementCache, pod_set: PodSet, assigned: Mapping[str, FlavorName],
                  flavors: Mapping[FlavorName, ResourceFlavor]) -> _Requirements:
    memo_key = (id(pod_set), tuple(assigned.items()))
    known = shared.requirements.get(memo_key)
    if known is not None and known.pod_set is pod_set:
        for name, flavor in known.flavors:
            if flavors.get(name) is not flavor:
                break
        else:
            return known
    required = labels_required(pod_set, assigned, flavors)
    tolerations = tolerations_of(pod_set, assigned, flavors)
    names = sorted(set(assigned.values()))
    made = _Requirements(pod_set, tuple((n, flavors.get(n)) for n in names), required, tolerations,
                         (tuple(sorted(required.items())), tolerations))
    if len(shared.requirements) >= REQUIREMENTS_KEPT:
        shared.requirements.clear()
    # Kept with the pod set, so its id stays its own while the entry lives.
    shared.requirements[memo_key] = made
    return made


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
        needs = _requirements(shared, pod_set, assigned, flavors)
        required, tolerations, key = needs.required, needs.tolerations, needs.key
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
            fit = found.fit
            if fit is None and len(eligible) >= BEST_FIT_INDEX_MIN_NODES:
                fit = found.fit = _BestFit(eligible, avoid, in_cycle or _NOTHING_PER_NODE)
            failure = _place_pods(pod_set, range(count), eligible, used, touched, avoid, tainted, out,
                                  fit=fit, by_name=found.by_name)
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
    *,
    fit: _BestFit | None = None,
    by_name: Mapping[str, NodeView] | None = None,
) -> PlacementFailure | None:
    """Bind the pods ``indexes`` of a pod set to ``eligible`` nodes, one by one (best fit).

    ``fit``: ``eligible``'s index (``by_name`` its nodes by name), for its nodes not in ``touched``.
    """
    for index in indexes:
        if fit is not None and by_name is not None:
            node = _best_indexed(pod_set.requests, fit, by_name, used, touched, avoid)
            if node is not None:
                _take(node, pod_set, index, used, touched, out)
                continue
            # No node holds the pod: the scan below counts why, for the message.
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
        _take(best[1], pod_set, index, used, touched, out)
    return None


def _best_indexed(
    requests: Mapping[str, int], fit: _BestFit, by_name: Mapping[str, NodeView],
    used: Mapping[str, Mapping[str, int]], touched: set[str], avoid: Mapping[str, int],
) -> NodeView | None:
    """The node the scan in _place_pods would choose, from the index and the nodes already touched."""
    best: tuple[tuple[int, int, int, str], NodeView] | None = None
    cpu, memory = requests.get("cpu", 0), requests.get("memory", 0)
    for name in touched:
        n = by_name.get(name)
        if n is None:
            continue  # touched by another pod set, not eligible for this one
        free = _free(n, used.get(name, _NOTHING))
        if _fits(free, requests, free.get("pods", 0) if "pods" in n.allocatable else None) is not None:
            continue
        key = (avoid[name], free.get("cpu", 0) - cpu, free.get("memory", 0) - memory, name)
        if best is None or key < best[0]:
            best = (key, n)
    # A touched node ranks before every untouched one with as many PreferNoSchedule taints.
    untouched = fit.best(requests, by_name, used, touched, best[0][0] if best is not None else float("inf"))
    if untouched is not None:
        return untouched
    return best[1] if best is not None else None


def _take(node: NodeView, pod_set: PodSet, index: int, used: dict[str, Mapping[str, int]], touched: set[str],
          out: list[PodPlacement]) -> None:
    touched.add(node.name)
    bucket = used[node.name] = dict(used.get(node.name, {}))
    for res, qty in pod_set.requests.items():
        bucket[res] = bucket.get(res, 0) + qty
    if "pods" in node.allocatable:
        bucket["pods"] = bucket.get("pods", 0) + 1
    out.append(PodPlacement(pod_set=pod_set.name, index=index, node=node.name, requests=dict(pod_set.requests)))


class CyclePlacer:
    """Places the pods of each entry admitted in one cycle, counting earlier ones."""

    def __init__(
        self,
        nodes: Sequence[NodeView],
        flavors: Mapping[FlavorName, ResourceFlavor],
        topologies: Mapping[str, Topology] | None = None,
        cache: PlacementCache | None = None,
        hint: Iterable[str] | None = None,
    ) -> None:
        """``cache``: one kept from earlier cycles (refreshed here with ``nodes``, and ``hint``: see
        PlacementCache.refresh), else a new one."""
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
            cache.refresh(self.nodes, hint)
        self._cache = cache

    def place(self, key: str, pod_sets: Sequence[tuple[PodSet, int, Mapping[str, FlavorName]]]) -> str | None:
        chosen: dict[str, TopologyAssignment] = {}
        result = place(pod_sets=pod_sets, nodes=self.nodes, flavors=self.flavors, in_cycle=self.in_cycle,
                       topologies=self.topologies, topology_out=chosen, cache=self._cache)
        if isinstance(result, PlacementFailure):
            return result.message
        if chosen:
            self.topology[key] = chosen
        for p in result:
            bucket = self.in_cycle.setdefault(p.node, {})
            for r, q in p.requests.items():
                bucket[r] = bucket.get(r, 0) + q
            bucket["pods"] = bucket.get("pods", 0) + 1
        self._cache.committed((p.node for p in result), self.in_cycle)
        self.placements[key] = result
        return None
