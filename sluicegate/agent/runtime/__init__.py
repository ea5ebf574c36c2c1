"""Pods as Linux processes: start, watch, restart, stop, and re-adopt after an agent restart.

A pod is a list of containers; each container is one command started in its
own session (so its own process group), with stdout and stderr appended to
``<data_dir>/pods/<uid>/<container>.log`` and, where the node has them, its
own cgroups (see ``cgroups``).  Processes never hold a pipe to the agent,
so they survive the agent dying; systemd's ``KillMode=process`` keeps the
unit side from killing them.

A pod with ``run_as`` runs as that user and group, without supplementary
groups and (``no_new_privs``) unable to gain privileges through exec: the
command is started by a spawner process for that user (``zygote``,
``spawning``) after it was placed in its cgroups, or through ``setpriv``
on the wrapper path.
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

The package is layered, each module importing only those above it:
``values`` (statuses, settings; the pod itself is :mod:`sluicegate.agent.pod`), ``errors``, ``rules`` (the
kubelet's rules as pure functions), ``codec`` (checkpoint JSON),
``process`` (pidfd, signals, setpriv), ``spawning`` (the spawner processes,
``zygote``), ``state`` (mutable per-pod state),
then the runtime itself in three layers: ``bookkeeping`` (snapshots, the
batched checkpoint write), ``supervision`` (processes) and ``core``
(``PodRuntime``'s commands and queries).
"""


from __future__ import annotations

from sluicegate.agent.pod import Container, Pod, RestartPolicy, RunAs
from sluicegate.agent.runtime.codec import (
    spec_from_json,
    spec_to_json,
)
from sluicegate.agent.runtime.core import (
    PodRuntime,
)
from sluicegate.agent.runtime.errors import (
    CheckpointNotAdoptedError,
    PodDirectoryError,
    PodExistsError,
    PodNotFinishedError,
    PodNotFoundError,
    PodRuntimeError,
    PodSpecError,
    PodTaskCrashed,
    RuntimeClosedError,
    StopTimeoutError,
    WaitTimeoutError,
)
from sluicegate.agent.runtime.process import (
    privilege_argv,
)
from sluicegate.agent.runtime.rules import (
    pod_phase,
    restart_delay,
    should_restart,
    validate_pod_spec,
)
from sluicegate.agent.runtime.values import (
    DEFAULT_PATH,
    EXIT_CODE_OOM,
    EXIT_CODE_START_ERROR,
    EXIT_CODE_UNKNOWN,
    STOP_REASONS,
    AdoptedContainer,
    AdoptionReport,
    Clock,
    ContainerState,
    ContainerStatus,
    LostContainer,
    PodPhase,
    PodStatus,
    Reason,
    RuntimeConfig,
    SystemClock,
    Termination,
    WaitingReason,
)

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
    "DEFAULT_PATH",
    "Container",
    "Pod",
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
