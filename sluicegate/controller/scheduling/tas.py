"""Topology Aware Scheduling: choose the topology domains a pod set's pods go to.

The semantics are Kueue's (pkg/cache/scheduler/tas_flavor_snapshot.go,
``findTopologyAssignment``), written anew here:

1. Every leaf domain (one value per level; one node when the lowest level is
   ``kubernetes.io/hostname``) gets how many of the pod set's pods its free
   capacity holds (allocatable minus what is requested there, in-cycle
   admissions included), and how many slices when it is on the slice level.
   Inner domains sum their children.
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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from sluicegate.model.topology import HOSTNAME_LABEL, Topology, TopologyAssignment, TopologyDomain, TopologyRequest

UNLIMITED = 2**31 - 1


class Domain:
    __slots__ = ("children", "nodes", "pod_count", "slice_count", "values")

    def __init__(self, values: tuple[str, ...]) -> None:
        self.values = values
        self.children: list[Domain] = []
        self.nodes: list[str] = []
        self.pod_count = 0
        self.slice_count = 0


@dataclass(frozen=True, slots=True)
class TopologyFailure:
    message: str


class TopologyTree:
    """The domains of one topology over a set of nodes; capacities are filled per pod set."""

    def __init__(self, topology: Topology, nodes: Sequence[tuple[str, Mapping[str, str]]]) -> None:
        self.topology = topology
        self.levels = topology.levels
        self.per_level: list[dict[tuple[str, ...], Domain]] = [{} for _ in self.levels]
        self.roots: list[Domain] = []
        self.leaves: list[Domain] = []
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
                    dom = Domain(prefix)
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
        self.hostname_leaves = bool(self.levels) and self.levels[-1] == HOSTNAME_LABEL
        # The nodes of each leaf, by the values an assignment records for it (hostname only, or all).
        start = len(self.levels) - 1 if self.hostname_leaves else 0
        self._leaf_nodes = {leaf.values[start:]: leaf.nodes for leaf in self.leaves}

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

    def _fill(self, pods_fit: Callable[[Domain], int], slice_size: int, slice_level: int) -> None:
        last = len(self.levels) - 1
        for leaf in self.leaves:
            leaf.pod_count = pods_fit(leaf)
            leaf.slice_count = leaf.pod_count // slice_size if last == slice_level else 0
        for depth in range(last - 1, -1, -1):
            for dom in self.per_level[depth].values():
                dom.pod_count = sum(c.pod_count for c in dom.children)
                if depth == slice_level:
                    dom.slice_count = dom.pod_count // slice_size
                else:
                    dom.slice_count = sum(c.slice_count for c in dom.children)

    # -- phase 2: choose ------------------------------------------------------

    def assign(
        self, count: int, request: TopologyRequest | None, pods_fit: Callable[[Domain], int]
    ) -> TopologyAssignment | TopologyFailure:
        """Where ``count`` pods go; ``pods_fit`` tells how many pods a leaf's free capacity holds."""
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
        self._fill(pods_fit, slice_size, slice_level)
        chosen = self._level_with_fit(level, count, slice_size, required=required, unconstrained=unconstrained)
        if isinstance(chosen, TopologyFailure):
            return chosen
        fit_level, domains = chosen
        domains = self._to_minimum(domains, count, slice_size, unconstrained, slices=True)
        depth = fit_level
        while depth < min(len(self.levels) - 1, slice_level):
            lower = self._sorted([c for d in domains for c in d.children], unconstrained)
            domains = self._to_minimum(lower, count, slice_size, unconstrained, slices=True)
            depth += 1
        while depth < len(self.levels) - 1:
            below: list[Domain] = []
            for d in domains:
                below.extend(self._to_minimum(self._sorted(d.children, unconstrained), d.pod_count, 1,
                                              unconstrained, slices=False))
            domains = below
            depth += 1
        return self._build(domains)

    def _sorted(self, domains: Sequence[Domain], unconstrained: bool) -> list[Domain]:
        # BestFit: most slices first; LeastFreeCapacity (unconstrained): fewest first.  Then the
        # fewest pods, then by values, as Kueue's sortedDomains.
        if unconstrained:
            return sorted(domains, key=lambda d: (d.slice_count, d.pod_count, d.values))
        return sorted(domains, key=lambda d: (-d.slice_count, d.pod_count, d.values))

    @staticmethod
    def _best_fit(domains: Sequence[Domain], needed: int, slices: bool) -> Domain:
        """The first domain with the smallest capacity that still holds ``needed``."""
        best: Domain | None = None
        best_count = UNLIMITED + 1
        for d in domains:
            have = d.slice_count if slices else d.pod_count
            if needed <= have < best_count:
                best, best_count = d, have
        return domains[0] if best is None else best

    def _not_fit(self, fit: int, total: int, slice_size: int, level: int) -> TopologyFailure:
        unit = "pod" if slice_size == 1 else "slice"
        name = self.topology.name
        if fit == 0:
            text = f'topology "{name}" doesn\'t allow to fit any of {total} {unit}(s)'
        else:
            text = f'topology "{name}" allows to fit only {fit} out of {total} {unit}(s)'
        return TopologyFailure(f"{text} (level {self.levels[level]})")

    def _level_with_fit(
        self, level: int, count: int, slice_size: int, *, required: bool, unconstrained: bool
    ) -> tuple[int, list[Domain]] | TopologyFailure:
        for depth in range(level, -1, -1):
            domains = list(self.per_level[depth].values())
            if not domains:
                return TopologyFailure(f"no topology domains at level: {self.levels[depth]}")
            ordered = self._sorted(domains, unconstrained)
            needed = count // slice_size
            if unconstrained:
                for d in ordered:
                    if d.slice_count >= needed:
                        return depth, [d]
            else:
                top = ordered[0]
                if top.slice_count >= needed:
                    return depth, [self._best_fit(ordered, needed, slices=True)]
                if required:
                    return self._not_fit(top.slice_count, needed, slice_size, depth)
                if depth > 0:
                    continue
            # Spread over several domains of this level: largest first (fullest first when
            # unconstrained), the last one by best fit.
            results: list[Domain] = []
            remaining = needed
            for i, d in enumerate(ordered):
                if remaining <= 0:
                    break
                if not unconstrained and d.slice_count >= remaining:
                    d = self._best_fit(ordered[i:], remaining, slices=True)
                results.append(d)
                remaining -= d.slice_count
            if remaining > 0:
                return self._not_fit(needed - remaining, needed, slice_size, depth)
            return depth, results
        raise AssertionError("unreachable: level 0 always returns")

    def _to_minimum(
        self, domains: list[Domain], count: int, slice_size: int, unconstrained: bool, *, slices: bool
    ) -> list[Domain]:
        """Keep the fewest of ``domains`` that hold ``count`` pods; set each one's share as its count."""
        remaining = count // slice_size if slices else count
        out: list[Domain] = []
        for i, dom in enumerate(domains):
            have = dom.slice_count if slices else dom.pod_count
            if not unconstrained and have >= remaining:
                dom = self._best_fit(domains[i:], remaining, slices)
                have = dom.slice_count if slices else dom.pod_count
            if have >= remaining:
                if slices:
                    dom.slice_count = remaining
                    dom.pod_count = remaining * slice_size
                else:
                    dom.pod_count = remaining
                out.append(dom)
                return out
            if slices:
                dom.pod_count = have * slice_size
            remaining -= have
            out.append(dom)
        raise AssertionError(f"capacity was checked above, yet {remaining} remain unassigned")

    def _build(self, leaves: list[Domain]) -> TopologyAssignment:
        chosen = sorted((d for d in leaves if d.pod_count > 0), key=lambda d: d.values)
        start = len(self.levels) - 1 if self.hostname_leaves else 0
        return TopologyAssignment(
            levels=self.levels[start:],
            domains=tuple(TopologyDomain(values=d.values[start:], count=d.pod_count) for d in chosen),
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
