"""All quota arithmetic over cohort trees, in one place.

A :class:`QuotaNode` is a ClusterQueue or a Cohort.  Each node has

* ``quotas`` — its own nominal quota and limits per flavor/resource;
* ``subtree_quota`` — its own nominal quota plus what its children lend it
  (a child lends everything except ``nominal - lendingLimit``, which stays
  local to the child);
* ``usage`` — for a ClusterQueue, the quota its admitted workloads hold; for a
  Cohort, the part of its children's usage that exceeds what they keep
  locally.

Usage is always read and written through a :class:`UsageView`, so the same
functions serve the live tree (``LiveUsage``, owned by the controller's
cache) and a scheduling cycle's tentative state (``UsageOverlay``, which
records deltas on top of the live tree and is thrown away at the end of the
cycle).  That keeps a cycle's cost proportional to what it touches, never to
the number of admitted workloads.

The semantics are Kueue's (``pkg/cache/scheduler/resource_node.go``):
``available`` may be negative after over-admission (quota lowered below
usage); ``potential_available`` ignores usage entirely.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from fractions import Fraction

from sluicegate.model.names import ClusterQueueName, CohortName
from sluicegate.model.queues import ResourceQuota
from sluicegate.model.resources import FlavorResource

_NO_QUOTA = ResourceQuota(nominal=0)


class QuotaNode:
    """A ClusterQueue or Cohort in the quota tree (mutable, owned by one coroutine)."""

    __slots__ = (
        "name",
        "is_cohort",
        "parent",
        "quotas",
        "subtree_quota",
        "usage",
        "child_cqs",
        "child_cohorts",
        "explicit",
        "weight",
        "version",
        "potential",
    )

    def __init__(self, name: str, *, is_cohort: bool) -> None:
        self.name = name
        self.is_cohort = is_cohort
        self.parent: QuotaNode | None = None
        self.quotas: dict[FlavorResource, ResourceQuota] = {}
        self.subtree_quota: dict[FlavorResource, int] = {}
        self.usage: dict[FlavorResource, int] = {}
        self.child_cqs: dict[str, QuotaNode] = {}
        self.child_cohorts: dict[str, QuotaNode] = {}
        # False for a cohort that exists only because a queue names it.
        self.explicit = not is_cohort
        # fairSharing.weight; 0 makes the node's share infinite once it borrows.
        self.weight: Fraction = Fraction(1)
        # Bumped whenever the live usage or the quotas of this node change: an answer computed
        # from a queue's path to the root still holds while every version on the path is the same.
        self.version = 0
        # potential_available by flavor-resource: it reads only quotas on the path to the root, which
        # change only where the tree recomputes (QuotaTree._recompute empties this on every node).
        self.potential: dict[FlavorResource, int] = {}

    def __repr__(self) -> str:
        kind = "Cohort" if self.is_cohort else "ClusterQueue"
        return f"<{kind} {self.name}>"

    def quota_for(self, fr: FlavorResource) -> ResourceQuota:
        return self.quotas.get(fr, _NO_QUOTA)

    def local_quota(self, fr: FlavorResource) -> int:
        """Capacity this node never lends to its parent (nominal minus lendingLimit)."""
        q = self.quotas.get(fr)
        if q is not None and q.lending_limit is not None:
            return max(0, self.subtree_quota.get(fr, 0) - q.lending_limit)
        return 0

    def path_versions(self) -> tuple[int, ...]:
        """The versions of this node and its ancestors (see ``version``)."""
        out = [self.version]
        node = self.parent
        while node is not None:
            out.append(node.version)
            node = node.parent
        return tuple(out)

    def path_to_root(self) -> Iterator[QuotaNode]:
        """Ancestors, nearest first (not including self)."""
        node = self.parent
        while node is not None:
            yield node
            node = node.parent

    def root(self) -> QuotaNode:
        node = self
        while node.parent is not None:
            node = node.parent
        return node

    def height(self) -> int:
        """Distance to the furthest leaf (a cohort with only queues has height 1)."""
        h = min(len(self.child_cqs) + len(self.child_cohorts), 1)
        for child in self.child_cohorts.values():
            h = max(h, child.height() + 1)
        return h

    def subtree_cluster_queues(self) -> Iterator[QuotaNode]:
        if not self.is_cohort:
            yield self
            return
        yield from self.child_cqs.values()
        for child in self.child_cohorts.values():
            yield from child.subtree_cluster_queues()


def potential_available(node: QuotaNode, fr: FlavorResource) -> int:
    """The most the node could ever hold of ``fr`` if nothing else were used."""
    known = node.potential.get(fr)
    if known is not None:
        return known
    if node.parent is None:
        available = node.subtree_quota.get(fr, 0)
    else:
        available = node.local_quota(fr) + potential_available(node.parent, fr)
        limit = node.quota_for(fr).borrowing_limit
        if limit is not None:
            available = min(node.subtree_quota.get(fr, 0) + limit, available)
    node.potential[fr] = available
    return available


class UsageView:
    """Reads and writes usage; subclasses decide where writes land."""

    __slots__ = ()

    def usage(self, node: QuotaNode, fr: FlavorResource) -> int:
        raise NotImplementedError

    def _add(self, node: QuotaNode, fr: FlavorResource, delta: int) -> None:
        raise NotImplementedError

    # -- derived quantities -------------------------------------------------

    def local_available(self, node: QuotaNode, fr: FlavorResource) -> int:
        return max(0, node.local_quota(fr) - self.usage(node, fr))

    def available(self, node: QuotaNode, fr: FlavorResource) -> int:
        """Unused capacity the node may take now, within borrowing limits."""
        parent = node.parent
        if parent is None:
            return node.subtree_quota.get(fr, 0) - self.usage(node, fr)
        parent_available = self.available(parent, fr) if parent.parent is not None \
            else parent.subtree_quota.get(fr, 0) - self.usage(parent, fr)
        return _below(node, fr, self.usage(node, fr), parent_available)

    def borrowing_with(self, node: QuotaNode, fr: FlavorResource, val: int) -> bool:
        return self.usage(node, fr) + val > node.subtree_quota.get(fr, 0)

    def is_borrowing(self, node: QuotaNode, fr: FlavorResource) -> bool:
        return self.borrowing_with(node, fr, 0)

    def borrowed(self, node: QuotaNode, fr: FlavorResource) -> int:
        return max(0, self.usage(node, fr) - node.subtree_quota.get(fr, 0))

    def is_within_nominal(self, node: QuotaNode, frs: frozenset[FlavorResource] | set[FlavorResource]) -> bool:
        return all(self.usage(node, fr) <= node.subtree_quota.get(fr, 0) for fr in frs)

    def fits_in_quota(
        self, node: QuotaNode, requests: Mapping[FlavorResource, int]
    ) -> tuple[bool, dict[FlavorResource, int]]:
        """Whether ``requests`` fit this node's subtree quota, and what exceeds its local quota."""
        fits = True
        remaining: dict[FlavorResource, int] = {}
        for fr, v in requests.items():
            if self.usage(node, fr) + v > node.subtree_quota.get(fr, 0):
                fits = False
            remaining[fr] = max(0, v - self.local_available(node, fr))
        return fits, remaining

    def lowest_subtree_that_fits(self, cq: QuotaNode, fr: FlavorResource, val: int) -> tuple[int, bool]:
        """Height of the smallest subtree around ``cq`` that holds ``val`` more of ``fr``.

        Returns ``(height, reclaim_possible_above)``: height 0 means the queue
        fits it without borrowing; the flag tells whether a larger tree exists
        above the returned subtree (so reclaiming there could still help).
        """
        if cq.parent is None or not self.borrowing_with(cq, fr, val):
            return 0, cq.parent is not None
        remaining = val - self.local_available(cq, fr)
        tracking: QuotaNode = cq
        for ancestor in cq.path_to_root():
            tracking = ancestor
            if not self.borrowing_with(ancestor, fr, remaining):
                return ancestor.height(), ancestor.parent is not None
            remaining -= self.local_available(ancestor, fr)
        return tracking.height(), tracking.parent is not None

    # -- updates ------------------------------------------------------------

    def add_usage(self, node: QuotaNode, fr: FlavorResource, val: int) -> None:
        """Add usage to a node and bubble what exceeds its local quota up the tree."""
        while True:
            parent = node.parent
            if parent is None:
                self._add(node, fr, val)
                return
            local_available = self.local_available(node, fr)
            self._add(node, fr, val)
            if val <= local_available:
                return
            val -= local_available
            node = parent

    def remove_usage(self, node: QuotaNode, fr: FlavorResource, val: int) -> None:
        """Remove usage from a node and what it was storing in its ancestors."""
        while True:
            stored_in_parent = self.usage(node, fr) - node.local_quota(fr)
            self._add(node, fr, -val)
            parent = node.parent
            if stored_in_parent <= 0 or parent is None:
                return
            val = min(val, stored_in_parent)
            node = parent

    def add_all(self, node: QuotaNode, usage: Mapping[FlavorResource, int]) -> None:
        for fr, v in usage.items():
            if v:
                self.add_usage(node, fr, v)

    def remove_all(self, node: QuotaNode, usage: Mapping[FlavorResource, int]) -> None:
        for fr, v in usage.items():
            if v:
                self.remove_usage(node, fr, v)

    def fits(self, cq: QuotaNode, usage: Mapping[FlavorResource, int]) -> bool:
        for fr, v in usage.items():
            if v and self.available(cq, fr) < v:
                return False
        return True


