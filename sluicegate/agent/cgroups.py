"""Linux control groups for pod containers: create, place, measure, kill, remove.

Three drivers share one small interface (``CgroupDriver``); ``detect()``
picks one when the agent starts:

* ``CgroupV2``: the unified hierarchy, with the memory, cpu and pids
  controllers enabled in a delegated subtree (``memory.max``, ``cpu.max``,
  ``memory.events`` for OOM kills, ``cgroup.kill``);
* ``CgroupV1``: one hierarchy per controller (``memory.limit_in_bytes``,
  ``memory.oom_control``, ``cpu.cfs_quota_us``...), each container placed in
  the same relative path in every hierarchy;
* ``NoCgroups``: nothing is writable; the runtime then enforces memory
  limits by polling RSS through the monitor, and CPU limits are not enforced.

Layout: every container gets ``<hierarchy>/<parent>/<base>/<pod-uid>/<container>``
in each hierarchy used.  ``parent`` is ``/`` (the hierarchy's root, the
default) or ``"self"``: the cgroup the agent itself runs in, which is what a
systemd unit with ``Delegate=yes`` owns.  ``base`` defaults to
``sluicegate``.

Placement happens before the user's command runs: see ``spawn``.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import signal
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol, TypeVar

from sluicegate.agent.placement import PlacementError, ThreadPlacer

__all__ = [
    "DEFAULT_ROOT",
    "DEFAULT_BASE",
    "PARENT_ROOT",
    "PARENT_SELF",
    "V2_CONTROLLERS",
    "CFS_PERIOD_US",
    "PLACEMENT_FAILED_EXIT",
    "THREAD_PLACEMENT_MIN_QUOTA_US",
    "CgroupError",
    "CgroupUnavailable",
    "CgroupLimits",
    "CgroupHandle",
    "CgroupDriver",
    "CgroupV2",
    "CgroupV1",
    "NoCgroups",
    "detect",
    "cfs_quota_us",
    "cpu_shares",
    "cpu_weight",
]

log = logging.getLogger(__name__)

_T = TypeVar("_T")

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
# wrapper, not from a thread inside the cgroup: that thread's own work and
# the child's exec count against the quota, and a thread throttled for the
# rest of a period (up to 100 ms) would hold up every start meanwhile.
THREAD_PLACEMENT_MIN_QUOTA_US: Final = 10_000

# Exit status of the placement wrapper when it could not enter a cgroup.
# Container CLIs (docker, podman) use 125 for "failed before the command ran".
PLACEMENT_FAILED_EXIT: Final = 125

# How a command starts inside its cgroups.  On v1, a thread of the agent
# enters the container's cgroups alone and forks the command from there
# (``sluicegate.agent.placement``).  On v2 a thread can join a cgroup on
# its own only inside a "threaded" subtree, which the memory controller
# does not support: a process moves whole.  There the placement wrapper
# below runs first.  (v1 falls back to it when the thread cannot come back
# to the agent's own cgroups.)
#
# Why a shell and not preexec_fn, or moving the pid from the agent after fork:
# * preexec_fn runs Python in the forked child of a multi-threaded process
#   (asyncio's executor, the child watcher, grpc) and can deadlock on a lock
#   another thread held at fork time; CPython documents it as unsafe there.
# * Writing the child's pid from the parent after Popen returns races with
#   the child: it may already have exec'd, allocated memory charged elsewhere,
#   or forked helpers that stay outside the cgroup.
# * clone3(CLONE_INTO_CGROUP) would be ideal but is v2-only and not exposed
#   by Python 3.11.
# The wrapper writes its own pid ($$) into each hierarchy's cgroup.procs and
# only then execs the command, so the user's process (same pid, since exec
# keeps it) starts life inside its cgroups; if a write fails it exits with
# PLACEMENT_FAILED_EXIT without running anything.  It costs one exec of sh.
_PLACE_SCRIPT: Final = (
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


@dataclass(frozen=True, slots=True)
class CgroupHandle:
    """Where one container lives: ``(controller, directory)`` pairs, memory first.

    v1 may list the same directory under two controllers (cpu and cpuacct
    are often mounted together); v2 lists one ``unified`` directory.
    """

    pod_uid: str
    container: str
    paths: tuple[tuple[str, str], ...]

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

    def spawn(self, handle: CgroupHandle | None, argv: Sequence[str], start: Callable[[list[str]], _T]) -> _T:
        """Start ``argv`` inside ``handle``'s cgroups by calling ``start`` with the argv to execute.

        The started process is in its cgroups before the command runs; if
        it cannot be placed the command does not run (CgroupError, or on v2
        the wrapper exits with PLACEMENT_FAILED_EXIT).
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


