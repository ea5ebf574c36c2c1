"""The flavor assigner as it was before its static part was planned once per queue and shape
(``flavors._Plan``): every head searched from the spec, the flavors and the pod sets.  Kept only to
check that the planned search gives exactly the same assignments (test_flavor_plans.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sluicegate.controller.scheduling.flavors import (
    _FROM_POSSIBILITY,
    BEST,
    WORST,
    Assignment,
    FlavorChoice,
    GranularMode,
    PodSetResult,
    PreemptionMode,
    PreemptionOracle,
    _fmt,
    flavor_matches,
    is_preferred,
    should_try_next_flavor,
    tas_mismatch,
    untolerated_flavor_taint,
)
from sluicegate.controller.scheduling.quota import QuotaNode, UsageView, potential_available
from sluicegate.model.names import FlavorName
from sluicegate.model.objects import ResourceFlavor
from sluicegate.model.queues import BorrowWithinCohortPolicy, ClusterQueueSpec, ReclaimPolicy
from sluicegate.model.resources import FlavorResource
from sluicegate.model.workloads import PodSet, Workload


@dataclass(slots=True)
class ReferenceFlavorAssigner:
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

