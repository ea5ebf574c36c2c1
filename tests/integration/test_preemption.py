"""Preemption carried out on real agents: victims get SIGTERM, exit, are requeued and run again."""

from __future__ import annotations

import uuid
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
  preemption: {withinClusterQueue: LowerPriority}
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
---
apiVersion: sluicegate.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: sluicegate.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: low}
value: 1
"""


def pods(server: str, name: str) -> list[dict]:
    return get_json(server, "workload", name).get("status", {}).get("extra", {}).get("pods", [])


def conditions(server: str, name: str) -> dict[str, dict]:
    return {c["type"]: c for c in get_json(server, "workload", name).get("status", {}).get("conditions", [])}


def test_high_priority_preempts_running_low_priority_across_two_agents(tmp_path: Path) -> None:
    c = Controller(tmp_path, extra=["--node-heartbeat-timeout", "3", "--agent-heartbeat-interval", "0.3"]).start()
    agents = [Agent(tmp_path, c.address, "node-a").start(), Agent(tmp_path, c.address, "node-b").start()]
    marker = f"sg-{uuid.uuid4().hex[:8]}"
    s = c.address
    try:
        (tmp_path / "queues.yaml").write_text(QUEUES)
        sluicectl(s, "apply", "-f", str(tmp_path / "queues.yaml"))
        script = f"trap 'echo got TERM; exit 0' TERM; echo started; while :; do sleep 0.1; done # {marker}"
        for i in range(4):
            sluicectl(s, "run", "--queue", "lq", "--name", f"low-{i}", "--cpu", "1", "--priority-class", "low",
                      "--", "sh", "-c", script)
            # Admission order decides who is "most recently admitted": wait for each.
            wait_for(f"low-{i} running", lambda i=i: [p.get("phase") for p in pods(s, f"low-{i}")] == ["Running"])
        assert sorted({p["node"] for i in range(4) for p in pods(s, f"low-{i}")}) == ["node-a", "node-b"]

        sluicectl(s, "run", "--queue", "lq", "--name", "urgent", "--cpu", "2", "--priority-class", "high",
                  "--", "sh", "-c", "echo urgent work")
        wait_for("urgent finished", lambda: conditions(s, "urgent").get("Finished", {}).get("status") == "True",
                 timeout=60)

        # Exactly the two most recently admitted low-priority workloads were preempted.
        preempted = {f"low-{i}" for i in range(4) if "Preempted" in conditions(s, f"low-{i}")}
        assert preempted == {"low-2", "low-3"}
        urgent_uid = get_json(s, "workload", "urgent")["metadata"]["uid"]
        for name in sorted(preempted):
            cond = conditions(s, name)["Preempted"]
            # Re-admitted since: the condition is history, its message kept (Kueue's "Previously: ...").
            assert cond["message"] == (
                f"Previously: Preempted to accommodate a workload (UID: {urgent_uid}, ClusterQueue: cq) "
                "due to prioritization in the ClusterQueue")
        # The victims' processes got SIGTERM and exited by themselves; nobody else was signalled.
        logs = [p.read_text() for a in agents for p in a.data_dir.glob("pods/*/main.log")]
        assert sum("got TERM" in text for text in logs) == 2
        # Nothing lost: the victims run again once the urgent work is done.
        for name in sorted(preempted):
            wait_for(f"{name} running again", lambda name=name: [p.get("phase") for p in pods(s, name)] == ["Running"],
                     timeout=30)
        assert {f"low-{i}" for i in range(4) if [p.get("phase") for p in pods(s, f"low-{i}")] == ["Running"]} == {
            "low-0", "low-1", "low-2", "low-3"}
        for i in range(4):
            sluicectl(s, "delete", "workload", f"low-{i}")
        wait_for("all deleted", lambda: get_json(s, "workloads")["items"] == [
            w for w in get_json(s, "workloads")["items"] if w["metadata"]["name"] == "urgent"], timeout=30)
    finally:
        for a in agents:
            a.stop()
        c.stop()
        kill_marked_processes(marker)
