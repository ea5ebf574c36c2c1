"""Mutable per-pod state, owned by the event loop, and its checkpoint records."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

from sluicegate.agent import checkpoint as ckpt
from sluicegate.agent.cgroups import CgroupHandle
from sluicegate.agent.pod import Container, Pod
from sluicegate.agent.runtime.codec import termination_json
from sluicegate.agent.runtime.process import Proc
from sluicegate.agent.runtime.values import (
    ContainerState,
    ContainerStatus,
    PodStatus,
    Reason,
    Termination,
    WaitingReason,
)


@dataclass(slots=True)
class PendingStop:
    reason: Reason
    message: str
    deadline: float


@dataclass(slots=True)
class LiveContainer:
    spec: Container
    log_path: Path
    state: ContainerState = ContainerState.WAITING
    waiting_reason: WaitingReason | None = WaitingReason.CONTAINER_CREATING
    cgroup: CgroupHandle | None = None
    proc: Proc | None = None
    pid: int | None = None
    start_ticks: int | None = None
    started_at: float | None = None
    started_mono: float | None = None
    last_run_seconds: float = 0.0
    restart_count: int = 0
    backoff_index: int = 0
    oom_baseline: int = 0
    starting: bool = False
    final: bool = False
    memory_killed: bool = False
    lost_note: str = ""
    terminated: Termination | None = None
    last_termination: Termination | None = None

    def status(self) -> ContainerStatus:
        running = self.state is ContainerState.RUNNING
        return ContainerStatus(
            name=self.spec.name,
            state=self.state,
            restart_count=self.restart_count,
            log_path=str(self.log_path),
            pid=self.pid if running else None,
            started_at=self.started_at if running else None,
            waiting_reason=self.waiting_reason if self.state is ContainerState.WAITING else None,
            terminated=self.terminated,
            last_termination=self.last_termination,
        )

    def record_json(self) -> ckpt.JSONObject:
        """The container's part of its pod's checkpoint record (``checkpoint.container_json``)."""
        cgroup = self.cgroup
        waiting = self.waiting_reason
        return ckpt.container_json(
            name=self.spec.name,
            state=str(self.state),
            pid=self.pid,
            start_ticks=self.start_ticks,
            cgroup=() if cgroup is None else cgroup.paths,
            log_path=str(self.log_path),
            restart_count=self.restart_count,
            backoff_index=self.backoff_index,
            oom_kills_at_start=self.oom_baseline,
            started_at=self.started_at,
            starting=self.starting,
            waiting_reason=None if waiting is None else str(waiting),
            terminated=termination_json(self.terminated),
            last_termination=termination_json(self.last_termination),
        )


@dataclass(slots=True)
class LivePod:
    spec: Pod
    directory: Path
    containers: list[LiveContainer]
    stop: PendingStop | None = None
    stop_event: asyncio.Event = field(default_factory=asyncio.Event)
    done: asyncio.Event = field(default_factory=asyncio.Event)
    finished: bool = False
    reason: str | None = None
    message: str = ""
    # ``status`` is the latest *published* snapshot; ``latest`` the latest
    # computed one, which may still wait for the checkpoint write.
    status: PodStatus | None = None
    latest: PodStatus | None = None
    spec_json: ckpt.JSONObject = field(default_factory=dict)
    active: int = 0

    @property
    def uid(self) -> str:
        return self.spec.uid
