"""Pod capacities kept in a topology tree between assignments.

A tree keeps, per pod shape, how many pods every domain holds, and counts a
leaf again only after :meth:`TopologyTree.invalidate` names one of its
nodes.  Whatever was kept, an assignment must equal the one a tree built
afresh from the same free capacity makes (Kueue recomputes the free
capacity for every snapshot: pkg/cache/scheduler/tas_flavor_snapshot.go,
``FindTopologyAssignmentsForFlavor`` fills every leaf anew).
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from sluicegate.controller.scheduling.placement import CyclePlacer, NodeView
from sluicegate.controller.scheduling.tas import Domain, TopologyFailure, TopologyTree
from sluicegate.model import FlavorName, ResourceFlavor
from sluicegate.model.topology import HOSTNAME_LABEL, Topology, TopologyAssignment, TopologyRequest
from tests.builders import pod_set

BLOCK = "cloud.provider.com/topology-block"
RACK = "cloud.provider.com/topology-rack"
LEVELS = [(BLOCK, RACK, HOSTNAME_LABEL), (BLOCK, RACK), (HOSTNAME_LABEL,)]


def _summary(result: TopologyAssignment | TopologyFailure) -> object:
    if isinstance(result, TopologyFailure):
        return result.message
    return result.levels, [(d.values, d.count) for d in result.domains]


def _request(rng: random.Random, levels: tuple[str, ...]) -> tuple[TopologyRequest | None, int]:
    level = rng.choice(levels)
    size = rng.choice([1, 2, 3])
    requests = [
        TopologyRequest(required=level), TopologyRequest(preferred=level), TopologyRequest(unconstrained=True),
        None, TopologyRequest(slice_required=rng.choice(levels), slice_size=size),
        TopologyRequest(required=level, slice_required=rng.choice(levels), slice_size=size),
    ]
    request = rng.choice(requests)
    count = size * rng.randint(1, 6) if request is not None and request.slice_size else rng.randint(1, 20)
    return request, count


@pytest.mark.parametrize("levels", LEVELS, ids=["block-rack-host", "block-rack", "host"])
@pytest.mark.parametrize("seed", range(4))
def test_kept_capacities_give_the_assignment_a_fresh_tree_gives(levels: tuple[str, ...], seed: int) -> None:
    rng = random.Random(seed)
    names = [f"n{i}" for i in range(12)]
    labelled = [(n, {BLOCK: f"b{rng.randint(1, 2)}", RACK: f"r{rng.randint(1, 3)}", HOSTNAME_LABEL: n})
                for n in names]
    free = {n: rng.randint(0, 6) for n in names}
    kept = TopologyTree(Topology("t", levels), labelled)
    for _ in range(300):
        changed = [n for n in names if rng.random() < 0.2]
        for n in changed:
            free[n] = rng.randint(0, 6)
        kept.invalidate(changed)
        # Nodes an earlier pod set of the same workload used: counted afresh, never kept.
        volatile = [n for n in names if rng.random() < 0.1]
        now = {**free, **{n: rng.randint(0, free[n]) for n in volatile}}

        def fit(leaf: Domain, room: dict[str, int] = now) -> int:
            return sum(room[n] for n in leaf.nodes)

        def committed(leaf: Domain) -> int:
            return sum(free[n] for n in leaf.nodes)

        request, count = _request(rng, levels)
        fresh = TopologyTree(Topology("t", levels), labelled)
        shape = rng.choice(["small", "large"])
        assert _summary(kept.assign(count, request, fit, shape=shape, volatile=volatile)) == \
            _summary(fresh.assign(count, request, fit))
        # What the volatile nodes held for that one assignment is not kept.
        assert _summary(kept.assign(count, request, committed, shape=shape)) == \
            _summary(TopologyTree(Topology("t", levels), labelled).assign(count, request, committed))


def test_a_shape_asks_again_only_for_the_leaves_of_nodes_named_since() -> None:
    labelled = [(f"h{i}", {BLOCK: "b1", RACK: f"r{i % 2}", HOSTNAME_LABEL: f"h{i}"}) for i in range(6)]
    tree = TopologyTree(Topology("t", (BLOCK, RACK, HOSTNAME_LABEL)), labelled)
    asked: list[str] = []

    def fit(leaf: Domain) -> int:
        asked.extend(leaf.nodes)
        return 4

    tree.assign(2, TopologyRequest(required=RACK), fit, shape="a")
    assert sorted(asked) == [f"h{i}" for i in range(6)]
    asked.clear()
    tree.assign(2, TopologyRequest(required=RACK), fit, shape="a")
    assert asked == []
    tree.invalidate(["h3", "unknown-node"])
    tree.assign(2, TopologyRequest(required=RACK), fit, shape="a")
    assert asked == ["h3"]
    asked.clear()
    # Another shape has its own counts.
    tree.assign(2, TopologyRequest(required=RACK), fit, shape="b")
    assert len(asked) == 6


TAS = FlavorName("tas")
TOPOLOGIES = {"default": Topology("default", (BLOCK, RACK, HOSTNAME_LABEL))}
FLAVORS = {TAS: ResourceFlavor(TAS, {"pool": "tas"}, topology_name="default")}


def _node(rack: str, host: str, cpu: int) -> NodeView:
    return NodeView(host, {"pool": "tas", BLOCK: "b1", RACK: rack, HOSTNAME_LABEL: host}, {"cpu": cpu * 1000})


def _gang(name: str, count: int, request: TopologyRequest):
    return replace(pod_set(name=name, count=count, cpu="1"), topology_request=request)


def test_gangs_of_one_cycle_see_the_room_earlier_ones_took() -> None:
    """Three 4-pod gangs that each need one host of 4 CPUs take the three hosts; a fourth finds none."""
    nodes = [_node("r1", "h1", 4), _node("r1", "h2", 4), _node("r2", "h3", 4)]
    placer = CyclePlacer(nodes, FLAVORS, TOPOLOGIES)
    one_host = TopologyRequest(required=HOSTNAME_LABEL)
    for key in ("a", "b", "c"):
        assert placer.place(key, [(_gang("main", 4, one_host), 4, {"cpu": TAS})]) is None
    assert sorted(p.node for key in "abc" for p in placer.placements[key]) == ["h1"] * 4 + ["h2"] * 4 + ["h3"] * 4
    assert placer.place("d", [(_gang("main", 1, one_host), 1, {"cpu": TAS})]) is not None


def test_a_failed_gang_leaves_no_room_taken() -> None:
    """A workload whose first pod set fits and second does not places nothing, and the room its
    first pod set would have taken is free for the next workload of the cycle."""
    nodes = [_node("r1", "h1", 4), _node("r2", "h2", 2)]
    placer = CyclePlacer(nodes, FLAVORS, TOPOLOGIES)
    rack = TopologyRequest(required=RACK)
    failed = placer.place("a", [(_gang("first", 4, rack), 4, {"cpu": TAS}), (_gang("second", 3, rack), 3, {"cpu": TAS})])
    assert failed is not None and "second" in failed
    assert "a" not in placer.placements
    assert placer.place("b", [(_gang("main", 4, rack), 4, {"cpu": TAS})]) is None
    assert {p.node for p in placer.placements["b"]} == {"h1"}


def test_the_second_pod_set_sees_the_room_the_first_took() -> None:
    """Both pod sets of one workload on the same shape: the second counts the first's pods (h1 is
    full after it), yet what it saw is not kept for the next workload."""
    nodes = [_node("r1", "h1", 4), _node("r1", "h2", 2), _node("r2", "h3", 3)]
    placer = CyclePlacer(nodes, FLAVORS, TOPOLOGIES)
    rack = TopologyRequest(required=RACK)
    assert placer.place("a", [(_gang("first", 4, TopologyRequest(required=HOSTNAME_LABEL)), 4, {"cpu": TAS}),
                              (_gang("second", 3, rack), 3, {"cpu": TAS})]) is None
    by_set = {ps: sorted(p.node for p in placer.placements["a"] if p.pod_set == ps) for ps in ("first", "second")}
    assert by_set == {"first": ["h1"] * 4, "second": ["h3"] * 3}
    assert placer.place("b", [(_gang("main", 2, rack), 2, {"cpu": TAS})]) is None
    assert {p.node for p in placer.placements["b"]} == {"h2"}
