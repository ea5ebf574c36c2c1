"""Kubelet rules as pure functions: pod phase, restart policy and back-off, spec validation."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from sluicegate.agent.pod import Pod, RestartPolicy
from sluicegate.agent.runtime.errors import PodSpecError
from sluicegate.agent.runtime.values import (
    ContainerState,
    ContainerStatus,
    PodPhase,
    Reason,
    Termination,
)


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


def validate_pod_spec(spec: Pod) -> None:
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
