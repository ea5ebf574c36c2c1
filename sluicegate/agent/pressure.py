"""Node-pressure eviction: watch memory and disk, mark the node, evict one pod at a time.

The loop half of the kubelet's eviction manager
(``pkg/kubelet/eviction/eviction_manager.go`` ``synchronize``); the decisions
themselves come from :mod:`sluicegate.agent.policy`.  Every interval:

1. read the signals (``memory.available`` of the machine, ``nodefs.available``
   of the agent's data directory) and each running pod's usage;
2. evaluate the hard and soft thresholds (a soft one only counts once it has
   been met for its grace period);
3. set the node conditions: MemoryPressure / DiskPressure as soon as a
   threshold is met, grace period or not, and kept for the pressure
   transition period after the last time it was seen, so the node does not
   flap between schedulable and not;
4. if a threshold has outlasted its grace period, rank the pods with the
   signal's rank function and evict the first one that is not critical,
   with no grace for a hard threshold and the pod's own grace for a soft
   one, then wait for it to be gone.  One pod per interval: the next round
   measures again before choosing another victim.

The evicted pod is reported Failed with reason ``Evicted`` and the kubelet's
message (the controller requeues its workload); the node's conditions go out
with every heartbeat.

:func:`decide` is the whole decision and is pure; :class:`PressureLoop` does
the reading and the stopping, and takes its readings from an injectable
function so tests can drive it with chosen numbers.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from sluicegate.agent.node import AgentNode
from sluicegate.agent.policy import (
    NO_PRESSURE,
    PodInfo,
    PodUsage,
    PressureState,
    Signal,
    SignalObservation,
    Threshold,
    evaluate_pressure,
    select_eviction_victim,
)
from sluicegate.agent.runtime import PodRuntimeError, Reason
from sluicegate.quantity import format_canonical

log = logging.getLogger(__name__)

# The node condition each signal raises (kubelet signalToNodeCondition).
CONDITION_FOR_SIGNAL: Mapping[Signal, str] = MappingProxyType(
    {Signal.MEMORY_AVAILABLE: "MemoryPressure", Signal.NODEFS_AVAILABLE: "DiskPressure"}
)
# The resource a signal is about, as named in the eviction message and in pod requests.
RESOURCE_FOR_SIGNAL: Mapping[Signal, str] = MappingProxyType(
    {Signal.MEMORY_AVAILABLE: "memory", Signal.NODEFS_AVAILABLE: "ephemeral-storage"}
)
_SIGNAL_ORDER = (Signal.MEMORY_AVAILABLE, Signal.NODEFS_AVAILABLE)

EVICTED_REASON = "Evicted"


@dataclass(frozen=True, slots=True)
class Readings:
    """One round's measurements: signals of the node and usage of each pod (by uid).

    ``at`` is seconds on a monotonic clock; it drives grace and transition periods.
    """

    at: float
    observations: Mapping[Signal, SignalObservation] = field(default_factory=dict, hash=False)
    usages: Mapping[str, PodUsage] = field(default_factory=dict, hash=False)


# Takes the pods the round considers, returns the readings for them.
ReadingsFunc = Callable[[Sequence[PodInfo]], Readings]


@dataclass(frozen=True, slots=True)
class PressureMemory:
    """What one round hands to the next: thresholds in effect and when each condition was last seen."""

    pressure: PressureState = NO_PRESSURE
    condition_last_seen: Mapping[str, float] = field(default_factory=dict, hash=False)


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome of one round.

    ``threshold`` is the threshold to relieve now (None: nothing to do), and
    ``victim`` the pod to evict for it (None when every pod is critical or
    none runs); ``grace_seconds`` is None for "the pod's own".
    """

    memory: PressureMemory
    conditions: tuple[str, ...]
    threshold: Threshold | None = None
    victim: PodInfo | None = None
    grace_seconds: float | None = None


def _threshold_to_relieve(met: Sequence[Threshold]) -> Threshold | None:
    """Memory before disk (kubelet byEvictionPriority); for one signal a hard threshold before a soft one."""
    ranked = sorted(met, key=lambda t: (_SIGNAL_ORDER.index(t.signal), not t.is_hard, t.grace_period))
    return ranked[0] if ranked else None


