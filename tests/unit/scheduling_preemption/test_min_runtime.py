"""Minimum runtime before preemption (ClusterQueue ``minAdmitDuration``, a sluicegate extension).

Kueue has no merged field for this: kubernetes-sigs/kueue issue #9876 and its
KEP (keps/9876-cross-cq-guaranteed-runtime, open) propose skipping, as
reclaim and fair-sharing candidates, workloads whose QuotaReserved condition
is younger than a configured duration; issue #8522 (within-queue time
sharing) is a separate, also unmerged, proposal.  We follow the KEP's
semantics per ClusterQueue: the victim's queue protects its workloads from
InCohortReclamation, InCohortReclaimWhileBorrowing and InCohortFairSharing;
InClusterQueue priority preemption is unchanged.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from sluicegate.controller.scheduling.cycle import (
    IN_CLUSTER_QUEUE,
    IN_COHORT_RECLAMATION,
    EntryStatus,
    RequeueReason,
    run_cycle,
)
from sluicegate.controller.scheduling.fairsharing import order_for
from sluicegate.controller.scheduling.preemption import Preemptor, protected_until
from sluicegate.controller.scheduling.snapshot import Snapshot
from sluicegate.model import ClusterQueueSpec
from tests.builders import cluster_queue, workload

from .builders import admitted, head, reasons, snapshot

MINUTE = 60.0


def _guarded(spec: ClusterQueueSpec, seconds: float | None) -> ClusterQueueSpec:
    return replace(spec, min_admit_duration=seconds)


def _reclaim_snapshot(*, now: float, protect: float | None, fair: bool) -> Snapshot:
    """``owner`` lends 4 cpus; ``borrower`` uses all 6 of the cohort; ``owner`` wants 3 back."""
    snap = snapshot(
        cqs=[
            cluster_queue("owner", cohort="co", quota={"default": {"cpu": 4}}, reclaim="Any"),
            _guarded(cluster_queue("borrower", cohort="co", quota={"default": {"cpu": 2}}, within="LowerPriority"),
                     protect),
        ],
        admitted=[
            admitted("b-old", "borrower", {"cpu": 3}, admitted_at=0.0),
            admitted("b-new", "borrower", {"cpu": 3}, admitted_at=100.0),
        ],
        fair=fair,
    )
    snap.now = now
    return snap


CASES = [
    # (protection, now, expected victims)
    pytest.param(None, 110.0, {("b-new", IN_COHORT_RECLAMATION)}, id="no-protection-newest-goes"),
    pytest.param(5 * MINUTE, 110.0, set(), id="both-protected"),
    pytest.param(5 * MINUTE, 350.0, {("b-old", IN_COHORT_RECLAMATION)}, id="only-the-old-one-expired"),
    pytest.param(5 * MINUTE, 400.0, {("b-new", IN_COHORT_RECLAMATION)}, id="both-expired-newest-goes"),
]


@pytest.mark.parametrize("fair", [False, True], ids=["classic", "fair-sharing"])
@pytest.mark.parametrize(("protect", "now", "victims"), CASES)
def test_reclaim_skips_protected_workloads(
    protect: float | None, now: float, victims: set[tuple[str, str]], fair: bool
) -> None:
    snap = _reclaim_snapshot(now=now, protect=protect, fair=fair)
    entries = run_cycle([head(workload("in", requests={"cpu": 3}), "owner")], snap,
                        preemptor=Preemptor(), ordering=order_for(snap))
    (entry,) = entries
    assert reasons(entry.targets) == victims
    if victims:
        assert entry.status is EntryStatus.PREEMPTING
        assert entry.retry_at is None
    else:
        assert entry.status is EntryStatus.NOT_NOMINATED
        assert entry.requeue_reason in (RequeueReason.NO_FIT, RequeueReason.PREEMPTION_NO_CANDIDATES)
        # Told why, and re-tried when the first protection (b-old's, admitted at 0) ends.
        assert entry.retry_at == 0.0 + 5 * MINUTE
        assert "minimum runtime (minAdmitDuration)" in entry.message
        assert "the first protection ends at 1970-01-01T00:05:00Z" in entry.message


def test_priority_preemption_within_the_queue_ignores_protection() -> None:
    snap = snapshot(
        cqs=[_guarded(cluster_queue("solo", quota={"default": {"cpu": 4}}, within="LowerPriority"), 10 * MINUTE)],
        admitted=[admitted("low", "solo", {"cpu": 4}, priority=-1, admitted_at=0.0)],
    )
    snap.now = 1.0
    (entry,) = run_cycle([head(workload("high", priority=5, requests={"cpu": 2}), "solo")], snap,
                         preemptor=Preemptor(), ordering=order_for(snap))
    assert entry.status is EntryStatus.PREEMPTING
    assert reasons(entry.targets) == {("low", IN_CLUSTER_QUEUE)}


def test_the_preemptors_own_protection_does_not_matter() -> None:
    """Only the victim's ClusterQueue decides: a protected preemptor queue still reclaims."""
    snap = snapshot(
        cqs=[
            _guarded(cluster_queue("owner", cohort="co", quota={"default": {"cpu": 4}}, reclaim="Any"), 10 * MINUTE),
            cluster_queue("borrower", cohort="co", quota={"default": {"cpu": 2}}),
        ],
        admitted=[admitted("b", "borrower", {"cpu": 6}, admitted_at=0.0)],
    )
    snap.now = 1.0
    (entry,) = run_cycle([head(workload("in", requests={"cpu": 3}), "owner")], snap, preemptor=Preemptor())
    assert reasons(entry.targets) == {("b", IN_COHORT_RECLAMATION)}


