"""Workload lifecycle on real agents: pods-ready timeout and backoff, execution limit, reclaim, Jobs."""

from __future__ import annotations

import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from .harness import Agent, Controller, get_json, kill_marked_processes, sluicectl, wait_for

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
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources: [{name: cpu, nominalQuota: "4"}]
---
apiVersion: sluicegate.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: default}
spec: {clusterQueue: cq}
"""

CONFIG = """
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
waitForPodsReady:
  timeout: 2s
  blockAdmission: false
  requeuingStrategy: {timestamp: Eviction, backoffBaseSeconds: 1, backoffMaxSeconds: 10, backoffLimitCount: 2}
integrations:
  labelKeysToCopy: [team]
"""


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Controller, list[Agent], str]]:
    (tmp_path / "config.yaml").write_text(CONFIG)
    c = Controller(tmp_path, extra=["--node-heartbeat-timeout", "3", "--agent-heartbeat-interval", "0.3",
                                    "--configuration", str(tmp_path / "config.yaml")]).start()
    agents = [Agent(tmp_path, c.address, "node-a").start(), Agent(tmp_path, c.address, "node-b").start()]
    (tmp_path / "queues.yaml").write_text(QUEUES)
    sluicectl(c.address, "apply", "-f", str(tmp_path / "queues.yaml"))
    marker = f"sg-{uuid.uuid4().hex[:8]}"
    try:
        yield c, agents, marker
    finally:
        for a in agents:
            a.stop()
        c.stop()
        kill_marked_processes(marker)


def apply(c: Controller, tmp_path: Path, text: str) -> None:
    f = tmp_path / f"doc-{uuid.uuid4().hex[:6]}.yaml"
    f.write_text(textwrap.dedent(text))
    sluicectl(c.address, "apply", "-f", str(f))


def wl(c: Controller, name: str) -> dict:
    return get_json(c.address, "workload", name)


def cond(w: dict, type_: str) -> dict:
    return next((x for x in w.get("status", {}).get("conditions", []) if x["type"] == type_), {})


def test_never_ready_workload_is_evicted_requeued_with_growing_backoff_then_deactivated(cluster, tmp_path: Path) -> None:
    c, _, marker = cluster
    apply(c, tmp_path, f"""
        apiVersion: sluicegate.io/v1beta2
        kind: Workload
        metadata: {{name: never-ready}}
        spec:
          queueName: lq
          podSets:
          - count: 1
            template:
              spec:
                terminationGracePeriodSeconds: 0
                containers:
                - name: main
                  command: [sh, -c, "sleep 60 # {marker}"]
                  resources: {{requests: {{cpu: "1"}}}}
                  readinessProbe: {{exec: {{command: ["false"]}}, periodSeconds: 1}}
        """)
    seen: list[tuple[int, float]] = []

    def record() -> bool:
        w = wl(c, "never-ready")
        rs = w.get("status", {}).get("requeueState")
        evicted = cond(w, "Evicted")
        # Only while still evicted: once admitted again the condition's time is the admission's.
        if rs and evicted.get("status") == "True" and (not seen or seen[-1][0] != rs["count"]):
            from sluicegate.manifest.timefmt import parse_rfc3339

            delay = parse_rfc3339(rs["requeueAt"]) - parse_rfc3339(evicted["lastTransitionTime"]) if rs.get("requeueAt") else -1
            seen.append((rs["count"], delay))
        return w["spec"].get("active") is False

    wait_for("deactivation after the backoff limit", record, timeout=150, interval=0.05)
    w = wl(c, "never-ready")
    assert [count for count, _ in seen] == [1, 2, 3]
    # Backoff doubles: ~1s, then ~2s (base 1s), each a little jittered.
    assert 0.9 < seen[0][1] < 1.5 and 1.9 < seen[1][1] < 2.5
    ev = cond(w, "Evicted")
    assert (ev["status"], ev["reason"]) == ("True", "InactiveWorkload")
    assert "maximum number of re-queuing retries" in ev["message"]
    assert w["status"]["requeueState"]["count"] == 3
    # Reactivation resets the requeue state.
    sluicectl(c.address, "resume", "workload", "never-ready")
    # Reset, then (admitted again, never ready) perhaps counted once more: either
    # shows the reset; polling only for None could miss its window on a slow machine.
    wait_for("requeue state reset", lambda: (wl(c, "never-ready").get("status", {}).get("requeueState")
                                             or {"count": 1})["count"] == 1)
    sluicectl(c.address, "stop", "workload", "never-ready")


def test_maximum_execution_time_deactivates_a_running_workload(cluster, tmp_path: Path) -> None:
    c, agents, marker = cluster
    apply(c, tmp_path, f"""
        apiVersion: sluicegate.io/v1beta2
        kind: Workload
        metadata: {{name: overtime}}
        spec:
          queueName: lq
          maximumExecutionTimeSeconds: 2
          podSets:
          - count: 1
            template:
              spec:
                terminationGracePeriodSeconds: 1
                containers:
                - name: main
                  command: [sh, -c, "sleep 60 # {marker}"]
                  resources: {{requests: {{cpu: "1"}}}}
        """)
    wait_for("deactivated", lambda: wl(c, "overtime")["spec"].get("active") is False, timeout=30)
    wait_for("quota released", lambda: not wl(c, "overtime").get("status", {}).get("admission"), timeout=30)
    w = wl(c, "overtime")
    ev = cond(w, "Evicted")
    assert ev["reason"] == "InactiveWorkload" and "maximum execution time" in ev["message"]
    # Accumulated time is reset once deactivated.
    assert w["status"].get("accumulatedPastExecutionTimeSeconds", 0) == 0
    assert all(p["phase"] != "Running" for a in agents for p in a.pods())


def test_pods_that_finish_early_release_quota_for_a_waiting_workload(cluster, tmp_path: Path) -> None:
    c, _, marker = cluster
    apply(c, tmp_path, f"""
        apiVersion: sluicegate.io/v1beta2
        kind: Workload
        metadata: {{name: wide}}
        spec:
          queueName: lq
          podSets:
          - name: workers
            count: 4
            template:
              spec:
                terminationGracePeriodSeconds: 0
                containers:
                - name: main
                  command: [sh, -c, 'if [ "$SLUICEGATE_POD_INDEX" -lt 2 ]; then exit 0; fi; sleep 60 # {marker}']
                  resources: {{requests: {{cpu: "1"}}}}
        """)
    wait_for("wide admitted", lambda: cond(wl(c, "wide"), "Admitted").get("status") == "True")
    sluicectl(c.address, "run", "--queue", "lq", "--name", "waiting", "--cpu", "1", "--count", "2", "--",
              "sh", "-c", f"sleep 60 # {marker}")
    wait_for("waiting admitted while wide still runs",
             lambda: cond(wl(c, "waiting"), "Admitted").get("status") == "True", timeout=30)
    w = wl(c, "wide")
    assert w["status"]["reclaimablePods"] == [{"name": "workers", "count": 2}]
    assert cond(w, "Finished") == {}
    running = [p for p in w["status"]["extra"]["pods"] if p["phase"] == "Running"]
    assert len(running) == 2
    cq = get_json(c.address, "clusterqueue", "cq")["status"]["flavorsReservation"][0]["resources"][0]
    assert cq["total"] == "4"  # 2 still running in wide + 2 of waiting


def test_a_job_with_three_completions_runs_to_completion(cluster, tmp_path: Path) -> None:
    c, _, _ = cluster
    apply(c, tmp_path, """
        apiVersion: batch/v1
        kind: Job
        metadata:
          name: counter
          labels: {kueue.x-k8s.io/queue-name: lq, team: ml, other: x}
        spec:
          parallelism: 2
          completions: 3
          completionMode: Indexed
          template:
            spec:
              restartPolicy: Never
              containers:
              - name: main
                command: [sh, -c, 'echo "index $JOB_COMPLETION_INDEX"']
                resources: {requests: {cpu: "1"}}
        """)
    wait_for("job finished", lambda: cond(wl(c, "counter"), "Finished").get("status") == "True", timeout=60)
    w = wl(c, "counter")
    assert cond(w, "Finished")["reason"] == "Succeeded"
    assert w["spec"]["podSets"][0]["count"] == 2
    assert w["metadata"]["labels"] == {"team": "ml"}
    succeeded = sorted(p["index"] for p in w["status"]["extra"]["pods"] if p["phase"] == "Succeeded")
    assert succeeded == [0, 1, 2]
    logs = sluicectl(c.address, "logs", "counter").stdout.split("\n")
    assert sorted(line for line in logs if line) == ["index 0", "index 1", "index 2"]


def test_a_job_retries_failed_pods_up_to_its_backoff_limit(cluster, tmp_path: Path) -> None:
    c, _, _ = cluster
    apply(c, tmp_path, """
        apiVersion: batch/v1
        kind: Job
        metadata:
          name: flaky
          labels: {kueue.x-k8s.io/queue-name: lq}
        spec:
          backoffLimit: 2
          template:
            spec:
              restartPolicy: Never
              containers:
              - name: main
                command: [sh, -c, "exit 4"]
                resources: {requests: {cpu: "1"}}
        """)
    wait_for("job failed", lambda: cond(wl(c, "flaky"), "Finished").get("status") == "True", timeout=60)
    w = wl(c, "flaky")
    fin = cond(w, "Finished")
    assert fin["reason"] == "Failed" and "backoff limit (2)" in fin["message"]
    assert [p["phase"] for p in w["status"]["extra"]["pods"]] == ["Failed", "Failed", "Failed"]


def test_a_requeued_workload_asks_quota_only_for_the_pods_that_did_not_complete(cluster, tmp_path: Path) -> None:
    """Kueue keeps reclaimablePods through an eviction: the two pods that succeeded are not run again."""
    test_pods_that_finish_early_release_quota_for_a_waiting_workload(cluster, tmp_path)
    c, _, _ = cluster
    sluicectl(c.address, "stop", "workload", "wide")
    wait_for("wide's quota released", lambda: not wl(c, "wide").get("status", {}).get("admission"), timeout=30)
    assert wl(c, "wide")["status"]["reclaimablePods"] == [{"name": "workers", "count": 2}]
    sluicectl(c.address, "resume", "workload", "wide")
    # 4 cpu of quota, 2 held by "waiting": wide fits only because it needs 2.
    wait_for("wide admitted again beside waiting", lambda: cond(wl(c, "wide"), "Admitted").get("status") == "True",
             timeout=30)
    w = wl(c, "wide")
    assert cond(wl(c, "waiting"), "Admitted").get("status") == "True"
    assert w["status"]["admission"]["podSetAssignments"][0]["count"] == 2
    current = [p for p in w["status"]["extra"]["pods"] if not p.get("replaced")]
    done = [p for p in w["status"]["extra"]["pods"] if p.get("replaced")]
    assert sorted(p["index"] for p in current) == [2, 3]
    assert sorted((p["index"], p["phase"]) for p in done) == [(0, "Succeeded"), (1, "Succeeded")]
