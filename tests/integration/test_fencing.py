"""No workload runs on two nodes at once: self-fencing and orphans, with real controller and agent processes."""

from __future__ import annotations

import signal
import socket
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from sluicegate.agent import checkpoint as ckpt

from .harness import ROOT, Agent, Controller, get_json, kill_marked_processes, sluicectl, wait_for, workload_states

pytestmark = pytest.mark.integration

QUEUES = str(ROOT / "tests" / "integration" / "queues.yaml")
NODE_TIMEOUT = 1.5


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def setup(tmp_path: Path, pod_dir: Path) -> Iterator[tuple[Controller, Agent, Path, str]]:
    (tmp_path / "controller.yaml").write_text("fencingGrace: 1s\n")
    (tmp_path / "agent.yaml").write_text("reconnectBackoff: {base: 100ms, cap: 300ms}\n")
    c = Controller(tmp_path, extra=["--config", str(tmp_path / "controller.yaml"),
                                    "--node-heartbeat-timeout", str(NODE_TIMEOUT), "--agent-heartbeat-interval", "0.3",
                                    "--listen", f"127.0.0.1:{free_port()}"]).start()
    agent = Agent(tmp_path, c.address, "node-a", extra=["--config", str(tmp_path / "agent.yaml")]).start()
    # Pods run as nobody: the side-effect file goes where nobody can write.
    out = pod_dir
    marker = f"sg-{uuid.uuid4().hex[:8]}"
    try:
        sluicectl(c.address, "apply", "-f", QUEUES)
        yield c, agent, out / "done.txt", marker
    finally:
        agent.stop()
        c.stop()
        kill_marked_processes(marker)


def run_job(c: Controller, tmp_path: Path, name: str, script: str) -> None:
    f = tmp_path / f"{name}.yaml"
    f.write_text(textwrap.dedent(f"""
        apiVersion: sluicegate.io/v1beta2
        kind: Workload
        metadata: {{name: {name}, namespace: default}}
        spec:
          queueName: default
          podSets:
          - name: main
            count: 1
            template:
              spec:
                terminationGracePeriodSeconds: 1
                containers:
                - name: c
                  command: [sh, -c, {script!r}]
                  resources: {{requests: {{cpu: "1"}}}}
        """))
    sluicectl(c.address, "apply", "-f", str(f))


def running_pid(agent: Agent, name: str) -> int:
    def pid() -> int:
        for p in agent.pods():
            if p["workload"] == name and p["phase"] == "Running" and p["containers"] and p["containers"][0]["pid"]:
                return int(p["containers"][0]["pid"])
        return 0

    return wait_for(f"{name} running on {agent.name}", pid, timeout=30)


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def evicted(c: Controller, name: str) -> dict:
    w = get_json(c.address, "workload", name)
    return next((x for x in w["status"]["conditions"] if x["type"] == "Evicted"), {})


def test_a_cut_off_agent_stops_its_pods_and_the_requeued_job_runs_exactly_once(setup, tmp_path: Path) -> None:
    c, agent, effect, marker = setup
    run_job(c, tmp_path, "once", f"sleep 5; echo done >> {effect} # {marker}")
    pid = running_pid(agent, "once")
    c.kill9()
    # Cut off: after the node timeout the agent stops the pod by itself.
    wait_for("the agent to stop its pod (self-fencing)", lambda: gone(pid), timeout=NODE_TIMEOUT + 3)
    # The process is gone; the agent records why once it has reaped it.
    wait_for("the pod recorded as fenced",
             lambda: [(p["phase"], p["reason"]) for p in agent.pods() if p["workload"] == "once"] == [("Failed", "NodeFenced")],
             timeout=10)
    assert not effect.exists()
    c.start()
    wait_for("the requeued job finished", lambda: workload_states(c.address).get("once") == "Finished", timeout=40)
    w = get_json(c.address, "workload", "once")
    assert next(x for x in w["status"]["conditions"] if x["type"] == "Finished")["reason"] == "Succeeded"
    ev = evicted(c, "once")
    # Re-admitted: the eviction is history, its message kept ("Previously: ...").
    assert ev["status"] == "False" and "NodeFenced" in ev["message"] and "by node node-a" in ev["message"]
    assert effect.read_text() == "done\n"
    assert "(self-fencing)" in agent.log.read_text()


def test_a_frozen_controller_on_a_live_stream_gets_no_acks_so_the_agent_fences(setup, tmp_path: Path) -> None:
    # SIGSTOP: the stream stays open (the agent still counts as connected) but nothing is
    # acknowledged; after SIGCONT the controller reads the fenced pod's report and requeues.
    c, agent, effect, marker = setup
    run_job(c, tmp_path, "frozen", f"sleep 5; echo done >> {effect} # {marker}")
    pid = running_pid(agent, "frozen")
    assert c.proc is not None
    c.proc.send_signal(signal.SIGSTOP)
    try:
        wait_for("the agent to stop its pod (self-fencing)", lambda: gone(pid), timeout=NODE_TIMEOUT + 3)
    finally:
        c.proc.send_signal(signal.SIGCONT)
    wait_for("the requeued job finished", lambda: workload_states(c.address).get("frozen") == "Finished", timeout=40)
    assert "NodeFenced" in evicted(c, "frozen")["message"]
    assert effect.read_text() == "done\n"


def test_an_agent_restarted_without_its_checkpoint_kills_the_orphan_and_the_workload_is_requeued(
        setup, tmp_path: Path) -> None:
    c, agent, effect, marker = setup
    # The first run waits (it is to be killed as an orphan, however long the restart takes); the requeued one ends.
    first = effect.parent / "orphan-first-ran"
    run_job(c, tmp_path, "orphan",
            f"if [ -e {first} ]; then echo done >> {effect}; else touch {first}; sleep 60; fi # {marker}")
    pid = running_pid(agent, "orphan")
    agent.kill9()
    assert not gone(pid)
    ckpt.path_for(agent.data_dir).unlink()
    agent.start()
    wait_for("the orphan killed", lambda: gone(pid), timeout=10)
    wait_for("the requeued workload finished", lambda: workload_states(c.address).get("orphan") == "Finished", timeout=40)
    ev = evicted(c, "orphan")
    assert ev["status"] == "False" and "Orphaned" in ev["message"] and "checkpoint" in ev["message"]
    w = get_json(c.address, "workload", "orphan")
    assert next(x for x in w["status"]["conditions"] if x["type"] == "Finished")["reason"] == "Succeeded"
    assert effect.read_text() == "done\n"
