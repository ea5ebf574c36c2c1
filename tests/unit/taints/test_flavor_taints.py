"""Flavor assignment with tainted ResourceFlavors, as Kueue's flavor assigner does it.

Cases follow kubernetes-sigs/kueue ``pkg/scheduler/flavorassigner/flavorassigner_test.go``
("single flavor, fits tainted flavor", "single flavor, fits tainted flavor with
toleration", "multiple flavors, fits while skipping tainted flavor", "each podset
requires preemption on a different flavor") and ``flavorassigner.go``
(checkFlavorForPodSets: the flavor's nodeTaints against the pod set's tolerations
plus the flavor's own; only NoSchedule and NoExecute count; the reason
``untolerated taint {key value effect <nil>} in flavor NAME``).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from sluicegate.controller.scheduling.flavors import Mode
from sluicegate.model import FlavorName, ResourceFlavor
from sluicegate.model.taints import EQUAL, EXISTS, NO_EXECUTE, NO_SCHEDULE, PREFER_NO_SCHEDULE, Taint, Toleration
from tests.builders import cluster_queue, flavor, group, pod_set, workload
from tests.unit.scheduling.caches import build_cache
from tests.unit.scheduling.test_flavors import assign

SPOT = Taint("instance", NO_SCHEDULE, "spot")
SPOT_TOLERATION = Toleration("instance", EQUAL, "spot", NO_SCHEDULE)
FLAVORS = (
    ResourceFlavor(FlavorName("tainted"), node_taints=(SPOT,)),
    ResourceFlavor(FlavorName("taint-and-toleration"), node_taints=(SPOT,), tolerations=(SPOT_TOLERATION,)),
    ResourceFlavor(FlavorName("two"), {"type": "two"}),
    ResourceFlavor(FlavorName("soft"), node_taints=(Taint("busy", PREFER_NO_SCHEDULE),)),
    ResourceFlavor(FlavorName("drained"), node_taints=(Taint("drain", NO_EXECUTE),)),
)


def tolerating(ps, *tolerations: Toleration):
    return replace(ps, tolerations=tolerations)


CASES = [
    ("single flavor, fits tainted flavor (the pod set tolerates it)",
     [flavor("tainted", cpu="4")], tolerating(pod_set(cpu="1"), SPOT_TOLERATION), Mode.FIT, {"main": {"cpu": "tainted"}}, ""),
    ("single flavor, fits tainted flavor with the flavor's own toleration",
     [flavor("taint-and-toleration", cpu="4")], pod_set(cpu="1"), Mode.FIT, {"main": {"cpu": "taint-and-toleration"}}, ""),
    ("single tainted flavor, no toleration: no fit with Kueue's reason",
     [flavor("tainted", cpu="4")], pod_set(cpu="1"), Mode.NO_FIT, {},
     "couldn't assign flavors to pod set main: untolerated taint {instance spot NoSchedule <nil>} in flavor tainted"),
    ("multiple flavors, fits while skipping tainted flavor",
     [flavor("tainted", cpu="4"), flavor("two", cpu="4")], pod_set(cpu="3"), Mode.FIT, {"main": {"cpu": "two"}}, ""),
    ("an Exists toleration with an empty key tolerates every taint",
     [flavor("tainted", cpu="4")], tolerating(pod_set(cpu="1"), Toleration("", EXISTS)), Mode.FIT,
     {"main": {"cpu": "tainted"}}, ""),
    ("a toleration of another value does not tolerate",
     [flavor("tainted", cpu="4")], tolerating(pod_set(cpu="1"), Toleration("instance", EQUAL, "on-demand")), Mode.NO_FIT, {},
     "couldn't assign flavors to pod set main: untolerated taint {instance spot NoSchedule <nil>} in flavor tainted"),
    ("PreferNoSchedule taints do not keep a flavor from matching",
     [flavor("soft", cpu="4")], pod_set(cpu="1"), Mode.FIT, {"main": {"cpu": "soft"}}, ""),
    ("NoExecute taints do",
     [flavor("drained", cpu="4")], pod_set(cpu="1"), Mode.NO_FIT, {},
     "couldn't assign flavors to pod set main: untolerated taint {drain  NoExecute <nil>} in flavor drained"),
]


@pytest.mark.parametrize(("flavors", "ps", "mode", "assigned", "message"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_tainted_flavors(flavors, ps, mode, assigned, message) -> None:
    cache = build_cache(flavors=FLAVORS, queues=[cluster_queue("a", group(*flavors))])
    a = assign(cache, "a", workload("w", ps))
    assert (a.mode(), a.flavors_by_pod_set() if mode is Mode.FIT else {}, a.message()) == (mode, assigned, message)


def test_each_pod_set_checks_its_own_tolerations() -> None:
    """Kueue's "each podset requires preemption on a different flavor", quotas free: the
    launcher (no toleration) gets the untainted flavor, the workers (tolerating) the tainted one."""
    one = ResourceFlavor(FlavorName("one"), {"type": "one"})
    cache = build_cache(flavors=(*FLAVORS, one),
                        queues=[cluster_queue("a", group(flavor("one", cpu="4"), flavor("tainted", cpu="10")))])
    wl = workload("w", pod_set("launcher", cpu="2"),
                  tolerating(pod_set("workers", count=10, cpu="1"), SPOT_TOLERATION))
    a = assign(cache, "a", wl)
    assert (a.mode(), a.flavors_by_pod_set()) == (
        Mode.FIT, {"launcher": {"cpu": "one"}, "workers": {"cpu": "tainted"}})
