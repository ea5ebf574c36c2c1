"""Flavor assignment: order, fungibility, resource groups, pod sets, messages."""

from __future__ import annotations

import pytest

from sluicegate.controller.scheduling.flavors import FlavorAssigner, Mode
from sluicegate.controller.scheduling.preemption import Preemptor
from sluicegate.model import FlavorName, ResourceFlavor
from tests.builders import cluster_queue, flavor, group, pod_set, with_admission, workload

from .caches import build_cache


def assign(cache, queue: str, workload, counts=None):
    snap = cache.snapshot(0.0)
    a = FlavorAssigner(
        workload=workload,
        spec=cache.cluster_queues[queue],
        node=snap.node(queue),
        view=snap.view,
        flavors=cache.flavors,
        oracle=Preemptor().oracle(snap),
    )
    return a.assign(counts)


TWO_FLAVORS = ("on-demand", "spot")


def borrowing_pair(when_can_borrow: str) -> object:
    return build_cache(
        flavors=TWO_FLAVORS,
        queues=[
            cluster_queue("a", group(flavor("on-demand", cpu="2"), flavor("spot", cpu="10")), cohort="c", when_can_borrow=when_can_borrow),
            cluster_queue("b", group(flavor("on-demand", cpu="10"), flavor("spot", cpu="0")), cohort="c"),
        ],
    )


CASES = [
    (
        "first flavor fits",
        lambda: build_cache(flavors=TWO_FLAVORS, queues=[cluster_queue("a", group(flavor("on-demand", cpu="4"), flavor("spot", cpu="10")))]),
        workload("w", pod_set(cpu="3")),
        Mode.FIT, {"main": {"cpu": "on-demand"}}, 0,
    ),
    (
        "first flavor too small for the request falls through to the next",
        lambda: build_cache(flavors=TWO_FLAVORS, queues=[cluster_queue("a", group(flavor("on-demand", cpu="2"), flavor("spot", cpu="10")))]),
        workload("w", pod_set(cpu="3")),
        Mode.FIT, {"main": {"cpu": "spot"}}, 0,
    ),
    (
        "whenCanBorrow MayStopSearch borrows in the first flavor",
        lambda: borrowing_pair("MayStopSearch"),
        workload("w", pod_set(cpu="4")),
        Mode.FIT, {"main": {"cpu": "on-demand"}}, 1,
    ),
    (
        "whenCanBorrow TryNextFlavor prefers a flavor that needs no borrowing",
        lambda: borrowing_pair("TryNextFlavor"),
        workload("w", pod_set(cpu="4")),
        Mode.FIT, {"main": {"cpu": "spot"}}, 0,
    ),
    (
        "whenCanBorrow TryNextFlavor still borrows when no flavor avoids it",
        lambda: borrowing_pair("TryNextFlavor"),
        workload("w", pod_set(cpu="11")),
        Mode.FIT, {"main": {"cpu": "on-demand"}}, 1,
    ),
    (
        "all resources of a group come from one flavor",
        lambda: build_cache(flavors=TWO_FLAVORS, queues=[cluster_queue("a", group(
            flavor("on-demand", cpu="8", memory="1Gi"), flavor("spot", cpu="8", memory="8Gi")))]),
        workload("w", pod_set(cpu="2", memory="2Gi")),
        Mode.FIT, {"main": {"cpu": "spot", "memory": "spot"}}, 0,
    ),
    (
        "resource groups are assigned independently",
        lambda: build_cache(flavors=("cpu-a", "gpu-x", "gpu-y"), queues=[cluster_queue("a",
            group(flavor("cpu-a", cpu="8")),
            group(flavor("gpu-x", **{"example.com/gpu": "1"}), flavor("gpu-y", **{"example.com/gpu": "4"})))]),
        workload("w", pod_set(cpu="2", **{"example.com/gpu": "2"})),
        Mode.FIT, {"main": {"cpu": "cpu-a", "example.com/gpu": "gpu-y"}}, 0,
    ),
    (
        "later pod sets see the quota earlier pod sets were assigned",
        lambda: build_cache(flavors=TWO_FLAVORS, queues=[cluster_queue("a", group(flavor("on-demand", cpu="5"), flavor("spot", cpu="10")))]),
        workload("w", pod_set("driver", cpu="3"), pod_set("workers", cpu="3")),
        Mode.FIT, {"driver": {"cpu": "on-demand"}, "workers": {"cpu": "spot"}}, 0,
    ),
    (
        "count multiplies the per-pod request",
        lambda: build_cache(flavors=TWO_FLAVORS, queues=[cluster_queue("a", group(flavor("on-demand", cpu="5"), flavor("spot", cpu="10")))]),
        workload("w", pod_set(count=4, cpu="2")),
        Mode.FIT, {"main": {"cpu": "spot"}}, 0,
    ),
    (
        "a flavor whose node labels contradict the node selector is skipped",
        lambda: build_cache(
            flavors=(ResourceFlavor(FlavorName("arm"), {"kubernetes.io/arch": "arm64"}),
                     ResourceFlavor(FlavorName("x86"), {"kubernetes.io/arch": "amd64"})),
            queues=[cluster_queue("a", group(flavor("arm", cpu="10"), flavor("x86", cpu="10")))]),
        workload("w", pod_set(cpu="1", node_selector={"kubernetes.io/arch": "amd64", "zone": "z1"})),
        Mode.FIT, {"main": {"cpu": "x86"}}, 0,
    ),
    (
        "the pods resource counts pods when the queue covers it",
        lambda: build_cache(queues=[cluster_queue("a", group(flavor("default", cpu="10", pods="3")))]),
        workload("w", pod_set(count=4, cpu="1")),
        Mode.NO_FIT, {}, 0,
    ),
]


