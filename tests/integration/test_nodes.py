"""Controller plus two real agents on 127.0.0.1: pods are real processes."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from .harness import ROOT, Agent, Controller, get_json, kill_marked_processes, sluicectl, wait_for, workload_states

pytestmark = pytest.mark.integration

QUEUES = str(ROOT / "tests" / "integration" / "queues.yaml")


def _cluster(tmp_path: Path, node_timeout: str) -> Iterator[tuple[Controller, Agent, Agent]]:
    (tmp_path / "controller.yaml").write_text("fencingGrace: 1s\n")
    c = Controller(tmp_path, extra=["--node-heartbeat-timeout", node_timeout, "--agent-heartbeat-interval", "0.3",
                                    "--config", str(tmp_path / "controller.yaml")]).start()
    agents = [Agent(tmp_path, c.address, "node-a").start(), Agent(tmp_path, c.address, "node-b").start()]
    sluicectl(c.address, "apply", "-f", QUEUES)
    try:
        yield c, agents[0], agents[1]
    finally:
        for a in agents:
            a.stop()
        c.stop()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Controller, Agent, Agent]]:
    yield from _cluster(tmp_path, "2")


@pytest.fixture
def patient_cluster(tmp_path: Path) -> Iterator[tuple[Controller, Agent, Agent]]:
    # An agent cut off for longer than the node timeout stops its pods (self-fencing),
    # as it must; a restart on a loaded machine can take seconds, so give it room.
    yield from _cluster(tmp_path, "30")


def pods_of(server: str, name: str) -> list[dict]:
    return get_json(server, "workload", name).get("status", {}).get("extra", {}).get("pods", [])


def test_jobs_run_as_processes_finish_and_report_exit_codes_and_logs(cluster) -> None:
    c, a, b = cluster
    s = c.address
    # team-a (2 cpu) can borrow 1 from team-b: at most 3 one-cpu pods at once; nodes hold 4.
    for i in range(5):
        sluicectl(s, "run", "--queue", "default", "--name", f"ok-{i}", "--cpu", "1", "--",
                  "sh", "-c", f"echo done {i}")
    sluicectl(s, "run", "--queue", "default", "--name", "bad", "--cpu", "1", "--", "sh", "-c", "echo broken >&2; exit 7")
    wait_for("every job finished", lambda: set(workload_states(s).values()) == {"Finished"}, timeout=60)
    for i in range(5):
        wl = get_json(s, "workload", f"ok-{i}")
        finished = next(x for x in wl["status"]["conditions"] if x["type"] == "Finished")
        assert (finished["reason"], pods_of(s, f"ok-{i}")[0]["exitCode"]) == ("Succeeded", 0)
        assert sluicectl(s, "logs", f"ok-{i}").stdout == f"done {i}\n"
    bad = get_json(s, "workload", "bad")
    finished = next(x for x in bad["status"]["conditions"] if x["type"] == "Finished")
    assert (finished["reason"], finished["message"]) == ("Failed", "pod bad-main-0 failed with exit code 7 (Error)")
    assert sluicectl(s, "logs", "bad").stdout == "broken\n"
    # Quota came back: nothing is reserved any more.
    cq = get_json(s, "clusterqueue", "team-a")["status"]
    assert (cq["reservingWorkloads"], cq["pendingWorkloads"]) == (0, 0)


def test_a_gang_that_cannot_be_placed_never_starts_partially(cluster) -> None:
    c, a, b = cluster
    s = c.address
    # 3 pods of 1.2 cpu: quota allows it (team-b borrows), but each 2-cpu node fits only one.
    sluicectl(s, "run", "--queue", "default", "--name", "gang", "--cpu", "1500m", "--count", "2", "--",
              "sleep", "0.1")
    sluicectl(s, "run", "--queue", "team-b", "--name", "too-wide", "--cpu", "1200m", "--count", "3", "--", "true")
    wait_for("gang of two finished", lambda: workload_states(s).get("gang") == "Finished", timeout=30)
    msg = wait_for("placement message", lambda: next(
        (x["message"] for x in get_json(s, "workload", "too-wide").get("status", {}).get("conditions", [])
         if x["type"] == "QuotaReserved" and x["status"] == "False"), None))
    assert "cannot be placed" in msg and "the gang is not started partially" in msg
    assert a.pods() == [] and b.pods() == []
    assert pods_of(s, "too-wide") == []


def test_killing_an_agent_makes_its_node_not_ready_and_the_work_runs_elsewhere(cluster, tmp_path: Path) -> None:
    c, a, b = cluster
    s = c.address
    marker = f"sg-{uuid.uuid4().hex[:8]}"
    # Fill node-a first (names sort, equal nodes are chosen by name).  A short termination
    # grace: the lost node's workloads are requeued after the timeout + max(fencingGrace, grace + 2s).
    (tmp_path / "survivor.yaml").write_text(f"""
apiVersion: sluicegate.io/v1beta2
kind: Workload
metadata: {{name: survivor, namespace: default}}
spec:
  queueName: default
  podSets:
  - name: main
    count: 1
    template:
      spec:
        terminationGracePeriodSeconds: 1
        containers:
        - {{name: c, command: [sh, -c, "sleep 30 # {marker}"], resources: {{requests: {{cpu: "1"}}}}}}