# --- small file helpers -----------------------------------------------------


def _write(path: Path, value: str, *, operation: str) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
        try:
            os.write(fd, value.encode())
        finally:
            os.close(fd)
    except OSError as exc:
        raise CgroupError(
            path=str(path), operation=operation, detail=f"writing {value!r}: {exc.strerror or exc}"
        ) from exc


def _read(path: str | Path) -> str | None:
    # os.read rather than Path.read_text: the runtime reads cgroup.procs and
    # counters on every container exit, and the text layer costs more than
    # the read.  Cgroup files are small; the loop only guards long pid lists.
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        chunks: list[bytes] = []
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks).decode()
    except (OSError, UnicodeDecodeError):
        return None
    finally:
        os.close(fd)


def _read_int(path: Path) -> int | None:
    text = _read(path)
    if text is None:
        return None
    try:
        return int(text.split()[0])
    except (IndexError, ValueError):
        return None


def _read_keyed(path: Path, key: str) -> int | None:
    """Value of ``key`` in a flat-keyed file such as memory.stat or memory.events."""
    text = _read(path)
    if text is None:
        return None
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == key:
            try:
                return int(parts[1])
            except ValueError:
                return None
    return None


def _read_pids(path: str | Path) -> set[int]:
    text = _read(path)
    if not text:
        return set()
    return {int(token) for token in text.split() if token.isdigit()}


def _check_name(kind: str, name: str) -> None:
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        raise CgroupError(path=name, operation="create", detail=f"{kind} {name!r} cannot be a directory name")


async def _rmdir(path: Path, *, attempts: int, interval: float) -> None:
    # An exiting process can stay charged to its cgroup for a moment after
    # the parent saw it exit, so EBUSY is retried a bounded number of times.
    for attempt in range(max(1, attempts)):
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno not in (errno.EBUSY, errno.ENOTEMPTY) or attempt == attempts - 1:
                raise CgroupError(
                    path=str(path),
                    operation="remove",
                    detail=f"{exc.strerror or exc} after {attempt + 1} attempt(s); the directory is left behind",
                ) from exc
        await asyncio.sleep(interval)


def _own_cgroup(controller: str, *, proc_self_cgroup: Path = PROC_SELF_CGROUP) -> str:
    """This process's cgroup path in a hierarchy ("" is the v2 hierarchy)."""
    text = _read(proc_self_cgroup) or ""
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if controller == "" and parts[0] == "0" and parts[1] == "":
            return parts[2]
        if controller and controller in parts[1].split(","):
            return parts[2]
    return "/"


def _resolve_parent(mount: Path, parent: str, controller: str) -> Path:
    path = _own_cgroup(controller) if parent == PARENT_SELF else parent
    return mount / path.lstrip("/")


# --- shared tree driver ------------------------------------------------------


