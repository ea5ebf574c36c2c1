"""Preemption: which admitted workloads to evict so that a pending one fits.

Decide only: :meth:`Preemptor.get_targets` returns targets with their
reasons and the caller issues the evictions. Every "what if these were
gone?" question is asked of the snapshot's usage overlay and undone before
returning; the live quota tree is never written.

Two algorithms, chosen by ``fairSharing.enable`` in the configuration:

* **classic** (Kueue ``preemption.go`` ``classicalPreemptions`` with
  ``classical/hierarchical_preemption.go`` and ``classical/candidate_generator.go``):
  candidates are classified by where they sit in the cohort tree and by
  priority, then removed greedily in candidate order until the preemptor
  fits, in up to two attempts (with and without borrowing);
* **fair sharing** (``fair_strategy.go`` / ``FindFairPreemptionTargets``):
  candidates are taken from the ClusterQueues with the highest dominant
  resource share, as long as the configured strategies say so.

Both end with the same minimisation pass (``fillBackWorkloads``): walk the
targets backwards and put back every one the preemptor can do without.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

from sluicegate.controller.scheduling.cycle import (
    IN_CLUSTER_QUEUE,
    IN_COHORT_FAIR_SHARING,
    IN_COHORT_RECLAIM_WHILE_BORROWING,
    IN_COHORT_RECLAMATION,
    NominationOracle,
    Target,
    never_preempts,
)
from sluicegate.controller.scheduling.fairsharing import (
    Strategy,
    TargetQueueOrdering,
    strategies_from_config,
    strategy_unsatisfiable,
)
from sluicegate.controller.scheduling.flavors import Assignment, Mode, PreemptionPossibility
from sluicegate.controller.scheduling.ordering import is_evicted, satisfies_policy, sort_candidates
from sluicegate.controller.scheduling.quota import QuotaNode, UsageOverlay
from sluicegate.controller.scheduling.snapshot import AdmittedWorkload, Snapshot
from sluicegate.model.config import RequeuingTimestamp
from sluicegate.model.names import ClusterQueueName, WorkloadKey
from sluicegate.model.queues import (
    BorrowWithinCohortPolicy,
    ClusterQueueSpec,
    PreemptionPolicy,
    ReclaimPolicy,
)
from sluicegate.model.resources import FlavorResource
from sluicegate.model.workloads import Workload

__all__ = ["Preemptor", "flavor_resources_needing_preemption"]


def protected_until(candidate: AdmittedWorkload, snapshot: Snapshot) -> float | None:
    """When the candidate's minimum runtime ends, if it has not yet (None: it may be preempted).

    A sluicegate extension (ClusterQueue ``minAdmitDuration``, after the
    proposal in kubernetes-sigs/kueue KEP-9876, not merged): counted from
    the quota reservation, it shields the workload from preemption by other
    ClusterQueues (reclaim, fair sharing) only; its own queue's priority
    preemption is unchanged.
    """
    spec = snapshot.cluster_queues.get(candidate.cluster_queue)
    if spec is None or spec.min_admit_duration is None:
        return None
    until = candidate.admitted_at + spec.min_admit_duration
    return until if snapshot.now < until else None


def flavor_resources_needing_preemption(assignment: Assignment) -> frozenset[FlavorResource]:
    """Only the flavors and resources assigned in Preempt mode may take victims."""
    return frozenset(
        FlavorResource(choice.flavor, res)
        for ps in assignment.pod_sets
        for res, choice in ps.flavors.items()
        if choice.mode is Mode.PREEMPT
    )


@dataclass(frozen=True, slots=True)
class _Context:
    """One preemption question: can ``workload`` get ``requests`` in ``node``?"""

    snapshot: Snapshot
    workload: Workload
    cq: ClusterQueueName
    spec: ClusterQueueSpec
    node: QuotaNode
    requests: dict[FlavorResource, int]
    frs: frozenset[FlavorResource]
    # Candidates passed over because they are within their ClusterQueue's
    # minAdmitDuration: key -> when their protection ends.
    shielded: dict[WorkloadKey, float] = field(default_factory=dict)

    @property
    def view(self) -> UsageOverlay:
        return self.snapshot.view

    @property
    def requeuing(self) -> RequeuingTimestamp:
        return self.snapshot.config.wait_for_pods_ready.requeuing_timestamp

    def fits(self, *, allow_borrowing: bool) -> bool:
        """The preemptor fits the current (simulated) usage, borrowing only if allowed."""
        view, node = self.view, self.node
        for fr, v in self.requests.items():
            if not allow_borrowing and view.borrowing_with(node, fr, v):
                return False
            # Over-admission can leave ``available`` negative; Kueue reads that as 0.
            if v > max(0, view.available(node, fr)):
                return False
        return True

    def fits_without_incoming(self) -> bool:
        """``fits`` while the incoming workload's usage is simulated for share maths."""
        view = self.view
        view.remove_all(self.node, self.requests)
        try:
            return self.fits(allow_borrowing=True)
        finally:
            view.add_all(self.node, self.requests)

    def allowed(self, candidate: AdmittedWorkload, policy: PreemptionPolicy | ReclaimPolicy) -> bool:
        return candidate.uses_any(self.frs) and satisfies_policy(
            preemptor=self.workload, candidate=candidate.workload, policy=policy, requeuing=self.requeuing
        )

    def unprotected(self, candidate: AdmittedWorkload) -> bool:
        """Not shielded from cross-queue preemption by its queue's minimum runtime (noted if it is)."""
        until = protected_until(candidate, self.snapshot)
        if until is None:
            return True
        self.shielded[candidate.key] = until
        return False

    def is_borrowing(self, node: QuotaNode) -> bool:
        """A ClusterQueue borrows in some resource needing preemption (cqIsBorrowing)."""
        return node.parent is not None and any(self.view.is_borrowing(node, fr) for fr in self.frs)


