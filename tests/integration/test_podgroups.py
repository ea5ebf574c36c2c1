"""A kube-batch gang on a real agent: a PodGroup job with minMember 4 of 6 starts only once 4 pods fit.

kube-batch's gang plugin (kubernetes-sigs/kube-batch pkg/scheduler/plugins/gang/gang.go)
starts none of a group's pods until minMember of them can be placed;
``sluicectl get podgroups`` reports the phase and counts as kube-batch's
jobStatus (pkg/scheduler/framework/session.go) does.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

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
      resources: [{name: cpu, nominalQuota: "600m"}]
---
apiVersion: sluicegate.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: default}
spec: {clusterQueue: cq}
---
apiVersion: scheduling.incubator.k8s.io/v1alpha1
kind: PodGroup
metadata: {name: gang, namespace: default}
spec: {minMember: 4, queue: lq}
"""


def job(marker: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "gang-job", "namespace": "default",
                     "annotations": {"scheduling.k8s.io/group-name": "gang"}},
        "spec": {"parallelism": 6, "completions": 6, "template": {"spec": {"containers": [{
            "name": "main", "command": ["sh", "-c", f"while :; do sleep 0.2; done # {marker}"],
            "resources": {"requests": {"cpu": "100m"}}}]}}},
    }


def running_pods(server: str, name: str) -> int:
    wl = get_json(server, "workload", name)
    return sum(p.get("phase") == "Running" for p in wl.get("status", {}).get("extra", {}).get("pods", []))


def test_gang_of_four_of_six_starts_only_when_four_fit(tmp_path: Path) -> None:
    c = Controller(tmp_path).start()
    agent = Agent(tmp_path, c.address, "node-a").start()
    marker = f"sg-{uuid.uuid4().hex[:8]}"
    s = c.address
    try:
        (tmp_path / "queues.yaml").write_text(QUEUES)
        sluicectl(s, "apply", "-f", str(tmp_path / "queues.yaml"))
        # 300m of the 600m quota taken: 3 of the gang's pods would fit, fewer than minMember 4.
        sluicectl(s, "run", "--queue", "lq", "--name", "blocker", "--cpu", "300m", "--",
                  "sh", "-c", f"while :; do sleep 0.2; done # {marker}")
        wait_for("blocker running", lambda: running_pods(s, "blocker") == 1)
        (tmp_path / "job.json").write_text(json.dumps(job(marker)))
        sluicectl(s, "apply", "-f", str(tmp_path / "job.json"))

        def pending_with_reason() -> dict[str, Any] | None:
            wl = get_json(s, "workload", "gang-job")
            conds = {x["type"]: x for x in wl.get("status", {}).get("conditions", [])}
            qr = conds.get("QuotaReserved", {})
            return wl if qr.get("status") == "False" and qr.get("reason") == "Pending" else None

        wl = wait_for("the gang judged and left pending", pending_with_reason)
        assert not wl["status"].get("admission") and not wl["status"].get("extra", {}).get("pods")
        group = get_json(s, "podgroup", "gang")
        assert (group["status"]["phase"], group["status"]["running"]) == ("Pending", 0)

        sluicectl(s, "delete", "workload", "blocker")
        wait_for("at least 4 of the gang running", lambda: running_pods(s, "gang-job") >= 4, timeout=30)
        group = wait_for("podgroup Running", lambda: (g := get_json(s, "podgroup", "gang"))["status"]["phase"]
                         == "Running" and g["status"]["running"] >= 4 and g)
        assert group["status"]["workload"] == "gang-job"
        table = sluicectl(s, "get", "podgroups").stdout.splitlines()
        assert table[0].split() == ["NAMESPACE", "NAME", "PHASE", "MINMEMBER", "RUNNING", "SUCCEEDED", "FAILED",
                                    "QUEUE"]
        row = table[1].split()
        assert row[:4] == ["default", "gang", "Running", "4"] and int(row[4]) >= 4 and row[5:] == ["0", "0", "lq"]
        described = sluicectl(s, "describe", "podgroup", "gang").stdout
        assert "Phase:             Running" in described and "MinMember:         4" in described
        sluicectl(s, "delete", "workload", "gang-job")
        wait_for("gang-job gone", lambda: not [w for w in get_json(s, "workloads")["items"]
                                               if w["metadata"]["name"] == "gang-job"], timeout=30)
    finally:
        agent.stop()
        c.stop()
        kill_marked_processes(marker)
