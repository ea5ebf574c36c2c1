"""Nodes as the controller knows them: registration, heartbeats, readiness, sessions.

The manager talks to agents only through :class:`Session` objects that accept
the commands below; the gRPC layer turns them into protobuf.  A node stays
in the registry when its agent disconnects: it becomes NotReady only when
its heartbeats have been missing for the configured timeout.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple, Protocol

from sluicegate.controller.scheduling.placement import NodeView
from sluicegate.model.pods import PodRecord
from sluicegate.model.slotinit import slot_init
from sluicegate.model.taints import Taint
from sluicegate.model.workloads import PodSet, Workload


@slot_init
@dataclass(frozen=True, slots=True)
class RunPodCommand:
    pod: PodRecord
    workload: Workload
    pod_set: PodSet


@slot_init
@dataclass(frozen=True, slots=True)
class StopPodCommand:
    uid: str
    grace_seconds: float
    reason: str
    message: str


@slot_init
@dataclass(frozen=True, slots=True)
class ForgetPodCommand:
    uid: str
    # Also delete the pod's logs (the workload passed its retention).
    purge: bool = False


@slot_init
@dataclass(frozen=True, slots=True)
class LogRequestCommand:
    request_id: str
    pod_uid: str
    container: str
    follow: bool


@slot_init
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


# The requests of a reported pod that carries none (shared, so it must never change).
NO_REQUESTS: Mapping[str, int] = MappingProxyType({})


class ReportedPod(NamedTuple):
    """A pod as an agent reports it.

    A named tuple rather than a frozen dataclass: the stream reader makes one
    per pod of every report and heartbeat, and a frozen dataclass's
    ``__init__`` (a ``object.__setattr__`` per field) cost five times as much;
    it is as immutable.
    """

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
    requests: Mapping[str, int] = NO_REQUESTS
    priority: int = 0
    qos_class: str = ""


@dataclass(slots=True)
class NodeUsage:
    memory_total: int = 0
    memory_available: int = 0
    cpu_usage_cores: float = 0.0
    nodefs_available: int = 0
    observed_at: float = 0.0


# The condition a node shows while its stream is behind: like a pressure condition, it keeps new pods away.
STREAM_BEHIND = "StreamBehind"


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
    # Its stream is behind (see service.agents.SEND_HIGH_WATER): nothing new is placed here meanwhile.
    stream_behind: bool = False
    # Requests of pods bound here: controller pods by uid, plus static pods the agent runs on its own.
    pods: dict[str, Mapping[str, int]] = field(default_factory=dict)
    static_pods: dict[str, ReportedPod] = field(default_factory=dict)

    # Sum of self.pods' requests, kept as pods come and go (placement reads it every cycle).
    pod_requests: dict[str, int] = field(default_factory=dict)
    # From the agent's settings, replaced at each registration.
    taints: tuple[Taint, ...] = ()
    # The placement view of this state, built when first asked for after a change (see view()).
    _view: NodeView | None = field(default=None, init=False, repr=False, compare=False)
    # The registry holding this node, told when its view changes.
    _registry: NodeRegistry | None = field(default=None, init=False, repr=False, compare=False)

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        if name in _VIEW_FIELDS:
            self.changed()

    def changed(self) -> None:
        """Something placement sees changed: the view is built again when next asked for."""
        object.__setattr__(self, "_view", None)
        registry = getattr(self, "_registry", None)
        if registry is not None:
            registry._stale.add(self.name)

    def set_static_pod(self, pod: ReportedPod) -> None:
        """A static pod the agent runs on its own (its requests count on the node)."""
        old = self.static_pods.get(pod.uid)
        self.static_pods[pod.uid] = pod
        if old is None or old.requests != pod.requests:
            self.changed()

    def drop_static_pod(self, uid: str) -> bool:
        """Forget a static pod; whether there was one."""
        if self.static_pods.pop(uid, None) is None:
            return False
        self.changed()
        return True

    def add_pod(self, uid: str, requests: Mapping[str, int]) -> None:
        self.remove_pod(uid)
        self.pods[uid] = dict(requests)
        for r, q in requests.items():
            self.pod_requests[r] = self.pod_requests.get(r, 0) + q
        self.changed()

    def remove_pod(self, uid: str) -> None:
        old = self.pods.pop(uid, None)
        if old is None:
            return
        self.changed()
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

    @property
    def shown_conditions(self) -> tuple[str, ...]:
        """The conditions its agent reports, and the controller's own (STREAM_BEHIND)."""
        return (*self.conditions, STREAM_BEHIND) if self.stream_behind else self.conditions

    def view(self) -> NodeView:
        """What placement sees of the node; the same object until something it shows changes.

        Mutable fields are replaced, never changed in place, except through
        the methods here (add_pod, remove_pod, set_static_pod,
        drop_static_pod), which mark the view stale.
        """
        v = self._view
        if v is None:
            v = NodeView(
                name=self.name,
                labels=self.labels,
                allocatable=self.allocatable,
                requested=self.requested(),
                ready=self.ready,
                conditions=self.shown_conditions,
                taints=self.taints,
            )
            object.__setattr__(self, "_view", v)
        return v


