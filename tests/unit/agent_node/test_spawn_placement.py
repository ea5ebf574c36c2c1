"""Starting commands inside their cgroups: v1 starts them from a spawner process placed in them, without a shell.

Real cgroups (skipped where v1 is not writable), nested under the test
process's own cgroup in each hierarchy, each test with its own base.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import subprocess
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path

import pytest

from sluicegate.agent import checkpoint as ckpt
from sluicegate.agent.cgroups import (
    DEFAULT_ROOT,
    PARENT_SELF,
    CgroupHandle,
    CgroupLimits,
    CgroupUnavailable,
    CgroupV1,
    NoCgroups,
)
from sluicegate.agent.cgroups.tree import home_procs
from sluicegate.agent.runtime import (
    EXIT_CODE_START_ERROR,
    Container,
    ContainerState,
    Pod,
    PodPhase,
    PodRuntime,
    PodStatus,
    Reason,
    RestartPolicy,
    SystemClock,
    spawning,
)
from sluicegate.agent.runtime.process import Exit
from sluicegate.agent.runtime.spawning import PlacementFailure, Spawners

from .conftest import FAST
from .test_node_meta import wait_until

WAIT = 10.0


def _unique(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(4)}"


@pytest.fixture
async def v1() -> AsyncIterator[CgroupV1]:
    try:
        driver = CgroupV1.setup(root=DEFAULT_ROOT, parent=PARENT_SELF, base=_unique("sluicegate-test"))
    except CgroupUnavailable as exc:
        pytest.skip(f"cgroup v1 is not writable here: {exc}")
    if driver.homes is None:
        pytest.skip("the agent's own cgroups are not writable here; the shell wrapper is used")
    bases = list(driver.base_dirs)
    yield driver
    await driver.sweep(keep=frozenset())
    await driver.remove_base()
    assert [str(base) for base in bases if base.exists()] == []


def _cgroup_lines(text: str) -> dict[str, str]:
    """controller -> path, from /proc/<pid>/cgroup (v1 lines only)."""
    paths: dict[str, str] = {}
    for line in text.splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(","):
            if controller:
                paths[controller] = path
    return paths


def _relative(handle: CgroupHandle, controller: str) -> str:
    """The leaf's path as /proc/<pid>/cgroup shows it: relative to the hierarchy's mount."""
    directory = handle.dir_for(controller)
    assert directory is not None
    return "/" + str(directory.relative_to(DEFAULT_ROOT / controller))


def _thread_cgroups(tid: int) -> dict[str, str]:
    return _cgroup_lines(Path(f"/proc/{os.getpid()}/task/{tid}/cgroup").read_text())


def _process_cgroups(pid: int) -> dict[str, str]:
    return _cgroup_lines(Path(f"/proc/{pid}/cgroup").read_text())


def _start(stdout: int) -> Callable[[list[str]], subprocess.Popen[bytes]]:
    def start(argv: list[str]) -> subprocess.Popen[bytes]:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=stdout, start_new_session=True)

    return start


async def _spawn_cat(v1: CgroupV1, handle: CgroupHandle, tmp_path: Path) -> tuple[str, dict[str, str], list[str]]:
    """Start ``cat /proc/self/cgroup`` in ``handle`` as the runtime would: how it started, the cgroups it saw,
    and the handle's controllers."""
    out = tmp_path / "out"
    places = v1.spawn_places(handle)
    with open(out, "wb") as sink:
        if places is None:
            proc = v1.spawn(handle, ["cat", "/proc/self/cgroup"], _start(sink.fileno()))
            assert proc.wait(timeout=WAIT) == 0
            how = str(list(proc.args)[0])  # type: ignore[arg-type]
        else:
            spawners = Spawners()
            try:
                child = spawners.spawn(key=None, candidates=("/bin/cat",), argv=("cat", "/proc/self/cgroup"),
                                       env={}, cwd="/", places=places, log_fd=sink.fileno())
                exit = await asyncio.wait_for(child.exit(), WAIT)
                assert exit is not None and exit.code == 0
                child.release()
            finally:
                spawners.close()
            how = "spawner"
    return how, _cgroup_lines(out.read_text()), [name for name, _ in handle.paths]


