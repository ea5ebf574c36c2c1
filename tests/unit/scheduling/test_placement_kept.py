"""What placement keeps between entries gives what working it out again gives.

``place`` keeps, per pod set and flavors, the node labels and tolerations
the pods need (``_requirements``); the scheduler keeps, per kept assignment,
the pod sets it hands to placement (``Scheduler._pod_sets_to_place``).  Each
is checked against the way it is made afresh, also after a flavor changed.
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from sluicegate.controller.scheduler import Scheduler
from sluicegate.controller.scheduling.cycle import Entry, Head
from sluicegate.controller.scheduling.flavors import FlavorAssigner
from sluicegate.controller.scheduling.placement import (
    PlacementCache,
    _requirements,
    labels_required,
    tolerations_of,
)
from sluicegate.controller.scheduling.quota import QuotaTree
from sluicegate.model import ClusterQueueName, FlavorName, ResourceFlavor
from sluicegate.model.taints import Toleration
from sluicegate.model.workloads import PodSet
from tests.builders import cluster_queue, flavor, group, workload

NAMES = [FlavorName("a"), FlavorName("b")]

flavor_st = st.builds(
    ResourceFlavor,
    name=st.just(FlavorName("x")),
    node_labels=st.dictionaries(st.sampled_from(["zone", "arch"]), st.sampled_from(["1", "2"]), max_size=2),
    tolerations=st.lists(st.builds(Toleration, key=st.sampled_from(["k", "j"]), value=st.sampled_from(["", "v"])),
                         max_size=2).map(tuple),
)
pod_set_st = st.builds(
    PodSet, name=st.just("main"), count=st.just(1),
    node_selector=st.dictionaries(st.sampled_from(["zone", "disk"]), st.sampled_from(["1", "ssd"]), max_size=2),
    tolerations=st.lists(st.builds(Toleration, key=st.sampled_from(["k", "m"])), max_size=2).map(tuple),
)


@settings(max_examples=200, deadline=None)
@given(
    flavors=st.lists(flavor_st, min_size=2, max_size=2),
    changed=st.one_of(st.none(), flavor_st),
    pod_sets=st.lists(pod_set_st, min_size=1, max_size=2),
    asks=st.lists(st.tuples(st.integers(0, 1), st.sampled_from(NAMES), st.sampled_from(NAMES)), min_size=1,
                  max_size=6),
)
def test_kept_requirements_are_what_labels_required_and_tolerations_of_give(  # type: ignore[no-untyped-def]
        flavors, changed, pod_sets, asks) -> None:
    by_name = {n: replace(f, name=n) for n, f in zip(NAMES, flavors, strict=True)}
    shared = PlacementCache.of([])
    for i, (which, cpu, memory) in enumerate(asks):
        if changed is not None and i == len(asks) // 2:
            by_name[NAMES[0]] = replace(changed, name=NAMES[0])  # a changed flavor is a new object
        ps = pod_sets[which % len(pod_sets)]
        assigned = {"cpu": cpu, "memory": memory}
        got = _requirements(shared, ps, assigned, by_name)
        required = labels_required(ps, assigned, by_name)
        tolerations = tolerations_of(ps, assigned, by_name)
        assert (got.required, got.tolerations, got.key) == (
            required, tolerations, (tuple(sorted(required.items())), tolerations))


def test_the_pod_sets_placed_for_a_kept_assignment_are_those_made_afresh() -> None:
    tree = QuotaTree()
    spec = cluster_queue("cq", group(flavor("default", cpu="10")))
    node = tree.set_cluster_queue(spec.name, quotas=spec.quotas(), cohort=None)
    flavors = {FlavorName("default"): ResourceFlavor(FlavorName("default"))}
    fresh = SimpleNamespace(_to_place={})
    kept = SimpleNamespace(_to_place={})
    shared_pod_sets = workload("w0", requests={"cpu": 1}).pod_sets
    for i in range(4):
        w = replace(workload(f"w{i}"), pod_sets=shared_pod_sets)
        assignment = FlavorAssigner(workload=w, spec=spec, node=node, view=tree.live, flavors=flavors,
                                    oracle=None).assign()  # type: ignore[arg-type]
        assert assignment.kept_last_tried is not None  # one pod set, one group, fits at once: kept and shared
        e = Entry(head=Head(workload=w, cluster_queue=ClusterQueueName("cq")), assignment=assignment)
        want = Scheduler._pod_sets_to_place(fresh, e)  # type: ignore[arg-type]
        fresh._to_place.clear()
        assert Scheduler._pod_sets_to_place(kept, e) == want  # type: ignore[arg-type]
    assert len(kept._to_place) == 1
