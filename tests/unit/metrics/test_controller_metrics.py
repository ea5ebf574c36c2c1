"""The controller's metrics after a known sequence of admissions, preemptions and evictions.

An in-process Manager in quota-only mode on a clock the test sets, scraped
through prometheus_client's own parser: names, types, labels and values.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from sluicegate.controller.manager import Manager
from sluicegate.controller.metrics import ControllerMetrics, wait_buckets
from sluicegate.controller.store.memory import MemoryStore
from sluicegate.manifest.loader import RawDocument, parse_text
from sluicegate.model.config import ControllerConfig, FairSharingConfig
from tests.builders import container_doc, workload_doc

from .exposition import Scrape

QUEUES = """
apiVersion: sluicegate.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: urgent}
value: 100
---
apiVersion: sluicegate.io/v1beta2
kind: ClusterQueue
metadata: {name: team-a}
spec:
  namespaceSelector: {}
  cohortName: research
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: "4", borrowingLimit: "2"}
      - {name: memory, nominalQuota: 8Gi}
---
apiVersion: sluicegate.io/v1beta2
kind: ClusterQueue
metadata: {name: team-b}
spec:
  namespaceSelector: {}
  cohortName: research
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: "2", lendingLimit: "1"}
      - {name: memory, nominalQuota: 4Gi}
