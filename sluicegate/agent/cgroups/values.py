"""Cgroup constants, limits, handles, errors, the driver interface and the pure unit conversions."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol, TypeVar

T = TypeVar("T")

DEFAULT_ROOT: Final = Path("/sys/fs/cgroup")
DEFAULT_BASE: Final = "sluicegate"
PARENT_ROOT: Final = "/"
PARENT_SELF: Final = "self"
PROC_SELF_CGROUP: Final = Path("/proc/self/cgroup")

# What a v2 subtree must offer before the agent relies on it: memory for
# limits and OOM accounting, cpu for quotas and weights, pids to count.
V2_CONTROLLERS: Final = frozenset({"memory", "cpu", "pids"})
# v1 hierarchies the driver uses, in the order a process enters them.
# Memory goes first: once a process is in its memory cgroup, everything it
# allocates is charged there.  The pids hierarchy is left out: no pid limit
# is set, membership is read from the memory hierarchy, and on v1 each
# hierarchy joined costs a pod two mkdirs and two rmdirs (the bulk of
# starting a short pod).
V1_CONTROLLERS: Final = ("memory", "cpu", "cpuacct")

# The kernel's default CFS period (100 ms); the kubelet uses it too, so the
# quotas we write read the same as on a Kubernetes node.
CFS_PERIOD_US: Final = 100_000
# The kernel refuses quotas below 1 ms.
MIN_CFS_QUOTA_US: Final = 1_000
# cpu.shares bounds in the kernel; 2 is also what the kubelet gives BestEffort pods.
MIN_SHARES: Final = 2
MAX_SHARES: Final = 262_144

# Below this CFS quota (a tenth of a CPU), v1 starts commands through the
# wrapper, not from a spawner inside the cgroup: the spawner's own work
# counts against the quota, and a spawner throttled for the rest of a
# period (up to 100 ms) would hold up every start meanwhile.
THREAD_PLACEMENT_MIN_QUOTA_US: Final = 10_000

# Exit status of the placement wrapper when it could not enter a cgroup.
# Container CLIs (docker, podman) use 125 for "failed before the command ran".
PLACEMENT_FAILED_EXIT: Final = 125

# How a command starts inside its cgroups.  Normally a spawner process
# (``sluicegate.agent.runtime.zygote``: small, single-threaded, started by
# the agent) writes its own pid into the container's cgroups, starts the
# command with posix_spawn (the child starts where its parent is) and goes
# back (``spawn_places``).  Where the agent's own cgroups are not writable
# (no way back), or for tiny CPU quotas, the placement wrapper below runs
# first, from the agent itself.
#
# Why neither way uses preexec_fn in the agent, or moves the pid from the agent after fork:
# * preexec_fn runs Python in the forked child of a multi-threaded process
#   (asyncio's executor, the child watcher, grpc) and can deadlock on a lock
#   another thread held at fork time; CPython documents it as unsafe there.
# * Writing the child's pid from the parent after Popen returns races with
#   the child: it may already have exec'd, allocated memory charged elsewhere,
#   or forked helpers that stay outside the cgroup.
# * clone3(CLONE_INTO_CGROUP) would save the spawner's two moves but is
#   v2-only and not exposed by Python 3.11.
# The wrapper writes its own pid ($$) into each hierarchy's cgroup.procs and
# only then execs the command, so the user's process (same pid, since exec
# keeps it) starts life inside its cgroups; if a write fails it exits with
# PLACEMENT_FAILED_EXIT without running anything.  It costs one exec of sh.
PLACE_SCRIPT: Final = (
    "n=$1; shift; "
    'while [ "$n" -gt 0 ]; do '
    'echo $$ > "$1" || '
    '{ echo "sluicegate: could not enter cgroup $1; the command was not started" >&2; exit 125; }; '
    "shift; n=$((n - 1)); "
    "done; "
    'exec "$@"'
)


class CgroupError(Exception):
    """A cgroup operation failed; ``operation`` and ``path`` say which, ``detail`` why."""

    def __init__(self, *, path: str, operation: str, detail: str) -> None:
        self.path = path
        self.operation = operation
        self.detail = detail
        super().__init__(f"cgroup {operation} at {path} failed: {detail}")


class CgroupUnavailable(CgroupError):
    """A cgroup version cannot be used on this node; detect() tries the next one."""


@dataclass(frozen=True, slots=True)
class CgroupLimits:
    """What to enforce for one container, in canonical units (None: no limit)."""

    cpu_limit_millicores: int | None = None
    cpu_request_millicores: int | None = None
    memory_limit_bytes: int | None = None
    # cgroup v1 devices.deny rules ("c 195:1 rwm"): device files this container may not open.
    device_deny: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CgroupHandle:
    """Where one container lives: ``(controller, directory)`` pairs, memory first.

    v1 may list the same directory under two controllers (cpu and cpuacct
    are often mounted together); v2 lists one ``unified`` directory.
    """

    pod_uid: str
    container: str
    paths: tuple[tuple[str, str], ...]

    def name_for(self, controller: str) -> str | None:
        """``dir_for`` as a string (what the per-start and per-exit paths use: no pathlib)."""
        for name, directory in self.paths:
            if name == controller:
                return directory
        return None

    def dir_for(self, controller: str) -> Path | None:
        for name, directory in self.paths:
            if name == controller:
                return Path(directory)
        return None

    @property
    def dirs(self) -> tuple[Path, ...]:
        return tuple(Path(directory) for directory in self.dir_names)

    @property
    def dir_names(self) -> tuple[str, ...]:
        """The distinct directories as strings, in order (what the per-exit paths use: no pathlib)."""
        return tuple(dict.fromkeys(directory for _, directory in self.paths))


class CgroupDriver(Protocol):
    """What the runtime needs from a cgroup version."""

    @property
    def kind(self) -> str: ...

    def describe(self) -> str: ...

    @property
    def base_dirs(self) -> tuple[Path, ...]: ...

    def create(self, *, pod_uid: str, container: str, limits: CgroupLimits) -> CgroupHandle | None: ...

    def placement_argv(self, handle: CgroupHandle | None, argv: Sequence[str]) -> list[str]: ...

    def spawn(self, handle: CgroupHandle | None, argv: Sequence[str], start: Callable[[list[str]], T]) -> T:
        """Start ``argv`` inside ``handle``'s cgroups by calling ``start`` with the argv to execute.

        The started process is in its cgroups before the command runs; if
        it cannot be placed the command does not run (CgroupError, or on v2
        the wrapper exits with PLACEMENT_FAILED_EXIT).
        """
        ...

    def spawn_places(self, handle: CgroupHandle | None) -> tuple[tuple[str, str], ...] | None:
        """``(enter, home)`` ``cgroup.procs`` pairs: a spawner started in the agent's cgroups writes its pid
        into each ``enter``, starts the command, and writes it into each ``home``.  None: start through
        ``spawn`` (the wrapper) instead.
        """
        ...

    def pids(self, handle: CgroupHandle | None) -> frozenset[int]: ...

    def working_set_bytes(self, handle: CgroupHandle | None) -> int | None: ...

    def cpu_seconds(self, handle: CgroupHandle | None) -> float | None: ...

    def oom_kills(self, handle: CgroupHandle | None) -> int: ...

    def kill(self, handle: CgroupHandle | None) -> None: ...

    async def remove_pod(
        self, pod_uid: str, *, containers: Sequence[str] | None = None, attempts: int = 50, interval: float = 0.02
    ) -> None:
        """Remove the pod's cgroups once empty.  ``containers``, when the caller knows them, saves listing them."""
        ...

    def pod_uids(self) -> frozenset[str]: ...

    async def sweep(self, *, keep: frozenset[str], attempts: int = 50, interval: float = 0.02) -> frozenset[str]: ...

    async def remove_base(self, *, attempts: int = 50, interval: float = 0.02) -> None: ...


# --- conversions (pure) -------------------------------------------------------


def cfs_quota_us(millicores: int, *, period_us: int = CFS_PERIOD_US) -> int:
    """CFS quota for a CPU limit, as the kubelet computes it (floored at the kernel minimum)."""
    return max(MIN_CFS_QUOTA_US, millicores * period_us // 1000)


def cpu_shares(millicores: int | None) -> int:
    """cpu.shares for a CPU request; no request gets the minimum, as BestEffort does."""
    if not millicores:
        return MIN_SHARES
    return min(MAX_SHARES, max(MIN_SHARES, millicores * 1024 // 1000))


def cpu_weight(shares: int) -> int:
    """cpu.weight (1..10000) for v1 shares, with the kubelet's linear mapping."""
    return 1 + ((shares - MIN_SHARES) * 9999) // (MAX_SHARES - MIN_SHARES)
