"""Two controllers on one real PostgreSQL, real agents and pods: takeovers, fencing, a database restart.

Each test gets a fresh database on the session's private server
(``tests/pg.py``).  Controllers run with short lease timings so that
takeovers happen within the test's time, and on fixed loopback ports so a
controller restarted after ``kill -9`` comes back where the agents and the
client look for it.
"""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import textwrap
import threading
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from sluicegate.client import Client, Document
from sluicegate.v1 import agent_pb2, agent_pb2_grpc
from tests.pg import PostgresServer

from .harness import ROOT, Agent, Controller, kill_marked_processes, sluicectl, wait_for, workload_states

pytestmark = pytest.mark.integration

QUEUES = str(ROOT / "tests" / "integration" / "queues.yaml")

# Fast enough for a test, in the proportions of the defaults (15 s / 10 s / 2 s / 0.5 s).
LEASE = """
leaseDuration: 3s
leaseRenewDeadline: 2s
leaseRenewInterval: 400ms
leaseRetryInterval: 200ms
mirrorInterval: 300ms
fencingGrace: 2s
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def readyz(c: Controller) -> str:
    try:
        with urllib.request.urlopen(f"http://{c.health}/readyz", timeout=2) as r:
            return str(json.loads(r.read())["reason"])
    except urllib.error.HTTPError as exc:
        return str(json.loads(exc.read())["reason"])
    except OSError:
        return "unreachable"


def is_leader(c: Controller) -> bool:
    return c.proc is not None and c.proc.poll() is None and readyz(c).startswith("leader")


class Pair:
    """Two controllers sharing one database, on fixed ports."""

    def __init__(self, tmp_path: Path, url: str) -> None:
        self.controllers: list[Controller] = []
        for name in ("a", "b"):
            d = tmp_path / f"ctl-{name}"
            d.mkdir()
            (d / "controller.yaml").write_text(LEASE)
            self.controllers.append(Controller(d, extra=[
                "--config", str(d / "controller.yaml"), "--store", url, "--listen", f"127.0.0.1:{free_port()}",
                "--node-heartbeat-timeout", "8", "--agent-heartbeat-interval", "0.3",
            ]))

    def start(self) -> Pair:
        for c in self.controllers:
            c.start()
        wait_for("a leader", self.leader, timeout=20)
        return self

    @property
    def addresses(self) -> str:
        return ",".join(c.address for c in self.controllers)

    def leader(self) -> Controller | None:
        leaders = [c for c in self.controllers if is_leader(c)]
        assert len(leaders) <= 1, f"two leaders at once: {[readyz(c) for c in leaders]}"
        return leaders[0] if leaders else None

    def other(self, c: Controller) -> Controller:
        return next(o for o in self.controllers if o is not c)

    def stop(self) -> None:
        for c in self.controllers:
            c.stop()


def restart_in_place(c: Controller) -> None:
    """Start a killed controller again: its fixed --listen (in extra, after the harness's) brings it back there."""
    c.start()


@pytest.fixture
def cluster(tmp_path: Path, postgres: PostgresServer, pod_dir: Path) -> Iterator[tuple[Pair, list[Agent], Path, str]]:
    url = postgres.create_database()
    pair = Pair(tmp_path, url).start()
    marker = f"sg-{uuid.uuid4().hex[:8]}"
    agents: list[Agent] = []
    try:
        (tmp_path / "agent.yaml").write_text("reconnectBackoff: {base: 100ms, cap: 500ms}\n")
        for name in ("node-a", "node-b"):
            agents.append(Agent(tmp_path, pair.addresses, name, allocatable="cpu=8,memory=8Gi",
                                extra=["--config", str(tmp_path / "agent.yaml")]).start())
        sluicectl(pair.addresses, "apply", "-f", QUEUES)
        yield pair, agents, pod_dir, marker
    finally:
        for a in agents:
            a.stop()
        pair.stop()
        kill_marked_processes(marker)


def job(name: str, out: Path, marker: str, seconds: float = 0.3) -> Document:
    # Each run appends one line to the job's own file: a second run shows as a second line.
    body = textwrap.dedent(f"""
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
                restartPolicy: Never
                containers:
                - name: c
                  command: ["sh", "-c", "echo run >> {out}/{name}; sleep {seconds}; : {marker}"]
                  resources: {{requests: {{cpu: 100m, memory: 16Mi}}}}
    """)
    return Document(body=body, source=f"{name}.yaml")


class Submitter(threading.Thread):
    """Creates jobs one after another through the client library, across takeovers; records every failure."""

    def __init__(self, addresses: str, names: list[str], out: Path, marker: str, gap: float) -> None:
        super().__init__(daemon=True)
        self.addresses, self.names, self.out, self.marker, self.gap = addresses, names, out, marker, gap
        self.created: list[str] = []
        self.errors: list[str] = []
        self.done = threading.Event()

    def run(self) -> None:
        async def go() -> None:
            async with Client(self.addresses, timeout=30) as c:
                for n in self.names:
                    try:
                        await c.create_workload(job(n, self.out, self.marker))
                        self.created.append(n)
                    except Exception as exc:  # recorded, asserted on by the test
                        self.errors.append(f"{n}: {exc}")
                    await asyncio.sleep(self.gap)

        try:
            asyncio.run(go())
        finally:
            self.done.set()


def all_finished(address: str, names: list[str]) -> dict[str, str] | None:
    states = workload_states(address)
    return states if all(states.get(n) == "Finished" for n in names) else None


def effects(out: Path, names: list[str]) -> dict[str, int]:
    return {n: len((out / n).read_text().splitlines()) if (out / n).exists() else 0 for n in names}


def test_kill_the_leader_five_times(cluster: tuple[Pair, list[Agent], Path, str]) -> None:
    pair, agents, out, marker = cluster
    names = [f"job-{i:03d}" for i in range(60)]
    sub = Submitter(pair.addresses, names, out, marker, gap=0.1)
    sub.start()
    takeovers = 0
    for _ in range(5):
        old = wait_for("a leader", pair.leader, timeout=20)
        # Let some work happen under this leader first.
        before = len(sub.created)
        wait_for("submissions under this leader", lambda b=before: len(sub.created) >= b + 3 or sub.done.is_set(),
                 timeout=30)
        old.kill9()
        new = wait_for("the other controller leads", lambda o=old: is_leader(pair.other(o)), timeout=20)
        assert new
        takeovers += 1
        restart_in_place(old)
        assert readyz(old).startswith("follower"), readyz(old)
    assert sub.done.wait(120), "the submitter did not finish"
    assert sub.errors == [], sub.errors
    assert sorted(sub.created) == names
    wait_for("a leader", pair.leader, timeout=20)
    # sluicectl given both addresses finds the leader itself (the first may be a follower: it redirects).
    states = wait_for("every job finished", lambda: all_finished(pair.addresses, names), timeout=120)
    # Recorded once each, nothing else.
    assert sorted(states) == names
    # Every job's side effect happened exactly once: no job was run (admitted) twice.
    assert effects(out, names) == {n: 1 for n in names}
    assert takeovers == 5


def test_a_paused_leader_cannot_write_or_command(cluster: tuple[Pair, list[Agent], Path, str]) -> None:
    pair, agents, out, marker = cluster
    old = wait_for("a leader", pair.leader, timeout=20)
    new_c = pair.other(old)
    assert old.proc is not None
    old.proc.send_signal(signal.SIGSTOP)
    try:
        # Takeover only after the lease expires (the paused leader's session is still open).
        wait_for("the other controller leads", lambda: is_leader(new_c), timeout=20)
        names = [f"after-{i}" for i in range(5)]
        for n in names:
            f = old.workdir / f"{n}.yaml"
            f.write_text(job(n, out, marker).body)
            sluicectl(new_c.address, "create", "-f", str(f))
    finally:
        old.proc.send_signal(signal.SIGCONT)
    # Resumed, the old leader finds its lease gone and follows; its writes were fenced.
    wait_for("the old leader follows", lambda: readyz(old).startswith("follower"), timeout=20)
    log = old.log.read_text()
    assert "lost the leader lease" in log or "lost the lead" in log, log[-2000:]
    states = wait_for("jobs finish under the new leader", lambda: all_finished(new_c.address, names), timeout=60)
    assert all(states[n] == "Finished" for n in names)
    assert effects(out, names) == {n: 1 for n in names}
    # The agents went to the new leader: they have seen its epoch and will refuse the old one's.
    for a in agents:
        seen = int((a.data_dir / "controller-epoch").read_text())
        assert seen >= 2


def test_database_restart_under_load(cluster: tuple[Pair, list[Agent], Path, str], postgres: PostgresServer) -> None:
    pair, agents, out, marker = cluster
    names = [f"db-{i:03d}" for i in range(30)]
    sub = Submitter(pair.addresses, names, out, marker, gap=0.1)
    sub.start()
    wait_for("some submissions", lambda: len(sub.created) >= 8, timeout=30)
    postgres.restart()
    assert sub.done.wait(120), "the submitter did not finish"
    assert sub.errors == [], sub.errors
    leader = wait_for("a leader after the restart", pair.leader, timeout=30)
    states = wait_for("every job finished", lambda: all_finished(leader.address, names), timeout=120)
    assert sorted(states) == names
    assert effects(out, names) == {n: 1 for n in names}
    # Neither controller gave up: the one that led stepped down or recovered, and both still serve.
    for c in pair.controllers:
        assert c.proc is not None and c.proc.poll() is None, c.log.read_text()[-2000:]
    assert wait_for("one leader, one follower", lambda: sorted(readyz(c).split(":")[0].split(" ")[0]
                                                               for c in pair.controllers) == ["follower", "leader"])


class StaleController(agent_pb2_grpc.AgentLinkServicer):
    """Plays a controller that lost its lease: registers the agent under an old epoch and sends a pod."""

    def __init__(self, epoch: int, marker: str, out: Path) -> None:
        self.epoch, self.marker, self.out = epoch, marker, out
        self.streams = 0

    async def Connect(self, request_iterator: Any, context: Any) -> Any:
        self.streams += 1
        first = await anext(aiter(request_iterator))
        assert first.WhichOneof("kind") == "register"
        yield agent_pb2.ControllerMessage(registered=agent_pb2.Registered(
            node_name=first.register.node.name, heartbeat_interval_seconds=0.3, epoch=self.epoch), epoch=self.epoch)
        yield agent_pb2.ControllerMessage(run_pod=agent_pb2.RunPod(pod=agent_pb2.PodSpec(
            uid=f"stale-{uuid.uuid4().hex[:8]}", name="stale-0", namespace="default", workload="stale",
            containers=[agent_pb2.Container(name="c", command=["sh", "-c", f"touch {self.out}/stale; : {self.marker}"])],
            restart_policy="Never")), epoch=self.epoch)
        async for _ in request_iterator:
            pass


async def test_agent_refuses_a_lower_epoch(tmp_path: Path, pod_dir: Path) -> None:
    marker = f"sg-{uuid.uuid4().hex[:8]}"
    stale = StaleController(epoch=3, marker=marker, out=pod_dir)
    server = grpc.aio.server()
    agent_pb2_grpc.add_AgentLinkServicer_to_server(stale, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    agent = Agent(tmp_path, f"127.0.0.1:{port}", "node-s")
    agent.data_dir.mkdir(parents=True)
    # This node has already followed a leader of epoch 7.
    (agent.data_dir / "controller-epoch").write_text("7\n")
    try:
        agent.proc = None
        agent.ready_file.unlink(missing_ok=True)
        import subprocess
        import sys

        args = [sys.executable, "-m", "sluicegate.agent.server", "--controller", agent.controller, "--node-name",
                agent.name, "--data-dir", str(agent.data_dir), "--health-listen", "127.0.0.1:0",
                "--allocatable", agent.allocatable, "--ready-file", str(agent.ready_file), *agent.extra]
        with open(agent.log, "ab") as log:
            agent.proc = subprocess.Popen(args, stdout=log, stderr=log, cwd=ROOT)

        async def refused() -> bool:
            for _ in range(200):
                if "refusing its stream" in agent.log.read_text():
                    return True
                await asyncio.sleep(0.05)
            return False

        assert await refused(), agent.log.read_text()[-2000:]
        assert stale.streams >= 1
        assert not (pod_dir / "stale").exists()
        assert int((agent.data_dir / "controller-epoch").read_text()) == 7
    finally:
        agent.stop()
        await server.stop(0)
        kill_marked_processes(marker)


def test_tls_pair_shares_tokens_and_joins_through_a_follower(tmp_path: Path, postgres: PostgresServer) -> None:
    """Two TLS controllers sharing one PKI and one database: a token made through the leader is
    spent by a join sent to the follower (passed on to the leader), and the agent then finds the leader."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "XDG_CONFIG_HOME": "/nonexistent/sluicegate-tests"}
    data, admin = tmp_path / "data", tmp_path / "admin.conf"
    res = subprocess.run([sys.executable, "-m", "sluicegate.controller.server", "init", "--data-dir", str(data),
                          "--admin-config", str(admin)], capture_output=True, text=True, timeout=60, cwd=ROOT, env=env)
    assert res.returncode == 0, res.stderr
    url = postgres.create_database()
    pair = Pair(tmp_path, url)
    for c in pair.controllers:
        c.extra += ["--pki-dir", str(data / "pki"), "--token-listen", f"127.0.0.1:{free_port()}"]
    pair.start()
    agent: Agent | None = None
    try:
        leader = wait_for("a leader", pair.leader, timeout=20)
        follower = pair.other(leader)
        token = sluicectl(pair.addresses, "token", "create", config=admin).stdout.strip()
        node_dir = tmp_path / "agent-node-t"
        joined = subprocess.run(
            [sys.executable, "-m", "sluicegate.agent.server", "join", "--controller", follower.token_address,
             "--token", token, "--ca-cert-hash", follower.ca_hash, "--node-name", "node-t", "--data-dir", str(node_dir)],
            capture_output=True, text=True, timeout=60, cwd=ROOT, env=env)
        assert joined.returncode == 0, joined.stderr
        # The token was spent in the shared store: a second join with it is refused by either controller.
        again = subprocess.run(
            [sys.executable, "-m", "sluicegate.agent.server", "join", "--controller", leader.token_address,
             "--token", token, "--ca-cert-hash", leader.ca_hash, "--node-name", "node-u",
             "--data-dir", str(tmp_path / "agent-node-u")],
            capture_output=True, text=True, timeout=60, cwd=ROOT, env=env)
        assert again.returncode != 0
        # Follower first in the list: the agent is redirected to the leader over mutual TLS.
        agent = Agent(tmp_path, f"{follower.address},{leader.address}", "node-t").start()
        nodes = json.loads(sluicectl(pair.addresses, "get", "nodes", "-o", "json", config=admin).stdout)
        assert [(n["name"], n["ready"]) for n in nodes["items"]] == [("node-t", True)]
    finally:
        if agent is not None:
            agent.stop()
        pair.stop()
