"""Fair sharing: dominant resource shares, who to preempt first, who to admit first.

Three concepts live here, each following Kueue's fair sharing:

* the **dominant resource share** (DRS) of a ClusterQueue or Cohort
  (``pkg/cache/scheduler/fair_sharing.go``): for every resource it borrows
  from its parent, the borrowed amount in permille of what the parent could
  lend it, the maximum over resources, divided by ``fairSharing.weight``;
* the **target ordering** for fair preemption
  (``pkg/scheduler/preemption/fairsharing/ordering.go``, ``target.go``,
  ``least_common_ancestor.go``, ``strategy.go``): walk down from the root,
  always into the child with the highest share, and compare preemptor and
  target at their *almost least common ancestors*;
* the **entry ordering** for a fair-sharing cycle (``makeFairSharingIterator``
  in ``pkg/scheduler/fair_sharing_iterator.go``): a tournament up the cohort
  tree where the child with the lowest share after admission wins.

Shares are exact :class:`~fractions.Fraction` values where Kueue uses
``float64``; the integer reported in status (``weighted_share``) is rounded
up exactly as Kueue rounds its float.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction

from sluicegate.controller.scheduling.cycle import Entry, Ordering, classical_order, classical_order_key
from sluicegate.controller.scheduling.ordering import candidate_order_key
from sluicegate.controller.scheduling.quota import QuotaNode, UsageOverlay, UsageView, potential_available
from sluicegate.controller.scheduling.snapshot import AdmittedWorkload, Snapshot, queue_order_timestamp
from sluicegate.model.config import FairPreemptionStrategy, FairSharingConfig
from sluicegate.model.names import ClusterQueueName, WorkloadKey
from sluicegate.model.resources import FlavorResource

# Reported for a zero-weight node that borrows: Kueue's math.MaxInt64.
MAX_WEIGHTED_SHARE = 2**63 - 1

# Shares are in permille of the lendable capacity, as in Kueue.
_SCALE = 1000


@dataclass(frozen=True, slots=True)
class DominantResourceShare:
    """The DRS of one node, kept exact so comparisons never round."""

    weight: Fraction
    # max over resources of borrowed * 1000 / lendable, before weighting.
    ratio: Fraction
    # The resource that gave ``ratio`` ("" when none did).
    resource: str
    # Usage exceeds quota for some flavor/resource, even one nobody lends.
    borrowing: bool
    borrowed: frozenset[FlavorResource]

    @property
    def is_zero(self) -> bool:
        return self.ratio == 0

    @property
    def infinite(self) -> bool:
        """A zero weight means "never share": any borrowing is an infinite share."""
        return self.weight == 0 and self.borrowing

    def precise(self) -> Fraction | None:
        """The weighted share; None stands for +infinity."""
        if self.infinite:
            return None
        if self.is_zero:
            return Fraction(0)
        return self.ratio / self.weight

    def weighted_share(self) -> int:
        """The integer Kueue reports as ``status.fairSharing.weightedShare``."""
        value = self.precise()
        return MAX_WEIGHTED_SHARE if value is None else math.ceil(value)

    def sort_key(self) -> tuple[bool, Fraction]:
        # Two infinite shares are told apart by their unweighted ratio.
        value = self.precise()
        return (True, self.ratio) if value is None else (False, value)

    def borrowing_on(self, requested: Mapping[FlavorResource, int]) -> bool:
        return any(requested.get(fr, 0) > 0 for fr in self.borrowed)


# The starting point of "find the highest share": below every real share.
NEGATIVE_SHARE = DominantResourceShare(Fraction(1), Fraction(-1), "", False, frozenset())


def compare_shares(a: DominantResourceShare, b: DominantResourceShare) -> int:
    """-1, 0 or 1: a lower share is admitted first and preempted last."""
    ka, kb = a.sort_key(), b.sort_key()
    return (ka > kb) - (ka < kb)


def lendable(node: QuotaNode) -> dict[str, int]:
    """Per resource name, everything ``node`` could hand to a child if nothing were used."""
    out: dict[str, int] = {}
    for fr in node.root().subtree_quota:
        out[fr.resource] = out.get(fr.resource, 0) + potential_available(node, fr)
    return out


def dominant_resource_share(
    view: UsageView, node: QuotaNode, extra: Mapping[FlavorResource, int] | None = None
) -> DominantResourceShare:
    """DRS of ``node``, optionally as if ``extra`` usage were added to it."""
    zero = DominantResourceShare(node.weight, Fraction(0), "", False, frozenset())
    parent = node.parent
    if parent is None:
        return zero
    add = extra or {}
    borrowed_by_resource: dict[str, int] = {}
    borrowed: set[FlavorResource] = set()
    for fr, quota in node.subtree_quota.items():
        amount = add.get(fr, 0) + view.usage(node, fr) - quota
        if amount > 0:
            borrowed_by_resource[fr.resource] = borrowed_by_resource.get(fr.resource, 0) + amount
            borrowed.add(fr)
    if not borrowed_by_resource:
        return zero
    capacity = lendable(parent)
    ratio, resource = Fraction(0), ""
    # Ascending names and a strict comparison: ties go to the first name.
    for name in sorted(borrowed_by_resource):
        lr = capacity.get(name, 0)
        if lr <= 0:
            continue
        r = Fraction(borrowed_by_resource[name] * _SCALE, lr)
        if r > ratio:
            ratio, resource = r, name
    return DominantResourceShare(node.weight, ratio, resource, True, frozenset(borrowed))


def weighted_share(view: UsageView, node: QuotaNode) -> int:
    """``status.fairSharing.weightedShare`` of a ClusterQueue or Cohort.

    0 when the node borrows nothing its parent could lend (or has no parent),
    the weighted DRS rounded up otherwise, and :data:`MAX_WEIGHTED_SHARE` for a
    zero-weight node that borrows.
    """
    return dominant_resource_share(view, node).weighted_share()


# -- preemption strategies ----------------------------------------------------

# (preemptor share with the incoming workload, target share now, target share
# without the candidate) -> may the candidate be preempted?
Strategy = Callable[[DominantResourceShare, DominantResourceShare, DominantResourceShare], bool]


def less_than_or_equal_to_final_share(
    preemptor_new: DominantResourceShare, _target_old: DominantResourceShare, target_new: DominantResourceShare
) -> bool:
    """Rule S2-a: the preemptor must not end above where the target ends."""
    return compare_shares(preemptor_new, target_new) <= 0


def less_than_initial_share(
    preemptor_new: DominantResourceShare, target_old: DominantResourceShare, _target_new: DominantResourceShare
) -> bool:
    """Rule S2-b: the preemptor must end strictly below where the target starts."""
    return compare_shares(preemptor_new, target_old) < 0


STRATEGIES: dict[FairPreemptionStrategy, Strategy] = {
    FairPreemptionStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE: less_than_or_equal_to_final_share,
    FairPreemptionStrategy.LESS_THAN_INITIAL_SHARE: less_than_initial_share,
}


def strategies_from_config(config: FairSharingConfig) -> tuple[Strategy, ...]:
    """The configured strategies; none configured means Kueue's default pair."""
    names = config.preemption_strategies or (
        FairPreemptionStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
        FairPreemptionStrategy.LESS_THAN_INITIAL_SHARE,
    )
    return tuple(STRATEGIES[n] for n in names)


