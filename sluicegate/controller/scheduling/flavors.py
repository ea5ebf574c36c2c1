"""Flavor assignment: which flavor serves each resource of each pod set.

For every pod set, the resources of one resource group all come from one
flavor.  Flavors are tried in the ClusterQueue's order; each is graded by a
:class:`GranularMode` (can it fit now, by reclaiming, by preempting, or not at
all — and how far up the cohort tree it must borrow) and the search stops or
continues according to the queue's ``flavorFungibility``.  The semantics are
Kueue's flavor assigner; the code is ours.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from sluicegate.controller.scheduling.quota import QuotaNode, UsageView, potential_available
from sluicegate.model.names import FlavorName
from sluicegate.model.objects import ResourceFlavor
from sluicegate.model.queues import (
    BorrowWithinCohortPolicy,
    ClusterQueueSpec,
    FlavorFungibility,
    FlavorFungibilityPolicy,
    FungibilityPreference,
    ReclaimPolicy,
)
from sluicegate.model.resources import FlavorResource
from sluicegate.model.taints import Taint, first_untolerated
from sluicegate.model.workloads import PodSet, Workload
from sluicegate.quantity import format_canonical


class Mode(enum.IntEnum):
    """What it takes to use an assignment; higher is better."""

    NO_FIT = 0
    PREEMPT = 1
    FIT = 3


class PreemptionMode(enum.IntEnum):
    """Finer grades used while choosing a flavor; higher is better."""

    NO_FIT = 0
    # Preemption could make room given the quotas, but simulation found no victims.
    NO_CANDIDATES = 1
    PREEMPT = 2
    RECLAIM = 3
    FIT = 4

    def to_mode(self) -> Mode:
        if self is PreemptionMode.NO_FIT:
            return Mode.NO_FIT
        if self is PreemptionMode.FIT:
            return Mode.FIT
        return Mode.PREEMPT


class PreemptionPossibility(enum.Enum):
    NO_CANDIDATES = "NoCandidates"
    PREEMPT = "Preempt"
    RECLAIM = "Reclaim"


_FROM_POSSIBILITY = {
    PreemptionPossibility.NO_CANDIDATES: PreemptionMode.NO_CANDIDATES,
    PreemptionPossibility.PREEMPT: PreemptionMode.PREEMPT,
    PreemptionPossibility.RECLAIM: PreemptionMode.RECLAIM,
}


@dataclass(frozen=True, slots=True)
class GranularMode:
    preemption_mode: PreemptionMode
    # 0: the queue's own quota suffices; larger: capacity comes from further up the tree.
    borrowing_level: int


WORST = GranularMode(PreemptionMode.NO_FIT, 1 << 30)
BEST = GranularMode(PreemptionMode.FIT, 0)

# The grades met so far, one value each (values, so sharing them changes nothing).
_GRADES: dict[tuple[PreemptionMode, int], GranularMode] = {(BEST.preemption_mode, 0): BEST}


def _granular(pmode: PreemptionMode, borrow: int) -> GranularMode:
    mode = _GRADES.get((pmode, borrow))
    if mode is None:
        mode = _GRADES[(pmode, borrow)] = GranularMode(pmode, borrow)
    return mode


def is_preferred(a: GranularMode, b: GranularMode, fungibility: FlavorFungibility) -> bool:
    """Whether ``a`` is a better way to admit than ``b`` under the queue's preference."""
    if a.preemption_mode is PreemptionMode.NO_FIT:
        return False
    if b.preemption_mode is PreemptionMode.NO_FIT:
        return True
    a_none = a.preemption_mode is PreemptionMode.NO_CANDIDATES
    b_none = b.preemption_mode is PreemptionMode.NO_CANDIDATES
    if a_none != b_none:
        return not a_none
    if fungibility.preference is FungibilityPreference.PREEMPTION_OVER_BORROWING:
        if a.borrowing_level != b.borrowing_level:
            return a.borrowing_level < b.borrowing_level
        return a.preemption_mode > b.preemption_mode
    # BorrowingOverPreemption, also the default.
    if a.preemption_mode != b.preemption_mode:
        return a.preemption_mode > b.preemption_mode
    return a.borrowing_level < b.borrowing_level


def should_try_next_flavor(mode: GranularMode, fungibility: FlavorFungibility) -> bool:
    if mode.preemption_mode in (PreemptionMode.NO_FIT, PreemptionMode.NO_CANDIDATES):
        return True
    if (
        mode.preemption_mode in (PreemptionMode.PREEMPT, PreemptionMode.RECLAIM)
        and fungibility.when_can_preempt is FlavorFungibilityPolicy.TRY_NEXT_FLAVOR
    ):
        return True
    return mode.borrowing_level > 0 and fungibility.when_can_borrow is FlavorFungibilityPolicy.TRY_NEXT_FLAVOR


