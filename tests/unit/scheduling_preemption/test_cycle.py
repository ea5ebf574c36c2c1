"""End to end through ``run_cycle``: nomination, the oracle, ordering, and the walk."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from sluicegate.controller.scheduling.cycle import (
    IN_CLUSTER_QUEUE,
    IN_COHORT_FAIR_SHARING,
    IN_COHORT_RECLAMATION,
    Entry,
    EntryStatus,
    Head,
    RequeueReason,
    classical_order,
    run_cycle,
)
from sluicegate.controller.scheduling.fairsharing import STRATEGIES, fair_order, order_for, strategies_from_config
from sluicegate.controller.scheduling.flavors import Assignment
from sluicegate.controller.scheduling.preemption import Preemptor
from sluicegate.controller.scheduling.snapshot import Snapshot
from sluicegate.model import (
    ClusterQueueName,
    ClusterQueueSpec,
    FairSharingConfig,
    FlavorFungibility,
    FlavorFungibilityPolicy,
    FlavorName,
    FlavorResource,
)
from tests.builders import cluster_queue, qty, workload

from .builders import admitted, assignment, head, reasons, snapshot


def outcome(entries: Sequence[Entry]) -> dict[str, tuple[EntryStatus, set[tuple[str, str]]]]:
    return {e.workload.name: (e.status, reasons(e.targets)) for e in entries}


def cycle(snap: Snapshot, heads: Sequence[Head]) -> dict[str, tuple[EntryStatus, set[tuple[str, str]]]]:
    return outcome(run_cycle(heads, snap, preemptor=Preemptor(), ordering=order_for(snap)))


def test_higher_priority_head_preempts_exact_targets() -> None:
    snap = snapshot(
        cqs=[cluster_queue("standalone", quota={"default": {"cpu": 6}}, within="LowerPriority")],
        admitted=[admitted("low", "standalone", {"cpu": 2}, priority=-1), admitted("mid", "standalone", {"cpu": 2}),
                  admitted("high", "standalone", {"cpu": 2}, priority=1)],
    )
    heads = [head(workload("in", priority=1, requests={"cpu": 3}), "standalone")]
    entries = run_cycle(heads, snap, preemptor=Preemptor())
    assert outcome(entries) == {"in": (EntryStatus.PREEMPTING, {("low", IN_CLUSTER_QUEUE), ("mid", IN_CLUSTER_QUEUE)})}
    assert entries[0].requeue_reason is RequeueReason.PENDING_PREEMPTION


def test_two_preemptors_never_share_victims() -> None:
    snap = snapshot(
        cqs=[cluster_queue("a", cohort="co", quota={"default": {"cpu": 2}}, reclaim="Any"),
             cluster_queue("b", cohort="co", quota={"default": {"cpu": 2}}, reclaim="Any"),
             cluster_queue("c", cohort="co", quota={"default": {"cpu": 0}})],
        admitted=[admitted("c1", "c", {"cpu": 4})],
    )
    got = cycle(snap, [head(workload("a1", requests={"cpu": 2}, created=1.0), "a"),
                       head(workload("b1", requests={"cpu": 2}, created=2.0), "b")])
    assert got == {
        "a1": (EntryStatus.PREEMPTING, {("c1", IN_COHORT_RECLAMATION)}),
        "b1": (EntryStatus.SKIPPED, {("c1", IN_COHORT_RECLAMATION)}),
    }


def test_preempting_entry_reserves_capacity_against_later_entries() -> None:
    # a_high needs the 3 free units plus its victim's; b1 fits at nomination
    # but must not take what a_high was nominated with.
    snap = snapshot(
        cqs=[cluster_queue("a", cohort="co", quota={"default": {"cpu": 4}}, within="LowerPriority"),
             cluster_queue("b", cohort="co", quota={"default": {"cpu": 0}}),
             cluster_queue("c", cohort="co", quota={"default": {"cpu": 2}})],
        admitted=[admitted("a_low", "a", {"cpu": 3}, priority=-1)],
    )
    got = cycle(snap, [head(workload("a_high", priority=1, requests={"cpu": 4}), "a"),
                       head(workload("b1", requests={"cpu": 3}), "b")])
    assert got == {
        "a_high": (EntryStatus.PREEMPTING, {("a_low", IN_CLUSTER_QUEUE)}),
        "b1": (EntryStatus.SKIPPED, set()),
    }


@pytest.mark.parametrize(
    ("policy", "want"),
    [
        ({"within": "LowerPriority"}, (EntryStatus.NOT_NOMINATED, set())),
        ({"within": "LowerPriority", "borrow_within": "LowerPriority"},
         (EntryStatus.PREEMPTING, {("c1-low", IN_CLUSTER_QUEUE)})),
    ],
    ids=["within-cluster-queue-alone-does-not-let-a-borrower-preempt", "borrow-within-cohort-does"],
)
def test_a_borrowing_workload_preempts_only_when_the_policy_allows_borrowing_preemption(
    policy: dict[str, str], want: tuple[EntryStatus, set[tuple[str, str]]]
) -> None:
    # 7 > nominal 6 and the cohort is the root, so nothing may be reclaimed
    # higher up.  Kueue's fitsResourceQuota (pkg/scheduler/flavorassigner)
    # asks the preemption oracle only if nominal >= request, the workload may
    # reclaim in the hierarchy, or borrowWithinCohort (or fair sharing with
    # reclaimWithinCohort) allows preempting while borrowing:
    # withinClusterQueue alone does not.
    snap = snapshot(
        cqs=[cluster_queue("c1", cohort="co", quota={"default": {"cpu": (6, 6, None)}}, **policy),  # type: ignore[arg-type]
             cluster_queue("c2", cohort="co", quota={"default": {"cpu": (6, 6, None)}})],
        admitted=[admitted("c1-med", "c1", {"cpu": 4}), admitted("c1-low", "c1", {"cpu": 4}, priority=-1)],
    )
    assert cycle(snap, [head(workload("in", priority=1, requests={"cpu": 7}), "c1")]) == {"in": want}


def test_a_borrower_whose_request_fits_its_nominal_quota_may_preempt_within_its_queue() -> None:
    # 5 <= nominal 6: the oracle is asked whatever the borrowing policy.
    snap = snapshot(
        cqs=[cluster_queue("c1", cohort="co", quota={"default": {"cpu": (6, 6, None)}}, within="LowerPriority"),
             cluster_queue("c2", cohort="co", quota={"default": {"cpu": (6, 6, None)}})],
        admitted=[admitted("c1-med", "c1", {"cpu": 4}), admitted("c1-low", "c1", {"cpu": 4}, priority=-1)],
    )
    assert cycle(snap, [head(workload("in", priority=1, requests={"cpu": 5}), "c1")]) == {
        "in": (EntryStatus.PREEMPTING, {("c1-low", IN_CLUSTER_QUEUE)})
    }


@pytest.mark.parametrize(
    ("when_can_preempt", "want_flavor", "want"),
    [
        (FlavorFungibilityPolicy.TRY_NEXT_FLAVOR, "spot", (EntryStatus.ASSUMED, set())),
        (FlavorFungibilityPolicy.MAY_STOP_SEARCH, "on-demand", (EntryStatus.PREEMPTING, {("low", IN_CLUSTER_QUEUE)})),
    ],
    ids=["try-next-flavor-avoids-preemption", "may-stop-search-preempts-in-first-flavor"],
)
def test_flavor_fungibility_when_can_preempt(
    when_can_preempt: FlavorFungibilityPolicy, want_flavor: str, want: tuple[EntryStatus, set[tuple[str, str]]]
) -> None:
    snap = snapshot(
        cqs=[cluster_queue("cq", quota={"on-demand": {"cpu": 2}, "spot": {"cpu": 2}}, within="LowerPriority",
                           fungibility=FlavorFungibility(when_can_preempt=when_can_preempt))],
        admitted=[admitted("low", "cq", {"cpu": 2}, flavor="on-demand", priority=-1)],
    )
    entries = run_cycle([head(workload("in", priority=1, requests={"cpu": 2}), "cq")], snap, preemptor=Preemptor())
    assert outcome(entries) == {"in": want}
    assert entries[0].flavors() == {"main": {"cpu": FlavorName(want_flavor)}}


def test_preemptor_dispatches_on_the_fair_sharing_switch() -> None:
    def build(fair: bool) -> Snapshot:
        return snapshot(
            cqs=[cluster_queue(n, cohort="all", quota={"default": {"cpu": 3}}, within="LowerPriority", reclaim="Any",
                               borrow_within="LowerPriority", threshold=-3) for n in "abc"],
            admitted=[admitted(f"a{i}", "a", {"cpu": 1}) for i in (1, 2, 3)]
            + [admitted(f"b{i}", "b", {"cpu": 1}) for i in (1, 2, 3, 4, 5)] + [admitted("c1", "c", {"cpu": 1})],
            fair=fair,
        )

    def targets(snap: Snapshot) -> set[tuple[str, str]]:
        return reasons(Preemptor().get_targets(
            workload=workload("a_incoming"), cq=ClusterQueueName("a"),
            assignment=assignment({"cpu": ("default", 1)}), snapshot=snap,
        ))

    # Classic preemption cannot reclaim while the preemptor would borrow;
    # fair sharing sees that b holds the larger share.
    assert (targets(build(False)), targets(build(True))) == (set(), {("b1", IN_COHORT_FAIR_SHARING)})


def test_default_strategies_when_none_configured() -> None:
    config = FairSharingConfig(enabled=True, preemption_strategies=())
    assert strategies_from_config(config) == tuple(STRATEGIES.values())


# -- fair-sharing entry ordering ---------------------------------------------------


def lender_cohort(*borrowers: str, lend: int = 10) -> list[ClusterQueueSpec]:
    return [cluster_queue(n, cohort="co", quota={"default": {"cpu": 0}}) for n in borrowers] + [
        cluster_queue("lender", cohort="co", quota={"default": {"cpu": lend}})
    ]


def entry(name: str, cq: str, cpu: int, *, priority: int = 0, created: float = 0.0) -> Entry:
    e = Entry(head=head(workload(name, priority=priority, created=created, requests={"cpu": cpu}), cq))
    a: Assignment = assignment({"cpu": ("default", cpu)})
    e.assignment = a
    return e


def drive(snap: Snapshot, entries: list[Entry]) -> list[str]:
    """Pull entries from fair_order, adding each one's usage as the cycle would."""
    order: list[str] = []
    for e in fair_order(entries, snap):
        order.append(e.workload.name)
        assert e.assignment is not None
        snap.view.add_all(snap.node(e.cluster_queue), e.assignment.usage)
    return order