def decide(
    *,
    thresholds: Sequence[Threshold],
    readings: Readings,
    pods: Sequence[PodInfo],
    previous: PressureMemory,
    transition_seconds: float,
) -> Decision:
    """Decide one round: the node's conditions, and at most one pod to evict.

    ``pods`` are the pods eligible for eviction (running, not already being
    stopped); critical ones among them are skipped by the policy.
    """
    now = readings.at
    pressure = evaluate_pressure(
        thresholds=thresholds, observations=readings.observations, now=now, previous=previous.pressure
    )
    # Conditions follow every threshold that is met, grace period or not (kubelet nodeConditions).
    seen = {CONDITION_FOR_SIGNAL[t.signal] for t in pressure.first_observed_at}
    last_seen = {c: t for c, t in previous.condition_last_seen.items() if now - t < transition_seconds}
    last_seen.update({c: now for c in seen})
    memory = PressureMemory(pressure=pressure, condition_last_seen=last_seen)
    conditions = tuple(sorted(last_seen))
    threshold = _threshold_to_relieve(pressure.met)
    if threshold is None:
        return Decision(memory=memory, conditions=conditions)
    victim = select_eviction_victim(signal=threshold.signal, pods=pods, usages=readings.usages)
    return Decision(
        memory=memory, conditions=conditions, threshold=threshold, victim=victim,
        grace_seconds=0.0 if threshold.is_hard else None,
    )


def _bytes(amount: int) -> str:
    # Round figures read as written (100Mi); measured ones in Ki, as the kubelet prints them.
    if amount % (1 << 20) == 0:
        return format_canonical("memory", amount)
    return f"{round(amount / 1024)}Ki"


def eviction_message(
    *,
    threshold: Threshold,
    observation: SignalObservation | None,
    pod: PodInfo,
    usage: PodUsage | None,
    containers: Sequence[str],
) -> str:
    """The kubelet's eviction message: the resource, the threshold, what was available, the pod's usage.

    "The node was low on resource: memory. Threshold quantity: 100Mi,
    available: 51200Ki. Container main was using 512Mi, request is 64Mi, has
    larger consumption of memory."  Usage is measured per pod; for a pod of
    several containers it is named as theirs together.
    """
    resource = RESOURCE_FOR_SIGNAL[threshold.signal]
    parts = [f"The node was low on resource: {resource}."]
    if observation is not None:
        parts.append(
            f"Threshold quantity: {_bytes(threshold.amount(observation.capacity))}, "
            f"available: {_bytes(observation.available)}."
        )
    used = None
    if usage is not None:
        used = usage.memory if threshold.signal is Signal.MEMORY_AVAILABLE else usage.disk
    if used is not None:
        request = pod.requests.get(resource, 0)
        who = f"Container {containers[0]} was" if len(containers) == 1 else (
            f"Containers {', '.join(containers)} were" if containers else "The pod was")
        text = f"{who} using {_bytes(used)}, request is {_bytes(request)}"
        if used > request:
            text += f", has larger consumption of {resource}"
        parts.append(text + ".")
    return " ".join(parts)


@dataclass(frozen=True, slots=True)
class Eviction:
    """One pod evicted by the loop."""

    uid: str
    pod: str
    signal: Signal
    message: str


class PodUsages(Mapping[str, PodUsage]):
    """The pods' usage, read from the runtime when first looked at.

    Only ranking a victim reads it, so a round with no threshold to relieve
    (nearly every round) reads no pod's cgroup or processes; a round that
    evicts reads every candidate's once, as before.
    """

    def __init__(self, node: AgentNode, pods: Sequence[PodInfo]) -> None:
        self._node = node
        self._pods = tuple(pods)
        self._read: dict[str, PodUsage] | None = None

    def _usages(self) -> dict[str, PodUsage]:
        if self._read is None:
            usages: dict[str, PodUsage] = {}
            for pod in self._pods:
                try:
                    u = self._node.runtime.usage(pod.uid)
                except PodRuntimeError:
                    # Gone meanwhile: no reading, and the policy ranks it first,
                    # which is harmless since evicting a finished pod is a no-op.
                    continue
                usages[pod.uid] = PodUsage(uid=pod.uid, memory=u.working_set_bytes, disk=u.disk_bytes)
            self._read = usages
        return self._read

    def __getitem__(self, uid: str) -> PodUsage:
        return self._usages()[uid]

    def __iter__(self) -> Iterator[str]:
        return iter(self._usages())

    def __len__(self) -> int:
        return len(self._usages())


