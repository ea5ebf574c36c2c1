"""The cgroup v1 driver: one hierarchy per controller."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from sluicegate.agent.cgroups.tree import (
    TreeDriver,
    home_procs,
    read_int,
    read_keyed,
    resolve_parent,
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

# --- cgroup v1 ---------------------------------------------------------------


class CgroupV1(TreeDriver):
    """Per-controller hierarchies; memory is required, cpu and cpuacct are used when present.

    With ``homes`` (what ``setup`` gives when the agent's own cgroups are
    writable), commands start from a spawner that enters their cgroups
    (``spawn_places``); without, through the placement wrapper.
    """

    def __init__(
        self, *, bases: Sequence[tuple[str, Path]], shell: str = "/bin/sh", homes: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(bases=bases, shell=shell, homes=homes)
        # CFS quota (-1: none) by cpu directory, as written by _apply_limits: spawn_places need not read it back.
        self._quotas: dict[str, dict[str, int]] = {}

    async def remove_pod(
        self, pod_uid: str, *, containers: Sequence[str] | None = None, attempts: int = 50, interval: float = 0.02
    ) -> None:
        self._quotas.pop(pod_uid, None)
        await super().remove_pod(pod_uid, containers=containers, attempts=attempts, interval=interval)

    def spawn_places(self, handle: CgroupHandle | None) -> tuple[tuple[str, str], ...] | None:
        if handle is not None and self._tight_quota(handle):
            return None
        return super().spawn_places(handle)

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
            return cls(bases=bases, shell=shell)
        return cls(bases=bases, shell=shell, homes=homes)

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
            write_value(f"{cpu}/cpu.shares", str(cpu_shares(limits.cpu_request_millicores)), operation="set CPU shares")
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
        if memory is None:
            return 0
        kills = read_keyed(f"{memory}/memory.oom_control", "oom_kill")
        if kills is not None:
            return kills
        # Kernels before 4.13 have no oom_kill counter.  failcnt counts how
        # often usage hit the limit, which is the closest signal they offer.
        return read_int(f"{memory}/memory.failcnt") or 0