class _Removals:
    """Victims currently taken out of the overlay; each goes back exactly once."""

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot
        self._out: dict[WorkloadKey, AdmittedWorkload] = {}

    def remove(self, victim: AdmittedWorkload) -> None:
        if victim.key in self._out:
            raise ValueError(f"workload {victim.key} was already removed from the simulation; a victim counts once")
        self._snapshot.view.remove_all(self._snapshot.node(victim.cluster_queue), victim.usage)
        self._out[victim.key] = victim

    def restore(self, victim: AdmittedWorkload) -> None:
        del self._out[victim.key]
        self._snapshot.view.add_all(self._snapshot.node(victim.cluster_queue), victim.usage)

    def restore_all(self) -> None:
        for victim in reversed(list(self._out.values())):
            self.restore(victim)


def _fill_back(targets: list[Target], removals: _Removals, fits: Callable[[], bool]) -> list[Target]:
    """Minimise: walking backwards, put back every target the preemptor does not need.

    The last target is kept without a check: it is the one that made the
    preemptor fit. Each target is re-examined once, with everything after it
    already decided.
    """
    kept = list(targets)
    for i in range(len(kept) - 2, -1, -1):
        victim = kept[i].victim
        removals.restore(victim)
        if fits():
            del kept[i]
        else:
            removals.remove(victim)
    return kept


# -- classic preemption -------------------------------------------------------


class _Variant(enum.Enum):
    """How a candidate may be preempted (classical/hierarchical_preemption.go)."""

    # In the preemptor's own ClusterQueue.
    WITHIN_CQ = "WithinCQ"
    # The preemptor is closer in the cohort tree to the quota the candidate
    # uses, so it takes it back whatever the priorities.
    HIERARCHICAL_RECLAIM = "HierarchicalReclaim"
    # Only if the preemptor's queue will not be borrowing afterwards.
    RECLAIM_WITHOUT_BORROWING = "ReclaimWithoutBorrowing"
    # Allowed even if the preemptor keeps borrowing (borrowWithinCohort).
    RECLAIM_WHILE_BORROWING = "ReclaimWhileBorrowing"


_REASONS = {
    _Variant.WITHIN_CQ: IN_CLUSTER_QUEUE,
    _Variant.HIERARCHICAL_RECLAIM: IN_COHORT_RECLAMATION,
    _Variant.RECLAIM_WITHOUT_BORROWING: IN_COHORT_RECLAMATION,
    _Variant.RECLAIM_WHILE_BORROWING: IN_COHORT_RECLAIM_WHILE_BORROWING,
}