@pytest.mark.parametrize(("now", "expected"), [(0.0, 60.0), (59.9, 60.0), (60.0, None), (1000.0, None)])
def test_protection_window_is_half_open(now: float, expected: float | None) -> None:
    snap = snapshot(cqs=[_guarded(cluster_queue("q", quota={"default": {"cpu": 1}}), MINUTE)], admitted=[])
    snap.now = now
    victim = admitted("v", "q", {"cpu": 1}, admitted_at=0.0)
    assert protected_until(victim, snap) == expected


@pytest.mark.parametrize(("protect", "third"), [(None, EntryStatus.ASSUMED), (5 * MINUTE, EntryStatus.SKIPPED)],
                         ids=["unprotected-reclaim-any-holds-nothing", "protected-the-reclaimer-holds-its-quota"])
def test_a_reclaimer_held_back_by_protection_keeps_its_nominal_quota_in_the_cycle(
    protect: float | None, third: EntryStatus
) -> None:
    """reclaimWithinCohort Any normally needs no capacity held back in the cycle (Kueue's
    CanAlwaysReclaim); while minimum runtimes block the reclaim it does, or another queue
    would take the owner's free nominal quota in the meantime."""
    snap = snapshot(
        cqs=[
            cluster_queue("owner", cohort="co", quota={"default": {"cpu": 4}}, reclaim="Any"),
            _guarded(cluster_queue("borrower", cohort="co", quota={"default": {"cpu": 2}}), protect),
            cluster_queue("third", cohort="co", quota={"default": {"cpu": 2}}),
        ],
        admitted=[admitted("b", "borrower", {"cpu": 5}, admitted_at=100.0)],
    )
    snap.now = 110.0
    heads = [head(workload("own", requests={"cpu": 4}, created=1.0), "owner"),
             head(workload("other", requests={"cpu": 2}, created=2.0), "third")]
    entries = {e.workload.name: e for e in run_cycle(heads, snap, preemptor=Preemptor(), ordering=order_for(snap))}
    if protect is None:
        assert reasons(entries["own"].targets) == {("b", IN_COHORT_RECLAMATION)}
    assert entries["other"].status is third