def strategy_unsatisfiable(preemptor_new: DominantResourceShare, target_old: DominantResourceShare) -> bool:
    """No candidate of the target can pass any strategy.

    An infinite preemptor share compares above every finite one, and removing
    usage never makes the target's share infinite, so both rules fail.
    """
    return preemptor_new.infinite and not target_old.infinite


# -- target ordering for fair preemption --------------------------------------


class TargetQueue:
    """A ClusterQueue yielding candidates; the same queue may come back repeatedly."""

    __slots__ = ("_ordering", "node")

    def __init__(self, ordering: TargetQueueOrdering, node: QuotaNode) -> None:
        self._ordering = ordering
        self.node = node

    @property
    def is_preemptor_queue(self) -> bool:
        return self.node is self._ordering.preemptor

    def has_workload(self) -> bool:
        return self._ordering.has_workload(self.node)

    def pop(self) -> AdmittedWorkload:
        return self._ordering.pop(self.node)

    def pop_all(self) -> list[AdmittedWorkload]:
        out: list[AdmittedWorkload] = []
        while self.has_workload():
            out.append(self.pop())
        return out

    def _almost_lcas(self) -> tuple[QuotaNode, QuotaNode]:
        """(preemptor side, target side): the children of the lowest common cohort."""
        lca = next(a for a in self.node.path_to_root() if a in self._ordering.ancestors)
        return almost_lca(self._ordering.preemptor, lca), almost_lca(self.node, lca)

    def compute_shares(self) -> tuple[DominantResourceShare, DominantResourceShare]:
        """(preemptor's new share, target's current share), compared where their paths meet."""
        preemptor_side, target_side = self._almost_lcas()
        view = self._ordering.view
        return dominant_resource_share(view, preemptor_side), dominant_resource_share(view, target_side)

    def share_after_removal(self, victim: AdmittedWorkload) -> DominantResourceShare:
        # Removing from the queue itself, not the almost-LCA, lets lending
        # limits decide how much of the usage the ancestors really release.
        view = self._ordering.view
        with view.simulate_removal([(self.node, victim.usage)]):
            _, target_side = self._almost_lcas()
            return dominant_resource_share(view, target_side)