@pytest.mark.parametrize(
    ("pre_usage", "entries", "want"),
    [
        (
            {"a": 2},
            [entry("a1", "a", 1, created=1.0), entry("b1", "b", 1, created=2.0)],
            ["b1", "a1"],
        ),
        (
            {},
            [entry("a1", "a", 1, created=2.0), entry("b1", "b", 1, created=1.0, priority=5)],
            ["b1", "a1"],
        ),
        (
            {},
            [entry("a1", "a", 1, created=2.0), entry("b1", "b", 1, created=1.0)],
            ["b1", "a1"],
        ),
        (
            # Shares are recomputed after each admission: a's second entry
            # waits until b's head, now the cheaper one, went first.
            {"b": 2},
            [entry("x1", "a", 1, created=1.0), entry("x2", "a", 3, created=2.0), entry("y", "b", 1, created=3.0)],
            ["x1", "y", "x2"],
        ),
        (
            # A zero-weight borrower goes last whatever its priority.
            {},
            [entry("z1", "z", 1, priority=100), entry("a1", "a", 1, created=5.0)],
            ["a1", "z1"],
        ),
    ],
    ids=["lower-share-first", "equal-share-higher-priority-first", "equal-share-fifo",
         "recomputed-after-each-admission", "zero-weight-last"],
)
def test_fair_order(pre_usage: dict[str, int], entries: list[Entry], want: list[str]) -> None:
    cqs = lender_cohort("a", "b") + [cluster_queue("z", cohort="co", quota={"default": {"cpu": 0}}, weight=0)]
    snap = snapshot(
        cqs=cqs,
        admitted=[admitted(f"pre-{cq}", cq, {"cpu": v}) for cq, v in pre_usage.items()],
        fair=True,
    )
    assert drive(snap, entries) == want