async def test_v1_command_starts_in_its_cgroups_as_itself(v1: CgroupV1, tmp_path: Path) -> None:
    handle = v1.create(pod_uid="pod-a", container="main", limits=CgroupLimits(cpu_request_millicores=100))
    before = _thread_cgroups(threading.get_native_id())
    places = v1.spawn_places(handle)
    assert places is not None
    spawners = Spawners()
    out = tmp_path / "out"
    try:
        with open(out, "wb") as sink:
            child = spawners.spawn(key=None, candidates=("/bin/cat",), argv=("cat", "/proc/self/cgroup"), env={},
                                   cwd="/", places=places, log_fd=sink.fileno())
        (spawner,) = spawners.pids()
        exit = await asyncio.wait_for(child.exit(), WAIT)
        # No shell ran first: the child is the command itself, already in every leaf.
        controllers = [name for name, _ in handle.paths]
        seen = _cgroup_lines(out.read_text())
        assert (exit, {c: seen[c] for c in controllers}) == (
            Exit(code=0, signal=None),
            {c: _relative(handle, c) for c in controllers},
        )
        # The spawner went home, and this process never moved.
        assert ({c: _process_cgroups(spawner)[c] for c in controllers},
                _thread_cgroups(threading.get_native_id())) == ({c: before[c] for c in controllers}, before)
        child.release()
    finally:
        spawners.close()


async def test_v1_starts_in_turn_each_start_in_their_own_cgroups_and_the_way_home_stays_open(
        v1: CgroupV1, tmp_path: Path) -> None:
    """One spawner, two pods one after the other: each command in its pod's leaves, the spawner home after each,
    holding each of the agent's cgroup.procs files open once (not opened again per start)."""
    handles = [v1.create(pod_uid=uid, container="main", limits=CgroupLimits(cpu_request_millicores=100))
               for uid in ("pod-a", "pod-b")]
    controllers = [name for name, _ in handles[0].paths]
    before = _thread_cgroups(threading.get_native_id())
    homes = v1.homes
    assert homes is not None
    spawners = Spawners()
    try:
        for i, handle in enumerate(handles):
            places = v1.spawn_places(handle)
            assert places is not None
            out = tmp_path / f"out-{i}"
            with open(out, "wb") as sink:
                child = spawners.spawn(key=None, candidates=("/bin/cat",), argv=("cat", "/proc/self/cgroup"),
                                       env={}, cwd="/", places=places, log_fd=sink.fileno())
            (spawner,) = spawners.pids()
            exit = await asyncio.wait_for(child.exit(), WAIT)
            seen = _cgroup_lines(out.read_text())
            assert (exit, {c: seen[c] for c in controllers}) == (
                Exit(code=0, signal=None), {c: _relative(handle, c) for c in controllers})
            assert {c: _process_cgroups(spawner)[c] for c in controllers} == {c: before[c] for c in controllers}
            child.release()
            held = sorted(link for fd in os.listdir(f"/proc/{spawner}/fd")
                          if (link := os.readlink(f"/proc/{spawner}/fd/{fd}")).endswith("/cgroup.procs"))
            assert held == sorted({os.path.realpath(home) for home in homes.values()})
    finally:
        spawners.close()


