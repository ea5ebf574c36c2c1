"""Batching a stream's queued messages: order, caps, messages that travel alone, the end."""

from __future__ import annotations

import asyncio

import pytest

from sluicegate.common.streams import coalesced, unbatched
from sluicegate.v1 import agent_pb2


def status(uid: str, message: str = "") -> agent_pb2.AgentMessage:
    return agent_pb2.AgentMessage(pod_status=agent_pb2.PodStatus(uid=uid, message=message))


def register() -> agent_pb2.AgentMessage:
    return agent_pb2.AgentMessage(register=agent_pb2.Register(node=agent_pb2.NodeInfo(name="n1")))


def batch(messages: list[agent_pb2.AgentMessage]) -> agent_pb2.AgentMessage:
    return agent_pb2.AgentMessage(batch=agent_pb2.AgentBatch(messages=messages))


def is_register(m: agent_pb2.AgentMessage) -> bool:
    return m.WhichOneof("kind") == "register"


def shape(m: agent_pb2.AgentMessage) -> str | list[str]:
    """A sent message as the uids it carries: 'uid' alone, ['a', 'b'] for a batch, 'register'."""
    kind = m.WhichOneof("kind")
    if kind == "batch":
        return [x.pod_status.uid for x in m.batch.messages]
    if kind == "register":
        return "register"
    return m.pod_status.uid


async def sent(queued: list[agent_pb2.AgentMessage | None], **caps: int) -> list[str | list[str]]:
    queue: asyncio.Queue[agent_pb2.AgentMessage | None] = asyncio.Queue()
    for m in queued:
        queue.put_nowait(m)
    out: list[str | list[str]] = []
    async with asyncio.timeout(5):
        async for m in coalesced(queue, batch=batch, alone=is_register, **caps):
            out.append(shape(m))
    return out


@pytest.mark.parametrize(
    ("queued", "caps", "expected"),
    [
        pytest.param([status("a"), None], {}, ["a"], id="one-message-goes-as-it-is"),
        pytest.param([status("a"), status("b"), status("c"), None], {}, [["a", "b", "c"]], id="backlog-in-one-batch"),
        pytest.param(
            [register(), status("a"), status("b"), None], {}, ["register", ["a", "b"]], id="register-alone-first"
        ),
        pytest.param(
            [status("a"), register(), status("b"), None], {}, ["a", "register", "b"], id="register-splits-a-batch"
        ),
        pytest.param(
            [status(u) for u in "abcde"] + [None], {"max_messages": 2}, [["a", "b"], ["c", "d"], "e"], id="count-cap"
        ),
        pytest.param(
            [status("a", "x" * 60), status("b", "x" * 60), status("c", "x" * 60), None],
            {"max_bytes": 150},
            [["a", "b"], "c"],
            id="byte-cap-carries-the-next-over",
        ),
        pytest.param([status("a"), None, status("b")], {}, ["a"], id="none-ends-the-stream"),
        pytest.param([None], {}, [], id="empty"),
    ],
)
async def test_coalesced(queued: list[agent_pb2.AgentMessage | None], caps: dict[str, int], expected: list[object]) -> None:
    assert await sent(queued, **caps) == expected


async def test_coalesced_waits_for_the_next_message_once_drained() -> None:
    queue: asyncio.Queue[agent_pb2.AgentMessage | None] = asyncio.Queue()
    stream = coalesced(queue, batch=batch)
    queue.put_nowait(status("a"))
    queue.put_nowait(status("b"))
    async with asyncio.timeout(5):
        assert shape(await anext(stream)) == ["a", "b"]
        pending = asyncio.ensure_future(anext(stream))
        await asyncio.sleep(0)
        assert not pending.done()  # nothing queued: the sender waits rather than sending empty batches
        queue.put_nowait(status("c"))
        assert shape(await pending) == "c"
        queue.put_nowait(None)
        with pytest.raises(StopAsyncIteration):
            await anext(stream)


@pytest.mark.parametrize(
    ("received", "expected"),
    [
        pytest.param(status("a"), ["a"], id="plain"),
        pytest.param(batch([status("a"), status("b")]), ["a", "b"], id="batch-in-order"),
        pytest.param(batch([status("a"), batch([status("b")]), status("c")]), ["a", "c"], id="nested-batch-dropped"),
    ],
)
def test_unbatched(received: agent_pb2.AgentMessage, expected: list[str]) -> None:
    assert [m.pod_status.uid for m in unbatched(received, lambda m: m.batch.messages)] == expected
