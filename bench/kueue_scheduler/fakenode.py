#!/usr/bin/env python3
"""Bench-only fake nodes: the real agent protocol, no processes.

Each simulated node opens its own ``AgentLink.Connect`` stream, registers
with a large allocatable, and then behaves like an agent whose pods always
succeed: a RunPod is reported Running at once and Succeeded (container
terminated, exit 0) after the runtime the workload carries in its
``kueue.x-k8s.io/performance-scheduler-running-ms`` label; a StopPod ends the
pod at once as Failed (container killed).  A workload admitted again after
an eviction arrives as a new pod uid, so its runtime clock starts over.
Heartbeats go out at the interval the controller sent in Registered and,
like the real agent's, carry every pod the node still reports.

This plays the part of the fake job controller in Kueue's runner
(``test/performance/scheduler/runner/controller``), but through the same
path real pods take: placement, RunPod, pod status, settle.

For a topology (Kueue's TAS configuration) the bench passes ``--node-file``:
a JSON list of ``{"name", "labels", "allocatable"}``, one per node, so each
node registers with its block, rack and hostname labels.

Run on its own (the bench starts it as a separate process so that its
work does not share a GIL with the generator and the recorder)::

    python bench/kueue_scheduler/fakenode.py --controller 127.0.0.1:7420 --nodes 4 --ready-file /tmp/nodes.ready
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import grpc

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from sluicegate.common.streams import STREAM_WINDOW_OPTIONS, coalesced, unbatched  # noqa: E402
from sluicegate.v1 import agent_pb2, agent_pb2_grpc  # noqa: E402

log = logging.getLogger("fakenode")

RUNNING_TIME_LABEL = "kueue.x-k8s.io/performance-scheduler-running-ms"
FAKE_NODE_LABEL = "sluicegate.io/fake-node"
KILLED_EXIT_CODE = 137
# Reconnects per node before the node gives up: a bench run that keeps losing
# its streams is measuring something else, and must say so.
MAX_RECONNECTS = 20
REGISTER_TIMEOUT = 30.0


@dataclass(slots=True)
class FakePod:
    uid: str
    name: str
    namespace: str
    workload: str
    requests: dict[str, int]
    priority: int
    started_at: float
    phase: str = "Running"
    reason: str = ""
    exit_code: int = 0
    finished_at: float = 0.0
    timer: asyncio.TimerHandle | None = None

    @property
    def finished(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    def status(self) -> agent_pb2.PodStatus:
        if self.finished:
            container = agent_pb2.ContainerStatus(name="main", state="Terminated", exit_code=self.exit_code,
                                                  reason="Completed" if self.exit_code == 0 else self.reason)
        else:
            container = agent_pb2.ContainerStatus(name="main", state="Running", ready=True, pid=1)
        return agent_pb2.PodStatus(
            uid=self.uid, name=self.name, namespace=self.namespace, workload=self.workload, phase=self.phase,
            reason=self.reason, containers=[container], ready=not self.finished, started_at=self.started_at,
            finished_at=self.finished_at, requests=self.requests, priority=self.priority, qos_class="Burstable",
        )


@dataclass(slots=True)
class NodeStats:
    run_pods: int = 0
    succeeded: int = 0
    stopped: int = 0
    stop_after_end: int = 0
    duplicate_run_pods: int = 0
    missing_runtime_label: int = 0
    heartbeats: int = 0
    reconnects: int = 0
    running: int = 0
    peak_running: int = 0
    # RunPod arrival -> Succeeded report, minus the pod's runtime (timer slack), seconds.
    max_timer_slack: float = 0.0


@dataclass(slots=True)
class FakeNode:
    name: str
    address: str
    allocatable: dict[str, int]
    labels: dict[str, str] = field(default_factory=dict)
    clock: Callable[[], float] = time.time
    pods: dict[str, FakePod] = field(default_factory=dict)
    stats: NodeStats = field(default_factory=NodeStats)
    boot_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    heartbeat_interval: float = 2.0
    registered: asyncio.Event = field(default_factory=asyncio.Event)
    _out: asyncio.Queue[agent_pb2.AgentMessage | None] | None = None

    # -------------------------------------------------------------- sending

    def _send(self, msg: agent_pb2.AgentMessage) -> None:
        # While disconnected nothing is sent: Register carries every pod again.
        if self._out is not None:
            self._out.put_nowait(msg)

    def _send_status(self, pod: FakePod) -> None:
        self._send(agent_pb2.AgentMessage(pod_status=pod.status()))

    def _register(self) -> agent_pb2.AgentMessage:
        return agent_pb2.AgentMessage(register=agent_pb2.Register(
            node=agent_pb2.NodeInfo(name=self.name, labels={**self.labels, FAKE_NODE_LABEL: "true"}, capacity=self.allocatable,
                                    allocatable=self.allocatable, agent_version="bench-fakenode", boot_id=self.boot_id),
            pods=[p.status() for p in self.pods.values()],
        ))

    def _heartbeat(self) -> agent_pb2.AgentMessage:
        usage = agent_pb2.NodeUsage(
            memory_total=self.allocatable.get("memory", 0), memory_available=self.allocatable.get("memory", 0),
            cpu_usage_cores=0.0, nodefs_available=1 << 40, observed_at=self.clock(),
        )
        return agent_pb2.AgentMessage(heartbeat=agent_pb2.Heartbeat(usage=usage, pods=[p.status() for p in self.pods.values()]))

    # ------------------------------------------------------------- commands

    def handle(self, msg: agent_pb2.ControllerMessage) -> None:
        kind = msg.WhichOneof("kind")
        if kind == "run_pod":
            self.run_pod(msg.run_pod.pod)
        elif kind == "stop_pod":
            self.stop_pod(msg.stop_pod.uid)
        elif kind == "forget_pod":
            pod = self.pods.pop(msg.forget_pod.uid, None)
            if pod is not None and not pod.finished:
                self.stats.running -= 1
            if pod is not None and pod.timer is not None:
                pod.timer.cancel()
        elif kind == "log_request":
            r = msg.log_request
            self._send(agent_pb2.AgentMessage(log_chunk=agent_pb2.LogChunk(
                request_id=r.request_id, eof=True, error=f"fake node {self.name} keeps no logs")))

    def run_pod(self, spec: agent_pb2.PodSpec) -> None:
        if spec.uid in self.pods:
            self.stats.duplicate_run_pods += 1
            self._send_status(self.pods[spec.uid])
            return
        raw = spec.labels.get(RUNNING_TIME_LABEL)
        if raw is None:
            self.stats.missing_runtime_label += 1
        runtime = int(raw) / 1000 if raw else 0.0
        now = self.clock()
        pod = FakePod(uid=spec.uid, name=spec.name, namespace=spec.namespace, workload=spec.workload,
                      requests=dict(spec.requests), priority=spec.priority, started_at=now)
        self.pods[spec.uid] = pod
        self.stats.run_pods += 1
        self.stats.running += 1
        self.stats.peak_running = max(self.stats.peak_running, self.stats.running)
        self._send_status(pod)
        pod.timer = asyncio.get_running_loop().call_later(runtime, self._succeed, pod, runtime)

    def _succeed(self, pod: FakePod, runtime: float) -> None:
        pod.timer = None
        if pod.finished or self.pods.get(pod.uid) is not pod:
            return
        pod.phase, pod.exit_code, pod.finished_at = "Succeeded", 0, self.clock()
        self.stats.succeeded += 1
        self.stats.running -= 1
        self.stats.max_timer_slack = max(self.stats.max_timer_slack, pod.finished_at - pod.started_at - runtime)
        self._send_status(pod)

    def stop_pod(self, uid: str) -> None:
        pod = self.pods.get(uid)
        if pod is None:
            # Answering for a pod we never ran would only draw another StopPod: stay quiet.
            return
        if pod.finished:
            self.stats.stop_after_end += 1
            return
        if pod.timer is not None:
            pod.timer.cancel()
            pod.timer = None
        pod.phase, pod.reason, pod.exit_code, pod.finished_at = "Failed", "Killed", KILLED_EXIT_CODE, self.clock()
        self.stats.stopped += 1
        self.stats.running -= 1
        self._send_status(pod)

    # ----------------------------------------------------------------- link

    async def run(self) -> None:
        """Stay connected until cancelled; gives up after MAX_RECONNECTS broken streams."""
        while True:
            try:
                await self._session()
                problem = "the controller closed the stream"
            except grpc.aio.AioRpcError as exc:
                problem = f"{exc.code().name}: {exc.details()}"
            finally:
                self._out = None
            if self.stats.reconnects >= MAX_RECONNECTS:
                raise ConnectionError(f"node {self.name}: stream broke {self.stats.reconnects + 1} times; last: {problem}")
            self.stats.reconnects += 1
            log.warning("node %s: %s; reconnecting (%d/%d)", self.name, problem, self.stats.reconnects, MAX_RECONNECTS)
            await asyncio.sleep(min(2.0, 0.1 * 2 ** self.stats.reconnects))

    async def _session(self) -> None:
        async with grpc.aio.insecure_channel(self.address, options=STREAM_WINDOW_OPTIONS) as channel:
            out: asyncio.Queue[agent_pb2.AgentMessage | None] = asyncio.Queue()
            out.put_nowait(self._register())

            # Like the real agent, coalesce what piled up into one batch per stream write.
            outgoing = coalesced(out, batch=lambda ms: agent_pb2.AgentMessage(batch=agent_pb2.AgentBatch(messages=ms)),
                                 alone=lambda m: m.WhichOneof("kind") == "register")
            call = agent_pb2_grpc.AgentLinkStub(channel).Connect(outgoing)  # type: ignore[no-untyped-call]
            first = await asyncio.wait_for(call.read(), timeout=REGISTER_TIMEOUT)
            if first is grpc.aio.EOF or first.WhichOneof("kind") != "registered":
                raise ConnectionError(f"node {self.name}: the controller did not answer Register with Registered")
            self.heartbeat_interval = first.registered.heartbeat_interval_seconds or self.heartbeat_interval
            self._out = out
            self.registered.set()
            beat = asyncio.create_task(self._beat(), name=f"heartbeat-{self.name}")
            try:
                while (msg := await call.read()) is not grpc.aio.EOF:
                    for one in unbatched(msg, lambda m: m.batch.messages):
                        self.handle(one)
            finally:
                beat.cancel()
                out.put_nowait(None)

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_interval)
            self._send(self._heartbeat())
            self.stats.heartbeats += 1


def total_stats(nodes: list[FakeNode]) -> dict[str, float]:
    """Counters summed over the nodes; the timer slack is the worst node's (peak_running sums per-node peaks)."""
    out: dict[str, float] = {"nodes": len(nodes)}
    for n in nodes:
        for k, v in asdict(n.stats).items():
            out[k] = max(out.get(k, 0.0), v) if k == "max_timer_slack" else out.get(k, 0) + v
    out["max_timer_slack"] = round(out.get("max_timer_slack", 0.0), 4)
    return out


