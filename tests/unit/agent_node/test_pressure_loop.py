"""PressureLoop on a real runtime with scripted readings: one eviction per round, reported like the kubelet's."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Sequence

import pytest

from sluicegate.agent.monitor import PodReading
from sluicegate.agent.node import AgentNode
from sluicegate.agent.pod import Container, Pod
from sluicegate.agent.policy import PodInfo, PodUsage, Signal, SignalObservation, parse_eviction_config
from sluicegate.agent.pressure import PressureLoop, Readings

from .conftest import MakeNode

Mi = 1 << 20
Gi = 1 << 30


class Script:
    """Readings chosen by the test: node memory available per round, pod usage by uid; time advances 1s a round."""

    def __init__(self, usage: dict[str, int]) -> None:
        self.available = 8 * Gi
        self.usage = usage
        self.at = 0.0
        self.seen: list[list[str]] = []

    def __call__(self, pods: Sequence[PodInfo]) -> Readings:
        self.at += 1.0
        self.seen.append(sorted(p.uid for p in pods))
        return Readings(
            at=self.at,
            observations={Signal.MEMORY_AVAILABLE: SignalObservation(available=self.available, capacity=16 * Gi)},
            usages={p.uid: PodUsage(uid=p.uid, memory=self.usage.get(p.uid, 0), disk=0) for p in pods},
        )


def wish(uid: str, *, memory: int, static: bool = False, grace: float = 5.0) -> Pod:
    return Pod(uid=uid, name=uid, namespace="default", workload=f"wl-{uid}", pod_set="main", index=0,
                   static=static, termination_grace_seconds=grace,
                   containers=(Container(name="main", command=("sleep", "30"), requests={"memory": memory}),))


async def start(node: AgentNode, *wishes: Pod) -> None:
    for w in wishes:
        await node.run_pod(w)


def state(node: AgentNode) -> dict[str, tuple[str, str]]:
    out = {}
    for r in node.reports():
        out[r.uid] = (r.phase, r.reason)
    return out


async def test_hard_pressure_evicts_one_pod_per_round_in_rank_order_and_never_a_static_one(
    make_node: MakeNode,
) -> None:
    node = await make_node()
    await start(node, wish("hog", memory=64 * Mi), wish("steady", memory=256 * Mi),
                wish("static", memory=16 * Mi, static=True))
    script = Script({"hog": 900 * Mi, "steady": 200 * Mi, "static": 2 * Gi})
    loop = PressureLoop(node=node, thresholds=parse_eviction_config(hard="memory.available<1Gi"),
                        interval=0.01, transition_seconds=0, readings=script)

    assert await loop.step() is None
    assert node.conditions == ()

    script.available = 512 * Mi
    first = await loop.step()
    assert first is not None and first.uid == "hog"
    assert node.conditions == ("MemoryPressure",)
    assert state(node) == {"hog": ("Failed", "Evicted"), "steady": ("Running", ""), "static": ("Running", "")}
    hog = node.report("hog")
    assert hog is not None and hog.message == (
        "The node was low on resource: memory. Threshold quantity: 1Gi, available: 512Mi. "
        "Container main was using 900Mi, request is 64Mi, has larger consumption of memory.")
    hog_status = node.runtime.status("hog")
    assert hog_status is not None and hog_status.containers[0].terminated is not None
    # A hard threshold allows no grace: straight to SIGKILL.
    assert hog_status.containers[0].terminated.signal == signal.SIGKILL

    second = await loop.step()
    assert second is not None and second.uid == "steady"
    assert script.seen[-1] == ["static", "steady"]  # the evicted pod is not considered again

    # Only the static pod is left: it is never evicted, the node stays under pressure.
    assert await loop.step() is None
    assert state(node)["static"] == ("Running", "")
    assert node.conditions == ("MemoryPressure",)
    assert node.evictions == 2

    script.available = 4 * Gi
    assert await loop.step() is None
    assert node.conditions == ()


async def test_soft_pressure_waits_for_its_grace_period_and_gives_the_pod_its_own_grace(
    make_node: MakeNode,
) -> None:
    node = await make_node()
    await start(node, wish("hog", memory=64 * Mi, grace=5.0))
    script = Script({"hog": 900 * Mi})
    thresholds = parse_eviction_config(hard="", soft="memory.available<1Gi", soft_grace_periods="memory.available=2s")
    loop = PressureLoop(node=node, thresholds=thresholds, interval=0.01, transition_seconds=0, readings=script)
    script.available = 512 * Mi
    assert await loop.step() is None  # t=1: met, grace running
    assert node.conditions == ("MemoryPressure",)
    assert await loop.step() is None  # t=2: met for 1s
    evicted = await loop.step()  # t=3: met for 2s
    assert evicted is not None and evicted.uid == "hog"
    status = node.runtime.status("hog")
    assert status is not None and status.containers[0].terminated is not None
    # SIGTERM within the pod's grace was enough for sleep.
    assert status.containers[0].terminated.signal == signal.SIGTERM
    assert state(node) == {"hog": ("Failed", "Evicted")}


async def test_pods_being_stopped_are_not_evicted_again(make_node: MakeNode) -> None:
    node = await make_node()
    stubborn = Pod(uid="a", name="a", namespace="default", workload="wl-a", pod_set="main", index=0,
                       termination_grace_seconds=5.0,
                       containers=(Container(name="main", command=("sh", "-c", "trap '' TERM; while :; do sleep 0.05; done"),
                                                 requests={"memory": 64 * Mi}),))
    await start(node, stubborn, wish("b", memory=64 * Mi))
    # The controller's stop is under way (SIGTERM ignored, SIGKILL due in 5s).
    stopping = asyncio.create_task(node.stop_pod("a", grace_seconds=5.0, reason="Stopping", message="by the controller"))
    await node.runtime.wait_for("a", lambda s: bool(s.reason), timeout=5)
    script = Script({"a": 900 * Mi, "b": 100 * Mi})
    script.available = 512 * Mi
    loop = PressureLoop(node=node, thresholds=parse_eviction_config(hard="memory.available<1Gi"),
                        interval=0.01, transition_seconds=0, readings=script)
    evicted = await loop.step()
    assert evicted is not None and evicted.uid == "b"
    assert script.seen == [["b"]]
    await node.runtime.stop("a", grace_seconds=0)
    await stopping
    assert state(node)["a"][1] != "Evicted"


async def test_the_real_readings_read_pod_usage_only_to_rank_a_victim(
        make_node: MakeNode, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a threshold to relieve, a round reads the node's signals and no pod's usage (one read per
    pod per second, pressure or not, before); a round that must evict reads each candidate's to rank them."""
    node = await make_node()
    await start(node, wish("hog", memory=64 * Mi), wish("steady", memory=64 * Mi))
    read: list[str] = []
    usage = node.runtime.usage

    def counted(uid: str) -> PodReading:
        read.append(uid)
        return usage(uid)

    monkeypatch.setattr(node.runtime, "usage", counted)
    calm = PressureLoop(node=node, thresholds=parse_eviction_config(hard="memory.available<1Ki"), interval=0.01,
                        transition_seconds=0)
    assert (await calm.step(), read) == (None, [])
    # More than any machine has: always met, so one pod must go.
    pressed = PressureLoop(node=node, thresholds=parse_eviction_config(hard="memory.available<1Pi"), interval=0.01,
                           transition_seconds=0)
    eviction = await pressed.step()
    assert eviction is not None and eviction.uid in ("hog", "steady")
    assert sorted(read) == ["hog", "steady"]
