"""The agent protects its node like the kubelet: critical static pods, OOM kills, memory pressure.

Real controller and agent processes on 127.0.0.1; pods are real processes.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from .harness import (
    Agent,
    Controller,
    get_json,
    kill_marked_processes,
    remove_cgroups,
    sluicectl,
    wait_for,
    workload_states,
)

pytestmark = pytest.mark.integration

Mi = 1 << 20
# Pods run as nobody: the interpreter they run must be reachable by it (the
# test's own venv may sit under a 0700 home, e.g. /root).
POD_PYTHON = "/usr/bin/python3"

QUEUES = """\
apiVersion: sluicegate.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: sluicegate.io/v1beta2
kind: ClusterQueue
metadata: {name: main}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: "16"}
      - {name: memory, nominalQuota: 16Gi}
---
apiVersion: sluicegate.io/v1beta2
kind: LocalQueue
metadata: {name: q, namespace: default}
spec: {clusterQueue: main}
"""


class Cluster:
    """A controller with the test queues, and agents started on demand; everything is stopped at the end."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.marker = f"sg-{uuid.uuid4().hex[:8]}"
        self.controller = Controller(workdir, extra=["--node-heartbeat-timeout", "5",
                                                     "--agent-heartbeat-interval", "0.2"]).start()
        self.agents: list[Agent] = []
        self.cgroup_bases: list[str] = []
        queues = workdir / "queues.yaml"
        queues.write_text(QUEUES)
        sluicectl(self.s, "apply", "-f", str(queues))

    @property
    def s(self) -> str:
        return self.controller.address

    def agent(self, name: str, *, allocatable: str, extra: list[str]) -> Agent:
        # Its own cgroup base: an agent starting elsewhere on this machine must not sweep our pods.
        base = f"{self.marker}-{name}"
        self.cgroup_bases.append(base)
        a = Agent(self.workdir, self.s, name, allocatable=allocatable, extra=[*extra, "--cgroup-base", base]).start()
        self.agents.append(a)
        return a

    def run(self, name: str, *flags: str, command: str) -> None:
        sluicectl(self.s, "run", "--queue", "q", "--name", name, *flags, "--", "sh", "-c",
                  f"{command} # {self.marker}")

    def close(self) -> None:
        try:
            for a in self.agents:
                a.stop()
            self.controller.stop()
        finally:
            kill_marked_processes(self.marker)
            for base in self.cgroup_bases:
                remove_cgroups(base)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path)
    try:
        yield c
    finally:
        c.close()


def pods_of(s: str, name: str) -> list[dict[str, Any]]:
    return list(get_json(s, "workload", name).get("status", {}).get("extra", {}).get("pods", []))


def condition(s: str, name: str, type_: str) -> dict[str, Any] | None:
    conds = get_json(s, "workload", name).get("status", {}).get("conditions", [])
    return next((c for c in conds if c["type"] == type_), None)


def running_workloads(s: str, *names: str) -> bool:
    return all([p.get("phase") for p in pods_of(s, n)] == ["Running"] for n in names)


def node_json(s: str, name: str) -> dict[str, Any]:
    return next(n for n in get_json(s, "nodes")["items"] if n["name"] == name)


def static_manifest(name: str, *, command: str, cpu: str, critical: bool = True) -> str:
    return json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {
            **({"priorityClassName": "system-node-critical"} if critical else {}),
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "command": ["sh", "-c", command],
                            "resources": {"requests": {"cpu": cpu, "memory": "16Mi"}}}],
        },
    })


def agent_pods(agent: Agent) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in agent.pods()}


