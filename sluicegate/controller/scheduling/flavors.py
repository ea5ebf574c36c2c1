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

    def mode(self) -> Mode:
        if not self.pod_sets:
            return Mode.NO_FIT
        return min(ps.mode() for ps in self.pod_sets)

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
        assignment = Assignment()
        covers_pods = self.spec.group_for("pods") is not None
        # A pending workload needs quota only for the pods not yet reclaimable
        # (Kueue's totalRequestsFromPodSets); a partial count never asks for more.
        remaining = self.workload.counts_after_reclaim()
        for i, ps in enumerate(self.workload.pod_sets):
            count = remaining[i] if counts is None else min(counts[i], remaining[i])
            requests = ps.total_requests(count)
            if covers_pods:
                requests["pods"] = count
            result = PodSetResult(name=ps.name, count=count, requests=requests)
            ok = self._assign_pod_set(i, ps, result, assignment.usage)
            self._append(assignment, result)
            if not ok:
                return assignment
        return assignment

    def _append(self, assignment: Assignment, result: PodSetResult) -> None:
        assignment.pod_sets.append(result)
        for res, choice in result.flavors.items():
            assignment.borrowing = max(assignment.borrowing, choice.borrow)
            fr = FlavorResource(choice.flavor, res)
            assignment.usage[fr] = assignment.usage.get(fr, 0) + result.requests.get(res, 0)

    def _assign_pod_set(
        self, index: int, ps: PodSet, result: PodSetResult, assumed: Mapping[FlavorResource, int]
    ) -> bool:
        chosen: dict[str, FlavorChoice] = {}
        reasons: list[str] = []
        for res, qty in result.requests.items():
            if self.spec.group_for(res) is None and qty == 0:
                continue
            if res in chosen:
                continue
            flavors, status, error = self._find_flavor(index, ps, result.requests, res, assumed)
            if error is not None:
                result.error = error
                return False
            if not flavors:
                result.reasons = status
                return False
            chosen.update(flavors)
            reasons.extend(status)
        result.flavors = {res: c for res, c in chosen.items() if res in result.requests}
        result.reasons = reasons
        return True

    def _start_index(self, index: int, res: str) -> int:
        if self.last_tried is None or index >= len(self.last_tried):
            return 0
        last = self.last_tried[index].get(res)
        return 0 if last is None else last + 1

    def _find_flavor(
        self,
        index: int,
        ps: PodSet,
        requests: Mapping[str, int],
        res_name: str,
        assumed: Mapping[FlavorResource, int],
    ) -> tuple[dict[str, FlavorChoice], list[str], str | None]:
        group = self.spec.group_for(res_name)
        if group is None:
            return {}, [f"resource {res_name} unavailable in ClusterQueue"], None
        covered = {r: q for r, q in requests.items() if r in group.covered_resources}
        reasons: list[str] = []
        best: dict[str, FlavorChoice] | None = None
        best_mode = WORST
        fungibility = self.spec.flavor_fungibility
        # Read only where it decides (a flavor with a topology for a pod set that asks for none).
        tas_only: bool | None = None
        attempted = -1
        for idx in range(self._start_index(index, res_name), len(group.flavors)):
            attempted = idx
            fq = group.flavors[idx]
            flavor = self.flavors.get(fq.name)
            if flavor is None:
                reasons.append(f"flavor {fq.name} not found")
                continue
            taint = untolerated_flavor_taint(flavor, ps)
            if taint is not None:
                reasons.append(f"untolerated taint {taint.kueue_text()} in flavor {fq.name}")
                continue
            if not flavor_matches(flavor, ps):
                reasons.append(f"flavor {fq.name} doesn't match node affinity")
                continue
            if tas_only is None and flavor.topology_name is not None:
                tas_only = self._tas_only()
            mismatch = tas_mismatch(flavor, ps, bool(tas_only))
            if mismatch is not None:
                reasons.append(mismatch)
                continue
            choices: dict[str, FlavorChoice] = {}
            representative = BEST
            for r, val in covered.items():
                fr = FlavorResource(fq.name, r)
                pmode, borrow, why = self._fits_resource_quota(fr, assumed.get(fr, 0), val)
                reasons.extend(why)
                mode = GranularMode(pmode, borrow)
                if is_preferred(representative, mode, fungibility):
                    representative = mode
                if representative.preemption_mode is PreemptionMode.NO_FIT:
                    continue
                choices[r] = FlavorChoice(fq.name, pmode.to_mode(), borrow)
            if not should_try_next_flavor(representative, fungibility):
                best, best_mode = choices, representative
                break
            if is_preferred(representative, best_mode, fungibility):
                best, best_mode = choices, representative
        if best is None:
            return {}, reasons, None
        tried = -1 if attempted == len(group.flavors) - 1 else attempted
        best = {r: FlavorChoice(c.flavor, c.mode, c.borrow, tried) for r, c in best.items()}
        if best_mode.preemption_mode is PreemptionMode.FIT:
            return best, [], None
        return best, reasons, None

    def _tas_only(self) -> bool:
        """Whether every flavor of the ClusterQueue has a topologyName (Kueue's IsTASOnly)."""
        names = self.spec.flavors
        return bool(names) and all((f := self.flavors.get(n)) is not None and f.topology_name is not None
                                   for n in names)

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

