"""Cgroup drivers against the real cgroup filesystems of this machine."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
from pathlib import Path

import pytest
from agent_runtime_support import MI, eventually, gone, unified_mount, unique

from sluicegate.agent.cgroups import (
    DEFAULT_ROOT,
    PARENT_SELF,
    PLACEMENT_FAILED_EXIT,
    V2_CONTROLLERS,
    CgroupDriver,
    CgroupError,
    CgroupHandle,
    CgroupLimits,
    CgroupUnavailable,
    CgroupV1,
    CgroupV2,
    NoCgroups,
    cfs_quota_us,
    cpu_shares,
    cpu_weight,
    detect,
)
from sluicegate.agent.cgroups.v1 import POOL_MAX_CHARGED_BYTES, POOL_PREFIX


@pytest.mark.parametrize(
    ("millicores", "expected"),
    [
        pytest.param(1000, 100_000, id="one-cpu"),
        pytest.param(500, 50_000, id="half-cpu"),
        pytest.param(2500, 250_000, id="two-and-a-half"),
        pytest.param(5, 1_000, id="below-kernel-minimum"),
    ],
)
def test_cfs_quota(millicores: int, expected: int) -> None:
    assert cfs_quota_us(millicores) == expected


@pytest.mark.parametrize(
    ("millicores", "shares", "weight"),
    [
        pytest.param(None, 2, 1, id="best-effort"),
        pytest.param(0, 2, 1, id="zero-request"),
        pytest.param(1, 2, 1, id="tiny-request"),
        pytest.param(250, 256, 10, id="quarter-cpu"),
        pytest.param(1000, 1024, 39, id="one-cpu"),
        pytest.param(10_000_000, 262_144, 10_000, id="capped"),
    ],
)
def test_cpu_shares_and_weight(millicores: int | None, shares: int, weight: int) -> None:
    assert (cpu_shares(millicores), cpu_weight(cpu_shares(millicores))) == (shares, weight)


def test_detect_degrades_to_no_cgroups_with_one_log_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="sluicegate.agent.cgroups")
    driver = detect(root=tmp_path, base=unique("sluicegate-test"))
    assert isinstance(driver, NoCgroups)
    records = [r for r in caplog.records if r.name == "sluicegate.agent.cgroups"]
    assert [r.levelno for r in records] == [logging.WARNING]
    assert records[0].getMessage().startswith("no writable cgroups (v2: no cgroup2 hierarchy at ")
    assert (
        "memory limits are enforced by polling process RSS and CPU limits are not enforced" in records[0].getMessage()
    )


async def test_detect_picks_a_writable_version_here() -> None:
    base = unique("sluicegate-test")
    driver = detect(base=base, parent=PARENT_SELF)
    try:
        if not (DEFAULT_ROOT / "memory" / "memory.limit_in_bytes").exists() and unified_mount() is None:
            assert driver.kind == "none"
            return
        # This machine: v1 controllers plus an unified mount without any.
        mount = unified_mount()
        v2_offers = mount is not None and V2_CONTROLLERS <= set((mount / "cgroup.controllers").read_text().split())
        assert driver.kind == ("v2" if v2_offers else "v1")
    finally:
        await driver.remove_base()


def test_v2_setup_refuses_without_delegated_controllers() -> None:
    mount = unified_mount()
    if mount is None:
        pytest.skip("no cgroup2 hierarchy mounted")
    available = set((mount / "cgroup.controllers").read_text().split())
    if V2_CONTROLLERS <= available:
        pytest.skip("this machine delegates v2 controllers")
    with pytest.raises(CgroupUnavailable) as caught:
        CgroupV2.setup(mount=mount, base=unique("sluicegate-test"))
    assert caught.value.operation == "detect"
    assert "are not available (cgroup.controllers:" in caught.value.detail


async def test_v1_writes_limits(v1_driver: CgroupV1) -> None:
    handle = v1_driver.create(
        pod_uid="pod-a",
        container="main",
        limits=CgroupLimits(cpu_limit_millicores=500, cpu_request_millicores=250, memory_limit_bytes=64 * MI),
    )
    memory, cpu = handle.dir_for("memory"), handle.dir_for("cpu")
    assert memory is not None and cpu is not None
    written = {
        "memory.limit_in_bytes": (memory / "memory.limit_in_bytes").read_text().strip(),
        "cpu.cfs_period_us": (cpu / "cpu.cfs_period_us").read_text().strip(),
        "cpu.cfs_quota_us": (cpu / "cpu.cfs_quota_us").read_text().strip(),
        "cpu.shares": (cpu / "cpu.shares").read_text().strip(),
    }
    assert written == {
        "memory.limit_in_bytes": str(64 * MI),
        "cpu.cfs_period_us": "100000",
        "cpu.cfs_quota_us": "50000",
        "cpu.shares": "256",
    }
    assert {(d.parent.parent, d.parent.name, d.name) for d in handle.dirs} == {
        (base, "pod-a", "main") for base in v1_driver.base_dirs
    }
    assert v1_driver.oom_kills(handle) == 0
    await v1_driver.remove_pod("pod-a")
    assert [d.exists() for d in handle.dirs] == [False] * len(handle.dirs)


def _kept(driver: CgroupV1) -> list[str]:
    return sorted(entry.name for entry in os.scandir(driver.base_dirs[0]) if entry.name.startswith(POOL_PREFIX))


async def test_v1_reuses_an_emptied_cgroup_reset_to_no_limits(v1_driver: CgroupV1) -> None:
    """A one-container pod's emptied cgroup is kept and renamed to the next pod's, with its limits reset.

    The next pod gets exactly its own limits (none here: memory and CPU
    unlimited) and CPU use counted from zero; kept cgroups are no pod's
    (not in pod_uids) and go with the base.
    """
    first = v1_driver.create(
        pod_uid="pod-a",
        container="main",
        limits=CgroupLimits(cpu_limit_millicores=500, cpu_request_millicores=250, memory_limit_bytes=64 * MI),
    )
    cpuacct = first.dir_for("cpuacct")
    assert cpuacct is not None
    subprocess.run(v1_driver.placement_argv(first, ["sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"]),
                   check=True)
    assert int((cpuacct / "cpuacct.usage").read_text()) > 0
    await v1_driver.remove_pod("pod-a", containers=["main"])
    assert "pod-a" not in v1_driver.pod_uids()
    assert [d.exists() for d in first.dirs] == [False] * len(first.dirs)
    assert len(_kept(v1_driver)) == 1

    second = v1_driver.create(pod_uid="pod-b", container="work", limits=CgroupLimits())
    assert _kept(v1_driver) == []
    assert {(d.parent.parent, d.parent.name, d.name) for d in second.dirs} == {
        (base, "pod-b", "work") for base in v1_driver.base_dirs
    }
    memory, cpu, cpuacct = second.dir_for("memory"), second.dir_for("cpu"), second.dir_for("cpuacct")
    assert memory is not None and cpu is not None and cpuacct is not None
    assert int((memory / "memory.limit_in_bytes").read_text()) > 2**60  # unlimited
    assert (cpu / "cpu.cfs_quota_us").read_text().strip() == "-1"
    assert (cpu / "cpu.shares").read_text().strip() == str(cpu_shares(None))
    assert (cpuacct / "cpuacct.usage").read_text().strip() == "0"
    working_set = v1_driver.working_set_bytes(second)
    assert working_set is not None and working_set <= POOL_MAX_CHARGED_BYTES
    assert v1_driver.pod_uids() == {"pod-b"}
    # And limits are exact again on a cgroup reused once more.
    await v1_driver.remove_pod("pod-b", containers=["work"])
    third = v1_driver.create(pod_uid="pod-c", container="main", limits=CgroupLimits(memory_limit_bytes=32 * MI))
    memory = third.dir_for("memory")
    assert memory is not None
    assert (memory / "memory.limit_in_bytes").read_text().strip() == str(32 * MI)
    await v1_driver.remove_pod("pod-c", containers=["main"])
    await v1_driver.remove_pod("pod-d", containers=["main"])  # never created: nothing to keep or remove
    assert len(_kept(v1_driver)) == 1  # removed with the base at teardown


async def test_v1_a_kept_cgroup_brings_its_oom_count_and_cpu_shares_along(
        v1_driver: CgroupV1, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a start would read back or write again is known for a new or kept cgroup: its OOM-kill count (the
    start's baseline; an OOM kill of the pod before counts, a new one has none) and the CPU shares it has."""
    from sluicegate.agent.cgroups import v1 as v1_module

    first = v1_driver.create(pod_uid="pod-a", container="main",
                             limits=CgroupLimits(cpu_request_millicores=1000, memory_limit_bytes=16 * MI))
    hog = subprocess.run(v1_driver.placement_argv(first, ["sh", "-c", 'x=xxxxxxxx; while :; do x="$x$x"; done']),
                         check=False, timeout=30)
    assert hog.returncode != 0
    kills = v1_driver.oom_kills(first)  # as the runtime reads it once the container's processes are gone
    assert kills >= 1
    await v1_driver.remove_pod("pod-a", containers=["main"])
    assert len(_kept(v1_driver)) == 1
    read: list[str] = []
    written: list[str] = []
    real_read, real_write = v1_module.read_keyed, v1_module.write_value

    def reading(path: str | Path, key: str) -> int | None:
        read.append(os.path.basename(path))
        return real_read(path, key)

    def writing(path: str | Path, value: str, *, operation: str) -> None:
        written.append(os.path.basename(path))
        real_write(path, value, operation=operation)

    monkeypatch.setattr(v1_module, "read_keyed", reading)
    monkeypatch.setattr(v1_module, "write_value", writing)
    second = v1_driver.create(pod_uid="pod-b", container="main", limits=CgroupLimits(cpu_request_millicores=1000))
    assert _kept(v1_driver) == []
    memory, cpu = second.dir_for("memory"), second.dir_for("cpu")
    assert memory is not None and cpu is not None
    assert (v1_driver.oom_kills(second), read, written) == (kills, [], [])
    assert (cpu / "cpu.shares").read_text().strip() == str(cpu_shares(1000))
    # Read from the file once something may have run in it.
    assert v1_driver.oom_kills(second) == kills and read == ["memory.oom_control"]
    fresh = v1_driver.create(pod_uid="pod-c", container="main", limits=CgroupLimits(cpu_request_millicores=500))
    assert (v1_driver.oom_kills(fresh), read, written) == (0, ["memory.oom_control"], ["cpu.shares"])
    await v1_driver.remove_pod("pod-b", containers=["main"])
    await v1_driver.remove_pod("pod-c", containers=["main"])


