"""Pods as Linux processes: start, watch, restart, stop, and re-adopt after an agent restart.

A pod is a list of containers; each container is one command started in its
own session (so its own process group), with stdout and stderr appended to
``<data_dir>/pods/<uid>/<container>.log`` and, where the node has them, its
own cgroups (see ``cgroups``).  Processes never hold a pipe to the agent,
so they survive the agent dying; systemd's ``KillMode=process`` keeps the
unit side from killing them.

A pod with ``run_as`` runs as that user and group, without supplementary
groups and (``no_new_privs``) unable to gain privileges through exec: the
command is started through ``setpriv`` after it was placed in its cgroups.
Its ``HOME`` is ``<data_dir>/pods/<uid>/home`` (0700, the pod user's, the
default working directory); the data directory and ``pods/`` are 0711 and
logs 0600 (root's), so no pod reads another's logs or the checkpoint.

Status changes are delivered as frozen ``PodStatus`` values on
``PodRuntime.events``, an unbounded ``asyncio.Queue``: producing never
blocks the runtime, and the consumer (the controller link) reads at its own
pace.  Each value is a whole snapshot of the pod, numbered by ``seq``, so a
consumer may drop all but the newest per pod.  ``status()`` returns the
latest snapshot and ``wait_for()`` waits for a condition on it.

Invariants a consumer can rely on:

* a pod's phase is Succeeded or Failed (``finished``) only once every
  process of the pod has exited: the main processes, everything left in
  their process groups and everything in their cgroups;
* the checkpoint is written before a process is spawned and before a status
  is published (on ``events``, ``status()``, ``wait_for()``), so a
  restarted agent never knows less than the controller;
* a pod uid is run at most once per node: ``run()`` refuses a uid it knows,
  and ``adopt()`` either re-attaches to the recorded processes or reports
  them ended; it never starts a recorded pod again.

Restart policy and phases follow the kubelet (``getPhase``); restart delays
follow its crash-loop back-off (10 s doubling to 5 min, reset after 10 min
of running), on an injected clock so tests do not wait.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Final, Protocol

from sluicegate.agent import checkpoint as ckpt
from sluicegate.agent.cgroups import CgroupDriver, CgroupError, CgroupHandle, CgroupLimits
from sluicegate.agent.monitor import Monitor, PodReading, group_members, live_pids, read_boot_id, read_stat

__all__ = [
    "RestartPolicy",
    "PodPhase",
    "ContainerState",
    "Reason",
    "WaitingReason",
    "STOP_REASONS",
    "EXIT_CODE_UNKNOWN",
    "EXIT_CODE_START_ERROR",
    "EXIT_CODE_OOM",
    "ContainerSpec",
    "PodSpec",
    "RunAs",
    "privilege_argv",
    "Termination",
    "ContainerStatus",
    "PodStatus",
    "AdoptedContainer",
    "LostContainer",
    "AdoptionReport",
    "RuntimeConfig",
    "Clock",
    "SystemClock",
    "PodRuntimeError",
    "PodSpecError",
    "PodDirectoryError",
    "PodExistsError",
    "PodNotFoundError",
    "PodNotFinishedError",
    "StopTimeoutError",
    "WaitTimeoutError",
    "CheckpointNotAdoptedError",
    "RuntimeClosedError",
    "PodTaskCrashed",
    "PodRuntime",
    "pod_phase",
    "restart_delay",
    "should_restart",
    "validate_pod_spec",
    "spec_to_json",
    "spec_from_json",
]

log = logging.getLogger(__name__)


# --- values ------------------------------------------------------------------


class RestartPolicy(StrEnum):
    ALWAYS = "Always"
    ON_FAILURE = "OnFailure"
    NEVER = "Never"


class PodPhase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


class ContainerState(StrEnum):
    WAITING = "Waiting"
    RUNNING = "Running"
    TERMINATED = "Terminated"


class Reason(StrEnum):
    """Why a container terminated (the kubelet's words where it has one)."""

    COMPLETED = "Completed"  # exit code 0
    ERROR = "Error"  # non-zero exit on its own
    OOM_KILLED = "OOMKilled"  # killed for exceeding its memory limit
    KILLED = "Killed"  # stopped by the agent (stop())
    EVICTED = "Evicted"  # stopped by the agent to relieve node pressure
    START_ERROR = "StartError"  # never ran: command missing, cgroup failure...
    UNKNOWN = "Unknown"  # ended while the agent was away; its exit status is lost


class WaitingReason(StrEnum):
    CONTAINER_CREATING = "ContainerCreating"
    CRASH_LOOP_BACK_OFF = "CrashLoopBackOff"


STOP_REASONS: Final = frozenset({Reason.KILLED, Reason.EVICTED})

# No exit code exists for a process the agent could not wait for.
EXIT_CODE_UNKNOWN: Final = -1
# What containerd reports for a container that could not be started.
EXIT_CODE_START_ERROR: Final = 128
# 128 + SIGKILL, the shell convention the kubelet reports for OOM kills.
EXIT_CODE_OOM: Final = 128 + signal.SIGKILL

DEFAULT_PATH: Final = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True, slots=True)
class ContainerSpec:
    """One container: a command line with its environment and resources (canonical units).

    ``env`` is ordered as in a manifest; a later entry wins.  ``$(VAR)``
    references are passed through literally (not expanded).
    """

    name: str
    command: tuple[str, ...]
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    working_dir: str | None = None
    cpu_limit_millicores: int | None = None
    memory_limit_bytes: int | None = None
    cpu_request_millicores: int | None = None
    memory_request_bytes: int | None = None

    def cgroup_limits(self) -> CgroupLimits:
        # A limit without a request means request == limit in Kubernetes; the
        # controller normally fills that in, this keeps the weight right anyway.
        request = self.cpu_request_millicores if self.cpu_request_millicores is not None else self.cpu_limit_millicores
        return CgroupLimits(
            cpu_limit_millicores=self.cpu_limit_millicores,
            cpu_request_millicores=request,
            memory_limit_bytes=self.memory_limit_bytes,
        )


@dataclass(frozen=True, slots=True)
class PodSpec:
    """A pod as the agent runs it.  ``termination_grace_seconds`` overrides the default grace."""

    uid: str
    containers: tuple[ContainerSpec, ...]
    namespace: str = "default"
    name: str = ""
    restart_policy: RestartPolicy = RestartPolicy.NEVER
    termination_grace_seconds: float | None = None
    # Who the processes run as (see sluicegate.security.podsecurity): None
    # keeps the agent's own user (an agent that is not root cannot switch).
    run_as: RunAs | None = None


