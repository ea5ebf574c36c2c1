"""The cgroup v1 driver: one hierarchy per controller."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from sluicegate.agent.cgroups.tree import (
    TreeDriver,
    check_name,
    home_procs,
    read_int,
    read_keyed,
    read_pids,
    resolve_parent,
    rmdir_retrying,
    write_value,
)
from sluicegate.agent.cgroups.values import (
    CFS_PERIOD_US,
    DEFAULT_BASE,
    PARENT_ROOT,
    THREAD_PLACEMENT_MIN_QUOTA_US,
    V1_CONTROLLERS,
    CgroupError,
    CgroupHandle,
    CgroupLimits,
    CgroupUnavailable,
    cfs_quota_us,
    cpu_shares,
)

log = logging.getLogger("sluicegate.agent.cgroups")

# Emptied pod cgroups kept for reuse are named this, then a number, under the base.
POOL_PREFIX: Final = ".pool-"
# How many emptied pod cgroups a v1 driver made by ``setup`` keeps for reuse.
DEFAULT_POOL_SIZE: Final = 32
# A kept cgroup is handed on with what the kernel still charges to it: an
# exited pod leaves some slab (a few hundred KiB even for `true`), which
# is uncharged as it is freed or reclaimed under the next pod's limit.
# One charged with more (page cache the pod left) is removed instead: its
# next pod's working set would count it, and emptying it costs the agent
# more than the directories it saves.
POOL_MAX_CHARGED_BYTES: Final = 1 << 20

# --- cgroup v1 ---------------------------------------------------------------


class CgroupV1(TreeDriver):
    """Per-controller hierarchies; memory is required, cpu and cpuacct are used when present.

    With ``homes`` (what ``setup`` gives when the agent's own cgroups are
    writable), commands start from a spawner that enters their cgroups
    (``spawn_places``); without, through the placement wrapper.
    """

    def __init__(
        self,
        *,
        bases: Sequence[tuple[str, Path]],
        shell: str = "/bin/sh",
        homes: Mapping[str, str] | None = None,
        pool_size: int = 0,
    ) -> None:
        super().__init__(bases=bases, shell=shell, homes=homes)
        # CFS quota (-1: none) by cpu directory, as written by _apply_limits: spawn_places need not read it back.
        self._quotas: dict[str, dict[str, int]] = {}
        # Containers (pod uid, name) whose memory cgroup this driver knows to have no memory
        # limit (made or reset here, none written since): parking it has no limit to reset.
        self._memory_unlimited: set[tuple[str, str]] = set()
        # Emptied one-container pod cgroups kept for the next pods: (name under each base, leaf name).
        # Making and removing a pod's directories in every hierarchy is most of
        # what a cgroup costs a start; a kept one is reset when it is emptied
        # (see _park) and renamed to its next pod.  Not with a devices
        # hierarchy, whose rules cannot be reset from here.
        self._pool_size = 0 if self.controls_devices else max(0, pool_size)
        # Each kept one as (name under each base, leaf name, its OOM-kill count, its CPU shares) (None: unknown).
        self._pool: list[tuple[str, str, int | None, int | None]] = []
        self._pool_seq = 0
        self._memsw: bool | None = None
        # What a container's cgroups hold without reading them back, by (pod uid, name): the OOM-kill
        # count of a cgroup made or kept and not yet placed into (the baseline of its first start, see
        # oom_kills), the count last read (kept with an emptied cgroup: the runtime reads it once the
        # last process is gone), and the CPU shares this driver wrote.
        self._oom_idle: dict[tuple[str, str], int] = {}
        self._oom_read: dict[tuple[str, str], int] = {}
        self._shares: dict[tuple[str, str], int] = {}
        self._memory_base = next((str(base) for name, base in self._bases if name == "memory"), None)

    def create(self, *, pod_uid: str, container: str, limits: CgroupLimits) -> CgroupHandle:
        if self._pool:
            check_name("pod uid", pod_uid)
            check_name("container name", container)
            if self._reuse(pod_uid, container):
                handle = CgroupHandle(
                    pod_uid=pod_uid,
                    container=container,
                    paths=tuple((name, f"{base}/{pod_uid}/{container}") for name, base in self._base_names),
                )
                self._apply_limits(handle, limits)
                return handle
        return super().create(pod_uid=pod_uid, container=container, limits=limits)

    def _reuse(self, pod_uid: str, container: str) -> bool:
        """Rename a kept cgroup to the pod's; False (nothing renamed) when that cannot be done."""
        name, leaf, oom_kills, shares = self._pool.pop()
        moved: list[str] = []
        try:
            for base in self._unique_base_names:
                os.rename(f"{base}/{name}", f"{base}/{pod_uid}")
                moved.append(base)
                if leaf != container:
                    os.rename(f"{base}/{pod_uid}/{leaf}", f"{base}/{pod_uid}/{container}")
        except OSError as exc:
            # The pod's directory exists already (its next container), or the
            # kept one is gone: give up on it, and put back what was renamed.
            log.debug("cgroup v1: not reusing %s for pod %s: %s", name, pod_uid, exc)
            for base in moved:
                try:
                    if leaf != container:
                        os.rename(f"{base}/{pod_uid}/{container}", f"{base}/{pod_uid}/{leaf}")
                    os.rename(f"{base}/{pod_uid}", f"{base}/{name}")
                except OSError:
                    pass  # left for the sweep of the next agent's start
            return False
        key = (pod_uid, container)
        if oom_kills is not None:
            self._oom_idle[key] = oom_kills
        if shares is not None:
            self._shares[key] = shares
        return True

    def _leaf_made(self, pod_uid: str, container: str, base: str) -> None:
        if base == self._memory_base:
            # A new memory cgroup has counted no OOM kill.
            self._oom_idle[(pod_uid, container)] = 0

    def _park(self, pod_uid: str, leaf: str) -> bool:
        """Reset the emptied cgroup of a one-container pod and keep it; False when it must be removed instead.

        Reset: no memory or CPU limit, CPU use counted from zero.  Kept only
        while it holds no process and at most ``POOL_MAX_CHARGED_BYTES`` is
        charged to it.  The OOM-kill counter cannot be reset, but a start
        reads it as its baseline; the CPU shares and any limit are written
        by the next pod's create.
        """
        dirs = {controller: f"{base}/{pod_uid}/{leaf}" for controller, base in self._base_names}
        memory = dirs.get("memory")
        if memory is None or read_pids(f"{memory}/cgroup.procs"):
            return False
        try:
            if (pod_uid, leaf) not in self._memory_unlimited:
                if self._memsw is None:
                    self._memsw = os.path.exists(f"{memory}/memory.memsw.limit_in_bytes")
                if self._memsw:
                    write_value(f"{memory}/memory.memsw.limit_in_bytes", "-1", operation="reset memory+swap limit")
                write_value(f"{memory}/memory.limit_in_bytes", "-1", operation="reset memory limit")
            charged = read_int(f"{memory}/memory.usage_in_bytes")
            if charged is None or charged > POOL_MAX_CHARGED_BYTES:
                return False
            cpu = dirs.get("cpu")
            if cpu is not None and self._quotas.get(pod_uid, {}).get(cpu, 0) != -1:
                write_value(f"{cpu}/cpu.cfs_quota_us", "-1", operation="reset CPU limit")
            cpuacct = dirs.get("cpuacct")
            if cpuacct is not None:
                write_value(f"{cpuacct}/cpuacct.usage", "0", operation="reset CPU usage")
        except CgroupError as exc:
            log.debug("cgroup v1: not keeping the cgroup of pod %s: %s", pod_uid, exc)
            return False
        name = f"{POOL_PREFIX}{self._pool_seq}"
        self._pool_seq += 1
        moved: list[str] = []
        try:
            for base in self._unique_base_names:
                os.rename(f"{base}/{pod_uid}", f"{base}/{name}")
                moved.append(base)
        except OSError as exc:
            log.debug("cgroup v1: not keeping the cgroup of pod %s: %s", pod_uid, exc)
            for base in moved:
                try:
                    os.rename(f"{base}/{name}", f"{base}/{pod_uid}")
                except OSError:
                    pass  # left for the sweep of the next agent's start
            return False
        key = (pod_uid, leaf)
        self._pool.append((name, leaf, self._oom_read.pop(key, None), self._shares.pop(key, None)))
        return True

    async def remove_pod(
        self, pod_uid: str, *, containers: Sequence[str] | None = None, attempts: int = 50, interval: float = 0.02
    ) -> None:
        parked = (
            containers is not None
            and len(containers) == 1
            and len(self._pool) < self._pool_size
            and self._park(pod_uid, containers[0])
        )
        self._quotas.pop(pod_uid, None)
        for name in containers or ():
            key = (pod_uid, name)
            self._memory_unlimited.discard(key)
            self._oom_idle.pop(key, None)
            self._oom_read.pop(key, None)
            self._shares.pop(key, None)
        if not parked:
            await super().remove_pod(pod_uid, containers=containers, attempts=attempts, interval=interval)

    def pod_uids(self) -> frozenset[str]:
        return frozenset(uid for uid in super().pod_uids() if not uid.startswith(POOL_PREFIX))

    async def drain_pool(self, *, attempts: int = 50, interval: float = 0.02) -> None:
        """Remove every kept cgroup, this driver's and any a previous agent left."""
        self._pool.clear()
        for base in self._unique_bases:
            try:
                kept = [entry.path for entry in os.scandir(base)
                        if entry.name.startswith(POOL_PREFIX) and entry.is_dir(follow_symlinks=False)]
            except OSError:
                continue
            for directory in kept:
                try:
                    leaves = [entry.path for entry in os.scandir(directory) if entry.is_dir(follow_symlinks=False)]
                except OSError:
                    leaves = []
                for leaf in leaves:
                    await rmdir_retrying(leaf, attempts=attempts, interval=interval)
                await rmdir_retrying(directory, attempts=attempts, interval=interval)

    async def sweep(self, *, keep: frozenset[str], attempts: int = 50, interval: float = 0.02) -> frozenset[str]:
        await self.drain_pool(attempts=attempts, interval=interval)
        return await super().sweep(keep=keep, attempts=attempts, interval=interval)

    async def remove_base(self, *, attempts: int = 50, interval: float = 0.02) -> None:
        await self.drain_pool(attempts=attempts, interval=interval)
        await super().remove_base(attempts=attempts, interval=interval)

    def spawn_places(self, handle: CgroupHandle | None) -> tuple[tuple[str, str], ...] | None:
        if handle is not None:
            self._oom_idle.pop((handle.pod_uid, handle.container), None)  # something runs in it next
            if self._tight_quota(handle):
                return None
        return super().spawn_places(handle)

    def placement_argv(self, handle: CgroupHandle | None, argv: Sequence[str]) -> list[str]:
        if handle is not None:
            self._oom_idle.pop((handle.pod_uid, handle.container), None)  # something runs in it next
        return super().placement_argv(handle, argv)

    @property
    def kind(self) -> str:
        return "v1"

    @property
    def controls_devices(self) -> bool:
        """Whether containers get a devices cgroup (``setup(devices=True)`` with the hierarchy writable)."""
        return any(name == "devices" for name, _ in self._bases)

    def describe(self) -> str:
        parts = ", ".join(f"{name}={base}" for name, base in self._bases)
        how = "from a spawner inside their cgroups" if self._homes is not None else f"through {self._shell}"
        return f"cgroup v1 ({parts}; commands start {how})"

    @classmethod
    def setup(
        cls,
        *,
        root: Path,
        parent: str = PARENT_ROOT,
        base: str = DEFAULT_BASE,
        shell: str = "/bin/sh",
        devices: bool = False,
    ) -> CgroupV1:
        memory_mount = root / "memory"
        if not (memory_mount / "memory.limit_in_bytes").exists():
            raise CgroupUnavailable(
                path=str(memory_mount), operation="detect", detail="no v1 memory hierarchy mounted here"
            )
        bases: list[tuple[str, Path]] = []
        seen: dict[str, Path] = {}
        # The devices hierarchy only where pods hold devices: one more directory per container.
        for controller in (*V1_CONTROLLERS, "devices") if devices else V1_CONTROLLERS:
            mount = root / controller
            if not (mount / "cgroup.procs").exists():
                continue
            # cpu and cpuacct are often one mount ("cpu,cpuacct") reached by two
            # symlinks; use one directory for both so nothing is created twice.
            real = os.path.realpath(mount)
            base_dir = seen.get(real)
            if base_dir is None:
                base_dir = resolve_parent(mount, parent, controller) / base
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
            bases.append((controller, base_dir))
        memory_base = bases[0][1]
        if not os.access(memory_base / "cgroup.procs", os.W_OK):
            raise CgroupUnavailable(path=str(memory_base), operation="detect", detail="cgroup.procs is not writable")
        homes = home_procs([(controller, root / controller) for controller, _ in bases])
        if homes is None:
            log.info("cgroup v1: commands start through %s: the agent's own cgroups are not writable", shell)
            return cls(bases=bases, shell=shell, pool_size=DEFAULT_POOL_SIZE)
        return cls(bases=bases, shell=shell, homes=homes, pool_size=DEFAULT_POOL_SIZE)

    def _tight_quota(self, handle: CgroupHandle) -> bool:
        cpu = handle.name_for("cpu")
        if cpu is None:
            return False
        known = self._quotas.get(handle.pod_uid, {}).get(cpu)
        # -1: no limit; read back only for a cgroup this driver did not write (made before an agent restart).
        quota = known if known is not None else read_int(f"{cpu}/cpu.cfs_quota_us")
        return quota is not None and 0 < quota < THREAD_PLACEMENT_MIN_QUOTA_US

    def _apply_limits(self, handle: CgroupHandle, limits: CgroupLimits) -> None:
        memory = handle.name_for("memory")
        cpu = handle.name_for("cpu")
        if limits.memory_limit_bytes is None:
            # A cgroup this driver made or reset: no memory limit.
            self._memory_unlimited.add((handle.pod_uid, handle.container))
        else:
            self._memory_unlimited.discard((handle.pod_uid, handle.container))
        if limits.memory_limit_bytes is not None and memory is not None:
            write_value(f"{memory}/memory.limit_in_bytes", str(limits.memory_limit_bytes), operation="set memory limit")
            # memory+swap at the same value keeps swap out of the picture (see
            # v2); it must be written after the memory limit, which it may not
            # undercut.  Kernels without swap accounting have no such file.
            if os.path.exists(f"{memory}/memory.memsw.limit_in_bytes"):
                try:
                    write_value(
                        f"{memory}/memory.memsw.limit_in_bytes",
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
            write_value(f"{cpu}/cpu.cfs_period_us", str(CFS_PERIOD_US), operation="set CPU period")
            quota = cfs_quota_us(limits.cpu_limit_millicores)
            write_value(f"{cpu}/cpu.cfs_quota_us", str(quota), operation="set CPU limit")
        if cpu is not None:
            self._quotas.setdefault(handle.pod_uid, {})[cpu] = quota if limits.cpu_limit_millicores else -1
            shares = cpu_shares(limits.cpu_request_millicores)
            key = (handle.pod_uid, handle.container)
            if self._shares.get(key) != shares:  # a kept cgroup has its last pod's, often the same
                write_value(f"{cpu}/cpu.shares", str(shares), operation="set CPU shares")
                self._shares[key] = shares
        if limits.device_deny:
            devices = handle.name_for("devices")
            if devices is None:
                raise CgroupError(path=str(memory), operation="limit",
                                  detail="denying device files needs the v1 devices hierarchy, which is not "
                                         "mounted or not writable")
            for rule in limits.device_deny:
                write_value(f"{devices}/devices.deny", rule, operation="deny a device")

    def working_set_bytes(self, handle: CgroupHandle | None) -> int | None:
        memory = None if handle is None else handle.name_for("memory")
        if memory is None:
            return None
        usage = read_int(f"{memory}/memory.usage_in_bytes")
        if usage is None:
            return None
        inactive = read_keyed(f"{memory}/memory.stat", "total_inactive_file") or 0
        return max(0, usage - inactive)

    def cpu_seconds(self, handle: CgroupHandle | None) -> float | None:
        cpuacct = None if handle is None else handle.name_for("cpuacct")
        if cpuacct is None:
            return None
        usage = read_int(f"{cpuacct}/cpuacct.usage")
        return None if usage is None else usage / 1e9

    def oom_kills(self, handle: CgroupHandle | None) -> int:
        memory = None if handle is None else handle.name_for("memory")
        if memory is None or handle is None:
            return 0
        key = (handle.pod_uid, handle.container)
        idle = self._oom_idle.pop(key, None)
        if idle is not None:
            # Made or kept, and nothing placed into it since: the count is known (a start's baseline).
            return idle
        kills = read_keyed(f"{memory}/memory.oom_control", "oom_kill")
        if kills is not None:
            # Kept with the cgroup when it is emptied (see _park): read after the last exit, it is still its count.
            self._oom_read[key] = kills
            return kills
        # Kernels before 4.13 have no oom_kill counter.  failcnt counts how
        # often usage hit the limit, which is the closest signal they offer.
        return read_int(f"{memory}/memory.failcnt") or 0
