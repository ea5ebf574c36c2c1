"""A refused agent stream (a revoked or foreign certificate) ends with its status, whatever the agent sent."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc

from sluicegate.controller.manager import Manager
from sluicegate.controller.service import agents
from sluicegate.controller.service.agents import AgentLinkServicer
from sluicegate.controller.store.memory import MemoryStore
from sluicegate.v1 import agent_pb2, agent_pb2_grpc

from .test_manager import Clock

DEADLINE = 20.0


async def _messages(first: agent_pb2.AgentMessage, more: asyncio.Queue[agent_pb2.AgentMessage | None]
                    ) -> AsyncIterator[agent_pb2.AgentMessage]:
    yield first
    while (msg := await more.get()) is not None:
        yield msg


class _Revoked:
    """An authenticator that refuses every caller, as the real one refuses a revoked certificate."""

    def authenticate(self, auth_context: object, metadata: object) -> object:
        from sluicegate.security.identity import Unauthenticated

        raise Unauthenticated("certificate 01 of 'node-a' has been revoked")


async def test_a_refused_agent_gets_its_status_whether_it_sent_its_register_or_nothing(
        monkeypatch: object) -> None:
    # The refusal waits for the agent's first message (grpc's asyncio client reports a status that arrives
    # while it is still writing as INTERNAL), but not for ever: a peer that sends nothing is refused too.
    monkeypatch.setattr(agents, "REFUSAL_READ_SECONDS", 0.5)  # type: ignore[attr-defined]
    m = Manager(MemoryStore(), clock=Clock())
    server = grpc.aio.server()
    agent_pb2_grpc.add_AgentLinkServicer_to_server(
        AgentLinkServicer(m, heartbeat_interval=30, authenticator=_Revoked()), server)  # type: ignore[arg-type]
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    register = agent_pb2.AgentMessage(register=agent_pb2.Register(node=agent_pb2.NodeInfo(name="node-a")))
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = agent_pb2_grpc.AgentLinkStub(channel)
            for first in (register, None):
                more: asyncio.Queue[agent_pb2.AgentMessage | None] = asyncio.Queue()
                call = stub.Connect(_messages(first, more) if first is not None else _silent(more))
                async with asyncio.timeout(DEADLINE):
                    try:
                        await call.read()
                    except grpc.aio.AioRpcError as exc:
                        assert exc.code() == grpc.StatusCode.UNAUTHENTICATED, exc
                        assert "revoked" in (exc.details() or "")
                    else:
                        raise AssertionError("the stream was not refused")
                more.put_nowait(None)
            assert "node-a" not in m.fleet.registry.nodes
    finally:
        await server.stop(None)


async def _silent(more: asyncio.Queue[agent_pb2.AgentMessage | None]) -> AsyncIterator[agent_pb2.AgentMessage]:
    while (msg := await more.get()) is not None:
        yield msg
