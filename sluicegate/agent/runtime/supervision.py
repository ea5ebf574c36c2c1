"""Process supervision: spawn, wait for exits, drain process groups and cgroups, restart, stop."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess

from sluicegate.agent.cgroups import CgroupError
from sluicegate.agent.monitor import group_members, live_pids, read_stat
from sluicegate.agent.pod import Container
from sluicegate.agent.runtime.bookkeeping import RuntimeBase
from sluicegate.agent.runtime.process import (
    FOUND_LIMIT,
    HOME_DIR,
    Child,
    Exit,
    PopenChild,
    Proc,
    StartFailure,
    append_line,
    command_problem,
    killpg,
    open_pidfd,
    privilege_argv,
    readable,
    signal_name,
)
from sluicegate.agent.runtime.rules import restart_delay, should_restart
from sluicegate.agent.runtime.spawning import Key, SpawnedChild
from sluicegate.agent.runtime.state import LiveContainer, LivePod
from sluicegate.agent.runtime.values import (
    EXIT_CODE_OOM,
    EXIT_CODE_START_ERROR,
    EXIT_CODE_UNKNOWN,
    ContainerState,
    Reason,
    Termination,
    WaitingReason,
)

log = logging.getLogger("sluicegate.agent.runtime")



def _spawner_key(pod: LivePod) -> Key:
    run_as = pod.spec.run_as
    return None if run_as is None else (run_as.uid, run_as.gid, run_as.no_new_privs)


class Supervision(RuntimeBase):
    """Starting and watching a pod's processes."""

    def _start_supervision(self, pod: LivePod) -> None:
        pod.active = sum(1 for container in pod.containers if not container.final)
        self._start_task(self._supervise(pod), name=f"pod/{pod.uid}")

    # -- internals: processes --

    def _environment(self, spec: Container, home: str) -> dict[str, str]:
        env = dict(self._config.base_env)
        env["HOME"] = home
        for name, value in spec.env:
            env[name] = value
        return env

    def _spawn(self, pod: LivePod, container: LiveContainer) -> None:
        """Start one run of a container.  Synchronous: nothing interleaves with it."""
        now = self._clock.now()
        try:
            argv, env, cwd, places, log_fd = self._prepare_spawn(pod, container)
            try:
                child: Child
                if places is not None:
                    child = self._spawn_child(pod, argv, env, cwd, places, log_fd)
                else:
                    child = self._spawn_wrapped(pod, container, argv, env, cwd, log_fd)
            finally:
                os.close(log_fd)
        except (StartFailure, CgroupError, OSError, subprocess.SubprocessError) as exc:
            self._start_failed(pod, container, exc, now)
            return
        self._started(pod, container, child, now)

    async def _spawn_async(self, pod: LivePod, container: LiveContainer) -> None:
        """``_spawn`` for a new pod's start: a spawner's reply is awaited, so starts that come together overlap.

        Meanwhile the container is "starting" with no process; whoever
        interleaves (stop()) must deal with that (see run()).
        """
        now = self._clock.now()
        try:
            argv, env, cwd, places, log_fd = self._prepare_spawn(pod, container)
            try:
                child: Child
                if places is not None:
                    child = await self._spawners.spawn_async(
                        key=_spawner_key(pod), candidates=self._candidates(argv[0], env, cwd), argv=argv, env=env,
                        cwd=cwd, places=places, log_fd=log_fd)
                else:
                    child = self._spawn_wrapped(pod, container, argv, env, cwd, log_fd)
            finally:
                os.close(log_fd)
        except (StartFailure, CgroupError, OSError, subprocess.SubprocessError) as exc:
            self._start_failed(pod, container, exc, now)
            return
        self._started(pod, container, child, now)

    def _prepare_spawn(
        self, pod: LivePod, container: LiveContainer
    ) -> tuple[list[str], dict[str, str], str, tuple[tuple[str, str], ...] | None, int]:
        """argv, env, cwd, the spawner's places (None: start through the wrapper) and the open log fd."""
        spec = container.spec
        container.memory_killed = False
        home = f"{pod.directory}/{HOME_DIR}"  # a string: every start needs one, nothing needs its Path
        env = self._environment(spec, home)
        argv = [*spec.command, *spec.args]
        cwd = spec.working_dir or home
        problem = command_problem(argv[0], env, cwd, found=self._found_commands)
        if problem is not None:
            raise StartFailure(problem)
        if container.cgroup is None:
            container.cgroup = self._cgroups.create(
                pod_uid=pod.uid, container=spec.name, limits=spec.cgroup_limits()
            )
        container.oom_baseline = self._cgroups.oom_kills(container.cgroup)
        # Root's and private: the pod writes through the fd it inherits,
        # and no other pod can read it.
        log_fd = os.open(container.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        try:
            places = self._cgroups.spawn_places(container.cgroup)
        except BaseException:
            os.close(log_fd)
            raise
        if places is not None and not self._spawners.has_room(_spawner_key(pod)):
            places = None
        return argv, env, cwd, places, log_fd

    def _start_failed(self, pod: LivePod, container: LiveContainer, exc: BaseException, now: float) -> None:
        message = str(exc)
        log.warning("pod %s container %s could not start: %s", pod.uid, container.spec.name, message)
        append_line(container.log_path, f"sluicegate: could not start the container: {message}")
        container.starting = False
        container.proc = None
        container.state = ContainerState.TERMINATED
        container.waiting_reason = None
        container.terminated = Termination(
            exit_code=EXIT_CODE_START_ERROR,
            reason=Reason.START_ERROR,
            message=message,
            started_at=None,
            finished_at=now,
        )

    def _started(self, pod: LivePod, container: LiveContainer, child: Child, now: float) -> None:
        pid = child.pid
        stat = read_stat(pid)
        # The child is not reaped before we look, so its /proc entry exists.
        start_ticks = stat.start_ticks if stat is not None else 0
        # A spawner's child is not ours to wait for, but a pidfd tells us when it ends (see _await_termination).
        pidfd = open_pidfd(pid) if isinstance(child, SpawnedChild) else None
        container.proc = Proc(pid=pid, start_ticks=start_ticks, child=child, pidfd=pidfd)
        container.pid = pid
        container.start_ticks = start_ticks
        container.started_at = now
        container.started_mono = self._clock.monotonic()
        container.state = ContainerState.RUNNING
        container.waiting_reason = None
        container.terminated = None
        container.starting = False
        container.lost_note = ""
        log.info("pod %s container %s started: pid %d", pod.uid, container.spec.name, pid)

    def _spawn_child(
        self,
        pod: LivePod,
        argv: list[str],
        env: dict[str, str],
        cwd: str,
        places: tuple[tuple[str, str], ...],
        log_fd: int,
    ) -> SpawnedChild:
        """Start through a spawner: vfork semantics, placed by it, the user set without an exec in between."""
        return self._spawners.spawn(key=_spawner_key(pod), candidates=self._candidates(argv[0], env, cwd), argv=argv,
                                    env=env, cwd=cwd, places=places, log_fd=log_fd)

    def _candidates(self, command: str, env: dict[str, str], cwd: str) -> tuple[str, ...]:
        """The paths a spawner tries for ``command``, in order."""
        if "/" in command:
            return (command if os.path.isabs(command) else os.path.join(cwd, command),)
        # Where command_problem found it first, then the rest of PATH in order (as execvp).
        path = env.get("PATH", os.defpath)
        known = self._found_commands.get((command, path))
        key = (command, path, known)
        candidates = self._candidates_cache.get(key)
        if candidates is None:
            search = tuple(os.path.join(d or ".", command) for d in os.get_exec_path(env))
            candidates = search if known is None else (known, *(c for c in search if c != known))
            if len(self._candidates_cache) >= FOUND_LIMIT:
                self._candidates_cache.clear()
            self._candidates_cache[key] = candidates
        return candidates

    def _spawn_wrapped(
        self, pod: LivePod, container: LiveContainer, argv: list[str], env: dict[str, str], cwd: str, log_fd: int
    ) -> PopenChild:
        """Start through the placement wrapper and setpriv, from the agent itself (two more execs)."""
        launch = [*privilege_argv(pod.spec.run_as), *argv]

        def start(command: list[str]) -> subprocess.Popen[bytes]:
            return subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log_fd,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                env=env,
                # Own session, hence own process group: signals reach the
                # whole container, and no terminal hangup reaches it when
                # the agent goes away.
                start_new_session=True,
                close_fds=True,
            )

        popen = self._cgroups.spawn(container.cgroup, launch, start)
        return PopenChild(popen, poll_seconds=self._config.exit_poll_seconds)

    async def _wait_exit(self, proc: Proc) -> Exit:
        if proc.child is not None:
            exit = await proc.child.exit()
            if exit is not None:
                return exit
            # Its parent (a spawner) died first: wait as for an adopted process.
        while True:
            if proc.pidfd is not None:
                await readable(proc.pidfd)
            if proc.alive():
                await asyncio.sleep(self._config.exit_poll_seconds)
                continue
            return Exit(code=None, signal=None)

    def _leftovers(self, container: LiveContainer, pgid: int | None) -> tuple[frozenset[int], frozenset[int]]:
        """Live members of the container's process group and of its cgroup.

        With a cgroup, the group is not looked for: every process of the
        container starts inside the cgroup (forked there on v1; on v2 the
        placement wrapper enters it before exec, so before anything can
        fork) and only root can move it out, so the cgroup's member list
        already holds the group, and killing the cgroup kills it.  Only
        without a cgroup is all of /proc scanned.
        """
        if container.cgroup is not None:
            return frozenset(), live_pids(self._cgroups.pids(container.cgroup))
        group = group_members(pgid) if pgid is not None else frozenset()
        return group, frozenset()

    async def _drain(self, pod: LivePod, container: LiveContainer, pgid: int | None) -> frozenset[int]:
        """SIGKILL what is left of a container until nothing is; returns survivors if it gave up.

        Without a pid namespace nothing kills a container's other processes
        when its main process exits, so we do, as the end of a container's
        pid namespace would: the container is over when its main process is.
        """
        loop = asyncio.get_running_loop()
        start = loop.time()
        warned = False
        while True:
            group, in_cgroup = self._leftovers(container, pgid)
            left = group | in_cgroup
            if not left:
                return frozenset()
            if group and pgid is not None:
                killpg(pgid, signal.SIGKILL)
            if in_cgroup:
                self._cgroups.kill(container.cgroup)
            waited = loop.time() - start
            if waited > self._config.stuck_give_up_seconds:
                log.error(
                    "pod %s container %s: processes %s survived SIGKILL for %.0fs; reporting it terminated anyway",
                    pod.uid,
                    container.spec.name,
                    sorted(left),
                    waited,
                )
                return left
            if waited > self._config.kill_timeout_seconds:
                if not warned:
                    log.error(
                        "pod %s container %s: processes %s survive SIGKILL (uninterruptible?); still waiting",
                        pod.uid,
                        container.spec.name,
                        sorted(left),
                    )
                    warned = True
                await asyncio.sleep(max(self._config.drain_poll_seconds, 1.0))
            else:
                await asyncio.sleep(self._config.drain_poll_seconds)

    def _classify(self, pod: LivePod, container: LiveContainer, exit: Exit, finished_at: float) -> Termination:
        oom = container.memory_killed or self._cgroups.oom_kills(container.cgroup) > container.oom_baseline
        stop = pod.stop
        if oom:
            code = exit.code if exit.code is not None else EXIT_CODE_OOM
            how = "its RSS, polled," if container.memory_killed else "the kernel OOM killer saw it"
            reason, message = (
                Reason.OOM_KILLED,
                (f"memory limit of {container.spec.memory_limit_bytes} bytes exceeded ({how})"),
            )
        elif exit.code is None:
            code = EXIT_CODE_UNKNOWN
            reason = stop.reason if stop is not None else Reason.UNKNOWN
            message = container.lost_note or (
                "exit status unknown: the process was adopted after an agent restart, "
                "and only a parent can read a process's exit status"
            )
        elif exit.code == 0:
            code, reason, message = 0, Reason.COMPLETED, ""
        elif stop is not None:
            code, reason = exit.code, stop.reason
            message = stop.message or f"stopped by the agent ({stop.reason})"
        else:
            code, reason = exit.code, Reason.ERROR
            message = f"exited with code {code}" if exit.signal is None else f"killed by {signal_name(exit.signal)}"
        return Termination(
            exit_code=code,
            reason=reason,
            message=message,
            started_at=container.started_at,
            finished_at=finished_at,
            signal=exit.signal,
        )

    async def _await_termination(self, pod: LivePod, container: LiveContainer) -> Termination:
        proc = container.proc
        exit: Exit
        if proc is not None:
            # Started by a spawner: its exit status comes on the spawner's
            # socket, which the loop reads anyway, as soon as the spawner's
            # own pidfd says it ended (the agent watches no pidfd of its own
            # for it: one wakeup and no reader per start).  The pidfd opened
            # at the start pins the process for the fallback, a spawner that
            # died first.
            exit = await self._wait_exit(proc)
            # The group id is the main pid.  It stays ours while the child is
            # an unreaped zombie or any member is alive.
            pgid: int | None = proc.pid
        else:
            # A recorded process we could not re-attach.  Its group is ours
            # only if the pid is free now: a live process with that pid is a
            # different one (recycled) and must not be touched.
            exit = Exit(code=None, signal=None)
            pgid = container.pid if container.pid is not None and read_stat(container.pid) is None else None
        finished_at = self._clock.now()
        if container.started_mono is not None:
            container.last_run_seconds = self._clock.monotonic() - container.started_mono
        survivors = await self._drain(pod, container, pgid)
        termination = self._classify(pod, container, exit, finished_at)
        if survivors:
            termination = Termination(
                exit_code=termination.exit_code,
                reason=termination.reason,
                message=f"{termination.message}; processes {sorted(survivors)} survived SIGKILL".lstrip("; "),
                started_at=termination.started_at,
                finished_at=termination.finished_at,
                signal=termination.signal,
            )
        if proc is not None:
            proc.release()
        container.proc = None
        return termination

    def _pod_pids(self, pod: LivePod) -> frozenset[int]:
        pids: set[int] = set()
        for container in pod.containers:
            group, in_cgroup = self._leftovers(container, container.proc.pid if container.proc is not None else None)
            pids |= group | in_cgroup
        return frozenset(pids)

    def _signal_group(self, container: LiveContainer, sig: int) -> None:
        """Signal the process group of the container's main process, if the group is still ours.

        Once a group is empty its number can be handed to an unrelated
        process that becomes a group leader, and that process must not
        receive our signal.  The group is ours while its leader is our
        unreaped child; for an adopted process, while it has a live member
        in the container's cgroup, or without a cgroup any live member at
        all (a scan of /proc).
        """
        proc = container.proc
        if proc is None:
            return
        pgid = proc.pid
        if proc.child is not None and proc.child.pinned:
            # Our own child, not reaped yet (that happens in release()): its pid,
            # hence the group id, cannot be handed out again until then.  On v2
            # it may not be in its cgroup yet -- the placement wrapper enters it
            # just after the spawn -- so membership would miss a stop right
            # after a start, and the process would live on.
            alive = True
        elif container.cgroup is None:
            alive = bool(group_members(pgid))
        else:
            alive = False
            for pid in self._cgroups.pids(container.cgroup):
                stat = read_stat(pid)
                if stat is not None and stat.pgid == pgid and not stat.exited:
                    alive = True
                    break
        if alive:
            killpg(pgid, sig)

    def _signal_pod(self, pod: LivePod, sig: int) -> None:
        for container in pod.containers:
            self._signal_group(container, sig)

    def _kill_pod(self, pod: LivePod) -> None:
        for container in pod.containers:
            self._signal_group(container, signal.SIGKILL)
            if not container.final:
                self._cgroups.kill(container.cgroup)

    # -- internals: supervision --

    async def _supervise(self, pod: LivePod) -> None:
        watcher: asyncio.Task[None] | None = None
        if self._cgroups.kind == "none" and any(c.spec.memory_limit_bytes is not None for c in pod.containers):
            watcher = asyncio.create_task(self._watch_memory(pod), name=f"pod/{pod.uid}/memory")
        try:
            running = [container for container in pod.containers if not container.final]
            if len(running) == 1:
                # One container (most pods): run it in this task, not in a group of one.
                # Its failure reads as a group's would: a supervision crash (see _task_done).
                try:
                    await self._run_container(pod, running[0])
                except Exception as exc:
                    raise ExceptionGroup(f"pod {pod.uid}: container {running[0].spec.name} failed", [exc]) from None
            else:
                async with asyncio.TaskGroup() as group:
                    for container in running:
                        group.create_task(
                            self._run_container(pod, container), name=f"pod/{pod.uid}/{container.spec.name}"
                        )
        finally:
            if watcher is not None:
                watcher.cancel()
                await asyncio.wait({watcher})
        try:
            await self._cgroups.remove_pod(
                pod.uid,
                # Every container's name, placed or not: a cgroup whose creation
                # failed half-way may exist in some hierarchies.
                containers=[container.spec.name for container in pod.containers],
                attempts=self._config.cgroup_remove_attempts,
                interval=self._config.cgroup_remove_interval_seconds,
            )
        except CgroupError as exc:
            log.warning("pod %s: %s", pod.uid, exc)
        pod.finished = True
        status = self._emit(pod)
        await self._durable()
        pod.done.set()
        log.info("pod %s finished: %s", pod.uid, status.phase)

    async def _run_container(self, pod: LivePod, container: LiveContainer) -> None:
        name = container.spec.name
        while True:
            if container.state is ContainerState.RUNNING:
                termination = await self._await_termination(pod, container)
                container.state = ContainerState.TERMINATED
                container.terminated = termination
                container.waiting_reason = None
                log.info(
                    "pod %s container %s terminated: %s (exit code %d)",
                    pod.uid,
                    name,
                    termination.reason,
                    termination.exit_code,
                )
                self._mark(pod)
            if container.state is ContainerState.TERMINATED:
                assert container.terminated is not None
                if pod.stop is not None or not should_restart(pod.spec.restart_policy, container.terminated):
                    container.final = True
                    pod.active -= 1
                    # The last container's end is reported with the pod's.
                    if pod.active > 0:
                        self._emit(pod)
                    return
                container.last_termination = container.terminated
                container.terminated = None
                container.state = ContainerState.WAITING
                container.waiting_reason = WaitingReason.CRASH_LOOP_BACK_OFF
                self._emit(pod)
            # Waiting to run again.
            if container.last_run_seconds >= self._config.backoff_reset_seconds:
                container.backoff_index = 0
            delay = restart_delay(
                container.backoff_index, base=self._config.backoff_base_seconds, cap=self._config.backoff_cap_seconds
            )
            container.backoff_index += 1
            log.info("pod %s container %s: restarting in %.1fs", pod.uid, name, delay)
            if not await self._backoff(pod, delay):
                container.state = ContainerState.TERMINATED
                container.terminated = container.last_termination
                container.last_termination = None
                continue
            container.restart_count += 1
            container.starting = True
            self._mark(pod)
            self._flush(publish=False)  # before the spawn, see "Checkpoint writes"
            self._spawn(pod, container)
            self._emit(pod)

    async def _backoff(self, pod: LivePod, delay: float) -> bool:
        """Sleep ``delay`` on the injected clock; False when the pod is being stopped meanwhile."""
        if pod.stop is not None:
            return False
        sleeper = asyncio.ensure_future(self._clock.sleep(delay))
        stopper = asyncio.ensure_future(pod.stop_event.wait())
        try:
            await asyncio.wait({sleeper, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeper.cancel()
            stopper.cancel()
        return pod.stop is None

    async def _watch_memory(self, pod: LivePod) -> None:
        """Without cgroups: kill a container whose process tree's RSS exceeds its memory limit."""
        while True:
            for container in pod.containers:
                limit = container.spec.memory_limit_bytes
                proc = container.proc
                if limit is None or proc is None or container.memory_killed:
                    continue
                reading = self._monitor.process_tree(proc.pid, pgid=proc.pid)
                if reading.rss_bytes > limit:
                    container.memory_killed = True
                    log.warning(
                        "pod %s container %s: RSS %d bytes exceeds its limit of %d; killing it",
                        pod.uid,
                        container.spec.name,
                        reading.rss_bytes,
                        limit,
                    )
                    self._signal_group(container, signal.SIGKILL)
                    for pid in reading.pids:
                        try:
                            os.kill(pid, signal.SIGKILL)
                        except (ProcessLookupError, PermissionError):
                            pass
            await asyncio.sleep(self._config.memory_poll_seconds)