@dataclass(frozen=True, slots=True)
class _Candidate:
    victim: AdmittedWorkload
    variant: _Variant
    # The subtree root it was found under: it stays a candidate only while
    # its queue and every ancestor below this root still exceed their quota.
    subtree_root: QuotaNode | None


def _above_borrowing_threshold(candidate: int, incoming: int, threshold: int | None) -> bool:
    if candidate >= incoming:
        return True
    return threshold is not None and candidate > threshold


class _ClassicCandidates:
    """The ordered candidate list of one classic preemption, and its validity test."""

    def __init__(self, ctx: _Context) -> None:
        self._ctx = ctx
        same = self._same_queue()
        hierarchy, priority = self._in_cohort()
        groups = [self._sorted(g) for g in (hierarchy, priority, same)]
        # Already-evicted workloads cost nothing to preempt again: all of
        # them come first, each group keeping its own order.
        evicted = [c for g in groups for c in g if is_evicted(c.victim.workload)]
        rest = [c for g in groups for c in g if not is_evicted(c.victim.workload)]
        self.ordered: list[_Candidate] = evicted + rest
        self.none_from_other_queues = not hierarchy and not priority
        self.none_hierarchical = not hierarchy

    def _sorted(self, group: list[_Candidate]) -> list[_Candidate]:
        by_key = {c.victim.key: c for c in group}
        ctx = self._ctx
        ordered = sort_candidates([c.victim for c in group], ctx.cq, ctx.snapshot.local_queue_usage)
        return [by_key[v.key] for v in ordered]

    def _classify(self, victim: AdmittedWorkload, *, advantage: bool) -> _Variant | None:
        ctx = self._ctx
        preemption = ctx.spec.preemption
        same = victim.cluster_queue == ctx.cq
        policy = preemption.within_cluster_queue if same else preemption.reclaim_within_cohort
        if not ctx.allowed(victim, policy):
            return None
        if same:
            return _Variant.WITHIN_CQ
        if not ctx.unprotected(victim):
            return None
        if advantage:
            return _Variant.HIERARCHICAL_RECLAIM
        if preemption.borrow_within_cohort is BorrowWithinCohortPolicy.NEVER:
            return _Variant.RECLAIM_WITHOUT_BORROWING
        if _above_borrowing_threshold(
            victim.workload.priority, ctx.workload.priority, preemption.max_priority_threshold
        ):
            return _Variant.RECLAIM_WITHOUT_BORROWING
        return _Variant.RECLAIM_WHILE_BORROWING

    def _from_queue(self, node: QuotaNode, subtree_root: QuotaNode | None, *, advantage: bool) -> list[_Candidate]:
        out: list[_Candidate] = []
        for victim in self._ctx.snapshot.admitted_in(ClusterQueueName(node.name)).values():
            variant = self._classify(victim, advantage=advantage)
            if variant is not None:
                out.append(_Candidate(victim, variant, subtree_root))
        return out

    def _same_queue(self) -> list[_Candidate]:
        if self._ctx.spec.preemption.within_cluster_queue is PreemptionPolicy.NEVER:
            return []
        return self._from_queue(self._ctx.node, None, advantage=False)

    def _in_cohort(self) -> tuple[list[_Candidate], list[_Candidate]]:
        """(hierarchy candidates, priority candidates) from the rest of the tree.

        Climb from the preemptor's queue. Once some subtree on the way holds
        the request within its own quota, everything found from that level
        up is using quota the preemptor is entitled to first.
        """
        ctx = self._ctx
        hierarchy: list[_Candidate] = []
        priority: list[_Candidate] = []
        if ctx.node.parent is None or ctx.spec.preemption.reclaim_within_cohort is ReclaimPolicy.NEVER:
            return hierarchy, priority
        advantage, remaining = ctx.view.fits_in_quota(ctx.node, ctx.requests)
        previous: QuotaNode | None = None
        for subtree_root in ctx.node.path_to_root():
            out = hierarchy if advantage else priority
            self._collect(subtree_root, subtree_root, previous, out, advantage=advantage)
            fits, remaining = ctx.view.fits_in_quota(subtree_root, remaining)
            advantage = advantage or fits
            previous = subtree_root
        return hierarchy, priority

    def _collect(
        self,
        cohort: QuotaNode,
        subtree_root: QuotaNode,
        skip: QuotaNode | None,
        out: list[_Candidate],
        *,
        advantage: bool,
    ) -> None:
        """Candidates under ``cohort`` in queues and cohorts that exceed their quota."""
        ctx = self._ctx
        for child in cohort.child_cohorts.values():
            # ``skip`` is the subtree searched on the previous level.
            if child is skip or ctx.view.is_within_nominal(child, ctx.frs):
                continue
            self._collect(child, subtree_root, skip, out, advantage=advantage)
        for cq in cohort.child_cqs.values():
            if cq is ctx.node or ctx.view.is_within_nominal(cq, ctx.frs):
                continue
            out.extend(self._from_queue(cq, subtree_root, advantage=advantage))

    def valid(self, candidate: _Candidate, *, allow_borrowing: bool) -> bool:
        """Still worth preempting, given the removals simulated so far."""
        ctx = self._ctx
        if candidate.victim.cluster_queue == ctx.cq:
            return True
        if allow_borrowing and candidate.variant is _Variant.RECLAIM_WITHOUT_BORROWING:
            return False
        node = ctx.snapshot.node(candidate.victim.cluster_queue)
        if ctx.view.is_within_nominal(node, ctx.frs):
            return False
        for ancestor in node.path_to_root():
            if ancestor is candidate.subtree_root:
                break
            if ctx.view.is_within_nominal(ancestor, ctx.frs):
                return False
        return True


