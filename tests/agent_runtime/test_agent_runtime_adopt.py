"""A restarted agent re-adopts its pods from the checkpoint: by pid and start time, never twice."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from agent_runtime_support import MI, PYTHON, RuntimeFactory, eventually, gone, pod, py, release, sh, unique

from sluicegate.agent import checkpoint
from sluicegate.agent.cgroups import CgroupDriver, CgroupLimits, NoCgroups
from sluicegate.agent.monitor import read_stat
from sluicegate.agent.runtime import (
    EXIT_CODE_OOM,
    EXIT_CODE_UNKNOWN,
    AdoptedContainer,
    AdoptionReport,
    CheckpointNotAdoptedError,
    PodExistsError,
    PodPhase,
    PodRuntime,
    PodStatus,
    PodTaskCrashed,
    Reason,
    spec_to_json,
)

HOST = Path(__file__).with_name("agent_runtime_host.py")
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["v1", "none"])
def adopt_driver(request: pytest.FixtureRequest) -> CgroupDriver:
    name = {"v1": "v1_driver", "none": "no_cgroups"}[request.param]
    value: CgroupDriver = request.getfixturevalue(name)
    return value


@pytest.fixture
def bystander() -> Iterator[subprocess.Popen[bytes]]:
    """An unrelated process whose pid a forged checkpoint entry claims."""
    proc = subprocess.Popen(["sleep", "1000"], start_new_session=True)
    yield proc
    proc.kill()
    proc.wait(timeout=10)


def _ended(status: PodStatus) -> tuple[PodPhase, int, Reason, str]:
    main = status.containers[0]
    assert main.terminated is not None
    return status.phase, main.terminated.exit_code, main.terminated.reason, main.terminated.message


async def _run_host_and_kill_it(
    *, data_dir: Path, driver: CgroupDriver, specs: list[checkpoint.JSONObject], tmp_path: Path
) -> dict[str, dict[str, int]]:
    specs_path = tmp_path / "specs.json"
    specs_path.write_text(json.dumps(specs))
    base = driver.base_dirs[0].name if driver.base_dirs else "-"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with open(tmp_path / "host.stderr", "wb") as stderr:
        host = await asyncio.create_subprocess_exec(
            PYTHON,
            str(HOST),
            str(data_dir),
            driver.kind,
            base,
            str(specs_path),
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            env=env,
        )
    try:
        assert host.stdout is not None
        line = await asyncio.wait_for(host.stdout.readline(), timeout=30)
        assert line, (tmp_path / "host.stderr").read_text()
        pids: dict[str, dict[str, int]] = json.loads(line)
    finally:
        host.kill()  # SIGKILL: the agent gets no chance to clean up
        await host.wait()
    return pids


async def test_restarted_agent_adopts_running_pods(
    adopt_driver: CgroupDriver,
    make_runtime: RuntimeFactory,
    tmp_path: Path,
    bystander: subprocess.Popen[bytes],
) -> None:
    data_dir = tmp_path / "data"
    fifos = {name: tmp_path / f"{name}.fifo" for name in ("keep", "end", "oom")}
    for fifo in fifos.values():
        os.mkfifo(fifo)
    keeper = pod(sh("main", f"read line < {fifos['keep']}; exit 0"), uid=unique("keeper"))
    ender = pod(sh("main", f"read line < {fifos['end']}; exit 3"), uid=unique("ender"))
    stopper = pod(sh("main", "sleep 1000"), uid=unique("stopper"))
    specs = [keeper, ender, stopper]
    oomer = pod(
        py(
            "main",
            f"open({str(fifos['oom'])!r}).read()\nhog = [b'x' * (8 << 20) for _ in range(64)]\n",
            limits={"memory": 64 * MI},
        ),
        uid=unique("oomer"),
    )
    if adopt_driver.kind == "v1":
        specs.append(oomer)

    # 1. An agent starts the pods and dies by SIGKILL.
    pids = await _run_host_and_kill_it(
        data_dir=data_dir, driver=adopt_driver, specs=[spec_to_json(s) for s in specs], tmp_path=tmp_path
    )
    main_pids = {uid: containers["main"] for uid, containers in pids.items()}
    assert [gone(pid) for pid in main_pids.values()] == [False] * len(specs), "pods must outlive their agent"

    # 2. While no agent watches, two pods end: one exits, one is OOM-killed.
    await release(fifos["end"])
    if adopt_driver.kind == "v1":
        await release(fifos["oom"])
    ended = [main_pids[ender.uid]] + ([main_pids[oomer.uid]] if adopt_driver.kind == "v1" else [])
    await eventually(lambda: all(gone(pid) for pid in ended), what="ender and oomer gone")

    # 3. A forged entry claims a live, unrelated process with the wrong start time.
    path = checkpoint.path_for(data_dir)
    saved = checkpoint.load(path)
    assert saved is not None
    keeper_record = next(record for record in saved.pods if record.uid == keeper.uid)
    recycled = replace(keeper, uid=unique("recycled"))
    bystander_stat = read_stat(bystander.pid)
    assert bystander_stat is not None
    forged = replace(
        keeper_record,
        uid=recycled.uid,
        spec=spec_to_json(recycled),
        containers=(
            replace(
                keeper_record.containers[0],
                pid=bystander.pid,
                start_ticks=bystander_stat.start_ticks + 1,
                cgroup=(),
                log_path=str(data_dir / "pods" / recycled.uid / "main.log"),
            ),
        ),
    )
    checkpoint.save(path, replace(saved, pods=(*saved.pods, forged)))

    # 4. A new agent must adopt before it may start anything.
    runtime: PodRuntime = make_runtime(adopt_driver, data_dir=data_dir)
    with pytest.raises(CheckpointNotAdoptedError):
        await runtime.run(pod(sh("main", "true")))
    report = await runtime.adopt(checkpoint.load(path))
    assert sorted(report.adopted, key=lambda a: a.uid) == sorted(
        [AdoptedContainer(uid=uid, container="main", pid=main_pids[uid]) for uid in (keeper.uid, stopper.uid)],
        key=lambda a: a.uid,
    )
    lost = {entry.uid: (entry.pid, entry.why) for entry in report.lost}
    assert lost[recycled.uid] == (
        bystander.pid,
        f"pid {bystander.pid} now belongs to another process "
        f"(started at tick {bystander_stat.start_ticks}, recorded {bystander_stat.start_ticks + 1})",
    )
    assert set(lost) == {recycled.uid} | {uid for uid in (ender.uid, oomer.uid) if uid in main_pids}
    assert (report.finished, report.swept_cgroups) == ((), ())

    # 5. Pods that ended meanwhile are reported; a non-child's exit code is unknowable ...
    phase, code, reason, message = _ended(await runtime.wait(ender.uid, timeout=10))
    assert (phase, code, reason) == (PodPhase.FAILED, EXIT_CODE_UNKNOWN, Reason.UNKNOWN)
    assert message.startswith(
        "exit status unknown: the process ended or could not be identified while the agent was away (the process "
    )
    # ... but the cgroup's OOM counter still tells an OOM kill.
    if adopt_driver.kind == "v1":
        assert _ended(await runtime.wait(oomer.uid, timeout=10))[:3] == (
            PodPhase.FAILED,
            EXIT_CODE_OOM,
            Reason.OOM_KILLED,
        )
    # ... and the recycled pid's process is left strictly alone.
    assert _ended(await runtime.wait(recycled.uid, timeout=10))[:3] == (
        PodPhase.FAILED,
        EXIT_CODE_UNKNOWN,
        Reason.UNKNOWN,
    )
    assert not gone(bystander.pid)

    # 6. No recorded pod is ever started again.
    with pytest.raises(PodExistsError):
        await runtime.run(keeper)

    # 7. Adopted processes are still watched and can be stopped.
    await release(fifos["keep"])
    assert _ended(await runtime.wait(keeper.uid, timeout=10)) == (
        PodPhase.FAILED,
        EXIT_CODE_UNKNOWN,
        Reason.UNKNOWN,
        "exit status unknown: the process was adopted after an agent restart, "
        "and only a parent can read a process's exit status",
    )
    stopped = await runtime.stop(stopper.uid, grace_seconds=5)
    assert _ended(stopped)[:3] == (PodPhase.FAILED, EXIT_CODE_UNKNOWN, Reason.KILLED)
    assert [gone(pid) for pid in main_pids.values()] == [True] * len(specs)

    # 8. The checkpoint now records every pod as finished; forgetting drops it.
    after = checkpoint.load(path)
    assert after is not None
    assert sorted((record.uid, record.finished) for record in after.pods) == sorted(
        [(uid, True) for uid in main_pids] + [(recycled.uid, True)]
    )
    await runtime.forget(keeper.uid)
    after_forget = checkpoint.load(path)
    assert after_forget is not None and keeper.uid not in {record.uid for record in after_forget.pods}


async def test_close_leaves_pods_running_for_the_next_runtime(make_runtime: RuntimeFactory, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    fifo = tmp_path / "gate.fifo"
    os.mkfifo(fifo)
    first = make_runtime(NoCgroups(), data_dir=data_dir)
    done = pod(sh("main", "exit 0"), uid=unique("done"))
    running = pod(sh("main", f"read line < {fifo}"), uid=unique("running"))
    await first.run(done)
    await first.wait(done.uid, timeout=10)
    pid = (await first.run(running)).container("main").pid
    assert pid is not None
    await first.close()
    assert not gone(pid)

    second = make_runtime(NoCgroups(), data_dir=data_dir)
    report = await second.adopt(checkpoint.load(second.checkpoint_path))
    assert (report.adopted, report.lost, report.finished) == (
        (AdoptedContainer(uid=running.uid, container="main", pid=pid),),
        (),
        (done.uid,),
    )
    # Finished pods are reported again, as they were.
    reported = second.status(done.uid)
    assert reported is not None and (reported.phase, reported.finished) == (PodPhase.SUCCEEDED, True)
    await release(fifo)
    assert _ended(await second.wait(running.uid, timeout=10))[:3] == (
        PodPhase.FAILED,
        EXIT_CODE_UNKNOWN,
        Reason.UNKNOWN,
    )


async def test_a_start_cut_short_by_a_crash_is_lost_and_its_cgroup_emptied(
    v1_driver: CgroupDriver, make_runtime: RuntimeFactory, tmp_path: Path
) -> None:
    """The agent recorded "starting", spawned, and died before recording the pid."""
    data_dir = tmp_path / "data"
    first = make_runtime(v1_driver, data_dir=data_dir)
    spec = pod(sh("main", "sleep 1000"), uid=unique("cut"))
    pid = (await first.run(spec)).container("main").pid
    assert pid is not None
    await eventually(lambda: f"/{spec.uid}/main" in Path(f"/proc/{pid}/cgroup").read_text(), what="placement")
    await first.close()
    path = checkpoint.path_for(data_dir)
    saved = checkpoint.load(path)
    assert saved is not None
    record = saved.pods[0]
    cut = replace(
        record,
        containers=(
            replace(
                record.containers[0],
                state="Waiting",
                pid=None,
                start_ticks=None,
                starting=True,
                waiting_reason="ContainerCreating",
            ),
        ),
    )
    checkpoint.save(path, replace(saved, pods=(cut,)))

    second = make_runtime(v1_driver, data_dir=data_dir)
    report = await second.adopt(checkpoint.load(path))
    assert (report.adopted, [(entry.uid, entry.pid, entry.why) for entry in report.lost]) == (
        (),
        [(spec.uid, None, "start was in progress")],
    )
    final = await second.wait(spec.uid, timeout=10)
    assert _ended(final) == (
        PodPhase.FAILED,
        EXIT_CODE_UNKNOWN,
        Reason.UNKNOWN,
        "the agent stopped while starting this container; it may have run, its result is unknown",
    )
    await eventually(lambda: gone(pid), what="the unidentified process killed through its cgroup")


async def test_orphan_cgroups_are_swept_at_adoption(
    v1_driver: CgroupDriver, make_runtime: RuntimeFactory, tmp_path: Path
) -> None:
    orphan = v1_driver.create(pod_uid="orphan", container="main", limits=CgroupLimits())
    proc = subprocess.Popen(v1_driver.placement_argv(orphan, ["sleep", "1000"]), start_new_session=True)
    try:
        await eventually(lambda: proc.pid in v1_driver.pids(orphan), what="orphan placed")
        runtime = make_runtime(v1_driver, data_dir=tmp_path / "data")
        report = await runtime.adopt(None)
        assert report == AdoptionReport(adopted=(), lost=(), finished=(), swept_cgroups=("orphan",))
        assert proc.wait(timeout=10) == -9
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


async def test_an_agent_killed_right_after_a_start_is_succeeded_by_one_that_adopts_it(
    adopt_driver: CgroupDriver, make_runtime: RuntimeFactory, tmp_path: Path
) -> None:
    """Checkpoint writes are batched, but run() returns only once the pid is written."""
    data_dir = tmp_path / "data"
    fifo = tmp_path / "gate.fifo"
    os.mkfifo(fifo)
    spec = pod(sh("main", f"read line < {fifo}; exit 0"), uid=unique("quick-kill"))
    # The host prints the pids as soon as run() returns and is killed on reading them.
    pids = await _run_host_and_kill_it(
        data_dir=data_dir, driver=adopt_driver, specs=[spec_to_json(spec)], tmp_path=tmp_path
    )
    pid = pids[spec.uid]["main"]
    saved = checkpoint.load(checkpoint.path_for(data_dir))
    assert saved is not None
    record = saved.pods[0].containers[0]
    assert (record.state, record.pid, record.starting) == ("Running", pid, False)

    runtime = make_runtime(adopt_driver, data_dir=data_dir)
    report = await runtime.adopt(saved)
    assert (report.adopted, report.lost) == ((AdoptedContainer(uid=spec.uid, container="main", pid=pid),), ())
    await release(fifo)
    assert _ended(await runtime.wait(spec.uid, timeout=10))[:3] == (PodPhase.FAILED, EXIT_CODE_UNKNOWN, Reason.UNKNOWN)


async def test_every_published_status_is_already_in_the_checkpoint(
    adopt_driver: CgroupDriver, make_runtime: RuntimeFactory
) -> None:
    """Statuses wait for the batched write that covers them: the controller never knows more than the file."""
    runtime = make_runtime(adopt_driver)
    specs = [pod(sh("main", "exit 0"), uid=unique("batched")) for _ in range(4)]
    await asyncio.gather(*(runtime.run(spec) for spec in specs))
    behind: list[str] = []
    finished: set[str] = set()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 20
    while finished != {spec.uid for spec in specs}:
        status = await asyncio.wait_for(runtime.events.get(), timeout=max(0.0, deadline - loop.time()))
        saved = checkpoint.load(runtime.checkpoint_path)
        assert saved is not None
        record = next(record for record in saved.pods if record.uid == status.uid)
        published = status.container("main")
        kept = record.containers[0]
        if status.finished and not record.finished:
            behind.append(f"{status.uid}: published finished, checkpoint not")
        if published.pid is not None and kept.pid != published.pid:
            behind.append(f"{status.uid}: published pid {published.pid}, checkpoint {kept.pid}")
        if status.seq > saved.seq:
            behind.append(f"{status.uid}: published seq {status.seq}, checkpoint seq {saved.seq}")
        if status.finished:
            finished.add(status.uid)
    assert behind == []


async def test_a_checkpoint_that_cannot_be_written_stops_the_runtime_and_starts_nothing(
    make_runtime: RuntimeFactory, tmp_path: Path
) -> None:
    runtime = make_runtime(NoCgroups())
    first = pod(sh("main", "exit 0"), uid=unique("before"))
    await runtime.run(first)
    await runtime.wait(first.uid, timeout=10)
    # The next write goes to the slot the checkpoint does not name: put a directory there.
    path = runtime.checkpoint_path
    free = next(
        slot
        for slot in (path.with_name(f".{path.name}.slot-a"), path.with_name(f".{path.name}.slot-b"))
        if not (slot.exists() and os.path.samefile(slot, path))
    )
    if free.exists():
        free.unlink()
    free.mkdir()
    marker = tmp_path / "ran"
    with pytest.raises(checkpoint.CheckpointError):
        await runtime.run(pod(sh("main", f"touch {marker}"), uid=unique("after")))
    with pytest.raises(PodTaskCrashed) as crashed:
        await asyncio.wait_for(runtime.watch(), timeout=10)
    assert (crashed.value.task, isinstance(crashed.value.error, checkpoint.CheckpointError), marker.exists()) == (
        "checkpoint",
        True,
        False,
    )
    free.rmdir()