class _TreeDriver:
    """Behaviour both cgroup versions share: a base directory per hierarchy."""

    def __init__(self, *, bases: Sequence[tuple[str, Path]], shell: str) -> None:
        # (controller, base directory); cpu and cpuacct may share one.
        self._bases: tuple[tuple[str, Path], ...] = tuple(bases)
        self._shell = shell
        # Computed once: create and remove_pod walk them for every pod.
        self._unique_bases: tuple[Path, ...] = tuple(dict.fromkeys(base for _, base in self._bases))

    @property
    def base_dirs(self) -> tuple[Path, ...]:
        """The base directory in each hierarchy used (pods are created below them)."""
        return self._unique_bases

    def _base_for(self, controller: str) -> Path | None:
        for name, base in self._bases:
            if name == controller:
                return base
        return None

    def _prepare_dir(self, directory: Path) -> None:
        """Hook: make a newly created non-leaf directory delegate controllers."""

    def _apply_limits(self, handle: CgroupHandle, limits: CgroupLimits) -> None:
        raise NotImplementedError

    def create(self, *, pod_uid: str, container: str, limits: CgroupLimits) -> CgroupHandle:
        _check_name("pod uid", pod_uid)
        _check_name("container name", container)
        made: dict[Path, Path] = {}
        for base in self._unique_bases:
            pod_dir = base / pod_uid
            leaf = pod_dir / container
            try:
                try:
                    os.mkdir(pod_dir)
                except FileExistsError:
                    pass  # the pod's next container
                else:
                    self._prepare_dir(pod_dir)
                try:
                    os.mkdir(leaf)
                except FileExistsError:
                    pass  # a restart, or a start after an agent restart
            except OSError as exc:
                raise CgroupError(path=str(leaf), operation="create", detail=exc.strerror or str(exc)) from exc
            made[base] = leaf
        handle = CgroupHandle(
            pod_uid=pod_uid,
            container=container,
            paths=tuple((controller, str(made[base])) for controller, base in self._bases),
        )
        self._apply_limits(handle, limits)
        return handle

    def placement_argv(self, handle: CgroupHandle | None, argv: Sequence[str]) -> list[str]:
        if handle is None:
            return list(argv)
        procs = [f"{directory}/cgroup.procs" for directory in handle.dir_names]
        return [self._shell, "-c", _PLACE_SCRIPT, "sluicegate-place", str(len(procs)), *procs, *argv]

    def spawn(self, handle: CgroupHandle | None, argv: Sequence[str], start: Callable[[list[str]], _T]) -> _T:
        return start(self.placement_argv(handle, argv))

    def pids(self, handle: CgroupHandle | None) -> frozenset[int]:
        if handle is None:
            return frozenset()
        found: set[int] = set()
        for directory in handle.dir_names:
            found |= _read_pids(f"{directory}/cgroup.procs")
        return frozenset(found)

    def _signal_all(self, directories: Iterable[str | Path]) -> None:
        for directory in directories:
            for pid in _read_pids(f"{directory}/cgroup.procs"):
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass

    def kill(self, handle: CgroupHandle | None) -> None:
        if handle is not None:
            self._signal_all(handle.dir_names)

    def pod_uids(self) -> frozenset[str]:
        if not self._bases:
            return frozenset()
        base = self._bases[0][1]
        try:
            return frozenset(entry.name for entry in os.scandir(base) if entry.is_dir(follow_symlinks=False))
        except OSError:
            return frozenset()

    def _pod_leaves(self, pod_uid: str) -> list[Path]:
        leaves: list[Path] = []
        for base in self._unique_bases:
            pod_dir = base / pod_uid
            try:
                leaves.extend(Path(entry.path) for entry in os.scandir(pod_dir) if entry.is_dir(follow_symlinks=False))
            except OSError:
                continue
        return leaves

    async def remove_pod(
        self, pod_uid: str, *, containers: Sequence[str] | None = None, attempts: int = 50, interval: float = 0.02
    ) -> None:
        if containers is not None and await self._remove_known(pod_uid, containers, attempts, interval):
            return
        for leaf in self._pod_leaves(pod_uid):
            await _rmdir(leaf, attempts=attempts, interval=interval)
        for base in self._unique_bases:
            await _rmdir(base / pod_uid, attempts=attempts, interval=interval)

    async def _remove_known(self, pod_uid: str, containers: Sequence[str], attempts: int, interval: float) -> bool:
        """Remove the named leaves and the pod directories; False when something else is left in them."""
        for base in self._unique_bases:
            pod_dir = base / pod_uid
            for name in containers:
                await _rmdir(pod_dir / name, attempts=attempts, interval=interval)
            try:
                os.rmdir(pod_dir)
            except FileNotFoundError:
                pass
            except OSError as exc:
                if exc.errno in (errno.EBUSY, errno.ENOTEMPTY):
                    return False  # a leaf nobody told us about: look for it
                raise CgroupError(
                    path=str(pod_dir), operation="remove", detail=f"{exc.strerror or exc}; the directory is left behind"
                ) from exc
        return True

    async def sweep(self, *, keep: frozenset[str], attempts: int = 50, interval: float = 0.02) -> frozenset[str]:
        """Kill and remove every pod cgroup under the base except ``keep``; returns the uids swept."""
        swept = self.pod_uids() - keep
        for uid in sorted(swept):
            leaves = self._pod_leaves(uid)
            for _ in range(max(1, attempts)):
                if not any(_read_pids(leaf / "cgroup.procs") for leaf in leaves):
                    break
                self._signal_all(leaves)
                await asyncio.sleep(interval)
            await self.remove_pod(uid, attempts=attempts, interval=interval)
        return swept

    async def remove_base(self, *, attempts: int = 50, interval: float = 0.02) -> None:
        """Remove the (empty) base directories; for tests and uninstalls."""
        for base in self._unique_bases:
            await _rmdir(base, attempts=attempts, interval=interval)


