"""One scheduling cycle: heads in, decisions out.

Steps (Kueue's ``schedule()``):

1. take the head of every active ClusterQueue (done by the caller's queues);
2. look at them through a snapshot with a cycle-local usage overlay;
3. nominate: assign flavors and, where quota is short, find preemption targets;
4. order the entries (classical or fair-sharing order);
5. walk them: check each still fits given what earlier entries took, record
   its usage in the overlay, and decide Admitted / Preempting / Pending;
6. hand back every entry with its requeue reason; the caller commits the
   decisions to the store, applies them, and requeues the rest.

Nothing here performs I/O: the caller acts on the returned decisions.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from sluicegate.controller.scheduling.backfill import BackfillState, Planner, fmt_time
from sluicegate.controller.scheduling.flavors import Assignment, FlavorAssigner, Mode, PreemptionOracle
from sluicegate.controller.scheduling.quota import QuotaNode
from sluicegate.controller.scheduling.snapshot import AdmittedWorkload, Snapshot, queue_order_timestamp
from sluicegate.model.names import ClusterQueueName, FlavorName, WorkloadKey
from sluicegate.model.objects import ResourceFlavor
from sluicegate.model.queues import ClusterQueueSpec, PreemptionPolicy, ReclaimPolicy
from sluicegate.model.resources import FlavorResource
from sluicegate.model.workloads import Workload


class EntryStatus(enum.Enum):
    NOT_NOMINATED = "NotNominated"
    SKIPPED = "Skipped"
    ASSUMED = "Assumed"  # admitted in this cycle
    PREEMPTING = "Preempting"  # waiting for its targets to exit


class RequeueReason(enum.Enum):
    GENERIC = ""
    FAILED_AFTER_NOMINATION = "FailedAfterNomination"
    NAMESPACE_MISMATCH = "NamespaceMismatch"
    NO_FIT = "NoFit"
    PREEMPTION_NO_CANDIDATES = "PreemptionNoCandidates"
    PENDING_PREEMPTION = "PendingPreemption"
    # Quota would fit, but no set of nodes can run every pod now.
    NO_PLACEMENT = "NoPlacement"


# Preemption reasons, as in the Preempted condition.
IN_CLUSTER_QUEUE = "InClusterQueue"
IN_COHORT_RECLAMATION = "InCohortReclamation"
IN_COHORT_FAIR_SHARING = "InCohortFairSharing"
IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"


@dataclass(frozen=True, slots=True)
class Target:
    victim: AdmittedWorkload
    reason: str


class NominationOracle(PreemptionOracle, Protocol):
    """Preemption questions asked while one snapshot's heads are nominated.

    Valid only while the snapshot's usage is the one nomination sees: an
    implementation may remember answers, since nothing is admitted or
    preempted until every head has been nominated.
    """

    def get_targets(self, *, workload: Workload, cq: ClusterQueueName, assignment: Assignment) -> list[Target]: ...

    def shielded(self, key: WorkloadKey) -> Mapping[WorkloadKey, float]:
        """Candidates a search for ``key`` found nothing without, passed over for their
        minimum runtime: their keys and when their protection ends."""
        ...


class Preemptor(Protocol):
    """Finds the workloads to preempt so that an assignment fits."""

    def oracle(self, snapshot: Snapshot) -> NominationOracle: ...

    def get_targets(
        self, *, workload: Workload, cq: ClusterQueueName, assignment: Assignment, snapshot: Snapshot
    ) -> list[Target]: ...


@dataclass(frozen=True, slots=True)
class Head:
    """A workload popped from its ClusterQueue for this cycle."""

    workload: Workload
    cluster_queue: ClusterQueueName
    # Per pod set, per resource: the last flavor index tried in an earlier cycle.
    last_tried: tuple[dict[str, int], ...] | None = None


@dataclass(slots=True)
class Entry:
    head: Head
    assignment: Assignment | None = None
    targets: list[Target] = field(default_factory=list)
    status: EntryStatus = EntryStatus.NOT_NOMINATED
    requeue_reason: RequeueReason = RequeueReason.GENERIC
    message: str = ""
    # Kept for the next attempt (None: start from the first flavor again).
    last_tried: tuple[dict[str, int], ...] | None = None
    # When to look at it again although nothing else changes: the end of the
    # minimum runtime protecting the workloads it could otherwise preempt.
    retry_at: float | None = None
    # Backfill: why it was admitted ahead of a reservation (empty otherwise).
    backfill_note: str = ""

    @property
    def workload(self) -> Workload:
        return self.head.workload

    @property
    def key(self) -> WorkloadKey:
        return self.head.workload.key

    @property
    def cluster_queue(self) -> ClusterQueueName:
        return self.head.cluster_queue

    def flavors(self) -> dict[str, dict[str, FlavorName]]:
        return self.assignment.flavors_by_pod_set() if self.assignment is not None else {}

    # -- named state changes --------------------------------------------------

    def mark_skipped(self, message: str) -> None:
        self.status = EntryStatus.SKIPPED
        self.message = message
        self.last_tried = None

    def mark_preempting(self, targets: list[Target]) -> None:
        self.status = EntryStatus.PREEMPTING
        self.targets = targets
        self.requeue_reason = RequeueReason.PENDING_PREEMPTION
        self.message = f"{self.message}. Pending the preemption of {len(targets)} workload(s)"
        self.last_tried = None

    def mark_assumed(self) -> None:
        self.status = EntryStatus.ASSUMED
        self.message = ""


def can_always_reclaim(snapshot: Snapshot, cq: ClusterQueueName) -> bool:
    """A queue that may preempt anyone in its cohort always gets its nominal quota back."""
    return snapshot.cluster_queues[cq].preemption.reclaim_within_cohort is ReclaimPolicy.ANY


def resources_to_reserve(entry: Entry, snapshot: Snapshot) -> dict[FlavorResource, int]:
    """Capacity held back in this cycle for a workload that must wait for preemption."""
    assert entry.assignment is not None
    node = snapshot.node(entry.cluster_queue)
    view = snapshot.view
    if entry.assignment.mode() is not Mode.PREEMPT:
        return dict(entry.assignment.usage)
    reserved: dict[FlavorResource, int] = {}
    for fr, usage in entry.assignment.usage.items():
        quota = node.quota_for(fr)
        used = view.usage(node, fr)
        if entry.assignment.borrowing > 0:
            if quota.borrowing_limit is None:
                reserved[fr] = usage
            else:
                reserved[fr] = min(usage, quota.nominal + quota.borrowing_limit - used)
        else:
            reserved[fr] = max(0, min(usage, quota.nominal - used))
    return reserved


def never_preempts(spec: ClusterQueueSpec, node: QuotaNode) -> bool:
    """The queue's policies leave no candidate anywhere: none in its own queue, none in its cohort tree."""
    p = spec.preemption
    return p.within_cluster_queue is PreemptionPolicy.NEVER and (
        node.parent is None or p.reclaim_within_cohort is ReclaimPolicy.NEVER)