def almost_lca(node: QuotaNode, lca: QuotaNode) -> QuotaNode:
    """The node on ``node``'s path to the root whose parent is ``lca``."""
    current = node
    for ancestor in node.path_to_root():
        if ancestor is lca:
            return current
        current = ancestor
    raise ValueError(f"{lca!r} is not an ancestor of {node!r}; fair preemption compares nodes of one cohort tree")


class TargetQueueOrdering:
    """ClusterQueues to take preemption candidates from, most unfair first.

    From the root, repeatedly descend into the child with the highest share
    (a Cohort wins ties against a ClusterQueue, being the fairer place to
    look deeper). Nodes that stop borrowing are pruned, except the preemptor's
    own queue and its ancestors; the walk ends when the root is pruned. The
    consumer must pop from, or drop, each queue it is handed.
    """

    def __init__(
        self,
        *,
        view: UsageOverlay,
        preemptor: QuotaNode,
        candidates: Iterable[AdmittedWorkload],
        node_of: Callable[[ClusterQueueName], QuotaNode],
    ) -> None:
        self.view = view
        self.preemptor = preemptor
        self.ancestors = set(preemptor.path_to_root())
        self._queues: dict[QuotaNode, deque[AdmittedWorkload]] = {}
        count = 0
        for c in candidates:
            self._queues.setdefault(node_of(c.cluster_queue), deque()).append(c)
            count += 1
        self._candidate_count = count
        self._pruned_queues: set[QuotaNode] = set()
        self._pruned_cohorts: set[QuotaNode] = set()

    def has_workload(self, node: QuotaNode) -> bool:
        return bool(self._queues.get(node))

    def pop(self, node: QuotaNode) -> AdmittedWorkload:
        return self._queues[node].popleft()

    def _head(self, node: QuotaNode) -> AdmittedWorkload:
        return self._queues[node][0]

    def drop(self, target: TargetQueue) -> None:
        self._pruned_queues.add(target.node)

    def __iter__(self) -> Iterator[TargetQueue]:
        if self.preemptor.parent is None:
            target = TargetQueue(self, self.preemptor)
            while target.has_workload():
                yield target
            return
        root = self.preemptor.root()
        # Every round either hands out a queue (the consumer then pops or
        # drops) or prunes a node, so this bound is never reached by a
        # well-behaved consumer.
        budget = self._candidate_count + 2 * sum(1 for _ in _subtree_nodes(root)) + 1
        while root not in self._pruned_cohorts:
            budget -= 1
            if budget < 0:
                raise RuntimeError(
                    "fair preemption target walk made no progress: a caller took a queue "
                    "without popping a candidate or dropping it"
                )
            found = self._next(root)
            if found is not None:
                yield found

    def _next(self, cohort: QuotaNode) -> TargetQueue | None:
        best_queue: QuotaNode | None = None
        best_queue_share = NEGATIVE_SHARE
        for cq in sorted(cohort.child_cqs.values(), key=lambda n: n.name):
            if cq in self._pruned_queues:
                continue
            share = dominant_resource_share(self.view, cq)
            if (share.is_zero and cq is not self.preemptor) or not self.has_workload(cq):
                self._pruned_queues.add(cq)
                continue
            cmp = compare_shares(share, best_queue_share)
            if cmp > 0:
                best_queue, best_queue_share = cq, share
            elif cmp == 0 and best_queue is not None:
                # Equal shares: the queue whose next candidate is cheaper goes first.
                pid = ClusterQueueName(self.preemptor.name)
                if candidate_order_key(self._head(cq), pid) < candidate_order_key(self._head(best_queue), pid):
                    best_queue = cq

        best_cohort: QuotaNode | None = None
        best_cohort_share = NEGATIVE_SHARE
        for child in sorted(cohort.child_cohorts.values(), key=lambda n: n.name):
            if child in self._pruned_cohorts:
                continue
            share = dominant_resource_share(self.view, child)
            # A cohort on the preemptor's path stays: its subtree may be
            # unbalanced, or hold the preemptor's own candidates.
            if share.is_zero and child not in self.ancestors:
                self._pruned_cohorts.add(child)
            elif compare_shares(share, best_cohort_share) >= 0:
                best_cohort, best_cohort_share = child, share

        if best_cohort is None and best_queue is None:
            self._pruned_cohorts.add(cohort)
            return None
        if best_cohort is not None and compare_shares(best_cohort_share, best_queue_share) >= 0:
            return self._next(best_cohort)
        assert best_queue is not None
        return TargetQueue(self, best_queue)


