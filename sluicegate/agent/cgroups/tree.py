"""What the v1 and v2 drivers share: small file helpers and the per-container directory tree."""

from __future__ import annotations

import asyncio
import errno
import os
import signal
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from sluicegate.agent.cgroups.values import (
    PARENT_SELF,
    PLACE_SCRIPT,
    PROC_SELF_CGROUP,
    CgroupError,
    CgroupHandle,
    CgroupLimits,
    T,
)

# --- small file helpers -----------------------------------------------------


def write_value(path: str | Path, value: str, *, operation: str) -> None:
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


def read_text(path: str | Path) -> str | None:
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


def read_int(path: str | Path) -> int | None:
    text = read_text(path)
    if text is None:
        return None
    try:
        return int(text.split()[0])
    except (IndexError, ValueError):
        return None


def read_keyed(path: str | Path, key: str) -> int | None:
    """Value of ``key`` in a flat-keyed file such as memory.stat or memory.events."""
    text = read_text(path)
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


def read_pids(path: str | Path) -> set[int]:
    text = read_text(path)
    if not text:
        return set()
    return {int(token) for token in text.split() if token.isdigit()}


def check_name(kind: str, name: str) -> None:
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        raise CgroupError(path=name, operation="create", detail=f"{kind} {name!r} cannot be a directory name")


async def rmdir_retrying(path: str | Path, *, attempts: int, interval: float) -> None:
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


def own_cgroup(controller: str, *, proc_self_cgroup: Path = PROC_SELF_CGROUP) -> str:
    """This process's cgroup path in a hierarchy ("" is the v2 hierarchy)."""
    text = read_text(proc_self_cgroup) or ""
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if controller == "" and parts[0] == "0" and parts[1] == "":
            return parts[2]
        if controller and controller in parts[1].split(","):
            return parts[2]
    return "/"


def home_procs(mounts: Iterable[tuple[str, Path]]) -> dict[str, str] | None:
    """This process's ``cgroup.procs`` in each ``(controller, mount)`` hierarchy ("" for v2).

    None when one is not writable.
    """
    homes: dict[str, str] = {}
    for controller, mount in mounts:
        procs = mount / own_cgroup(controller).lstrip("/") / "cgroup.procs"
        if not os.access(procs, os.W_OK):
            return None
        homes[controller] = str(procs)
    return homes


def resolve_parent(mount: Path, parent: str, controller: str) -> Path:
    path = own_cgroup(controller) if parent == PARENT_SELF else parent
    return mount / path.lstrip("/")


# --- shared tree driver ------------------------------------------------------


