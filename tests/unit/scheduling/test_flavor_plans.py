"""The planned flavor search (``flavors._Plan``) gives exactly the assignments of the unplanned one.

What a queue's spec, its flavors and a workload's pod sets say about flavor
assignment is worked out once per queue and shape and kept; only the quota
checks run per head.  Random queues, cohorts, flavors (labels, taints,
topologies), usage and workloads (several pod sets and resource groups,
partial counts, reclaimable pods, a flavor search resumed from ``last_tried``)
are assigned both ways and must agree in every field, the messages included.
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from sluicegate.controller.scheduling import flavors as flavors_module
from sluicegate.controller.scheduling.flavors import Assignment, FlavorAssigner, Mode
from sluicegate.controller.scheduling.preemption import Preemptor
from sluicegate.model import FlavorName, ResourceFlavor
from sluicegate.model.queues import ResourceGroup
from sluicegate.model.taints import Taint, Toleration
from sluicegate.model.workloads import PodSet
from tests.builders import cluster_queue, flavor, with_admission, workload

from .caches import build_cache
from .reference_flavors import ReferenceFlavorAssigner

FLAVOR_NAMES = ("on-demand", "spot", "gpu-a", "gpu-b")
FUNGIBILITY = ("MayStopSearch", "TryNextFlavor")
POLICIES = ({}, {"reclaim": "Any"}, {"within": "LowerPriority"}, {"reclaim": "LowerPriority", "borrow_within": "LowerPriority"})


def _resource_flavor(rng: random.Random, name: str) -> ResourceFlavor:
    labels = {"zone": rng.choice(("a", "b"))} if rng.random() < 0.4 else {}
    taints = (Taint("dedicated", "NoSchedule", rng.choice(("x", "y"))),) if rng.random() < 0.3 else ()
    tolerations = (Toleration("dedicated", "Equal", "x", "NoSchedule"),) if taints and rng.random() < 0.3 else ()
    topology = "rack" if rng.random() < 0.15 else None
    return ResourceFlavor(FlavorName(name), labels, taints, tolerations, topology)


def _quota(rng: random.Random) -> str | tuple[str, str | None, str | None]:
    nominal = str(rng.randint(0, 6))
    if rng.random() < 0.3:
        return (nominal, rng.choice((None, "0", "2")), rng.choice((None, "0", "1")))
    return nominal


def _groups(rng: random.Random) -> list[ResourceGroup]:
    names = list(FLAVOR_NAMES)
    rng.shuffle(names)
    cpu_flavors = names[: rng.randint(1, 3)]
    groups = [ResourceGroup(("cpu", "memory") if rng.random() < 0.5 else ("cpu",),
                            tuple(flavor(f, cpu=_quota(rng), memory=_quota(rng)) for f in cpu_flavors))]
    groups[0] = replace(groups[0], flavors=tuple(
        replace(fq, resources={r: q for r, q in fq.resources.items() if r in groups[0].covered_resources})
        for fq in groups[0].flavors))
    rest = [f for f in names if f not in cpu_flavors]
    if rest and rng.random() < 0.5:
        groups.append(ResourceGroup(("example.com/gpu",),
                                    tuple(flavor(f, **{"example.com/gpu": _quota(rng)}) for f in rest[:2])))
    if rng.random() < 0.3:
        groups.append(ResourceGroup(("pods",), (flavor(cpu_flavors[0], pods=_quota(rng)),)))
    return groups


def _pod_set(rng: random.Random, name: str) -> PodSet:
    requests: dict[str, int] = {"cpu": rng.choice((0, 500, 1000, 2000))}
    if rng.random() < 0.5:
        requests["memory"] = rng.choice((0, 1, 2))
    if rng.random() < 0.3:
        requests["example.com/gpu"] = rng.choice((0, 1))
    if rng.random() < 0.1:
        requests["example.com/unknown"] = rng.choice((0, 1))
    count = rng.randint(1, 4)
    return PodSet(
        name=name, count=count, min_count=rng.choice((None, 1)) if count > 1 else None, requests=requests,
        node_selector={"zone": rng.choice(("a", "b"))} if rng.random() < 0.3 else {},
        tolerations=(Toleration("dedicated", "Equal", "y", "NoSchedule"),) if rng.random() < 0.3 else (),
    )


def _fields(a: Assignment) -> object:
    return (a.borrowing, dict(a.usage), a.mode(), a.message(), a.last_tried(),
            [(ps.name, ps.count, ps.requests, ps.flavors, sorted(ps.reasons), ps.error) for ps in a.pod_sets])


@pytest.mark.parametrize("seed", range(60))
def test_the_planned_search_assigns_as_the_unplanned_one(seed: int) -> None:
    rng = random.Random(seed)
    flavors = [_resource_flavor(rng, n) for n in FLAVOR_NAMES if rng.random() < 0.9]
    queues = [
        cluster_queue(f"q{i}", *_groups(rng), cohort="c" if rng.random() < 0.8 else None,
                      when_can_borrow=rng.choice(FUNGIBILITY), when_can_preempt=rng.choice(FUNGIBILITY),
                      preference=rng.choice(("BorrowingOverPreemption", "PreemptionOverBorrowing")),
                      **rng.choice(POLICIES))  # type: ignore[arg-type]
        for i in range(3)
    ]
    admitted = []
    for i in range(rng.randint(0, 4)):
        q = rng.choice(queues)
        group = q.resource_groups[0]
        fq = rng.choice(group.flavors)
        wl = workload(f"running-{i}", PodSet(name="main", count=1, requests={"cpu": rng.choice((1000, 3000))}),
                      priority=rng.randint(-1, 1))
        admitted.append(with_admission(wl, q.name, {"cpu": fq.name}))
    cache = build_cache(flavors=flavors, queues=queues, admitted_workloads=admitted)
    snap = cache.snapshot(0.0)
    oracle = Preemptor().oracle(snap)
    for i in range(25):
        q = rng.choice(queues)
        pod_sets = tuple(_pod_set(rng, f"ps{j}") for j in range(rng.randint(1, 3)))
        wl = workload(f"w{i}", *pod_sets, priority=rng.randint(-1, 2))
        if rng.random() < 0.2:
            wl = replace(wl, status=replace(wl.status, reclaimable_pods={pod_sets[0].name: rng.randint(0, 2)}))
        last_tried = None
        if rng.random() < 0.3:
            last_tried = [{r: rng.choice((-1, 0, 1)) for r in ("cpu", "example.com/gpu", "pods")} for _ in pod_sets]
        counts = [rng.randint(0, ps.count) for ps in pod_sets] if rng.random() < 0.3 else None
        kwargs = {"workload": wl, "spec": cache.cluster_queues[q.name], "node": snap.node(q.name), "view": snap.view,
                  "flavors": cache.flavors, "oracle": oracle, "fair_sharing": rng.random() < 0.2,
                  "last_tried": last_tried}
        planned = FlavorAssigner(**kwargs).assign(counts)  # type: ignore[arg-type]
        reference = ReferenceFlavorAssigner(**kwargs).assign(counts)  # type: ignore[arg-type]
        assert _fields(planned) == _fields(reference)


def test_a_changed_flavor_is_planned_afresh() -> None:
    """A flavor object replaced in the cache (new taints) is seen by the next assignment."""
    cache = build_cache(flavors=["default"], queues=[cluster_queue("a", ResourceGroup(("cpu",), (flavor("default", cpu="4"),)))])
    wl = workload("w", PodSet(name="main", count=1, requests={"cpu": 1000}))

    def assign() -> Assignment:
        snap = cache.snapshot(0.0)
        return FlavorAssigner(workload=wl, spec=cache.cluster_queues["a"], node=snap.node("a"),  # type: ignore[index]
                              view=snap.view, flavors=cache.flavors, oracle=Preemptor().oracle(snap)).assign()

    assert assign().message() == ""
    cache.flavors[FlavorName("default")] = ResourceFlavor(FlavorName("default"), node_taints=(Taint("k", "NoSchedule"),))
    assert "untolerated taint" in assign().message()
    assert len(flavors_module._PLANS) >= 1


@pytest.mark.parametrize("seed", range(30))
def test_assignments_kept_for_a_shape_are_the_ones_a_search_gives(seed: int) -> None:
    """Workloads of one shape (one pod-sets value) assigned again and again while usage moves (some are
    admitted, some released): each answer, kept or new, is the unplanned search's."""
    rng = random.Random(seed)
    flavors = [_resource_flavor(rng, n) for n in FLAVOR_NAMES]
    queues = [
        cluster_queue(f"q{i}", *_groups(rng), cohort="c",
                      when_can_borrow=rng.choice(FUNGIBILITY), when_can_preempt=rng.choice(FUNGIBILITY),
                      **rng.choice(POLICIES))  # type: ignore[arg-type]
        for i in range(2)
    ]
    cache = build_cache(flavors=flavors, queues=queues)
    shapes = [(_pod_set(rng, "main"),) for _ in range(3)]
    held: list[object] = []
    for i in range(40):
        q = rng.choice(queues)
        wl = workload(f"w{i}", priority=0)
        wl = replace(wl, pod_sets=rng.choice(shapes))
        last_tried = [{"cpu": rng.choice((-1, 0))}] if rng.random() < 0.2 else None
        snap = cache.snapshot(0.0)
        kwargs = {"workload": wl, "spec": cache.cluster_queues[q.name], "node": snap.node(q.name), "view": snap.view,
                  "flavors": cache.flavors, "oracle": Preemptor().oracle(snap), "last_tried": last_tried}
        planned = FlavorAssigner(**kwargs).assign()  # type: ignore[arg-type]
        reference = ReferenceFlavorAssigner(**kwargs).assign()  # type: ignore[arg-type]
        assert _fields(planned) == _fields(reference)
        chosen = {r: str(fc.flavor) for r, fc in planned.pod_sets[0].flavors.items()}
        if planned.mode() is Mode.FIT and set(wl.pod_sets[0].requests) <= set(chosen) and rng.random() < 0.7:
            admitted = with_admission(wl, q.name, chosen)
            cache.workloads[admitted.key] = admitted
            cache.add_admitted(admitted, 0.0)
            held.append(admitted.key)
        elif held and rng.random() < 0.3:
            cache.release(held.pop(rng.randrange(len(held))))  # type: ignore[arg-type]


def test_a_kept_assignment_is_shared() -> None:
    cache = build_cache(flavors=["default"], queues=[cluster_queue("a", ResourceGroup(("cpu",), (flavor("default", cpu="4"),)))])
    pod_sets = (PodSet(name="main", count=1, requests={"cpu": 1000}),)
    snap = cache.snapshot(0.0)

    def assign(name: str) -> Assignment:
        return FlavorAssigner(workload=replace(workload(name), pod_sets=pod_sets), spec=cache.cluster_queues["a"],  # type: ignore[index]
                              node=snap.node("a"), view=snap.view, flavors=cache.flavors,  # type: ignore[arg-type]
                              oracle=Preemptor().oracle(snap)).assign()

    first, second = assign("one"), assign("two")
    assert first is second and first.mode() is Mode.FIT
