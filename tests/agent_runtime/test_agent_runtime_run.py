"""Running pods as real processes: exit codes, logs, phases, restarts."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest
from agent_runtime_support import (
    FakeClock,
    RuntimeFactory,
    eventually,
    gone,
    has_pid,
    pod,
    py,
    read_pid,
    release,
    sh,
)

from sluicegate.agent import checkpoint
from sluicegate.agent.cgroups import CgroupDriver, NoCgroups
from sluicegate.agent.runtime import (
    EXIT_CODE_START_ERROR,
    Container,
    ContainerState,
    ContainerStatus,
    Pod,
    PodExistsError,
    PodPhase,
    PodSpecError,
    PodStatus,
    Reason,
    RestartPolicy,
    Termination,
    WaitingReason,
    pod_phase,
    restart_delay,
)


def outcome(status: PodStatus) -> tuple[object, ...]:
    """Everything about a finished pod except timestamps, pids and paths."""
    return (
        status.phase,
        status.finished,
        status.reason,
        tuple(
            (
                c.name,
                c.state,
                c.restart_count,
                None if c.terminated is None else (c.terminated.exit_code, c.terminated.reason, c.terminated.message),
            )
            for c in status.containers
        ),
    )


@pytest.mark.parametrize(
    ("script", "phase", "exit_code", "reason", "message"),
    [
        pytest.param("echo out; echo err >&2; exit 0", PodPhase.SUCCEEDED, 0, Reason.COMPLETED, "", id="success"),
        pytest.param(
            "echo out; echo err >&2; exit 3", PodPhase.FAILED, 3, Reason.ERROR, "exited with code 3", id="failure"
        ),
        pytest.param(
            "echo out; echo err >&2; kill -TERM $$",
            PodPhase.FAILED,
            143,
            Reason.ERROR,
            "killed by SIGTERM",
            id="signal",
        ),
    ],
)
async def test_exit_code_and_log(
    driver: CgroupDriver,
    make_runtime: RuntimeFactory,
    script: str,
    phase: PodPhase,
    exit_code: int,
    reason: Reason,
    message: str,
) -> None:
    runtime = make_runtime(driver)
    spec = pod(sh("main", script))
    started = await runtime.run(spec)
    assert (started.phase, started.container("main").state) == (PodPhase.RUNNING, ContainerState.RUNNING)
    final = await runtime.wait(spec.uid, timeout=10)
    assert outcome(final) == (
        phase,
        True,
        None,
        (("main", ContainerState.TERMINATED, 0, (exit_code, reason, message)),),
    )
    log_path = runtime.log_path(spec.uid, "main")
    assert final.container("main").log_path == str(log_path)
    assert log_path == runtime.checkpoint_path.parent / "pods" / spec.uid / "main.log"
    assert log_path.read_text() == "out\nerr\n"


async def test_environment_and_working_directory(
    make_runtime: RuntimeFactory, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_SECRET", "must-not-leak")
    runtime = make_runtime(NoCgroups())
    spec = pod(
        sh(
            "main",
            'echo "$GREETING $WHO"; echo "secret=${AGENT_SECRET:-unset}"; pwd',
            env=(("GREETING", "hello"), ("WHO", "nobody"), ("WHO", "world")),
            working_dir=str(workdir),
        )
    )
    await runtime.run(spec)
    final = await runtime.wait(spec.uid, timeout=10)
    assert final.phase is PodPhase.SUCCEEDED
    assert runtime.log_path(spec.uid, "main").read_text() == f"hello world\nsecret=unset\n{workdir}\n"


@pytest.mark.parametrize(
    ("container", "message"),
    [
        pytest.param(
            Container(name="main", command=("no-such-command-here",)),
            "command 'no-such-command-here' was not found in PATH=",
            id="missing-command",
        ),
        pytest.param(
            Container(name="main", command=("true",), working_dir="/no/such/dir"),
            "working directory '/no/such/dir' does not exist",
            id="missing-working-dir",
        ),
    ],
)
async def test_start_error(
    driver: CgroupDriver, make_runtime: RuntimeFactory, container: Container, message: str
) -> None:
    runtime = make_runtime(driver)
    spec = pod(container)
    await runtime.run(spec)
    final = await runtime.wait(spec.uid, timeout=10)
    terminated = final.container("main").terminated
    assert terminated is not None
    assert (final.phase, terminated.exit_code, terminated.reason) == (
        PodPhase.FAILED,
        EXIT_CODE_START_ERROR,
        Reason.START_ERROR,
    )
    assert terminated.message.startswith(message)
    log_text = runtime.log_path(spec.uid, "main").read_text()
    assert log_text == f"sluicegate: could not start the container: {terminated.message}\n"


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        pytest.param(Pod(uid="../x", containers=(sh("a", "true"),)), "uid", id="unsafe-uid"),
        pytest.param(Pod(uid="p", containers=()), "containers", id="no-containers"),
        pytest.param(Pod(uid="p", containers=(sh("A_B", "true"),)), "containers[0].name", id="bad-name"),
        pytest.param(Pod(uid="p", containers=(sh("a", "true"), sh("a", "true"))), "containers[1].name", id="dup"),
        pytest.param(
            Pod(uid="p", containers=(Container(name="a", command=()),)),
            "containers[0].command",
            id="no-command",
        ),
        pytest.param(
            Pod(uid="p", containers=(sh("a", "true", limits={"memory": -1}),)),
            "containers[0].resources.limits.memory",
            id="negative-limit",
        ),
        pytest.param(
            Pod(uid="p", containers=(sh("a", "true", env=(("A=B", "x"),)),)), "containers[0].env[0].name", id="env"
        ),
        pytest.param(
            Pod(uid="p", containers=(sh("a", "true"),), termination_grace_seconds=-1),
            "terminationGracePeriodSeconds",
            id="negative-grace",
        ),
    ],
)
async def test_invalid_spec_is_refused(make_runtime: RuntimeFactory, spec: Pod, field: str) -> None:
    runtime = make_runtime(NoCgroups())
    with pytest.raises(PodSpecError) as caught:
        await runtime.run(spec)
    assert caught.value.field == field
    assert runtime.pods() == ()


async def test_a_uid_runs_once(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime(NoCgroups())
    spec = pod(sh("main", "exit 0"))
    await runtime.run(spec)
    await runtime.wait(spec.uid, timeout=10)
    with pytest.raises(PodExistsError) as caught:
        await runtime.run(spec)
    assert (caught.value.uid, caught.value.phase) == (spec.uid, PodPhase.SUCCEEDED)


async def test_starts_of_one_turn_share_one_checkpoint_write_before_any_spawn(
    make_runtime: RuntimeFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pods started together are all recorded "starting" by one write, which precedes every spawn."""
    runtime = make_runtime(NoCgroups())
    await runtime.adopt(None)
    specs = [pod(sh("main", "exit 0")) for _ in range(5)]
    writes: list[dict[str, bool]] = []
    original = checkpoint.CheckpointFile.write

    def recording(self: checkpoint.CheckpointFile, **kwargs: Any) -> None:
        original(self, **kwargs)
        loaded = checkpoint.load(self.path)
        assert loaded is not None
        writes.append({p.uid: p.containers[0].starting for p in loaded.pods})

    monkeypatch.setattr(checkpoint.CheckpointFile, "write", recording)
    statuses = await asyncio.gather(*(runtime.run(spec) for spec in specs))
    assert all(s.container("main").pid for s in statuses)
    # The first write holds every pod, each still "starting" (no pid yet).
    assert writes[0] == {spec.uid: True for spec in specs}
    # run() returned only once the pids were written.
    assert writes[-1] == {spec.uid: False for spec in specs}


