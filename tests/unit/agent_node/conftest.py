"""Agent nodes over a real runtime: real processes (no cgroups), stopped and closed after each test."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path

import pytest

from sluicegate.agent import checkpoint as ckpt
from sluicegate.agent.cgroups import NoCgroups
from sluicegate.agent.devices import Devices
from sluicegate.agent.monitor import Monitor
from sluicegate.agent.node import AgentNode
from sluicegate.agent.runtime import PodRuntime, RuntimeConfig
from sluicegate.security.podsecurity import PodUserPolicies

# Real-time knobs turned down so that stops and restarts take milliseconds.
FAST = RuntimeConfig(
    default_grace_seconds=2.0,
    exit_poll_seconds=0.05,
    drain_poll_seconds=0.01,
    memory_poll_seconds=0.05,
    backoff_base_seconds=0.05,
    backoff_cap_seconds=0.2,
    cgroup_remove_interval_seconds=0.01,
)

MakeNode = Callable[..., Awaitable[AgentNode]]


@pytest.fixture
async def make_node(tmp_path: Path) -> AsyncIterator[MakeNode]:
    """Build an AgentNode; calling it again is an agent restart (the pods are re-adopted from the checkpoint)."""
    runtimes: list[PodRuntime] = []

    async def make(*, name: str = "node-1", allocatable: Mapping[str, int] | None = None,
                   pod_users: PodUserPolicies | None = None, devices: Devices | None = None) -> AgentNode:
        directory = tmp_path / "agent"
        directory.mkdir(parents=True, exist_ok=True)
        for old in runtimes:
            if not old.closed:
                await old.close()  # pods keep running for the next runtime
        monitor = Monitor()
        runtime = PodRuntime(data_dir=directory, cgroups=NoCgroups(), monitor=monitor, config=FAST)
        await runtime.adopt(ckpt.load(ckpt.path_for(directory)))
        runtimes.append(runtime)
        alloc = dict(allocatable or {"cpu": 4000, "memory": 4 << 30, "pods": 110})
        node = AgentNode(name=name, data_dir=directory, runtime=runtime, monitor=monitor, capacity=alloc,
                         allocatable=alloc, clock=time.time, pod_users=pod_users, devices=devices)
        node.devices_changed()  # as the agent does at start: the devices' counts join capacity and allocatable
        return node

    yield make
    for runtime in runtimes:
        if runtime.closed:
            continue
        for status in runtime.pods():
            if not status.finished:
                await runtime.stop(status.uid, grace_seconds=0)
        await runtime.close()
