"""A pod's processes run as its user, started through every placement path (spawner, wrapper, none).

Placement comes before the user switch (the spawner's POSIX_SPAWN_RESETIDS,
or setpriv after the wrapper): the process is in its cgroups and runs as
the pod's user in all of real, effective, saved and filesystem ids, with
no supplementary groups, no capabilities and no_new_privs, in its private
HOME.
"""

from __future__ import annotations

import os
import stat
from dataclasses import replace
from pathlib import Path

import pytest
from agent_runtime_support import RuntimeFactory, eventually, pod

from sluicegate.agent.cgroups import CgroupDriver, CgroupV1
from sluicegate.agent.runtime import Container, PodPhase, RunAs

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")

NOBODY = 65534


def proc_ids(pid: int) -> tuple[str, str, str, str]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    status = {k: v.strip() for k, _, v in (line.partition(":") for line in lines)}
    return status["Uid"], status["Gid"], status["Groups"], status["NoNewPrivs"]


def proc_caps(pid: int) -> dict[str, int]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {k: int(v.strip(), 16) for k, _, v in (line.partition(":") for line in lines)
            if k in ("CapInh", "CapPrm", "CapEff", "CapAmb")}


async def _runs_as_nobody(make_runtime: RuntimeFactory, driver: CgroupDriver, *, cpu_limit: int | None = None) -> None:
    runtime = make_runtime(driver)
    container = Container(name="main", command=("sleep", "30"), limits={} if cpu_limit is None else {"cpu": cpu_limit})
    spec = replace(pod(container),
                   run_as=RunAs(uid=NOBODY, gid=NOBODY, no_new_privs=True))
    status = await runtime.run(spec)
    assert status.phase is PodPhase.RUNNING
    pid = status.containers[0].pid
    assert pid is not None
    both = f"{NOBODY}\t{NOBODY}\t{NOBODY}\t{NOBODY}"
    # After exec (through setpriv on the wrapper path): the command itself (same pid).
    await eventually(lambda: Path(f"/proc/{pid}/comm").read_text().strip() == "sleep", timeout=5)
    assert proc_ids(pid) == (both, both, "", "1")
    assert proc_caps(pid) == {"CapInh": 0, "CapPrm": 0, "CapEff": 0, "CapAmb": 0}
    home = runtime.home(spec.uid)
    info = home.stat()
    assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (NOBODY, 0o700)
    assert os.readlink(f"/proc/{pid}/cwd") == str(home)
    log = runtime.log_path(spec.uid, "main")
    assert (log.stat().st_uid, stat.S_IMODE(log.stat().st_mode)) == (0, 0o600)
    if driver.kind != "none":
        assert spec.uid in Path(f"/proc/{pid}/cgroup").read_text()
    await runtime.stop(spec.uid, grace_seconds=0)


async def test_a_pod_runs_as_its_user_in_its_cgroups(make_runtime: RuntimeFactory, driver: CgroupDriver) -> None:
    await _runs_as_nobody(make_runtime, driver)


async def test_the_v1_wrapper_path_places_as_root_then_drops(make_runtime: RuntimeFactory, v1_driver: CgroupV1) -> None:
    # A CPU limit under a tenth of a CPU starts through the sh wrapper, not from the spawner.
    await _runs_as_nobody(make_runtime, v1_driver, cpu_limit=50)
