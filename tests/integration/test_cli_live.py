"""sluicectl against a real controller and agent: logs -f over several pods, top, a queue created late."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from .harness import _NO_HOME_CONFIG, ROOT, Agent, Controller, get_json, sluicectl, wait_for, workload_states

pytestmark = pytest.mark.integration

QUEUES = str(ROOT / "tests" / "integration" / "queues.yaml")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Controller, Agent]]:
    c = Controller(tmp_path).start()
    a = Agent(tmp_path, c.address, "node-a", allocatable="cpu=4,memory=4Gi").start()
    sluicectl(c.address, "apply", "-f", QUEUES)
    try:
        yield c, a
    finally:
        a.stop()
        c.stop()


def pods_running(server: str, name: str, count: int) -> bool:
    pods = get_json(server, "workload", name).get("status", {}).get("extra", {}).get("pods", [])
    return len(pods) == count and all(p.get("phase") == "Running" for p in pods)


def test_logs_follow_interleaves_every_pod_until_all_end(cluster: tuple[Controller, Agent], pod_dir: Path) -> None:
    c, _ = cluster
    go = pod_dir / "go"
    # Each pod prints its first line, waits (bounded) until the test saw both first lines, then prints more.
    script = (f"echo tick 1; for i in $(seq 1200); do [ -e {go} ] && break; sleep 0.05; done; "
              "echo tick 2; echo tick 3")
    sluicectl(c.address, "run", "-q", "default", "--name", "two", "--count", "2", "--cpu", "500m", "--",
              "sh", "-c", script)
    wait_for("both pods running", lambda: pods_running(c.address, "two", 2), timeout=60)
    env = {k: v for k, v in os.environ.items() if k not in ("SLUICEGATE_CONFIG", "SLUICEGATE_SERVER")}
    env.update(_NO_HOME_CONFIG)
    proc = subprocess.Popen([sys.executable, "-m", "sluicegate.cli.main", "logs", "two", "-f", "--server", c.address],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)
    try:
        assert proc.stdout is not None
        first = sorted(proc.stdout.readline().strip() for _ in range(2))
        assert first == ["[two-main-0] tick 1", "[two-main-1] tick 1"]
        go.touch()
        rest, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 0, err
    lines = rest.splitlines()
    # Each pod's lines in order, every line prefixed with its pod; the follower ended when both pods did.
    for pod in ("two-main-0", "two-main-1"):
        assert [x for x in lines if x.startswith(f"[{pod}] ")] == [f"[{pod}] tick {i}" for i in (2, 3)]
    assert len(lines) == 4


def test_top_once_shows_queues_against_quota_and_nodes(cluster: tuple[Controller, Agent]) -> None:
    c, _ = cluster
    sluicectl(c.address, "run", "-q", "default", "--name", "busy", "--cpu", "1", "--", "sleep", "30")
    wait_for("busy admitted", lambda: workload_states(c.address).get("busy") == "Admitted", timeout=60)
    out = sluicectl(c.address, "top", "--once").stdout
    queues, nodes = out.split("\n\n")
    assert queues.splitlines()[0].split() == ["CLUSTERQUEUE", "PENDING", "ADMITTED", "FLAVOR", "RESOURCE",
                                              "RESERVED/NOMINAL", "USE"]
    rows = [x.split() for x in queues.splitlines()[1:]]
    assert ["team-a", "0", "1", "default", "cpu", "1/2", "50%"] in rows
    assert nodes.splitlines()[0].split()[:3] == ["NODE", "STATUS", "CPU"]
    (node,) = [x.split() for x in nodes.splitlines()[1:]]
    assert node[:3] == ["node-a", "Ready", "1/4"]
    assert "\x1b[" not in out  # not a terminal: no screen clearing
    sluicectl(c.address, "delete", "workload", "busy")


def test_a_workload_for_a_missing_queue_says_so_and_runs_once_it_exists(cluster: tuple[Controller, Agent]) -> None:
    c, _ = cluster
    sluicectl(c.address, "run", "-q", "later", "--name", "early", "--cpu", "1", "--", "true")
    described = sluicectl(c.address, "describe", "workload", "early").stdout
    assert "Pending:       Inadmissible: LocalQueue default/later doesn't exist" in described.splitlines()
    lq = {"apiVersion": "sluicegate.io/v1beta2", "kind": "LocalQueue",
          "metadata": {"name": "later", "namespace": "default"}, "spec": {"clusterQueue": "team-a"}}
    sluicectl(c.address, "apply", "-f", "-", input=json.dumps(lq))
    wait_for("early finished", lambda: workload_states(c.address).get("early") == "Finished", timeout=60)
