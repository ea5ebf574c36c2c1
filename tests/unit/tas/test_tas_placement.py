"""Node placement of pod sets admitted on a TAS flavor: pods land on exactly the assigned domains."""

from __future__ import annotations

import time

from sluicegate.controller.scheduling.flavors import tas_mismatch
from sluicegate.controller.scheduling.placement import CyclePlacer, NodeView, PlacementFailure, place
from sluicegate.model import FlavorName, ResourceFlavor
from sluicegate.model.topology import HOSTNAME_LABEL, Topology, TopologyRequest
from tests.builders import pod_set

BLOCK = "cloud.provider.com/topology-block"
RACK = "cloud.provider.com/topology-rack"
TOPOLOGY = Topology("default", (BLOCK, RACK, HOSTNAME_LABEL))
TOPOLOGIES = {"default": TOPOLOGY}
TAS = FlavorName("tas")
FLAVORS = {
    TAS: ResourceFlavor(TAS, {"pool": "tas"}, topology_name="default"),
    FlavorName("plain"): ResourceFlavor(FlavorName("plain")),
}


def node(block: str, rack: str, host: str, cpu: int, used: int = 0) -> NodeView:
    labels = {"pool": "tas", BLOCK: block, RACK: rack, HOSTNAME_LABEL: host}
    return NodeView(host, labels, {"cpu": cpu * 1000, "pods": 110}, {"cpu": used * 1000} if used else {})


def racks(nodes: list[NodeView], result: object) -> dict[str, int]:
    assert not isinstance(result, PlacementFailure), result
    assert isinstance(result, list)
    rack_of = {n.name: n.labels[RACK] for n in nodes}
    out: dict[str, int] = {}
    for p in result:
        out[rack_of[p.node]] = out.get(rack_of[p.node], 0) + 1
    return out


def gang(count: int, request: TopologyRequest | None):
    from dataclasses import replace
    return replace(pod_set(count=count, cpu="1"), topology_request=request)


def test_required_rack_lands_in_one_rack_and_records_the_assignment() -> None:
    nodes = [node("b1", "r1", "h1", 2), node("b1", "r1", "h2", 2), node("b1", "r2", "h3", 4), node("b1", "r2", "h4", 1)]
    chosen: dict = {}
    result = place(pod_sets=[(gang(4, TopologyRequest(required=RACK)), 4, {"cpu": TAS})], nodes=nodes,
                   flavors=FLAVORS, topologies=TOPOLOGIES, topology_out=chosen)
    # Both racks hold 4; BestFit takes the first of the least sufficient (r1: 4, r2: 5).
    assert racks(nodes, result) == {"r1": 4}
    ta = chosen["main"]
    assert ta.levels == (HOSTNAME_LABEL,)
    assert [(d.values, d.count) for d in ta.domains] == [(("h1",), 2), (("h2",), 2)]


def test_required_rack_that_fits_nowhere_names_the_level_and_the_shortfall() -> None:
    nodes = [node("b1", "r1", "h1", 2), node("b1", "r2", "h2", 3)]
    result = place(pod_sets=[(gang(4, TopologyRequest(required=RACK)), 4, {"cpu": TAS})], nodes=nodes,
                   flavors=FLAVORS, topologies=TOPOLOGIES)
    assert isinstance(result, PlacementFailure)
    assert result.message == ('pod set main: topology "default" allows to fit only 3 out of 4 pod(s) '
                              f'(level {RACK})')


def test_preferred_rack_spans_the_fewest_racks() -> None:
    nodes = [node("b1", "r1", "h1", 1), node("b1", "r2", "h2", 3), node("b1", "r3", "h3", 2)]
    result = place(pod_sets=[(gang(5, TopologyRequest(preferred=RACK)), 5, {"cpu": TAS})], nodes=nodes,
                   flavors=FLAVORS, topologies=TOPOLOGIES)
    assert racks(nodes, result) == {"r2": 3, "r3": 2}


