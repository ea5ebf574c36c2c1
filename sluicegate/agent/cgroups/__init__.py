"""Linux control groups for pod containers: create, place, measure, kill, remove.

Three drivers share one small interface (``CgroupDriver``); ``detect()``
picks one when the agent starts:

* ``CgroupV2``: the unified hierarchy, with the memory, cpu and pids
  controllers enabled in a delegated subtree (``memory.max``, ``cpu.max``,
  ``memory.events`` for OOM kills, ``cgroup.kill``);
* ``CgroupV1``: one hierarchy per controller (``memory.limit_in_bytes``,
  ``memory.oom_control``, ``cpu.cfs_quota_us``...), each container placed in
  the same relative path in every hierarchy; on a node with devices also the
  devices hierarchy (``devices.deny``: the device files a pod was not given);
* ``NoCgroups``: nothing is writable; the runtime then enforces memory
  limits by polling RSS through the monitor, and CPU limits are not enforced.

Layout: every container gets ``<hierarchy>/<parent>/<base>/<pod-uid>/<container>``
in each hierarchy used.  ``parent`` is ``/`` (the hierarchy's root, the
default) or ``"self"``: the cgroup the agent itself runs in, which is what a
systemd unit with ``Delegate=yes`` owns.  ``base`` defaults to
``sluicegate``.

Placement happens before the user's command runs: see ``spawn``.

Modules: ``values`` (limits, handles, the driver interface, conversions),
``tree`` (what both hierarchies share), ``v2``, ``v1``, and ``detect``
(``NoCgroups`` and the choice between the three).
"""

from __future__ import annotations

from sluicegate.agent.cgroups.detect import (
    NoCgroups,
    detect,
)
from sluicegate.agent.cgroups.v1 import (
    CgroupV1,
)
from sluicegate.agent.cgroups.v2 import (
    CgroupV2,
)
from sluicegate.agent.cgroups.values import (
    CFS_PERIOD_US,
    DEFAULT_BASE,
    DEFAULT_ROOT,
    PARENT_ROOT,
    PARENT_SELF,
    PLACEMENT_FAILED_EXIT,
    THREAD_PLACEMENT_MIN_QUOTA_US,
    V2_CONTROLLERS,
    CgroupDriver,
    CgroupError,
    CgroupHandle,
    CgroupLimits,
    CgroupUnavailable,
    cfs_quota_us,
    cpu_shares,
    cpu_weight,
)

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