class TreeDriver:
    """Behaviour both cgroup versions share: a base directory per hierarchy."""

    def __init__(
        self, *, bases: Sequence[tuple[str, Path]], shell: str, homes: Mapping[str, str] | None = None
    ) -> None:
        # (controller, base directory); cpu and cpuacct may share one.
        self._bases: tuple[tuple[str, Path], ...] = tuple(bases)
        self._shell = shell
        # The agent's own ``cgroup.procs`` per controller: where a spawner
        # (which starts in the agent's cgroups) goes back to after a start.
        # None: the way back is not writable, so commands start through the
        # wrapper.
        self._homes: dict[str, str] | None = None if homes is None else dict(homes)
        # Computed once: create and remove_pod walk them for every pod.
        self._unique_bases: tuple[Path, ...] = tuple(dict.fromkeys(base for _, base in self._bases))
        self._base_names: tuple[tuple[str, str], ...] = tuple((name, str(base)) for name, base in self._bases)
        self._unique_base_names: tuple[str, ...] = tuple(str(base) for base in self._unique_bases)

    @property
    def homes(self) -> Mapping[str, str] | None:
        """The agent's own ``cgroup.procs`` by controller, where spawners return (None: the wrapper is used)."""
        return self._homes

    @property
    def base_dirs(self) -> tuple[Path, ...]:
        """The base directory in each hierarchy used (pods are created below them)."""
        return self._unique_bases

    def _base_for(self, controller: str) -> Path | None:
        for name, base in self._bases:
            if name == controller:
                return base
        return None

    def _prepare_dir(self, directory: str) -> None:
        """Hook: make a newly created non-leaf directory delegate controllers."""

    def _leaf_made(self, pod_uid: str, container: str, base: str) -> None:
        """Hook: ``create`` made the container's directory under ``base`` (it did not exist)."""

    def _apply_limits(self, handle: CgroupHandle, limits: CgroupLimits) -> None:
        raise NotImplementedError

    def create(self, *, pod_uid: str, container: str, limits: CgroupLimits) -> CgroupHandle:
        check_name("pod uid", pod_uid)
        check_name("container name", container)
        # Strings, not pathlib: this runs for every container start.
        made: dict[str, str] = {}
        for base in self._unique_base_names:
            pod_dir = f"{base}/{pod_uid}"
            leaf = f"{pod_dir}/{container}"
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
                else:
                    self._leaf_made(pod_uid, container, base)
            except OSError as exc:
                raise CgroupError(path=leaf, operation="create", detail=exc.strerror or str(exc)) from exc
            made[base] = leaf
        handle = CgroupHandle(
            pod_uid=pod_uid,
            container=container,
            paths=tuple((controller, made[base]) for controller, base in self._base_names),
        )
        self._apply_limits(handle, limits)
        return handle

    def placement_argv(self, handle: CgroupHandle | None, argv: Sequence[str]) -> list[str]:
        if handle is None:
            return list(argv)
        procs = [f"{directory}/cgroup.procs" for directory in handle.dir_names]
        return [self._shell, "-c", PLACE_SCRIPT, "sluicegate-place", str(len(procs)), *procs, *argv]

    def spawn(self, handle: CgroupHandle | None, argv: Sequence[str], start: Callable[[list[str]], T]) -> T:
        return start(self.placement_argv(handle, argv))

    def spawn_places(self, handle: CgroupHandle | None) -> tuple[tuple[str, str], ...] | None:
        """``(enter, home)`` ``cgroup.procs`` files for a spawner to start a command in ``handle``'s cgroups.

        None when commands must start through the wrapper instead.
        """
        if handle is None:
            return ()
        homes = self._homes
        if homes is None:
            return None
        places: list[tuple[str, str]] = []
        seen: set[str] = set()
        for controller, directory in handle.paths:
            home = homes.get(controller)
            if home is None:
                return None
            if directory not in seen:
                seen.add(directory)
                places.append((f"{directory}/cgroup.procs", home))
        return tuple(places)

    def pids(self, handle: CgroupHandle | None) -> frozenset[int]:
        # The first (memory) hierarchy holds every process of the container:
        # a process enters all of them before its command runs, memory first,
        # and only root moves it out.  One read per check, not one per hierarchy.
        if handle is None or not handle.paths:
            return frozenset()
        return frozenset(read_pids(f"{handle.paths[0][1]}/cgroup.procs"))

    def _signal_all(self, directories: Iterable[str | Path]) -> None:
        for directory in directories:
            for pid in read_pids(f"{directory}/cgroup.procs"):
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
            await rmdir_retrying(leaf, attempts=attempts, interval=interval)
        for base in self._unique_bases:
            await rmdir_retrying(base / pod_uid, attempts=attempts, interval=interval)

    async def _remove_known(self, pod_uid: str, containers: Sequence[str], attempts: int, interval: float) -> bool:
        """Remove the named leaves and the pod directories; False when something else is left in them."""
        for base in self._unique_base_names:
            pod_dir = f"{base}/{pod_uid}"
            for name in containers:
                await rmdir_retrying(f"{pod_dir}/{name}", attempts=attempts, interval=interval)
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
                if not any(read_pids(leaf / "cgroup.procs") for leaf in leaves):
                    break
                self._signal_all(leaves)
                await asyncio.sleep(interval)
            await self.remove_pod(uid, attempts=attempts, interval=interval)
        return swept

    async def remove_base(self, *, attempts: int = 50, interval: float = 0.02) -> None:
        """Remove the (empty) base directories; for tests and uninstalls."""
        for base in self._unique_bases:
            await rmdir_retrying(base, attempts=attempts, interval=interval)
