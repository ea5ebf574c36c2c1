"""Topology Aware Scheduling: choose the topology domains a pod set's pods go to.

The semantics are Kueue's (pkg/cache/scheduler/tas_flavor_snapshot.go,
``findTopologyAssignment``), written anew here:

1. Every leaf domain (one value per level; one node when the lowest level is
   ``kubernetes.io/hostname``) gets how many of the pod set's pods its free
   capacity holds (allocatable minus what is requested there, in-cycle
   admissions included), and how many slices when it is on the slice level.
   Inner domains sum their children.  The counts are kept per pod shape
   between assignments and cycles; only the leaves of nodes whose free
   capacity changed since are counted again (Kueue fills every leaf anew per
   snapshot; the result is the same).
2. At the requested level: BestFit (required, preferred) takes the domain
   with the least sufficient capacity; when none holds every pod, required
   fails with Kueue's message, preferred moves one level up, and at the top a
   preferred request is spread greedily over the largest domains, the last one
   chosen by best fit.  Unconstrained requests (and pod sets with no request,
   which Kueue treats as an implied unconstrained request) use Kueue's
   LeastFreeCapacity profile (TASProfileMixed, on by default): the fullest
   domain that holds them all, else the fullest domains first.
3. The chosen domains are walked down level by level, each time keeping the
   fewest children (largest first, the last by best fit).

Balanced placement (Kueue's TASBalancedPlacement) is an alpha gate that is
off by default in Kueue; it is not implemented.  Pod-set leaders (Kueue's
PodSetGroup leader/worker placement) are not either: sluicegate has no
pod-set groups.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter

from sluicegate.model.topology import HOSTNAME_LABEL, Topology, TopologyAssignment, TopologyDomain, TopologyRequest

UNLIMITED = 2**31 - 1


class Domain:
    """One domain of a topology: the label values down to its level, its children in values order
    (inner levels) or nodes (lowest level).  ``index`` places it in a capacity's list of pod counts."""

    __slots__ = ("children", "depth", "index", "nodes", "parent", "rank", "values")

    def __init__(self, values: tuple[str, ...], parent: Domain | None, index: int) -> None:
        self.values = values
        self.parent = parent
        self.depth = len(values) - 1
        self.index = index
        # Its place among the domains of its level in values order (set once the tree is built).
        self.rank = 0
        self.children: list[Domain] = []
        self.nodes: list[str] = []


@dataclass(frozen=True, slots=True)
class TopologyFailure:
    message: str


class _Capacity:
    """How many pods of one shape every domain holds: a leaf's own count, an inner domain the sum
    of its children's.  Leaves in ``dirty`` are counted again before the next use."""

    __slots__ = ("dirty", "pods")

    def __init__(self, domains: int, leaves: Sequence[int]) -> None:
        self.pods = [0] * domains
        self.dirty = set(leaves)


# Capacities kept per tree, one per pod shape; the oldest is forgotten past this many.
MAX_CAPACITIES = 64


class _Pass:
    """One assignment's view of a capacity: slice counts (memoised), Kueue's domain order, and
    the pods given to each chosen domain (``share``); the capacity itself is only read."""

    __slots__ = ("memo", "pods", "share", "size", "slice_level")

    def __init__(self, pods: list[int], size: int, slice_level: int) -> None:
        self.pods = pods
        self.size = size
        self.slice_level = slice_level
        self.memo: dict[int, int] = {}
        self.share: dict[int, int] = {}

    def slices(self, d: Domain) -> int:
        if d.depth > self.slice_level:
            return 0
        if self.size == 1:
            # One pod per slice: a domain above the slice level holds as many slices as pods.
            return self.pods[d.index]
        if d.depth == self.slice_level:
            return self.pods[d.index] // self.size
        known = self.memo.get(d.index)
        if known is None:
            known = self.memo[d.index] = sum(self.slices(c) for c in d.children)
        return known

    def ordered(self, domains: Sequence[Domain], unconstrained: bool, *, ranked: bool
                ) -> tuple[list[Domain], list[int], list[int]]:
        """``domains`` (all of one level) in Kueue's sortedDomains order, with each one's pods and
        slices: BestFit most slices first, LeastFreeCapacity (unconstrained) fewest first; then
        the fewest pods; then by values.  ``ranked``: ``domains`` are in values order already."""
        if not domains:
            return [], [], []
        depth = domains[0].depth
        pods = self.pods
        if depth > self.slice_level or self.size == 1:
            # The slice count is 0 (below the slice level) or the pod count: the order is by pods
            # alone, most first only for BestFit at or above the slice level, ties in values order.
            if not ranked:
                domains = sorted(domains, key=_RANK)
            caps = [pods[d.index] for d in domains]
            order = sorted(range(len(caps)), key=caps.__getitem__,
                           reverse=not unconstrained and depth <= self.slice_level)
            doms = [domains[i] for i in order]
            have = [caps[i] for i in order]
            return doms, have, (have if depth <= self.slice_level else [0] * len(have))
        sign = 1 if unconstrained else -1
        keyed = sorted((sign * self.slices(d), pods[d.index], d.rank, d) for d in domains)
        return [k[3] for k in keyed], [k[1] for k in keyed], [sign * k[0] for k in keyed]


