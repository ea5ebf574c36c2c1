"""Dominant resource shares (Kueue ``fair_sharing.go``, TestDominantResourceShare)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import pytest

from sluicegate.controller.scheduling.fairsharing import (
    MAX_WEIGHTED_SHARE,
    NEGATIVE_SHARE,
    DominantResourceShare,
    compare_shares,
    dominant_resource_share,
    weighted_share,
)
from sluicegate.controller.scheduling.snapshot import AdmittedWorkload
from sluicegate.model import ClusterQueueSpec, CohortSpec, FlavorName, FlavorResource
from tests.builders import Qty, QuotaArg, cluster_queue, cohort, qty

from .builders import admitted, snapshot

GPU = "example.com/gpu"


def lender(quota: Mapping[str, QuotaArg], weight: Qty = 1) -> ClusterQueueSpec:
    return cluster_queue("lending-cq", cohort="test-cohort", quota={"default": quota}, weight=weight)


@dataclass(frozen=True)
class Case:
    id: str
    cqs: Sequence[ClusterQueueSpec]
    usage: Sequence[AdmittedWorkload]
    # node name -> (weighted share, dominant resource, borrowing)
    want: dict[str, tuple[int, str, bool]]
    cohorts: Sequence[CohortSpec] = ()
    extra: dict[tuple[str, str], Qty] = field(default_factory=dict)


def use(*pairs: tuple[str, Qty], flavor: str = "default") -> list[AdmittedWorkload]:
    return [admitted(f"w{i}", "cq", {res: v}, flavor=flavor) for i, (res, v) in enumerate(pairs)]


NOT_BORROWING = (0, "", False)

CASES = [
    Case(
        "no cohort",
        [cluster_queue("cq", quota={"default": {"cpu": 2000, GPU: 5}})],
        use(("cpu", 1), (GPU, 2)),
        {"cq": NOT_BORROWING},
    ),
    Case(
        "usage below nominal",
        [cluster_queue("cq", cohort="test-cohort", quota={"default": {"cpu": 2, GPU: 5}}), lender({"cpu": 8, GPU: 5})],
        use(("cpu", 1), (GPU, 2)),
        {"cq": NOT_BORROWING, "lending-cq": NOT_BORROWING, "test-cohort": NOT_BORROWING},
    ),
    Case(
        "usage above nominal: (7-5)*1000/10",
        [cluster_queue("cq", cohort="test-cohort", quota={"default": {"cpu": 2, GPU: 5}}), lender({"cpu": 8, GPU: 5})],
        use(("cpu", 3), (GPU, 7)),
        {"cq": (200, GPU, True), "lending-cq": NOT_BORROWING, "test-cohort": NOT_BORROWING},
    ),
    Case(
        "slightly above nominal rounds up: 1000/1500",
        [cluster_queue("cq", cohort="test-cohort", quota={"default": {GPU: 500}}), lender({GPU: 1000}, weight=300)],
        use((GPU, 501)),
        {"cq": (1, GPU, True), "lending-cq": NOT_BORROWING, "test-cohort": NOT_BORROWING},
    ),
    Case(
        "way above nominal with large weights: 200/300 rounds up",
        [cluster_queue("cq", cohort="test-cohort", quota={"default": {GPU: 500}}, weight=300),
         lender({GPU: 1000}, weight=300)],
        use((GPU, 800)),
        {"cq": (1, GPU, True), "lending-cq": NOT_BORROWING, "test-cohort": NOT_BORROWING},
    ),
    Case(
        "one resource above nominal: (3-2)*1000/10",
        [cluster_queue("cq", cohort="test-cohort", quota={"default": {"cpu": 2, GPU: 5}}), lender({"cpu": 8, GPU: 5})],
        use(("cpu", 3), (GPU, 3)),
        {"cq": (100, "cpu", True), "lending-cq": NOT_BORROWING, "test-cohort": NOT_BORROWING},
    ),
    Case(
        "with the incoming workload: (1+4-2)*1000/10",
        [cluster_queue("cq", cohort="test-cohort", quota={"default": {"cpu": 2, GPU: 5}}), lender({"cpu": 8, GPU: 5})],
        use(("cpu", 1), (GPU, 2)),
        {"cq": (300, "cpu", True)},
        extra={("default", "cpu"): 4, ("default", GPU): 4},
    ),
    Case(
        "a resource nobody lends is borrowed but does not count",
        [cluster_queue("cq", cohort="test-cohort", quota={"default": {"cpu": 2, GPU: (2, None, 0)}}),
         lender({"cpu": 8, GPU: (64, None, 0)})],
        use(("cpu", 1), (GPU, 1)),
        {"cq": (300, "cpu", True)},
        extra={("default", "cpu"): 4, ("default", GPU): 4},
    ),
    Case(
        "zero weight borrowing only what nobody lends is still infinite",
        [cluster_queue("cq", cohort="test-cohort", quota={"default": {GPU: (2, None, 0)}}, weight=0),
         lender({GPU: (64, None, 0)})],
        use((GPU, 3)),
        {"cq": (MAX_WEIGHTED_SHARE, "", True), "lending-cq": NOT_BORROWING, "test-cohort": NOT_BORROWING},
    ),
    Case(
        "multiple flavors of one resource: ((15+10-20)+0)*1000/200",
        [cluster_queue("cq", cohort="test-cohort", quota={"on-demand": {"cpu": 20}, "spot": {"cpu": 80}}),
         lender({"cpu": 100})],
        [admitted("w0", "cq", {"cpu": 15}, flavor="on-demand"), admitted("w1", "cq", {"cpu": 5}, flavor="spot")],
        {"cq": (25, "cpu", True)},
        extra={("on-demand", "cpu"): 10},
    ),
    Case(
        "integer weight divides: ((7-5)*1000/10)/2",
        [cluster_queue("cq", cohort="test-cohort", quota={"default": {GPU: 5}}, weight=2), lender({GPU: 5})],
        use((GPU, 7)),
        {"cq": (100, GPU, True)},
    ),
    Case(
        "decimal weight: ((7-5)*1000/10)/0.5",
        [cluster_queue("cq", cohort="test-cohort", quota={"default": {GPU: 5}}, weight="0.5"), lender({GPU: 5})],
        use((GPU, 7)),
        {"cq": (400, GPU, True)},
    ),
    Case(
        "zero weight while borrowing is the maximal share",
        [cluster_queue("cq", cohort="test-cohort", quota={"default": {GPU: 5}}, weight=0), lender({GPU: 10})],
        use((GPU, 7)),
        {"cq": (MAX_WEIGHTED_SHARE, GPU, True), "lending-cq": NOT_BORROWING},
    ),
    Case(
        "zero weight within nominal is zero",
        [cluster_queue("cq", cohort="test-cohort", quota={"default": {GPU: 5}}, weight=0), lender({GPU: 10})],
        use((GPU, 5)),
        {"cq": NOT_BORROWING},
    ),
    Case(
        "cohort has a share of its own, weighted by the cohort's weight",
        [cluster_queue("cq", cohort="child-cohort", quota={"default": {GPU: 5}})],
        use((GPU, 10)),
        {"cq": (100, GPU, True), "child-cohort": (50, GPU, True), "root": NOT_BORROWING},
        cohorts=[cohort("child-cohort", parent="root", weight=2), cohort("root", quota={"default": {GPU: 45}})],
    ),
    Case(
        "resources only available at the root",
        [cluster_queue("cq", cohort="child-cohort", quota={"default": {GPU: 0}})],
        use((GPU, 10)),
        {"cq": (200, GPU, True), "child-cohort": (100, GPU, True), "root": NOT_BORROWING},
        cohorts=[cohort("child-cohort", parent="root", weight=2), cohort("root", quota={"default": {GPU: 50}})],
    ),
    Case(
        "a borrowing limit shrinks what the parent can lend: 10/10 for cq, 10/50 for the cohort",
        [cluster_queue("cq", cohort="child-cohort", quota={"default": {GPU: 0}})],
        use((GPU, 10)),
        {"cq": (1000, GPU, True), "child-cohort": (200, GPU, True), "root": NOT_BORROWING},
        cohorts=[cohort("child-cohort", parent="root", quota={"default": {GPU: (0, 10, None)}}),
                 cohort("root", quota={"default": {GPU: 50}})],
    ),
    Case(
        "equal ratios: the alphabetically first resource is dominant",
        [cluster_queue("cq", cohort="test-cohort", quota={"default": {"cpu": 2, "memory": 2}}),
         lender({"cpu": 2, "memory": 2})],
        use(("cpu", 3), ("memory", 3)),
        {"cq": (250, "cpu", True)},
    ),
]


def _node(snap, name: str):  # type: ignore[no-untyped-def]
    tree = snap.tree
    return tree.cluster_queues.get(name) or tree.cohorts[name]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_dominant_resource_share(case: Case) -> None:
    snap = snapshot(cqs=case.cqs, cohorts=case.cohorts, admitted=case.usage)
    extra = {FlavorResource(FlavorName(f), r): qty(r, v) for (f, r), v in case.extra.items()}
    got = {}
    for name in case.want:
        node = _node(snap, name)
        drs = dominant_resource_share(snap.view, node, extra if node.name == "cq" and not node.is_cohort else None)
        got[name] = (drs.weighted_share(), drs.resource, drs.borrowing)
    assert got == case.want
    if not case.extra:
        # The status value is the same number, read straight off the view.
        assert {n: weighted_share(snap.view, _node(snap, n)) for n in case.want} == {
            n: v[0] for n, v in case.want.items()
        }


def share(ratio: int, weight: str = "1", borrowing: bool = True) -> DominantResourceShare:
    return DominantResourceShare(Fraction(weight), Fraction(ratio), "cpu", borrowing, frozenset())


@pytest.mark.parametrize(
    ("a", "b", "want"),
    [
        (share(100), share(200), -1),
        (share(200, "2"), share(100), 0),
        (share(1, "0"), share(10**9), 1),
        (share(300, "0"), share(100, "0"), 1),
        (share(0, "0", borrowing=False), share(1), -1),
        (NEGATIVE_SHARE, share(0, borrowing=False), -1),
    ],
    ids=[
        "lower-ratio-first",
        "weight-halves-the-share",
        "zero-weight-borrower-above-everything",
        "two-zero-weight-borrowers-by-ratio",
        "zero-weight-non-borrower-is-zero",
        "negative-sentinel-below-zero",
    ],
)
def test_compare_shares(a: DominantResourceShare, b: DominantResourceShare, want: int) -> None:
    assert (compare_shares(a, b), compare_shares(b, a)) == (want, -want)