# Pod-set shapes by the identity of a workload's ``pod_sets`` value (the submission path shares one
# value among every workload of a shape, so a pending population has a handful): value, shape.
_POD_SET_SHAPES: dict[int, tuple[object, Hashable]] = {}
_POD_SET_SHAPES_LIMIT = 4096


def _pod_sets_shape(wl: Workload) -> Hashable:
    pod_sets = wl.pod_sets
    hit = _POD_SET_SHAPES.get(id(pod_sets))
    if hit is not None and hit[0] is pod_sets:
        return hit[1]
    shape = tuple(
        (ps.name, ps.count, ps.min_count, tuple(sorted(ps.requests.items())),
         tuple(sorted(ps.node_selector.items())), ps.tolerations, ps.topology_request)
        for ps in pod_sets)
    if len(_POD_SET_SHAPES) >= _POD_SET_SHAPES_LIMIT:
        _POD_SET_SHAPES.clear()
    # The value is kept with its shape, so its id cannot be reused while the entry lives.
    _POD_SET_SHAPES[id(pod_sets)] = (pod_sets, shape)
    return shape


def assignment_shape(wl: Workload) -> Hashable:
    """What flavor assignment reads of a workload that cannot preempt: its pod sets' counts after
    reclaim, requests, node selectors, tolerations and topology requests (not its name, priority or age)."""
    return (_counts(wl), _pod_sets_shape(wl))