@pytest.mark.parametrize(
    ("cpu_limit_millicores", "how"),
    [
        pytest.param(None, "spawner", id="no-cpu-limit-spawner"),
        pytest.param(1000, "spawner", id="one-cpu-spawner"),
        pytest.param(50, "/bin/sh", id="tiny-quota-wrapper"),
    ],
)
async def test_v1_tiny_cpu_quotas_start_through_the_wrapper(
    v1: CgroupV1, tmp_path: Path, cpu_limit_millicores: int | None, how: str
) -> None:
    # A spawner throttled inside a tiny quota would stall every start; the
    # wrapper pays for its exec out of the container's own quota instead.
    handle = v1.create(
        pod_uid="pod-q", container="main", limits=CgroupLimits(cpu_limit_millicores=cpu_limit_millicores)
    )
    if handle.dir_for("cpu") is None:
        pytest.skip("no v1 cpu hierarchy here")
    started, seen, controllers = await _spawn_cat(v1, handle, tmp_path)
    assert (started, {c: seen[c] for c in controllers}) == (how, {c: _relative(handle, c) for c in controllers})


async def test_v1_failed_placement_does_not_run_the_command(v1: CgroupV1, tmp_path: Path) -> None:
    handle = v1.create(pod_uid="pod-b", container="main", limits=CgroupLimits())
    # The first hierarchy is entered, a later one is missing (all are, with one hierarchy).
    keep = 1 if len(handle.dir_names) > 1 else 0
    bogus = CgroupHandle(
        pod_uid="pod-b",
        container="gone",
        paths=tuple(
            (name, directory if directory in handle.dir_names[:keep] else f"{directory}-missing")
            for name, directory in handle.paths
        ),
    )
    places = v1.spawn_places(bogus)
    assert places is not None
    marker = tmp_path / "ran"
    spawners = Spawners()
    try:
        with pytest.raises(PlacementFailure) as raised:
            spawners.spawn(key=None, candidates=("/usr/bin/touch", "/bin/touch"), argv=("touch", str(marker)),
                           env={}, cwd="/", places=places, log_fd=1)
        (spawner,) = spawners.pids()
        assert (str(raised.value).startswith("could not enter cgroup"), marker.exists()) == (True, False)
        # It came back from the memory leaf it had entered before the failure.
        assert _process_cgroups(spawner) == _thread_cgroups(threading.get_native_id())
        assert v1.pids(handle) == frozenset()
    finally:
        spawners.close()


def test_an_unusable_home_means_the_wrapper(tmp_path: Path) -> None:
    # No way back for a spawner (here: no cgroup.procs at all): setup gives no homes, and starts use the wrapper.
    assert home_procs([("memory", tmp_path / "missing")]) is None
    driver = CgroupV1(bases=[("memory", tmp_path)])
    handle = CgroupHandle(pod_uid="p", container="c", paths=(("memory", str(tmp_path / "p" / "c")),))
    assert (driver.homes, driver.spawn_places(handle), driver.spawn_places(None)) == (None, None, ())


async def test_a_spawner_that_dies_is_replaced_and_its_exits_are_unknown(tmp_path: Path) -> None:
    spawners = Spawners()
    try:
        child = spawners.spawn(key=None, candidates=("/bin/sleep",), argv=("sleep", "30"), env={}, cwd="/",
                               places=(), log_fd=1)
        (first,) = spawners.pids()
        os.kill(first, signal.SIGKILL)
        assert await asyncio.wait_for(child.exit(), WAIT) is None
        assert child.pinned is False
        os.kill(child.pid, signal.SIGKILL)
        second = spawners.spawn(key=None, candidates=("/bin/true",), argv=("true",), env={}, cwd="/", places=(),
                                log_fd=1)
        assert await asyncio.wait_for(second.exit(), WAIT) == Exit(code=0, signal=None)
        assert spawners.pids() != (first,)
        second.release()
    finally:
        spawners.close()


async def test_remove_pod_with_names_still_removes_leaves_it_was_not_told_of(v1: CgroupV1) -> None:
    for container in ("a", "b"):
        v1.create(pod_uid="pod-c", container=container, limits=CgroupLimits())
    await v1.remove_pod("pod-c", containers=["a", "never-created"], attempts=3, interval=0.01)
    assert (v1.pod_uids(), [base / "pod-c" for base in v1.base_dirs if (base / "pod-c").exists()]) == (
        frozenset(),
        [],
    )