def _subtree_nodes(node: QuotaNode) -> Iterator[QuotaNode]:
    yield node
    yield from node.child_cqs.values()
    for child in node.child_cohorts.values():
        yield from _subtree_nodes(child)


# -- fair-sharing entry ordering ----------------------------------------------


def _entry_usage(entry: Entry) -> dict[FlavorResource, int]:
    # A workload that already holds its quota (a second pass) adds nothing.
    if entry.assignment is None or entry.workload.has_quota_reservation:
        return {}
    return dict(entry.assignment.usage)


@dataclass(slots=True)
class _Tournament:
    snapshot: Snapshot
    pending: dict[ClusterQueueName, deque[Entry]]
    shares: dict[tuple[QuotaNode, WorkloadKey], DominantResourceShare]
    requested: dict[WorkloadKey, dict[FlavorResource, int]]

    def compute_shares(self, root: QuotaNode) -> None:
        """Each queue's nominee, as if admitted: its share seen from every ancestor."""
        self.shares.clear()
        self.requested.clear()
        view = self.snapshot.view
        for cq in root.subtree_cluster_queues():
            group = self.pending.get(ClusterQueueName(cq.name))
            if not group:
                continue
            entry = group[0]
            usage = _entry_usage(entry)
            self.requested[entry.key] = usage
            with view.simulate_addition(cq, usage):
                share = dominant_resource_share(view, cq)
                for ancestor in cq.path_to_root():
                    self.shares[(ancestor, entry.key)] = share
                    share = dominant_resource_share(view, ancestor)

    def winner(self, cohort: QuotaNode) -> Entry | None:
        contenders: list[Entry] = []
        for child in sorted(cohort.child_cohorts.values(), key=lambda n: n.name):
            w = self.winner(child)
            if w is not None:
                contenders.append(w)
        for cq in sorted(cohort.child_cqs.values(), key=lambda n: n.name):
            group = self.pending.get(ClusterQueueName(cq.name))
            if group:
                contenders.append(group[0])
        if not contenders:
            return None
        best = contenders[0]
        for current in contenders[1:]:
            if self._less(current, best, cohort):
                best = current
        return best

    def _less(self, a: Entry, b: Entry, parent: QuotaNode) -> bool:
        """Ranked: not borrowing on what it asks for; lower share; higher priority;
        older queue-order timestamp; then uid and key."""
        sa = self.shares[(parent, a.key)]
        sb = self.shares[(parent, b.key)]
        ba = sa.borrowing_on(self.requested[a.key])
        bb = sb.borrowing_on(self.requested[b.key])
        if ba != bb:
            return not ba
        cmp = compare_shares(sa, sb)
        if cmp != 0:
            return cmp < 0
        wa, wb = a.workload, b.workload
        if wa.priority != wb.priority:
            return wa.priority > wb.priority
        requeuing = self.snapshot.config.wait_for_pods_ready.requeuing_timestamp
        ta, tb = queue_order_timestamp(wa, requeuing), queue_order_timestamp(wb, requeuing)
        if ta != tb:
            return ta < tb
        return (wa.uid, wa.key) < (wb.uid, wb.key)


def fair_order(entries: list[Entry], snapshot: Snapshot) -> Iterator[Entry]:
    """Entries in fair-sharing order, decided one at a time.

    The generator is lazy on purpose: after the cycle processes an entry its
    usage is in the snapshot's overlay, and the next tournament must see it.
    Within a ClusterQueue entries keep the classical order; across cohort
    trees the order does not matter, as they share no quota.
    """
    pending: dict[ClusterQueueName, deque[Entry]] = {}
    for e in sorted(entries, key=lambda e: classical_order_key(e, snapshot)):
        pending.setdefault(e.cluster_queue, deque()).append(e)
    tournament = _Tournament(snapshot=snapshot, pending=pending, shares={}, requested={})
    for _ in range(len(entries)):
        if not pending:
            return
        cq = next(iter(pending))
        node = snapshot.node(cq)
        if node.parent is None:
            chosen = pending[cq][0]
        else:
            root = node.root()
            tournament.compute_shares(root)
            found = tournament.winner(root)
            assert found is not None  # the tree holds at least ``cq``'s entry
            chosen = found
        group = pending[chosen.cluster_queue]
        group.popleft()
        if not group:
            del pending[chosen.cluster_queue]
        yield chosen


def order_for(snapshot: Snapshot) -> Ordering:
    """The entry ordering the snapshot's configuration asks for."""
    return fair_order if snapshot.fair_sharing else classical_order
