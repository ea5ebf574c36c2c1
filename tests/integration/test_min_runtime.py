"""Minimum runtime before reclaim, on a real agent: a borrowed workload within its
ClusterQueue's minAdmitDuration survives a reclaim, and is reclaimed once it has passed."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from .harness import Agent, Controller, get_json, kill_marked_processes, sluicectl, wait_for

pytestmark = pytest.mark.integration

# Long enough that submitting the reclaiming workload and reading its message (two CLI
# round trips, several seconds on a loaded 2-core machine) happen well inside it.
PROTECTION_S = 12.0

QUEUES = f"""
apiVersion: sluicegate.io/v1beta2
kind: ResourceFlavor
metadata: {{name: default}}
---
apiVersion: sluicegate.io/v1beta2
kind: ClusterQueue
metadata: {{name: owner}}
spec:
  cohortName: lab
  namespaceSelector: {{}}
  preemption: {{reclaimWithinCohort: Any}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{{name: default, resources: [{{name: cpu, nominalQuota: "2"}}]}}]
---
apiVersion: sluicegate.io/v1beta2
kind: ClusterQueue
metadata: {{name: borrower}}
spec:
  cohortName: lab
  namespaceSelector: {{}}
  minAdmitDuration: {PROTECTION_S:g}s
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{{name: default, resources: [{{name: cpu, nominalQuota: "0"}}]}}]
---
apiVersion: sluicegate.io/v1beta2
kind: LocalQueue
metadata: {{name: owner, namespace: default}}
spec: {{clusterQueue: owner}}
---
apiVersion: sluicegate.io/v1beta2
kind: LocalQueue
metadata: {{name: borrower, namespace: default}}
spec: {{clusterQueue: borrower}}
"""


def conditions(server: str, name: str) -> dict[str, dict]:
    return {c["type"]: c for c in get_json(server, "workload", name).get("status", {}).get("conditions", [])}


def phases(server: str, name: str) -> list[str]:
    return [p.get("phase", "") for p in get_json(server, "workload", name).get("status", {}).get("extra", {})
            .get("pods", [])]


def _ts(cond: dict) -> float:
    from sluicegate.manifest.timefmt import parse_rfc3339

    return parse_rfc3339(cond["lastTransitionTime"])


def test_borrowed_workload_survives_reclaim_until_its_minimum_runtime_ends(tmp_path: Path) -> None:
    c = Controller(tmp_path, extra=["--node-heartbeat-timeout", "3", "--agent-heartbeat-interval", "0.3"]).start()
    agent = Agent(tmp_path, c.address, "node-a").start()
    marker = f"sg-{uuid.uuid4().hex[:8]}"
    s = c.address
    try:
        (tmp_path / "queues.yaml").write_text(QUEUES)
        sluicectl(s, "apply", "-f", str(tmp_path / "queues.yaml"))
        script = f"trap 'echo got TERM; exit 0' TERM; while :; do sleep 0.1; done # {marker}"
        sluicectl(s, "run", "--queue", "borrower", "--name", "borrowed", "--cpu", "2", "--", "sh", "-c", script)
        wait_for("borrowed running", lambda: phases(s, "borrowed") == ["Running"])
        admitted_at = _ts(conditions(s, "borrowed")["QuotaReserved"])

        sluicectl(s, "run", "--queue", "owner", "--name", "owner-job", "--cpu", "2", "--", "sh", "-c", "echo mine")
        # The reclaim is held back, and the pending workload says why.
        message = wait_for(
            "owner-job told about the minimum runtime",
            lambda: (m := conditions(s, "owner-job").get("QuotaReserved", {}).get("message", ""))
            and "minimum runtime (minAdmitDuration)" in m and m,
        )
        assert "1 workload(s) it could preempt" in message
        assert "Preempted" not in conditions(s, "borrowed")
        assert phases(s, "borrowed") == ["Running"]

        # Once protection ends the timer retries it: the borrowed workload is reclaimed, not earlier.
        wait_for("borrowed preempted", lambda: "Preempted" in conditions(s, "borrowed"), timeout=PROTECTION_S + 30)
        # (It may already be re-admitted: then the condition is history, "Previously: ...".)
        assert "reclamation within the cohort" in conditions(s, "borrowed")["Preempted"]["message"]
        wait_for("owner-job finished", lambda: conditions(s, "owner-job").get("Finished", {}).get("status") == "True",
                 timeout=30)
        (pod,) = get_json(s, "workload", "owner-job")["status"]["extra"]["pods"]
        assert pod["startedAt"] >= admitted_at + PROTECTION_S
        logs = [p.read_text() for p in agent.data_dir.glob("pods/*/main.log")]
        assert sum("got TERM" in text for text in logs) == 1
    finally:
        agent.stop()
        c.stop()
        kill_marked_processes(marker)
