"""/metrics of a real controller and a real agent after jobs ran, one of them preempted: Kueue's and the
kubelet's series, parsed with prometheus_client's parser."""

from __future__ import annotations

import json
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluicegate.common.metrics import CONTENT_TYPE
from tests.builders import container_doc, workload_doc
from tests.unit.metrics.exposition import Scrape

from .harness import Agent, Controller, kill_marked_processes, sluicectl, wait_for, workload_states

pytestmark = pytest.mark.integration

QUEUES = """
apiVersion: sluicegate.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: sluicegate.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources: [{name: cpu, nominalQuota: "2"}]
---
apiVersion: sluicegate.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: default}
spec: {clusterQueue: cq}
"""


def scrape(health: str) -> Scrape:
    with urllib.request.urlopen(f"http://{health}/metrics", timeout=5) as reply:
        assert reply.headers["Content-Type"] == CONTENT_TYPE
        return Scrape(reply.read().decode("utf-8"))


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Controller, Agent, str]]:
    c = Controller(tmp_path, extra=["--node-heartbeat-timeout", "3", "--agent-heartbeat-interval", "0.3"]).start()
    agent = Agent(tmp_path, c.address, "node-a", allocatable="cpu=2,memory=2Gi").start()
    (tmp_path / "queues.yaml").write_text(QUEUES)
    sluicectl(c.address, "apply", "-f", str(tmp_path / "queues.yaml"))
    marker = f"sg-{uuid.uuid4().hex[:8]}"
    try:
        yield c, agent, marker
    finally:
        agent.stop()
        c.stop()
        kill_marked_processes(marker)


def submit(c: Controller, tmp_path: Path, name: str, *, cpu: str, priority: int, command: str) -> None:
    body = workload_doc(name, container_doc(name="main", command=["sh", "-c", command], requests={"cpu": cpu}),
                        priority=priority, pod_spec={"terminationGracePeriodSeconds": 0})
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(body))
    sluicectl(c.address, "apply", "-f", str(path))


def test_metrics_after_a_job_ran_and_one_was_preempted(cluster: tuple[Controller, Agent, str], tmp_path: Path) -> None:
    c, agent, marker = cluster
    submit(c, tmp_path, "low", cpu="2", priority=0, command=f"sleep 60 # {marker}")
    wait_for("low running", lambda: any(p.get("phase") == "Running" for p in agent.pods()))
    # Long enough to be seen Running: a pod that goes straight to Succeeded never makes the workload PodsReady
    # (as in Kueue, whose reconciler marks a finished job Finished before it looks at readiness).
    submit(c, tmp_path, "high", cpu="1", priority=100, command=f"sleep 1 # {marker}")
    wait_for("high finished", lambda: workload_states(c.address).get("high") == "Finished", timeout=60)

    s = scrape(c.health)
    cq = {"cluster_queue": "cq", "priority_class": "", "replica_role": "standalone"}
    assert s.type_of("kueue_admitted_workloads") == "counter"
    assert s.value("kueue_admitted_workloads_total", **cq) is not None
    assert s.value("kueue_admitted_workloads_total", **cq) >= 2       # low, high (and low again once high ended)
    assert s.value("kueue_evicted_workloads_total", reason="Preempted", underlying_cause="", **cq) == 1
    assert s.series("kueue_preempted_workloads_total") == {
        (("preempting_cluster_queue", "cq"), ("reason", "InClusterQueue"), ("replica_role", "standalone")): 1.0}
    assert s.value("kueue_finished_workloads_total", **cq) == 1
    assert s.type_of("kueue_admission_wait_time_seconds") == "histogram"
    assert s.value("kueue_admission_wait_time_seconds_count", **cq) == s.value("kueue_admitted_workloads_total", **cq)
    assert s.value("kueue_admission_attempts_total", result="success", replica_role="standalone") >= 2
    assert s.value("kueue_cluster_queue_nominal_quota", cohort="", cluster_queue="cq", flavor="default",
                   resource="cpu", replica_role="standalone") == 2.0
    assert s.type_of("kueue_admitted_until_ready_wait_time_seconds") == "histogram"
    assert s.value("kueue_admitted_until_ready_wait_time_seconds_count", **cq) >= 2
    assert s.value("kueue_ready_wait_time_seconds_count", **cq) == s.value(
        "kueue_admitted_until_ready_wait_time_seconds_count", **cq)
    assert s.value("kueue_ready_wait_time_seconds_sum", **cq) >= s.value(
        "kueue_admitted_until_ready_wait_time_seconds_sum", **cq)
    assert s.value("sluicegate_node_ready", node="node-a") == 1
    assert s.value("sluicegate_controller_leader") == 1
    assert s.value("process_resident_memory_bytes") > 0

    a = scrape(agent.health)
    assert a.type_of("kubelet_pod_start_duration_seconds") == "histogram"
    assert a.value("kubelet_pod_start_duration_seconds_count") >= 2
    assert a.value("sluicegate_node_allocatable", resource="cpu") == 2.0
    assert a.value("sluicegate_agent_controller_connected") == 1
    assert a.value("process_resident_memory_bytes") > 0
    assert a.type_of("kubelet_evictions") == "counter"
