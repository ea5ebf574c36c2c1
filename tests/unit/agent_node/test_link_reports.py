"""What the agent's stream carries for a pod's life (ControllerLink.forward_events over a real runtime).

A new pod is not reported while its first start is under way (the
controller sent it as Pending), and its first Running report is held for
``RUNNING_REPORT_HOLD_SECONDS``: a pod that ends meanwhile is reported
once, with when it started and ended.
"""

from __future__ import annotations

import asyncio

import pytest

from sluicegate.agent import link as link_module
from sluicegate.agent.link import Backoff, ControllerLink
from sluicegate.agent.node import AgentNode
from sluicegate.agent.pod import Container, Pod
from sluicegate.v1 import agent_pb2

from .conftest import MakeNode

WAIT = 10.0


def wish(uid: str, script: str) -> Pod:
    return Pod(uid=uid, name=uid, namespace="team-a", workload=f"wl-{uid}", pod_set="main", index=0,
               containers=(Container(name="main", command=("sh", "-c", script), requests={"cpu": 100}),))


def connected_link(node: AgentNode) -> tuple[ControllerLink, asyncio.Queue[agent_pb2.AgentMessage | None]]:
    """A link as it is once registered, its outgoing queue read by the test instead of a stream."""
    link = ControllerLink(address="127.0.0.1:1", node=node, labels={}, boot_id="boot", health_address="127.0.0.1:1",
                          backoff=Backoff(0.1, 1.0))
    out: asyncio.Queue[agent_pb2.AgentMessage | None] = asyncio.Queue()
    link._out = out
    link.connected = True
    return link, out


async def next_report(out: asyncio.Queue[agent_pb2.AgentMessage | None]) -> agent_pb2.PodStatus:
    msg = await asyncio.wait_for(out.get(), WAIT)
    assert msg is not None and msg.WhichOneof("kind") == "pod_status", msg
    return msg.pod_status


async def quiet(out: asyncio.Queue[agent_pb2.AgentMessage | None]) -> bool:
    """Whether nothing more is sent while the loop runs a few turns (the relay runs on this loop)."""
    for _ in range(20):
        await asyncio.sleep(0)
    return out.empty()


async def test_a_pod_that_ends_while_its_running_report_is_held_is_reported_once(
        make_node: MakeNode, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(link_module, "RUNNING_REPORT_HOLD_SECONDS", 60.0)
    node = await make_node()
    link, out = connected_link(node)
    relay = asyncio.create_task(link.forward_events())
    try:
        assert await node.run_pod(wish("brief", "exit 0")) is True
        report = await next_report(out)
        assert (report.uid, report.phase) == ("brief", "Succeeded")
        assert 0.0 < report.started_at <= report.finished_at
        assert await quiet(out)
    finally:
        relay.cancel()


async def test_a_running_pod_is_reported_running_after_the_hold_and_never_pending(
        make_node: MakeNode, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(link_module, "RUNNING_REPORT_HOLD_SECONDS", 0.05)
    node = await make_node()
    link, out = connected_link(node)
    relay = asyncio.create_task(link.forward_events())
    try:
        assert await node.run_pod(wish("long", "sleep 30")) is True
        report = await next_report(out)
        assert (report.uid, report.phase, report.started_at > 0) == ("long", "Running", True)
        await node.stop_pod("long", grace_seconds=0, reason="Killed", message="test over")
        # The stop (when its status is published before the end's) and the end go at once: only a new
        # pod's first Running report is held.
        phases = [(await next_report(out)).phase]
        for _ in range(3):
            if phases[-1] == "Failed":
                break
            phases.append((await next_report(out)).phase)
        assert phases in (["Failed"], ["Running", "Failed"])
    finally:
        relay.cancel()


async def test_the_forget_pods_of_one_message_are_forgotten_together(make_node: MakeNode) -> None:
    """ForgetPods handled in one turn (one controller message) reach the node as one forget_all call, in
    order, purges apart; a ForgetPod that comes once that task has started gets a task of its own."""
    node = await make_node()
    link, _ = connected_link(node)
    calls: list[tuple[list[str], bool]] = []

    async def forget_all(uids: list[str], *, purge: bool = False) -> None:
        calls.append((list(uids), purge))

    node.forget_all = forget_all  # type: ignore[method-assign]
    for uid, purge in (("a", False), ("b", False), ("old", True), ("c", False)):
        link._handle(agent_pb2.ControllerMessage(forget_pod=agent_pb2.ForgetPod(uid=uid, purge=purge)))
    await asyncio.sleep(0)
    link._handle(agent_pb2.ControllerMessage(forget_pod=agent_pb2.ForgetPod(uid="d")))
    for _ in range(10):  # bounded: the tasks finish within a few turns of the loop
        if not link._command_tasks:
            break
        await asyncio.sleep(0)
    assert (calls, link._command_tasks, link._forgets) == (
        [(["a", "b", "c"], False), (["old"], True), (["d"], False)], set(), {})


async def test_reports_go_at_once_after_a_quiet_spell_and_at_most_once_per_linger(
        make_node: MakeNode, monkeypatch: pytest.MonkeyPatch) -> None:
    """A report after a quiet spell goes at once; one that follows it within ``REPORT_LINGER_SECONDS`` waits for
    the rest of that time (to go out with whatever else comes meanwhile: one write on the stream)."""
    monkeypatch.setattr(link_module, "RUNNING_REPORT_HOLD_SECONDS", 60.0)
    monkeypatch.setattr(link_module, "REPORT_LINGER_SECONDS", 2.0)
    node = await make_node()
    link, out = connected_link(node)
    relay = asyncio.create_task(link.forward_events())
    loop = asyncio.get_running_loop()
    try:
        assert await node.run_pod(wish("first", "exit 0")) is True
        await node.runtime.wait("first", timeout=WAIT)
        ended = loop.time()
        report = await next_report(out)
        first_sent = loop.time()
        assert (report.uid, report.phase) == ("first", "Succeeded")
        assert first_sent - ended < 1.0  # not held for the linger
        assert await node.run_pod(wish("second", "exit 0")) is True
        await node.runtime.wait("second", timeout=WAIT)
        if loop.time() - first_sent < 1.5:  # well within the linger: the report waits
            assert await quiet(out)
        report = await next_report(out)
        assert (report.uid, report.phase) == ("second", "Succeeded")
        assert loop.time() - first_sent >= 2.0 - 0.05
        assert await quiet(out)
    finally:
        relay.cancel()
