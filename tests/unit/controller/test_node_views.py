"""The node registry's placement views: rebuilt only for the nodes that changed.

A scheduling cycle asks for every node's view; with hundreds of nodes (the
TAS replay runs 640) rebuilding them all each cycle cost more than the
placement itself.  These tests pin down when a view is kept and when it is
rebuilt, so a cycle never sees a stale node.
"""

from __future__ import annotations

from sluicegate.controller.nodes import NodeRegistry, NodeState, ReportedPod
from sluicegate.model.taints import NO_SCHEDULE, Taint


def registry(*names: str) -> NodeRegistry:
    r = NodeRegistry()
    for name in names:
        r.nodes[name] = NodeState(name, {"zone": "a"}, {"cpu": 8000}, {"cpu": 8000, "pods": 110})
    return r


def test_views_are_kept_until_something_changes() -> None:
    r = registry("n2", "n1", "n3")
    first = r.views()
    assert [v.name for v in first] == ["n1", "n2", "n3"]  # name order, whatever the insertion order
    assert r.views() is first
    # Heartbeat bookkeeping is not something placement sees.
    n1 = r.nodes["n1"]
    n1.last_heartbeat = 5.0
    n1.heard_at = 5.0
    assert r.views() is first


def test_a_binding_rebuilds_only_its_nodes_view() -> None:
    r = registry("n1", "n2")
    before = {v.name: v for v in r.views()}
    r.bind("n1", "pod-a", {"cpu": 1000}, now=0.0)
    after = {v.name: v for v in r.views()}
    assert after["n2"] is before["n2"]
    assert after["n1"] is not before["n1"]
    assert after["n1"].requested == {"cpu": 1000, "pods": 1}
    r.unbind("n1", "pod-a")
    assert {v.name: v for v in r.views()}["n1"].requested == {"pods": 0}
    # Unbinding a pod the node does not hold changes nothing.
    kept = r.views()
    r.unbind("n1", "pod-a")
    assert r.views() is kept


def test_assigned_fields_and_static_pods_rebuild_the_view() -> None:
    r = registry("n1")
    node = r.nodes["n1"]
    node.ready = False
    assert not r.views()[0].ready
    node.conditions = ("MemoryPressure",)
    assert r.views()[0].conditions == ("MemoryPressure",)
    node.taints = (Taint("k", NO_SCHEDULE, "v"),)
    assert r.views()[0].taints == (Taint("k", NO_SCHEDULE, "v"),)
    node.labels = {"zone": "b"}
    assert r.views()[0].labels == {"zone": "b"}
    static = ReportedPod(uid="s1", name="s", namespace="kube-system", workload="", phase="Running", static=True,
                         requests={"cpu": 500})
    node.set_static_pod(static)
    assert r.views()[0].requested == {"cpu": 500, "pods": 1}
    # A new report of the same static pod with the same requests keeps the view (usage figures change often).
    kept = r.views()
    node.set_static_pod(ReportedPod(uid="s1", name="s", namespace="kube-system", workload="", phase="Running",
                                    static=True, requests={"cpu": 500}, rss_bytes=123))
    assert r.views() is kept
    assert node.drop_static_pod("s1")
    assert not node.drop_static_pod("s1")
    assert r.views()[0].requested == {"pods": 0}


def test_nodes_coming_and_going_change_the_list() -> None:
    r = registry("n1")
    first = r.views()
    r.nodes["n0"] = NodeState("n0", {}, {}, {"cpu": 1000})
    assert [v.name for v in r.views()] == ["n0", "n1"]
    old = r.nodes["n1"]
    r.nodes["n1"] = NodeState("n1", {}, {}, {"cpu": 2000})
    assert r.views()[1].allocatable == {"cpu": 2000}
    # The replaced state no longer speaks for the registry.
    old.ready = False
    assert r.views()[1].ready
    r.nodes.pop("n0")
    assert [v.name for v in r.views()] == ["n1"]
    del r.nodes["n1"]
    assert r.views() == ()
    assert first != r.views()