def _best_fit(have: list[int], start: int, needed: int) -> int:
    """Of ``have[start:]``, the first index with the smallest count that still holds ``needed``
    (``start`` when none does)."""
    enough = [h for h in have[start:] if h >= needed]
    return have.index(min(enough), start) if enough else start


_RANK = attrgetter("rank")


class TopologyTree:
    """The domains of one topology over a set of nodes, with the pod capacities of each pod shape
    kept between assignments: :meth:`invalidate` names the nodes whose free capacity changed, and
    the next assignment of a shape counts only their leaves again (and their ancestors' sums)."""

    def __init__(self, topology: Topology, nodes: Sequence[tuple[str, Mapping[str, str]]]) -> None:
        self.topology = topology
        self.levels = topology.levels
        self.per_level: list[dict[tuple[str, ...], Domain]] = [{} for _ in self.levels]
        self.roots: list[Domain] = []
        self.leaves: list[Domain] = []
        self.domains: list[Domain] = []
        self.skipped = 0
        for name, labels in nodes:
            values = tuple(labels.get(key) for key in self.levels)
            if any(v is None for v in values):
                # Kueue leaves a node without every level's label out of the topology.
                self.skipped += 1
                continue
            full = tuple(v for v in values if v is not None)
            parent: Domain | None = None
            for depth in range(len(self.levels)):
                prefix = full[: depth + 1]
                dom = self.per_level[depth].get(prefix)
                if dom is None:
                    dom = Domain(prefix, parent, len(self.domains))
                    self.domains.append(dom)
                    self.per_level[depth][prefix] = dom
                    if parent is None:
                        self.roots.append(dom)
                    else:
                        parent.children.append(dom)
                    if depth == len(self.levels) - 1:
                        self.leaves.append(dom)
                parent = dom
            assert parent is not None
            parent.nodes.append(name)
        # Each level's domains, and each domain's children, in values order.
        self.level_domains = [sorted(level.values(), key=attrgetter("values")) for level in self.per_level]
        for level in self.level_domains:
            for rank, dom in enumerate(level):
                dom.rank = rank
        for dom in self.domains:
            dom.children.sort(key=_RANK)
        self.hostname_leaves = bool(self.levels) and self.levels[-1] == HOSTNAME_LABEL
        # The nodes of each leaf, by the values an assignment records for it (hostname only, or all).
        start = len(self.levels) - 1 if self.hostname_leaves else 0
        self._leaf_nodes = {leaf.values[start:]: leaf.nodes for leaf in self.leaves}
        self._leaf_of = {name: leaf.index for leaf in self.leaves for name in leaf.nodes}
        self._leaf_indexes = [leaf.index for leaf in self.leaves]
        self._capacities: dict[Hashable, _Capacity] = {}

    def nodes_of(self, values: tuple[str, ...]) -> list[str]:
        """The nodes of the leaf domain an assignment names (none: no such domain)."""
        return self._leaf_nodes.get(values, [])

    def level_index(self, key: str) -> int | None:
        try:
            return self.levels.index(key)
        except ValueError:
            return None

    def has_level(self, request: TopologyRequest | None) -> str | None:
        """None when every level the request names exists, else the first missing one."""
        if request is None:
            return None
        for key in (request.required, request.preferred, request.slice_required):
            if key is not None and key not in self.levels:
                return key
        return None

    # -- phase 1: capacities --------------------------------------------------

    def invalidate(self, node_names: Iterable[str]) -> None:
        """These nodes' free capacity changed: every kept capacity counts their leaves again."""
        leaf_of = self._leaf_of
        leaves = {i for name in node_names if (i := leaf_of.get(name)) is not None}
        if leaves:
            for capacity in self._capacities.values():
                capacity.dirty |= leaves

    def _capacity(self, pods_fit: Callable[[Domain], int], shape: Hashable | None, skip: set[int]) -> _Capacity:
        """The capacity of ``shape``, its dirty leaves counted again, except those in ``skip``
        (they stay dirty)."""
        capacity = self._capacities.get(shape) if shape is not None else None
        if capacity is None:
            capacity = _Capacity(len(self.domains), self._leaf_indexes)
            if shape is not None:
                if len(self._capacities) >= MAX_CAPACITIES:
                    del self._capacities[next(iter(self._capacities))]
                self._capacities[shape] = capacity
        if capacity.dirty:
            pods, domains = capacity.pods, self.domains
            for i in capacity.dirty:
                if i not in skip:
                    self._add(pods, domains[i], pods_fit(domains[i]) - pods[i])
            capacity.dirty = capacity.dirty & skip
        return capacity

    @staticmethod
    def _add(pods: list[int], leaf: Domain, delta: int) -> None:
        d: Domain | None = leaf
        while delta and d is not None:
            pods[d.index] += delta
            d = d.parent

    # -- phase 2: choose ------------------------------------------------------

    def assign(
        self,
        count: int,
        request: TopologyRequest | None,
        pods_fit: Callable[[Domain], int],
        *,
        shape: Hashable | None = None,
        volatile: Iterable[str] = (),
    ) -> TopologyAssignment | TopologyFailure:
        """Where ``count`` pods go; ``pods_fit`` tells how many pods a leaf's free capacity holds.

        With a ``shape`` (any key naming the pods' requests), the leaves' counts are kept for the
        next assignment of that shape; only leaves of nodes named to :meth:`invalidate` since are
        asked again.  The leaves of ``volatile`` nodes are asked afresh and their counts used for
        this assignment only (e.g. nodes an earlier pod set of the same workload took room on)."""
        if not self.levels:
            return TopologyFailure(f"topology {self.topology.name!r} has no levels")
        lowest = self.levels[-1]
        req = request or TopologyRequest(unconstrained=True)
        required = req.required is not None
        slice_only = req.required is None and req.preferred is None and req.slice_required is not None
        unconstrained = req.unconstrained or not req.explicit or slice_only
        key = req.required or req.preferred or (self.levels[0] if slice_only else lowest)
        level = self.level_index(key)
        if level is None:
            return TopologyFailure(f"no requested topology level: {key}")
        slice_size = 1
        slice_level = len(self.levels) - 1
        if req.slice_required is not None:
            if not req.slice_size:
                return TopologyFailure("slice topology requested, but slice size not provided")
            found = self.level_index(req.slice_required)
            if found is None:
                return TopologyFailure(f"no requested topology level for slices: {req.slice_required}")
            slice_level, slice_size = found, req.slice_size
        if level > slice_level:
            return TopologyFailure(f"podset slice topology {req.slice_required} is above the podset topology {key}")
        fresh = {i for name in volatile if (i := self._leaf_of.get(name)) is not None}
        pods = self._capacity(pods_fit, shape, fresh).pods
        undo: list[tuple[Domain, int]] = []
        for i in fresh:
            leaf = self.domains[i]
            delta = pods_fit(leaf) - pods[i]
            self._add(pods, leaf, delta)
            undo.append((leaf, -delta))
        try:
            return self._choose(_Pass(pods, slice_size, slice_level), level, count,
                                required=required, unconstrained=unconstrained)
        finally:
            for leaf, delta in undo:
                self._add(pods, leaf, delta)

    def _choose(self, p: _Pass, level: int, count: int, *, required: bool, unconstrained: bool
                ) -> TopologyAssignment | TopologyFailure:
        chosen = self._level_with_fit(p, level, count, required=required, unconstrained=unconstrained)
        if isinstance(chosen, TopologyFailure):
            return chosen
        fit_level, domains = chosen
        domains = self._to_minimum(p, domains, [p.slices(d) for d in domains], count, p.size, unconstrained,
                                   slices=True)
        depth = fit_level
        last = len(self.levels) - 1
        while depth < min(last, p.slice_level):
            lower, _, slices = p.ordered([c for d in domains for c in d.children], unconstrained,
                                         ranked=len(domains) == 1)
            domains = self._to_minimum(p, lower, slices, count, p.size, unconstrained, slices=True)
            depth += 1
        while depth < last:
            below: list[Domain] = []
            for d in domains:
                children, pods, _ = p.ordered(d.children, unconstrained, ranked=True)
                below.extend(self._to_minimum(p, children, pods, p.share[d.index], 1, unconstrained, slices=False))
            domains = below
            depth += 1
        return self._build(p, domains)

    def _not_fit(self, fit: int, total: int, slice_size: int, level: int) -> TopologyFailure:
        unit = "pod" if slice_size == 1 else "slice"
        name = self.topology.name
        if fit == 0:
            text = f'topology "{name}" doesn\'t allow to fit any of {total} {unit}(s)'
        else:
            text = f'topology "{name}" allows to fit only {fit} out of {total} {unit}(s)'
        return TopologyFailure(f"{text} (level {self.levels[level]})")

    def _level_with_fit(
        self, p: _Pass, level: int, count: int, *, required: bool, unconstrained: bool
    ) -> tuple[int, list[Domain]] | TopologyFailure:
        slice_size = p.size
        for depth in range(level, -1, -1):
            if not self.level_domains[depth]:
                return TopologyFailure(f"no topology domains at level: {self.levels[depth]}")
            ordered, _, slices = p.ordered(self.level_domains[depth], unconstrained, ranked=True)
            needed = count // slice_size
            if unconstrained:
                for d, have in zip(ordered, slices, strict=True):
                    if have >= needed:
                        return depth, [d]
            else:
                if slices[0] >= needed:
                    return depth, [ordered[_best_fit(slices, 0, needed)]]
                if required:
                    return self._not_fit(slices[0], needed, slice_size, depth)
                if depth > 0:
                    continue
            # Spread over several domains of this level: largest first (fullest first when
            # unconstrained), the last one by best fit.
            results: list[Domain] = []
            remaining = needed
            for i in range(len(ordered)):
                if remaining <= 0:
                    break
                at = i
                if not unconstrained and slices[i] >= remaining:
                    at = _best_fit(slices, i, remaining)
                results.append(ordered[at])
                remaining -= slices[at]
            if remaining > 0:
                return self._not_fit(needed - remaining, needed, slice_size, depth)
            return depth, results
        raise AssertionError("unreachable: level 0 always returns")

    @staticmethod
    def _to_minimum(
        p: _Pass, domains: list[Domain], have: list[int], count: int, slice_size: int, unconstrained: bool, *,
        slices: bool,
    ) -> list[Domain]:
        """Keep the fewest of ``domains`` (each holding ``have`` pods or slices) that hold ``count``
        pods; record each one's share of pods."""
        remaining = count // slice_size if slices else count
        unit = slice_size if slices else 1
        out: list[Domain] = []
        for i, dom in enumerate(domains):
            held = have[i]
            if not unconstrained and held >= remaining:
                at = _best_fit(have, i, remaining)
                dom, held = domains[at], have[at]
            if held >= remaining:
                p.share[dom.index] = remaining * unit
                out.append(dom)
                return out
            p.share[dom.index] = held * unit
            remaining -= held
            out.append(dom)
        raise AssertionError(f"capacity was checked above, yet {remaining} remain unassigned")

    def _build(self, p: _Pass, leaves: list[Domain]) -> TopologyAssignment:
        share = p.share
        chosen = sorted((d for d in leaves if share[d.index] > 0), key=lambda d: d.values)
        start = len(self.levels) - 1 if self.hostname_leaves else 0
        return TopologyAssignment(
            levels=self.levels[start:],
            domains=tuple(TopologyDomain(values=d.values[start:], count=share[d.index]) for d in chosen),
        )


def pods_that_fit(free: Mapping[str, int], requests: Mapping[str, int], pods_limited: bool) -> int:
    """How many pods of ``requests`` the free capacity holds (Kueue counts a pod slot as a resource)."""
    fit = UNLIMITED
    for res, qty in requests.items():
        if qty > 0:
            fit = min(fit, max(0, free.get(res, 0)) // qty)
    if pods_limited:
        fit = min(fit, max(0, free.get("pods", 0)))
    return fit