def _local_quota(node: QuotaNode, fr: FlavorResource) -> int:
    """``node.local_quota(fr)``, for the loops below."""
    q = node.quotas.get(fr)
    if q is not None and q.lending_limit is not None:
        return max(0, node.subtree_quota.get(fr, 0) - q.lending_limit)
    return 0


def _below(node: QuotaNode, fr: FlavorResource, used: int, parent_available: int) -> int:
    """What a node with a parent may take now: what is left of its own (local) quota, plus what its parent
    has available, capped by its borrowing limit (the usage already placed in the parent counted)."""
    q = node.quotas.get(fr)
    if q is None:
        # No quota of its own: nothing local, no borrowing limit.
        return parent_available - used if used < 0 else parent_available
    lending, borrowing = q.lending_limit, q.borrowing_limit
    local = 0
    if lending is not None:
        local = node.subtree_quota.get(fr, 0) - lending
        if local < 0:
            local = 0
    if borrowing is not None:
        used_in_parent = used - local
        if used_in_parent < 0:
            used_in_parent = 0
        capped = node.subtree_quota.get(fr, 0) - local - used_in_parent + borrowing
        if capped < parent_available:
            parent_available = capped
    own = local - used
    return own + parent_available if own > 0 else parent_available


class LiveUsage(UsageView):
    """Writes straight into the nodes: used by the controller's cache."""

    __slots__ = ()

    def usage(self, node: QuotaNode, fr: FlavorResource) -> int:
        return node.usage.get(fr, 0)

    def add_usage(self, node: QuotaNode, fr: FlavorResource, val: int) -> None:
        """``UsageView.add_usage`` with the reads and writes inlined (every admission walks its path)."""
        while True:
            parent = node.parent
            usage = node.usage
            before = usage.get(fr, 0)
            node.version += 1
            after = before + val
            if after:
                usage[fr] = after
            else:
                usage.pop(fr, None)
            if parent is None:
                return
            local_available = max(0, _local_quota(node, fr) - before)
            if val <= local_available:
                return
            val -= local_available
            node = parent

    def remove_usage(self, node: QuotaNode, fr: FlavorResource, val: int) -> None:
        """``UsageView.remove_usage`` with the reads and writes inlined (every release walks its path)."""
        while True:
            usage = node.usage
            before = usage.get(fr, 0)
            stored_in_parent = before - _local_quota(node, fr)
            node.version += 1
            after = before - val
            if after:
                usage[fr] = after
            else:
                usage.pop(fr, None)
            parent = node.parent
            if stored_in_parent <= 0 or parent is None:
                return
            if stored_in_parent < val:
                val = stored_in_parent
            node = parent

    def available(self, node: QuotaNode, fr: FlavorResource) -> int:
        """``UsageView.available`` with the usage read inline (every release budget asks it)."""
        parent = node.parent
        used = node.usage.get(fr, 0)
        if parent is None:
            return node.subtree_quota.get(fr, 0) - used
        if parent.parent is not None:
            parent_available = self.available(parent, fr)
        else:
            parent_available = parent.subtree_quota.get(fr, 0) - parent.usage.get(fr, 0)
        return _below(node, fr, used, parent_available)

    def _add(self, node: QuotaNode, fr: FlavorResource, delta: int) -> None:
        node.version += 1
        v = node.usage.get(fr, 0) + delta
        if v:
            node.usage[fr] = v
        else:
            node.usage.pop(fr, None)