def test_a_critical_static_pod_on_a_full_node_preempts_exactly_the_kubelets_choice(
    cluster: Cluster, tmp_path: Path
) -> None:
    s = cluster.s
    static_dir = tmp_path / "static-a"
    static_dir.mkdir()
    agent = cluster.agent("node-a", allocatable="cpu=3,memory=2Gi",
                          extra=["--static-pod-dir", str(static_dir), "--static-pod-sync-interval", "0.1"])
    # 3 cpu of 3 requested: one Guaranteed pod, two Burstable ones, and a BestEffort one that requests nothing.
    cluster.run("guaranteed", "--cpu", "1", "--memory", "64Mi", "--limit-cpu", "1", "--limit-memory", "64Mi",
                command="sleep 60")
    cluster.run("burstable-mem", "--cpu", "1", "--memory", "32Mi", command="sleep 60")
    cluster.run("burstable", "--cpu", "1", command="sleep 60")
    cluster.run("besteffort", "--cpu", "", command="sleep 60")
    everyone = ("guaranteed", "burstable-mem", "burstable", "besteffort")
    wait_for("all four running", lambda: running_workloads(s, *everyone), timeout=20)
    assert node_json(s, "node-a")["requested"]["cpu"] == 3000

    # The controller would never place this on the full node; a static pod needs no placement.
    # Missing 1 cpu: the kubelet frees it from the Burstable tier (Guaranteed is spared because
    # Burstable suffices), choosing between equal distances the smaller memory request; the
    # BestEffort pod frees no cpu, so it stays.
    (static_dir / "crit.json").write_text(static_manifest("crit", command=f"sleep 60 # {cluster.marker}", cpu="1"))
    evicted = wait_for("burstable preempted", lambda: (c := condition(s, "burstable", "Evicted")) and c, timeout=20)
    assert (evicted["reason"], evicted["status"]) == ("PreemptedOnNode", "True")
    assert evicted["message"].startswith("pod burstable-main-0 was preempted by node node-a: Preempting: "
                                         "Preempted in order to admit critical pod default/crit-node-a")
    wait_for("the critical pod running", lambda: agent_pods(agent).get("crit-node-a", {}).get("phase") == "Running",
             timeout=10)
    crit = agent_pods(agent)["crit-node-a"]
    assert (crit["static"], crit["priority"], crit["requests"]) == (True, 2000001000, {"cpu": 1000, "memory": 16 * Mi})
    assert running_workloads(s, "guaranteed", "burstable-mem", "besteffort")
    for name in ("guaranteed", "burstable-mem", "besteffort"):
        assert condition(s, name, "Evicted") is None

    # Requeued: the node is full again (the static pod counts), so it waits with a placement message.
    pending = wait_for("burstable pending again", lambda: (c := condition(s, "burstable", "QuotaReserved"))
                       and c["status"] == "False" and "cannot be placed" in c["message"] and c, timeout=20)
    assert workload_states(s)["burstable"] == "Pending", pending
    assert node_json(s, "node-a")["requested"]["cpu"] == 3000


def test_a_pod_allocating_past_its_memory_limit_is_oomkilled(cluster: Cluster) -> None:
    s = cluster.s
    cluster.agent("node-b", allocatable="cpu=2,memory=2Gi", extra=[])
    hog = f"{POD_PYTHON} -c \"b = b'x' * (256 << 20); import time; time.sleep(30)\""
    cluster.run("oom", "--cpu", "100m", "--memory", "64Mi", "--limit-memory", "64Mi", command=hog)
    wait_for("oom finished", lambda: workload_states(s).get("oom") == "Finished", timeout=30)
    finished = condition(s, "oom", "Finished")
    assert finished is not None
    assert (finished["reason"], finished["message"]) == ("Failed", "pod oom-main-0 failed with exit code 137 (OOMKilled)")
    pod = pods_of(s, "oom")[0]
    assert (pod["node"], pod["phase"], pod["reason"], pod["exitCode"]) == ("node-b", "Failed", "OOMKilled", 137)


def test_memory_pressure_evicts_the_pod_above_its_request_and_nothing_else(cluster: Cluster, pod_dir: Path) -> None:
    s = cluster.s
    # Generous: on a VM the available figure can fall by several hundred MiB within seconds (a balloon,
    # another process), which must not put the node under pressure before the hog grows.
    margin = 2048 * Mi
    threshold = psutil.virtual_memory().available - margin
    agent = cluster.agent("node-c", allocatable="cpu=2,memory=2Gi", extra=[
        "--eviction-hard", f"memory.available<{threshold}", "--eviction-interval", "0.1",
        "--eviction-pressure-transition-period", "5"])
    cluster.run("small", "--cpu", "100m", "--memory", "64Mi", command="sleep 60")
    wait_for("small running", lambda: running_workloads(s, "small"), timeout=20)
    small_pid = agent_pods(agent)["small-main-0"]["containers"][0]["pid"]
    # The first run keeps growing (far above its 64Mi request) until it is evicted, so the
    # threshold is crossed even if other processes free memory meanwhile (bounded: 12 steps of
    # a third of the margin); once requeued and re-admitted it behaves and just sleeps.
    flag = pod_dir / "hog-ran-once"
    step = margin // 3
    code = (f"import os, time; first = not os.path.exists('{flag}'); open('{flag}', 'a').close(); b = []; "
            f"[(b.append(b'x' * {step}), time.sleep(0.2)) for _ in range(12 if first else 0)]; time.sleep(60)")
    cluster.run("hog", "--cpu", "100m", "--memory", "64Mi", command=f"{POD_PYTHON} -c \"{code}\"")

    # The hog may be re-admitted before the condition is read: then Evicted is False and
    # keeps the eviction as "Previously: ...", as Kueue does.
    evicted = wait_for("hog evicted", lambda: (c := condition(s, "hog", "Evicted")) and c, timeout=30)
    message = evicted["message"].removeprefix("Previously: ")
    assert evicted["reason"] == ("NodePressure" if evicted["status"] == "True" else "QuotaReserved")
    assert message.startswith("pod hog-main-0 was evicted by node node-c: Evicted: The node was low on "
                              "resource: memory. Threshold quantity: ")
    assert "Container main was using" in message and "request is 64Mi, has larger consumption of memory" in message
    # The condition outlives the eviction by the 5s transition period, so it is seen here.
    wait_for("MemoryPressure reported", lambda: node_json(s, "node-c")["usage"]["conditions"] == ["MemoryPressure"],
             timeout=5)
    # The condition clears once memory is back (after the transition period), and the hog is
    # placed again: its workload was requeued, not lost.
    wait_for("MemoryPressure cleared", lambda: node_json(s, "node-c")["usage"]["conditions"] == [], timeout=20)
    wait_for("hog running again", lambda: running_workloads(s, "hog"), timeout=20)
    # Nothing else was touched.
    assert condition(s, "small", "Evicted") is None
    assert agent_pods(agent)["small-main-0"]["containers"][0]["pid"] == small_pid
    assert psutil.pid_exists(small_pid)