async def test_v1_removes_a_cgroup_left_with_page_cache(v1_driver: CgroupV1, tmp_path: Path) -> None:
    """A cgroup still charged with the pod's page cache is removed, not handed to the next pod."""
    handle = v1_driver.create(pod_uid="pod-a", container="main", limits=CgroupLimits())
    subprocess.run(v1_driver.placement_argv(handle, ["sh", "-c", 'head -c 4000000 /dev/zero > "$0"',
                                                     str(tmp_path / "cache")]), check=True)
    await v1_driver.remove_pod("pod-a", containers=["main"])
    assert [d.exists() for d in handle.dirs] == [False] * len(handle.dirs)
    assert _kept(v1_driver) == []


async def test_v1_keeps_no_cgroup_that_still_holds_a_process(v1_driver: CgroupV1) -> None:
    handle = v1_driver.create(pod_uid="pod-a", container="main", limits=CgroupLimits())
    proc = subprocess.Popen(v1_driver.placement_argv(handle, ["sleep", "1000"]), start_new_session=True)
    try:
        await eventually(lambda: proc.pid in v1_driver.pids(handle), what="placed")
        with pytest.raises(CgroupError):
            await v1_driver.remove_pod("pod-a", containers=["main"], attempts=2, interval=0.01)
        assert "pod-a" in v1_driver.pod_uids()
    finally:
        proc.kill()
        proc.wait()
    await eventually(lambda: not v1_driver.pids(handle), what="empty cgroup")
    await v1_driver.remove_pod("pod-a", containers=["main"])