def _queue_under_nominal(ctx: _Context) -> bool:
    """Usage strictly below nominal in every resource needing preemption."""
    return all(ctx.view.usage(ctx.node, fr) < ctx.node.quota_for(fr).nominal for fr in ctx.frs)


def _classic_attempts(ctx: _Context, candidates: _ClassicCandidates) -> tuple[bool, ...]:
    """The allow-borrowing settings to try, in order.

    Borrowing-free attempts see more candidates (ReclaimWithoutBorrowing
    ones) but demand that the preemptor ends within its nominal quota.
    """
    forbidden = ctx.spec.preemption.borrow_within_cohort is BorrowWithinCohortPolicy.NEVER
    if candidates.none_from_other_queues or (forbidden and not _queue_under_nominal(ctx)):
        # Only the preemptor's own workloads (and hierarchical reclaims) can help.
        return (True,)
    if forbidden and candidates.none_hierarchical:
        return (False, True)
    return (True, False)


def _classic_targets(ctx: _Context) -> list[Target]:
    candidates = _ClassicCandidates(ctx)
    for allow_borrowing in _classic_attempts(ctx, candidates):
        removals = _Removals(ctx.snapshot)
        targets: list[Target] = []
        try:
            for candidate in candidates.ordered:
                if not candidates.valid(candidate, allow_borrowing=allow_borrowing):
                    continue
                removals.remove(candidate.victim)
                targets.append(Target(candidate.victim, _REASONS[candidate.variant]))
                if ctx.fits(allow_borrowing=allow_borrowing):
                    return _fill_back(targets, removals, partial(ctx.fits, allow_borrowing=allow_borrowing))
        finally:
            removals.restore_all()
    return []


# -- fair-sharing preemption --------------------------------------------------


def _fair_candidates(ctx: _Context) -> list[AdmittedWorkload]:
    """Own lower-priority workloads, and workloads of queues borrowing what is needed."""
    preemption = ctx.spec.preemption
    out: list[AdmittedWorkload] = []
    if preemption.within_cluster_queue is not PreemptionPolicy.NEVER:
        out.extend(
            v for v in ctx.snapshot.admitted_in(ctx.cq).values() if ctx.allowed(v, preemption.within_cluster_queue)
        )
    if ctx.node.parent is not None and preemption.reclaim_within_cohort is not ReclaimPolicy.NEVER:
        for other in ctx.node.root().subtree_cluster_queues():
            if other is ctx.node or not ctx.is_borrowing(other):
                continue
            out.extend(
                v
                for v in ctx.snapshot.admitted_in(ClusterQueueName(other.name)).values()
                if ctx.allowed(v, preemption.reclaim_within_cohort) and ctx.unprotected(v)
            )
    return sort_candidates(out, ctx.cq, ctx.snapshot.local_queue_usage)


