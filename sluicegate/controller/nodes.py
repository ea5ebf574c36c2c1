"""Nodes as the controller knows them: registration, heartbeats, readiness, sessions.

The manager talks to agents only through :class:`Session` objects that accept
the commands below; the gRPC layer turns them into protobuf.  A node stays
in the registry when its agent disconnects: it becomes NotReady only when
its heartbeats have been missing for the configured timeout.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from sluicegate.controller.scheduling.placement import NodeView
from sluicegate.model.pods import PodRecord
from sluicegate.model.taints import Taint
from sluicegate.model.workloads import PodSet, Workload


@dataclass(frozen=True, slots=True)
class RunPodCommand:
    pod: PodRecord
    workload: Workload
    pod_set: PodSet


@dataclass(frozen=True, slots=True)
class StopPodCommand:
    uid: str
    grace_seconds: float
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class ForgetPodCommand:
    uid: str
    # Also delete the pod's logs (the workload passed its retention).
    purge: bool = False


@dataclass(frozen=True, slots=True)
class LogRequestCommand:
    request_id: str
    pod_uid: str
    container: str
    follow: bool


@dataclass(frozen=True, slots=True)
class CancelLogsCommand:
    request_id: str


Command = RunPodCommand | StopPodCommand | ForgetPodCommand | LogRequestCommand | CancelLogsCommand


class Session(Protocol):
    """The controller's end of one agent's stream."""

    def send(self, command: Command) -> None: ...

    def supersede(self, reason: str) -> None:
        """A newer stream registered the same node: end this one (with ``reason``), sending nothing more."""
        ...


@dataclass(frozen=True, slots=True)
class ReportedPod:
    """A pod as an agent reports it."""

    uid: str
    name: str
    namespace: str
    workload: str
    phase: str
    reason: str = ""
    message: str = ""
    exit_code: int | None = None
    ready: bool = False
    restarts: int = 0
    started_at: float | None = None
    finished_at: float | None = None
    rss_bytes: int = 0
    cpu_seconds: float = 0.0
    static: bool = False
    requests: Mapping[str, int] = field(default_factory=dict)
    priority: int = 0
    qos_class: str = ""


@dataclass(slots=True)
class NodeUsage:
    memory_total: int = 0
    memory_available: int = 0
    cpu_usage_cores: float = 0.0
    nodefs_available: int = 0
    observed_at: float = 0.0


@dataclass(slots=True)
class NodeState:
    name: str
    labels: dict[str, str]
    capacity: dict[str, int]
    allocatable: dict[str, int]
    boot_id: str = ""
    agent_version: str = ""
    health_address: str = ""
    ready: bool = True
    not_ready_reason: str = ""
    last_heartbeat: float = 0.0
    # When it was last heard, on the fleet's monotonic clock: what the node timeout counts from
    # (a wall-clock step must not make a node look silent, and its workloads run twice).
    heard_at: float = 0.0
    usage: NodeUsage = field(default_factory=NodeUsage)
    conditions: tuple[str, ...] = ()
    session: Session | None = None
    # Requests of pods bound here: controller pods by uid, plus static pods the agent runs on its own.
    pods: dict[str, Mapping[str, int]] = field(default_factory=dict)
    static_pods: dict[str, ReportedPod] = field(default_factory=dict)

    # Sum of self.pods' requests, kept as pods come and go (placement reads it every cycle).
    pod_requests: dict[str, int] = field(default_factory=dict)
    # From the agent's settings, replaced at each registration.
    taints: tuple[Taint, ...] = ()

    def add_pod(self, uid: str, requests: Mapping[str, int]) -> None:
        self.remove_pod(uid)
        self.pods[uid] = dict(requests)
        for r, q in requests.items():
            self.pod_requests[r] = self.pod_requests.get(r, 0) + q

    def remove_pod(self, uid: str) -> None:
        old = self.pods.pop(uid, None)
        if old is None:
            return
        for r, q in old.items():
            left = self.pod_requests.get(r, 0) - q
            if left:
                self.pod_requests[r] = left
            else:
                self.pod_requests.pop(r, None)

    def requested(self) -> dict[str, int]:
        total = dict(self.pod_requests)
        for p in self.static_pods.values():
            for r, q in p.requests.items():
                total[r] = total.get(r, 0) + q
        if "pods" in self.allocatable:
            total["pods"] = len(self.pods) + len(self.static_pods)
        return total

    def view(self) -> NodeView:
        return NodeView(
            name=self.name,
            labels=self.labels,
            allocatable=self.allocatable,
            requested=self.requested(),
            ready=self.ready,
            conditions=self.conditions,
            taints=self.taints,
        )


class NodeRegistry:
    def __init__(self) -> None:
        self.nodes: dict[str, NodeState] = {}

    def views(self) -> list[NodeView]:
        return [n.view() for n in self.nodes.values()]

    def bind(
        self, node: str, uid: str, requests: Mapping[str, int], *, now: float, heard_at: float | None = None
    ) -> None:
        state = self.nodes.get(node)
        if state is None:
            # Known only from stored bindings (the controller restarted): the
            # node must register again within the heartbeat timeout.
            state = NodeState(node, {}, {}, {}, ready=False, last_heartbeat=now,
                              heard_at=now if heard_at is None else heard_at,
                              not_ready_reason="its agent has not registered since the controller started")
            self.nodes[node] = state
        state.add_pod(uid, requests)

    def unbind(self, node: str, uid: str) -> None:
        state = self.nodes.get(node)
        if state is not None:
            state.remove_pod(uid)