def test_fair_order_prefers_entries_not_borrowing_what_they_request() -> None:
    # a asks only for spot, where it has quota; b borrows on-demand. a wins
    # although its share (from borrowing on-demand earlier) is higher.
    snap = snapshot(
        cqs=[cluster_queue("a", cohort="co", quota={"on-demand": {"cpu": 0}, "spot": {"cpu": 4}}),
             cluster_queue("b", cohort="co", quota={"on-demand": {"cpu": 0}, "spot": {"cpu": 0}}),
             cluster_queue("lender", cohort="co", quota={"on-demand": {"cpu": 10}})],
        admitted=[admitted("pre-a", "a", {"cpu": 5}, flavor="on-demand")],
        fair=True,
    )
    e_a = Entry(head=head(workload("a1", created=2.0), "a"))
    e_a.assignment = assignment({"cpu": ("spot", 1)})
    e_b = Entry(head=head(workload("b1", created=1.0), "b"))
    e_b.assignment = assignment({"cpu": ("on-demand", 1)})
    assert drive(snap, [e_b, e_a]) == ["a1", "b1"]


def test_fair_cycle_admits_the_lower_share_when_only_one_fits() -> None:
    def build(fair: bool) -> Snapshot:
        return snapshot(cqs=lender_cohort("a", "b", lend=3), admitted=[admitted("pre-a", "a", {"cpu": 2})], fair=fair)

    heads = [head(workload("a1", created=1.0), "a"), head(workload("b1", created=2.0), "b")]
    classic = outcome(run_cycle(heads, build(False), preemptor=Preemptor(), ordering=classical_order))
    fair = outcome(run_cycle(heads, build(True), preemptor=Preemptor(), ordering=fair_order))
    assert (classic["a1"][0], classic["b1"][0]) == (EntryStatus.ASSUMED, EntryStatus.SKIPPED)
    assert (fair["a1"][0], fair["b1"][0]) == (EntryStatus.SKIPPED, EntryStatus.ASSUMED)


def test_fair_cycle_preempts_the_queue_with_the_highest_share() -> None:
    snap = snapshot(
        cqs=[cluster_queue(n, cohort="all", quota={"default": {"cpu": 3}}, within="LowerPriority", reclaim="Any")
             for n in "abc"],
        admitted=[admitted(f"a{i}", "a", {"cpu": 1}) for i in (1, 2, 3)]
        + [admitted(f"b{i}", "b", {"cpu": 1}, admitted_at=float(i)) for i in (1, 2, 3, 4, 5)]
        + [admitted("c1", "c", {"cpu": 1})],
        fair=True,
    )
    # b5 was admitted last, so it is the cheapest victim in b.
    assert cycle(snap, [head(workload("a_incoming"), "a")]) == {
        "a_incoming": (EntryStatus.PREEMPTING, {("b5", IN_COHORT_FAIR_SHARING)})
    }
    cpu = FlavorResource(FlavorName("default"), "cpu")
    assert snap.view.usage(snap.node(ClusterQueueName("a")), cpu) == qty("cpu", 4)
