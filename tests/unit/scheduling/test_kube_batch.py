"""kube-batch's proportion and jobStatus, as tables, and what the Queue→ClusterQueue mapping keeps of them.

Proportion: kubernetes-sigs/kube-batch pkg/scheduler/plugins/proportion/proportion.go
(water-filling of the cluster by weight, capped at each queue's request;
Overused when deserved <= allocated in every resource; share =
max(allocated/deserved)).  jobStatus: pkg/scheduler/framework/session.go.
Volcano's Inqueue and Completed phases: volcano-sh/apis
pkg/apis/scheduling/v1beta1/types.go.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import pytest

from sluicegate.controller.podgroups import (
    KUBE_BATCH_COHORT,
    batch_cluster_queue,
    deserved_shares,
    group_status,
    overused,
    share,
)
from sluicegate.model.conditions import set_condition
from sluicegate.model.names import CohortName, FlavorName
from sluicegate.model.podgroups import BatchQueue, PodGroup
from sluicegate.model.pods import PodRecord
from sluicegate.model.queues import CohortSpec, FlavorQuotas, ReclaimPolicy, ResourceGroup, ResourceQuota
from sluicegate.model.workloads import Admission, PodSet, Workload, WorkloadStatus

CLUSTER = {"cpu": 12.0, "memory": 24.0}


@pytest.mark.parametrize(
    ("queues", "expected"),
    [
        ({"a": (2, {"cpu": 12, "memory": 24}), "b": (1, {"cpu": 12, "memory": 24})},
         {"a": {"cpu": 8, "memory": 16}, "b": {"cpu": 4, "memory": 8}}),
        ({"a": (1, {"cpu": 12, "memory": 24}), "b": (1, {"cpu": 12, "memory": 24}),
          "c": (1, {"cpu": 12, "memory": 24})},
         {"a": {"cpu": 4, "memory": 8}, "b": {"cpu": 4, "memory": 8}, "c": {"cpu": 4, "memory": 8}}),
        # b asks for less than its weight gives: capped at its request, a gets the rest.
        ({"a": (1, {"cpu": 12, "memory": 24}), "b": (1, {"cpu": 2, "memory": 4})},
         {"a": {"cpu": 10, "memory": 20}, "b": {"cpu": 2, "memory": 4}}),
        # Nobody asks for the whole cluster: each is capped at its request.
        ({"a": (3, {"cpu": 1, "memory": 1}), "b": (1, {"cpu": 1, "memory": 1})},
         {"a": {"cpu": 1, "memory": 1}, "b": {"cpu": 1, "memory": 1}}),
        # A request below the deserved amount in cpu but not in memory does not cap the queue (Resource.Less).
        ({"a": (1, {"cpu": 1, "memory": 24}), "b": (1, {"cpu": 12, "memory": 24})},
         {"a": {"cpu": 6, "memory": 12}, "b": {"cpu": 6, "memory": 12}}),
    ],
    ids=["weights 2:1 both wanting everything", "three equal weights", "a small queue frees its share",
         "everyone satisfied", "capped only when below in every resource"],
)
def test_deserved_shares(queues: dict[str, tuple[int, dict[str, float]]], expected: dict[str, dict[str, float]]) -> None:
    got = deserved_shares(CLUSTER, queues)
    assert {q: {r: pytest.approx(v) for r, v in d.items()} for q, d in expected.items()} == got


@pytest.mark.parametrize(
    ("allocated", "is_overused", "queue_share"),
    [
        ({"cpu": 8, "memory": 16}, True, 1.0),
        ({"cpu": 9, "memory": 16}, True, 9 / 8),
        ({"cpu": 8, "memory": 10}, False, 1.0),
        ({"cpu": 4, "memory": 8}, False, 0.5),
    ],
    ids=["at its share: overused (<=)", "above it", "under in one resource: not overused", "half"],
)
def test_overused_and_share(allocated: dict[str, float], is_overused: bool, queue_share: float) -> None:
    deserved = {"cpu": 8.0, "memory": 16.0}
    assert overused(deserved, allocated) is is_overused
    assert share(deserved, allocated) == pytest.approx(queue_share)


def test_the_mapping_reaches_the_same_split() -> None:
    """With nominal 0 everywhere a ClusterQueue's weighted share is usage/weight over the cohort's capacity;
    at proportion's deserved split (8 and 4 cpu for weights 2 and 1) the two weighted shares are equal, so
    neither fair-sharing preemption strategy lets one queue take from the other."""
    deserved = deserved_shares(CLUSTER, {"a": (2, CLUSTER), "b": (1, CLUSTER)})
    weighted = {q: Fraction(round(deserved[q]["cpu"]), int(CLUSTER["cpu"])) / w for q, w in (("a", 2), ("b", 1))}
    assert weighted["a"] == weighted["b"] == Fraction(1, 3)


def test_queue_becomes_a_borrowing_cluster_queue() -> None:
    cohort = CohortSpec(name=CohortName("kube-batch"), resource_groups=(ResourceGroup(
        covered_resources=("cpu", "memory"),
        flavors=(FlavorQuotas(FlavorName("default"), {"cpu": ResourceQuota(12), "memory": ResourceQuota(24)}),),
    ),))
    cq = batch_cluster_queue(BatchQueue(name="q", weight=3, capability={"cpu": 5000}), cohort)
    assert (cq.cohort, cq.fair_sharing_weight, cq.preemption.reclaim_within_cohort) == (
        KUBE_BATCH_COHORT, 3, ReclaimPolicy.ANY)
    assert cq.namespace_selector is not None and cq.namespace_selector.is_empty
    quotas = cq.resource_groups[0].flavors[0].resources
    assert quotas == {"cpu": ResourceQuota(0, borrowing_limit=5000), "memory": ResourceQuota(0)}


# -- jobStatus ------------------------------------------------------------------

PG = PodGroup(namespace="ns", name="g", min_member=4)
VC = "scheduling.volcano.sh/v1beta1"


def wl(*phases: str, reserved: bool = True, finished: bool = False, evicted: bool = False) -> Workload:
    pods = tuple(PodRecord(uid=f"u{i}", name=f"p{i}", pod_set="main", index=i, node="n", phase=p)
                 for i, p in enumerate(phases))
    conds: tuple = ()
    if reserved:
        conds = set_condition(conds, type_="QuotaReserved", status=True, reason="QuotaReserved", message="", now=1)
    if finished:
        conds = set_condition(conds, type_="Finished", status=True, reason="Succeeded", message="", now=2)
    if evicted:
        conds = set_condition(conds, type_="Evicted", status=True, reason="Preempted", message="", now=2)
    admission = Admission(cluster_queue="cq", pod_set_assignments=()) if reserved else None
    return Workload(namespace="ns", name="j", uid="1", creation_timestamp=1.0, queue_name="lq",
                    pod_sets=(PodSet(name="main", count=6, min_count=4),),
                    status=WorkloadStatus(conditions=conds, admission=admission, pods=pods))


@pytest.mark.parametrize(
    ("pg", "workload", "expected"),
    [
        (PG, None, ("Pending", 0, 0, 0)),
        (PG, wl(reserved=False), ("Pending", 0, 0, 0)),
        (PG, wl("Pending", "Running", "Running"), ("Pending", 2, 0, 0)),
        (PG, wl("Running", "Running", "Running", "Pending"), ("Running", 3, 0, 0)),
        (PG, wl("Running", "Running", "Running", "Running", "Succeeded", "Failed"), ("Running", 4, 1, 1)),
        (PG, wl("Succeeded", "Succeeded", "Succeeded", "Succeeded", finished=True), ("Pending", 0, 4, 0)),
        (replace(PG, api_version=VC), wl("Succeeded", "Succeeded", "Succeeded", "Succeeded", finished=True),
         ("Completed", 0, 4, 0)),
        (replace(PG, api_version=VC), wl(), ("Inqueue", 0, 0, 0)),
        (PG, wl("Running", "Running", evicted=True), ("Unknown", 2, 0, 0)),
    ],
    ids=["no Job yet", "waiting for quota", "fewer than minMember allocated", "minMember allocated (bound counts)",
         "counts by phase", "kube-batch: finished is no longer allocated", "volcano: Completed",
         "volcano: admitted, not placed: Inqueue", "evicted with running pods: Unknown"],
)
def test_group_status(pg: PodGroup, workload: Workload | None, expected: tuple[str, int, int, int]) -> None:
    st = group_status(pg, [workload] if workload is not None else [])
    assert (st.phase, st.running, st.succeeded, st.failed) == expected
