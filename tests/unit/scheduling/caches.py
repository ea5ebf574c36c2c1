"""A controller Cache holding given queues and admitted workloads, for scheduling tests.

The model values themselves come from tests.builders."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sluicegate.controller.cache import Cache
from sluicegate.model import (
    ClusterQueueName,
    ClusterQueueSpec,
    CohortSpec,
    FlavorName,
    LocalQueueSpec,
    ResourceFlavor,
    Workload,
)


def build_cache(
    *,
    flavors: Iterable[str | ResourceFlavor] = ("default",),
    cohorts: Iterable[CohortSpec] = (),
    queues: Iterable[ClusterQueueSpec] = (),
    local_queues: Mapping[str, str] | None = None,
    admitted_workloads: Iterable[Workload] = (),
) -> Cache:
    c = Cache()
    for f in flavors:
        rf = f if isinstance(f, ResourceFlavor) else ResourceFlavor(FlavorName(f))
        c.flavors[rf.name] = rf
    for co in cohorts:
        c.set_cohort(co)
    for q in queues:
        c.set_cluster_queue(q)
    for lq, target in (local_queues or {}).items():
        c.local_queues[("default", lq)] = LocalQueueSpec("default", lq, ClusterQueueName(target))
    for w in admitted_workloads:
        c.workloads[w.key] = w
        c.add_admitted(w, 0.0)
    return c
