"""Gang placement of pods on nodes."""

from __future__ import annotations

import pytest

from sluicegate.controller.scheduling.placement import NodeView, PlacementFailure, place
from sluicegate.model import FlavorName, ResourceFlavor
from tests.builders import pod_set

FLAVORS = {
    FlavorName("default"): ResourceFlavor(FlavorName("default")),
    FlavorName("gpu"): ResourceFlavor(FlavorName("gpu"), {"accel": "a100"}),
}


def node(name: str, cpu: int, used: int = 0, *, labels=None, ready=True, conditions=()) -> NodeView:
    return NodeView(name, labels or {}, {"cpu": cpu * 1000, "memory": 64 << 30}, {"cpu": used * 1000} if used else {},
                    ready, tuple(conditions))


def where(result) -> list[tuple[str, int, str]] | str:
    if isinstance(result, PlacementFailure):
        return result.message
    return [(p.pod_set, p.index, p.node) for p in result]


CASES = [
    ("packs onto the fullest node that fits",
     [node("a", 8), node("b", 8, used=6)], [(pod_set(count=2, cpu="1"), "default")],
     [("main", 0, "b"), ("main", 1, "b")]),
    ("spills to another node only when needed",
     [node("a", 8), node("b", 4, used=3)], [(pod_set(count=3, cpu="1"), "default")],
     [("main", 0, "b"), ("main", 1, "a"), ("main", 2, "a")]),
    ("skips nodes that are not ready or under pressure",
     [node("a", 8, ready=False), node("b", 8, conditions=["MemoryPressure"]), node("c", 8)],
     [(pod_set(count=1, cpu="1"), "default")],
     [("main", 0, "c")]),
    ("honours the flavor's node labels",
     [node("cpu-only", 8), node("gpu-box", 8, labels={"accel": "a100"})],
     [(pod_set(count=1, cpu="1"), "gpu")],
     [("main", 0, "gpu-box")]),
    ("equal nodes are chosen by name",
     [node("n2", 4), node("n1", 4)], [(pod_set(count=1, cpu="1"), "default")],
     [("main", 0, "n1")]),
]


@pytest.mark.parametrize(("nodes", "sets", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_place(nodes, sets, expected) -> None:
    got = place(pod_sets=[(ps, ps.count, {r: FlavorName(f) for r in ps.requests}) for ps, f in sets],
                nodes=nodes, flavors=FLAVORS)
    assert where(got) == expected


def test_a_gang_that_does_not_fit_binds_nothing() -> None:
    got = place(pod_sets=[(pod_set(count=3, cpu="3"), 3, {"cpu": FlavorName("default")})],
                nodes=[node("a", 4), node("b", 4)], flavors=FLAVORS)
    assert where(got) == (
        "no node has room for pod 2 of pod set main (cpu=3): 2 eligible node(s), 2 short of cpu; "
        "the gang is not started partially"
    )


def test_no_matching_node_says_which_labels_were_wanted() -> None:
    got = place(pod_sets=[(pod_set(count=1, cpu="1"), 1, {"cpu": FlavorName("gpu")})], nodes=[node("a", 4)], flavors=FLAVORS)
    assert where(got) == "no Ready node matches pod set main (node labels accel=a100); 1 node(s) known, 0 not ready or under pressure"


def test_pods_placed_earlier_in_the_cycle_count() -> None:
    got = place(pod_sets=[(pod_set(count=1, cpu="2"), 1, {"cpu": FlavorName("default")})],
                nodes=[node("a", 4), node("b", 4)], flavors=FLAVORS, in_cycle={"a": {"cpu": 3000}})
    assert where(got) == [("main", 0, "b")]
