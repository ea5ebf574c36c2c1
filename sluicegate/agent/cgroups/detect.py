"""No cgroups at all, and detect(): which driver this node gets."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from sluicegate.agent.cgroups.v1 import (
    CgroupV1,
)
from sluicegate.agent.cgroups.v2 import (
    CgroupV2,
)
from sluicegate.agent.cgroups.values import (
    DEFAULT_BASE,
    DEFAULT_ROOT,
    PARENT_ROOT,
    CgroupDriver,
    CgroupHandle,
    CgroupLimits,
    CgroupUnavailable,
    T,
)

log = logging.getLogger("sluicegate.agent.cgroups")

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

    def spawn(self, handle: CgroupHandle | None, argv: Sequence[str], start: Callable[[list[str]], T]) -> T:
        return start(list(argv))

    def spawn_places(self, handle: CgroupHandle | None) -> tuple[tuple[str, str], ...] | None:
        return ()

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


def unified_mount(root: Path) -> Path | None:
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
    devices: bool = False,
) -> CgroupDriver:
    """Pick the cgroup driver for this node: v2 if delegated, else v1, else none.

    v2 comes first because that is where distributions are going and where
    the OOM counter and cgroup.kill are reliable.  On a hybrid node whose
    unified hierarchy has no controllers (systemd's "hybrid" mode) the v1
    hierarchies hold them.  When neither works, one warning says why and
    what the agent does instead.
    """
    reasons: list[str] = []
    unified = unified_mount(root)
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
        driver_v1 = CgroupV1.setup(root=root, parent=parent, base=base, shell=shell, devices=devices)
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
