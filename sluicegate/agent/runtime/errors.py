"""The runtime's errors; callers match on the subclasses of PodRuntimeError."""

from __future__ import annotations

from collections.abc import Sequence

from sluicegate.agent.runtime.values import PodPhase, PodStatus


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