# --- cgroup v2 ---------------------------------------------------------------


class CgroupV2(_TreeDriver):
    """The unified hierarchy.  ``controllers`` are the ones delegated to the base."""

    def __init__(self, *, base_dir: Path, controllers: frozenset[str], shell: str = "/bin/sh") -> None:
        super().__init__(bases=[("unified", base_dir)], shell=shell)
        self._base_dir = base_dir
        self._controllers = controllers

    @property
    def kind(self) -> str:
        return "v2"

    @property
    def controllers(self) -> frozenset[str]:
        return self._controllers

    def describe(self) -> str:
        enabled = " ".join(sorted(self._controllers)) or "no controllers"
        return f"cgroup v2 at {self._base_dir} ({enabled})"

    @classmethod
    def setup(
        cls,
        *,
        mount: Path,
        parent: str = PARENT_ROOT,
        base: str = DEFAULT_BASE,
        controllers: frozenset[str] = V2_CONTROLLERS,
        shell: str = "/bin/sh",
    ) -> CgroupV2:
        """Check delegation, create the base and enable ``controllers`` below it.

        Raises CgroupUnavailable when the parent does not offer the
        controllers or will not delegate them.  A parent that holds processes
        of its own (other than the root) cannot enable controllers for its
        children ("no internal processes"); run the agent in a leaf cgroup
        of its unit (systemd ``DelegateSubgroup=``) and use the unit's cgroup
        as the parent.
        """
        parent_dir = _resolve_parent(mount, parent, "")
        available_text = _read(parent_dir / "cgroup.controllers")
        if available_text is None:
            raise CgroupUnavailable(path=str(parent_dir), operation="detect", detail="not a cgroup v2 directory")
        available = frozenset(available_text.split())
        missing = controllers - available
        if missing:
            raise CgroupUnavailable(
                path=str(parent_dir),
                operation="detect",
                detail=(
                    f"controllers {' '.join(sorted(missing))} are not available "
                    f"(cgroup.controllers: {' '.join(sorted(available)) or 'empty'})"
                ),
            )
        chain = [parent_dir]
        for part in Path(base).parts:
            chain.append(chain[-1] / part)
        for index, directory in enumerate(chain):
            try:
                if index > 0:
                    directory.mkdir(exist_ok=True)
                enabled = frozenset((_read(directory / "cgroup.subtree_control") or "").split())
                if controllers - enabled:
                    _write(
                        directory / "cgroup.subtree_control",
                        " ".join(f"+{name}" for name in sorted(controllers)),
                        operation="delegate controllers",
                    )
            except CgroupError as exc:
                raise CgroupUnavailable(path=exc.path, operation="detect", detail=exc.detail) from exc
            except OSError as exc:
                raise CgroupUnavailable(
                    path=str(directory), operation="detect", detail=exc.strerror or str(exc)
                ) from exc
        if not os.access(chain[-1] / "cgroup.procs", os.W_OK):
            raise CgroupUnavailable(path=str(chain[-1]), operation="detect", detail="cgroup.procs is not writable")
        return cls(base_dir=chain[-1], controllers=controllers, shell=shell)

    def _prepare_dir(self, directory: Path) -> None:
        if self._controllers:
            _write(
                directory / "cgroup.subtree_control",
                " ".join(f"+{name}" for name in sorted(self._controllers)),
                operation="delegate controllers",
            )

    def _require(self, controller: str, handle: CgroupHandle, what: str) -> None:
        if controller not in self._controllers:
            raise CgroupError(
                path=handle.paths[0][1],
                operation="limit",
                detail=f"{what} needs the {controller} controller, which is not delegated here",
            )

    def _apply_limits(self, handle: CgroupHandle, limits: CgroupLimits) -> None:
        leaf = handle.dirs[0]
        if limits.memory_limit_bytes is not None:
            self._require("memory", handle, "a memory limit")
            _write(leaf / "memory.max", str(limits.memory_limit_bytes), operation="set memory limit")
            # Containers do not swap unless told to (the kubelet's NoSwap default);
            # otherwise a "limit" would only slow the process down.
            if (leaf / "memory.swap.max").exists():
                _write(leaf / "memory.swap.max", "0", operation="disable swap")
        if "memory" in self._controllers and (leaf / "memory.oom.group").exists():
            # An OOM kill takes the whole container, as the kubelet configures
            # it on v2: a container missing one process is rarely useful, and
            # the main process then reliably reports the kill.
            _write(leaf / "memory.oom.group", "1", operation="group OOM kills")
        if limits.cpu_limit_millicores:
            self._require("cpu", handle, "a CPU limit")
            quota = cfs_quota_us(limits.cpu_limit_millicores)
            _write(leaf / "cpu.max", f"{quota} {CFS_PERIOD_US}", operation="set CPU limit")
        if "cpu" in self._controllers:
            weight = cpu_weight(cpu_shares(limits.cpu_request_millicores))
            _write(leaf / "cpu.weight", str(weight), operation="set CPU weight")

    def working_set_bytes(self, handle: CgroupHandle | None) -> int | None:
        if handle is None:
            return None
        leaf = handle.dirs[0]
        current = _read_int(leaf / "memory.current")
        if current is None:
            return None
        inactive = _read_keyed(leaf / "memory.stat", "inactive_file") or 0
        return max(0, current - inactive)

    def cpu_seconds(self, handle: CgroupHandle | None) -> float | None:
        if handle is None:
            return None
        usage = _read_keyed(handle.dirs[0] / "cpu.stat", "usage_usec")
        return None if usage is None else usage / 1e6

    def oom_kills(self, handle: CgroupHandle | None) -> int:
        if handle is None:
            return 0
        return _read_keyed(handle.dirs[0] / "memory.events", "oom_kill") or 0

    def kill(self, handle: CgroupHandle | None) -> None:
        if handle is None:
            return
        leaf = handle.dirs[0]
        # cgroup.kill (5.14+) kills every process in the subtree atomically,
        # including ones forking right now, which a pid-by-pid loop can miss.
        if (leaf / "cgroup.kill").exists():
            try:
                _write(leaf / "cgroup.kill", "1", operation="kill")
                return
            except CgroupError:
                if not leaf.exists():
                    return
        self._signal_all([leaf])


