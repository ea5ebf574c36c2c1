"""Readings of the node and of the processes that make up each pod.

This is the agent's one window on psutil (and on ``/proc``): the runtime asks
here for process identities and memory use, the server asks here for node
capacity and pressure signals, and both get back timestamped frozen values
that the pure policy layer can reason about.  The timestamp is either passed
in or taken from an injected clock, so tests can pin it.

Process identity is ``(pid, start_ticks)``, where ``start_ticks`` is field 22
of ``/proc/<pid>/stat`` (the start time in clock ticks since boot).  A pid is
recycled by the kernel; the pair is not, within one boot.  It is an integer,
so two readings of the same process compare equal exactly, unlike psutil's
floating-point ``create_time``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import psutil

__all__ = [
    "NodeReading",
    "ProcStat",
    "ProcessesReading",
    "PodReading",
    "Monitor",
    "read_stat",
    "read_boot_id",
    "group_members",
    "live_pids",
    "directory_bytes",
]

PROC = Path("/proc")
BOOT_ID = PROC / "sys" / "kernel" / "random" / "boot_id"


@dataclass(frozen=True, slots=True)
class ProcStat:
    """The fields of ``/proc/<pid>/stat`` the agent relies on."""

    pid: int
    ppid: int
    pgid: int
    sid: int
    state: str
    start_ticks: int

    @property
    def exited(self) -> bool:
        # A zombie has exited; it only waits for its parent (or init) to reap
        # it and holds no memory, so it counts as gone for every purpose here.
        return self.state in ("Z", "X", "x")


def read_stat(pid: int, *, proc: Path = PROC) -> ProcStat | None:
    """Parse ``/proc/<pid>/stat``; None when the process does not exist."""
    # os.open/os.read on a string path: the runtime reads a few of these per
    # container exit, and pathlib's object layers cost more than the read.
    try:
        fd = os.open(f"{proc}/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
    except (FileNotFoundError, ProcessLookupError, NotADirectoryError, PermissionError):
        return None
    try:
        raw = os.read(fd, 4096)
    except (ProcessLookupError, OSError):
        return None  # ESRCH: the process went away between open and read
    finally:
        os.close(fd)
    # The command name is in parentheses and may itself contain spaces and
    # parentheses, so split at the last ')'.
    close = raw.rfind(b")")
    if close < 0:
        return None
    fields = raw[close + 2 :].split()
    # fields[0] is field 3 (state); field N is fields[N - 3].
    try:
        return ProcStat(
            pid=pid,
            state=fields[0].decode("ascii", "replace"),
            ppid=int(fields[1]),
            pgid=int(fields[2]),
            sid=int(fields[3]),
            start_ticks=int(fields[19]),
        )
    except (IndexError, ValueError):
        return None


def read_boot_id(*, path: Path = BOOT_ID) -> str:
    """This boot's random id: start ticks only identify a process within one boot."""
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _all_pids(proc: Path) -> list[int]:
    pids: list[int] = []
    with os.scandir(proc) as entries:
        for entry in entries:
            if entry.name.isdigit():
                pids.append(int(entry.name))
    return pids


def group_members(pgid: int, *, proc: Path = PROC) -> frozenset[int]:
    """Live (non-zombie) processes whose process group is ``pgid``."""
    members: set[int] = set()
    for pid in _all_pids(proc):
        stat = read_stat(pid, proc=proc)
        if stat is not None and stat.pgid == pgid and not stat.exited:
            members.add(pid)
    return frozenset(members)


def live_pids(pids: Iterable[int], *, proc: Path = PROC) -> frozenset[int]:
    """The subset of ``pids`` that exist and have not exited."""
    alive: set[int] = set()
    for pid in pids:
        stat = read_stat(pid, proc=proc)
        if stat is not None and not stat.exited:
            alive.add(pid)
    return frozenset(alive)


def directory_bytes(path: Path) -> int:
    """Bytes allocated to regular files under ``path`` (what ``du`` counts)."""
    total = 0
    stack = [path]
    while stack:
        current = stack.pop()
        try:
            entries = list(os.scandir(current))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(Path(entry.path))
                elif entry.is_file(follow_symlinks=False):
                    total += entry.stat(follow_symlinks=False).st_blocks * 512
            except OSError:
                continue
    return total


@dataclass(frozen=True, slots=True)
class NodeReading:
    """The node as the kubelet's eviction manager sees it, at ``at``.

    ``cpu_busy_fraction`` is the share of all logical CPUs that was busy since
    this monitor's previous node reading (since boot for the first one).
    """

    at: float
    logical_cpus: int
    memory_total_bytes: int
    memory_available_bytes: int
    cpu_busy_fraction: float
    disk_path: str
    disk_total_bytes: int
    disk_free_bytes: int


