"""Self-fencing: an agent cut off from the controller for the node timeout stops its controller pods."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from pathlib import Path

import pytest

from sluicegate.agent.fencing import Contract, SelfFencing

from .conftest import MakeNode
from .test_node_meta import wait_until, wish

CONTRACT = Contract(node_timeout=1.5, fencing_grace=3.0, self_fencing=True)


class ManualClock:
    def __init__(self) -> None:
        self.t = 500.0

    def __call__(self) -> float:
        return self.t


class FakeNode:
    def __init__(self, pods: list[str]) -> None:
        self.pods = pods
        self.stopped: list[tuple[str, str]] = []

    def running_controller_pods(self) -> list[str]:
        return list(self.pods)

    async def stop_pod(self, uid: str, *, grace_seconds: float | None, reason: str, message: str) -> None:
        self.stopped.append((uid, reason))
        self.pods.remove(uid)


async def test_fences_once_per_episode_after_the_node_timeout_counted_from_the_acked_send(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    clock, node = ManualClock(), FakeNode(["a", "b"])
    f = SelfFencing(node=node, data_dir=tmp_path, boot_id="boot-1", clock=clock)
    clock.t += 100
    assert not f.check()  # no contract yet: nothing to count against
    f.registered(CONTRACT, sent_at=clock.t - 0.5)
    clock.t += 0.9
    assert not f.check()
    f.heard(clock.t - 0.2)  # an acknowledged heartbeat, sent 0.2s ago
    clock.t += 1.2
    assert not f.check()  # 1.4s since the heartbeat was sent
    clock.t += 0.2  # 1.6s since it was sent, 1.4s since its ack arrived: measured from the send
    with caplog.at_level(logging.WARNING, logger="sluicegate.agent.fencing"):
        assert f.check()
        await asyncio.sleep(0)
        clock.t += 5
        assert not f.check()  # one episode, one warning
    assert node.stopped == [("a", "NodeFenced"), ("b", "NodeFenced")]
    assert len([r for r in caplog.records if "self-fencing" in r.message]) == 1
    # Heard again: a new episode may fence again.
    node.pods.append("c")
    f.heard(clock.t)
    assert not f.fenced
    clock.t += 2
    assert f.check()
    await asyncio.sleep(0)
    assert node.stopped[-1] == ("c", "NodeFenced")


def test_self_fencing_off_never_stops_pods(tmp_path: Path) -> None:
    clock, node = ManualClock(), FakeNode(["a"])
    f = SelfFencing(node=node, data_dir=tmp_path, boot_id="b", clock=clock)
    f.registered(replace(CONTRACT, self_fencing=False), sent_at=clock.t)
    clock.t += 1000
    assert not f.check() and node.stopped == []


async def test_a_restarted_agent_keeps_the_contract_and_the_silence_within_one_boot(tmp_path: Path) -> None:
    clock, node = ManualClock(), FakeNode(["a"])
    f = SelfFencing(node=node, data_dir=tmp_path, boot_id="boot-1", clock=clock)
    f.registered(CONTRACT, sent_at=clock.t)
    clock.t += 1.0
    again = SelfFencing(node=node, data_dir=tmp_path, boot_id="boot-1", clock=clock)
    assert (again.contract, again.silence()) == (CONTRACT, 1.0)
    clock.t += 0.6
    assert again.check()
    await asyncio.sleep(0)
    # Another boot: the pods died with the machine, and the silence counts from now.
    other = SelfFencing(node=node, data_dir=tmp_path, boot_id="boot-2", clock=clock)
    assert (other.contract, other.silence()) == (CONTRACT, 0.0)


async def test_the_loop_fences_on_time_with_bounded_waits() -> None:
    node = FakeNode(["a"])
    loop = asyncio.get_running_loop()
    f = SelfFencing(node=node, data_dir=None, boot_id="b", clock=loop.time)
    f.registered(Contract(node_timeout=0.3, fencing_grace=1.0, self_fencing=True), sent_at=loop.time())
    started = loop.time()
    task = asyncio.create_task(f.run())
    try:
        assert await wait_until(lambda: node.stopped == [("a", "NodeFenced")], timeout=5)
        assert 0.3 <= loop.time() - started < 2.0
    finally:
        task.cancel()


async def test_a_fenced_pod_is_reported_failed_node_fenced_and_static_pods_keep_running(make_node: MakeNode) -> None:
    node = await make_node()
    assert await node.run_pod(wish("job", "sleep 30"))
    assert await node.run_pod(replace(wish("static", "sleep 30"), static=True))
    assert await wait_until(lambda: {r.uid: r.phase for r in node.reports()} == {"job": "Running", "static": "Running"},
                            timeout=10)
    assert node.running_controller_pods() == ["job"]
    clock = ManualClock()
    f = SelfFencing(node=node, data_dir=None, boot_id="b", clock=clock)
    f.registered(CONTRACT, sent_at=clock.t)
    clock.t += 2
    assert f.check()
    assert await wait_until(lambda: node.report("job").phase == "Failed", timeout=10)
    r = node.report("job")
    assert (r.reason, "has not heard from the controller" in r.message) == ("NodeFenced", True)
    assert node.report("static").phase == "Running"


async def test_an_orphan_is_reported_until_the_controller_forgets_it(make_node: MakeNode) -> None:
    node = await make_node()
    node.add_orphan("gone", "killed: no checkpoint record")
    assert [(r.uid, r.phase, r.reason) for r in node.reports()] == [("gone", "Failed", "Orphaned")]
    await node.forget("gone")
    assert node.reports() == []