class PreemptionOracle(Protocol):
    """Asked by the assigner whether preempting could make ``quantity`` of ``fr`` fit."""

    def simulate_preemption(
        self, *, cq: QuotaNode, workload: Workload, fr: FlavorResource, quantity: int
    ) -> tuple[PreemptionPossibility, int]:
        """Return the possibility and the borrowing level after the preemptions."""
        ...


@dataclass(frozen=True, slots=True)
class FlavorChoice:
    flavor: FlavorName
    mode: Mode
    borrow: int
    # Index of the last flavor looked at; -1 once the whole list was walked.
    tried_index: int = -1


@dataclass(slots=True)
class PodSetResult:
    name: str
    count: int
    # Total requests of the pod set (per-pod requests times count).
    requests: dict[str, int]
    flavors: dict[str, FlavorChoice] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def is_fit(self) -> bool:
        return self.error is None and not self.reasons

    def mode(self) -> Mode:
        if self.is_fit:
            return Mode.FIT
        if self.error is not None or not self.flavors:
            return Mode.NO_FIT
        return min(f.mode for f in self.flavors.values())

    def message(self) -> str:
        if self.error is not None:
            return self.error
        return ", ".join(sorted(self.reasons))


@dataclass(slots=True)
class Assignment:
    pod_sets: list[PodSetResult] = field(default_factory=list)
    borrowing: int = 0
    usage: dict[FlavorResource, int] = field(default_factory=dict)
    # ``tuple(last_tried())`` and ``mode()``, made once, for an assignment kept and shared by many heads
    # (see _Plan.fits; such an assignment is never changed).
    kept_last_tried: tuple[dict[str, int], ...] | None = field(default=None, repr=False, compare=False)
    kept_mode: Mode | None = field(default=None, repr=False, compare=False)

    def mode(self) -> Mode:
        if self.kept_mode is not None:
            return self.kept_mode
        if not self.pod_sets:
            return Mode.NO_FIT
        worst = Mode.FIT
        for ps in self.pod_sets:
            if ps.error is None and not ps.reasons:
                continue  # fits
            m = ps.mode()
            if m < worst:
                worst = m
        return worst

    @property
    def borrows(self) -> bool:
        return self.borrowing > 0

    def message(self) -> str:
        parts: list[str] = []
        for ps in self.pod_sets:
            if ps.is_fit:
                continue
            if ps.error is not None:
                return f"failed to assign flavors to pod set {ps.name}: {ps.error}"
            parts.append(f"couldn't assign flavors to pod set {ps.name}: {ps.message()}")
        return "; ".join(parts)

    def last_tried(self) -> list[dict[str, int]]:
        return [{res: fc.tried_index for res, fc in ps.flavors.items()} for ps in self.pod_sets]

    def flavors_by_pod_set(self) -> dict[str, dict[str, FlavorName]]:
        return {ps.name: {res: fc.flavor for res, fc in ps.flavors.items()} for ps in self.pod_sets}


def _fmt(resource: str, amount: int) -> str:
    return format_canonical(resource, amount)


def flavor_matches(flavor: ResourceFlavor, pod_set: PodSet) -> bool:
    """Node selectors only constrain the label keys the flavor itself defines."""
    for key, value in pod_set.node_selector.items():
        if key in flavor.node_labels and flavor.node_labels[key] != value:
            return False
    return True


def untolerated_flavor_taint(flavor: ResourceFlavor, pod_set: PodSet) -> Taint | None:
    """The flavor's first NoSchedule/NoExecute node taint that the pod set does not tolerate.

    As Kueue, the flavor's own tolerations count: they are added to every pod
    admitted with it.
    """
    if not flavor.node_taints:
        return None
    return first_untolerated(flavor.node_taints, (*pod_set.tolerations, *flavor.tolerations))


def tas_mismatch(flavor: ResourceFlavor, pod_set: PodSet, tas_only: bool) -> str | None:
    """Why a pod set cannot use the flavor for Topology Aware Scheduling reasons (Kueue's
    checkPodSetAndFlavorMatchForTAS): a pod set that asks for a topology needs a TAS flavor; one that
    does not may use a TAS flavor only in a ClusterQueue whose flavors are all TAS (TAS is implied)."""
    explicit = pod_set.topology_request is not None and pod_set.topology_request.explicit
    if explicit or tas_only:
        if tas_only and not explicit:
            return None
        if flavor.topology_name is None:
            return f'Flavor "{flavor.name}" does not support TopologyAwareScheduling'
        return None
    if flavor.topology_name is not None:
        return f'Flavor "{flavor.name}" supports only TopologyAwareScheduling'
    return None


