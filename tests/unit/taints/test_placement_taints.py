"""Placement on tainted nodes: kube-scheduler's TaintToleration plugin.

Filter (``pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go``):
a node whose NoSchedule or NoExecute taint the pod does not tolerate is not
feasible, with the reason ``node(s) had untolerated taint {key: value}``.  Score:
fewer untolerated PreferNoSchedule taints is better.  A pod's tolerations are
its own plus those of its admitted flavors (Kueue injects them).
"""

from __future__ import annotations

from dataclasses import replace

from sluicegate.controller.scheduling.placement import NodeView, PlacementFailure, place
from sluicegate.model import FlavorName, ResourceFlavor
from sluicegate.model.taints import EQUAL, EXISTS, NO_EXECUTE, NO_SCHEDULE, PREFER_NO_SCHEDULE, Taint, Toleration
from tests.builders import pod_set

GPU = Taint("dedicated", NO_SCHEDULE, "gpu")
FLAVORS = {
    FlavorName("default"): ResourceFlavor(FlavorName("default")),
    FlavorName("gpu"): ResourceFlavor(FlavorName("gpu"), {"accel": "a100"}, node_taints=(GPU,),
                                      tolerations=(Toleration("dedicated", EQUAL, "gpu", NO_SCHEDULE),)),
}


def node(name: str, cpu: int = 8, *taints: Taint, labels=None) -> NodeView:
    return NodeView(name, labels or {}, {"cpu": cpu * 1000, "memory": 64 << 30}, taints=taints)


def where(ps, nodes, flavor: str = "default", count: int | None = None):
    got = place(pod_sets=[(ps, ps.count if count is None else count, {r: FlavorName(flavor) for r in ps.requests})],
                nodes=nodes, flavors=FLAVORS)
    if isinstance(got, PlacementFailure):
        return got.message
    return [p.node for p in got]


def test_a_pod_without_tolerations_avoids_no_schedule_and_no_execute_nodes() -> None:
    nodes = [node("a", 8, GPU), node("b", 8, Taint("maint", NO_EXECUTE)), node("c", 2)]
    assert where(pod_set(count=2, cpu="1"), nodes) == ["c", "c"]


def test_a_tolerating_pod_may_use_the_tainted_node() -> None:
    ps = replace(pod_set(count=1, cpu="1"), tolerations=(Toleration("dedicated", EXISTS),))
    # Best fit would pick the smaller node c; the tainted a is fine too, and fuller.
    assert where(ps, [node("a", 2, GPU), node("c", 8)]) == ["a"]


def test_the_admitted_flavors_tolerations_count() -> None:
    nodes = [node("gpu-1", 8, GPU, labels={"accel": "a100"}), node("plain", 8)]
    assert where(pod_set(count=1, cpu="1"), nodes, flavor="gpu") == ["gpu-1"]


def test_pending_message_names_the_taint() -> None:
    nodes = [node("a", 8, GPU), node("b", 8, GPU), node("c", 8, Taint("maint", NO_EXECUTE))]
    assert where(pod_set(count=1, cpu="1"), nodes) == (
        "no Ready node matches pod set main (node labels <any>); 3 node(s) known, 0 not ready or under pressure"
        "; 2 node(s) had untolerated taint {dedicated: gpu}; 1 node(s) had untolerated taint {maint: }"
    )


def test_prefer_no_schedule_is_only_a_preference() -> None:
    soft = Taint("busy", PREFER_NO_SCHEDULE)
    # The untainted node wins although best fit would pick the fuller, softly tainted one.
    assert where(pod_set(count=1, cpu="1"), [node("a", 2, soft), node("b", 8)]) == ["b"]
    # With no other node left, the softly tainted one is used.
    assert where(pod_set(count=2, cpu="6"), [node("a", 8, soft), node("b", 8)]) == ["b", "a"]
    # Tolerated, it costs nothing.
    tolerant = replace(pod_set(count=1, cpu="1"), tolerations=(Toleration("busy", EXISTS),))
    assert where(tolerant, [node("a", 2, soft), node("b", 8)]) == ["a"]