@dataclass(frozen=True, slots=True)
class ProcessesReading:
    """Resident memory and CPU time summed over a set of processes, at ``at``."""

    at: float
    pids: tuple[int, ...]
    rss_bytes: int
    cpu_seconds: float


@dataclass(frozen=True, slots=True)
class PodReading:
    """One pod's usage at ``at``.

    ``working_set_bytes`` is what memory pressure ranking compares: the
    cgroup's usage minus inactive page cache where the pod has cgroups (the
    kubelet's definition), else the RSS sum of its processes.  ``cpu_seconds``
    comes from the cgroup when there is one, else from the processes alive
    now (CPU time of processes that already exited is then lost).
    ``disk_bytes`` is what the pod's directory (logs) occupies.
    """

    at: float
    uid: str
    pids: tuple[int, ...]
    rss_bytes: int
    working_set_bytes: int
    cpu_seconds: float
    disk_bytes: int


class Monitor:
    """Takes readings.  ``clock`` returns wall-clock seconds for timestamps."""

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._last_cpu: tuple[float, float] | None = None

    def _at(self, at: float | None) -> float:
        return self._clock() if at is None else at

    def node(self, *, disk_path: str | os.PathLike[str], at: float | None = None) -> NodeReading:
        """Capacity and current pressure of this machine; ``disk_path`` picks the filesystem."""
        memory = psutil.virtual_memory()
        disk = psutil.disk_usage(os.fspath(disk_path))
        times = psutil.cpu_times()
        # Linux counts guest time inside user time as well; subtract it so it
        # is not counted twice (psutil's cpu_percent does the same).
        idle = times.idle + getattr(times, "iowait", 0.0)
        total = sum(times) - getattr(times, "guest", 0.0) - getattr(times, "guest_nice", 0.0)
        previous = self._last_cpu
        self._last_cpu = (idle, total)
        if previous is None:
            busy = 1.0 - idle / total if total > 0 else 0.0
        else:
            d_total = total - previous[1]
            d_idle = idle - previous[0]
            busy = 1.0 - d_idle / d_total if d_total > 0 else 0.0
        return NodeReading(
            at=self._at(at),
            logical_cpus=psutil.cpu_count(logical=True) or 1,
            memory_total_bytes=memory.total,
            memory_available_bytes=memory.available,
            cpu_busy_fraction=min(1.0, max(0.0, busy)),
            disk_path=os.fspath(disk_path),
            disk_total_bytes=disk.total,
            disk_free_bytes=disk.free,
        )

    def processes(self, pids: Iterable[int], *, at: float | None = None) -> ProcessesReading:
        """Sum RSS and CPU time over ``pids``; processes that vanished or exited are skipped."""
        seen: list[int] = []
        rss = 0
        cpu = 0.0
        for pid in sorted(set(pids)):
            try:
                process = psutil.Process(pid)
                with process.oneshot():
                    if process.status() == psutil.STATUS_ZOMBIE:
                        continue
                    rss += process.memory_info().rss
                    times = process.cpu_times()
                    cpu += times.user + times.system
            except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
                continue
            seen.append(pid)
        return ProcessesReading(at=self._at(at), pids=tuple(seen), rss_bytes=rss, cpu_seconds=cpu)

    def descendants(self, pid: int) -> frozenset[int]:
        """Live descendants of ``pid`` (children, grandchildren...), empty if it is gone."""
        try:
            children = psutil.Process(pid).children(recursive=True)
        except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            return frozenset()
        return live_pids(child.pid for child in children)

    def process_tree(self, pid: int, *, pgid: int | None = None, at: float | None = None) -> ProcessesReading:
        """``pid``, its descendants and (when given) the members of process group ``pgid``."""
        pids = {pid} | set(self.descendants(pid))
        if pgid is not None:
            pids |= group_members(pgid)
        return self.processes(pids, at=at)

    def pod(
        self,
        *,
        uid: str,
        pids: Iterable[int],
        cgroup_working_set_bytes: int | None,
        cgroup_cpu_seconds: float | None,
        pod_dir: Path | None,
        at: float | None = None,
    ) -> PodReading:
        """Combine process readings with what the cgroup driver read for the same pod."""
        when = self._at(at)
        procs = self.processes(pids, at=when)
        return PodReading(
            at=when,
            uid=uid,
            pids=procs.pids,
            rss_bytes=procs.rss_bytes,
            working_set_bytes=procs.rss_bytes if cgroup_working_set_bytes is None else cgroup_working_set_bytes,
            cpu_seconds=procs.cpu_seconds if cgroup_cpu_seconds is None else cgroup_cpu_seconds,
            disk_bytes=0 if pod_dir is None else directory_bytes(pod_dir),
        )