# --- cgroup v1 ---------------------------------------------------------------


class CgroupV1(_TreeDriver):
    """Per-controller hierarchies; memory is required, cpu and cpuacct are used when present.

    With a ``placer`` (what ``setup`` gives when the agent's thread can move
    between its cgroups and the pods'), commands are forked from a thread
    inside their cgroups; without one, through the placement wrapper.
    """

    def __init__(
        self, *, bases: Sequence[tuple[str, Path]], shell: str = "/bin/sh", placer: ThreadPlacer | None = None
    ) -> None:
        super().__init__(bases=bases, shell=shell)
        self._placer = placer

    @property
    def placer(self) -> ThreadPlacer | None:
        return self._placer

    def spawn(self, handle: CgroupHandle | None, argv: Sequence[str], start: Callable[[list[str]], _T]) -> _T:
        if handle is None or self._placer is None or self._tight_quota(handle):
            return super().spawn(handle, argv, start)
        command = list(argv)
        try:
            return self._placer.run([f"{directory}/tasks" for directory in handle.dir_names], lambda: start(command))
        except PlacementError as exc:
            raise CgroupError(path=exc.path, operation="place", detail=exc.detail) from exc

    @property
    def kind(self) -> str:
        return "v1"

    def describe(self) -> str:
        parts = ", ".join(f"{name}={base}" for name, base in self._bases)
        how = "from a thread inside their cgroups" if self._placer is not None else f"through {self._shell}"
        return f"cgroup v1 ({parts}; commands start {how})"

    @classmethod
    def setup(
        cls,
        *,
        root: Path,
        parent: str = PARENT_ROOT,
        base: str = DEFAULT_BASE,
        shell: str = "/bin/sh",
    ) -> CgroupV1:
        memory_mount = root / "memory"
        if not (memory_mount / "memory.limit_in_bytes").exists():
            raise CgroupUnavailable(
                path=str(memory_mount), operation="detect", detail="no v1 memory hierarchy mounted here"
            )
        bases: list[tuple[str, Path]] = []
        seen: dict[str, Path] = {}
        hierarchies: list[tuple[str, Path]] = []
        for controller in V1_CONTROLLERS:
            mount = root / controller
            if not (mount / "cgroup.procs").exists():
                continue
            # cpu and cpuacct are often one mount ("cpu,cpuacct") reached by two
            # symlinks; use one directory for both so nothing is created twice.
            real = os.path.realpath(mount)
            base_dir = seen.get(real)
            if base_dir is None:
                base_dir = _resolve_parent(mount, parent, controller) / base
                try:
                    base_dir.mkdir(parents=True, exist_ok=True)
                except OSError as exc:
                    if controller == "memory":
                        raise CgroupUnavailable(
                            path=str(base_dir), operation="detect", detail=exc.strerror or str(exc)
                        ) from exc
                    log.debug("cgroup v1 %s hierarchy is not writable at %s: %s", controller, base_dir, exc)
                    continue
                seen[real] = base_dir
                hierarchies.append((controller, mount))
            bases.append((controller, base_dir))
        memory_base = bases[0][1]
        if not os.access(memory_base / "cgroup.procs", os.W_OK):
            raise CgroupUnavailable(path=str(memory_base), operation="detect", detail="cgroup.procs is not writable")
        placer = ThreadPlacer(hierarchies=hierarchies)
        try:
            placer.probe([str(base / "tasks") for base in seen.values()])
        except PlacementError as exc:
            log.info("cgroup v1: commands start through %s, not from a thread inside their cgroups: %s", shell, exc)
            return cls(bases=bases, shell=shell)
        return cls(bases=bases, shell=shell, placer=placer)

    def _tight_quota(self, handle: CgroupHandle) -> bool:
        cpu = handle.dir_for("cpu")
        if cpu is None:
            return False
        quota = _read_int(cpu / "cpu.cfs_quota_us")  # -1: no limit
        return quota is not None and 0 < quota < THREAD_PLACEMENT_MIN_QUOTA_US

    def _apply_limits(self, handle: CgroupHandle, limits: CgroupLimits) -> None:
        memory = handle.dir_for("memory")
        cpu = handle.dir_for("cpu")
        if limits.memory_limit_bytes is not None and memory is not None:
            _write(memory / "memory.limit_in_bytes", str(limits.memory_limit_bytes), operation="set memory limit")
            # memory+swap at the same value keeps swap out of the picture (see
            # v2); it must be written after the memory limit, which it may not
            # undercut.  Kernels without swap accounting have no such file.
            if (memory / "memory.memsw.limit_in_bytes").exists():
                try:
                    _write(
                        memory / "memory.memsw.limit_in_bytes",
                        str(limits.memory_limit_bytes),
                        operation="set memory+swap limit",
                    )
                except CgroupError as exc:
                    log.debug("memory+swap limit not applied: %s", exc)
        if limits.cpu_limit_millicores:
            if cpu is None:
                raise CgroupError(
                    path=str(memory),
                    operation="limit",
                    detail="a CPU limit needs the v1 cpu hierarchy, which is not mounted or not writable",
                )
            _write(cpu / "cpu.cfs_period_us", str(CFS_PERIOD_US), operation="set CPU period")
            _write(cpu / "cpu.cfs_quota_us", str(cfs_quota_us(limits.cpu_limit_millicores)), operation="set CPU limit")
        if cpu is not None:
            _write(cpu / "cpu.shares", str(cpu_shares(limits.cpu_request_millicores)), operation="set CPU shares")

    def working_set_bytes(self, handle: CgroupHandle | None) -> int | None:
        memory = None if handle is None else handle.dir_for("memory")
        if memory is None:
            return None
        usage = _read_int(memory / "memory.usage_in_bytes")
        if usage is None:
            return None
        inactive = _read_keyed(memory / "memory.stat", "total_inactive_file") or 0
        return max(0, usage - inactive)

    def cpu_seconds(self, handle: CgroupHandle | None) -> float | None:
        cpuacct = None if handle is None else handle.dir_for("cpuacct")
        if cpuacct is None:
            return None
        usage = _read_int(cpuacct / "cpuacct.usage")
        return None if usage is None else usage / 1e9

    def oom_kills(self, handle: CgroupHandle | None) -> int:
        memory = None if handle is None else handle.dir_for("memory")
        if memory is None:
            return 0
        kills = _read_keyed(memory / "memory.oom_control", "oom_kill")
        if kills is not None:
            return kills
        # Kernels before 4.13 have no oom_kill counter.  failcnt counts how
        # often usage hit the limit, which is the closest signal they offer.
        return _read_int(memory / "memory.failcnt") or 0


