"""Topology assignment, table-tested against Kueue's own cases.

The cases are ported from kubernetes-sigs/kueue
pkg/cache/scheduler/tas_cache_test.go, TestFindTopologyAssignments (case
names quoted); each pod requests 1 CPU and a node holds as many pods as it
has CPUs.  Kueue's TASProfileMixed gate is on by default (v0.15+), so
unconstrained requests use LeastFreeCapacity there and here.
"""

from __future__ import annotations

import pytest

from sluicegate.controller.scheduling.tas import Domain, TopologyFailure, TopologyTree
from sluicegate.model.topology import HOSTNAME_LABEL, Topology, TopologyAssignment, TopologyRequest

BLOCK = "cloud.com/topology-block"
RACK = "cloud.com/topology-rack"
THREE = (BLOCK, RACK, HOSTNAME_LABEL)
TWO = (BLOCK, RACK)

Node = tuple[str, str, str, int]  # block, rack, host, cpus

#      b1                   b2
#   /      \             /      \
#  r1       r2          r1       r2
#  |      /  |  \       |         |
#  x3    x5  x1  x6     x2       x4(2 cpus)
DEFAULT: list[Node] = [("b1", "r1", "x3", 1), ("b1", "r2", "x5", 1), ("b1", "r2", "x1", 1), ("b1", "r2", "x6", 1),
                       ("b2", "r1", "x2", 1), ("b2", "r2", "x4", 2)]
#       b1           b2
#       |             |
#       r1           r1
#     /  |  \       /  \
#   x3:4 x5 x1    x6:2  x2
SCATTERED: list[Node] = [("b1", "r1", "x3", 4), ("b1", "r1", "x5", 1), ("b1", "r1", "x1", 1), ("b2", "r1", "x6", 2),
                         ("b2", "r1", "x2", 1)]
BINARY: list[Node] = [("b1", "r1", "x3", 1), ("b1", "r1", "x5", 1), ("b1", "r2", "x1", 1), ("b1", "r2", "x6", 1),
                      ("b2", "r1", "x2", 1), ("b2", "r1", "x4", 1), ("b2", "r2", "x7", 1), ("b2", "r2", "x8", 1)]


def assign(nodes: list[Node], levels: tuple[str, ...], count: int, request: TopologyRequest | None
           ) -> TopologyAssignment | TopologyFailure:
    labelled = [(f"{b}-{r}-{h}", {BLOCK: b, RACK: r, HOSTNAME_LABEL: h}) for b, r, h, _ in nodes]
    cpus = {f"{b}-{r}-{h}": c for b, r, h, c in nodes}
    tree = TopologyTree(Topology("default", levels), labelled)

    def fit(leaf: Domain) -> int:
        return sum(cpus[n] for n in leaf.nodes)

    return tree.assign(count, request, fit)


def domains(result: TopologyAssignment | TopologyFailure) -> list[tuple[tuple[str, ...], int]] | str:
    if isinstance(result, TopologyFailure):
        return result.message
    return [(d.values, d.count) for d in result.domains]


CASES = [
    ("minimize the number of used racks before optimizing the number of nodes; BestFit",
     [("b1", "r1", "x3", 2), ("b1", "r2", "x5", 2), ("b1", "r3", "x1", 1), ("b1", "r3", "x6", 1),
      ("b1", "r3", "x2", 1), ("b1", "r3", "x4", 1)],
     THREE, 4, TopologyRequest(required=BLOCK),
     [(("x1",), 1), (("x2",), 1), (("x4",), 1), (("x6",), 1)]),
    ("choose the node that can accommodate all Pods",
     [("b1", "r1", "x3", 2), ("b1", "r1", "x5", 1), ("b1", "r1", "x1", 1)],
     THREE, 2, TopologyRequest(required=BLOCK),
     [(("x3",), 2)]),
    ("no annotation; implied default to unconstrained; 6 pods fit into hosts scattered across the whole "
     "datacenter even they could fit into single rack; BestFit",
     SCATTERED, THREE, 6, None,
     [(("x1",), 1), (("x3",), 1), (("x5",), 1), (("x2",), 1), (("x6",), 2)]),
    ("unconstrained; 6 pods fit into hosts scattered across the whole datacenter even they could fit into "
     "single rack; BestFit",
     SCATTERED, THREE, 6, TopologyRequest(unconstrained=True),
     [(("x1",), 1), (("x3",), 1), (("x5",), 1), (("x2",), 1), (("x6",), 2)]),
    ("unconstrained; a single pod fits into each host; LeastFreeCapacity; TASProfileMixed",
     DEFAULT, THREE, 1, TopologyRequest(unconstrained=True),
     [(("x3",), 1)]),
    ("block required; 4 pods fit into one host each; BestFit",
     BINARY, THREE, 4, TopologyRequest(required=BLOCK),
     [(("x3",), 1), (("x5",), 1), (("x1",), 1), (("x6",), 1)]),
    ("host required; single Pod fits in the host; BestFit",
     DEFAULT, THREE, 1, TopologyRequest(required=HOSTNAME_LABEL),
     [(("x3",), 1)]),
    ("rack required; multiple Pods fit in a rack; BestFit",
     DEFAULT, TWO, 3, TopologyRequest(required=RACK),
     [(("b1", "r2"), 3)]),
    ("rack required; too many pods to fit in any rack; BestFit",
     DEFAULT, TWO, 4, TopologyRequest(required=RACK),
     'topology "default" allows to fit only 3 out of 4 pod(s) (level cloud.com/topology-rack)'),
    ("block required; too many Pods to fit requested; BestFit",
     DEFAULT, TWO, 5, TopologyRequest(required=BLOCK),
     'topology "default" allows to fit only 4 out of 5 pod(s) (level cloud.com/topology-block)'),
    ("rack preferred; but only block can accommodate the workload; BestFit",
     DEFAULT, TWO, 4, TopologyRequest(preferred=RACK),
     [(("b1", "r1"), 1), (("b1", "r2"), 3)]),
    ("rack preferred; but only multiple blocks can accommodate the workload; BestFit",
     DEFAULT, TWO, 6, TopologyRequest(preferred=RACK),
     [(("b1", "r1"), 1), (("b1", "r2"), 3), (("b2", "r2"), 2)]),
    ("block preferred; but the workload cannot be accommodate in entire topology; BestFit",
     DEFAULT, TWO, 10, TopologyRequest(preferred=BLOCK),
     'topology "default" allows to fit only 7 out of 10 pod(s) (level cloud.com/topology-block)'),
    ("block required for podset; host required for slices; BestFit",
     [("b1", "r1", "x3", 3), ("b1", "r1", "x5", 3), ("b1", "r1", "x1", 3)],
     THREE, 6, TopologyRequest(required=BLOCK, slice_required=HOSTNAME_LABEL, slice_size=2),
     [(("x1",), 2), (("x3",), 2), (("x5",), 2)]),
    ("unknown level is refused with Kueue's reason",
     DEFAULT, TWO, 1, TopologyRequest(required="example.com/zone"),
     "no requested topology level: example.com/zone"),
]


