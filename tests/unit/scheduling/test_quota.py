"""Quota arithmetic over cohort trees (Kueue's resource_node semantics)."""

from __future__ import annotations

import random

import pytest

from sluicegate.controller.scheduling.quota import QuotaTree, UsageOverlay, UsageView, potential_available
from sluicegate.model import ClusterQueueName, CohortName, FlavorName, FlavorResource
from tests.builders import cluster_queue, cohort, flavor, group

CPU = FlavorResource(FlavorName("default"), "cpu")


def tree_of(queues, cohorts=(), usage=None) -> QuotaTree:
    t = QuotaTree()
    for co in cohorts:
        t.set_cohort(co.name, quotas=co.quotas(), parent=co.parent)
    for q in queues:
        t.set_cluster_queue(q.name, quotas=q.quotas(), cohort=q.cohort)
    for name, amount in (usage or {}).items():
        t.live.add_usage(t.cluster_queues[ClusterQueueName(name)], CPU, amount * 1000)
    return t


def cpu(nominal: str, borrow: str | None = None, lend: str | None = None):
    return group(flavor("default", cpu=(nominal, borrow, lend)))


CASES = [
    # (id, queues, cohorts, usage in cpus, queue asked, available cpus, potential cpus)
    ("lone queue", [cluster_queue("a", cpu("10"))], [], {}, "a", 10, 10),
    ("lone queue with usage", [cluster_queue("a", cpu("10"))], [], {"a": 4}, "a", 6, 10),
    ("cohort pools nominal quota", [cluster_queue("a", cpu("10"), cohort="c"), cluster_queue("b", cpu("10"), cohort="c")], [], {}, "a", 20, 20),
    ("borrowing limit caps what is taken from the cohort",
     [cluster_queue("a", cpu("10", "5"), cohort="c"), cluster_queue("b", cpu("10"), cohort="c")], [], {}, "a", 15, 15),
    ("lending limit caps what others may borrow",
     [cluster_queue("a", cpu("10"), cohort="c"), cluster_queue("b", cpu("10", None, "4"), cohort="c")], [], {}, "a", 14, 14),
    ("the lender keeps its guaranteed part and can still borrow",
     [cluster_queue("a", cpu("10"), cohort="c"), cluster_queue("b", cpu("10", None, "4"), cohort="c")], [], {}, "b", 20, 20),
    ("another queue's borrowing reduces what is left",
     [cluster_queue("a", cpu("10"), cohort="c"), cluster_queue("b", cpu("10"), cohort="c")], [], {"a": 12}, "b", 8, 20),
    ("guaranteed quota is not visible to the cohort",
     [cluster_queue("a", cpu("10"), cohort="c"), cluster_queue("b", cpu("10", None, "4"), cohort="c")], [], {"b": 3}, "a", 14, 14),
    ("usage within the guaranteed part does not reach the cohort",
     [cluster_queue("a", cpu("10"), cohort="c"), cluster_queue("b", cpu("10", None, "4"), cohort="c")], [], {"b": 6}, "a", 14, 14),
    ("usage past the guaranteed part is stored in the cohort",
     [cluster_queue("a", cpu("10"), cohort="c"), cluster_queue("b", cpu("10", None, "4"), cohort="c")], [], {"b": 8}, "a", 12, 14),
    ("cohort's own quota is shared with its queues",
     [cluster_queue("a", cpu("2"), cohort="c")], [cohort("c", cpu("6"))], {}, "a", 8, 8),
    ("hierarchical: capacity from a sibling subtree",
     [cluster_queue("a", cpu("5"), cohort="c1"), cluster_queue("b", cpu("5"), cohort="c1"), cluster_queue("x", cpu("10"), cohort="root")],
     [cohort("root"), cohort("c1", parent="root")], {}, "a", 20, 20),
    ("hierarchical: sibling subtree's usage",
     [cluster_queue("a", cpu("5"), cohort="c1"), cluster_queue("b", cpu("5"), cohort="c1"), cluster_queue("x", cpu("10"), cohort="root")],
     [cohort("root"), cohort("c1", parent="root")], {"x": 10}, "a", 10, 20),
    ("hierarchical: a lending limit on a sibling queue",
     [cluster_queue("a", cpu("5"), cohort="c1"), cluster_queue("b", cpu("5"), cohort="c1"), cluster_queue("x", cpu("10", None, "0"), cohort="root")],
     [cohort("root"), cohort("c1", parent="root")], {}, "a", 10, 10),
    ("over-admission gives negative availability",
     [cluster_queue("a", cpu("4"))], [], {"a": 6}, "a", -2, 4),
]