def load_node_file(path: Path, address: str) -> list[FakeNode]:
    """Nodes as the bench wrote them: a JSON list of {"name", "labels", "allocatable"}."""
    raw = json.loads(path.read_text())
    if not isinstance(raw, list) or not raw:
        raise ValueError(f"{path}: expected a non-empty JSON list of nodes")
    fleet = []
    for i, n in enumerate(raw):
        if not isinstance(n, dict) or not isinstance(n.get("name"), str) or not isinstance(n.get("allocatable"), dict):
            raise ValueError(f"{path}: [{i}]: expected {{\"name\": str, \"labels\": {{}}, \"allocatable\": {{}}}}")
        fleet.append(FakeNode(name=n["name"], address=address, labels={str(k): str(v) for k, v in n.get("labels", {}).items()},
                              allocatable={str(k): int(v) for k, v in n["allocatable"].items()}))
    return fleet


async def serve(*, controller: str, nodes: int, node_cpu: int, prefix: str, ready_file: Path | None,
                stats_file: Path | None, node_file: Path | None = None) -> int:
    loop = asyncio.get_running_loop()
    stop: asyncio.Future[str] = loop.create_future()

    def on_signal(name: str) -> None:
        log.info("%s received: stopping", name)
        if not stop.done():
            stop.set_result(name)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig.name)
    allocatable = {"cpu": node_cpu * 1000, "memory": node_cpu * (4 << 30)}
    if node_file is not None:
        fleet = load_node_file(node_file, controller)
    else:
        fleet = [FakeNode(name=f"{prefix}-{i}", address=controller, allocatable=dict(allocatable)) for i in range(nodes)]
    tasks = [asyncio.create_task(n.run(), name=f"node-{n.name}") for n in fleet]
    try:
        registered = asyncio.gather(*(n.registered.wait() for n in fleet))
        first: list[asyncio.Future[Any]] = [registered, *tasks]
        done, _ = await asyncio.wait(first, timeout=REGISTER_TIMEOUT, return_when=asyncio.FIRST_COMPLETED)
        if registered not in done:
            registered.cancel()
            failed = [t for t in tasks if t.done()]
            why = failed[0].exception() if failed else f"not all registered within {REGISTER_TIMEOUT:g}s"
            log.error("fake nodes could not register: %s", why)
            return 1
        if ready_file is not None:
            tmp = ready_file.with_suffix(".tmp")
            tmp.write_text(json.dumps({"pid": os.getpid(), "nodes": [n.name for n in fleet]}))
            os.replace(tmp, ready_file)
        running: list[asyncio.Future[Any]] = [stop, *tasks]
        await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
        crashed = [t for t in tasks if t.done() and not t.cancelled() and t.exception() is not None]
        for t in crashed:
            log.error("%s failed: %s", t.get_name(), t.exception())
        return 1 if crashed else 0
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if stats_file is not None:
            stats_file.write_text(json.dumps(total_stats(fleet), indent=2))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--controller", required=True,
                   help="controller gRPC HOST:PORT; '-': read it from the first line of stdin (the bench starts this "
                        "process before the controller, so that its start-up is not part of the controller's wall)")
    p.add_argument("--waiting-file", type=Path, help="with --controller -: written once started, before reading stdin")
    p.add_argument("--nodes", type=int, default=4)
    p.add_argument("--node-cpu", type=int, default=1000, help="allocatable CPUs per node (memory: 4 GiB per CPU)")
    p.add_argument("--prefix", default="fake")
    p.add_argument("--node-file", type=Path, help="JSON list of {name, labels, allocatable}; replaces --nodes/--node-cpu")
    p.add_argument("--ready-file", type=Path, help="written once every node is registered")
    p.add_argument("--stats-file", type=Path, help="JSON counters written on exit")
    p.add_argument("--log-level", default="WARNING")
    ns = p.parse_args(argv)
    logging.basicConfig(level=ns.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    controller = ns.controller
    if controller == "-":
        if ns.waiting_file is not None:
            ns.waiting_file.write_text(json.dumps({"pid": os.getpid()}))
        controller = sys.stdin.readline().strip()
        if not controller:
            log.error("--controller -: stdin closed before it gave the controller's address")
            return 2
    return asyncio.run(serve(controller=controller, nodes=ns.nodes, node_cpu=ns.node_cpu, prefix=ns.prefix,
                             ready_file=ns.ready_file, stats_file=ns.stats_file, node_file=ns.node_file))


if __name__ == "__main__":
    sys.exit(main())