def scheduling_shape(wl: Workload) -> Hashable:
    """Kueue's scheduling equivalence class (``computeSchedulingHash`` in pkg/workload/workload.go):
    the assignment shape and the priority.  Two pending workloads of one class in one ClusterQueue get
    the same flavor assignment and preemption answer from the same cluster state."""
    return (wl.priority, _counts(wl), _pod_sets_shape(wl))


def _counts(wl: Workload) -> tuple[int, ...] | None:
    """The counts after reclaim where pods are reclaimable; None where they are the pod sets' own
    (already in the pod-set shape)."""
    return wl.counts_after_reclaim() if wl.status.reclaimable_pods else None


def searches_from_first_flavor(head: Head) -> bool:
    """The flavor search starts at each group's first flavor: never tried, or every list walked to its end
    (a tried index of -1; a StrictFIFO head that keeps blocking its queue comes back so)."""
    return head.last_tried is None or all(i == -1 for ps in head.last_tried for i in ps.values())


@dataclass(frozen=True, slots=True)
class _Remembered:
    versions: tuple[int, ...]
    spec: ClusterQueueSpec
    flavors: tuple[ResourceFlavor | None, ...]
    assignment: Assignment
    message: str
    last_tried: tuple[dict[str, int], ...]


class AssignmentMemo:
    """Why heads could not be admitted, kept across cycles: a head of the same shape in the same
    ClusterQueue gets the same answer while nothing it depends on changed.

    Flavor assignment reads the workload's shape (``assignment_shape``), the
    queue's spec, its flavors, and the usage and quotas on its path to the
    root (``QuotaNode.version``); in a queue whose policies never preempt the
    preemption oracle finds nothing whoever asks.  So after one head was found
    not to fit, the next ones behind it cost a lookup until quota moves in
    their part of the cohort tree, instead of a flavor search each.  Only
    answers that did not fit are kept (a fit is admitted, which changes the
    versions), and only for searches from the first flavor.
    """

    def __init__(self, limit: int = 100_000) -> None:
        self._limit = limit
        # By ClusterQueue, then shape: a head of a queue with nothing remembered costs one lookup.
        self._answers: dict[ClusterQueueName, dict[Hashable, _Remembered]] = {}
        self._count = 0
        self.hits = 0

    def _valid(self, r: _Remembered, snapshot: Snapshot, cq: ClusterQueueName, node: QuotaNode) -> bool:
        spec = snapshot.cluster_queues[cq]
        return (r.spec is spec and r.versions == node.path_versions()
                and r.flavors == tuple(snapshot.flavors.get(f) for f in spec.flavors))

    def _eligible(self, head: Head, snapshot: Snapshot) -> bool:
        return (searches_from_first_flavor(head) and not snapshot.fair_sharing
                and never_preempts(snapshot.cluster_queues[head.cluster_queue], snapshot.node(head.cluster_queue)))

    def recall(self, head: Head, snapshot: Snapshot) -> _Remembered | None:
        answers = self._answers.get(head.cluster_queue)
        if not answers or not self._eligible(head, snapshot):
            return None
        shape = assignment_shape(head.workload)
        r = answers.get(shape)
        if r is None:
            return None
        if not self._valid(r, snapshot, head.cluster_queue, snapshot.node(head.cluster_queue)):
            del answers[shape]
            self._count -= 1
            return None
        self.hits += 1
        return r

    def remember(self, head: Head, snapshot: Snapshot, e: Entry) -> None:
        assert e.assignment is not None
        if e.assignment.mode() is Mode.FIT or e.targets or e.retry_at is not None \
                or not self._eligible(head, snapshot):
            return
        if self._count >= self._limit:
            self._answers.clear()
            self._count = 0
        cq = head.cluster_queue
        spec = snapshot.cluster_queues[cq]
        answers = self._answers.setdefault(cq, {})
        shape = assignment_shape(head.workload)
        if shape not in answers:
            self._count += 1
        answers[shape] = _Remembered(
            snapshot.node(cq).path_versions(), spec, tuple(snapshot.flavors.get(f) for f in spec.flavors),
            e.assignment, e.message, e.last_tried or ())


