"""The agent's one pod type: what the link decodes, the node admits, the runtime runs and the checkpoint keeps.

A :class:`Pod` is built once -- from the controller's RunPod message
(:func:`sluicegate.agent.link.pod_from_proto`), from a static manifest
(:func:`sluicegate.agent.static.parse_manifest`) or from a checkpoint
(:func:`sluicegate.agent.runtime.spec_from_json`) -- and is never converted
into another shape: the node adds the user it resolved (``run_as``) with one
:func:`dataclasses.replace`, and the runtime keeps that value.

Resources are in canonical units (cpu millicores, memory bytes), keyed by
resource name as in a manifest; the runtime reads only cpu and memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from sluicegate.agent.cgroups import CgroupLimits
from sluicegate.agent.probes import ProbeSpec

# The API's terminationGracePeriodSeconds default: what a pod that names no
# grace gets from the node (the runtime's own default, RuntimeConfig's, only
# applies to pods handed to it directly).
DEFAULT_POD_GRACE_SECONDS = 30.0


class RestartPolicy(StrEnum):
    ALWAYS = "Always"
    ON_FAILURE = "OnFailure"
    NEVER = "Never"


@dataclass(frozen=True, slots=True)
class RunAs:
    """A pod's user and group; no supplementary groups; ``no_new_privs``: PR_SET_NO_NEW_PRIVS before exec."""

    uid: int
    gid: int
    no_new_privs: bool = True


@dataclass(frozen=True, slots=True)
class RequestedSecurity:
    """A container's effective securityContext as the controller (or a static manifest) sends it (None: unset)."""

    run_as_user: int | None = None
    run_as_group: int | None = None
    run_as_non_root: bool | None = None
    allow_privilege_escalation: bool | None = None


@dataclass(frozen=True, slots=True)
class Container:
    """One container: a command line with its environment and resources (canonical units).

    ``env`` is ordered as in a manifest; a later entry wins.  ``$(VAR)``
    references are passed through literally (not expanded).
    ``readiness_probe`` and ``security`` are the node's (the runtime ignores
    them and the checkpoint's runtime record does not hold them).
    """

    name: str
    command: tuple[str, ...]
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    working_dir: str | None = None
    requests: Mapping[str, int] = field(default_factory=dict)
    limits: Mapping[str, int] = field(default_factory=dict)
    readiness_probe: ProbeSpec | None = None
    security: RequestedSecurity | None = None
    # cgroup v1 devices.deny rules: other pods' device files (see sluicegate.agent.devices).
    device_deny: tuple[str, ...] = ()

    @property
    def cpu_limit_millicores(self) -> int | None:
        return self.limits.get("cpu")

    @property
    def memory_limit_bytes(self) -> int | None:
        return self.limits.get("memory")

    @property
    def cpu_request_millicores(self) -> int | None:
        return self.requests.get("cpu")

    @property
    def memory_request_bytes(self) -> int | None:
        return self.requests.get("memory")

    def cgroup_limits(self) -> CgroupLimits:
        # A limit without a request means request == limit in Kubernetes; the
        # controller normally fills that in, this keeps the weight right anyway.
        limit = self.limits.get("cpu")
        request = self.requests.get("cpu")
        return CgroupLimits(
            cpu_limit_millicores=limit,
            cpu_request_millicores=request if request is not None else limit,
            memory_limit_bytes=self.limits.get("memory"),
            device_deny=self.device_deny,
        )


@dataclass(frozen=True, slots=True)
class Pod:
    """A pod this node runs, from the controller or a static manifest.

    ``termination_grace_seconds``: None leaves the grace to whoever stops the
    pod -- the node gives such a pod :data:`DEFAULT_POD_GRACE_SECONDS`, the
    runtime its ``RuntimeConfig.default_grace_seconds``.  ``run_as``: who the
    processes run as (see sluicegate.security.podsecurity); None keeps the
    agent's own user (an agent that is not root cannot switch); set by the
    node at admission.  ``static``/``source``: a static pod and the manifest
    file (name within the static-pod directory) it came from.
    """

    uid: str
    containers: tuple[Container, ...]
    namespace: str = "default"
    name: str = ""
    workload: str = ""
    pod_set: str = ""
    index: int = 0
    restart_policy: RestartPolicy = RestartPolicy.NEVER
    termination_grace_seconds: float | None = None
    priority: int = 0
    priority_class: str = ""
    static: bool = False
    source: str = ""
    run_as: RunAs | None = None