@dataclass(frozen=True, slots=True)
class RunAs:
    """A pod's user and group; no supplementary groups; ``no_new_privs``: PR_SET_NO_NEW_PRIVS before exec."""

    uid: int
    gid: int
    no_new_privs: bool = True


@dataclass(frozen=True, slots=True)
class Termination:
    """How one run of a container ended.  ``signal`` is set when a signal killed it."""

    exit_code: int
    reason: Reason
    message: str
    started_at: float | None
    finished_at: float
    signal: int | None = None


@dataclass(frozen=True, slots=True)
class ContainerStatus:
    name: str
    state: ContainerState
    restart_count: int
    log_path: str
    pid: int | None = None
    started_at: float | None = None
    waiting_reason: WaitingReason | None = None
    terminated: Termination | None = None
    last_termination: Termination | None = None


@dataclass(frozen=True, slots=True)
class PodStatus:
    """A snapshot of one pod.  ``finished`` implies every process of the pod has exited."""

    uid: str
    phase: PodPhase
    containers: tuple[ContainerStatus, ...]
    at: float
    seq: int
    finished: bool
    reason: str | None = None
    message: str = ""

    def container(self, name: str) -> ContainerStatus:
        for status in self.containers:
            if status.name == name:
                return status
        raise KeyError(name)


@dataclass(frozen=True, slots=True)
class AdoptedContainer:
    uid: str
    container: str
    pid: int


@dataclass(frozen=True, slots=True)
class LostContainer:
    """A container recorded as running whose process could not be re-attached, and why."""

    uid: str
    container: str
    pid: int | None
    why: str


@dataclass(frozen=True, slots=True)
class AdoptionReport:
    adopted: tuple[AdoptedContainer, ...]
    lost: tuple[LostContainer, ...]
    finished: tuple[str, ...]
    swept_cgroups: tuple[str, ...]


def _default_env() -> tuple[tuple[str, str], ...]:
    return (("PATH", DEFAULT_PATH),)


@dataclass(frozen=True, slots=True)
class RuntimeConfig:
    """Runtime settings; times in seconds.

    * ``default_grace_seconds``: SIGTERM-to-SIGKILL time when neither stop()
      nor the pod says (the kubelet's terminationGracePeriodSeconds default).
    * ``kill_timeout_seconds``: after SIGKILL, how long stop() waits for the
      processes to vanish before raising StopTimeoutError (they are still
      waited for afterwards).
    * ``stuck_give_up_seconds``: how long a container whose processes
      survive SIGKILL (uninterruptible sleep) is waited for before it is
      reported terminated anyway, with the surviving pids in its message.
    * ``backoff_*``: the kubelet's crash-loop back-off (base, cap, and the
      running time after which it starts over).
    * ``exit_poll_seconds``: how often an exit is polled for where pidfd is
      unavailable.  ``drain_poll_seconds``: how often leftovers are re-checked
      while a container's processes are being killed.
    * ``memory_poll_seconds``: without cgroups, how often RSS is compared
      with memory limits; a process can overshoot its limit for this long.
    * ``checkpoint_batch_seconds``: how long a status change may wait for
      the checkpoint write it shares with the changes that follow.  Each
      write creates and renames a file (a few hundred microseconds on a
      busy disk), so batching is what keeps the cost per pod small; the
      price is that statuses are published up to this much later.
    * ``base_env``: the environment every container starts from (a minimal
      PATH by default, and HOSTNAME where the agent sets it; nothing of the
      agent's own environment leaks in).  Each pod also gets ``HOME``: its
      private directory ``<data_dir>/pods/<uid>/home`` (mode 0700, owned by
      the pod's user), which is also the working directory of a container
      that names none.
    """

    default_grace_seconds: float = 30.0
    kill_timeout_seconds: float = 10.0
    stuck_give_up_seconds: float = 3600.0
    backoff_base_seconds: float = 10.0
    backoff_cap_seconds: float = 300.0
    backoff_reset_seconds: float = 600.0
    exit_poll_seconds: float = 0.5
    drain_poll_seconds: float = 0.02
    memory_poll_seconds: float = 0.5
    checkpoint_batch_seconds: float = 0.005
    cgroup_remove_attempts: int = 50
    cgroup_remove_interval_seconds: float = 0.02
    base_env: tuple[tuple[str, str], ...] = field(default_factory=_default_env)


class Clock(Protocol):
    """Time as the runtime sees it: timestamps, durations and back-off sleeps."""

    def now(self) -> float:
        """Wall-clock seconds since the epoch, for timestamps in statuses."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back, for durations."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait; only restart back-off uses it, so tests can skip the wait."""
        ...