def nominate(heads: Iterable[Head], snapshot: Snapshot, preemptor: Preemptor,
             memo: AssignmentMemo | None = None) -> tuple[list[Entry], list[Entry]]:
    """Assign flavors to every head; return (entries to walk, entries that cannot be admitted).

    ``memo``: answers of earlier cycles for heads that did not fit (see AssignmentMemo).
    """
    entries: list[Entry] = []
    inadmissible: list[Entry] = []
    oracle = preemptor.oracle(snapshot)
    specs, nodes, inactive = snapshot.cluster_queues, snapshot.tree.cluster_queues, snapshot.inactive
    for head in heads:
        e = Entry(head=head)
        cq = head.cluster_queue
        if cq not in specs or cq not in nodes:
            e.message = f"ClusterQueue {cq} not found"
        elif cq in inactive:
            e.message = f"ClusterQueue {cq} is inactive"
        elif (selector := specs[cq].namespace_selector) is None or not (
                # An empty selector matches every namespace: its labels need not be looked up.
                selector.is_empty or selector.matches(snapshot.namespace_labels(head.workload.namespace))):
            e.message = (
                f"Workload namespace doesn't match ClusterQueue selector: namespace {head.workload.namespace} "
                f"is not selected by ClusterQueue {cq} (spec.namespaceSelector)"
            )
            e.requeue_reason = RequeueReason.NAMESPACE_MISMATCH
        else:
            known = memo.recall(head, snapshot) if memo is not None else None
            if known is not None:
                e.assignment, e.message, e.last_tried = known.assignment, known.message, known.last_tried
                entries.append(e)
                continue
            assignment, targets = get_assignment(head, snapshot, oracle)
            e.assignment, e.targets = assignment, targets
            if assignment.kept_last_tried is not None:
                # A kept fitting assignment (flavors._Plan.fits): nothing to say, nothing to remember.
                e.last_tried = assignment.kept_last_tried
                entries.append(e)
                continue
            fit = assignment.mode() is Mode.FIT
            e.message = "" if fit else assignment.message()
            e.last_tried = tuple(assignment.last_tried())
            if not e.targets and not fit:
                note_protection(e, snapshot, oracle.shielded(head.workload.key))
            if memo is not None:
                memo.remember(head, snapshot, e)
            entries.append(e)
            continue
        inadmissible.append(e)
    return entries, inadmissible


def note_protection(entry: Entry, snapshot: Snapshot, shielded: Mapping[WorkloadKey, float]) -> None:
    """Say that preemption would have helped but for minimum runtimes, and when to try again."""
    if not shielded:
        return
    first = min(shielded.values())
    entry.retry_at = first
    entry.message = (
        f"{entry.message}. {len(shielded)} workload(s) it could preempt are within their ClusterQueue's "
        f"minimum runtime (minAdmitDuration); the first protection ends at {fmt_time(first)}"
    )


def get_assignment(head: Head, snapshot: Snapshot, oracle: NominationOracle) -> tuple[Assignment, list[Target]]:
    """Full assignment first; if it cannot be admitted, the largest partial one that can."""
    assigner = FlavorAssigner(
        workload=head.workload,
        spec=snapshot.cluster_queues[head.cluster_queue],
        node=snapshot.node(head.cluster_queue),
        view=snapshot.view,
        flavors=snapshot.flavors,
        oracle=oracle,
        fair_sharing=snapshot.fair_sharing,
        last_tried=head.last_tried,
    )
    full = assigner.assign()
    mode = full.mode()
    if mode is Mode.FIT:
        return full, []
    if mode is Mode.PREEMPT:
        targets = oracle.get_targets(workload=head.workload, cq=head.cluster_queue, assignment=full)
        if targets:
            return full, targets
    if can_be_partially_admitted(head.workload):

        def attempt(counts: Sequence[int]) -> tuple[Assignment, list[Target]] | None:
            a = assigner.assign(counts)
            m = a.mode()
            if m is Mode.FIT:
                return a, []
            if m is Mode.PREEMPT:
                t = oracle.get_targets(workload=head.workload, cq=head.cluster_queue, assignment=a)
                if t:
                    return a, t
            return None

        found = search_partial_counts(head.workload, attempt)
        if found is not None:
            return found
    return full, []


def can_be_partially_admitted(wl: Workload) -> bool:
    return any(ps.min_count is not None and ps.min_count < ps.count for ps in wl.pod_sets)