@dataclass(slots=True)
class _FairRun:
    ctx: _Context
    removals: _Removals
    targets: list[Target]

    def take(self, victim: AdmittedWorkload, reason: str) -> bool:
        """Remove ``victim``; True once the preemptor fits."""
        self.removals.remove(victim)
        self.targets.append(Target(victim, reason))
        return self.ctx.fits_without_incoming()

    def first_strategy(
        self, candidates: list[AdmittedWorkload], strategy: Strategy
    ) -> tuple[bool, list[AdmittedWorkload]]:
        """Rule S2-a (or whichever comes first): returns (fits, candidates to retry)."""
        ctx = self.ctx
        ordering = TargetQueueOrdering(
            view=ctx.view, preemptor=ctx.node, candidates=candidates, node_of=ctx.snapshot.node
        )
        # Within nominal quota (counting the incoming workload) the preemptor
        # is entitled to its quota whatever the shares say.
        within_nominal = not any(ctx.view.is_borrowing(ctx.node, fr) for fr in ctx.frs)
        retry: list[AdmittedWorkload] = []
        for target in ordering:
            if target.is_preemptor_queue:
                if self.take(target.pop(), IN_CLUSTER_QUEUE):
                    return True, retry
                continue
            if within_nominal:
                if self.take(target.pop(), IN_COHORT_RECLAMATION):
                    return True, retry
                continue
            preemptor_new, target_old = target.compute_shares()
            if strategy_unsatisfiable(preemptor_new, target_old):
                retry.extend(target.pop_all())
                continue
            while target.has_workload():
                victim = target.pop()
                if strategy(preemptor_new, target_old, target.share_after_removal(victim)):
                    if self.take(victim, IN_COHORT_FAIR_SHARING):
                        return True, retry
                    # Shares changed: the next queue to look at may differ.
                    break
                retry.append(victim)
        return False, retry

    def second_strategy(self, retry: list[AdmittedWorkload], strategy: Strategy) -> bool:
        """Rule S2-b: at most one more victim per queue, the first in candidate order.

        Kueue's rule here does not depend on the victim, so one look per
        queue suffices; the victim-dependent share is passed for strategies
        that might.
        """
        ctx = self.ctx
        ordering = TargetQueueOrdering(view=ctx.view, preemptor=ctx.node, candidates=retry, node_of=ctx.snapshot.node)
        for target in ordering:
            preemptor_new, target_old = target.compute_shares()
            victim = target.pop()
            if strategy(preemptor_new, target_old, target.share_after_removal(victim)):
                if self.take(victim, IN_COHORT_FAIR_SHARING):
                    return True
            ordering.drop(target)
        return False


def _fair_targets(ctx: _Context, strategies: Sequence[Strategy]) -> list[Target]:
    candidates = _fair_candidates(ctx)
    if not candidates:
        return []
    run = _FairRun(ctx, _Removals(ctx.snapshot), [])
    try:
        # Shares are computed as if the incoming workload were admitted.
        with ctx.view.simulate_addition(ctx.node, ctx.requests):
            fits, retry = run.first_strategy(candidates, strategies[0])
            if not fits and len(strategies) > 1:
                fits = run.second_strategy(retry, strategies[1])
        if not fits:
            return []
        return _fill_back(run.targets, run.removals, partial(ctx.fits, allow_borrowing=True))
    finally:
        run.removals.restore_all()


# -- the preemptor ------------------------------------------------------------


def _targets_context(
    *, snapshot: Snapshot, workload: Workload, cq: ClusterQueueName, assignment: Assignment
) -> _Context:
    return _Context(
        snapshot=snapshot,
        workload=workload,
        cq=cq,
        spec=snapshot.cluster_queues[cq],
        node=snapshot.node(cq),
        requests=dict(assignment.usage),
        frs=flavor_resources_needing_preemption(assignment),
    )