async def test_v2_without_controllers_rejects_limits(v2_driver: CgroupV2) -> None:
    with pytest.raises(CgroupError) as caught:
        v2_driver.create(pod_uid="pod-a", container="main", limits=CgroupLimits(memory_limit_bytes=64 * MI))
    assert caught.value.operation == "limit"
    assert caught.value.detail == "a memory limit needs the memory controller, which is not delegated here"
    await v2_driver.remove_pod("pod-a")


def _cgroup_line(driver: CgroupDriver, text: str) -> str:
    """The line of /proc/<pid>/cgroup for the driver's first hierarchy."""
    wanted = "0::" if driver.kind == "v2" else "memory"
    for line in text.splitlines():
        _, controllers, path = line.split(":", 2)
        if (wanted == "0::" and line.startswith("0::")) or wanted in controllers.split(","):
            return path
    raise AssertionError(f"no {wanted} line in {text!r}")


async def test_process_is_in_its_cgroup_before_the_command_runs(cgroup_driver: CgroupDriver) -> None:
    handle = cgroup_driver.create(pod_uid="pod-a", container="main", limits=CgroupLimits())
    assert handle is not None
    # cat reads its *own* cgroup: it is the exec'd command, so what it sees
    # is where the user's process started life.
    argv = cgroup_driver.placement_argv(handle, ["cat", "/proc/self/cgroup"])
    result = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
    assert (result.returncode, result.stderr) == (0, "")
    mount = unified_mount() if cgroup_driver.kind == "v2" else DEFAULT_ROOT / "memory"
    assert mount is not None
    assert "/" + str(handle.dirs[0].relative_to(mount)) == _cgroup_line(cgroup_driver, result.stdout)
    await cgroup_driver.remove_pod("pod-a")


