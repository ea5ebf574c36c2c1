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


def test_the_changes_told_to_placement_cover_every_view_that_changed() -> None:
    """take_changes names every node whose view changed since its last call (None when nodes came or
    went), so a placement cache refreshed from those names alone ends as one that looked at every node."""
    import random

    from sluicegate.controller.scheduling.placement import PlacementCache, PlacementFailure, place
    from sluicegate.model import FlavorName, ResourceFlavor
    from sluicegate.model.workloads import PodSet

    flavors = {FlavorName("default"): ResourceFlavor(FlavorName("default"))}
    pod_set = PodSet(name="main", count=1, requests={"cpu": 500})
    for seed in range(20):
        rng = random.Random(seed)
        r = registry(*(f"n{i:02d}" for i in range(12)))
        hinted, full = PlacementCache.of([]), PlacementCache.of([])
        pods: list[tuple[str, str]] = []
        for step in range(60):
            before = {v.name: v for v in r.views()}
            for _ in range(rng.randrange(0, 4)):
                names = sorted(r.nodes)
                action = rng.random()
                if action < 0.4:
                    node = rng.choice(names)
                    uid = f"p{step}-{len(pods)}"
                    r.bind(node, uid, {"cpu": rng.choice([250, 1000])}, now=0.0)
                    pods.append((node, uid))
                elif action < 0.6 and pods:
                    r.unbind(*pods.pop(rng.randrange(len(pods))))
                elif action < 0.7:
                    r.nodes[rng.choice(names)].ready = rng.random() < 0.7
                elif action < 0.8:
                    r.nodes[rng.choice(names)].taints = rng.choice([(), (Taint("k", NO_SCHEDULE, "v"),)])
                elif action < 0.88:
                    r.nodes[rng.choice(names)].heard_at = float(step)  # not shown to placement
                elif action < 0.94:
                    name = f"x{step}"
                    r.nodes[name] = NodeState(name, {"zone": "a"}, {"cpu": 4000}, {"cpu": 4000})
                elif len(names) > 2:
                    gone = rng.choice(names)
                    del r.nodes[gone]
                    pods = [p for p in pods if p[0] != gone]
            views = r.views()
            assert list(views) == [r.nodes[n].view() for n in sorted(r.nodes)]
            changes = r.take_changes()
            if changes is not None:
                moved = {v.name for v in views if before.get(v.name) is not v}
                assert moved <= changes, (seed, step, moved - changes)
            hinted.refresh(views, changes)
            full.refresh(views)
            assert hinted.ordered == full.ordered
            # Placement through each cache sees the same nodes, with the same room.
            got = [place(pod_sets=[(pod_set, 1, {"cpu": FlavorName("default")})], nodes=views, flavors=flavors,
                         cache=cache) for cache in (hinted, full)]
            assert [g.message if isinstance(g, PlacementFailure) else [p.node for p in g] for g in got][0] == \
                [g.message if isinstance(g, PlacementFailure) else [p.node for p in g] for g in got][1]
