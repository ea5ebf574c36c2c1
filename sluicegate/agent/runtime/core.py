"""PodRuntime: the public commands (run, stop, forget, adopt, close) and queries."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
from collections.abc import Callable, Sequence
from pathlib import Path

from sluicegate.agent import checkpoint as ckpt
from sluicegate.agent.cgroups import CgroupDriver, CgroupHandle
from sluicegate.agent.monitor import PodReading, group_members, live_pids, read_stat
from sluicegate.agent.pod import Pod
from sluicegate.agent.runtime.codec import spec_from_json, spec_to_json, termination_from
from sluicegate.agent.runtime.errors import (
    CheckpointNotAdoptedError,
    PodDirectoryError,
    PodExistsError,
    PodNotFinishedError,
    PodNotFoundError,
    PodRuntimeError,
    StopTimeoutError,
    WaitTimeoutError,
)
from sluicegate.agent.runtime.process import (
    Proc,
    open_pidfd,
    wait_event,
)
from sluicegate.agent.runtime.rules import validate_pod_spec
from sluicegate.agent.runtime.state import LiveContainer, LivePod, PendingStop
from sluicegate.agent.runtime.supervision import Supervision
from sluicegate.agent.runtime.values import (
    STOP_REASONS,
    AdoptedContainer,
    AdoptionReport,
    ContainerState,
    LostContainer,
    PodPhase,
    PodStatus,
    Reason,
    WaitingReason,
)

log = logging.getLogger("sluicegate.agent.runtime")



class PodRuntime(Supervision):
    """Runs pods on this node.  One instance per agent; use it from one event loop.

    Call ``adopt()`` once before anything else when a checkpoint may exist
    (``run()`` refuses to start otherwise), run ``watch()`` under the agent's
    supervisor, and ``close()`` on shutdown: closing stops watching but
    leaves the pods running for the next agent to adopt.
    """

    # -- queries --

    @property
    def checkpoint_path(self) -> Path:
        return self._checkpoint_path

    @property
    def cgroups(self) -> CgroupDriver:
        return self._cgroups

    @property
    def closed(self) -> bool:
        return self._closed

    def status(self, uid: str) -> PodStatus | None:
        pod = self._pods.get(uid)
        return None if pod is None else pod.status

    def pods(self) -> tuple[PodStatus, ...]:
        return tuple(pod.status for pod in self._pods.values() if pod.status is not None)

    def log_path(self, uid: str, container: str) -> Path:
        return self._pod_dir(uid) / f"{container}.log"

    def usage(self, uid: str) -> PodReading:
        """Memory, CPU and disk of a pod's processes (cgroup figures where the pod has cgroups)."""
        pod = self._get(uid)
        pids: set[int] = set()
        working_set: int | None = None
        cpu: float | None = None
        for container in pod.containers:
            if container.cgroup is not None:
                # The cgroup holds the group too (see _leftovers).
                pids |= self._cgroups.pids(container.cgroup)
            elif container.proc is not None:
                pids |= group_members(container.proc.pid)
            usage = self._cgroups.working_set_bytes(container.cgroup)
            if usage is not None:
                working_set = (working_set or 0) + usage
            seconds = self._cgroups.cpu_seconds(container.cgroup)
            if seconds is not None:
                cpu = (cpu or 0.0) + seconds
        return self._monitor.pod(
            uid=uid,
            pids=live_pids(pids),
            cgroup_working_set_bytes=working_set,
            cgroup_cpu_seconds=cpu,
            pod_dir=pod.directory,
        )

    async def wait_for(self, uid: str, predicate: Callable[[PodStatus], bool], *, timeout: float) -> PodStatus:
        """Wait until the pod's latest status satisfies ``predicate``; WaitTimeoutError after ``timeout``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            status = self.status(uid)
            if status is not None and predicate(status):
                return status
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise WaitTimeoutError(uid=uid, timeout=timeout, last=status)
            await wait_event(self._changed, remaining)

    async def wait(self, uid: str, *, timeout: float) -> PodStatus:
        """Wait until the pod has finished (every process gone)."""
        return await self.wait_for(uid, lambda status: status.finished, timeout=timeout)

    async def watch(self) -> None:
        """Return only by raising PodTaskCrashed when a supervision task fails; run it under the supervisor."""
        await self._crashed.wait()
        assert self._crash is not None
        raise self._crash

    # -- commands --

    async def run(self, spec: Pod) -> PodStatus:
        """Start a pod; returns its status once every container was started (or failed to)."""
        self._check_open()
        if self._needs_adopt:
            raise CheckpointNotAdoptedError(path=str(self._checkpoint_path))
        validate_pod_spec(spec)
        existing = self._pods.get(spec.uid)
        if existing is not None:
            phase = existing.status.phase if existing.status is not None else PodPhase.PENDING
            raise PodExistsError(uid=spec.uid, phase=phase)
        directory = self._pod_dir(spec.uid)
        try:
            self._make_pod_dirs(directory, spec.run_as)
        except OSError as exc:
            raise PodDirectoryError(uid=spec.uid, path=str(directory), detail=exc.strerror or str(exc)) from exc
        pod = LivePod(
            spec=spec,
            directory=directory,
            containers=[
                LiveContainer(spec=c, log_path=directory / f"{c.name}.log", starting=True) for c in spec.containers
            ],
            spec_json=spec_to_json(spec),
        )
        self._pods[spec.uid] = pod
        self._emit(pod)
        try:
            # Written before anything is spawned: a crash from here on leaves
            # a checkpoint that says "maybe started", never "never heard of
            # it".  The pods started in this turn of the loop, and every
            # other pending change, share the one write (see _start_written).
            await self._start_written()
            self._check_open()
        except BaseException:
            # Not written (CheckpointError), or the runtime closed or the
            # caller gave up meanwhile: nothing was spawned.  A checkpoint
            # that did record the start says "starting", which adoption
            # reports as a lost start, as for a crash here.
            if self._pods.get(spec.uid) is pod:
                del self._pods[spec.uid]
                self._stale.discard(spec.uid)
                self._drop_record(spec.uid)
                self._unpublished = [status for status in self._unpublished if status.uid != spec.uid]
            raise
        log.info("pod %s: starting %d container(s)", spec.uid, len(spec.containers))
        for container in pod.containers:
            await self._spawn_async(pod, container)
        if self._closed:
            # Closed while a spawner answered: the checkpoint says "starting",
            # so the next agent reports the start lost and empties its cgroup.
            return self._emit(pod)
        self._start_supervision(pod)
        if pod.stop is not None:
            # Stopped while its start was being written: stop() found no
            # process to signal, so signal now (its grace runs on meanwhile).
            self._signal_pod(pod, signal.SIGTERM if self._clock.now() < pod.stop.deadline else signal.SIGKILL)
        status = self._emit(pod)
        # Returns once the pids are in the checkpoint: whoever learns of the
        # start from us can rely on a restarted agent re-adopting it.
        await self._durable()
        return status

    async def stop(
        self,
        uid: str,
        *,
        grace_seconds: float | None = None,
        reason: Reason = Reason.KILLED,
        message: str = "",
    ) -> PodStatus:
        """SIGTERM every container's process group, SIGKILL after the grace, return once all is gone.

        The grace is ``grace_seconds``, else the pod's own, else the
        configured default.  Returns the finished status; raises
        StopTimeoutError if processes survive SIGKILL for
        ``kill_timeout_seconds``.
        """
        self._check_open()
        if reason not in STOP_REASONS:
            raise ValueError(f"stop reason must be one of {sorted(STOP_REASONS)}, got {reason!r}")
        pod = self._get(uid)
        if pod.finished:
            # Its final status may still wait for the checkpoint write.
            await self._durable()
            assert pod.status is not None
            return pod.status
        if grace_seconds is not None:
            grace = grace_seconds
        elif pod.spec.termination_grace_seconds is not None:
            grace = pod.spec.termination_grace_seconds
        else:
            grace = self._config.default_grace_seconds
        grace = max(0.0, grace)
        if pod.stop is None:
            pod.stop = PendingStop(reason=reason, message=message, deadline=self._clock.now() + grace)
            pod.reason = str(reason)
            pod.message = message
            pod.stop_event.set()
            log.info("pod %s: stopping (%s), grace %.1fs", uid, reason, grace)
            self._emit(pod)
        if grace > 0:
            self._signal_pod(pod, signal.SIGTERM)
            if await wait_event(pod.done, grace):
                assert pod.status is not None
                return pod.status
            log.info("pod %s: still running after the %.1fs grace; sending SIGKILL", uid, grace)
        self._kill_pod(pod)
        if not await wait_event(pod.done, self._config.kill_timeout_seconds):
            raise StopTimeoutError(
                uid=uid, pids=sorted(self._pod_pids(pod)), waited_seconds=grace + self._config.kill_timeout_seconds
            )
        assert pod.status is not None
        return pod.status

    async def forget(self, uid: str) -> None:
        """Drop a finished pod from memory and from the checkpoint (after the controller has its result).

        The pod's logs stay on disk; deleting them is the caller's decision.
        """
        refused = await self.forget_all((uid,))
        if refused:
            raise refused[uid]

    async def forget_all(self, uids: Sequence[str]) -> dict[str, PodRuntimeError]:
        """:meth:`forget` for several pods, dropped in one checkpoint write.

        Returns the pods that could not be forgotten (unknown, or not
        finished) with why; the others are dropped once this returns.
        """
        refused: dict[str, PodRuntimeError] = {}
        for uid in uids:
            pod = self._pods.get(uid)
            if pod is None:
                refused[uid] = PodNotFoundError(uid=uid)
            elif not pod.finished:
                refused[uid] = PodNotFinishedError(uid=uid, phase=pod.status.phase if pod.status else PodPhase.PENDING)
            else:
                del self._pods[uid]
                self._stale.discard(uid)
                self._drop_record(uid)
        if len(refused) < len(uids):
            await self._durable()
        return refused

    async def adopt(self, checkpoint: ckpt.Checkpoint | None) -> AdoptionReport:
        """Take over the pods a previous agent recorded; call once, before run().

        Each container recorded as running is re-attached only if a process
        with the recorded pid *and* start time exists (a recycled pid is a
        different process and is left alone).  Containers whose process is
        gone are concluded as Unknown (or OOMKilled, when their cgroup counted
        an OOM kill since they started).  Pods the checkpoint records as
        finished are reported again.  No recorded pod is ever started anew;
        cgroups under our base that belong to no recorded pod are emptied and
        removed.
        """
        self._check_open()
        if self._adopt_called or self._pods:
            raise PodRuntimeError("adopt() must be called once, before any pod is run")
        self._adopt_called = True
        path = str(self._checkpoint_path)
        adopted: list[AdoptedContainer] = []
        lost: list[LostContainer] = []
        finished: list[str] = []
        pods: list[LivePod] = []
        if checkpoint is not None:
            # Parse everything before touching any process, so a bad record
            # leaves nothing half-adopted (and run() stays refused).
            pods = [self._restore_pod(record, path=path) for record in checkpoint.pods]
            same_boot = checkpoint.boot_id == self._boot_id
            self._seq = max(self._seq, checkpoint.seq)
            self.adopted_node_records = checkpoint.node_records
            if checkpoint.node_records is not None:
                # Kept as read until the node hands its own over, so that
                # adoption's write (below) leaves them on disk.
                self._node_json = {str(record.get("uid")): json.dumps(record) for record in checkpoint.node_records}
            for pod in pods:
                self._pods[pod.uid] = pod
                if pod.finished:
                    finished.append(pod.uid)
                    continue
                for container in pod.containers:
                    outcome = self._reattach(pod, container, same_boot=same_boot)
                    if isinstance(outcome, AdoptedContainer):
                        adopted.append(outcome)
                    elif outcome is not None:
                        lost.append(outcome)
        self._needs_adopt = False
        swept = await self._cgroups.sweep(
            keep=frozenset(self._pods),
            attempts=self._config.cgroup_remove_attempts,
            interval=self._config.cgroup_remove_interval_seconds,
        )
        for uid in sorted(swept):
            log.warning("removed cgroup of pod %s, which no checkpoint records (its processes were killed)", uid)
        for pod in pods:
            if not pod.finished:
                self._start_supervision(pod)
            self._emit(pod)
        for pod in pods:
            if pod.stop is not None and not pod.finished:
                remaining = max(0.0, pod.stop.deadline - self._clock.now())
                self._start_task(self._resume_stop(pod, remaining), name=f"pod/{pod.uid}/stop")
        if checkpoint is None:
            # An empty checkpoint at once: from now on the next runtime must adopt.
            self._file_stale = True
            self._flush(publish=False)
        await self._durable()
        log.info("adopted %d container(s), %d lost, %d pod(s) already finished", len(adopted), len(lost), len(finished))
        return AdoptionReport(
            adopted=tuple(adopted), lost=tuple(lost), finished=tuple(finished), swept_cgroups=tuple(sorted(swept))
        )

    async def close(self) -> None:
        """Stop watching; pods keep running and the checkpoint stays for the next agent."""
        self._closed = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        try:
            self._flush(publish=True)
        except ckpt.CheckpointError as exc:
            log.error("%s", exc)
            self._fail_waiters(exc)
        for pod in self._pods.values():
            for container in pod.containers:
                if container.proc is not None and container.proc.pidfd is not None:
                    os.close(container.proc.pidfd)
                    container.proc.pidfd = None
        # The spawners end with their sockets; what they started runs on.
        self._spawners.close()

    async def _resume_stop(self, pod: LivePod, grace: float) -> None:
        assert pod.stop is not None
        await self.stop(pod.uid, grace_seconds=grace, reason=pod.stop.reason, message=pod.stop.message)

    # -- internals: adoption --

    def _restore_pod(self, record: ckpt.PodRecord, *, path: str) -> LivePod:
        spec = spec_from_json(record.spec, path=path)
        if spec.uid != record.uid:
            raise ckpt.CheckpointError(path=path, detail=f"pod {record.uid!r} holds the spec of {spec.uid!r}")
        by_name = {c.name: c for c in record.containers}
        containers: list[LiveContainer] = []
        for container_spec in spec.containers:
            rec = by_name.get(container_spec.name)
            if rec is None:
                raise ckpt.CheckpointError(
                    path=path, detail=f"pod {record.uid!r} has no record of container {container_spec.name!r}"
                )
            try:
                state = ContainerState(rec.state)
                waiting = None if rec.waiting_reason is None else WaitingReason(rec.waiting_reason)
            except ValueError as exc:
                raise ckpt.CheckpointError(path=path, detail=f"pod {record.uid!r}: {exc}") from exc
            terminated = termination_from(rec.terminated, path=path)
            containers.append(
                LiveContainer(
                    spec=container_spec,
                    log_path=Path(rec.log_path),
                    state=state,
                    waiting_reason=waiting,
                    cgroup=CgroupHandle(pod_uid=record.uid, container=rec.name, paths=rec.cgroup)
                    if rec.cgroup
                    else None,
                    pid=rec.pid,
                    start_ticks=rec.start_ticks,
                    started_at=rec.started_at,
                    restart_count=rec.restart_count,
                    backoff_index=rec.backoff_index,
                    oom_baseline=rec.oom_kills_at_start,
                    starting=rec.starting,
                    final=state is ContainerState.TERMINATED,
                    terminated=terminated,
                    last_termination=termination_from(rec.last_termination, path=path),
                )
            )
        pod = LivePod(spec=spec, directory=self._pod_dir(spec.uid), containers=containers, spec_json=record.spec)
        pod.finished = record.finished
        pod.reason = record.reason
        pod.message = record.message
        if record.stop is not None:
            try:
                reason = Reason(record.stop.reason)
            except ValueError as exc:
                raise ckpt.CheckpointError(path=path, detail=f"pod {record.uid!r}: {exc}") from exc
            pod.stop = PendingStop(reason=reason, message=record.stop.message, deadline=record.stop.deadline)
            pod.stop_event.set()
        return pod

    def _reattach(
        self, pod: LivePod, container: LiveContainer, *, same_boot: bool
    ) -> AdoptedContainer | LostContainer | None:
        name = container.spec.name
        if container.starting:
            # The agent died between recording "about to start" and recording
            # the pid: a process may exist (its cgroup, if any, is emptied by
            # the drain) but cannot be identified, so the run counts as lost.
            container.state = ContainerState.RUNNING
            container.proc = None
            container.pid = None
            container.starting = False
            container.lost_note = (
                "the agent stopped while starting this container; it may have run, its result is unknown"
            )
            return LostContainer(uid=pod.uid, container=name, pid=None, why="start was in progress")
        if container.state is not ContainerState.RUNNING:
            return None
        pid, ticks = container.pid, container.start_ticks
        why = ""
        proc: Proc | None = None
        if not same_boot:
            why = "the node rebooted since the checkpoint was written"
        elif pid is None or ticks is None:
            why = "no process identity was recorded"
        else:
            # Open the pidfd first, then check the start time: the pidfd pins
            # whichever process had the pid when it was opened, so a check
            # that passes afterwards proves the pidfd is ours.
            pidfd = open_pidfd(pid)
            stat = read_stat(pid)
            if stat is None:
                why = "the process is gone"
            elif stat.start_ticks != ticks:
                why = f"pid {pid} now belongs to another process (started at tick {stat.start_ticks}, recorded {ticks})"
            elif stat.exited:
                why = "the process has exited"
            else:
                proc = Proc(pid=pid, start_ticks=ticks, child=None, pidfd=pidfd)
            if proc is None and pidfd is not None:
                os.close(pidfd)
        if proc is not None:
            container.proc = proc
            if container.started_at is not None:
                # Durations for back-off are measured from adoption on.
                container.started_mono = self._clock.monotonic()
            log.info("pod %s container %s: re-adopted pid %d", pod.uid, name, proc.pid)
            return AdoptedContainer(uid=pod.uid, container=name, pid=proc.pid)
        container.proc = None
        container.lost_note = (
            f"exit status unknown: the process ended or could not be identified while the agent was away ({why})"
        )
        log.warning("pod %s container %s: not re-adopted: %s", pod.uid, name, why)
        return LostContainer(uid=pod.uid, container=name, pid=pid, why=why)
