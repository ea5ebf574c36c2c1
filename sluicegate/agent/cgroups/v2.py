"""The cgroup v2 driver: the unified hierarchy, in a delegated subtree."""

from __future__ import annotations

import os
from pathlib import Path

from sluicegate.agent.cgroups.tree import (
    TreeDriver,
    home_procs,
    read_int,
    read_keyed,
    read_text,
    resolve_parent,
    write_value,
)
from sluicegate.agent.cgroups.values import (
    CFS_PERIOD_US,
    DEFAULT_BASE,
    PARENT_ROOT,
    V2_CONTROLLERS,
    CgroupError,
    CgroupHandle,
    CgroupLimits,
    CgroupUnavailable,
    cfs_quota_us,
    cpu_shares,
    cpu_weight,
)

# --- cgroup v2 ---------------------------------------------------------------


class CgroupV2(TreeDriver):
    """The unified hierarchy.  ``controllers`` are the ones delegated to the base."""

    def __init__(
        self,
        *,
        base_dir: Path,
        controllers: frozenset[str],
        shell: str = "/bin/sh",
        home: str | None = None,
    ) -> None:
        super().__init__(bases=[("unified", base_dir)], shell=shell, homes=None if home is None else {"unified": home})
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
        parent_dir = resolve_parent(mount, parent, "")
        available_text = read_text(parent_dir / "cgroup.controllers")
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
                enabled = frozenset((read_text(directory / "cgroup.subtree_control") or "").split())
                if controllers - enabled:
                    write_value(
                        f"{directory}/cgroup.subtree_control",
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
        homes = home_procs([("", mount)])
        return cls(base_dir=chain[-1], controllers=controllers, shell=shell,
                   home=None if homes is None else homes[""])

    def _prepare_dir(self, directory: str) -> None:
        if self._controllers:
            write_value(
                f"{directory}/cgroup.subtree_control",
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
            write_value(leaf / "memory.max", str(limits.memory_limit_bytes), operation="set memory limit")
            # Containers do not swap unless told to (the kubelet's NoSwap default);
            # otherwise a "limit" would only slow the process down.
            if (leaf / "memory.swap.max").exists():
                write_value(leaf / "memory.swap.max", "0", operation="disable swap")
        if "memory" in self._controllers and (leaf / "memory.oom.group").exists():
            # An OOM kill takes the whole container, as the kubelet configures
            # it on v2: a container missing one process is rarely useful, and
            # the main process then reliably reports the kill.
            write_value(leaf / "memory.oom.group", "1", operation="group OOM kills")
        if limits.cpu_limit_millicores:
            self._require("cpu", handle, "a CPU limit")
            quota = cfs_quota_us(limits.cpu_limit_millicores)
            write_value(leaf / "cpu.max", f"{quota} {CFS_PERIOD_US}", operation="set CPU limit")
        if "cpu" in self._controllers:
            weight = cpu_weight(cpu_shares(limits.cpu_request_millicores))
            write_value(leaf / "cpu.weight", str(weight), operation="set CPU weight")

    def working_set_bytes(self, handle: CgroupHandle | None) -> int | None:
        if handle is None:
            return None
        leaf = handle.dirs[0]
        current = read_int(leaf / "memory.current")
        if current is None:
            return None
        inactive = read_keyed(leaf / "memory.stat", "inactive_file") or 0
        return max(0, current - inactive)

    def cpu_seconds(self, handle: CgroupHandle | None) -> float | None:
        if handle is None:
            return None
        usage = read_keyed(handle.dirs[0] / "cpu.stat", "usage_usec")
        return None if usage is None else usage / 1e6

    def oom_kills(self, handle: CgroupHandle | None) -> int:
        if handle is None:
            return 0
        return read_keyed(handle.dirs[0] / "memory.events", "oom_kill") or 0

    def kill(self, handle: CgroupHandle | None) -> None:
        if handle is None:
            return
        leaf = handle.dirs[0]
        # cgroup.kill (5.14+) kills every process in the subtree atomically,
        # including ones forking right now, which a pid-by-pid loop can miss.
        if (leaf / "cgroup.kill").exists():
            try:
                write_value(leaf / "cgroup.kill", "1", operation="kill")
                return
            except CgroupError:
                if not leaf.exists():
                    return
        self._signal_all([leaf])