def test_static_pods_run_restart_count_against_placement_and_survive_an_agent_restart(
    cluster: Cluster, tmp_path: Path, pod_dir: Path
) -> None:
    s = cluster.s
    static_dir = tmp_path / "static-d"
    static_dir.mkdir()
    starts = pod_dir / "keeper-starts"
    runs = pod_dir / "blinker-runs"
    (static_dir / "keeper.yaml").write_text(static_manifest(
        "keeper", command=f"echo start >> {starts}; exec sleep 60 # {cluster.marker}", cpu="1500m", critical=False))
    (static_dir / "blinker.yaml").write_text(static_manifest(
        "blinker", command=f"echo run >> {runs}; sleep 0.2 # {cluster.marker}", cpu="100m", critical=False))
    extra = ["--static-pod-dir", str(static_dir), "--static-pod-sync-interval", "0.1", "--restart-backoff-base", "0.1"]
    agent = cluster.agent("node-d", allocatable="cpu=2,memory=2Gi", extra=extra)

    pods = wait_for("both static pods running", lambda: (p := agent_pods(agent)) and {
        n: p[n]["phase"] for n in p} == {"keeper-node-d": "Running", "blinker-node-d": "Running"} and p, timeout=10)
    assert {n: (p["static"], p["workload"]) for n, p in pods.items()} == {
        "keeper-node-d": (True, ""), "blinker-node-d": (True, "")}
    # Restarted whenever it exits (restartPolicy Always by default).
    wait_for("blinker restarted twice", lambda: runs.exists() and len(runs.read_text().splitlines()) >= 3, timeout=15)
    # The controller counts the mirror pods' requests: 1.6 of 2 cpu are taken.
    wait_for("static requests counted", lambda: node_json(s, "node-d")["requested"].get("cpu") == 1600, timeout=10)
    cluster.run("nofit", "--cpu", "1", command="sleep 1")
    msg = wait_for("nofit pending with a placement message", lambda: (c := condition(s, "nofit", "QuotaReserved"))
                   and c["status"] == "False" and "cannot be placed" in c["message"] and c["message"], timeout=20)
    assert "no node has room for pod 0 of pod set main (cpu=1): 1 eligible node(s), 1 short of cpu" in msg, msg

    # kill -9 and restart: the keeper is re-adopted, not started again.
    keeper = agent_pods(agent)["keeper-node-d"]
    agent.kill9()
    agent.start()
    after = agent_pods(agent)["keeper-node-d"]
    assert (after["uid"], after["containers"][0]["pid"]) == (keeper["uid"], keeper["containers"][0]["pid"])
    assert starts.read_text().splitlines() == ["start"]
    assert workload_states(s)["nofit"] == "Pending"

    # Removing the manifest stops the pod; the controller stops counting it.
    (static_dir / "keeper.yaml").unlink()
    wait_for("keeper gone", lambda: "keeper-node-d" not in agent_pods(agent), timeout=10)
    wait_for("keeper's requests released", lambda: node_json(s, "node-d")["requested"].get("cpu") == 100, timeout=10)
    assert not psutil.pid_exists(keeper["containers"][0]["pid"]) or \
        psutil.Process(keeper["containers"][0]["pid"]).status() == psutil.STATUS_ZOMBIE