# NodeState fields a NodeView shows: assigning one makes the view stale.
_VIEW_FIELDS = frozenset({"name", "labels", "allocatable", "ready", "conditions", "stream_behind", "taints", "pods",
                          "static_pods"})


class _Nodes(dict[str, NodeState]):
    """The registry's nodes by name; adding or removing one makes the registry's views stale."""

    def __init__(self, registry: NodeRegistry) -> None:
        super().__init__()
        self._registry = registry

    def __setitem__(self, name: str, node: NodeState) -> None:
        old = self.get(name)
        if old is not None and old is not node:
            object.__setattr__(old, "_registry", None)
        super().__setitem__(name, node)
        object.__setattr__(node, "_registry", self._registry)
        self._registry._restructured()

    def __delitem__(self, name: str) -> None:
        self.pop(name)

    def pop(self, name: str, *default: Any) -> Any:
        node = super().pop(name, *default)
        if isinstance(node, NodeState):
            object.__setattr__(node, "_registry", None)
            self._registry._restructured()
        return node

    def clear(self) -> None:
        for node in self.values():
            object.__setattr__(node, "_registry", None)
        super().clear()
        self._registry._restructured()

    def setdefault(self, name: str, default: Any = None) -> Any:
        if name not in self:
            self[name] = default
        return self[name]

    def popitem(self) -> tuple[str, NodeState]:
        raise TypeError("NodeRegistry.nodes: remove a node by name")

    def update(self, *args: Any, **kwargs: Any) -> None:
        for name, node in dict(*args, **kwargs).items():
            self[name] = node




class NodeRegistry:
    def __init__(self) -> None:
        # The nodes' views in name order, kept until a node or its view changes: a
        # scheduling cycle asks for them every time, and most nodes are as they were.
        # Only the views of the nodes that changed (``_stale``) are taken again, so a
        # cycle costs the nodes that changed, not every node of a large cluster.
        self._views: list[NodeView] | None = None
        self._shown: tuple[NodeView, ...] | None = None
        self._order: list[NodeState] | None = None
        self._at: dict[str, int] = {}
        self._stale: set[str] = set()
        # Names whose view may have changed since take_changes() last ran; None: nodes came or went.
        self._changes: set[str] | None = None
        self.nodes: dict[str, NodeState] = _Nodes(self)

    def _restructured(self) -> None:
        self._views = None
        self._shown = None
        self._order = None
        self._changes = None

    def views(self) -> Sequence[NodeView]:
        """Every node's view, in name order; unchanged nodes keep their view objects."""
        views = self._views
        stale = self._stale
        if views is None:
            order = self._order
            if order is None:
                order = self._order = [self.nodes[name] for name in sorted(self.nodes)]
                self._at = {n.name: i for i, n in enumerate(order)}
            views = self._views = [n.view() for n in order]
            self._shown = None
            stale.clear()
        elif stale:
            at, nodes = self._at, self.nodes
            for name in stale:
                i = at.get(name)
                if i is not None:
                    views[i] = nodes[name].view()
            self._shown = None
            changes = self._changes
            if changes is not None:
                changes |= stale
            stale.clear()
        shown = self._shown
        if shown is None:
            shown = self._shown = tuple(views)
        return shown

    def take_changes(self) -> set[str] | None:
        """The names of the nodes whose views views() may show changed since the last call; None when
        nodes came or went (or on the first call): then any may have.  Call right after views()."""
        changes, self._changes = self._changes, set()
        return changes

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