""")
    sluicectl(s, "apply", "-f", str(tmp_path / "survivor.yaml"))
    wait_for("running on node-a", lambda: [p.get("phase") for p in pods_of(s, "survivor")] == ["Running"], timeout=20)
    first = pods_of(s, "survivor")[0]
    assert first["node"] == "node-a"
    a.kill9()
    try:
        def moved() -> bool:
            pods = pods_of(s, "survivor")
            return bool(pods) and pods[0]["node"] == "node-b" and pods[0]["phase"] == "Running"

        wait_for("the workload to run again on node-b", moved, timeout=30)
        wl = get_json(s, "workload", "survivor")
        evicted = next(x for x in wl["status"]["conditions"] if x["type"] == "Evicted")
        # Re-admitted: the eviction is history, its message kept ("Previously: ...").
        assert evicted["status"] == "False" and "Previously: node node-a stopped responding" in evicted["message"]
        assert "NotReady" in sluicectl(s, "get", "nodes").stdout
        # node-a comes back still running the old pod: the controller stops it.
        old_pid = next(p.pid for p in psutil.process_iter(["cmdline"]) if marker in " ".join(p.info["cmdline"] or [])
                       and p.pid != 0)
        a.start()
        wait_for("the unexpected pod on node-a to be stopped", lambda: not psutil.pid_exists(old_pid)
                 or psutil.Process(old_pid).status() == psutil.STATUS_ZOMBIE, timeout=30)
        assert "node-a   Ready" in sluicectl(s, "get", "nodes").stdout
    finally:
        kill_marked_processes(marker)


def test_restarting_an_agent_keeps_its_pods_running_and_readopts_them(patient_cluster) -> None:
    c, a, b = patient_cluster
    s = c.address
    marker = f"sg-{uuid.uuid4().hex[:8]}"
    # The pod ends when the test says so, not after a fixed time: an agent restart on a busy
    # machine may take longer than any sleep.  The wait inside the pod is bounded (60 s).
    go = Path(f"/tmp/{marker}-go")
    sluicectl(s, "run", "--queue", "default", "--name", "steady", "--cpu", "1", "--",
              "sh", "-c", f"for i in $(seq 600); do [ -e {go} ] && break; sleep 0.1; done; echo finished # {marker}")
    wait_for("running", lambda: [p.get("phase") for p in pods_of(s, "steady")] == ["Running"], timeout=20)
    node = pods_of(s, "steady")[0]["node"]
    agent = a if node == "node-a" else b
    pid_before = next(p["containers"][0]["pid"] for p in agent.pods() if p["workload"] == "steady")
    agent.kill9()
    try:
        assert psutil.pid_exists(pid_before)
        agent.start()
        pid_after = next(p["containers"][0]["pid"] for p in agent.pods() if p["workload"] == "steady")
        assert pid_after == pid_before
        go.touch()
        wait_for("finished normally", lambda: workload_states(s).get("steady") == "Finished", timeout=30)
        finished = next(x for x in get_json(s, "workload", "steady")["status"]["conditions"] if x["type"] == "Finished")
        # The agent re-adopted the process but is no longer its parent: the exit code is unknowable,
        # so completion is judged from what it could observe.
        assert finished["reason"] in ("Succeeded", "Failed")
        assert "Evicted" not in {x["type"] for x in get_json(s, "workload", "steady")["status"]["conditions"]}
        assert sluicectl(s, "logs", "steady").stdout == "finished\n"
    finally:
        go.unlink(missing_ok=True)
        kill_marked_processes(marker)


def test_controller_kill_9_keeps_pods_running_and_agents_reconnect(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    flags = ["--node-heartbeat-timeout", "5", "--agent-heartbeat-interval", "0.3", "--listen", f"127.0.0.1:{port}"]
    c = Controller(tmp_path, extra=flags).start()
    agent = Agent(tmp_path, c.address, "node-a", extra=["--config", str(_fast_reconnect(tmp_path))]).start()
    marker = f"sg-{uuid.uuid4().hex[:8]}"
    try:
        sluicectl(c.address, "apply", "-f", QUEUES)
        sluicectl(c.address, "run", "--queue", "default", "--name", "long", "--cpu", "1", "--",
                  "sh", "-c", f"sleep 3; echo done # {marker}")
        wait_for("running", lambda: [p.get("phase") for p in pods_of(c.address, "long")] == ["Running"])
        pid = next(p["containers"][0]["pid"] for p in agent.pods() if p["workload"] == "long")
        c.kill9()
        assert psutil.pid_exists(pid)  # the pod does not depend on the controller
        c.start()
        wait_for("agent re-registered", lambda: "node-a   Ready" in sluicectl(c.address, "get", "nodes").stdout)
        wait_for("finished after the restart", lambda: workload_states(c.address).get("long") == "Finished", timeout=30)
        w = get_json(c.address, "workload", "long")
        assert next(x for x in w["status"]["conditions"] if x["type"] == "Finished")["reason"] == "Succeeded"
        assert [p["uid"] for p in pods_of(c.address, "long")] == [w["status"]["extra"]["pods"][0]["uid"]]
        assert sluicectl(c.address, "logs", "long").stdout == "done\n"
    finally:
        agent.stop()
        c.stop()
        kill_marked_processes(marker)


def _fast_reconnect(tmp_path: Path) -> Path:
    cfg = tmp_path / "agent-fast.yaml"
    cfg.write_text("reconnectBackoff: {base: 100ms, cap: 500ms}\n")
    return cfg