---
apiVersion: sluicegate.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: default}
spec: {clusterQueue: team-a}
---
apiVersion: sluicegate.io/v1beta2
kind: LocalQueue
metadata: {name: orphan, namespace: default}
spec: {clusterQueue: nowhere}
"""

STANDALONE = {"replica_role": "standalone"}


class Clock:
    def __init__(self) -> None:
        self.t = 1_000.0

    def __call__(self) -> float:
        return self.t


def workload(name: str, cpu: str, *, priority: int | None = None, **spec: Any) -> RawDocument:
    body = workload_doc(name, container_doc(name="c", requests={"cpu": cpu, "memory": "1Gi"}), priority=priority)
    body["spec"].update(spec)
    return parse_text(json.dumps(body), name, fmt="json")[0]


def build(metrics: ControllerMetrics, clock: Clock, *, fair: bool = False) -> Manager:
    config = ControllerConfig(fair_sharing=FairSharingConfig(enabled=True)) if fair else None
    m = Manager(MemoryStore(), clock=clock, placement=False, observer=metrics, config=config)
    metrics.attach(m)
    m.apply(parse_text(QUEUES, "queues.yaml"))
    return m


def settle(m: Manager, clock: Clock, bound: int = 20) -> None:
    for _ in range(bound):
        if not m.schedule_once().made_progress:
            return
        clock.t += 1
    raise AssertionError("scheduler did not settle")


@pytest.fixture
def story() -> tuple[ControllerMetrics, Manager, Clock]:
    """low (3 cpu) admitted after 5s; urgent (3 cpu, class urgent; 6 cpu exceed team-a's 4 plus the 1 team-b
    lends) preempts it and is admitted;
    big (10 cpu) can never fit; urgent is then deactivated, and low comes back."""
    metrics, clock = ControllerMetrics(), Clock()
    m = build(metrics, clock)
    m.create_workload(workload("low", "3", priority=0))
    clock.t += 5
    settle(m, clock)                      # low admitted at 1005: waited 5s
    clock.t = 1_100.0
    m.create_workload(workload("urgent", "3", priorityClassRef={
        "group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "urgent"}))
    clock.t += 2
    settle(m, clock)                      # preempts low at 1102, admitted at 1103: waited 3s
    m.create_workload(workload("big", "10", priority=0))
    settle(m, clock)
    return metrics, m, clock


def test_counters_after_admissions_a_preemption_and_evictions(story: tuple[ControllerMetrics, Manager, Clock]) -> None:
    metrics, m, clock = story
    s = Scrape.of(metrics.registry)
    cq_low = {"cluster_queue": "team-a", "priority_class": "", **STANDALONE}
    cq_urgent = {"cluster_queue": "team-a", "priority_class": "urgent", **STANDALONE}
    assert s.type_of("kueue_admitted_workloads") == "counter"
    assert s.value("kueue_admitted_workloads_total", **cq_low) == 1
    assert s.value("kueue_admitted_workloads_total", **cq_urgent) == 1
    assert s.value("kueue_quota_reserved_workloads_total", **cq_urgent) == 1
    assert s.value("kueue_local_queue_admitted_workloads_total", name="lq", namespace="default",
                   priority_class="urgent", **STANDALONE) == 1
    assert s.type_of("kueue_admission_wait_time_seconds") == "histogram"
    assert (s.value("kueue_admission_wait_time_seconds_count", **cq_low),
            s.value("kueue_admission_wait_time_seconds_sum", **cq_low)) == (1, 5.0)
    assert (s.value("kueue_admission_wait_time_seconds_count", **cq_urgent),
            s.value("kueue_admission_wait_time_seconds_sum", **cq_urgent)) == (1, 3.0)
    assert s.value("kueue_admission_wait_time_seconds_bucket", le="2.5", **cq_urgent) == 0
    assert s.value("kueue_admission_wait_time_seconds_bucket", le="5.0", **cq_urgent) == 1
    assert s.value("kueue_quota_reserved_wait_time_seconds_sum", **cq_low) == 5.0
    assert s.series("kueue_evicted_workloads_total") == {
        (("cluster_queue", "team-a"), ("priority_class", ""), ("reason", "Preempted"),
         ("replica_role", "standalone"), ("underlying_cause", "")): 1.0}
    assert s.series("kueue_local_queue_evicted_workloads_total") == {
        (("name", "lq"), ("namespace", "default"), ("priority_class", ""), ("reason", "Preempted"),
         ("replica_role", "standalone"), ("underlying_cause", "")): 1.0}
    assert s.series("kueue_preempted_workloads_total") == {
        (("preempting_cluster_queue", "team-a"), ("reason", "InClusterQueue"), ("replica_role", "standalone")): 1.0}
    # Cycles that had heads: low's, the preempting one, urgent's, then big's and low's failed tries.
    attempts = s.series("kueue_admission_attempts_total")
    assert attempts[(("replica_role", "standalone"), ("result", "success"))] == 2
    inadmissible = attempts[(("replica_role", "standalone"), ("result", "inadmissible"))]
    assert inadmissible >= 2
    assert s.value("kueue_admission_attempt_duration_seconds_count", result="success", **STANDALONE) == 2
    assert s.value("sluicegate_scheduling_cycles_total") == 2 + inadmissible

    m.set_active("default", "urgent", False)
    settle(m, clock)                      # low fits again and is admitted
    s = Scrape.of(metrics.registry)
    assert s.value("kueue_evicted_workloads_total", cluster_queue="team-a", reason="Deactivated",
                   underlying_cause="", priority_class="urgent", **STANDALONE) == 1
    assert s.value("kueue_admitted_workloads_total", **cq_low) == 2


def test_gauges_read_the_manager_at_scrape_time(story: tuple[ControllerMetrics, Manager, Clock]) -> None:
    metrics, _, _ = story
    s = Scrape.of(metrics.registry)
    assert s.type_of("kueue_pending_workloads") == "gauge"
    # low (preempted: 3 cpu no longer fit beside urgent's 3) and big (never fits) are parked.
    assert s.series("kueue_pending_workloads") == {
        (("cluster_queue", "team-a"), ("replica_role", "standalone"), ("status", "active")): 0.0,
        (("cluster_queue", "team-a"), ("replica_role", "standalone"), ("status", "inadmissible")): 2.0,
        (("cluster_queue", "team-b"), ("replica_role", "standalone"), ("status", "active")): 0.0,
        (("cluster_queue", "team-b"), ("replica_role", "standalone"), ("status", "inadmissible")): 0.0,
    }
    assert s.value("kueue_local_queue_pending_workloads", name="lq", namespace="default", status="inadmissible",
                   **STANDALONE) == 2
    assert s.value("kueue_local_queue_pending_workloads", name="orphan", namespace="default", status="active",
                   **STANDALONE) == 0
    assert s.value("kueue_reserving_active_workloads", cluster_queue="team-a", **STANDALONE) == 1
    assert s.value("kueue_admitted_active_workloads", cluster_queue="team-a", **STANDALONE) == 1
    assert s.value("kueue_local_queue_admitted_active_workloads", name="lq", namespace="default",
                   **STANDALONE) == 1
    assert s.value("kueue_cluster_queue_status", cluster_queue="team-a", status="active", **STANDALONE) == 1
    assert s.value("kueue_cluster_queue_status", cluster_queue="team-a", status="pending", **STANDALONE) == 0
    assert s.value("kueue_local_queue_status", name="orphan", namespace="default", active="False",
                   **STANDALONE) == 1
    cpu_a = {"cohort": "research", "cluster_queue": "team-a", "flavor": "default", "resource": "cpu", **STANDALONE}
    mem_b = {"cohort": "research", "cluster_queue": "team-b", "flavor": "default", "resource": "memory",
             **STANDALONE}
    assert s.value("kueue_cluster_queue_nominal_quota", **cpu_a) == 4.0      # cores, not millicores
    assert s.value("kueue_cluster_queue_nominal_quota", **mem_b) == 4 * 2**30
    assert s.value("kueue_cluster_queue_borrowing_limit", **cpu_a) == 2.0
    assert s.value("kueue_cluster_queue_lending_limit", **cpu_a) == math.inf
    assert s.value("kueue_cluster_queue_lending_limit", cohort="research", cluster_queue="team-b",
                   flavor="default", resource="cpu", **STANDALONE) == 1.0
    assert s.value("kueue_cluster_queue_resource_usage", **cpu_a) == 3.0
    assert s.value("kueue_cluster_queue_resource_reservation", **cpu_a) == 3.0
    assert s.value("kueue_local_queue_resource_usage", name="lq", namespace="default", flavor="default",
                   resource="cpu", **STANDALONE) == 3.0
    assert s.value("sluicegate_workloads") == 3
    assert s.value("sluicegate_store_degraded") == 0
    assert s.value("sluicegate_controller_leader") == 1
    assert s.type_of("process_cpu_seconds") == "counter"


def test_a_follower_keeps_counters_and_exports_no_queue_gauges(
    story: tuple[ControllerMetrics, Manager, Clock],
) -> None:
    metrics, _, clock = story
    metrics.set_role("follower", 7)
    metrics.attach(None)
    s = Scrape.of(metrics.registry)
    assert (s.value("sluicegate_controller_leader"), s.value("sluicegate_controller_epoch")) == (0, 7)
    assert s.series("kueue_pending_workloads") == {}
    assert s.value("sluicegate_workloads") is None
    assert s.value("kueue_admitted_workloads_total", cluster_queue="team-a", priority_class="", **STANDALONE) == 1

    # Taking over: a new Manager over the same metrics; the counters go on from where they were,
    # new counts carry the new role.
    metrics.set_role("leader", 8)
    m2 = build(metrics, clock)
    m2.create_workload(workload("again", "1", priority=0))
    settle(m2, clock)
    s = Scrape.of(metrics.registry)
    assert s.value("kueue_admitted_workloads_total", cluster_queue="team-a", priority_class="", **STANDALONE) == 1
    assert s.value("kueue_admitted_workloads_total", cluster_queue="team-a", priority_class="",
                   replica_role="leader") == 1
    assert s.value("kueue_pending_workloads", cluster_queue="team-a", status="active", replica_role="leader") == 0
    assert (s.value("sluicegate_controller_leader"), s.value("sluicegate_controller_epoch")) == (1, 8)


@pytest.mark.parametrize(("role", "epoch", "problem"), [
    ("primary", 1, "role must be one of leader, follower, standalone, got 'primary'"),
    ("leader", -1, "epoch must be a non-negative integer, got -1"),
    ("leader", True, "epoch must be a non-negative integer, got True"),
])
def test_bad_role_or_epoch_is_refused_and_changes_nothing(role: str, epoch: int, problem: str) -> None:
    metrics = ControllerMetrics()
    with pytest.raises(ValueError) as caught:
        metrics.set_role(role, epoch)
    assert str(caught.value) == problem
    assert (metrics.role, Scrape.of(metrics.registry).value("sluicegate_controller_epoch")) == ("standalone", 0)


def test_weighted_share_with_fair_sharing() -> None:
    metrics, clock = ControllerMetrics(), Clock()
    m = build(metrics, clock, fair=True)
    m.create_workload(workload("wide", "5", priority=0))   # 1 cpu above team-a's nominal 4: borrowed from team-b
    settle(m, clock)
    s = Scrape.of(metrics.registry)
    share_a = s.value("kueue_cluster_queue_weighted_share", cluster_queue="team-a", cohort="research", **STANDALONE)
    share_b = s.value("kueue_cluster_queue_weighted_share", cluster_queue="team-b", cohort="research", **STANDALONE)
    assert share_a is not None and share_a > 0
    assert share_b == 0
    assert m.weighted_share("team-a", cohort=False) == math.ceil(share_a)
    assert s.value("kueue_cohort_weighted_share", cohort="research", **STANDALONE) == 0


def test_kueue_wait_buckets() -> None:
    assert wait_buckets(14) == [1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 320.0, 640.0, 1280.0, 2560.0,
                                5120.0, 10240.0]


def test_ready_waits_count_the_first_readiness_of_each_admission() -> None:
    """Told the stored states directly: admitted at 110 (created at 100), ready at 125; evicted, readmitted at
    200 with PodsReady still true from before, ready again (after WaitForRecovery) at 230."""
    from dataclasses import replace

    from sluicegate.model.conditions import set_condition
    from sluicegate.model.pods import PodRecord
    from tests.builders import with_admission
    from tests.builders import workload as pending_workload

    def ready(wl: Any, status: bool, reason: str, at: float) -> Any:
        conds = set_condition(wl.status.conditions, type_="PodsReady", status=status, reason=reason, message="",
                              now=at)
        return replace(wl, status=replace(wl.status, conditions=conds))

    metrics = ControllerMetrics()
    pods = (PodRecord(uid="u", name="p", pod_set="main", index=0, node="n"),)
    created = pending_workload("w", created=100.0)
    admitted = with_admission(created, "team-a", {"cpu": "default"}, at=110.0)
    admitted = replace(admitted, status=replace(admitted.status, pods=pods))
    metrics.workload_stored(created, admitted)
    running = ready(admitted, True, "PodsReady", 125.0)
    metrics.workload_stored(admitted, running)
    metrics.workload_stored(running, running)                    # rewritten, not a new readiness
    # Evicted and readmitted: PodsReady is still true from the first admission, then pods restart.
    evicted_conds = set_condition(running.status.conditions, type_="Evicted", status=True, reason="Preempted",
                                  message="", now=150.0)
    evicted = replace(running, status=replace(running.status, conditions=evicted_conds))
    metrics.workload_stored(running, evicted)
    pending = replace(evicted, status=replace(evicted.status, admission=None, conditions=tuple(
        c for c in evicted.status.conditions if c.type not in ("QuotaReserved", "Admitted"))))
    again = with_admission(pending, "team-a", {"cpu": "default"}, at=200.0)
    again = replace(again, status=replace(again.status, pods=pods, conditions=(
        *again.status.conditions, *(c for c in evicted.status.conditions if c.type in ("PodsReady", "Evicted")))))
    metrics.workload_stored(pending, again)
    recovering = ready(again, False, "WaitForRecovery", 210.0)
    metrics.workload_stored(again, recovering)
    metrics.workload_stored(recovering, ready(recovering, True, "PodsReady", 230.0))

    s = Scrape.of(metrics.registry)
    cq = {"cluster_queue": "team-a", "priority_class": "", **STANDALONE}
    assert (s.value("kueue_admitted_until_ready_wait_time_seconds_count", **cq),
            s.value("kueue_admitted_until_ready_wait_time_seconds_sum", **cq)) == (2, 15.0 + 30.0)
    # Queued at creation (100) the first time, at the eviction (150) the second.
    assert s.value("kueue_ready_wait_time_seconds_sum", **cq) == 25.0 + 80.0
    assert s.value("kueue_admission_wait_time_seconds_sum", **cq) == 10.0 + 50.0
    assert s.value("kueue_evicted_workloads_total", reason="Preempted", underlying_cause="", **cq) == 1