# --- through the runtime ----------------------------------------------------------


class GateClock(SystemClock):
    """Real timestamps; each restart back-off waits until the test lets one through."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()

    async def sleep(self, seconds: float) -> None:
        await self.gate.wait()
        self.gate.clear()


async def _runtime(directory: Path, driver: CgroupV1, clock: SystemClock) -> PodRuntime:
    directory.mkdir(parents=True, exist_ok=True)
    runtime = PodRuntime(data_dir=directory, cgroups=driver, config=FAST, clock=clock)
    await runtime.adopt(ckpt.load(ckpt.path_for(directory)))
    return runtime


async def _finish(runtime: PodRuntime) -> None:
    for status in runtime.pods():
        if not status.finished:
            await runtime.stop(status.uid, grace_seconds=0)
    await runtime.close()


def _waiting_after(reason: Reason) -> Callable[[PodStatus], bool]:
    def check(status: PodStatus) -> bool:
        main = status.container("main")
        last = main.last_termination
        return main.state is ContainerState.WAITING and last is not None and last.reason is reason

    return check


async def test_runtime_reports_a_failed_placement_as_a_start_error(v1: CgroupV1, tmp_path: Path) -> None:
    clock = GateClock()
    runtime = await _runtime(tmp_path / "agent", v1, clock)
    marker = tmp_path / "runs"
    spec = Pod(
        uid="pod-d",
        name="test",
        restart_policy=RestartPolicy.ON_FAILURE,
        containers=(Container(name="main", command=("sh", "-c", f"echo run >> {marker}; exit 3")),),
    )
    try:
        await runtime.run(spec)
        await runtime.wait_for(spec.uid, _waiting_after(Reason.ERROR), timeout=WAIT)
        # An operator removed the container's (empty) cgroups while it waited to restart.
        for directory in v1.base_dirs:
            os.rmdir(directory / "pod-d" / "main")
        clock.gate.set()
        await runtime.wait_for(spec.uid, _waiting_after(Reason.START_ERROR), timeout=WAIT)
        status = await runtime.stop(spec.uid, grace_seconds=0)
        end = status.container("main").terminated
        assert end is not None
        assert (status.phase, end.reason, end.exit_code, end.message.startswith("could not enter cgroup"), marker.read_text()) == (
            PodPhase.FAILED,
            Reason.START_ERROR,
            EXIT_CODE_START_ERROR,
            True,
            "run\n",
        )
    finally:
        await _finish(runtime)


async def test_a_command_that_disappears_is_a_start_error_again(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "tool"
    tool.write_text("#!/bin/sh\nexit 0\n")
    tool.chmod(0o755)
    config = replace(FAST, base_env=(("PATH", str(bin_dir)),))
    directory = tmp_path / "agent"
    directory.mkdir()
    runtime = PodRuntime(data_dir=directory, cgroups=NoCgroups(), config=config)
    await runtime.adopt(None)

    def spec(uid: str) -> Pod:
        return Pod(uid=uid, name="test", containers=(Container(name="main", command=("tool",)),))

    try:
        first = await runtime.wait((await runtime.run(spec("first"))).uid, timeout=WAIT)
        tool.unlink()
        second = await runtime.wait((await runtime.run(spec("second"))).uid, timeout=WAIT)
        second_end = second.container("main").terminated
        assert second_end is not None
        assert (first.phase, second.phase, second_end.reason, second_end.message) == (
            PodPhase.SUCCEEDED,
            PodPhase.FAILED,
            Reason.START_ERROR,
            f"command 'tool' was not found in PATH={bin_dir}",
        )
    finally:
        await _finish(runtime)


@pytest.mark.skipif(os.geteuid() != 0, reason="spawners for users need root")
async def test_spawners_for_users_are_bounded_and_idle_ones_make_room(monkeypatch: pytest.MonkeyPatch) -> None:
    # A node whose pods each have a uid of their own must not keep a spawner per running pod without end.
    monkeypatch.setattr(spawning, "MAX_USER_SPAWNERS", 2)
    spawners = Spawners()
    try:
        sleepers = [
            spawners.spawn(key=(uid, uid, True), candidates=("/bin/sleep",), argv=("sleep", "30"), env={}, cwd="/",
                           places=(), log_fd=1)
            for uid in (61001, 61002)
        ]
        assert (spawners.has_room((61001, 61001, True)), spawners.has_room((61003, 61003, True))) == (True, False)
        for child in sleepers:
            os.kill(child.pid, signal.SIGKILL)
            assert await asyncio.wait_for(child.exit(), WAIT) == Exit(code=137, signal=signal.SIGKILL)
            child.release()
        assert spawners.has_room((61003, 61003, True)) is True
    finally:
        spawners.close()


async def test_starts_awaited_together_each_get_their_own_child_and_exit() -> None:
    """spawn_async: requests sent back to back, replies matched to their start; a quick exit is not lost."""
    spawners = Spawners()
    try:
        children = await asyncio.gather(*(
            spawners.spawn_async(key=None, candidates=("/bin/sh",), argv=("sh", "-c", f"exit {code}"), env={},
                                 cwd="/", places=(), log_fd=1)
            for code in range(8)
        ))
        assert len({child.pid for child in children}) == 8
        exits = [await asyncio.wait_for(child.exit(), WAIT) for child in children]
        assert exits == [Exit(code=code, signal=None) for code in range(8)]
        for child in children:
            child.release()
    finally:
        spawners.close()


async def _ran_true(spawners: Spawners) -> spawning.SpawnedChild:
    """A child that ran ``true`` to its end (not released: the caller decides when it is reaped)."""
    child = await spawners.spawn_async(key=None, candidates=("/bin/true",), argv=("true",), env={}, cwd="/",
                                       places=(), log_fd=1)
    assert await asyncio.wait_for(child.exit(), WAIT) == Exit(code=0, signal=None)
    return child


async def test_a_stopped_spawner_fails_an_awaited_start_after_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    spawners = Spawners()
    try:
        (await _ran_true(spawners)).release()
        (stopped,) = spawners.pids()
        os.kill(stopped, signal.SIGSTOP)
        # Short only for the stopped one: a new spawner's own start may take longer on a loaded machine.
        normal = spawning.REPLY_SECONDS
        monkeypatch.setattr(spawning, "REPLY_SECONDS", 0.3)
        with pytest.raises(spawning.StartFailure, match="the spawner failed"):
            await spawners.spawn_async(key=None, candidates=("/bin/true",), argv=("true",), env={}, cwd="/",
                                       places=(), log_fd=1)
        monkeypatch.setattr(spawning, "REPLY_SECONDS", normal)
        second = await spawners.spawn_async(key=None, candidates=("/bin/true",), argv=("true",), env={}, cwd="/",
                                            places=(), log_fd=1)
        assert (await asyncio.wait_for(second.exit(), WAIT), stopped in spawners.pids()) == (
            Exit(code=0, signal=None), False)
        second.release()
    finally:
        spawners.close()


async def test_a_stopped_spawner_is_given_up_and_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    # A process of the spawner's user may stop it (SIGSTOP): the start fails after a short wait, not for ever.
    spawners = Spawners()
    try:
        first = spawners.spawn(key=None, candidates=("/bin/true",), argv=("true",), env={}, cwd="/", places=(),
                               log_fd=1)
        assert await asyncio.wait_for(first.exit(), WAIT) == Exit(code=0, signal=None)
        first.release()
        (stopped,) = spawners.pids()
        os.kill(stopped, signal.SIGSTOP)
        # Short only for the stopped one: a new spawner's own start may take longer on a loaded machine.
        normal = spawning.REPLY_SECONDS
        monkeypatch.setattr(spawning, "REPLY_SECONDS", 0.3)
        with pytest.raises(spawning.StartFailure, match=r"the spawner failed: no answer in 0\.3s"):
            spawners.spawn(key=None, candidates=("/bin/true",), argv=("true",), env={}, cwd="/", places=(), log_fd=1)
        monkeypatch.setattr(spawning, "REPLY_SECONDS", normal)
        second = spawners.spawn(key=None, candidates=("/bin/true",), argv=("true",), env={}, cwd="/", places=(),
                                log_fd=1)
        assert (await asyncio.wait_for(second.exit(), WAIT), stopped in spawners.pids()) == (
            Exit(code=0, signal=None), False)
        second.release()
    finally:
        spawners.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="spawners for users need root")
async def test_a_user_whose_spawner_stalled_starts_through_the_wrapper_from_then_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The user's own processes can stop their spawner; replacing it would let them stall the agent again and again.
    monkeypatch.setattr(spawning, "REPLY_SECONDS", 0.3)
    key = (61005, 61005, True)
    spawners = Spawners()
    try:
        first = spawners.spawn(key=key, candidates=("/bin/true",), argv=("true",), env={}, cwd="/", places=(),
                               log_fd=1)
        assert await asyncio.wait_for(first.exit(), WAIT) == Exit(code=0, signal=None)
        first.release()
        root_pid = spawners.link(None).pid
        (stopped,) = [pid for pid in spawners.pids() if pid != root_pid]
        os.kill(stopped, signal.SIGSTOP)
        with pytest.raises(spawning.StartFailure, match="the spawner failed"):
            spawners.spawn(key=key, candidates=("/bin/true",), argv=("true",), env={}, cwd="/", places=(), log_fd=1)
        assert (spawners.has_room(key), key in spawners.distrusted, stopped in spawners.pids()) == (False, True, False)
        assert spawners.has_room((61006, 61006, True)) is True
    finally:
        spawners.close()


async def test_children_released_in_one_turn_are_reaped_by_one_message() -> None:
    """An exited child stays a zombie (its pid, hence its group id, pinned) until released; the children
    released in one turn of the loop are reaped together, and none is left behind."""
    spawners = Spawners()
    try:
        kids = [await spawners.spawn_async(key=None, candidates=("/bin/true",), argv=("true",), env={}, cwd="/",
                                           places=(), log_fd=1) for _ in range(3)]
        for kid in kids:
            assert await asyncio.wait_for(kid.exit(), WAIT) == Exit(code=0, signal=None)
        assert [os.path.exists(f"/proc/{kid.pid}") for kid in kids] == [True] * 3  # zombies until released
        for kid in kids:
            kid.release()
        assert await wait_until(lambda: not any(os.path.exists(f"/proc/{kid.pid}") for kid in kids), timeout=WAIT)
    finally:
        spawners.close()


async def test_a_start_takes_the_released_childrens_reaps_along(monkeypatch: pytest.MonkeyPatch) -> None:
    """Released children are reaped by the spawner before the next start it is asked for (in that start's
    message), not a message of their own: once the start is answered, they are gone."""
    monkeypatch.setattr(spawning, "REAP_DELAY_SECONDS", 60.0)  # the timer's message never comes in this test
    spawners = Spawners()
    try:
        first = await _ran_true(spawners)
        first.release()
        assert os.path.exists(f"/proc/{first.pid}")  # still a zombie: nothing was sent yet
        await spawners.spawn_async(key=None, candidates=("/bin/true",), argv=("true",), env={}, cwd="/",
                                   places=(), log_fd=1)
        assert not os.path.exists(f"/proc/{first.pid}")
    finally:
        spawners.close()