class SystemClock:
    def now(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


# --- errors ------------------------------------------------------------------


class PodRuntimeError(Exception):
    """Base of the runtime's errors; callers match on the subclasses."""


class PodSpecError(PodRuntimeError):
    """A pod spec cannot be run; ``field`` names the offending field.  Nothing was started."""

    def __init__(self, *, uid: str, field: str, problem: str) -> None:
        self.uid = uid
        self.field = field
        self.problem = problem
        super().__init__(f"pod {uid!r}: {field}: {problem}; the pod was not started")


class PodDirectoryError(PodRuntimeError):
    """The pod's directory (logs) could not be created; nothing was started."""

    def __init__(self, *, uid: str, path: str, detail: str) -> None:
        self.uid = uid
        self.path = path
        self.detail = detail
        super().__init__(f"pod {uid!r}: cannot create {path}: {detail}; the pod was not started")


class PodExistsError(PodRuntimeError):
    """The uid is already known here (running, finished or adopted): it is never run twice."""

    def __init__(self, *, uid: str, phase: PodPhase) -> None:
        self.uid = uid
        self.phase = phase
        super().__init__(f"pod {uid!r} is already known on this node (phase {phase}); it will not be started again")


class PodNotFoundError(PodRuntimeError):
    def __init__(self, *, uid: str) -> None:
        self.uid = uid
        super().__init__(f"pod {uid!r} is not known on this node")


class PodNotFinishedError(PodRuntimeError):
    def __init__(self, *, uid: str, phase: PodPhase) -> None:
        self.uid = uid
        self.phase = phase
        super().__init__(f"pod {uid!r} is still {phase}; stop it and wait until it has finished before forgetting it")


class StopTimeoutError(PodRuntimeError):
    """Processes outlived SIGKILL by ``waited_seconds``; the pod stays unfinished and is still watched."""

    def __init__(self, *, uid: str, pids: Sequence[int], waited_seconds: float) -> None:
        self.uid = uid
        self.pids = tuple(pids)
        self.waited_seconds = waited_seconds
        super().__init__(
            f"pod {uid!r}: processes {list(self.pids)} still exist {waited_seconds:.1f}s after the stop began "
            "(SIGKILL sent); the pod is reported finished only once they are gone"
        )


class WaitTimeoutError(PodRuntimeError):
    def __init__(self, *, uid: str, timeout: float, last: PodStatus | None) -> None:
        self.uid = uid
        self.timeout = timeout
        self.last = last
        phase = "unknown" if last is None else last.phase
        super().__init__(f"pod {uid!r}: condition not met within {timeout}s (last phase {phase})")


class CheckpointNotAdoptedError(PodRuntimeError):
    """A checkpoint exists but adopt() was not called: starting pods could run one twice."""

    def __init__(self, *, path: str) -> None:
        self.path = path
        super().__init__(f"checkpoint {path} exists but was not adopted; call adopt() before run()")


class RuntimeClosedError(PodRuntimeError):
    def __init__(self) -> None:
        super().__init__("the pod runtime is closed; no pods can be started or stopped")


class PodTaskCrashed(PodRuntimeError):
    """A pod supervision task failed with an unexpected error (a bug); the agent should stop."""

    def __init__(self, *, task: str, error: BaseException) -> None:
        self.task = task
        self.error = error
        super().__init__(f"task {task} crashed: {error!r}")


# --- pure rules --------------------------------------------------------------


def pod_phase(containers: Sequence[ContainerStatus], *, restart_policy: RestartPolicy, terminal: bool) -> PodPhase:
    """The kubelet's pod phase for the containers' states.

    A waiting container that already ran once counts as stopped, not
    waiting, so a pod in back-off stays Running.  ``terminal`` means no
    container will run again (all finished, or the pod is being stopped).
    """
    waiting = running = stopped = succeeded = 0
    for status in containers:
        if status.state is ContainerState.RUNNING:
            running += 1
        elif status.state is ContainerState.TERMINATED:
            stopped += 1
            if status.terminated is not None and status.terminated.exit_code == 0:
                succeeded += 1
        elif status.last_termination is not None:
            stopped += 1
        else:
            waiting += 1
    if waiting > 0:
        return PodPhase.PENDING
    if running > 0:
        return PodPhase.RUNNING
    if stopped > 0:
        if terminal:
            return PodPhase.SUCCEEDED if stopped == succeeded else PodPhase.FAILED
        if restart_policy is RestartPolicy.ALWAYS:
            return PodPhase.RUNNING
        if stopped == succeeded:
            return PodPhase.SUCCEEDED
        if restart_policy is RestartPolicy.NEVER:
            return PodPhase.FAILED
        return PodPhase.RUNNING
    return PodPhase.PENDING


def restart_delay(index: int, *, base: float, cap: float) -> float:
    """Back-off before restart number ``index`` (0-based): base doubling, capped."""
    return min(cap, base * (1 << min(index, 62)))


def should_restart(policy: RestartPolicy, termination: Termination) -> bool:
    """Whether a container that ended like this runs again under ``policy``.

    An Unknown ending (the agent was away) is restarted only under Always:
    the container may well have succeeded, and running a batch step twice
    is worse than reporting it lost.
    """
    if termination.reason is Reason.UNKNOWN:
        return policy is RestartPolicy.ALWAYS
    if policy is RestartPolicy.ALWAYS:
        return True
    if policy is RestartPolicy.ON_FAILURE:
        return termination.exit_code != 0
    return False


# uids and container names become directory names; keep them to safe spellings.
_UID_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_NAME_RE: Final = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def validate_pod_spec(spec: PodSpec) -> None:
    """Raise PodSpecError naming the first field the runtime cannot honour."""
    if not _UID_RE.match(spec.uid):
        raise PodSpecError(
            uid=spec.uid, field="uid", problem="must be 1-128 letters, digits, '.', '_' or '-', starting alphanumeric"
        )
    if not spec.containers:
        raise PodSpecError(uid=spec.uid, field="containers", problem="a pod needs at least one container")
    if spec.termination_grace_seconds is not None and spec.termination_grace_seconds < 0:
        raise PodSpecError(uid=spec.uid, field="terminationGracePeriodSeconds", problem="must not be negative")
    seen: set[str] = set()
    for index, container in enumerate(spec.containers):
        where = f"containers[{index}]"
        if not _NAME_RE.match(container.name):
            raise PodSpecError(
                uid=spec.uid, field=f"{where}.name", problem=f"{container.name!r} is not a DNS label (a-z, 0-9, '-')"
            )
        if container.name in seen:
            raise PodSpecError(
                uid=spec.uid, field=f"{where}.name", problem=f"duplicate container name {container.name!r}"
            )
        seen.add(container.name)
        if not container.command or not container.command[0]:
            raise PodSpecError(
                uid=spec.uid, field=f"{where}.command", problem="required: there is no image entrypoint to fall back on"
            )
        for key, value in (
            ("resources.limits.cpu", container.cpu_limit_millicores),
            ("resources.limits.memory", container.memory_limit_bytes),
            ("resources.requests.cpu", container.cpu_request_millicores),
            ("resources.requests.memory", container.memory_request_bytes),
        ):
            if value is not None and value < 0:
                raise PodSpecError(uid=spec.uid, field=f"{where}.{key}", problem="must not be negative")
        for env_index, (name, _) in enumerate(container.env):
            if not name or "=" in name or "\0" in name:
                raise PodSpecError(
                    uid=spec.uid, field=f"{where}.env[{env_index}].name", problem=f"{name!r} is not a variable name"
                )


# --- spec codec (for the checkpoint) ------------------------------------------


def _resources_json(cpu: int | None, memory: int | None) -> ckpt.JSONObject:
    resources: ckpt.JSONObject = {}
    if cpu is not None:
        resources["cpu"] = cpu
    if memory is not None:
        resources["memory"] = memory
    return resources


def spec_to_json(spec: PodSpec) -> ckpt.JSONObject:
    """Manifest-shaped JSON; resources in canonical units (cpu millicores, memory bytes)."""
    containers: list[ckpt.JSONValue] = []
    for container in spec.containers:
        containers.append(
            {
                "name": container.name,
                "command": list(container.command),
                "args": list(container.args),
                "env": [{"name": name, "value": value} for name, value in container.env],
                "workingDir": container.working_dir,
                "limits": _resources_json(container.cpu_limit_millicores, container.memory_limit_bytes),
                "requests": _resources_json(container.cpu_request_millicores, container.memory_request_bytes),
            }
        )
    return {
        "uid": spec.uid,
        "namespace": spec.namespace,
        "name": spec.name,
        "restartPolicy": str(spec.restart_policy),
        "terminationGracePeriodSeconds": spec.termination_grace_seconds,
        "containers": containers,
        "runAs": None if spec.run_as is None else {
            "uid": spec.run_as.uid, "gid": spec.run_as.gid, "noNewPrivs": spec.run_as.no_new_privs},
    }


def spec_from_json(obj: ckpt.JSONObject, *, path: str) -> PodSpec:
    """Inverse of spec_to_json; raises CheckpointError naming the field."""
    reader = ckpt.FieldReader(obj, path=path, where="spec")
    containers: list[ContainerSpec] = []
    for item in reader.objs("containers"):
        limits = item.obj("limits")
        requests = item.obj("requests")
        containers.append(
            ContainerSpec(
                name=item.get_str("name"),
                command=item.get_str_list("command"),
                args=item.get_str_list("args"),
                env=tuple((env.get_str("name"), env.get_str("value")) for env in item.objs("env")),
                working_dir=item.get_opt_str("workingDir"),
                cpu_limit_millicores=limits.get_opt_int("cpu"),
                memory_limit_bytes=limits.get_opt_int("memory"),
                cpu_request_millicores=requests.get_opt_int("cpu"),
                memory_request_bytes=requests.get_opt_int("memory"),
            )
        )
    policy_text = reader.get_str("restartPolicy")
    try:
        policy = RestartPolicy(policy_text)
    except ValueError as exc:
        raise ckpt.CheckpointError(path=path, detail=f"spec.restartPolicy: {policy_text!r} is not a policy") from exc
    return PodSpec(
        uid=reader.get_str("uid"),
        namespace=reader.get_str("namespace"),
        name=reader.get_str("name"),
        restart_policy=policy,
        termination_grace_seconds=reader.get_opt_float("terminationGracePeriodSeconds"),
        containers=tuple(containers),
        run_as=_run_as_from(reader.opt_obj("runAs")),
    )


def _run_as_from(reader: ckpt.FieldReader | None) -> RunAs | None:
    # Checkpoints from before pods had users have no runAs: those ran as the agent.
    if reader is None:
        return None
    return RunAs(uid=reader.get_int("uid"), gid=reader.get_int("gid"), no_new_privs=reader.get_bool("noNewPrivs"))


# setpriv (util-linux) drops to the pod's user right before the command: it
# runs after placement (the v2 / fallback placement wrapper must still be
# root to enter the cgroups) and is the one place no_new_privs is set
# without preexec_fn (unsafe in the agent's threaded process, see cgroups).
_SETPRIV: Final = shutil.which("setpriv", path=DEFAULT_PATH)


def privilege_argv(run_as: RunAs | None) -> list[str]:
    """What goes before a pod's command so it runs as ``run_as`` ([] when nothing changes)."""
    if run_as is None:
        return []
    if _SETPRIV is None:
        raise _StartFailure("starting a pod as its own user needs setpriv (util-linux), which is not on this node")
    out = [_SETPRIV, f"--reuid={run_as.uid}", f"--regid={run_as.gid}", "--clear-groups"]
    if run_as.no_new_privs:
        out.append("--no-new-privs")
    out.append("--")
    return out


def _termination_record(term: Termination | None) -> ckpt.TerminationRecord | None:
    if term is None:
        return None
    return ckpt.TerminationRecord(
        exit_code=term.exit_code,
        reason=str(term.reason),
        message=term.message,
        started_at=term.started_at,
        finished_at=term.finished_at,
        signal=term.signal,
    )


def _termination_from(record: ckpt.TerminationRecord | None, *, path: str) -> Termination | None:
    if record is None:
        return None
    try:
        reason = Reason(record.reason)
    except ValueError as exc:
        raise ckpt.CheckpointError(path=path, detail=f"termination reason {record.reason!r} is not known") from exc
    return Termination(
        exit_code=record.exit_code,
        reason=reason,
        message=record.message,
        started_at=record.started_at,
        finished_at=record.finished_at,
        signal=record.signal,
    )


# --- process plumbing ----------------------------------------------------------


async def _readable(fd: int) -> None:
    loop = asyncio.get_running_loop()
    future: asyncio.Future[None] = loop.create_future()

    def ready() -> None:
        if not future.done():
            future.set_result(None)

    loop.add_reader(fd, ready)
    try:
        await future
    finally:
        loop.remove_reader(fd)


async def _wait_event(event: asyncio.Event, timeout: float) -> bool:
    if event.is_set():
        return True
    waiter = asyncio.ensure_future(event.wait())
    try:
        await asyncio.wait({waiter}, timeout=max(0.0, timeout))
    finally:
        waiter.cancel()
    return event.is_set()


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _open_pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        # No pidfd (kernel < 5.3) or the process is already gone: callers
        # fall back to polling /proc with a bounded interval.
        return None


@dataclass(slots=True)
class _Exit:
    code: int | None
    signal: int | None


@dataclass(slots=True)
class _Proc:
    """A watched main process: our child (``popen``) or adopted from a checkpoint."""

    pid: int
    start_ticks: int
    popen: subprocess.Popen[bytes] | None
    pidfd: int | None

    def alive(self) -> bool:
        stat = read_stat(self.pid)
        return stat is not None and stat.start_ticks == self.start_ticks and not stat.exited

    def release(self) -> None:
        if self.popen is not None:
            try:
                self.popen.wait(timeout=0.5)
            except (subprocess.TimeoutExpired, ChildProcessError):
                pass
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


class _StartFailure(Exception):
    """A container cannot be started; the message says why (reported as StartError)."""


HOME_DIR: Final = "home"


def _append_line(path: Path, line: str) -> None:
    # Best effort: the log is where a user looks first, but failing to write
    # it must not hide the start error itself.
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        with open(fd, "a") as log_file:
            log_file.write(line + "\n")
    except OSError:
        pass


# How many (command, PATH) lookups _command_problem remembers; past it, it starts over.
_FOUND_LIMIT: Final = 256


def _command_problem(
    command: str, env: Mapping[str, str], cwd: str, *, found: dict[tuple[str, str], str]
) -> str | None:
    """Why ``command`` cannot be started, or None.

    ``found`` remembers where a bare command name was found in a PATH: the
    next start checks that file again (two system calls) instead of trying
    every PATH entry before it.  A command that disappeared is looked up
    anew; the check only has to tell a missing command from a present one,
    the exec itself searches PATH as always.
    """
    if not os.path.isdir(cwd):
        return f"working directory {cwd!r} does not exist"
    if "/" in command:
        path = command if os.path.isabs(command) else os.path.join(cwd, command)
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            return f"command {command!r} is not an executable file"
        return None
    search = env.get("PATH", os.defpath)
    key = (command, search)
    known = found.get(key)
    # shutil.which's test for a match: executable and not a directory.
    if known is not None and os.access(known, os.X_OK) and not os.path.isdir(known):
        return None
    path = shutil.which(command, path=search)
    if path is None:
        found.pop(key, None)
        return f"command {command!r} was not found in PATH={search}"
    if len(found) >= _FOUND_LIMIT:
        found.clear()
    found[key] = path
    return None


# --- mutable per-pod state (owned by the event loop) ----------------------------


@dataclass(slots=True)
class _Stop:
    reason: Reason
    message: str
    deadline: float


@dataclass(slots=True)
class _Container:
    spec: ContainerSpec
    log_path: Path
    state: ContainerState = ContainerState.WAITING
    waiting_reason: WaitingReason | None = WaitingReason.CONTAINER_CREATING
    cgroup: CgroupHandle | None = None
    proc: _Proc | None = None
    pid: int | None = None
    start_ticks: int | None = None
    started_at: float | None = None
    started_mono: float | None = None
    last_run_seconds: float = 0.0
    restart_count: int = 0
    backoff_index: int = 0
    oom_baseline: int = 0
    starting: bool = False
    final: bool = False
    memory_killed: bool = False
    lost_note: str = ""
    terminated: Termination | None = None
    last_termination: Termination | None = None

    def status(self) -> ContainerStatus:
        running = self.state is ContainerState.RUNNING
        return ContainerStatus(
            name=self.spec.name,
            state=self.state,
            restart_count=self.restart_count,
            log_path=str(self.log_path),
            pid=self.pid if running else None,
            started_at=self.started_at if running else None,
            waiting_reason=self.waiting_reason if self.state is ContainerState.WAITING else None,
            terminated=self.terminated,
            last_termination=self.last_termination,
        )

    def record(self) -> ckpt.ContainerRecord:
        return ckpt.ContainerRecord(
            name=self.spec.name,
            state=str(self.state),
            pid=self.pid,
            start_ticks=self.start_ticks,
            cgroup=() if self.cgroup is None else self.cgroup.paths,
            log_path=str(self.log_path),
            restart_count=self.restart_count,
            backoff_index=self.backoff_index,
            oom_kills_at_start=self.oom_baseline,
            started_at=self.started_at,
            starting=self.starting,
            waiting_reason=None if self.waiting_reason is None else str(self.waiting_reason),
            terminated=_termination_record(self.terminated),
            last_termination=_termination_record(self.last_termination),
        )


@dataclass(slots=True)
class _Pod:
    spec: PodSpec
    directory: Path
    containers: list[_Container]
    stop: _Stop | None = None
    stop_event: asyncio.Event = field(default_factory=asyncio.Event)
    done: asyncio.Event = field(default_factory=asyncio.Event)
    finished: bool = False
    reason: str | None = None
    message: str = ""
    # ``status`` is the latest *published* snapshot; ``latest`` the latest
    # computed one, which may still wait for the checkpoint write.
    status: PodStatus | None = None
    latest: PodStatus | None = None
    spec_json: ckpt.JSONObject = field(default_factory=dict)
    active: int = 0

    @property
    def uid(self) -> str:
        return self.spec.uid


# --- the runtime ----------------------------------------------------------------


class PodRuntime:
    """Runs pods on this node.  One instance per agent; use it from one event loop.

    Call ``adopt()`` once before anything else when a checkpoint may exist
    (``run()`` refuses to start otherwise), run ``watch()`` under the agent's
    supervisor, and ``close()`` on shutdown: closing stops watching but
    leaves the pods running for the next agent to adopt.
    """

    def __init__(
        self,
        *,
        data_dir: Path,
        cgroups: CgroupDriver,
        monitor: Monitor | None = None,
        clock: Clock | None = None,
        config: RuntimeConfig | None = None,
    ) -> None:
        self._data_dir = Path(data_dir)
        self._cgroups = cgroups
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._monitor = monitor if monitor is not None else Monitor(clock=self._clock.now)
        self._config = config if config is not None else RuntimeConfig()
        self._checkpoint_path = ckpt.path_for(self._data_dir)
        self._checkpoint_file = ckpt.CheckpointFile(self._checkpoint_path)
        self._needs_adopt = self._checkpoint_path.exists()
        self._adopt_called = False
        self._boot_id = read_boot_id()
        self._found_commands: dict[tuple[str, str], str] = {}
        self._dirs_ready = False
        self._seq = 0
        self._pods: dict[str, _Pod] = {}
        # The checkpoint, kept encoded per pod: a write re-encodes only the
        # pods in ``_stale`` and copies the others (see ``_flush``).
        self._records: dict[str, str] = {}
        self._stale: set[str] = set()
        self._file_stale = False
        self._unpublished: list[PodStatus] = []
        self._flush_handle: asyncio.TimerHandle | None = None
        self._flushed: asyncio.Future[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._changed = asyncio.Event()
        self._crashed = asyncio.Event()
        self._crash: PodTaskCrashed | None = None
        self._closed = False
        self.events: asyncio.Queue[PodStatus] = asyncio.Queue()
        # Called before every checkpoint write.  The agent writes its own
        # per-pod metadata there, so that file is never behind the checkpoint
        # (a pod is never started before its metadata is on disk) and both
        # are written once per batch.  Must not raise.
        self.before_write: Callable[[], None] | None = None

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
            await _wait_event(self._changed, remaining)

    async def wait(self, uid: str, *, timeout: float) -> PodStatus:
        """Wait until the pod has finished (every process gone)."""
        return await self.wait_for(uid, lambda status: status.finished, timeout=timeout)

    async def watch(self) -> None:
        """Return only by raising PodTaskCrashed when a supervision task fails; run it under the supervisor."""
        await self._crashed.wait()
        assert self._crash is not None
        raise self._crash

    # -- commands --

    async def run(self, spec: PodSpec) -> PodStatus:
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
        pod = _Pod(
            spec=spec,
            directory=directory,
            containers=[
                _Container(spec=c, log_path=directory / f"{c.name}.log", starting=True) for c in spec.containers
            ],
            spec_json=spec_to_json(spec),
        )
        self._pods[spec.uid] = pod
        self._emit(pod)
        try:
            # Written now, before anything is spawned: a crash from here on
            # leaves a checkpoint that says "maybe started", never "never
            # heard of it".  Other pods' pending changes share the write.
            self._flush(publish=False)
        except ckpt.CheckpointError:
            del self._pods[spec.uid]
            self._stale.discard(spec.uid)
            self._records.pop(spec.uid, None)
            self._unpublished = [status for status in self._unpublished if status.uid != spec.uid]
            raise
        log.info("pod %s: starting %d container(s)", spec.uid, len(spec.containers))
        for container in pod.containers:
            self._spawn(pod, container)
        self._start_supervision(pod)
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
            pod.stop = _Stop(reason=reason, message=message, deadline=self._clock.now() + grace)
            pod.reason = str(reason)
            pod.message = message
            pod.stop_event.set()
            log.info("pod %s: stopping (%s), grace %.1fs", uid, reason, grace)
            self._emit(pod)
        if grace > 0:
            self._signal_pod(pod, signal.SIGTERM)
            if await _wait_event(pod.done, grace):
                assert pod.status is not None
                return pod.status
            log.info("pod %s: still running after the %.1fs grace; sending SIGKILL", uid, grace)
        self._kill_pod(pod)
        if not await _wait_event(pod.done, self._config.kill_timeout_seconds):
            raise StopTimeoutError(
                uid=uid, pids=sorted(self._pod_pids(pod)), waited_seconds=grace + self._config.kill_timeout_seconds
            )
        assert pod.status is not None
        return pod.status

    async def forget(self, uid: str) -> None:
        """Drop a finished pod from memory and from the checkpoint (after the controller has its result).

        The pod's logs stay on disk; deleting them is the caller's decision.
        """
        pod = self._get(uid)
        if not pod.finished:
            raise PodNotFinishedError(uid=uid, phase=pod.status.phase if pod.status else PodPhase.PENDING)
        del self._pods[uid]
        self._stale.discard(uid)
        self._records.pop(uid, None)
        self._file_stale = True
        await self._durable()

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
        pods: list[_Pod] = []
        if checkpoint is not None:
            # Parse everything before touching any process, so a bad record
            # leaves nothing half-adopted (and run() stays refused).
            pods = [self._restore_pod(record, path=path) for record in checkpoint.pods]
            same_boot = checkpoint.boot_id == self._boot_id
            self._seq = max(self._seq, checkpoint.seq)
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
            if self._flushed is not None:
                self._flushed.set_exception(exc)
                self._flushed = None
        for pod in self._pods.values():
            for container in pod.containers:
                if container.proc is not None and container.proc.pidfd is not None:
                    os.close(container.proc.pidfd)
                    container.proc.pidfd = None

    # -- internals: bookkeeping --

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeClosedError()

    def _get(self, uid: str) -> _Pod:
        pod = self._pods.get(uid)
        if pod is None:
            raise PodNotFoundError(uid=uid)
        return pod

    def _pod_dir(self, uid: str) -> Path:
        return self._data_dir / "pods" / uid

    def home(self, uid: str) -> Path:
        """A pod's private HOME (and default working directory)."""
        return self._pod_dir(uid) / HOME_DIR

    def privilege_argv(self, uid: str) -> list[str]:
        """The prefix that runs a command as the pod's user (probes use it too); [] for an unknown pod."""
        pod = self._pods.get(uid)
        return privilege_argv(pod.spec.run_as) if pod is not None else []

    def _make_pod_dirs(self, directory: Path, run_as: RunAs | None) -> None:
        # The data dir, pods/ and the pod's dir can be passed through (0711)
        # but not listed or read: the pod's user reaches its HOME, and no one
        # else's logs (0600, root's) or files.
        if not self._dirs_ready:
            for d in (self._data_dir, self._data_dir / "pods"):
                d.mkdir(mode=0o711, parents=True, exist_ok=True)
                os.chmod(d, 0o711)
            self._dirs_ready = True
        directory.mkdir(mode=0o711, exist_ok=True)
        os.chmod(directory, 0o711)
        home = directory / HOME_DIR
        home.mkdir(mode=0o700, exist_ok=True)
        if run_as is not None:
            os.chown(home, run_as.uid, run_as.gid)
        os.chmod(home, 0o700)

    def _snapshot(self, pod: _Pod) -> PodStatus:
        containers = tuple(container.status() for container in pod.containers)
        phase = pod_phase(containers, restart_policy=pod.spec.restart_policy, terminal=pod.finished)
        if pod.finished and pod.stop is not None and pod.stop.reason is Reason.EVICTED:
            phase = PodPhase.FAILED  # an evicted pod failed, whatever its containers did
        return PodStatus(
            uid=pod.uid,
            phase=phase,
            containers=containers,
            at=self._clock.now(),
            seq=self._seq,
            finished=pod.finished,
            reason=pod.reason,
            message=pod.message,
        )

    # Checkpoint writes and status publication.
    #
    # A status change marks its pod stale and schedules one flush, at most
    # ``checkpoint_batch_seconds`` later; every change made until then shares
    # its one write.  The flush writes the file and only then publishes the
    # statuses it covers (``status()``, ``events``, ``wait_for()``), so
    # nothing outside the runtime learns of a change before a restarted
    # agent would: the controller hears of pods only through what is
    # published, and run() and stop() return only after the flush.
    #
    # Deferring a write is safe only while nothing irreversible depends on
    # it.  Spawning a process is irreversible, so the "starting" mark is
    # written synchronously (``_flush(publish=False)``, which takes every
    # other pending change along) before every spawn.  The pid that follows
    # is written by the next flush; a crash before then leaves "starting",
    # which adoption reports as a lost start and whose cgroup it empties,
    # exactly as for a crash during the spawn itself.  run() returns only
    # once the pid is written, so whoever started a pod can count on its
    # re-adoption.

    def _record(self, pod: _Pod) -> ckpt.PodRecord:
        stop = None
        if pod.stop is not None:
            stop = ckpt.StopRecord(reason=str(pod.stop.reason), message=pod.stop.message, deadline=pod.stop.deadline)
        return ckpt.PodRecord(
            uid=pod.uid,
            spec=pod.spec_json,
            phase=str(pod.latest.phase if pod.latest is not None else PodPhase.PENDING),
            finished=pod.finished,
            reason=pod.reason,
            message=pod.message,
            stop=stop,
            containers=tuple(container.record() for container in pod.containers),
        )

    def _mark(self, pod: _Pod) -> None:
        """The pod's record changed: rewrite it with the next flush."""
        self._stale.add(pod.uid)
        self._schedule_flush(self._config.checkpoint_batch_seconds)

    def _schedule_flush(self, delay: float) -> None:
        """Make sure a flush runs within ``delay`` seconds."""
        if self._closed:
            return
        loop = asyncio.get_running_loop()
        handle = self._flush_handle
        if handle is not None:
            if handle.when() <= loop.time() + delay:
                return
            handle.cancel()
        self._flush_handle = loop.call_later(delay, self._scheduled_flush)

    def _scheduled_flush(self) -> None:
        self._flush_handle = None
        try:
            self._flush(publish=True)
        except Exception as exc:
            # A CheckpointError (disk) or a bug.  Nothing covered by this write
            # is published; the runtime stops as it would for any supervision
            # failure, since it can no longer keep its record ahead of what it
            # reports, and whoever waits for the write gets the error.
            log.error("checkpoint write failed: %s", exc, exc_info=not isinstance(exc, ckpt.CheckpointError))
            if self._flushed is not None:
                self._flushed.set_exception(exc)
                self._flushed = None
            if self._crash is None:
                self._crash = PodTaskCrashed(task="checkpoint", error=exc)
                self._crashed.set()

    def _flush(self, *, publish: bool) -> None:
        """Write pending changes now; with ``publish``, then publish the statuses the write covers.

        Raises CheckpointError with nothing published; the changes stay
        pending for the next attempt.
        """
        if self.before_write is not None:
            self.before_write()
        if self._stale or self._file_stale:
            for uid in self._stale:
                pod = self._pods.get(uid)
                if pod is not None:
                    self._records[uid] = ckpt.encode_pod(self._record(pod))
            self._stale.clear()
            self._file_stale = True
            self._checkpoint_file.write(
                boot_id=self._boot_id, seq=self._seq, written_at=self._clock.now(), pods=self._records.values()
            )
            self._file_stale = False
        if not publish:
            return
        unpublished, self._unpublished = self._unpublished, []
        for status in unpublished:
            pod = self._pods.get(status.uid)
            if pod is not None:
                pod.status = status
            self.events.put_nowait(status)
        if unpublished:
            changed, self._changed = self._changed, asyncio.Event()
            changed.set()
        flushed, self._flushed = self._flushed, None
        if flushed is not None and not flushed.done():
            flushed.set_result(None)

    async def _durable(self) -> None:
        """Return once every change made so far is written and published."""
        if self._closed or not (self._flush_handle or self._unpublished or self._stale or self._file_stale):
            return  # close() writes what is left
        self._schedule_flush(self._config.checkpoint_batch_seconds)
        if self._flushed is None:
            self._flushed = asyncio.get_running_loop().create_future()
        # Shielded: one waiter being cancelled must not cancel the others' wait.
        await asyncio.shield(self._flushed)

    def _emit(self, pod: _Pod) -> PodStatus:
        """A new status for the pod; written and published by the next flush."""
        self._seq += 1
        status = self._snapshot(pod)
        pod.latest = status
        self._unpublished.append(status)
        self._mark(pod)
        return status

    def _start_task(self, coro: Coroutine[Any, Any, None], *, name: str) -> None:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        error = task.exception()
        if error is None:
            return
        if isinstance(error, PodRuntimeError) and not isinstance(error, PodTaskCrashed):
            # A resumed stop that timed out: already explained by the error.
            log.error("%s: %s", task.get_name(), error)
            return
        log.error("task %s crashed", task.get_name(), exc_info=error)
        if self._crash is None:
            self._crash = PodTaskCrashed(task=task.get_name(), error=error)
            self._crashed.set()

    def _start_supervision(self, pod: _Pod) -> None:
        pod.active = sum(1 for container in pod.containers if not container.final)
        self._start_task(self._supervise(pod), name=f"pod/{pod.uid}")

    # -- internals: processes --

    def _environment(self, spec: ContainerSpec, home: Path) -> dict[str, str]:
        env = dict(self._config.base_env)
        env["HOME"] = str(home)
        for name, value in spec.env:
            env[name] = value
        return env

    def _spawn(self, pod: _Pod, container: _Container) -> None:
        """Start one run of a container.  Synchronous: nothing interleaves with it."""
        spec = container.spec
        now = self._clock.now()
        container.memory_killed = False
        home = pod.directory / HOME_DIR
        env = self._environment(spec, home)
        argv = [*spec.command, *spec.args]
        cwd = spec.working_dir or str(home)
        try:
            problem = _command_problem(argv[0], env, cwd, found=self._found_commands)
            if problem is not None:
                raise _StartFailure(problem)
            argv = [*privilege_argv(pod.spec.run_as), *argv]
            if container.cgroup is None:
                container.cgroup = self._cgroups.create(
                    pod_uid=pod.uid, container=spec.name, limits=spec.cgroup_limits()
                )
            container.oom_baseline = self._cgroups.oom_kills(container.cgroup)
            # Root's and private: the pod writes through the fd it inherits,
            # and no other pod can read it.
            log_fd = os.open(container.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)

            def start(launch: list[str]) -> subprocess.Popen[bytes]:
                return subprocess.Popen(
                    launch,
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

            try:
                # Placement may fork from another thread; this one waits, so
                # the spawn stays one step nothing else interleaves with.
                popen = self._cgroups.spawn(container.cgroup, argv, start)
            finally:
                os.close(log_fd)
        except (_StartFailure, CgroupError, OSError, subprocess.SubprocessError) as exc:
            message = str(exc)
            log.warning("pod %s container %s could not start: %s", pod.uid, spec.name, message)
            _append_line(container.log_path, f"sluicegate: could not start the container: {message}")
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
            return
        stat = read_stat(popen.pid)
        # The child is not reaped before we look, so its /proc entry exists.
        start_ticks = stat.start_ticks if stat is not None else 0
        container.proc = _Proc(pid=popen.pid, start_ticks=start_ticks, popen=popen, pidfd=_open_pidfd(popen.pid))
        container.pid = popen.pid
        container.start_ticks = start_ticks
        container.started_at = now
        container.started_mono = self._clock.monotonic()
        container.state = ContainerState.RUNNING
        container.waiting_reason = None
        container.terminated = None
        container.starting = False
        container.lost_note = ""
        log.info("pod %s container %s started: pid %d", pod.uid, spec.name, popen.pid)

    async def _wait_exit(self, proc: _Proc) -> _Exit:
        while True:
            if proc.pidfd is not None:
                await _readable(proc.pidfd)
            elif proc.alive():
                await asyncio.sleep(self._config.exit_poll_seconds)
                continue
            if proc.popen is None:
                if proc.alive():
                    await asyncio.sleep(self._config.exit_poll_seconds)
                    continue
                return _Exit(code=None, signal=None)
            # WNOWAIT leaves the child a zombie until its group is drained: a
            # zombie keeps its pid, hence the group id, from being reused, so
            # killpg() cannot hit an unrelated group while we clean up.
            try:
                info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT | os.WNOHANG)
            except ChildProcessError:
                return _Exit(code=None, signal=None)
            if info is None:
                await asyncio.sleep(self._config.exit_poll_seconds)
                continue
            if info.si_code == os.CLD_EXITED:
                return _Exit(code=info.si_status, signal=None)
            return _Exit(code=128 + info.si_status, signal=info.si_status)

    def _leftovers(self, container: _Container, pgid: int | None) -> tuple[frozenset[int], frozenset[int]]:
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

    async def _drain(self, pod: _Pod, container: _Container, pgid: int | None) -> frozenset[int]:
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
                _killpg(pgid, signal.SIGKILL)
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

    def _classify(self, pod: _Pod, container: _Container, exit: _Exit, finished_at: float) -> Termination:
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
            message = f"exited with code {code}" if exit.signal is None else f"killed by {_signal_name(exit.signal)}"
        return Termination(
            exit_code=code,
            reason=reason,
            message=message,
            started_at=container.started_at,
            finished_at=finished_at,
            signal=exit.signal,
        )

    async def _await_termination(self, pod: _Pod, container: _Container) -> Termination:
        proc = container.proc
        if proc is not None:
            exit = await self._wait_exit(proc)
            # The group id is the main pid.  It stays ours while the child is
            # an unreaped zombie or any member is alive.
            pgid: int | None = proc.pid
        else:
            # A recorded process we could not re-attach.  Its group is ours
            # only if the pid is free now: a live process with that pid is a
            # different one (recycled) and must not be touched.
            exit = _Exit(code=None, signal=None)
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

    def _pod_pids(self, pod: _Pod) -> frozenset[int]:
        pids: set[int] = set()
        for container in pod.containers:
            group, in_cgroup = self._leftovers(container, container.proc.pid if container.proc is not None else None)
            pids |= group | in_cgroup
        return frozenset(pids)

    def _signal_group(self, container: _Container, sig: int) -> None:
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
        if proc.popen is not None:
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
            _killpg(pgid, sig)

    def _signal_pod(self, pod: _Pod, sig: int) -> None:
        for container in pod.containers:
            self._signal_group(container, sig)

    def _kill_pod(self, pod: _Pod) -> None:
        for container in pod.containers:
            self._signal_group(container, signal.SIGKILL)
            if not container.final:
                self._cgroups.kill(container.cgroup)

    # -- internals: supervision --

    async def _supervise(self, pod: _Pod) -> None:
        watcher: asyncio.Task[None] | None = None
        if self._cgroups.kind == "none" and any(c.spec.memory_limit_bytes is not None for c in pod.containers):
            watcher = asyncio.create_task(self._watch_memory(pod), name=f"pod/{pod.uid}/memory")
        try:
            async with asyncio.TaskGroup() as group:
                for container in pod.containers:
                    if not container.final:
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

    async def _run_container(self, pod: _Pod, container: _Container) -> None:
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

    async def _backoff(self, pod: _Pod, delay: float) -> bool:
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

    async def _watch_memory(self, pod: _Pod) -> None:
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

    async def _resume_stop(self, pod: _Pod, grace: float) -> None:
        assert pod.stop is not None
        await self.stop(pod.uid, grace_seconds=grace, reason=pod.stop.reason, message=pod.stop.message)

    # -- internals: adoption --

    def _restore_pod(self, record: ckpt.PodRecord, *, path: str) -> _Pod:
        spec = spec_from_json(record.spec, path=path)
        if spec.uid != record.uid:
            raise ckpt.CheckpointError(path=path, detail=f"pod {record.uid!r} holds the spec of {spec.uid!r}")
        by_name = {c.name: c for c in record.containers}
        containers: list[_Container] = []
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
            terminated = _termination_from(rec.terminated, path=path)
            containers.append(
                _Container(
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
                    last_termination=_termination_from(rec.last_termination, path=path),
                )
            )
        pod = _Pod(spec=spec, directory=self._pod_dir(spec.uid), containers=containers, spec_json=record.spec)
        pod.finished = record.finished
        pod.reason = record.reason
        pod.message = record.message
        if record.stop is not None:
            try:
                reason = Reason(record.stop.reason)
            except ValueError as exc:
                raise ckpt.CheckpointError(path=path, detail=f"pod {record.uid!r}: {exc}") from exc
            pod.stop = _Stop(reason=reason, message=record.stop.message, deadline=record.stop.deadline)
            pod.stop_event.set()
        return pod

    def _reattach(
        self, pod: _Pod, container: _Container, *, same_boot: bool
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
        proc: _Proc | None = None
        if not same_boot:
            why = "the node rebooted since the checkpoint was written"
        elif pid is None or ticks is None:
            why = "no process identity was recorded"
        else:
            # Open the pidfd first, then check the start time: the pidfd pins
            # whichever process had the pid when it was opened, so a check
            # that passes afterwards proves the pidfd is ours.
            pidfd = _open_pidfd(pid)
            stat = read_stat(pid)
            if stat is None:
                why = "the process is gone"
            elif stat.start_ticks != ticks:
                why = f"pid {pid} now belongs to another process (started at tick {stat.start_ticks}, recorded {ticks})"
            elif stat.exited:
                why = "the process has exited"
            else:
                proc = _Proc(pid=pid, start_ticks=ticks, popen=None, pidfd=pidfd)
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