class UsageOverlay(UsageView):
    """Tentative usage of one scheduling cycle, layered over the live tree.

    The live tree is never written; dropping the overlay discards everything
    the cycle assumed.
    """

    __slots__ = ("_delta",)

    def __init__(self) -> None:
        self._delta: dict[tuple[QuotaNode, FlavorResource], int] = {}

    def usage(self, node: QuotaNode, fr: FlavorResource) -> int:
        delta = self._delta
        if not delta:
            return node.usage.get(fr, 0)  # nothing assumed yet (every head is nominated before any is)
        return node.usage.get(fr, 0) + delta.get((node, fr), 0)

    def _add(self, node: QuotaNode, fr: FlavorResource, delta: int) -> None:
        key = (node, fr)
        self._delta[key] = self._delta.get(key, 0) + delta

    def add_usage(self, node: QuotaNode, fr: FlavorResource, val: int) -> None:
        """``UsageView.add_usage`` with the reads and writes inlined (every entry a cycle takes walks its path)."""
        deltas = self._delta
        while True:
            parent = node.parent
            key = (node, fr)
            delta = deltas.get(key, 0)
            deltas[key] = delta + val
            if parent is None:
                return
            local_available = max(0, _local_quota(node, fr) - node.usage.get(fr, 0) - delta)
            if val <= local_available:
                return
            val -= local_available
            node = parent

    def available(self, node: QuotaNode, fr: FlavorResource) -> int:
        """``UsageView.available`` with the usage read inline (each head's flavor search and each entry's
        fit ask it, for every resource)."""
        delta = self._delta
        parent = node.parent
        used = node.usage.get(fr, 0)
        if delta:
            used += delta.get((node, fr), 0)
        if parent is None:
            return node.subtree_quota.get(fr, 0) - used
        if parent.parent is not None:
            parent_available = self.available(parent, fr)
        else:
            parent_used = parent.usage.get(fr, 0)
            if delta:
                parent_used += delta.get((parent, fr), 0)
            parent_available = parent.subtree_quota.get(fr, 0) - parent_used
        return _below(node, fr, used, parent_available)

    def lowest_subtree_that_fits(self, cq: QuotaNode, fr: FlavorResource, val: int) -> tuple[int, bool]:
        """``UsageView.lowest_subtree_that_fits``, answering at once (the usage read inline) when the queue
        holds ``val`` more without borrowing, as most heads that fit do."""
        if cq.parent is None:
            return 0, False
        used = cq.usage.get(fr, 0)
        delta = self._delta
        if delta:
            used += delta.get((cq, fr), 0)
        if used + val <= cq.subtree_quota.get(fr, 0):
            return 0, True
        return UsageView.lowest_subtree_that_fits(self, cq, fr, val)

    def fits(self, cq: QuotaNode, usage: Mapping[FlavorResource, int]) -> bool:
        available = self.available
        for fr, v in usage.items():
            if v and available(cq, fr) < v:
                return False
        return True

    @contextmanager
    def simulate_removal(self, removals: list[tuple[QuotaNode, Mapping[FlavorResource, int]]]) -> Iterator[None]:
        """Pretend these admitted usages were gone, and restore them afterwards."""
        for node, usage in removals:
            self.remove_all(node, usage)
        try:
            yield
        finally:
            for node, usage in reversed(removals):
                self.add_all(node, usage)

    @contextmanager
    def simulate_addition(self, node: QuotaNode, usage: Mapping[FlavorResource, int]) -> Iterator[None]:
        self.add_all(node, usage)
        try:
            yield
        finally:
            self.remove_all(node, usage)


