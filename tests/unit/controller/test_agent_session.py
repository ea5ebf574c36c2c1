"""What the controller queues for one agent's stream, and when."""

from __future__ import annotations

import asyncio

from sluicegate.controller.nodes import ForgetPodCommand, StopPodCommand
from sluicegate.controller.service.agents import FORGET_DELAY, _StreamSession
from sluicegate.v1 import agent_pb2

DEADLINE = 5.0


def queued(session: _StreamSession) -> list[str]:
    out = []
    while not session.queue.empty():
        raw = session.queue.get_nowait()
        assert raw is not None
        msg = agent_pb2.ControllerMessage.FromString(raw)
        kind = msg.WhichOneof("kind")
        sub = getattr(msg, kind)
        out.append(f"{kind} {sub.uid}" + (" purge" if kind == "forget_pod" and sub.purge else ""))
    return out


async def test_a_forget_travels_with_the_next_message_in_the_order_given() -> None:
    s = _StreamSession("n1")
    s.send(ForgetPodCommand("a"))
    s.send(ForgetPodCommand("b"))
    assert queued(s) == []
    s.send(StopPodCommand("c", 0.0, "Stopping", "evicted"))
    assert queued(s) == ["forget_pod a", "forget_pod b", "stop_pod c"]
    s.close()


async def test_a_lone_forget_goes_out_after_the_delay() -> None:
    s = _StreamSession("n1")
    loop = asyncio.get_running_loop()
    sent_at = loop.time()
    s.send(ForgetPodCommand("a"))
    async with asyncio.timeout(DEADLINE):
        got = await s.queue.get()
    assert got is not None and agent_pb2.ControllerMessage.FromString(got).forget_pod.uid == "a"
    assert loop.time() - sent_at >= FORGET_DELAY * 0.9  # the event loop's timer granularity
    assert queued(s) == []


async def test_a_purge_goes_at_once_and_closing_drops_what_is_held() -> None:
    s = _StreamSession("n1")
    s.send(ForgetPodCommand("a"))
    s.send(ForgetPodCommand("b", purge=True))
    assert queued(s) == ["forget_pod a", "forget_pod b purge"]
    s.send(ForgetPodCommand("c"))
    s.close()
    s.send_held()
    assert queued(s) == []