@dataclass(frozen=True, slots=True)
class _FlavorStep:
    """One flavor of a resource group as a pod set sees it, whatever the quota."""

    name: FlavorName
    # Why the pod set cannot use it (missing, an untolerated taint, node affinity, TAS); None: it may.
    rejected: str | None
    # (resource, flavor-resource, the pod set's request) for each resource of the group the pod set requests.
    cells: tuple[tuple[str, FlavorResource, int], ...]


@dataclass(frozen=True, slots=True)
class _GroupStep:
    """A resource group a pod set needs, reached through ``resource`` (``last_tried`` is kept by it)."""

    resource: str
    flavors: tuple[_FlavorStep, ...]


@dataclass(frozen=True, slots=True)
class _PodSetPlan:
    name: str
    count: int
    # Read-only: every assignment gets a copy.
    requests: Mapping[str, int]
    groups: tuple[_GroupStep, ...]
    # A requested resource no group of the queue covers: the pod set cannot be assigned.
    unavailable: str | None


@dataclass(frozen=True, slots=True)
class _Plan:
    """What flavor assignment reads of a queue, its flavors and a workload's pod sets at given counts,
    none of it usage: the groups each pod set needs, in the order the search meets them, and each
    flavor's verdict on the pod set.  Kept by identity (see ``_plan_for``), so a head costs only its
    quota checks."""

    spec: ClusterQueueSpec
    pod_sets: tuple[PodSet, ...]
    # The flavor objects the verdicts were read from (changed flavors are new objects).
    flavors: tuple[tuple[FlavorName, ResourceFlavor | None], ...]
    steps: tuple[_PodSetPlan, ...]
    # One pod set needing one resource group: the assignments that fit at once (the first flavor the
    # search may use has room for every resource), by (that flavor's index, each resource's borrowing
    # level).  One value each, shared by the heads that get it (assignments are read, never changed).
    fits: dict[tuple[int, tuple[int, ...]], Assignment] = field(default_factory=dict, compare=False)


# Plans by (id(spec), id(pod_sets), counts; None: the pod sets' own): the submission path shares one
# pod-sets value among the workloads of a shape, and a queue's spec is one object until it changes.
_PLANS: dict[tuple[int, int, tuple[int, ...] | None], _Plan] = {}
_PLANS_LIMIT = 4096


def _make_plan(spec: ClusterQueueSpec, flavors: Mapping[FlavorName, ResourceFlavor],
               pod_sets: tuple[PodSet, ...], counts: tuple[int, ...] | None) -> _Plan:
    covers_pods = spec.group_for("pods") is not None
    names = spec.flavors
    tas_only = bool(names) and all((f := flavors.get(n)) is not None and f.topology_name is not None for n in names)
    steps: list[_PodSetPlan] = []
    if counts is None:
        counts = tuple(ps.count for ps in pod_sets)
    for ps, count in zip(pod_sets, counts, strict=True):
        requests = ps.total_requests(count)
        if covers_pods:
            requests["pods"] = count
        groups: list[_GroupStep] = []
        seen: set[int] = set()
        unavailable: str | None = None
        for res, qty in requests.items():
            group = spec.group_for(res)
            if group is None:
                if qty == 0:
                    continue
                unavailable = f"resource {res} unavailable in ClusterQueue"
                break
            if id(group) in seen:
                continue
            seen.add(id(group))
            covered = [(r, q) for r, q in requests.items() if r in group.covered_resources]
            fsteps: list[_FlavorStep] = []
            for fq in group.flavors:
                flavor = flavors.get(fq.name)
                rejected: str | None = None
                if flavor is None:
                    rejected = f"flavor {fq.name} not found"
                elif (taint := untolerated_flavor_taint(flavor, ps)) is not None:
                    rejected = f"untolerated taint {taint.kueue_text()} in flavor {fq.name}"
                elif not flavor_matches(flavor, ps):
                    rejected = f"flavor {fq.name} doesn't match node affinity"
                else:
                    rejected = tas_mismatch(flavor, ps, tas_only)
                cells = tuple((r, FlavorResource(fq.name, r), q) for r, q in covered)
                fsteps.append(_FlavorStep(fq.name, rejected, cells))
            groups.append(_GroupStep(res, tuple(fsteps)))
        steps.append(_PodSetPlan(ps.name, count, requests, tuple(groups), unavailable))
    return _Plan(spec, pod_sets, tuple((n, flavors.get(n)) for n in names), tuple(steps))