# --- no cgroups --------------------------------------------------------------


class NoCgroups:
    """Nothing to write: the runtime falls back to psutil polling for memory limits."""

    @property
    def kind(self) -> str:
        return "none"

    def describe(self) -> str:
        return "no cgroups (memory limits polled with psutil, CPU limits not enforced)"

    @property
    def base_dirs(self) -> tuple[Path, ...]:
        return ()

    def create(self, *, pod_uid: str, container: str, limits: CgroupLimits) -> CgroupHandle | None:
        return None

    def placement_argv(self, handle: CgroupHandle | None, argv: Sequence[str]) -> list[str]:
        return list(argv)

    def spawn(self, handle: CgroupHandle | None, argv: Sequence[str], start: Callable[[list[str]], _T]) -> _T:
        return start(list(argv))

    def pids(self, handle: CgroupHandle | None) -> frozenset[int]:
        return frozenset()

    def working_set_bytes(self, handle: CgroupHandle | None) -> int | None:
        return None

    def cpu_seconds(self, handle: CgroupHandle | None) -> float | None:
        return None

    def oom_kills(self, handle: CgroupHandle | None) -> int:
        return 0

    def kill(self, handle: CgroupHandle | None) -> None:
        return None

    async def remove_pod(
        self, pod_uid: str, *, containers: Sequence[str] | None = None, attempts: int = 50, interval: float = 0.02
    ) -> None:
        return None

    def pod_uids(self) -> frozenset[str]:
        return frozenset()

    async def sweep(self, *, keep: frozenset[str], attempts: int = 50, interval: float = 0.02) -> frozenset[str]:
        return frozenset()

    async def remove_base(self, *, attempts: int = 50, interval: float = 0.02) -> None:
        return None


