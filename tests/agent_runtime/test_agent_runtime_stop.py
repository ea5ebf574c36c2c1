"""Stopping pods: SIGTERM to the whole group, SIGKILL after the grace, return only when all is gone."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from agent_runtime_support import RuntimeFactory, eventually, gone, has_pid, pod, read_pid, sh

from sluicegate.agent.cgroups import CgroupDriver, NoCgroups
from sluicegate.agent.monitor import read_stat
from sluicegate.agent.runtime import (
    ContainerState,
    PodPhase,
    PodRuntime,
    Reason,
)


def _session(pid: int | None) -> int | None:
    stat = None if pid is None else read_stat(pid)
    return None if stat is None else stat.sid


def _group(pid: int) -> int | None:
    stat = read_stat(pid)
    return None if stat is None else stat.pgid


def _terminations(runtime: PodRuntime, uid: str) -> list[tuple[str, int, Reason, str]]:
    status = runtime.status(uid)
    assert status is not None
    result = []
    for c in status.containers:
        assert c.state is ContainerState.TERMINATED and c.terminated is not None
        result.append((c.name, c.terminated.exit_code, c.terminated.reason, c.terminated.message))
    return result


async def test_stop_lets_a_term_handler_finish(
    driver: CgroupDriver, make_runtime: RuntimeFactory, workdir: Path
) -> None:
    runtime = make_runtime(driver)
    script = f"trap 'echo got TERM; exit 0' TERM; sleep 1000 & echo $! > {workdir}/child.pid; wait"
    spec = pod(sh("main", script))
    started = await runtime.run(spec)
    main_pid = started.container("main").pid
    assert main_pid is not None
    await eventually(lambda: has_pid(workdir / "child.pid"), what="the trap installed")
    loop = asyncio.get_running_loop()
    began = loop.time()
    final = await runtime.stop(spec.uid, grace_seconds=10)
    assert loop.time() - began < 5, "a process that handles SIGTERM must not wait out the grace"
    assert (final.phase, final.finished, final.reason) == (PodPhase.SUCCEEDED, True, "Killed")
    assert _terminations(runtime, spec.uid) == [("main", 0, Reason.COMPLETED, "")]
    assert runtime.log_path(spec.uid, "main").read_text() == "got TERM\n"
    assert [gone(main_pid), gone(read_pid(workdir / "child.pid"))] == [True, True]


async def test_stop_kills_what_ignores_term_after_the_grace(
    driver: CgroupDriver, make_runtime: RuntimeFactory, workdir: Path
) -> None:
    runtime = make_runtime(driver)
    # Ignored signals stay ignored in children: the whole tree shrugs off
    # SIGTERM, including a grandchild in the same process group.
    script = (
        "trap '' TERM; "
        f"sleep 1000 & echo $! > {workdir}/child.pid; "
        f"sh -c 'sleep 1000 & echo $! > {workdir}/grandchild.pid; wait' & "
        "wait"
    )
    spec = pod(sh("main", script), grace=1.0)
    started = await runtime.run(spec)
    main_pid = started.container("main").pid
    assert main_pid is not None
    await eventually(
        lambda: has_pid(workdir / "child.pid") and has_pid(workdir / "grandchild.pid"), what="the tree started"
    )
    family = [main_pid, read_pid(workdir / "child.pid"), read_pid(workdir / "grandchild.pid")]
    assert {_group(pid) for pid in family} == {main_pid}
    loop = asyncio.get_running_loop()
    began = loop.time()
    final = await runtime.stop(spec.uid)  # the pod's own grace: 1 s
    elapsed = loop.time() - began
    assert 1.0 <= elapsed < 6.0
    assert (final.phase, final.finished, final.reason) == (PodPhase.FAILED, True, "Killed")
    assert _terminations(runtime, spec.uid) == [("main", 137, Reason.KILLED, "stopped by the agent (Killed)")]
    assert [gone(pid) for pid in family] == [True, True, True]


async def test_stop_reaches_processes_that_left_the_group(
    cgroup_driver: CgroupDriver, make_runtime: RuntimeFactory, workdir: Path
) -> None:
    """Only the cgroup still holds a process that made itself a new session."""
    runtime = make_runtime(cgroup_driver)
    spec = pod(sh("main", f"setsid sleep 1000 & echo $! > {workdir}/escapee.pid; wait"))
    started = await runtime.run(spec)
    main_pid = started.container("main").pid
    await eventually(lambda: has_pid(workdir / "escapee.pid"), what="the escapee started")
    escapee = read_pid(workdir / "escapee.pid")
    await eventually(lambda: _session(escapee) == escapee, what="setsid done")
    assert _session(main_pid) == main_pid != escapee
    final = await runtime.stop(spec.uid, grace_seconds=5, reason=Reason.EVICTED, message="node memory pressure")
    assert (final.phase, final.reason, final.message) == (PodPhase.FAILED, "Evicted", "node memory pressure")
    assert _terminations(runtime, spec.uid) == [("main", 143, Reason.EVICTED, "node memory pressure")]
    assert gone(escapee)


async def test_stop_of_a_finished_pod_returns_its_status(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime(NoCgroups())
    done = pod(sh("main", "exit 0"))
    await runtime.run(done)
    finished = await runtime.wait(done.uid, timeout=10)
    assert await runtime.stop(done.uid) == finished
    with pytest.raises(ValueError):
        await runtime.stop(done.uid, reason=Reason.ERROR)


async def test_stop_grace_zero_kills_at_once(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime(NoCgroups())
    spec = pod(sh("main", "trap 'exit 0' TERM; sleep 1000 & wait"), grace=30)
    await runtime.run(spec)
    final = await runtime.stop(spec.uid, grace_seconds=0)
    assert _terminations(runtime, spec.uid) == [("main", 137, Reason.KILLED, "stopped by the agent (Killed)")]
    assert final.phase is PodPhase.FAILED


async def test_a_stop_right_after_the_start_kills_the_pod(driver: CgroupDriver, make_runtime: RuntimeFactory) -> None:
    # The placement wrapper puts the process in its cgroup just after the
    # spawn; a stop in between (a critical pod preempting a pod that has just
    # started) must still reach it, and not wait out the stop timeout.
    runtime = make_runtime(driver)
    for i in range(5):
        spec = pod(sh("main", "exec sleep 1000"), uid=f"quick-stop-{i}")
        started = await runtime.run(spec)
        main_pid = started.container("main").pid
        assert main_pid is not None
        loop = asyncio.get_running_loop()
        began = loop.time()
        final = await runtime.stop(spec.uid, grace_seconds=0)
        assert loop.time() - began < 5
        assert (final.finished, gone(main_pid)) == (True, True)