def test_placement_failure_never_runs_the_command(tmp_path: Path) -> None:
    driver = NoCgroups()
    assert driver.placement_argv(None, ["true"]) == ["true"]
    bogus = CgroupHandle(pod_uid="p", container="c", paths=(("memory", str(tmp_path / "missing")),))
    v1 = CgroupV1(bases=[("memory", tmp_path)], shell="/bin/sh")
    marker = tmp_path / "ran"
    result = subprocess.run(
        v1.placement_argv(bogus, ["touch", str(marker)]), capture_output=True, text=True, timeout=10, check=False
    )
    assert result.returncode == PLACEMENT_FAILED_EXIT
    assert f"sluicegate: could not enter cgroup {tmp_path / 'missing'}/cgroup.procs" in result.stderr
    assert not marker.exists()


async def test_pids_kill_and_remove(cgroup_driver: CgroupDriver) -> None:
    handle = cgroup_driver.create(pod_uid="pod-a", container="main", limits=CgroupLimits())
    argv = cgroup_driver.placement_argv(handle, ["sh", "-c", "sleep 1000 & sleep 1000 & wait"])
    proc = subprocess.Popen(argv, start_new_session=True)
    try:
        await eventually(lambda: len(cgroup_driver.pids(handle)) == 3, what="three processes in the cgroup")
        members = cgroup_driver.pids(handle)
        assert proc.pid in members
        # Removing a populated cgroup fails after its bounded retries.
        with pytest.raises(CgroupError) as caught:
            await cgroup_driver.remove_pod("pod-a", attempts=3, interval=0.01)
        assert caught.value.operation == "remove"
        cgroup_driver.kill(handle)
        assert proc.wait(timeout=10) == -signal.SIGKILL
        await eventually(lambda: all(gone(pid) for pid in members), what="every member killed")
        await eventually(lambda: not cgroup_driver.pids(handle), what="empty cgroup")
        await cgroup_driver.remove_pod("pod-a")
        assert [d.exists() for d in (handle.dirs if handle else ())] == [False] * len(handle.dirs if handle else ())
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


async def test_sweep_kills_and_removes_unrecorded_pods(cgroup_driver: CgroupDriver) -> None:
    kept = cgroup_driver.create(pod_uid="kept", container="main", limits=CgroupLimits())
    orphan = cgroup_driver.create(pod_uid="orphan", container="main", limits=CgroupLimits())
    proc = subprocess.Popen(cgroup_driver.placement_argv(orphan, ["sleep", "1000"]), start_new_session=True)
    try:
        await eventually(lambda: proc.pid in cgroup_driver.pids(orphan), what="orphan placed")
        assert cgroup_driver.pod_uids() == {"kept", "orphan"}
        swept = await cgroup_driver.sweep(keep=frozenset({"kept"}))
        assert swept == {"orphan"}
        assert proc.wait(timeout=10) == -signal.SIGKILL
        assert cgroup_driver.pod_uids() == {"kept"}
        assert kept is not None and all(d.exists() for d in kept.dirs)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        await cgroup_driver.remove_pod("kept")


@pytest.mark.parametrize(
    ("uid", "container"),
    [pytest.param("..", "main", id="dot-dot-uid"), pytest.param("pod", "a/b", id="slash-in-name")],
)
def test_unsafe_names_are_refused(v1_driver: CgroupV1, uid: str, container: str) -> None:
    with pytest.raises(CgroupError) as caught:
        v1_driver.create(pod_uid=uid, container=container, limits=CgroupLimits())
    assert caught.value.operation == "create"


async def test_v1_a_kept_cgroup_without_a_memory_limit_is_handed_on_unlimited(v1_driver: CgroupV1) -> None:
    """Parking a cgroup whose memory limit this driver never wrote skips the reset writes; the next pod
    finds it unlimited all the same, and a limit written for a pod is reset before its cgroup is kept."""
    first = v1_driver.create(pod_uid="pod-a", container="main", limits=CgroupLimits())
    await v1_driver.remove_pod("pod-a", containers=["main"])
    assert len(_kept(v1_driver)) == 1
    second = v1_driver.create(pod_uid="pod-b", container="main", limits=CgroupLimits(memory_limit_bytes=32 * MI))
    assert {d.parent.name for d in second.dirs} == {"pod-b"} and _kept(v1_driver) == []
    memory = second.dir_for("memory")
    assert memory is not None
    assert (memory / "memory.limit_in_bytes").read_text().strip() == str(32 * MI)
    await v1_driver.remove_pod("pod-b", containers=["main"])
    third = v1_driver.create(pod_uid="pod-c", container="main", limits=CgroupLimits())
    memory = third.dir_for("memory")
    assert memory is not None and int((memory / "memory.limit_in_bytes").read_text()) > 2**60  # unlimited
    await v1_driver.remove_pod("pod-c", containers=["main"])
    fourth = v1_driver.create(pod_uid="pod-d", container="main", limits=CgroupLimits())
    memory = fourth.dir_for("memory")
    assert memory is not None and int((memory / "memory.limit_in_bytes").read_text()) > 2**60
    assert first.dirs != fourth.dirs
    await v1_driver.remove_pod("pod-d", containers=["main"])
