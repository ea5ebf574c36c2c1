"""Workloads: what is asked for (spec) and what happened to it (status)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sluicegate.model.names import ClusterQueueName, FlavorName, WorkloadKey, workload_key
from sluicegate.model.pods import PodRecord
from sluicegate.model.resources import FlavorResource
from sluicegate.model.slotinit import slot_init
from sluicegate.model.taints import Toleration
from sluicegate.model.topology import TopologyAssignment, TopologyRequest


@dataclass(frozen=True, slots=True)
class Probe:
    """A readiness probe (Kubernetes semantics and defaults); exactly one action is set."""

    exec_command: tuple[str, ...] = ()
    tcp_port: int | None = None
    http_path: str | None = None
    http_port: int | None = None
    initial_delay_seconds: int = 0
    period_seconds: int = 10
    timeout_seconds: int = 1
    success_threshold: int = 1
    failure_threshold: int = 3


@dataclass(frozen=True, slots=True)
class SecurityContext:
    """The securityContext fields sluicegate honours (None: not set); see sluicegate.security.podsecurity.

    ``allow_privilege_escalation`` exists on containers only.
    """

    run_as_user: int | None = None
    run_as_group: int | None = None
    run_as_non_root: bool | None = None
    allow_privilege_escalation: bool | None = None


@dataclass(frozen=True, slots=True)
class Container:
    name: str
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    working_dir: str = ""
    requests: Mapping[str, int] = field(default_factory=dict)
    limits: Mapping[str, int] = field(default_factory=dict)
    readiness_probe: Probe | None = None
    security_context: SecurityContext | None = None


@dataclass(frozen=True, slots=True)
class PodSet:
    name: str
    count: int
    # Partial admission: the scheduler may admit as few as min_count pods.
    min_count: int | None = None
    # Effective per-pod requests (Kubernetes' rule: the larger of the sum of
    # app containers and the largest init container), canonical units.
    requests: Mapping[str, int] = field(default_factory=dict)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    containers: tuple[Container, ...] = ()
    init_containers: tuple[Container, ...] = ()
    restart_policy: str = "Never"
    termination_grace_period_seconds: int = 30
    priority_class_name: str = ""
    # The pod-level securityContext; a container's own fields override it.
    security_context: SecurityContext | None = None
    # Topology Aware Scheduling: from topologyRequest or the podset annotations (docs/topology.md).
    topology_request: TopologyRequest | None = None

    def total_requests(self, count: int | None = None) -> dict[str, int]:
        n = self.count if count is None else count
        return {res: qty * n for res, qty in self.requests.items()}


@slot_init
@dataclass(frozen=True, slots=True)
class Condition:
    type: str
    status: str  # "True" | "False" | "Unknown"
    reason: str
    message: str
    last_transition_time: float

    @property
    def is_true(self) -> bool:
        return self.status == "True"


@slot_init
@dataclass(frozen=True, slots=True)
class PodSetAssignment:
    name: str
    flavors: Mapping[str, FlavorName]
    resource_usage: Mapping[str, int]
    count: int
    # Set when the pod set was admitted on a flavor with a topologyName.
    topology_assignment: TopologyAssignment | None = None


@slot_init
@dataclass(frozen=True, slots=True)
class Admission:
    cluster_queue: ClusterQueueName
    pod_set_assignments: tuple[PodSetAssignment, ...]

    def usage(self) -> dict[FlavorResource, int]:
        """Quota this admission holds, per flavor/resource."""
        out: dict[FlavorResource, int] = {}
        for psa in self.pod_set_assignments:
            for res, qty in psa.resource_usage.items():
                flavor = psa.flavors.get(res)
                if flavor is None:
                    continue
                key = FlavorResource(flavor, res)
                out[key] = out.get(key, 0) + qty
        return out


@slot_init
@dataclass(frozen=True, slots=True)
class RequeueState:
    count: int = 0
    requeue_at: float | None = None


@slot_init
@dataclass(frozen=True, slots=True)
class WorkloadStatus:
    conditions: tuple[Condition, ...] = ()
    admission: Admission | None = None
    requeue_state: RequeueState | None = None
    reclaimable_pods: Mapping[str, int] = field(default_factory=dict)
    accumulated_past_execution_time_seconds: int = 0
    # sluicegate's own status (stored under the document's status.extra):
    # the pods of the current admission, where each runs and how it is doing;
    pods: tuple[PodRecord, ...] = ()
    # those of the last admission once its quota was given back (their logs remain);
    last_pods: tuple[PodRecord, ...] = ()
    # being deleted: its pods are stopped first, then the workload goes;
    deleting: bool = False
    # (reason, message) when a timer ended it (a Job's activeDeadlineSeconds): stop, then finish.
    terminate: tuple[str, str] | None = None
    # Any other keys of status.extra, kept as they were.
    extra: Mapping[str, object] = field(default_factory=dict)

    def condition(self, type_: str) -> Condition | None:
        for c in self.conditions:
            if c.type == type_:
                return c
        return None

    def is_true(self, type_: str) -> bool:
        c = self.condition(type_)
        return c is not None and c.is_true


# The status of a workload nothing has happened to yet: one value for all of them.
NO_STATUS = WorkloadStatus()


@slot_init
@dataclass(frozen=True, slots=True)
class Workload:
    namespace: str
    name: str
    uid: str
    # Seconds since the epoch; Kueue orders FIFO by this, ties broken by uid.
    creation_timestamp: float
    queue_name: str
    pod_sets: tuple[PodSet, ...]
    priority: int = 0
    # (kind, name) of the class the priority came from, if any.
    priority_class: tuple[str, str] | None = None
    active: bool = True
    maximum_execution_time_seconds: int | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    generation: int = 1
    # Shared until something happens to the workload (frozen, never changed in place).
    status: WorkloadStatus = NO_STATUS
    # "namespace/name", made once per value: the cache, the queues, the timers
    # and every commit read it, far more often than workloads are made.
    key: WorkloadKey = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", workload_key(self.namespace, self.name))

    @property
    def has_quota_reservation(self) -> bool:
        return self.status.is_true("QuotaReserved")

    @property
    def is_admitted(self) -> bool:
        return self.status.is_true("Admitted")

    @property
    def is_finished(self) -> bool:
        return self.status.is_true("Finished")

    def counts_after_reclaim(self) -> tuple[int, ...]:
        """Each pod set's count less its reclaimable pods (never below 0).

        Kueue (``podSetsCountsAfterReclaim``, ReclaimablePods on by default)
        uses these counts both to assign flavors to a pending workload and to
        scale down what an admitted one holds: pods that completed need no
        quota, whether or not the workload holds any now.
        """
        reclaim = self.status.reclaimable_pods
        return tuple(ps.count - min(reclaim.get(ps.name, 0), ps.count) for ps in self.pod_sets)
