"""The agent stream's writer sends each message's bytes once: the same bytes, in the same batches, as
batching the messages themselves (coalesced) and serializing them with the generated serializer."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from sluicegate.common.streams import coalesced, drain_encoded
from sluicegate.controller.service.agents import _BATCH_TAG, _epoch_suffix
from sluicegate.v1 import agent_pb2


def message(kind: int, uid: str, size: int) -> agent_pb2.ControllerMessage:
    if kind == 0:
        return agent_pb2.ControllerMessage(forget_pod=agent_pb2.ForgetPod(uid=uid, purge=size % 2 == 1))
    if kind == 1:
        return agent_pb2.ControllerMessage(stop_pod=agent_pb2.StopPod(uid=uid, reason="r", message="m" * size))
    if kind == 2:
        return agent_pb2.ControllerMessage(heartbeat_ack=agent_pb2.HeartbeatAck(seq=size))
    pod = agent_pb2.PodSpec(uid=uid, name=uid, containers=[agent_pb2.Container(name="c" + "x" * size)])
    return agent_pb2.ControllerMessage(run_pod=agent_pb2.RunPod(pod=pod))


def batch(messages: list[agent_pb2.ControllerMessage]) -> agent_pb2.ControllerMessage:
    return agent_pb2.ControllerMessage(batch=agent_pb2.ControllerBatch(messages=messages))


async def by_messages(msgs: list[agent_pb2.ControllerMessage], epoch: int, **caps: int) -> list[bytes]:
    queue: asyncio.Queue[agent_pb2.ControllerMessage | None] = asyncio.Queue()
    for m in msgs:
        queue.put_nowait(m)
    queue.put_nowait(None)
    out = []
    async for m in coalesced(queue, batch=batch, **caps):
        if epoch:
            m.epoch = epoch
        out.append(m.SerializeToString())
    return out


def by_bytes(msgs: list[agent_pb2.ControllerMessage], epoch: int, **caps: int) -> list[bytes]:
    queue: asyncio.Queue[bytes | None] = asyncio.Queue()
    for m in msgs:
        queue.put_nowait(m.SerializeToString())
    queue.put_nowait(None)
    out = []
    carried: bytes | None = None
    while True:
        head = carried if carried is not None else queue.get_nowait()
        if head is None:
            break
        sent, carried, closing = drain_encoded(head, queue, batch_tag=_BATCH_TAG, **caps)
        out.append(sent + _epoch_suffix(epoch))
        if closing:
            break
    return out


messages = st.lists(
    st.builds(message, st.integers(0, 3), st.text(max_size=8), st.integers(0, 20_000)), max_size=30)


@settings(max_examples=150, deadline=None)
@given(messages, st.sampled_from([0, 1, 127, 128, 300, 2**40]), st.integers(1, 8), st.integers(1, 60_000))
def test_the_bytes_sent_are_those_of_the_batched_messages(
    msgs: list[agent_pb2.ControllerMessage], epoch: int, max_messages: int, max_bytes: int
) -> None:
    caps = {"max_messages": max_messages, "max_bytes": max_bytes}
    want = asyncio.run(by_messages([agent_pb2.ControllerMessage.FromString(m.SerializeToString()) for m in msgs],
                                   epoch, **caps))
    assert by_bytes(msgs, epoch, **caps) == want


def test_a_large_burst_goes_as_batches_under_the_byte_cap() -> None:
    msgs = [message(3, f"p{i}", 3000) for i in range(2000)]
    got = by_bytes(msgs, 7)
    assert got == asyncio.run(by_messages(msgs, 7))
    assert len(got) > 1
    parsed = [agent_pb2.ControllerMessage.FromString(b) for b in got]
    assert [m.run_pod.pod.uid for p in parsed for m in p.batch.messages] == [f"p{i}" for i in range(2000)]
    assert all(p.epoch == 7 for p in parsed)