@pytest.mark.parametrize(("nodes", "levels", "count", "request_", "want"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_find_topology_assignment(nodes, levels, count, request_, want) -> None:
    assert domains(assign(nodes, levels, count, request_)) == want


def test_block_preferred_pods_fit_in_two_blocks() -> None:
    """Kueue: "block preferred; Pods fit in 2 blocks; BestFit" — one level, nodes b1:2, b2:1, b3:4, 5 pods:
    the largest block first, then the best fit for the rest."""
    labelled = [("b1", {BLOCK: "b1"}), ("b2", {BLOCK: "b2"}), ("b3", {BLOCK: "b3"})]
    cpus = {"b1": 2, "b2": 1, "b3": 4}
    tree = TopologyTree(Topology("default", (BLOCK,)), labelled)
    got = tree.assign(5, TopologyRequest(preferred=BLOCK), lambda leaf: sum(cpus[n] for n in leaf.nodes))
    assert domains(got) == [(("b2",), 1), (("b3",), 4)]


def test_nodes_without_every_level_label_are_left_out() -> None:
    """Kueue: "only nodes with matching levels are considered; no host label on node"."""
    tree = TopologyTree(Topology("default", THREE), [("n1", {BLOCK: "b1", RACK: "r1"})])
    assert tree.skipped == 1
    assert domains(tree.assign(1, TopologyRequest(required=RACK), lambda leaf: 1)) == \
        "no topology domains at level: cloud.com/topology-rack"


def test_required_rack_best_fit_takes_the_fullest_rack_that_holds_the_gang() -> None:
    """BestFit picks the domain with the least sufficient capacity (Kueue's findBestFitDomain)."""
    nodes: list[Node] = [("b1", "r1", "h1", 8), ("b1", "r2", "h2", 3), ("b1", "r3", "h3", 2)]
    assert domains(assign(nodes, THREE, 3, TopologyRequest(required=RACK))) == [(("h2",), 3)]


def test_slices_each_stay_within_one_rack() -> None:
    """Slices of 2 on the rack level: a rack of 3 free pods holds one slice only."""
    nodes: list[Node] = [("b1", "r1", "h1", 3), ("b1", "r2", "h2", 2), ("b1", "r3", "h3", 1)]
    got = assign(nodes, THREE, 4, TopologyRequest(required=BLOCK, slice_required=RACK, slice_size=2))
    assert domains(got) == [(("h1",), 2), (("h2",), 2)]
    failed = assign(nodes, THREE, 6, TopologyRequest(required=BLOCK, slice_required=RACK, slice_size=2))
    assert domains(failed) == \
        'topology "default" allows to fit only 2 out of 3 slice(s) (level cloud.com/topology-block)'


def test_slice_only_request_as_kueues_balanced_perf_class() -> None:
    """Kueue's TAS performance config writes "balanced" as a slice-only request
    (test/performance/scheduler/runner/generator/generator.go: podSetSliceRequiredTopology + size):
    searched from the top level with LeastFreeCapacity, each slice within one rack."""
    got = assign(DEFAULT, THREE, 2, TopologyRequest(slice_required=RACK, slice_size=2))
    # Racks that hold a slice of 2: b1/r2 (3 free) and b2/r2 (x4, 2 free); the fullest is taken.
    assert domains(got) == [(("x4",), 2)]
