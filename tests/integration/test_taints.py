"""Node taints on real agents: placement honours NoSchedule, a new NoExecute taint evicts.

Semantics are Kubernetes' (the scheduler's TaintToleration plugin, the taint
eviction controller) and Kueue's (a flavor's tolerations added to its pods).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from .harness import ROOT, Agent, Controller, get_json, kill_marked_processes, sluicectl, wait_for, workload_states

pytestmark = pytest.mark.integration

QUEUES = str(ROOT / "tests" / "integration" / "queues.yaml")


def pods_of(server: str, name: str) -> list[dict]:
    return get_json(server, "workload", name).get("status", {}).get("extra", {}).get("pods", [])


def workload(path: Path, name: str, *, cpu: str = "1", count: int = 1, tolerations: list[dict] | None = None,
             command: str = "sleep 60") -> str:
    spec: dict = {"terminationGracePeriodSeconds": 1,
                  "containers": [{"name": "c", "command": ["sh", "-c", command], "resources": {"requests": {"cpu": cpu}}}]}
    if tolerations:
        spec["tolerations"] = tolerations
    doc = {"apiVersion": "sluicegate.io/v1beta2", "kind": "Workload", "metadata": {"name": name, "namespace": "default"},
           "spec": {"queueName": "default", "podSets": [{"name": "main", "count": count, "template": {"spec": spec}}]}}
    f = path / f"{name}.yaml"
    f.write_text(yaml.safe_dump(doc))
    return str(f)


def running_on(server: str, name: str) -> list[str] | None:
    pods = pods_of(server, name)
    if pods and all(p.get("phase") == "Running" for p in pods):
        return sorted(p["node"] for p in pods)
    return None


@pytest.fixture
def tainted(tmp_path: Path) -> Iterator[tuple[Controller, Agent, Agent]]:
    c = Controller(tmp_path).start()
    agents = [Agent(tmp_path, c.address, "node-a", extra=["--taint", "dedicated=gpu:NoSchedule"]).start(),
              Agent(tmp_path, c.address, "node-b").start()]
    sluicectl(c.address, "apply", "-f", QUEUES)
    try:
        yield c, agents[0], agents[1]
    finally:
        for a in agents:
            a.stop()
        c.stop()


def test_a_tainted_node_receives_only_tolerating_pods(tainted, tmp_path: Path) -> None:
    c, a, b = tainted
    s = c.address
    wide = sluicectl(s, "get", "nodes", "-o", "wide").stdout
    assert "dedicated=gpu:NoSchedule" in next(line for line in wide.splitlines() if line.startswith("node-a"))
    assert yaml.safe_load(sluicectl(s, "describe", "node", "node-a").stdout)["taints"] == [
        {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    # Two 1-cpu pods: node-a (by name, equal room) would come first, but its taint keeps them off.
    sluicectl(s, "apply", "-f", workload(tmp_path, "plain", count=2))
    assert wait_for("plain running", lambda: running_on(s, "plain")) == ["node-b", "node-b"]
    # node-b is full: another untolerating pod waits, and says why.
    sluicectl(s, "apply", "-f", workload(tmp_path, "waits"))
    msg = wait_for("placement message", lambda: next(
        (x["message"] for x in get_json(s, "workload", "waits").get("status", {}).get("conditions", [])
         if x["type"] == "QuotaReserved" and x["status"] == "False" and "placed" in x["message"]), None))
    assert "1 node(s) had untolerated taint {dedicated: gpu}" in msg
    # A tolerating pod may use the tainted node.
    sluicectl(s, "apply", "-f", workload(tmp_path, "tolerant", tolerations=[
        {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]))
    assert wait_for("tolerant running", lambda: running_on(s, "tolerant")) == ["node-a"]
    assert {p["workload"] for p in a.pods()} == {"tolerant"}
    assert workload_states(s)["waits"] == "Pending"


@pytest.fixture
def plain_pair(tmp_path: Path) -> Iterator[tuple[Controller, Agent, Agent]]:
    # A node timeout long enough that an agent restart is not a node loss.
    c = Controller(tmp_path, extra=["--node-heartbeat-timeout", "20", "--agent-heartbeat-interval", "0.3"]).start()
    agents = [Agent(tmp_path, c.address, "node-a").start(), Agent(tmp_path, c.address, "node-b").start()]
    sluicectl(c.address, "apply", "-f", QUEUES)
    try:
        yield c, agents[0], agents[1]
    finally:
        for a in agents:
            a.stop()
        c.stop()


def test_an_agent_restarted_with_a_no_execute_taint_evicts_what_does_not_tolerate_it(plain_pair, tmp_path: Path) -> None:
    c, a, b = plain_pair
    s = c.address
    marker = f"sg-{uuid.uuid4().hex[:8]}"
    sluicectl(s, "apply", "-f", workload(tmp_path, "victim", command=f"sleep 300 # {marker}"))
    assert wait_for("victim running", lambda: running_on(s, "victim")) == ["node-a"]
    sluicectl(s, "apply", "-f", workload(tmp_path, "stays", command=f"sleep 300 # {marker}",
                                         tolerations=[{"key": "maint", "operator": "Exists", "effect": "NoExecute"}]))
    assert wait_for("stays running", lambda: running_on(s, "stays")) == ["node-a"]
    stays_uid = pods_of(s, "stays")[0]["uid"]
    victim_uid = pods_of(s, "victim")[0]["uid"]
    try:
        # The agent restarts with new settings; its pods keep running and are re-adopted.
        a.kill9()
        a.extra += ["--taint", "maint:NoExecute"]
        a.start()

        def moved() -> bool:
            pods = pods_of(s, "victim")
            return bool(pods) and pods[0]["uid"] != victim_uid and running_on(s, "victim") == ["node-b"]

        wait_for("the victim to be requeued and run on node-b", moved, timeout=40)
        evicted = next(x for x in get_json(s, "workload", "victim")["status"]["conditions"] if x["type"] == "Evicted")
        assert evicted["status"] == "False"  # re-admitted: the eviction is history
        assert "Taint manager: deleting due to NoExecute taint: pod victim-main-0 does not tolerate taint " \
               "maint:NoExecute of node node-a" in evicted["message"]
        assert [(p["uid"], p["node"], p["phase"]) for p in pods_of(s, "stays")] == [(stays_uid, "node-a", "Running")]
        assert {p["workload"] for p in a.pods() if p.get("phase") == "Running"} == {"stays"}
    finally:
        kill_marked_processes(marker)
