"""Node loss with self-fencing: NotReady at the timeout, requeue only after the fencing grace, never Failed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import pytest

from sluicegate.controller.fleet import FENCING_MARGIN
from sluicegate.controller.manager import Manager, workload_state
from sluicegate.controller.nodes import NodeUsage, ReportedPod, RunPodCommand
from sluicegate.controller.service.agents import AgentLinkServicer
from sluicegate.controller.store.memory import MemoryStore
from sluicegate.manifest.loader import parse_text
from sluicegate.model.pods import FAILED, RUNNING, PodRecord
from sluicegate.model.workloads import Workload
from sluicegate.v1 import agent_pb2, agent_pb2_grpc

from .test_manager import QUEUES, RecordingSession, settle, workload

TIMEOUT, GRACE = 10.0, 20.0
# The pods' default terminationGracePeriodSeconds (30s) exceeds GRACE: it wins.
REQUEUE_AFTER = TIMEOUT + 30 + FENCING_MARGIN


class ManualClock:
    def __init__(self) -> None:
        self.t = 1_000.0

    def __call__(self) -> float:
        return self.t


class Session(RecordingSession):
    def __init__(self) -> None:
        super().__init__()
        self.superseded = ""

    def supersede(self, reason: str) -> None:
        self.superseded = reason


def cluster(*, self_fencing: bool = True) -> tuple[Manager, ManualClock, Session]:
    clock = ManualClock()
    m = Manager(MemoryStore(), clock=clock, node_timeout=TIMEOUT, fencing_grace=GRACE, self_fencing=self_fencing)
    m.apply(parse_text(QUEUES % {"strategy": "BestEffortFIFO"}, "queues.yaml"))
    session = Session()
    register(m, session)
    return m, clock, session


def register(m: Manager, session: Session, pods: list[ReportedPod] | None = None) -> None:
    m.fleet.register(name="n1", labels={}, capacity={"cpu": 8000}, allocatable={"cpu": 8000}, boot_id="b",
                     agent_version="t", health_address="", pods=pods or [], session=session)


def running(m: Manager, name: str) -> tuple[Workload, PodRecord]:
    m.create_workload(workload(name, "1"))
    settle(m)
    pod = m.get_workload("default", name).status.pods[0]
    m.fleet.pod_status("n1", reported(pod, RUNNING))
    wl = m.get_workload("default", name)
    assert (workload_state(wl), wl.status.pods[0].phase) == ("Admitted", RUNNING)
    return wl, wl.status.pods[0]


def reported(pod: PodRecord, phase: str, reason: str = "", message: str = "") -> ReportedPod:
    return ReportedPod(uid=pod.uid, name=pod.name, namespace="default", workload="w", phase=phase, reason=reason,
                       message=message)


def evicted(wl: Workload) -> tuple[str, str]:
    c = wl.status.condition("Evicted")
    return (c.reason, c.message) if c is not None else ("", "")


def test_a_silent_node_is_not_ready_at_the_timeout_but_its_workloads_stay_until_the_fencing_grace() -> None:
    m, clock, _ = cluster()
    _, pod = running(m, "w")
    node = m.fleet.registry.nodes["n1"]
    clock.t += TIMEOUT + 0.5
    m.fleet.check_nodes()
    assert not node.ready and "no heartbeat" in node.not_ready_reason
    wl = m.get_workload("default", "w")
    assert (workload_state(wl), wl.status.pods[0].phase, wl.status.is_true("Evicted")) == ("Admitted", RUNNING, False)
    clock.t += REQUEUE_AFTER - TIMEOUT - 1.0
    m.fleet.check_nodes()
    assert workload_state(m.get_workload("default", "w")) == "Admitted"
    clock.t += 1.0
    m.fleet.check_nodes()
    wl = m.get_workload("default", "w")
    reason, message = evicted(wl)
    assert reason == "NodeLost" and "node n1 stopped responding" in message and "fencing grace" in message
    assert (wl.is_finished, workload_state(wl)) == (False, "Pending")
    # The pod is lost, not failed by the workload: its record is moved aside with the requeue.
    assert not node.pods


def test_the_longest_termination_grace_of_the_nodes_pods_extends_the_fencing_grace() -> None:
    m, _, _ = cluster()
    running(m, "w")
    node = m.fleet.registry.nodes["n1"]
    assert m.fleet.fencing_grace_for(node) == 30 + FENCING_MARGIN
    m.fleet.fencing_grace = 100.0
    assert m.fleet.fencing_grace_for(node) == 100.0


def test_a_node_that_returns_within_the_grace_loses_nothing() -> None:
    m, clock, _ = cluster()
    _, pod = running(m, "w")
    clock.t += TIMEOUT + 5
    m.fleet.check_nodes()
    assert not m.fleet.registry.nodes["n1"].ready
    register(m, Session(), pods=[reported(pod, RUNNING)])
    for _ in range(int(REQUEUE_AFTER // 5) + 1):  # past the first silence's deadline, heartbeating
        clock.t += 5
        m.fleet.heartbeat("n1", NodeUsage(), [], [reported(pod, RUNNING)])
        m.fleet.check_nodes()
    wl = m.get_workload("default", "w")
    assert m.fleet.registry.nodes["n1"].ready
    assert (workload_state(wl), wl.status.pods[0].phase, wl.status.is_true("Evicted")) == ("Admitted", RUNNING, False)


def test_heartbeats_on_the_live_stream_make_a_silent_node_ready_again() -> None:
    m, clock, _ = cluster()
    running(m, "w")
    clock.t += TIMEOUT + 1
    m.fleet.check_nodes()
    m.fleet.heartbeat("n1", NodeUsage(), [], [])
    assert m.fleet.registry.nodes["n1"].ready


def test_without_self_fencing_a_lost_nodes_workloads_wait_for_it() -> None:
    m, clock, _ = cluster(self_fencing=False)
    running(m, "w")
    clock.t += 10 * REQUEUE_AFTER
    m.fleet.check_nodes()
    assert workload_state(m.get_workload("default", "w")) == "Admitted"


@pytest.mark.parametrize(("reason", "evicted_reason", "words"), [
    ("NodeFenced", "NodeLost", "was ended by node n1"),
    ("NodeRebooted", "NodeLost", "was ended by node n1"),
    ("Orphaned", "PodLost", "was killed by node n1"),
])
def test_a_pod_the_node_ended_by_itself_requeues_its_workload(reason: str, evicted_reason: str, words: str) -> None:
    m, _, _ = cluster()
    _, pod = running(m, "w")
    register(m, Session(), pods=[reported(pod, FAILED, reason, "cut off / no checkpoint")])
    wl = m.get_workload("default", "w")
    got_reason, message = evicted(wl)
    assert (got_reason, workload_state(wl), wl.is_finished) == (evicted_reason, "Pending", False)
    assert words in message and reason in message


def test_a_pod_the_agent_no_longer_has_requeues_its_workload_instead_of_failing_it() -> None:
    m, _, _ = cluster()
    running(m, "w")
    register(m, Session(), pods=[])
    wl = m.get_workload("default", "w")
    reason, message = evicted(wl)
    assert (reason, workload_state(wl), wl.is_finished) == ("PodLost", "Pending", False)
    assert "node n1 no longer runs pod w-main-0" in message and "checkpoint lost" in message
    # Admitted again at once (the node is back): a new pod, a new uid.
    settle(m)
    assert workload_state(m.get_workload("default", "w")) == "Admitted"


def test_a_second_stream_supersedes_the_first_and_the_old_streams_disconnect_does_nothing() -> None:
    m, _, first = cluster()
    second = Session()
    register(m, second)
    assert first.superseded == "superseded by a newer stream for node n1"
    m.fleet.disconnected("n1", first)
    node = m.fleet.registry.nodes["n1"]
    assert node.session is second and node.ready
    assert not m.fleet.current("n1", first) and m.fleet.current("n1", second)
    m.create_workload(workload("w", "1"))
    settle(m)
    assert [type(c) for c in second.sent] == [RunPodCommand] and first.sent == []


# ------------------------------------------------------------ over gRPC


async def _serve(m: Manager) -> tuple[grpc.aio.Server, str]:
    server = grpc.aio.server()
    agent_pb2_grpc.add_AgentLinkServicer_to_server(AgentLinkServicer(m, heartbeat_interval=0.5), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, f"127.0.0.1:{port}"


async def _messages(first: agent_pb2.AgentMessage, more: asyncio.Queue[agent_pb2.AgentMessage | None]
                    ) -> AsyncIterator[agent_pb2.AgentMessage]:
    yield first
    while (msg := await more.get()) is not None:
        yield msg


async def test_over_grpc_registered_carries_the_timing_heartbeats_are_acked_and_a_newer_stream_aborts_the_older() -> None:
    m = Manager(MemoryStore(), clock=ManualClock(), node_timeout=TIMEOUT, fencing_grace=GRACE)
    server, address = await _serve(m)
    register_msg = agent_pb2.AgentMessage(register=agent_pb2.Register(node=agent_pb2.NodeInfo(name="n1")))
    try:
        async with grpc.aio.insecure_channel(address) as ch1, grpc.aio.insecure_channel(address) as ch2:
            q1: asyncio.Queue[agent_pb2.AgentMessage | None] = asyncio.Queue()
            call1 = agent_pb2_grpc.AgentLinkStub(ch1).Connect(_messages(register_msg, q1))
            async with asyncio.timeout(5):
                reg = (await call1.read()).registered
                assert (reg.node_timeout_seconds, reg.fencing_grace_seconds, reg.self_fencing) == (TIMEOUT, GRACE, True)
                q1.put_nowait(agent_pb2.AgentMessage(heartbeat=agent_pb2.Heartbeat(seq=7)))
                ack = await call1.read()
                assert ack.heartbeat_ack.seq == 7
            q2: asyncio.Queue[agent_pb2.AgentMessage | None] = asyncio.Queue()
            call2 = agent_pb2_grpc.AgentLinkStub(ch2).Connect(_messages(register_msg, q2))
            async with asyncio.timeout(5):
                assert (await call2.read()).WhichOneof("kind") == "registered"
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    while True:
                        await call1.read()
                assert err.value.code() == grpc.StatusCode.ABORTED
                assert err.value.details() == "superseded by a newer stream for node n1"
            node = m.fleet.registry.nodes["n1"]
            # The old stream is gone; its end took nothing from the node, which the new stream holds.
            assert node.session is not None and node.ready
            q2.put_nowait(agent_pb2.AgentMessage(heartbeat=agent_pb2.Heartbeat(seq=1)))
            async with asyncio.timeout(5):
                assert (await call2.read()).heartbeat_ack.seq == 1
            q2.put_nowait(None)
            q1.put_nowait(None)
    finally:
        await server.stop(None)


def test_a_wall_clock_step_does_not_make_a_node_look_silent() -> None:
    wall, mono = ManualClock(), ManualClock()
    m = Manager(MemoryStore(), clock=wall, monotonic=mono, node_timeout=TIMEOUT, fencing_grace=GRACE)
    m.apply(parse_text(QUEUES % {"strategy": "BestEffortFIFO"}, "queues.yaml"))
    register(m, Session())
    running(m, "w")
    wall.t += 3600  # NTP stepped the wall clock an hour ahead
    m.fleet.check_nodes()
    assert m.fleet.registry.nodes["n1"].ready
    mono.t += TIMEOUT + 1
    m.fleet.check_nodes()
    assert not m.fleet.registry.nodes["n1"].ready


def test_a_node_cannot_report_or_answer_for_another_nodes_pods() -> None:
    m, _, _ = cluster()
    wl, pod = running(m, "theirs")
    other = Session()
    m.fleet.register(name="n2", labels={}, capacity={"cpu": 8000}, allocatable={"cpu": 8000}, boot_id="b2",
                     agent_version="t", health_address="", pods=[], session=other)
    # n2 claims n1's pod failed: nothing changes.
    m.fleet.pod_status("n2", reported(pod, FAILED, "Error", "forged"))
    after = m.get_workload("default", "theirs")
    assert (workload_state(after), after.status.pods[0].phase) == ("Admitted", RUNNING)

    async def logs() -> list[tuple[str, str, bytes]]:
        out: list[tuple[str, str, bytes]] = []
        stream = m.fleet.logs("default", "theirs", "", "", False)
        task = asyncio.ensure_future(anext(stream))
        await asyncio.sleep(0)
        (request_id,) = m.fleet._log_routes
        m.fleet.log_chunk("n2", request_id, "c", b"forged\n", True, "")  # not the node that was asked
        m.fleet.log_chunk("n1", request_id, "c", b"real\n", False, "")
        out.append(await asyncio.wait_for(task, 5))
        await stream.aclose()
        return out

    assert asyncio.run(logs()) == [(pod.name, "c", b"real\n")]


class _LeaderSession(Session):
    def __init__(self) -> None:
        super().__init__()
        self.stepped_down = ""

    def step_down(self, message: str) -> None:
        self.stepped_down = message


def test_a_stream_that_registers_after_the_controller_stopped_leading_is_ended_too() -> None:
    # A paused leader that resumes can read a Register in the same turn as its lost lease: the agent
    # must not stay with a controller that no longer leads.
    m, _, first = cluster()
    before = _LeaderSession()
    register(m, before)
    m.fleet.end_all_streams("this controller no longer leads: lease lost")
    assert before.stepped_down == "this controller no longer leads: lease lost"
    late = _LeaderSession()
    m.fleet.register(name="n2", labels={}, capacity={"cpu": 8000}, allocatable={"cpu": 8000}, boot_id="b",
                     agent_version="t", health_address="", pods=[], session=late)
    assert late.stepped_down == "this controller no longer leads: lease lost"
    assert "n2" not in m.fleet.registry.nodes