def test_in_cycle_admissions_count_against_domain_capacity() -> None:
    nodes = [node("b1", "r1", "h1", 4), node("b1", "r2", "h2", 4)]
    placer = CyclePlacer(nodes, FLAVORS, TOPOLOGIES)
    for key in ("a", "b"):
        assert placer.place(key, [(gang(4, TopologyRequest(required=RACK)), 4, {"cpu": TAS})]) is None
    assert {p.node for p in placer.placements["a"]} != {p.node for p in placer.placements["b"]}
    failure = placer.place("c", [(gang(1, TopologyRequest(required=RACK)), 1, {"cpu": TAS})])
    assert failure is not None and "doesn't allow to fit any of 1 pod(s)" in failure
    assert set(placer.topology) == {"a", "b"}


def test_flavor_naming_a_missing_topology_is_reported() -> None:
    flavors = {TAS: ResourceFlavor(TAS, {"pool": "tas"}, topology_name="gone")}
    result = place(pod_sets=[(gang(1, None), 1, {"cpu": TAS})], nodes=[node("b1", "r1", "h1", 1)],
                   flavors=flavors, topologies=TOPOLOGIES)
    assert isinstance(result, PlacementFailure) and "topology gone, which does not exist" in result.message


def test_tas_flavor_matching_follows_kueue() -> None:
    """kueue pkg/scheduler/flavorassigner/tas_flavorassigner.go checkPodSetAndFlavorMatchForTAS."""
    tas, plain = FLAVORS[TAS], FLAVORS[FlavorName("plain")]
    asks = gang(1, TopologyRequest(required=RACK))
    assert tas_mismatch(plain, asks, tas_only=False) == 'Flavor "plain" does not support TopologyAwareScheduling'
    assert tas_mismatch(tas, asks, tas_only=False) is None
    assert tas_mismatch(tas, gang(1, None), tas_only=False) == 'Flavor "tas" supports only TopologyAwareScheduling'
    assert tas_mismatch(tas, gang(1, None), tas_only=True) is None
    assert tas_mismatch(plain, gang(1, None), tas_only=False) is None


def test_replay_scale_cycle_is_fast() -> None:
    """640 nodes (1 block x 10 racks x 64), 200 gangs of 8 admitted in one cycle: the domain tree is
    built once, each gang costs one pass over the leaves."""
    nodes = [node("b1", f"r{r}", f"n{r}-{h}", 8) for r in range(10) for h in range(64)]
    placer = CyclePlacer(nodes, FLAVORS, TOPOLOGIES)
    started = time.perf_counter()
    for i in range(200):
        request = TopologyRequest(required=RACK) if i % 2 else TopologyRequest(preferred=RACK)
        assert placer.place(str(i), [(gang(8, request), 8, {"cpu": TAS})]) is None
    elapsed = time.perf_counter() - started
    assert elapsed < 10, elapsed


def test_cache_kept_across_cycles_sees_new_usage_and_new_labels() -> None:
    """The scheduler's PlacementCache outlives a cycle: capacity used since (bound pods) and
    relabelled nodes must show in the next cycle's choice."""
    from sluicegate.controller.scheduling.placement import PlacementCache

    cache = PlacementCache.of([])
    first = [node("b1", "r1", "h1", 4), node("b1", "r2", "h2", 4)]
    placer = CyclePlacer(first, FLAVORS, TOPOLOGIES, cache)
    assert placer.place("a", [(gang(4, TopologyRequest(required=RACK)), 4, {"cpu": TAS})]) is None
    assert {p.node for p in placer.placements["a"]} == {"h1"}
    # Next cycle: h1's 4 CPUs are bound now; a 4-pod rack gang goes to r2.
    second = [node("b1", "r1", "h1", 4, used=4), node("b1", "r2", "h2", 4)]
    placer = CyclePlacer(second, FLAVORS, TOPOLOGIES, cache)
    assert placer.place("b", [(gang(4, TopologyRequest(required=RACK)), 4, {"cpu": TAS})]) is None
    assert {p.node for p in placer.placements["b"]} == {"h2"}
    # h2's pods are gone again (requests changed back), and h1 moved to rack r2: both in one rack now.
    moved = NodeView("h1", {**second[0].labels, RACK: "r2"}, second[0].allocatable, {})
    placer = CyclePlacer([moved, node("b1", "r2", "h2", 4)], FLAVORS, TOPOLOGIES, cache)
    assert placer.place("c", [(gang(8, TopologyRequest(required=RACK)), 8, {"cpu": TAS})]) is None
    assert {p.node for p in placer.placements["c"]} == {"h1", "h2"}
