"""The best-fit index (placement._BestFit) chooses exactly the node the scan of every node chooses.

Two placers see the same cycles: one finds each pod's node through the
index, the other looks at every eligible node (the index is off below
BEST_FIT_INDEX_MIN_NODES).  Over random clusters -- PreferNoSchedule
taints (several ranks), nodes without cpu or memory or with a pod limit,
overcommitted nodes, gangs of several pod sets, pods without a cpu request,
node labels -- and random histories between cycles (pods bound and
finished, nodes changed, added, removed), every placement and every
failure message must be the same.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

import pytest

from sluicegate.controller.scheduling import placement
from sluicegate.controller.scheduling.placement import CyclePlacer, NodeView, PlacementCache, PodPlacement
from sluicegate.model import FlavorName, ResourceFlavor
from sluicegate.model.taints import NO_SCHEDULE, PREFER_NO_SCHEDULE, Taint
from sluicegate.model.workloads import PodSet

FLAVORS = {
    FlavorName("default"): ResourceFlavor(FlavorName("default")),
    FlavorName("big"): ResourceFlavor(FlavorName("big"), {"size": "big"}),
}
GiB = 1 << 30


def random_node(rng: random.Random, name: str) -> NodeView:
    alloc: dict[str, int] = {}
    if rng.random() < 0.95:
        alloc["cpu"] = rng.choice([2, 4, 8, 16]) * 1000
    if rng.random() < 0.9:
        alloc["memory"] = rng.choice([4, 8, 16]) * GiB
    if rng.random() < 0.3:
        alloc["pods"] = rng.choice([1, 2, 3])
    if rng.random() < 0.2:
        alloc["example.com/gpu"] = rng.choice([1, 2])
    taints = []
    for i in range(rng.choice([0, 0, 0, 1, 2])):
        taints.append(Taint(f"soft-{i}", PREFER_NO_SCHEDULE))
    if rng.random() < 0.05:
        taints.append(Taint("hard", NO_SCHEDULE))
    return NodeView(name, {"size": "big"} if rng.random() < 0.3 else {}, alloc, random_requested(rng, alloc),
                    ready=rng.random() < 0.97, taints=tuple(taints))


def random_requested(rng: random.Random, alloc: Mapping[str, int]) -> dict[str, int]:
    out = {}
    for res, qty in alloc.items():
        if rng.random() < 0.6:
            # Sometimes more than allocatable: a node whose static pods overcommit it.
            out[res] = rng.randrange(0, qty + 2 if res == "pods" else qty * 11 // 10 + 1)
    return out


def random_pod_set(rng: random.Random, name: str) -> tuple[PodSet, int, dict[str, FlavorName]]:
    requests: dict[str, int] = {}
    if rng.random() < 0.9:
        requests["cpu"] = rng.choice([250, 500, 1000, 2000, 3000, 8000])
    if rng.random() < 0.7:
        requests["memory"] = rng.choice([1, 2, 4]) * GiB // 2
    if rng.random() < 0.1:
        requests["example.com/gpu"] = 1
    count = rng.choice([1, 1, 1, 2, 3, 5])
    flavor = FlavorName("big") if rng.random() < 0.2 else FlavorName("default")
    return PodSet(name=name, count=count, requests=requests), count, {r: flavor for r in requests}


def outcome(result: list[PodPlacement] | str | None, placer: CyclePlacer, key: str) -> object:
    if result is not None:
        return result
    return [(p.pod_set, p.index, p.node) for p in placer.placements[key]]


@pytest.mark.parametrize("seed", range(60), ids=lambda s: f"seed-{s}")
def test_the_index_chooses_what_looking_at_every_node_chooses(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    nodes = {f"n{i:03d}": random_node(rng, f"n{i:03d}") for i in range(rng.choice([8, 20, 60]))}
    caches = {"index": PlacementCache.of([]), "scan": PlacementCache.of([])}
    placed = 0
    for cycle in range(8):
        views = [nodes[name] for name in sorted(nodes)]
        placers = {}
        for mode in ("index", "scan"):
            monkeypatch.setattr(placement, "BEST_FIT_INDEX_MIN_NODES", 1 if mode == "index" else 10**9)
            placers[mode] = CyclePlacer(views, FLAVORS, None, caches[mode])
        for w in range(rng.randrange(1, 25)):
            key = f"c{cycle}-w{w}"
            sets = [random_pod_set(rng, f"ps{i}") for i in range(rng.choice([1, 1, 1, 2, 3]))]
            got = {}
            for mode, placer in placers.items():
                monkeypatch.setattr(placement, "BEST_FIT_INDEX_MIN_NODES", 1 if mode == "index" else 10**9)
                got[mode] = outcome(placer.place(key, sets), placer, key)
            assert got["index"] == got["scan"], (cycle, key, sets)
            if not isinstance(got["index"], str):
                placed += 1
        # Between cycles: what was placed is bound (or not, a lost admission), pods end, nodes change.
        for p in [p for ps in placers["scan"].placements.values() for p in ps]:
            if rng.random() < 0.9:
                n = nodes[p.node]
                requested = dict(n.requested)
                for res, qty in p.requests.items():
                    requested[res] = requested.get(res, 0) + qty
                if "pods" in n.allocatable:
                    requested["pods"] = requested.get("pods", 0) + 1
                nodes[p.node] = NodeView(n.name, n.labels, n.allocatable, requested, n.ready, n.conditions, n.taints)
        for name in rng.sample(sorted(nodes), k=min(len(nodes), rng.randrange(0, 6))):
            n = nodes[name]
            change = rng.random()
            if change < 0.6:
                nodes[name] = NodeView(name, n.labels, n.allocatable, random_requested(rng, n.allocatable), n.ready,
                                       n.conditions, n.taints)
            elif change < 0.75:
                nodes[name] = random_node(rng, name)  # relabelled, retainted, resized
            elif change < 0.85:
                del nodes[name]
            else:
                nodes[f"x{cycle}-{name}"] = random_node(rng, f"x{cycle}-{name}")
    assert placed > 0


def test_without_the_index_below_its_node_count() -> None:
    nodes = [NodeView(f"n{i}", {}, {"cpu": 4000}, {}) for i in range(placement.BEST_FIT_INDEX_MIN_NODES - 1)]
    cache = PlacementCache.of([])
    placer = CyclePlacer(nodes, FLAVORS, None, cache)
    assert placer.place("w", [(PodSet(name="main", count=1, requests={"cpu": 1000}), 1,
                               {"cpu": FlavorName("default")})]) is None
    assert all(found.fit is None for found in cache.eligible.values())
    more = [*nodes, NodeView("z", {}, {"cpu": 4000}, {})]
    placer = CyclePlacer(more, FLAVORS, None, cache)
    assert placer.place("w2", [(PodSet(name="main", count=1, requests={"cpu": 1000}), 1,
                                {"cpu": FlavorName("default")})]) is None
    assert any(found.fit is not None for found in cache.eligible.values())
