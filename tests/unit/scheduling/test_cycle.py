"""The scheduling cycle: ordering of heads and the in-cycle fit check."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sluicegate.controller.scheduling.cycle import (
    Entry,
    EntryStatus,
    Head,
    RequeueReason,
    classical_order_key,
    run_cycle,
)
from sluicegate.controller.scheduling.flavors import Assignment
from sluicegate.controller.scheduling.preemption import Preemptor
from sluicegate.controller.scheduling.snapshot import queue_order_timestamp
from sluicegate.model import ClusterQueueName, LabelSelector, Namespace, StopPolicy
from sluicegate.model.workloads import Condition, WorkloadStatus
from tests.builders import cluster_queue, flavor, group, pod_set, workload

from .caches import build_cache


def heads(*pairs):
    return [Head(workload=w, cluster_queue=ClusterQueueName(q)) for w, q in pairs]


def outcome(entries):
    return {e.key: (e.status.value, e.requeue_reason.value, e.message) for e in entries}


def pair_cache(a_nominal: str = "5", b_nominal: str = "5"):
    return build_cache(queues=[
        cluster_queue("a", group(flavor("default", cpu=a_nominal)), cohort="c"),
        cluster_queue("b", group(flavor("default", cpu=b_nominal)), cohort="c"),
    ])


def run(cache, hs):
    return outcome(run_cycle(hs, cache.snapshot(0.0), preemptor=Preemptor()))


ADMITTED = ("Assumed", "", "")
NO_LONGER_FITS = ("Skipped", "FailedAfterNomination", "Workload no longer fits after processing another workload")

CASES = [
    (
        "a head within nominal quota goes before a borrowing head",
        pair_cache(),
        [(workload("borrower", pod_set(cpu="6"), created=1), "a"), (workload("local", pod_set(cpu="5"), created=2), "b")],
        {"default/borrower": NO_LONGER_FITS, "default/local": ADMITTED},
    ),
    (
        "among non-borrowing heads, higher priority goes first",
        pair_cache("5", "5"),
        [(workload("low", pod_set(cpu="5"), priority=1, created=1), "a"), (workload("high", pod_set(cpu="5"), priority=9, created=2), "b")],
        {"default/low": ADMITTED, "default/high": ADMITTED},
    ),
    (
        "among borrowing heads, higher priority wins the cohort's spare capacity",
        pair_cache("2", "2"),
        [(workload("low", pod_set(cpu="3"), priority=1, created=1), "a"), (workload("high", pod_set(cpu="3"), priority=9, created=2), "b")],
        {"default/low": NO_LONGER_FITS, "default/high": ADMITTED},
    ),
    (
        "equal priority is first come, first served",
        pair_cache("2", "2"),
        [(workload("second", pod_set(cpu="3"), created=2), "a"), (workload("first", pod_set(cpu="3"), created=1), "b")],
        {"default/second": NO_LONGER_FITS, "default/first": ADMITTED},
    ),
    (
        "a head that cannot fit at all is NoFit and parks",
        pair_cache("2", "2"),
        [(workload("huge", pod_set(cpu="5")), "a")],
        {"default/huge": ("NotNominated", "NoFit",
                          "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor default, "
                          "previously considered podsets requests (0) + current podset request (5) > maximum capacity (4)")},
    ),
]


@pytest.mark.parametrize(("cache", "hs", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_cycle(cache, hs, expected) -> None:
    assert run(cache, heads(*hs)) == expected


def test_namespace_selector_keeps_other_tenants_out() -> None:
    spec = replace(cluster_queue("a", group(flavor("default", cpu="4"))), namespace_selector=LabelSelector({"team": "ml"}))
    cache = build_cache(queues=[spec])
    cache.namespaces["research"] = Namespace("research", {"team": "ml"})
    got = run(cache, heads((workload("mine", ns="research"), "a"), (workload("theirs", ns="sales"), "a")))
    assert got["research/mine"] == ADMITTED
    assert got["sales/theirs"][1] == RequeueReason.NAMESPACE_MISMATCH.value


def test_nil_namespace_selector_matches_nothing() -> None:
    cache = build_cache(queues=[replace(cluster_queue("a", group(flavor("default", cpu="4"))), namespace_selector=None)])
    got = run(cache, heads((workload("w"), "a")))
    assert got["default/w"][0] == EntryStatus.NOT_NOMINATED.value


def test_stopped_queue_admits_nothing() -> None:
    cache = build_cache(queues=[replace(cluster_queue("a", group(flavor("default", cpu="4"))), stop_policy=StopPolicy.HOLD)])
    got = run(cache, heads((workload("w"), "a")))
    assert got["default/w"] == ("NotNominated", "", "ClusterQueue a is inactive")


def test_cycle_never_writes_the_live_tree() -> None:
    cache = pair_cache()
    run(cache, heads((workload("x", pod_set(cpu="5")), "a"), (workload("y", pod_set(cpu="5")), "b")))
    assert all(not n.usage for n in cache.tree.cluster_queues.values())


@pytest.mark.parametrize("conditions", [
    (),
    (Condition("QuotaReserved", "False", "Pending", "waiting", 5.0),),
    (Condition("QuotaReserved", "True", "QuotaReserved", "reserved", 5.0),),
    (Condition("Evicted", "True", "PodsReadyTimeout", "timed out", 7.0),),
])
def test_the_classical_order_key_is_reservation_borrowing_priority_time_uid(conditions) -> None:
    """The key made directly for a workload without conditions is the one the general formula gives."""
    cache = build_cache(queues=[cluster_queue("a", group(flavor("default", cpu="4")))])
    snap = cache.snapshot(0.0)
    wl = replace(workload("w", priority=2, created=3.0, uid="u"), status=WorkloadStatus(conditions=conditions))
    entry = Entry(head=Head(workload=wl, cluster_queue=ClusterQueueName("a")), assignment=Assignment(borrowing=1))
    want = (not wl.has_quota_reservation, 1, -2,
            queue_order_timestamp(wl, snap.config.wait_for_pods_ready.requeuing_timestamp), "u", wl.key)
    assert classical_order_key(entry, snap) == want