# --- detection ---------------------------------------------------------------


def _unified_mount(root: Path) -> Path | None:
    if (root / "cgroup.controllers").exists():
        return root  # pure v2: the unified hierarchy is mounted at the root
    if (root / "unified" / "cgroup.controllers").exists():
        return root / "unified"  # hybrid: v1 controllers plus an unified mount
    return None


def detect(
    *,
    root: Path = DEFAULT_ROOT,
    base: str = DEFAULT_BASE,
    parent: str = PARENT_ROOT,
    shell: str = "/bin/sh",
) -> CgroupDriver:
    """Pick the cgroup driver for this node: v2 if delegated, else v1, else none.

    v2 comes first because that is where distributions are going and where
    the OOM counter and cgroup.kill are reliable.  On a hybrid node whose
    unified hierarchy has no controllers (systemd's "hybrid" mode) the v1
    hierarchies hold them.  When neither works, one warning says why and
    what the agent does instead.
    """
    reasons: list[str] = []
    unified = _unified_mount(root)
    if unified is None:
        reasons.append(f"v2: no cgroup2 hierarchy at {root} or {root / 'unified'}")
    else:
        try:
            driver_v2 = CgroupV2.setup(mount=unified, parent=parent, base=base, shell=shell)
        except CgroupUnavailable as exc:
            reasons.append(f"v2: {exc.path}: {exc.detail}")
        else:
            log.info("using %s", driver_v2.describe())
            return driver_v2
    try:
        driver_v1 = CgroupV1.setup(root=root, parent=parent, base=base, shell=shell)
    except CgroupUnavailable as exc:
        reasons.append(f"v1: {exc.path}: {exc.detail}")
    else:
        log.info("using %s (%s)", driver_v1.describe(), "; ".join(reasons))
        return driver_v1
    log.warning(
        "no writable cgroups (%s); pods run without cgroups: memory limits are enforced by polling "
        "process RSS and CPU limits are not enforced",
        "; ".join(reasons),
    )
    return NoCgroups()
