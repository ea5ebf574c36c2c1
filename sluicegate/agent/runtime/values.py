"""The runtime's values: statuses, adoption reports, settings and the clock."""

from __future__ import annotations

import asyncio
import signal
import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final, Protocol


class PodPhase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


class ContainerState(StrEnum):
    WAITING = "Waiting"
    RUNNING = "Running"
    TERMINATED = "Terminated"


class Reason(StrEnum):
    """Why a container terminated (the kubelet's words where it has one)."""

    COMPLETED = "Completed"  # exit code 0
    ERROR = "Error"  # non-zero exit on its own
    OOM_KILLED = "OOMKilled"  # killed for exceeding its memory limit
    KILLED = "Killed"  # stopped by the agent (stop())
    EVICTED = "Evicted"  # stopped by the agent to relieve node pressure
    START_ERROR = "StartError"  # never ran: command missing, cgroup failure...
    UNKNOWN = "Unknown"  # ended while the agent was away; its exit status is lost


class WaitingReason(StrEnum):
    CONTAINER_CREATING = "ContainerCreating"
    CRASH_LOOP_BACK_OFF = "CrashLoopBackOff"


STOP_REASONS: Final = frozenset({Reason.KILLED, Reason.EVICTED})

# No exit code exists for a process the agent could not wait for.
EXIT_CODE_UNKNOWN: Final = -1
# What containerd reports for a container that could not be started.
EXIT_CODE_START_ERROR: Final = 128
# 128 + SIGKILL, the shell convention the kubelet reports for OOM kills.
EXIT_CODE_OOM: Final = 128 + signal.SIGKILL

DEFAULT_PATH: Final = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True, slots=True)
class Termination:
    """How one run of a container ended.  ``signal`` is set when a signal killed it."""

    exit_code: int
    reason: Reason
    message: str
    started_at: float | None
    finished_at: float
    signal: int | None = None


@dataclass(frozen=True, slots=True)
class ContainerStatus:
    name: str
    state: ContainerState
    restart_count: int
    log_path: str
    pid: int | None = None
    started_at: float | None = None
    waiting_reason: WaitingReason | None = None
    terminated: Termination | None = None
    last_termination: Termination | None = None


@dataclass(frozen=True, slots=True)
class PodStatus:
    """A snapshot of one pod.  ``finished`` implies every process of the pod has exited."""

    uid: str
    phase: PodPhase
    containers: tuple[ContainerStatus, ...]
    at: float
    seq: int
    finished: bool
    reason: str | None = None
    message: str = ""

    @property
    def creating(self) -> bool:
        """Whether this is a new pod's first start, still in progress: its status after the spawn follows."""
        return (not self.finished and self.reason is None and self.phase is PodPhase.PENDING
                and all(c.waiting_reason is WaitingReason.CONTAINER_CREATING and not c.restart_count
                        for c in self.containers))

    @property
    def first_run(self) -> bool:
        """Whether every container is in its first run, none ended and no stop asked for."""
        return (not self.finished and self.reason is None and self.phase is PodPhase.RUNNING
                and all(c.state is ContainerState.RUNNING and not c.restart_count for c in self.containers))

    def container(self, name: str) -> ContainerStatus:
        for status in self.containers:
            if status.name == name:
                return status
        raise KeyError(name)


@dataclass(frozen=True, slots=True)
class AdoptedContainer:
    uid: str
    container: str
    pid: int


@dataclass(frozen=True, slots=True)
class LostContainer:
    """A container recorded as running whose process could not be re-attached, and why."""

    uid: str
    container: str
    pid: int | None
    why: str


@dataclass(frozen=True, slots=True)
class AdoptionReport:
    adopted: tuple[AdoptedContainer, ...]
    lost: tuple[LostContainer, ...]
    finished: tuple[str, ...]
    swept_cgroups: tuple[str, ...]


def _default_env() -> tuple[tuple[str, str], ...]:
    return (("PATH", DEFAULT_PATH),)


@dataclass(frozen=True, slots=True)
class RuntimeConfig:
    """Runtime settings; times in seconds.

    * ``default_grace_seconds``: SIGTERM-to-SIGKILL time when neither stop()
      nor the pod says (the kubelet's terminationGracePeriodSeconds default).
    * ``kill_timeout_seconds``: after SIGKILL, how long stop() waits for the
      processes to vanish before raising StopTimeoutError (they are still
      waited for afterwards).
    * ``stuck_give_up_seconds``: how long a container whose processes
      survive SIGKILL (uninterruptible sleep) is waited for before it is
      reported terminated anyway, with the surviving pids in its message.
    * ``backoff_*``: the kubelet's crash-loop back-off (base, cap, and the
      running time after which it starts over).
    * ``exit_poll_seconds``: how often an exit is polled for where pidfd is
      unavailable.  ``drain_poll_seconds``: how often leftovers are re-checked
      while a container's processes are being killed.
    * ``memory_poll_seconds``: without cgroups, how often RSS is compared
      with memory limits; a process can overshoot its limit for this long.
    * ``checkpoint_batch_seconds``: how long a status change may wait for
      the checkpoint write it shares with the changes that follow.  Each
      write creates and renames a file (a few hundred microseconds on a
      busy disk), so batching is what keeps the cost per pod small; the
      price is that statuses are published up to this much later.
    * ``base_env``: the environment every container starts from (a minimal
      PATH by default, and HOSTNAME where the agent sets it; nothing of the
      agent's own environment leaks in).  Each pod also gets ``HOME``: its
      private directory ``<data_dir>/pods/<uid>/home`` (mode 0700, owned by
      the pod's user), which is also the working directory of a container
      that names none.
    """

    default_grace_seconds: float = 30.0
    kill_timeout_seconds: float = 10.0
    stuck_give_up_seconds: float = 3600.0
    backoff_base_seconds: float = 10.0
    backoff_cap_seconds: float = 300.0
    backoff_reset_seconds: float = 600.0
    exit_poll_seconds: float = 0.5
    drain_poll_seconds: float = 0.02
    memory_poll_seconds: float = 0.5
    checkpoint_batch_seconds: float = 0.005
    cgroup_remove_attempts: int = 50
    cgroup_remove_interval_seconds: float = 0.02
    base_env: tuple[tuple[str, str], ...] = field(default_factory=_default_env)


class Clock(Protocol):
    """Time as the runtime sees it: timestamps, durations and back-off sleeps."""

    def now(self) -> float:
        """Wall-clock seconds since the epoch, for timestamps in statuses."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back, for durations."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait; only restart back-off uses it, so tests can skip the wait."""
        ...


class SystemClock:
    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