def node_readings(node: AgentNode, *, clock: Callable[[], float] = time.monotonic) -> ReadingsFunc:
    """Real readings: psutil for the node's signals, the runtime's figures for each pod (when looked at)."""

    def read(pods: Sequence[PodInfo]) -> Readings:
        r = node.node_reading()
        observations = {
            Signal.MEMORY_AVAILABLE: SignalObservation(available=r.memory_available_bytes,
                                                       capacity=r.memory_total_bytes),
            Signal.NODEFS_AVAILABLE: SignalObservation(available=r.disk_free_bytes, capacity=r.disk_total_bytes),
        }
        return Readings(at=clock(), observations=observations, usages=PodUsages(node, pods))

    return read


class PressureLoop:
    """Runs :func:`decide` every ``interval`` seconds and carries out its eviction.

    ``transition_seconds`` is how long a condition outlives the last round
    that saw its threshold met (the kubelet's pressure transition period).
    """

    def __init__(
        self,
        *,
        node: AgentNode,
        thresholds: Sequence[Threshold],
        interval: float,
        transition_seconds: float,
        readings: ReadingsFunc | None = None,
    ) -> None:
        self.node = node
        self.thresholds = tuple(thresholds)
        self.interval = interval
        self.transition_seconds = transition_seconds
        self.readings = readings if readings is not None else node_readings(node)
        self.memory = PressureMemory()
        self._stuck_logged = False

    def candidates(self) -> list[PodInfo]:
        """Pods that may be evicted: running and not already being stopped.

        Critical ones are included; the policy skips them.
        """
        out = []
        for pod in self.node.admitted_pods():
            st = self.node.runtime.status(pod.uid)
            if st is None or st.finished or st.reason:
                continue
            out.append(pod)
        return out

    async def step(self) -> Eviction | None:
        """One round; returns the eviction it made, if any."""
        pods = self.candidates()
        readings = self.readings(pods)
        d = decide(thresholds=self.thresholds, readings=readings, pods=pods, previous=self.memory,
                   transition_seconds=self.transition_seconds)
        self.memory = d.memory
        if d.conditions != self.node.conditions:
            if d.conditions:
                log.warning("node %s: %s (met: %s)", self.node.name, ", ".join(d.conditions),
                            ", ".join(str(t) for t in d.memory.pressure.first_observed_at) or "none now")
            else:
                log.info("node %s: %s cleared", self.node.name, ", ".join(self.node.conditions))
            self.node.conditions = d.conditions
        if d.threshold is None:
            self._stuck_logged = False
            return None
        if d.victim is None:
            if not self._stuck_logged:
                log.error("node %s is under pressure (%s) but no pod may be evicted: only critical pods run",
                          self.node.name, d.threshold)
                self._stuck_logged = True
            return None
        self._stuck_logged = False
        st = self.node.runtime.status(d.victim.uid)
        if st is None or st.finished:
            # It ended between listing and reading (hence no usage, and ranked
            # first): nothing to evict, and the next round measures again.
            return None
        return await self._evict(d, readings)

    async def _evict(self, d: Decision, readings: Readings) -> Eviction:
        assert d.threshold is not None and d.victim is not None
        victim = d.victim
        meta = self.node.meta.get(victim.uid)
        message = eviction_message(
            threshold=d.threshold, observation=readings.observations.get(d.threshold.signal), pod=victim,
            usage=readings.usages.get(victim.uid), containers=meta.containers if meta is not None else (),
        )
        log.warning("evicting pod %s (%s): %s", victim.key, d.threshold, message)
        # Recorded before the stop, so a crash in between still reports the eviction.
        self.node.set_reason(victim.uid, EVICTED_REASON, message)
        self.node.count_eviction(str(d.threshold.signal))
        try:
            await self.node.runtime.stop(victim.uid, grace_seconds=d.grace_seconds, reason=Reason.EVICTED,
                                         message=message)
        except PodRuntimeError as exc:
            log.error("could not evict pod %s: %s", victim.key, exc)
        return Eviction(uid=victim.uid, pod=victim.key, signal=d.threshold.signal, message=message)

    async def run(self) -> None:
        """Evaluate every ``interval`` seconds for as long as the agent runs."""
        while True:
            try:
                await self.step()
            except (OSError, PodRuntimeError) as exc:
                # A failed reading must not stop the watch; the next round reads again.
                log.error("node-pressure round failed: %s", exc)
            await asyncio.sleep(self.interval)