def _no_candidates_by_policy(ctx: _Context) -> bool:
    """The queue's policies rule out every candidate: none in its own queue, none elsewhere in the tree.

    Both algorithms would search and find nothing (``_same_queue``/``_in_cohort``,
    ``_fair_candidates``); answering at once keeps a NoFit head of a queue that
    never preempts as cheap as the quota check that made it one.
    """
    return never_preempts(ctx.spec, ctx.node)


def _find(ctx: _Context) -> list[Target]:
    if _no_candidates_by_policy(ctx):
        return []
    if ctx.snapshot.fair_sharing:
        return _fair_targets(ctx, strategies_from_config(ctx.snapshot.config.fair_sharing))
    return _classic_targets(ctx)


class Preemptor:
    """Finds preemption targets; classic or fair sharing per the snapshot's configuration."""

    def oracle(self, snapshot: Snapshot) -> NominationOracle:
        return _Oracle(snapshot)

    def get_targets(
        self, *, workload: Workload, cq: ClusterQueueName, assignment: Assignment, snapshot: Snapshot
    ) -> list[Target]:
        return _find(_targets_context(snapshot=snapshot, workload=workload, cq=cq, assignment=assignment))


_SearchKey = tuple[ClusterQueueName, WorkloadKey, frozenset[tuple[FlavorResource, int]], frozenset[FlavorResource]]


class _Oracle:
    """SimulatePreemption (preemption_oracle.go) and the target search, for one nomination pass.

    Kueue asks the same question twice per head: the flavor assigner
    simulates preemption for a flavor, then the scheduler searches targets
    for the chosen assignment, which for a single-resource request is the
    same search.  Nothing changes usage while heads are nominated, so the
    second answer is the first one, remembered.
    """

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot
        self._searched: dict[_SearchKey, list[Target]] = {}
        # Per preemptor: candidates passed over for their minimum runtime in a search that found nothing.
        self._shielded: dict[WorkloadKey, dict[WorkloadKey, float]] = {}

    def _find(self, ctx: _Context) -> list[Target]:
        if _no_candidates_by_policy(ctx):
            return []
        key = (ctx.cq, ctx.workload.key, frozenset(ctx.requests.items()), ctx.frs)
        found = self._searched.get(key)
        if found is None:
            found = self._searched[key] = _find(ctx)
            if not found and ctx.shielded:
                self._shielded.setdefault(ctx.workload.key, {}).update(ctx.shielded)
        return list(found)

    def shielded(self, key: WorkloadKey) -> Mapping[WorkloadKey, float]:
        return self._shielded.get(key, {})

    def get_targets(self, *, workload: Workload, cq: ClusterQueueName, assignment: Assignment) -> list[Target]:
        return self._find(_targets_context(snapshot=self._snapshot, workload=workload, cq=cq, assignment=assignment))

    def simulate_preemption(
        self, *, cq: QuotaNode, workload: Workload, fr: FlavorResource, quantity: int
    ) -> tuple[PreemptionPossibility, int]:
        snapshot = self._snapshot
        name = ClusterQueueName(cq.name)
        ctx = _Context(
            snapshot=snapshot,
            workload=workload,
            cq=name,
            spec=snapshot.cluster_queues[name],
            node=cq,
            requests={fr: quantity},
            frs=frozenset({fr}),
        )
        targets = self._find(ctx)
        view = snapshot.view
        if not targets:
            borrow, _ = view.lowest_subtree_that_fits(cq, fr, quantity)
            return PreemptionPossibility.NO_CANDIDATES, borrow
        with view.simulate_removal([(snapshot.node(t.victim.cluster_queue), t.victim.usage) for t in targets]):
            borrow, _ = view.lowest_subtree_that_fits(cq, fr, quantity)
        if any(t.victim.cluster_queue == name for t in targets):
            return PreemptionPossibility.PREEMPT, borrow
        return PreemptionPossibility.RECLAIM, borrow