@pytest.mark.parametrize(("queues", "cohorts", "usage", "asked", "available", "potential"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_available_and_potential(queues, cohorts, usage, asked, available, potential) -> None:
    t = tree_of(queues, cohorts, usage)
    node = t.cluster_queues[ClusterQueueName(asked)]
    assert (t.live.available(node, CPU), potential_available(node, CPU)) == (available * 1000, potential * 1000)


HEIGHT_CASES = [
    ("fits in the queue's own quota", 3, (0, True)),
    ("needs the queue's cohort", 8, (1, True)),
    ("needs the root of the tree", 15, (2, False)),
]


@pytest.mark.parametrize(("cpus", "expected"), [c[1:] for c in HEIGHT_CASES], ids=[c[0] for c in HEIGHT_CASES])
def test_lowest_subtree_that_fits(cpus: int, expected: tuple[int, bool]) -> None:
    t = tree_of(
        [cluster_queue("a", cpu("5"), cohort="c1"), cluster_queue("b", cpu("5"), cohort="c1"), cluster_queue("x", cpu("10"), cohort="root")],
        [cohort("root"), cohort("c1", parent="root")],
    )
    assert t.live.lowest_subtree_that_fits(t.cluster_queues[ClusterQueueName("a")], CPU, cpus * 1000) == expected


def test_add_and_remove_usage_round_trip_through_the_tree() -> None:
    t = tree_of(
        [cluster_queue("a", cpu("5", None, "2"), cohort="c1"), cluster_queue("b", cpu("5"), cohort="c1"), cluster_queue("x", cpu("10"), cohort="root")],
        [cohort("root"), cohort("c1", parent="root")],
    )
    a = t.cluster_queues[ClusterQueueName("a")]
    c1, root = t.cohorts[CohortName("c1")], t.cohorts[CohortName("root")]
    t.live.add_usage(a, CPU, 9000)
    # a keeps 3 locally (5 - lendingLimit 2); 6 goes to c1; c1 has no local quota, so 6 reaches root.
    assert (a.usage[CPU], c1.usage[CPU], root.usage[CPU]) == (9000, 6000, 6000)
    t.live.remove_usage(a, CPU, 9000)
    assert (a.usage, c1.usage, root.usage) == ({}, {}, {})


def test_overlay_never_writes_the_live_tree() -> None:
    t = tree_of([cluster_queue("a", cpu("10"), cohort="c"), cluster_queue("b", cpu("10"), cohort="c")])
    a, b = t.cluster_queues[ClusterQueueName("a")], t.cluster_queues[ClusterQueueName("b")]
    overlay = UsageOverlay()
    overlay.add_usage(a, CPU, 15000)
    assert overlay.available(b, CPU) == 5000
    assert t.live.available(b, CPU) == 20000
    with overlay.simulate_removal([(a, {CPU: 15000})]):
        assert overlay.available(b, CPU) == 20000
    assert overlay.available(b, CPU) == 5000


def test_structural_change_recomputes_subtree_quota_and_keeps_usage() -> None:
    t = tree_of([cluster_queue("a", cpu("10"), cohort="c"), cluster_queue("b", cpu("10"), cohort="c")], usage={"a": 12})
    t.set_cluster_queue(ClusterQueueName("b"), quotas=cluster_queue("b", cpu("20")).quotas(), cohort=CohortName("c"))
    a = t.cluster_queues[ClusterQueueName("a")]
    assert t.live.available(a, CPU) == 18000
    t.remove_cluster_queue(ClusterQueueName("b"))
    assert t.live.available(a, CPU) == -2000


class _GenericLive(UsageView):
    """LiveUsage's reads and writes under UsageView's own add_usage and available (the reference)."""

    __slots__ = ()

    def usage(self, node, fr):  # type: ignore[no-untyped-def]
        return node.usage.get(fr, 0)

    def _add(self, node, fr, delta):  # type: ignore[no-untyped-def]
        node.version += 1
        v = node.usage.get(fr, 0) + delta
        if v:
            node.usage[fr] = v
        else:
            node.usage.pop(fr, None)


def _reference_available(view: UsageView, node, fr) -> int:  # type: ignore[no-untyped-def]
    """UsageView.available as it was: recursive, through local_available and quota_for."""
    if node.parent is None:
        return int(node.subtree_quota.get(fr, 0) - view.usage(node, fr))
    parent_available = _reference_available(view, node.parent, fr)
    limit = node.quota_for(fr).borrowing_limit
    if limit is not None:
        local = node.local_quota(fr)
        stored_in_parent = node.subtree_quota.get(fr, 0) - local
        used_in_parent = max(0, view.usage(node, fr) - local)
        parent_available = min(stored_in_parent - used_in_parent + limit, parent_available)
    return int(view.local_available(node, fr) + parent_available)


def _random_tree(rng: random.Random) -> QuotaTree:
    def quota() -> tuple[str, str | None, str | None]:
        return (str(rng.randint(0, 8)), rng.choice((None, "0", "3")), rng.choice((None, "0", "2")))

    cohorts = [cohort("root", cpu(*quota())), cohort("mid", cpu(*quota()), parent="root")]
    queues = [cluster_queue(f"q{i}", cpu(*quota()), cohort=rng.choice(("root", "mid"))) for i in range(4)]
    return tree_of(queues, cohorts)


@pytest.mark.parametrize("seed", range(80))
def test_the_inlined_usage_walks_match_the_generic_ones(seed: int) -> None:
    """LiveUsage's and UsageOverlay's own add_usage, LiveUsage's remove_usage, both views' available, and
    UsageOverlay's fits and lowest_subtree_that_fits, do what UsageView's generic code does."""
    rng = random.Random(seed)
    fast, slow = _random_tree(random.Random(seed)), _random_tree(random.Random(seed))
    reference = _GenericLive()
    overlay, overlay_ref = UsageOverlay(), UsageOverlay()
    for _ in range(30):
        name = ClusterQueueName(f"q{rng.randint(0, 3)}")
        amount = rng.randint(0, 5) * 1000
        if rng.random() < 0.6:
            fast.live.add_usage(fast.cluster_queues[name], CPU, amount)
            reference.add_usage(slow.cluster_queues[name], CPU, amount)
        else:
            fast.live.remove_usage(fast.cluster_queues[name], CPU, amount)
            reference.remove_usage(slow.cluster_queues[name], CPU, amount)
        other = ClusterQueueName(f"q{rng.randint(0, 3)}")
        if rng.random() < 0.7:
            overlay.add_usage(fast.cluster_queues[other], CPU, amount)
            UsageView.add_usage(overlay_ref, slow.cluster_queues[other], CPU, amount)
        else:
            overlay.remove_usage(fast.cluster_queues[other], CPU, amount)
            UsageView.remove_usage(overlay_ref, slow.cluster_queues[other], CPU, amount)
        for n in ("q0", "q1", "q2", "q3"):
            f, s = fast.cluster_queues[ClusterQueueName(n)], slow.cluster_queues[ClusterQueueName(n)]
            assert (f.usage, f.version) == (s.usage, s.version)
            assert fast.live.available(f, CPU) == _reference_available(reference, s, CPU)
            assert overlay.available(f, CPU) == _reference_available(overlay_ref, s, CPU)
            assert overlay.usage(f, CPU) == overlay_ref.usage(s, CPU)
            val = rng.randint(0, 9) * 1000
            assert overlay.lowest_subtree_that_fits(f, CPU, val) == \
                UsageView.lowest_subtree_that_fits(overlay_ref, s, CPU, val)
            want = {CPU: val}
            assert overlay.fits(f, want) == (_reference_available(overlay_ref, s, CPU) >= want[CPU] or not want[CPU])
        for n in ("root", "mid"):
            f, s = fast.cohorts[CohortName(n)], slow.cohorts[CohortName(n)]
            assert (f.usage, f.version) == (s.usage, s.version)
            assert overlay.usage(f, CPU) == overlay_ref.usage(s, CPU)
            assert fast.live.available(f, CPU) == _reference_available(reference, s, CPU)
            assert overlay.available(f, CPU) == _reference_available(overlay_ref, s, CPU)


def _uncached_potential(node, fr) -> int:  # type: ignore[no-untyped-def]
    if node.parent is None:
        return int(node.subtree_quota.get(fr, 0))
    available = node.local_quota(fr) + _uncached_potential(node.parent, fr)
    limit = node.quota_for(fr).borrowing_limit
    if limit is not None:
        available = min(node.subtree_quota.get(fr, 0) + limit, available)
    return int(available)


@pytest.mark.parametrize("seed", range(30))
def test_potential_available_follows_every_change_of_the_tree(seed: int) -> None:
    """Kept per node, it is what the walk to the root gives after queues and cohorts change, move and go."""
    rng = random.Random(seed)
    t = _random_tree(rng)

    def quota() -> tuple[str, str | None, str | None]:
        return (str(rng.randint(0, 8)), rng.choice((None, "0", "3")), rng.choice((None, "0", "2")))

    for _ in range(12):
        for node in (*t.cluster_queues.values(), *t.cohorts.values()):
            assert potential_available(node, CPU) == _uncached_potential(node, CPU)
        change = rng.randrange(4)
        if change == 0:
            q = cluster_queue(f"q{rng.randint(0, 4)}", cpu(*quota()), cohort=rng.choice(("root", "mid", "other", None)))
            t.set_cluster_queue(q.name, quotas=q.quotas(), cohort=q.cohort)
        elif change == 1:
            co = cohort(rng.choice(("root", "mid", "other")), cpu(*quota()), parent=rng.choice((None, "root")))
            if co.name != co.parent:
                t.set_cohort(co.name, quotas=co.quotas(), parent=co.parent)
        elif change == 2:
            t.remove_cluster_queue(ClusterQueueName(f"q{rng.randint(0, 4)}"))
        else:
            t.remove_cohort(CohortName(rng.choice(("root", "mid", "other"))))