async def test_a_pod_stopped_while_its_start_is_written_is_stopped(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime(NoCgroups())
    await runtime.adopt(None)
    spec = pod(sh("main", "sleep 1000"))
    started = asyncio.ensure_future(runtime.run(spec))
    await asyncio.sleep(0)  # run() now waits for the write of its start
    assert not started.done()
    stopped = await runtime.stop(spec.uid, grace_seconds=5)
    await started
    assert stopped.finished
    assert stopped.container("main").terminated is not None
    assert stopped.container("main").terminated.reason is Reason.KILLED


async def test_events_are_whole_ordered_snapshots(make_runtime: RuntimeFactory) -> None:
    runtime = make_runtime(NoCgroups())
    spec = pod(sh("main", "exit 0"))
    await runtime.run(spec)
    await runtime.wait(spec.uid, timeout=10)
    events: list[PodStatus] = []
    while not runtime.events.empty():
        events.append(runtime.events.get_nowait())
    assert [(e.phase, e.finished) for e in events] == [
        (PodPhase.PENDING, False),
        (PodPhase.RUNNING, False),
        (PodPhase.SUCCEEDED, True),
    ]
    assert [e.seq for e in events] == sorted({e.seq for e in events})
    assert events[0].container("main").waiting_reason is WaitingReason.CONTAINER_CREATING


@pytest.mark.parametrize(
    ("policy", "scripts", "phase"),
    [
        pytest.param(RestartPolicy.NEVER, ("exit 0", "exit 0"), PodPhase.SUCCEEDED, id="never-all-succeed"),
        pytest.param(RestartPolicy.NEVER, ("exit 0", "exit 1"), PodPhase.FAILED, id="never-one-fails"),
        pytest.param(RestartPolicy.ON_FAILURE, ("exit 0", "exit 0"), PodPhase.SUCCEEDED, id="onfailure-all-succeed"),
    ],
)
async def test_multi_container_phase(
    driver: CgroupDriver, make_runtime: RuntimeFactory, policy: RestartPolicy, scripts: tuple[str, str], phase: PodPhase
) -> None:
    runtime = make_runtime(driver)
    spec = pod(sh("first", scripts[0]), sh("second", scripts[1]), policy=policy)
    await runtime.run(spec)
    final = await runtime.wait(spec.uid, timeout=10)
    assert final.phase is phase
    assert [c.state for c in final.containers] == [ContainerState.TERMINATED] * 2


async def test_pod_runs_while_one_container_still_runs(
    driver: CgroupDriver, make_runtime: RuntimeFactory, workdir: Path
) -> None:
    fifo = workdir / "gate"
    os.mkfifo(fifo)
    runtime = make_runtime(driver)
    spec = pod(sh("quick", "exit 1"), sh("slow", f"read line < {fifo}; exit 0"))
    await runtime.run(spec)
    status = await runtime.wait_for(
        spec.uid, lambda s: s.container("quick").state is ContainerState.TERMINATED, timeout=10
    )
    assert (status.phase, status.container("slow").state) == (PodPhase.RUNNING, ContainerState.RUNNING)
    await release(fifo)
    final = await runtime.wait(spec.uid, timeout=10)
    assert outcome(final) == (
        PodPhase.FAILED,
        True,
        None,
        (
            ("quick", ContainerState.TERMINATED, 0, (1, Reason.ERROR, "exited with code 1")),
            ("slow", ContainerState.TERMINATED, 0, (0, Reason.COMPLETED, "")),
        ),
    )


async def test_container_leftovers_are_killed_when_main_exits(
    driver: CgroupDriver, make_runtime: RuntimeFactory, workdir: Path
) -> None:
    runtime = make_runtime(driver)
    spec = pod(sh("main", f"sleep 1000 & echo $! > {workdir}/bg.pid; exit 0"))
    await runtime.run(spec)
    final = await runtime.wait(spec.uid, timeout=10)
    assert final.phase is PodPhase.SUCCEEDED
    assert gone(read_pid(workdir / "bg.pid"))


async def test_on_failure_restarts_with_backoff(
    driver: CgroupDriver, make_runtime: RuntimeFactory, workdir: Path
) -> None:
    clock = FakeClock()
    runtime = make_runtime(driver, clock=clock)
    counter = workdir / "count"
    script = f'n=$(( $(cat {counter} 2>/dev/null || echo 0) + 1 )); echo $n > {counter}; echo "run $n"; [ $n -ge 3 ]'
    spec = pod(sh("main", script), policy=RestartPolicy.ON_FAILURE)
    await runtime.run(spec)
    final = await runtime.wait(spec.uid, timeout=20)
    # The kubelet's defaults (10 s doubling), skipped by the fake clock.
    assert clock.sleeps == [10.0, 20.0]
    main = final.container("main")
    assert main.terminated is not None and main.last_termination is not None
    # Like the kubelet's lastState: the run before the current one.
    assert (final.phase, main.restart_count, main.terminated.reason, main.last_termination.exit_code) == (
        PodPhase.SUCCEEDED,
        2,
        Reason.COMPLETED,
        1,
    )
    assert runtime.log_path(spec.uid, "main").read_text() == "run 1\nrun 2\nrun 3\n"


async def test_always_restarts_after_success_until_stopped(make_runtime: RuntimeFactory) -> None:
    # Three back-offs pass at once; the fourth blocks, so the stop lands in
    # a known place: the container is waiting to run a fifth time.
    clock = FakeClock(free_sleeps=3)
    runtime = make_runtime(NoCgroups(), clock=clock)
    spec = pod(sh("main", "echo ran"), policy=RestartPolicy.ALWAYS)
    await runtime.run(spec)
    waiting = await runtime.wait_for(
        spec.uid,
        lambda s: s.container("main").restart_count == 3 and s.container("main").state is ContainerState.WAITING,
        timeout=20,
    )
    await eventually(lambda: len(clock.sleeps) == 4, what="the fourth back-off to begin")
    main = waiting.container("main")
    assert (waiting.phase, main.state, main.waiting_reason, main.restart_count) == (
        PodPhase.RUNNING,
        ContainerState.WAITING,
        WaitingReason.CRASH_LOOP_BACK_OFF,
        3,
    )
    final = await runtime.stop(spec.uid, grace_seconds=5)
    assert clock.sleeps == [10.0, 20.0, 40.0, 80.0]
    assert outcome(final) == (
        PodPhase.SUCCEEDED,
        True,
        "Killed",
        (("main", ContainerState.TERMINATED, 3, (0, Reason.COMPLETED, "")),),
    )
    assert runtime.log_path(spec.uid, "main").read_text() == "ran\n" * 4


async def test_usage_reads_the_pods_processes(
    driver: CgroupDriver, make_runtime: RuntimeFactory, workdir: Path
) -> None:
    runtime = make_runtime(driver)
    code = (
        "import time, pathlib\n"
        f"block = b'x' * (48 << 20)\n"
        f"pathlib.Path({str(workdir / 'ready.pid')!r}).write_text(str(__import__('os').getpid()))\n"
        "time.sleep(1000)\n"
    )
    spec = pod(py("main", code))
    await runtime.run(spec)
    await eventually(lambda: has_pid(workdir / "ready.pid"), what="allocation done")
    reading = runtime.usage(spec.uid)
    assert reading.pids == (read_pid(workdir / "ready.pid"),)
    assert reading.rss_bytes >= 48 << 20
    assert reading.working_set_bytes >= 48 << 20
    assert reading.disk_bytes >= 0
    await runtime.stop(spec.uid, grace_seconds=0)


# --- pure rules ----------------------------------------------------------------


def _c(state: ContainerState, *, exit_code: int | None = None, ran_before: bool = False) -> ContainerStatus:
    term = None if exit_code is None else Termination(exit_code, Reason.ERROR, "", 0.0, 1.0)
    last = Termination(1, Reason.ERROR, "", 0.0, 1.0) if ran_before else None
    return ContainerStatus(name="c", state=state, restart_count=0, log_path="", terminated=term, last_termination=last)


RUNNING = _c(ContainerState.RUNNING)
CREATING = _c(ContainerState.WAITING)
BACKOFF = _c(ContainerState.WAITING, ran_before=True)
DONE_OK = _c(ContainerState.TERMINATED, exit_code=0)
DONE_FAIL = _c(ContainerState.TERMINATED, exit_code=1)


@pytest.mark.parametrize(
    ("containers", "policy", "terminal", "phase"),
    [
        pytest.param([CREATING, RUNNING], RestartPolicy.NEVER, False, PodPhase.PENDING, id="one-not-started"),
        pytest.param([RUNNING, DONE_FAIL], RestartPolicy.NEVER, False, PodPhase.RUNNING, id="never-one-running"),
        pytest.param([DONE_OK, DONE_FAIL], RestartPolicy.NEVER, False, PodPhase.FAILED, id="never-one-failed"),
        pytest.param([DONE_OK, DONE_OK], RestartPolicy.NEVER, False, PodPhase.SUCCEEDED, id="never-all-ok"),
        pytest.param([DONE_OK, BACKOFF], RestartPolicy.ON_FAILURE, False, PodPhase.RUNNING, id="onfailure-backoff"),
        pytest.param([DONE_OK, DONE_OK], RestartPolicy.ON_FAILURE, False, PodPhase.SUCCEEDED, id="onfailure-all-ok"),
        pytest.param([DONE_OK, DONE_OK], RestartPolicy.ALWAYS, False, PodPhase.RUNNING, id="always-restarting"),
        pytest.param([DONE_OK, DONE_OK], RestartPolicy.ALWAYS, True, PodPhase.SUCCEEDED, id="always-terminal-ok"),
        pytest.param([DONE_OK, DONE_FAIL], RestartPolicy.ON_FAILURE, True, PodPhase.FAILED, id="terminal-failed"),
        pytest.param([BACKOFF], RestartPolicy.ALWAYS, False, PodPhase.RUNNING, id="crash-loop"),
    ],
)
def test_pod_phase(containers: list[ContainerStatus], policy: RestartPolicy, terminal: bool, phase: PodPhase) -> None:
    assert pod_phase(containers, restart_policy=policy, terminal=terminal) is phase


@pytest.mark.parametrize(
    ("index", "delay"),
    [
        pytest.param(0, 10.0, id="first"),
        pytest.param(1, 20.0, id="second"),
        pytest.param(4, 160.0, id="fifth"),
        pytest.param(5, 300.0, id="capped"),
        pytest.param(500, 300.0, id="far-beyond"),
    ],
)
def test_restart_delay(index: int, delay: float) -> None:
    assert restart_delay(index, base=10.0, cap=300.0) == delay


async def test_a_double_forked_child_in_its_own_session_is_killed_through_the_cgroup(
    cgroup_driver: CgroupDriver, make_runtime: RuntimeFactory, workdir: Path
) -> None:
    # The grandchild leaves the container's session and process group, and its
    # parent exits, so only the cgroup still knows it belongs to the pod.
    runtime = make_runtime(cgroup_driver)
    escape = f"sleep 1000 >/dev/null 2>&1 & echo $! $$ > {workdir}/bg.tmp; mv {workdir}/bg.tmp {workdir}/bg"
    spec = pod(sh("main", f"setsid sh -c '{escape}'; exit 0"))
    started = await runtime.run(spec)
    final = await runtime.wait(spec.uid, timeout=10)
    escaped, its_group = (int(field) for field in (workdir / "bg").read_text().split())
    assert (final.phase, its_group != started.container("main").pid, gone(escaped)) == (
        PodPhase.SUCCEEDED,
        True,
        True,
    )