def _plan_for(spec: ClusterQueueSpec, flavors: Mapping[FlavorName, ResourceFlavor],
              pod_sets: tuple[PodSet, ...], counts: tuple[int, ...] | None) -> _Plan:
    key = (id(spec), id(pod_sets), counts)
    plan = _PLANS.get(key)
    if plan is not None and plan.spec is spec and plan.pod_sets is pod_sets:
        for name, known in plan.flavors:
            if flavors.get(name) is not known:
                break
        else:
            return plan
    plan = _make_plan(spec, flavors, pod_sets, counts)
    if len(_PLANS) >= _PLANS_LIMIT:
        _PLANS.clear()
    # The plan keeps the spec and pod sets alive, so their ids stay theirs while it is kept.
    _PLANS[key] = plan
    return plan


@dataclass(slots=True)
class FlavorAssigner:
    """Assigns flavors for one workload against one ClusterQueue in a snapshot."""

    workload: Workload
    spec: ClusterQueueSpec
    node: QuotaNode
    view: UsageView
    flavors: Mapping[FlavorName, ResourceFlavor]
    oracle: PreemptionOracle
    fair_sharing: bool = False
    # From the previous attempt: per pod set, per resource, the last flavor index tried.
    last_tried: Sequence[Mapping[str, int]] | None = None

    def assign(self, counts: Sequence[int] | None = None) -> Assignment:
        # A pending workload needs quota only for the pods not yet reclaimable
        # (Kueue's totalRequestsFromPodSets); a partial count never asks for more.
        wl = self.workload
        remaining: tuple[int, ...] | None = None  # the pod sets' own counts
        if wl.status.reclaimable_pods or counts is not None:
            remaining = wl.counts_after_reclaim()
            if counts is not None:
                remaining = tuple(min(counts[i], r) for i, r in enumerate(remaining))
        plan = _plan_for(self.spec, self.flavors, wl.pod_sets, remaining)
        if len(plan.steps) == 1:
            fit = self._fit_at_once(plan)
            if fit is not None:
                return fit
        assignment = Assignment()  # only now: a head that fits at once (most) gets a kept one
        for i, (ps, step) in enumerate(zip(wl.pod_sets, plan.steps, strict=True)):
            result = PodSetResult(name=step.name, count=step.count, requests=dict(step.requests))
            ok = self._assign_pod_set(i, ps, step, result, assignment.usage)
            self._append(assignment, result)
            if not ok:
                return assignment
        return assignment

    def _fit_at_once(self, plan: _Plan) -> Assignment | None:
        """The assignment of a one-pod-set, one-group workload when the first flavor the search may use
        has room for each resource now and the search stops there (what ``_find_flavor`` then returns:
        that flavor, fitting, tried to the end if it is the last); None: search as usual."""
        step = plan.steps[0]
        if step.unavailable is not None or len(step.groups) != 1:
            return None
        group = step.groups[0]
        flavors = group.flavors
        index = 0 if self.last_tried is None else self._start_index(0, group.resource)
        while index < len(flavors) and flavors[index].rejected is not None:
            index += 1
        if index >= len(flavors):
            return None
        view, node = self.view, self.node
        borrows: list[int] = []
        for _, fr, val in flavors[index].cells:
            # _fits_resource_quota's fitting case: within the maximum capacity and what is unused now.
            potential = node.potential.get(fr)  # potential_available's kept answer, read inline
            if potential is None:
                potential = potential_available(node, fr)
            if val > potential or val > view.available(node, fr):
                return None
            borrows.append(view.lowest_subtree_that_fits(node, fr, val)[0])
        most = max(borrows)
        if most > 0 and self.spec.flavor_fungibility.when_can_borrow is FlavorFungibilityPolicy.TRY_NEXT_FLAVOR:
            return None  # a fit that borrows goes on to the next flavors
        key = (index, tuple(borrows))
        known = plan.fits.get(key)
        if known is not None:
            return known
        fs = flavors[index]
        tried = -1 if index == len(flavors) - 1 else index
        result = PodSetResult(name=step.name, count=step.count, requests=dict(step.requests),
                              flavors={r: FlavorChoice(fs.name, Mode.FIT, b, tried)
                                       for (r, _, _), b in zip(fs.cells, borrows, strict=True)})
        assignment = Assignment()
        self._append(assignment, result)
        assignment.kept_last_tried = tuple(assignment.last_tried())
        assignment.kept_mode = assignment.mode()
        plan.fits[key] = assignment
        return assignment

    def _append(self, assignment: Assignment, result: PodSetResult) -> None:
        assignment.pod_sets.append(result)
        usage, requests = assignment.usage, result.requests
        for res, choice in result.flavors.items():
            if choice.borrow > assignment.borrowing:
                assignment.borrowing = choice.borrow
            fr = FlavorResource(choice.flavor, res)
            usage[fr] = usage.get(fr, 0) + requests.get(res, 0)

    def _assign_pod_set(
        self, index: int, ps: PodSet, step: _PodSetPlan, result: PodSetResult,
        assumed: Mapping[FlavorResource, int],
    ) -> bool:
        chosen: dict[str, FlavorChoice] = {}
        reasons: list[str] = []
        for group in step.groups:
            flavors, status = self._find_flavor(index, group, assumed)
            if not flavors:
                result.reasons = status
                return False
            chosen.update(flavors)
            reasons.extend(status)
        if step.unavailable is not None:
            result.reasons = [step.unavailable]
            return False
        result.flavors = chosen
        result.reasons = reasons
        return True

    def _start_index(self, index: int, res: str) -> int:
        if self.last_tried is None or index >= len(self.last_tried):
            return 0
        last = self.last_tried[index].get(res)
        return 0 if last is None else last + 1

    def _find_flavor(
        self, index: int, group: _GroupStep, assumed: Mapping[FlavorResource, int],
    ) -> tuple[dict[str, FlavorChoice], list[str]]:
        reasons: list[str] = []
        best: dict[str, FlavorChoice] | None = None
        best_mode = WORST
        fungibility = self.spec.flavor_fungibility
        attempted = -1
        steps = group.flavors
        for idx in range(self._start_index(index, group.resource), len(steps)):
            attempted = idx
            fs = steps[idx]
            if fs.rejected is not None:
                reasons.append(fs.rejected)
                continue
            choices: dict[str, FlavorChoice] = {}
            representative = BEST
            for r, fr, val in fs.cells:
                pmode, borrow, why = self._fits_resource_quota(fr, assumed.get(fr, 0), val)
                if why:
                    reasons.extend(why)
                mode = _granular(pmode, borrow)
                if mode is not representative and is_preferred(representative, mode, fungibility):
                    representative = mode
                if representative.preemption_mode is PreemptionMode.NO_FIT:
                    continue
                choices[r] = FlavorChoice(fs.name, pmode.to_mode(), borrow)
            if not should_try_next_flavor(representative, fungibility):
                best, best_mode = choices, representative
                break
            if is_preferred(representative, best_mode, fungibility):
                best, best_mode = choices, representative
        if best is None:
            return {}, reasons
        tried = -1 if attempted == len(steps) - 1 else attempted
        if tried != -1:  # -1 is what the choices were made with
            best = {r: FlavorChoice(c.flavor, c.mode, c.borrow, tried) for r, c in best.items()}
        if best_mode.preemption_mode is PreemptionMode.FIT:
            return best, []
        return best, reasons

    def _can_preempt_while_borrowing(self) -> bool:
        p = self.spec.preemption
        return p.borrow_within_cohort is not BorrowWithinCohortPolicy.NEVER or (
            self.fair_sharing and p.reclaim_within_cohort is not ReclaimPolicy.NEVER
        )

    def _fits_resource_quota(
        self, fr: FlavorResource, assumed: int, request: int
    ) -> tuple[PreemptionMode, int, list[str]]:
        view, node = self.view, self.node
        available = view.available(node, fr)
        max_capacity = potential_available(node, fr)
        val = assumed + request
        res = fr.resource
        if val > max_capacity:
            return (
                PreemptionMode.NO_FIT,
                0,
                [
                    f"insufficient quota for {res} in flavor {fr.flavor}, previously considered podsets "
                    f"requests ({_fmt(res, assumed)}) + current podset request ({_fmt(res, request)}) "
                    f"> maximum capacity ({_fmt(res, max_capacity)})"
                ],
            )
        borrow, may_reclaim = view.lowest_subtree_that_fits(node, fr, val)
        if val <= available:
            return PreemptionMode.FIT, borrow, []
        why = [f"insufficient unused quota for {res} in flavor {fr.flavor}, {_fmt(res, val - available)} more needed"]
        if (
            node.quota_for(fr).nominal >= val
            or may_reclaim
            or self._can_preempt_while_borrowing()
        ):
            possibility, borrow_after = self.oracle.simulate_preemption(
                cq=node, workload=self.workload, fr=fr, quantity=val
            )
            return _FROM_POSSIBILITY[possibility], borrow_after, why
        return PreemptionMode.NO_FIT, borrow, why