class QuotaTree:
    """ClusterQueue and Cohort nodes, linked into cohort trees.

    Structural changes (a queue or cohort added, changed or removed) rebuild
    the subtree quotas and cohort usage of the affected tree from its root;
    admissions and releases then update usage incrementally along one path.
    """

    def __init__(self) -> None:
        self.cluster_queues: dict[ClusterQueueName, QuotaNode] = {}
        self.cohorts: dict[CohortName, QuotaNode] = {}
        self.live = LiveUsage()
        # Bumped at every change of which nodes there are and how they link (what is kept per tree,
        # such as its members, is valid while it stays the same).
        self.shape = 0

    # -- structure ----------------------------------------------------------

    def _cohort(self, name: CohortName) -> QuotaNode:
        node = self.cohorts.get(name)
        if node is None:
            node = QuotaNode(name, is_cohort=True)
            self.cohorts[name] = node
        return node

    def _detach(self, node: QuotaNode) -> QuotaNode | None:
        self.shape += 1
        node.potential = {}
        parent = node.parent
        if parent is None:
            return None
        if node.is_cohort:
            parent.child_cohorts.pop(node.name, None)
        else:
            parent.child_cqs.pop(node.name, None)
        node.parent = None
        self._drop_if_unused(parent)
        return parent

    def _drop_if_unused(self, cohort: QuotaNode) -> None:
        if cohort.explicit or cohort.child_cqs or cohort.child_cohorts:
            return
        self.cohorts.pop(CohortName(cohort.name), None)
        parent = self._detach(cohort)
        if parent is not None:
            self._recompute(parent.root())

    def _attach(self, node: QuotaNode, parent_name: CohortName | None) -> None:
        self.shape += 1
        if parent_name is None:
            return
        parent = self._cohort(parent_name)
        # A cycle would make every walk up the tree loop forever; validation
        # rejects such manifests, this is the last line of defence.
        if node.is_cohort and (parent is node or any(a is node for a in parent.path_to_root())):
            return
        node.parent = parent
        if node.is_cohort:
            parent.child_cohorts[node.name] = node
        else:
            parent.child_cqs[node.name] = node

    def set_cluster_queue(
        self,
        name: ClusterQueueName,
        *,
        quotas: Mapping[FlavorResource, ResourceQuota],
        cohort: CohortName | None,
        weight: Fraction = Fraction(1),
    ) -> QuotaNode:
        node = self.cluster_queues.get(name)
        if node is None:
            node = QuotaNode(name, is_cohort=False)
            self.cluster_queues[name] = node
        old_root = self._detach(node)
        node.quotas = dict(quotas)
        node.weight = weight
        self._attach(node, cohort)
        self._recompute(node.root())
        if old_root is not None and old_root.root() is not node.root():
            self._recompute(old_root.root())
        return node

    def remove_cluster_queue(self, name: ClusterQueueName) -> None:
        node = self.cluster_queues.pop(name, None)
        if node is None:
            return
        self.shape += 1
        parent = self._detach(node)
        if parent is not None and CohortName(parent.name) in self.cohorts:
            self._recompute(parent.root())

    def set_cohort(
        self,
        name: CohortName,
        *,
        quotas: Mapping[FlavorResource, ResourceQuota],
        parent: CohortName | None,
        weight: Fraction = Fraction(1),
    ) -> QuotaNode:
        node = self._cohort(name)
        node.explicit = True
        old_parent = self._detach(node)
        node.quotas = dict(quotas)
        node.weight = weight
        self._attach(node, parent)
        self._recompute(node.root())
        if old_parent is not None and CohortName(old_parent.name) in self.cohorts:
            self._recompute(old_parent.root())
        return node

    def remove_cohort(self, name: CohortName) -> None:
        """The Cohort object is gone; queues naming it keep an implicit cohort."""
        node = self.cohorts.get(name)
        if node is None:
            return
        node.explicit = False
        node.quotas = {}
        node.weight = Fraction(1)
        parent = self._detach(node)
        self._recompute(node.root())
        if parent is not None and CohortName(parent.name) in self.cohorts:
            self._recompute(parent.root())
        self._drop_if_unused(node)

    # -- recomputation ------------------------------------------------------

    def _recompute(self, node: QuotaNode) -> None:
        """Rebuild subtree quotas (and cohort usage) below ``node``."""
        node.version += 1
        node.potential = {}
        if not node.is_cohort:
            node.subtree_quota = {fr: q.nominal for fr, q in node.quotas.items()}
            return
        node.subtree_quota = {fr: q.nominal for fr, q in node.quotas.items()}
        node.usage = {}
        for child in (*node.child_cohorts.values(), *node.child_cqs.values()):
            self._recompute(child)
            for fr, q in child.subtree_quota.items():
                node.subtree_quota[fr] = node.subtree_quota.get(fr, 0) + q - child.local_quota(fr)
            for fr, u in child.usage.items():
                over = max(0, u - child.local_quota(fr))
                if over:
                    node.usage[fr] = node.usage.get(fr, 0) + over
