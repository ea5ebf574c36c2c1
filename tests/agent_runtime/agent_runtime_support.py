"""Builders and helpers shared by the agent runtime tests (not a test module)."""

from __future__ import annotations

import asyncio
import errno
import os
import secrets
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from sluicegate.agent.cgroups import DEFAULT_ROOT
from sluicegate.agent.monitor import read_stat
from sluicegate.agent.runtime import Container, Pod, PodRuntime, RestartPolicy, RuntimeConfig

PYTHON = sys.executable
RuntimeFactory = Callable[..., PodRuntime]
MI = 1 << 20


def unified_mount() -> Path | None:
    if (DEFAULT_ROOT / "cgroup.controllers").exists():
        return DEFAULT_ROOT
    if (DEFAULT_ROOT / "unified" / "cgroup.controllers").exists():
        return DEFAULT_ROOT / "unified"
    return None


def unique(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(4)}"


def sh(name: str, script: str, **changes: Any) -> Container:
    return replace(Container(name=name, command=("sh", "-c", script)), **changes)


def py(name: str, code: str, **changes: Any) -> Container:
    return replace(Container(name=name, command=(PYTHON, "-c", code)), **changes)


def pod(
    *containers: Container,
    uid: str | None = None,
    policy: RestartPolicy = RestartPolicy.NEVER,
    grace: float | None = None,
) -> Pod:
    return Pod(
        uid=uid or unique("pod"),
        containers=containers,
        name="test",
        restart_policy=policy,
        termination_grace_seconds=grace,
    )


def fast_config(**overrides: Any) -> RuntimeConfig:
    """Real-time knobs turned down so tests finish quickly; back-off stays at the defaults."""
    fast = RuntimeConfig(
        default_grace_seconds=5.0,
        kill_timeout_seconds=10.0,
        exit_poll_seconds=0.05,
        drain_poll_seconds=0.01,
        memory_poll_seconds=0.02,
        cgroup_remove_interval_seconds=0.01,
    )
    return replace(fast, **overrides)


class FakeClock:
    """Records back-off sleeps and returns at once; after ``free_sleeps`` sleeps it blocks."""

    def __init__(self, *, free_sleeps: int | None = None) -> None:
        self.t = 1_000_000.0
        self.sleeps: list[float] = []
        self._free = free_sleeps

    def now(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        if self._free is not None and len(self.sleeps) > self._free:
            await asyncio.get_running_loop().create_future()  # until cancelled
        self.t += seconds
        await asyncio.sleep(0)


async def eventually(predicate: Callable[[], bool], *, timeout: float = 10.0, what: str = "condition") -> None:
    """Poll ``predicate`` until true; fail after ``timeout`` (bounded in time and count)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    for _ in range(int(timeout / 0.01) + 1):
        if predicate():
            return
        if loop.time() > deadline:
            break
        await asyncio.sleep(0.01)
    if not predicate():
        raise AssertionError(f"{what} did not happen within {timeout}s")


def gone(pid: int) -> bool:
    stat = read_stat(pid)
    return stat is None or stat.exited


def read_pid(path: Path) -> int:
    return int(path.read_text().strip())


def has_pid(path: Path) -> bool:
    try:
        return path.read_text().strip().isdigit()
    except FileNotFoundError:
        return False


def try_release(path: Path) -> bool:
    """Write a line to the fifo ``path`` if a reader has it open; False (retry) if none yet."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            return False
        raise
    try:
        os.write(fd, b"go\n")
    finally:
        os.close(fd)
    return True


async def release(path: Path) -> None:
    await eventually(lambda: try_release(path), what=f"a reader opening {path}")
