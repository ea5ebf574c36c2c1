"""decide(): node conditions and the one pod to evict, from chosen readings (the kubelet's rules)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from sluicegate.agent.policy import (
    SYSTEM_CLUSTER_CRITICAL,
    PodInfo,
    PodUsage,
    QOSClass,
    Signal,
    SignalObservation,
    Threshold,
    parse_eviction_config,
)
from sluicegate.agent.pressure import Decision, PressureMemory, Readings, decide, eviction_message

Mi = 1 << 20
Gi = 1 << 30
MEM, DISK = Signal.MEMORY_AVAILABLE, Signal.NODEFS_AVAILABLE


def pod(name: str, *, memory: int = 0, disk: int = 0, priority: int = 0, static: bool = False) -> PodInfo:
    requests = {k: v for k, v in (("memory", memory), ("ephemeral-storage", disk)) if v}
    return PodInfo(uid=name, namespace="default", name=name, priority=priority, qos=QOSClass.BURSTABLE,
                   requests=requests, is_static=static)


def readings(at: float, *, mem: int | None = None, disk: int | None = None,
             usage: dict[str, tuple[int, int]] | None = None) -> Readings:
    observations = {}
    if mem is not None:
        observations[MEM] = SignalObservation(available=mem, capacity=16 * Gi)
    if disk is not None:
        observations[DISK] = SignalObservation(available=disk, capacity=100 * Gi)
    usages = {uid: PodUsage(uid=uid, memory=m, disk=d) for uid, (m, d) in (usage or {}).items()}
    return Readings(at=at, observations=observations, usages=usages)


HARD = parse_eviction_config(hard="memory.available<1Gi,nodefs.available<10Gi")
SOFT = parse_eviction_config(hard="", soft="memory.available<2Gi", soft_grace_periods="memory.available=30s")
BOTH = parse_eviction_config(hard="memory.available<1Gi", soft="memory.available<2Gi",
                             soft_grace_periods="memory.available=30s")

PODS = (
    pod("small", memory=256 * Mi),                     # below its request
    pod("hog", memory=64 * Mi),                        # far above its request
    pod("over-a-bit", memory=100 * Mi),                # just above its request
    pod("important-hog", memory=64 * Mi, priority=1000),
    pod("static-hog", memory=0, static=True),
    pod("critical-hog", memory=0, priority=SYSTEM_CLUSTER_CRITICAL),
)
USAGE = {
    "small": (10 * Mi, 0), "hog": (900 * Mi, 0), "over-a-bit": (101 * Mi, 0), "important-hog": (2 * Gi, 0),
    "static-hog": (4 * Gi, 0), "critical-hog": (4 * Gi, 0),
}


def one_round(thresholds: Sequence[Threshold], r: Readings, pods: Sequence[PodInfo] = PODS) -> Decision:
    return decide(thresholds=thresholds, readings=r, pods=pods, previous=PressureMemory(), transition_seconds=0)


@pytest.mark.parametrize(
    ("thresholds", "r", "pods", "conditions", "victim", "grace"),
    [
        pytest.param(HARD, readings(0, mem=2 * Gi, disk=50 * Gi, usage=USAGE), PODS, (), None, None,
                     id="no-pressure"),
        pytest.param(HARD, readings(0, mem=Gi, disk=50 * Gi, usage=USAGE), PODS, (), None, None,
                     id="exactly-at-the-threshold-is-not-below-it"),
        pytest.param(HARD, readings(0, mem=512 * Mi, disk=50 * Gi, usage=USAGE), PODS, ("MemoryPressure",),
                     "hog", 0.0, id="hard-memory-evicts-the-lowest-priority-pod-most-above-its-request"),
        pytest.param(HARD, readings(0, mem=512 * Mi, usage=USAGE), PODS[:1] + PODS[2:], ("MemoryPressure",),
                     "over-a-bit", 0.0, id="above-request-beats-larger-usage-at-higher-priority"),
        pytest.param(HARD, readings(0, mem=512 * Mi, usage=USAGE), (PODS[0], PODS[3]), ("MemoryPressure",),
                     "important-hog", 0.0, id="priority-only-among-pods-above-their-request"),
        pytest.param(HARD, readings(0, mem=512 * Mi, usage=USAGE), (PODS[0],), ("MemoryPressure",), "small", 0.0,
                     id="a-pod-below-its-request-goes-when-nothing-else-can"),
        pytest.param(HARD, readings(0, mem=512 * Mi, usage=USAGE), PODS[4:], ("MemoryPressure",), None, 0.0,
                     id="critical-and-static-pods-are-never-evicted"),
        pytest.param(HARD, readings(0, mem=512 * Mi, usage={k: v for k, v in USAGE.items() if k != "small"}),
                     PODS, ("MemoryPressure",), "small", 0.0, id="a-pod-without-a-reading-ranks-first"),
        pytest.param(HARD, readings(0, mem=8 * Gi, disk=5 * Gi,
                                    usage={"a": (0, 3 * Gi), "b": (0, 4 * Gi), "c": (0, 10 * Mi)}),
                     (pod("a", disk=Gi), pod("b", disk=8 * Gi), pod("c")), ("DiskPressure",), "a", 0.0,
                     id="disk-pressure-ranks-by-disk-usage-against-ephemeral-storage-requests"),
        pytest.param(HARD, readings(0, mem=512 * Mi, disk=5 * Gi, usage=USAGE), PODS,
                     ("DiskPressure", "MemoryPressure"), "hog", 0.0, id="memory-is-relieved-before-disk"),
        pytest.param(SOFT, readings(0, mem=Gi, usage=USAGE), PODS, ("MemoryPressure",), None, None,
                     id="soft-threshold-sets-the-condition-before-its-grace-period"),
        pytest.param(BOTH, readings(0, mem=512 * Mi, usage=USAGE), PODS, ("MemoryPressure",), "hog", 0.0,
                     id="hard-wins-over-soft-for-the-same-signal"),
        pytest.param(HARD, readings(0, usage=USAGE), PODS, (), None, None, id="no-observation-no-pressure"),
    ],
)
def test_one_round(thresholds: Sequence[Threshold], r: Readings, pods: Sequence[PodInfo],
                   conditions: tuple[str, ...], victim: str | None, grace: float | None) -> None:
    d = one_round(thresholds, r, pods)
    assert (d.conditions, d.victim.uid if d.victim else None, d.grace_seconds) == (conditions, victim, grace)


@dataclass(frozen=True)
class Round:
    at: float
    available: int
    conditions: tuple[str, ...]
    victim: str | None
    grace: float | None = None


@pytest.mark.parametrize(
    ("thresholds", "transition", "rounds"),
    [
        pytest.param(SOFT, 0.0, [
            Round(0, Gi, ("MemoryPressure",), None),
            Round(29, Gi, ("MemoryPressure",), None),
            Round(30, Gi, ("MemoryPressure",), "hog", None),
            Round(31, 3 * Gi, (), None),
        ], id="soft-evicts-with-the-pods-grace-once-met-for-its-grace-period"),
        pytest.param(SOFT, 0.0, [
            Round(0, Gi, ("MemoryPressure",), None),
            Round(20, 3 * Gi, (), None),
            Round(25, Gi, ("MemoryPressure",), None),
            Round(50, Gi, ("MemoryPressure",), None),
            Round(55, Gi, ("MemoryPressure",), "hog", None),
        ], id="a-break-restarts-the-grace-period"),
        pytest.param(HARD, 10.0, [
            Round(0, 512 * Mi, ("MemoryPressure",), "hog", 0.0),
            Round(1, 4 * Gi, ("MemoryPressure",), None),
            Round(9.5, 4 * Gi, ("MemoryPressure",), None),
            Round(10, 4 * Gi, (), None),
        ], id="the-condition-outlives-the-pressure-for-the-transition-period"),
        pytest.param(HARD, 0.0, [
            Round(0, 512 * Mi, ("MemoryPressure",), "hog", 0.0),
            Round(1, 4 * Gi, (), None),
        ], id="without-a-transition-period-the-condition-clears-at-once"),
    ],
)
def test_rounds(thresholds: Sequence[Threshold], transition: float, rounds: list[Round]) -> None:
    memory = PressureMemory()
    got, want = [], []
    for rnd in rounds:
        d = decide(thresholds=thresholds, readings=readings(rnd.at, mem=rnd.available, usage=USAGE), pods=PODS,
                   previous=memory, transition_seconds=transition)
        memory = d.memory
        got.append((rnd.at, d.conditions, d.victim.uid if d.victim else None, d.grace_seconds))
        want.append((rnd.at, rnd.conditions, rnd.victim, rnd.grace))
    assert got == want


@pytest.mark.parametrize(
    ("threshold", "observation", "p", "usage", "containers", "expected"),
    [
        pytest.param(
            HARD[0], SignalObservation(available=512 * Mi + 300, capacity=16 * Gi), pod("hog", memory=64 * Mi),
            PodUsage(uid="hog", memory=900 * Mi), ("main",),
            "The node was low on resource: memory. Threshold quantity: 1Gi, available: 524288Ki. "
            "Container main was using 900Mi, request is 64Mi, has larger consumption of memory.",
            id="single-container-over-request"),
        pytest.param(
            HARD[0], SignalObservation(available=512 * Mi, capacity=16 * Gi), pod("small", memory=256 * Mi),
            PodUsage(uid="small", memory=10 * Mi), ("a", "b"),
            "The node was low on resource: memory. Threshold quantity: 1Gi, available: 512Mi. "
            "Containers a, b were using 10Mi, request is 256Mi.",
            id="several-containers-under-request"),
        pytest.param(
            parse_eviction_config(hard="nodefs.available<10%")[0], SignalObservation(available=5 * Gi, capacity=100 * Gi),
            pod("a"), PodUsage(uid="a", disk=3 * Gi), ("main",),
            "The node was low on resource: ephemeral-storage. Threshold quantity: 10Gi, available: 5Gi. "
            "Container main was using 3Gi, request is 0, has larger consumption of ephemeral-storage.",
            id="disk-percentage"),
        pytest.param(
            HARD[0], None, pod("x"), None, ("main",), "The node was low on resource: memory.",
            id="nothing-measured"),
    ],
)
def test_eviction_message_follows_the_kubelet(threshold: Threshold, observation: SignalObservation | None,
                                              p: PodInfo, usage: PodUsage | None, containers: tuple[str, ...],
                                              expected: str) -> None:
    assert eviction_message(threshold=threshold, observation=observation, pod=p, usage=usage,
                            containers=containers) == expected
