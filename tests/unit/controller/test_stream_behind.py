"""Backpressure on an agent's stream: a node whose agent reads slower than the controller sends gets no new pods.

Commands for a node wait in its stream's queue (``_StreamSession``) until
gRPC takes them.  Once SEND_HIGH_WATER of them wait, the node shows the
condition StreamBehind, which keeps new pods away as a pressure condition
does; its own pods keep running and the commands for them still go.  Read
down to SEND_LOW_WATER, it catches up: the condition goes and workloads
parked for want of a node are tried again.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import grpc
import pytest

from sluicegate.controller.manager import Manager, workload_state
from sluicegate.controller.nodes import STREAM_BEHIND, RunPodCommand, StopPodCommand
from sluicegate.controller.service import agents
from sluicegate.controller.service.agents import SEND_HIGH_WATER, SEND_LOW_WATER, AgentLinkServicer, _StreamSession
from sluicegate.controller.store.memory import MemoryStore
from sluicegate.manifest.loader import parse_text
from sluicegate.v1 import agent_pb2, agent_pb2_grpc

from .test_manager import QUEUES, Clock, RecordingSession, settle, workload
from .test_node_loss import Session

DEADLINE = 20.0


def _stop(i: int, message: str = "") -> StopPodCommand:
    return StopPodCommand(f"pod-{i}", 0.0, "Stopping", message)


async def test_a_stream_is_behind_from_the_high_water_mark_until_read_down_to_the_low() -> None:
    s = _StreamSession("n1")
    told: list[bool] = []
    s.on_behind = told.append
    for i in range(SEND_HIGH_WATER - 1):
        s.send(_stop(i))
    assert (told, s.behind) == ([], False)
    s.send(_stop(SEND_HIGH_WATER))
    assert (told, s.behind) == ([True], True)
    s.send(_stop(SEND_HIGH_WATER + 1))  # told once, not per message
    assert told == [True]
    # The writer takes messages off the queue and says so after each write.
    while s.queue.qsize() > SEND_LOW_WATER + 1:
        s.queue.get_nowait()
        s.sent()
    assert (told, s.behind) == ([True], True)
    s.queue.get_nowait()
    s.sent()
    assert (told, s.behind) == ([True, False], False)
    s.close()


def _cluster() -> tuple[Manager, Session]:
    m = Manager(MemoryStore(), clock=Clock())
    m.apply(parse_text(QUEUES % {"strategy": "BestEffortFIFO"}, "queues.yaml"))
    session = Session()
    m.fleet.register(name="n1", labels={}, capacity={"cpu": 8000}, allocatable={"cpu": 8000}, boot_id="b",
                     agent_version="t", health_address="", pods=[], session=session)
    return m, session


def _run_pods(session: RecordingSession) -> list[str]:
    return [c.pod.name for c in session.sent if isinstance(c, RunPodCommand)]


def test_a_node_behind_gets_no_new_pods_and_its_waiting_workloads_run_once_it_catches_up() -> None:
    m, session = _cluster()
    node = m.fleet.registry.nodes["n1"]
    m.fleet.stream_behind("n1", session, True, SEND_HIGH_WATER)
    assert node.shown_conditions == (STREAM_BEHIND,) and not node.view().schedulable
    m.create_workload(workload("w", "1"))
    settle(m)
    wl = m.get_workload("default", "w")
    assert workload_state(wl) == "Pending" and _run_pods(session) == []
    message = wl.status.condition("QuotaReserved").message  # type: ignore[union-attr]
    assert "1 not ready or under pressure" in message, message
    m.fleet.stream_behind("n1", session, False, SEND_LOW_WATER)
    assert node.shown_conditions == () and node.view().schedulable
    settle(m)
    assert workload_state(m.get_workload("default", "w")) == "Admitted"
    assert len(_run_pods(session)) == 1


def test_news_from_a_stream_that_is_no_longer_the_nodes_changes_nothing() -> None:
    m, old = _cluster()
    new = Session()
    m.fleet.register(name="n1", labels={}, capacity={"cpu": 8000}, allocatable={"cpu": 8000}, boot_id="b",
                     agent_version="t", health_address="", pods=[], session=new)
    m.fleet.stream_behind("n1", old, True, SEND_HIGH_WATER)
    assert not m.fleet.registry.nodes["n1"].stream_behind
    m.fleet.stream_behind("n1", new, True, SEND_HIGH_WATER)
    assert m.fleet.registry.nodes["n1"].stream_behind
    # A new stream starts afresh.
    m.fleet.register(name="n1", labels={}, capacity={"cpu": 8000}, allocatable={"cpu": 8000}, boot_id="b",
                     agent_version="t", health_address="", pods=[], session=Session())
    assert not m.fleet.registry.nodes["n1"].stream_behind


async def _messages(first: agent_pb2.AgentMessage, more: asyncio.Queue[agent_pb2.AgentMessage | None]
                    ) -> AsyncIterator[agent_pb2.AgentMessage]:
    yield first
    while (msg := await more.get()) is not None:
        yield msg


# The generated registration (the writer's bytes parsed back into messages), and the controller's own
# (the writer's bytes sent as they are): the agent reads the same.
@pytest.mark.parametrize("add", [agent_pb2_grpc.add_AgentLinkServicer_to_server, agents.add_agent_link_servicer])
async def test_over_grpc_an_agent_that_stops_reading_falls_behind_and_catches_up_when_it_reads_again(
    add: Callable[[AgentLinkServicer, grpc.aio.Server], None],
) -> None:
    m = Manager(MemoryStore(), clock=Clock())
    server = grpc.aio.server()
    add(AgentLinkServicer(m, heartbeat_interval=30, epoch=5), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    register = agent_pb2.AgentMessage(register=agent_pb2.Register(node=agent_pb2.NodeInfo(name="n1")))
    more: asyncio.Queue[agent_pb2.AgentMessage | None] = asyncio.Queue()
    # Big messages, so that the transport's buffers fill with few of them and the rest wait in the queue.
    bulky = "x" * 16_384
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = agent_pb2_grpc.AgentLinkStub(channel).Connect(_messages(register, more))
            async with asyncio.timeout(DEADLINE):
                registered = await call.read()
                assert registered.WhichOneof("kind") == "registered" and registered.epoch == 5
                node = m.fleet.registry.nodes["n1"]
                sent = 0
                # The agent reads nothing now: send until its stream is behind (bounded: the transport's
                # buffers hold a few tens of MiB at most, far fewer messages than this bound).
                while not node.stream_behind:
                    assert sent < 20 * SEND_HIGH_WATER, "never behind"
                    m.fleet.send("n1", _stop(sent, bulky))
                    sent += 1
                    if sent % 256 == 0:
                        await asyncio.sleep(0)  # let the writer move what the transport takes
                assert STREAM_BEHIND in node.shown_conditions
                waiting = node.session.queue.qsize()  # type: ignore[union-attr]
                assert waiting >= agents.SEND_LOW_WATER
                # The agent reads again: every message arrives in order, and the node catches up.
                received = 0
                while received < sent:
                    msg = await call.read()
                    assert msg is not grpc.aio.EOF and msg.epoch == 5
                    for one in (msg.batch.messages if msg.WhichOneof("kind") == "batch" else [msg]):
                        assert one.stop_pod.uid == f"pod-{received}"
                        received += 1
                    if not node.stream_behind:
                        break
                assert not node.stream_behind and STREAM_BEHIND not in node.shown_conditions
            more.put_nowait(None)
            call.cancel()
    finally:
        await server.stop(None)