def search_partial_counts(
    wl: Workload,
    attempt: Callable[[Sequence[int]], tuple[Assignment, list[Target]] | None],
) -> tuple[Assignment, list[Target]] | None:
    """Binary-search the largest reduction that admits, as Kueue's pod-set reducer does.

    All reducible pod sets shrink together: reduction step ``k`` of ``total``
    removes ``(count - minCount) * k / total`` pods from each, so the search
    finds the largest admissible counts with O(log total) assignments.
    """
    deltas = [ps.count - ps.min_count if ps.min_count is not None else 0 for ps in wl.pod_sets]
    total = sum(deltas)
    if total == 0:
        return None

    def counts_for(step: int) -> list[int]:
        return [ps.count - (d * step) // total for ps, d in zip(wl.pod_sets, deltas, strict=True)]

    lo, hi = 1, total  # smallest step known to work is unknown; search in [1, total]
    best: tuple[Assignment, list[Target]] | None = None
    while lo <= hi:
        mid = (lo + hi) // 2
        result = attempt(counts_for(mid))
        if result is not None:
            best = result
            hi = mid - 1
        else:
            lo = mid + 1
    return best


def classical_order_key(entry: Entry, snapshot: Snapshot) -> tuple[bool, int, int, float, str, str]:
    """Sort key, in order: quota already reserved first; less borrowing first;
    higher priority first; older queue-order timestamp first; then uid and key."""
    wl = entry.workload
    assert entry.assignment is not None
    if not wl.status.conditions:
        # Nothing happened to it yet (most heads): no reservation, ordered by its creation.
        return (True, entry.assignment.borrowing, -wl.priority, wl.creation_timestamp, wl.uid, wl.key)
    return (
        not wl.has_quota_reservation,
        entry.assignment.borrowing,
        -wl.priority,
        queue_order_timestamp(wl, snapshot.config.wait_for_pods_ready.requeuing_timestamp),
        wl.uid,
        wl.key,
    )


Ordering = Callable[[list[Entry], Snapshot], Iterable[Entry]]


def classical_order(entries: list[Entry], snapshot: Snapshot) -> Iterable[Entry]:
    return sorted(entries, key=lambda e: classical_order_key(e, snapshot))


Placer = Callable[[Entry], str | None]
"""Binds an entry's pods to nodes within the cycle; returns why it could not, or None."""


def process_entry(
    entry: Entry,
    snapshot: Snapshot,
    preempted: dict[WorkloadKey, AdmittedWorkload],
    placer: Placer | None = None,
) -> None:
    """Decide one nominated entry against the snapshot, updating the overlay."""
    assert entry.assignment is not None
    mode = entry.assignment.mode()
    cq = entry.cluster_queue
    node = snapshot.node(cq)
    view = snapshot.view
    if mode is Mode.NO_FIT:
        entry.requeue_reason = RequeueReason.NO_FIT
        return
    if mode is Mode.PREEMPT and not entry.targets:
        entry.requeue_reason = RequeueReason.PREEMPTION_NO_CANDIDATES
        # A queue that may reclaim anything gets it back anyway, unless minimum runtimes
        # shield what it would reclaim (KEP-9876 notes the same about CanAlwaysReclaim).
        if not can_always_reclaim(snapshot, cq) or entry.retry_at is not None:
            view.add_all(node, resources_to_reserve(entry, snapshot))
        return
    if preempted and any(t.victim.key in preempted for t in entry.targets):
        entry.mark_skipped("Workload has overlapping preemption targets with another workload")
        return
    usage = entry.assignment.usage
    # Fit is judged as if every victim claimed so far in this cycle, and this
    # entry's own, were already gone (Kueue's fits()).
    if preempted or entry.targets:
        victims = {**preempted, **{t.victim.key: t.victim for t in entry.targets}}
        removals = [(snapshot.node(v.cluster_queue), v.usage) for v in victims.values()]
        with view.simulate_removal(removals):
            fits = view.fits(node, usage)
    else:
        fits = view.fits(node, usage)
    if not fits:
        entry.mark_skipped("Workload no longer fits after processing another workload")
        return
    if mode is Mode.FIT and placer is not None:
        failure = placer(entry)
        if failure is not None:
            entry.requeue_reason = RequeueReason.NO_PLACEMENT
            entry.message = f"quota is available but the pods cannot be placed: {failure}"
            return
    if entry.targets:
        preempted.update((t.victim.key, t.victim) for t in entry.targets)
    view.add_all(node, usage)
    if mode is Mode.PREEMPT:
        entry.mark_preempting(list(entry.targets))
        return
    entry.mark_assumed()


def reservation_need(entry: Entry, snapshot: Snapshot) -> dict[FlavorResource, int]:
    """The quota a blocked head would take: its assignment's flavors, or each group's first flavor."""
    assert entry.assignment is not None
    spec = snapshot.cluster_queues[entry.cluster_queue]
    need: dict[FlavorResource, int] = {}
    for ps in entry.assignment.pod_sets:
        for res, amount in ps.requests.items():
            choice = ps.flavors.get(res)
            if choice is not None:
                flavor = choice.flavor
            else:
                group = spec.group_for(res)
                if group is None or not group.flavors:
                    return {}  # the queue does not cover it: no amount of waiting helps
                flavor = group.flavors[0].name
            fr = FlavorResource(flavor, res)
            need[fr] = need.get(fr, 0) + amount
    return need


def process_backfill_entry(
    entry: Entry,
    snapshot: Snapshot,
    preempted: dict[WorkloadKey, AdmittedWorkload],
    placer: Placer | None,
    planner: Planner,
) -> None:
    """``process_entry``, for a cycle where Backfill queues hold reservations (scheduling/backfill.py)."""
    assert entry.assignment is not None
    wl, cq = entry.workload, entry.cluster_queue
    verdict = planner.judge(wl, cq, entry.assignment.mode(), entry.assignment.usage)
    if not verdict.admit:
        entry.requeue_reason = RequeueReason.NO_FIT
        entry.message = verdict.message
        # It waits too: it gets a reservation of its own behind the ones it yields to.
        note = planner.blocked(wl, cq, entry.assignment.usage)
        if note:
            entry.message = f"{entry.message}. {note}"
        return
    # What process_entry holds back in this cycle for a preemptor without victims: the
    # head's own hold, not usage that stays, when its reservation is computed.
    held: dict[FlavorResource, int] = {}
    if entry.assignment.mode() is Mode.PREEMPT and not entry.targets and (
            not can_always_reclaim(snapshot, cq) or entry.retry_at is not None):
        held = resources_to_reserve(entry, snapshot)
    process_entry(entry, snapshot, preempted, placer)
    if entry.status is EntryStatus.ASSUMED:
        planner.admitted(wl, cq, entry.assignment.usage)
        entry.backfill_note = verdict.message
    elif entry.status is EntryStatus.PREEMPTING:
        planner.settled(wl)
    elif entry.requeue_reason is not RequeueReason.NO_PLACEMENT:
        with snapshot.view.simulate_removal([(snapshot.node(cq), held)]):
            note = planner.blocked(wl, cq, reservation_need(entry, snapshot))
        if note:
            entry.message = f"{entry.message}. {note}" if entry.message else note


def run_cycle(
    heads: Sequence[Head],
    snapshot: Snapshot,
    *,
    preemptor: Preemptor,
    ordering: Ordering | None = None,
    placer: Placer | None = None,
    backfill: BackfillState | None = None,
    memo: AssignmentMemo | None = None,
) -> list[Entry]:
    """Run one cycle over ``heads``; return every entry with its decision.

    ``backfill``: the reservations of Backfill queues, kept between cycles
    (updated in place); None when no queue uses the strategy.  ``memo``:
    answers kept between cycles for heads that did not fit.
    """
    # 3. Nominate.
    entries, inadmissible = nominate(heads, snapshot, preemptor, memo)
    # 4. Order.
    order = ordering if ordering is not None else classical_order
    # 5. Walk, recording tentative usage in the snapshot's overlay.
    preempted: dict[WorkloadKey, AdmittedWorkload] = {}
    planner = Planner(snapshot, backfill) if backfill is not None else None
    for entry in order(entries, snapshot):
        if planner is None:
            process_entry(entry, snapshot, preempted, placer)
        else:
            process_backfill_entry(entry, snapshot, preempted, placer, planner)
    # 6. Requeue reasons for whatever was not admitted.
    for entry in entries:
        if entry.status is EntryStatus.SKIPPED and entry.requeue_reason is RequeueReason.GENERIC:
            entry.requeue_reason = RequeueReason.FAILED_AFTER_NOMINATION
    return entries + inadmissible