@pytest.mark.parametrize(("make", "workload", "mode", "flavors", "borrowing"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_assignment(make, workload, mode, flavors, borrowing) -> None:
    a = assign(make(), "a", workload)
    assert (a.mode(), a.flavors_by_pod_set() if mode is Mode.FIT else {}, a.borrowing) == (mode, flavors, borrowing)


MESSAGES = [
    (
        "request above everything the queue could ever get",
        lambda: build_cache(queues=[cluster_queue("a", group(flavor("default", cpu="4")))]),
        workload("w", pod_set(cpu="6")),
        "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor default, previously "
        "considered podsets requests (0) + current podset request (6) > maximum capacity (4)",
    ),
    (
        "quota in use says how much more is needed",
        lambda: build_cache(
            queues=[cluster_queue("a", group(flavor("default", cpu="4")))],
            admitted_workloads=[with_admission(workload("big", pod_set(cpu="3")), "a", {"cpu": "default"})],
        ),
        workload("w", pod_set(cpu="2")),
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 1 more needed",
    ),
    (
        "a resource the queue does not cover",
        lambda: build_cache(queues=[cluster_queue("a", group(flavor("default", cpu="4")))]),
        workload("w", pod_set(cpu="1", memory="1Gi")),
        "couldn't assign flavors to pod set main: resource memory unavailable in ClusterQueue",
    ),
    (
        "a missing ResourceFlavor",
        lambda: build_cache(flavors=(), queues=[cluster_queue("a", group(flavor("default", cpu="4")))]),
        workload("w", pod_set(cpu="1")),
        "couldn't assign flavors to pod set main: flavor default not found",
    ),
    (
        "memory shown in binary units",
        lambda: build_cache(queues=[cluster_queue("a", group(flavor("default", cpu="4", memory="1Gi")))]),
        workload("w", pod_set(cpu="1", memory="2Gi")),
        "couldn't assign flavors to pod set main: insufficient quota for memory in flavor default, previously "
        "considered podsets requests (0) + current podset request (2Gi) > maximum capacity (1Gi)",
    ),
]


@pytest.mark.parametrize(("make", "workload", "message"), [c[1:] for c in MESSAGES], ids=[c[0] for c in MESSAGES])
def test_pending_message_says_why(make, workload, message) -> None:
    a = assign(make(), "a", workload)
    assert a.mode() is not Mode.FIT
    assert a.message() == message


def test_partial_counts_are_respected() -> None:
    cache = build_cache(queues=[cluster_queue("a", group(flavor("default", cpu="5")))])
    a = assign(cache, "a", workload("w", pod_set(count=8, min_count=2, cpu="1")), counts=[5])
    assert (a.mode(), a.pod_sets[0].count, a.pod_sets[0].requests) == (Mode.FIT, 5, {"cpu": 5000})


def _with_reclaimable(wl, **counts: int):
    from dataclasses import replace

    return replace(wl, status=replace(wl.status, reclaimable_pods=counts))


def test_a_pending_workload_asks_quota_only_for_pods_not_reclaimable() -> None:
    # Kueue's flavorassigner_test "with reclaimable pods; reclaimablePods on":
    # 5 pods, 2 reclaimable, a queue with room for 3 pods: fits with count 3.
    cache = build_cache(queues=[cluster_queue("a", group(flavor("default", pods="3", cpu="10")))])
    wl = _with_reclaimable(workload("w", pod_set(count=5, cpu="1")), main=2)
    a = assign(cache, "a", wl)
    assert (a.mode(), a.pod_sets[0].count, a.pod_sets[0].requests) == (Mode.FIT, 3, {"cpu": 3000, "pods": 3})
    # Without the reclaimable pods, 5 pods do not fit 3.
    assert assign(cache, "a", workload("w", pod_set(count=5, cpu="1"))).mode() is not Mode.FIT


def test_a_partial_count_never_asks_for_more_than_the_pods_still_to_run() -> None:
    cache = build_cache(queues=[cluster_queue("a", group(flavor("default", cpu="10")))])
    wl = _with_reclaimable(workload("w", pod_set(count=8, min_count=2, cpu="1")), main=5)
    a = assign(cache, "a", wl, counts=[6])
    assert (a.mode(), a.pod_sets[0].count) == (Mode.FIT, 3)
