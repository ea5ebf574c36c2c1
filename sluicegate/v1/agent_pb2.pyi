from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class EnvVar(_message.Message):
    __slots__ = ("name", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: str
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class Probe(_message.Message):
    __slots__ = ("exec", "tcp_port", "http_get_path", "http_port", "initial_delay_seconds", "period_seconds", "timeout_seconds", "failure_threshold", "success_threshold")
    EXEC_FIELD_NUMBER: _ClassVar[int]
    TCP_PORT_FIELD_NUMBER: _ClassVar[int]
    HTTP_GET_PATH_FIELD_NUMBER: _ClassVar[int]
    HTTP_PORT_FIELD_NUMBER: _ClassVar[int]
    INITIAL_DELAY_SECONDS_FIELD_NUMBER: _ClassVar[int]
    PERIOD_SECONDS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    FAILURE_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    exec: _containers.RepeatedScalarFieldContainer[str]
    tcp_port: int
    http_get_path: str
    http_port: int
    initial_delay_seconds: float
    period_seconds: float
    timeout_seconds: float
    failure_threshold: int
    success_threshold: int
    def __init__(self, exec: _Optional[_Iterable[str]] = ..., tcp_port: _Optional[int] = ..., http_get_path: _Optional[str] = ..., http_port: _Optional[int] = ..., initial_delay_seconds: _Optional[float] = ..., period_seconds: _Optional[float] = ..., timeout_seconds: _Optional[float] = ..., failure_threshold: _Optional[int] = ..., success_threshold: _Optional[int] = ...) -> None: ...

class Container(_message.Message):
    __slots__ = ("name", "command", "args", "env", "working_dir", "requests", "limits", "readiness_probe", "run_as_user", "run_as_group", "run_as_non_root", "allow_privilege_escalation")
    class RequestsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class LimitsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    WORKING_DIR_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    READINESS_PROBE_FIELD_NUMBER: _ClassVar[int]
    RUN_AS_USER_FIELD_NUMBER: _ClassVar[int]
    RUN_AS_GROUP_FIELD_NUMBER: _ClassVar[int]
    RUN_AS_NON_ROOT_FIELD_NUMBER: _ClassVar[int]
    ALLOW_PRIVILEGE_ESCALATION_FIELD_NUMBER: _ClassVar[int]
    name: str
    command: _containers.RepeatedScalarFieldContainer[str]
    args: _containers.RepeatedScalarFieldContainer[str]
    env: _containers.RepeatedCompositeFieldContainer[EnvVar]
    working_dir: str
    requests: _containers.ScalarMap[str, int]
    limits: _containers.ScalarMap[str, int]
    readiness_probe: Probe
    run_as_user: int
    run_as_group: int
    run_as_non_root: bool
    allow_privilege_escalation: bool
    def __init__(self, name: _Optional[str] = ..., command: _Optional[_Iterable[str]] = ..., args: _Optional[_Iterable[str]] = ..., env: _Optional[_Iterable[_Union[EnvVar, _Mapping]]] = ..., working_dir: _Optional[str] = ..., requests: _Optional[_Mapping[str, int]] = ..., limits: _Optional[_Mapping[str, int]] = ..., readiness_probe: _Optional[_Union[Probe, _Mapping]] = ..., run_as_user: _Optional[int] = ..., run_as_group: _Optional[int] = ..., run_as_non_root: _Optional[bool] = ..., allow_privilege_escalation: _Optional[bool] = ...) -> None: ...

class PodSpec(_message.Message):
    __slots__ = ("uid", "name", "namespace", "workload", "workload_uid", "pod_set", "index", "containers", "init_containers", "restart_policy", "termination_grace_seconds", "priority", "priority_class", "requests", "labels")
    class RequestsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    UID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_UID_FIELD_NUMBER: _ClassVar[int]
    POD_SET_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    CONTAINERS_FIELD_NUMBER: _ClassVar[int]
    INIT_CONTAINERS_FIELD_NUMBER: _ClassVar[int]
    RESTART_POLICY_FIELD_NUMBER: _ClassVar[int]
    TERMINATION_GRACE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_CLASS_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    uid: str
    name: str
    namespace: str
    workload: str
    workload_uid: str
    pod_set: str
    index: int
    containers: _containers.RepeatedCompositeFieldContainer[Container]
    init_containers: _containers.RepeatedCompositeFieldContainer[Container]
    restart_policy: str
    termination_grace_seconds: float
    priority: int
    priority_class: str
    requests: _containers.ScalarMap[str, int]
    labels: _containers.ScalarMap[str, str]
    def __init__(self, uid: _Optional[str] = ..., name: _Optional[str] = ..., namespace: _Optional[str] = ..., workload: _Optional[str] = ..., workload_uid: _Optional[str] = ..., pod_set: _Optional[str] = ..., index: _Optional[int] = ..., containers: _Optional[_Iterable[_Union[Container, _Mapping]]] = ..., init_containers: _Optional[_Iterable[_Union[Container, _Mapping]]] = ..., restart_policy: _Optional[str] = ..., termination_grace_seconds: _Optional[float] = ..., priority: _Optional[int] = ..., priority_class: _Optional[str] = ..., requests: _Optional[_Mapping[str, int]] = ..., labels: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ContainerStatus(_message.Message):
    __slots__ = ("name", "state", "exit_code", "reason", "restart_count", "pid", "ready")
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RESTART_COUNT_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    name: str
    state: str
    exit_code: int
    reason: str
    restart_count: int
    pid: int
    ready: bool
    def __init__(self, name: _Optional[str] = ..., state: _Optional[str] = ..., exit_code: _Optional[int] = ..., reason: _Optional[str] = ..., restart_count: _Optional[int] = ..., pid: _Optional[int] = ..., ready: _Optional[bool] = ...) -> None: ...

class PodStatus(_message.Message):
    __slots__ = ("uid", "name", "namespace", "workload", "phase", "reason", "message", "containers", "ready", "started_at", "finished_at", "rss_bytes", "cpu_seconds", "static", "requests", "priority", "qos_class", "gpu_memory_bytes", "gpu_utilization_percent")
    class RequestsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    UID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CONTAINERS_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    RSS_BYTES_FIELD_NUMBER: _ClassVar[int]
    CPU_SECONDS_FIELD_NUMBER: _ClassVar[int]
    STATIC_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    QOS_CLASS_FIELD_NUMBER: _ClassVar[int]
    GPU_MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    GPU_UTILIZATION_PERCENT_FIELD_NUMBER: _ClassVar[int]
    uid: str
    name: str
    namespace: str
    workload: str
    phase: str
    reason: str
    message: str
    containers: _containers.RepeatedCompositeFieldContainer[ContainerStatus]
    ready: bool
    started_at: float
    finished_at: float
    rss_bytes: int
    cpu_seconds: float
    static: bool
    requests: _containers.ScalarMap[str, int]
    priority: int
    qos_class: str
    gpu_memory_bytes: int
    gpu_utilization_percent: float
    def __init__(self, uid: _Optional[str] = ..., name: _Optional[str] = ..., namespace: _Optional[str] = ..., workload: _Optional[str] = ..., phase: _Optional[str] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ..., containers: _Optional[_Iterable[_Union[ContainerStatus, _Mapping]]] = ..., ready: _Optional[bool] = ..., started_at: _Optional[float] = ..., finished_at: _Optional[float] = ..., rss_bytes: _Optional[int] = ..., cpu_seconds: _Optional[float] = ..., static: _Optional[bool] = ..., requests: _Optional[_Mapping[str, int]] = ..., priority: _Optional[int] = ..., qos_class: _Optional[str] = ..., gpu_memory_bytes: _Optional[int] = ..., gpu_utilization_percent: _Optional[float] = ...) -> None: ...

class NodeInfo(_message.Message):
    __slots__ = ("name", "labels", "capacity", "allocatable", "agent_version", "boot_id", "health_address", "taints")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class CapacityEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    class AllocatableEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    ALLOCATABLE_FIELD_NUMBER: _ClassVar[int]
    AGENT_VERSION_FIELD_NUMBER: _ClassVar[int]
    BOOT_ID_FIELD_NUMBER: _ClassVar[int]
    HEALTH_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    TAINTS_FIELD_NUMBER: _ClassVar[int]
    name: str
    labels: _containers.ScalarMap[str, str]
    capacity: _containers.ScalarMap[str, int]
    allocatable: _containers.ScalarMap[str, int]
    agent_version: str
    boot_id: str
    health_address: str
    taints: _containers.RepeatedCompositeFieldContainer[Taint]
    def __init__(self, name: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., capacity: _Optional[_Mapping[str, int]] = ..., allocatable: _Optional[_Mapping[str, int]] = ..., agent_version: _Optional[str] = ..., boot_id: _Optional[str] = ..., health_address: _Optional[str] = ..., taints: _Optional[_Iterable[_Union[Taint, _Mapping]]] = ...) -> None: ...

class Taint(_message.Message):
    __slots__ = ("key", "value", "effect")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    EFFECT_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: str
    effect: str
    def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ..., effect: _Optional[str] = ...) -> None: ...

class NodeUsage(_message.Message):
    __slots__ = ("memory_total", "memory_available", "cpu_usage_cores", "nodefs_available", "conditions", "observed_at")
    MEMORY_TOTAL_FIELD_NUMBER: _ClassVar[int]
    MEMORY_AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    CPU_USAGE_CORES_FIELD_NUMBER: _ClassVar[int]
    NODEFS_AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    CONDITIONS_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_AT_FIELD_NUMBER: _ClassVar[int]
    memory_total: int
    memory_available: int
    cpu_usage_cores: float
    nodefs_available: int
    conditions: _containers.RepeatedScalarFieldContainer[str]
    observed_at: float
    def __init__(self, memory_total: _Optional[int] = ..., memory_available: _Optional[int] = ..., cpu_usage_cores: _Optional[float] = ..., nodefs_available: _Optional[int] = ..., conditions: _Optional[_Iterable[str]] = ..., observed_at: _Optional[float] = ...) -> None: ...

class Register(_message.Message):
    __slots__ = ("node", "pods")
    NODE_FIELD_NUMBER: _ClassVar[int]
    PODS_FIELD_NUMBER: _ClassVar[int]
    node: NodeInfo
    pods: _containers.RepeatedCompositeFieldContainer[PodStatus]
    def __init__(self, node: _Optional[_Union[NodeInfo, _Mapping]] = ..., pods: _Optional[_Iterable[_Union[PodStatus, _Mapping]]] = ...) -> None: ...

class Heartbeat(_message.Message):
    __slots__ = ("usage", "pods", "seq")
    USAGE_FIELD_NUMBER: _ClassVar[int]
    PODS_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    usage: NodeUsage
    pods: _containers.RepeatedCompositeFieldContainer[PodStatus]
    seq: int
    def __init__(self, usage: _Optional[_Union[NodeUsage, _Mapping]] = ..., pods: _Optional[_Iterable[_Union[PodStatus, _Mapping]]] = ..., seq: _Optional[int] = ...) -> None: ...

class LogChunk(_message.Message):
    __slots__ = ("request_id", "data", "eof", "error", "container")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    EOF_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    data: bytes
    eof: bool
    error: str
    container: str
    def __init__(self, request_id: _Optional[str] = ..., data: _Optional[bytes] = ..., eof: _Optional[bool] = ..., error: _Optional[str] = ..., container: _Optional[str] = ...) -> None: ...

class AgentMessage(_message.Message):
    __slots__ = ("register", "heartbeat", "pod_status", "log_chunk", "batch")
    REGISTER_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    POD_STATUS_FIELD_NUMBER: _ClassVar[int]
    LOG_CHUNK_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    register: Register
    heartbeat: Heartbeat
    pod_status: PodStatus
    log_chunk: LogChunk
    batch: AgentBatch
    def __init__(self, register: _Optional[_Union[Register, _Mapping]] = ..., heartbeat: _Optional[_Union[Heartbeat, _Mapping]] = ..., pod_status: _Optional[_Union[PodStatus, _Mapping]] = ..., log_chunk: _Optional[_Union[LogChunk, _Mapping]] = ..., batch: _Optional[_Union[AgentBatch, _Mapping]] = ...) -> None: ...

class AgentBatch(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[AgentMessage]
    def __init__(self, messages: _Optional[_Iterable[_Union[AgentMessage, _Mapping]]] = ...) -> None: ...

class Registered(_message.Message):
    __slots__ = ("node_name", "heartbeat_interval_seconds", "node_timeout_seconds", "fencing_grace_seconds", "self_fencing", "epoch")
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    NODE_TIMEOUT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    FENCING_GRACE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    SELF_FENCING_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    node_name: str
    heartbeat_interval_seconds: float
    node_timeout_seconds: float
    fencing_grace_seconds: float
    self_fencing: bool
    epoch: int
    def __init__(self, node_name: _Optional[str] = ..., heartbeat_interval_seconds: _Optional[float] = ..., node_timeout_seconds: _Optional[float] = ..., fencing_grace_seconds: _Optional[float] = ..., self_fencing: _Optional[bool] = ..., epoch: _Optional[int] = ...) -> None: ...

class HeartbeatAck(_message.Message):
    __slots__ = ("seq",)
    SEQ_FIELD_NUMBER: _ClassVar[int]
    seq: int
    def __init__(self, seq: _Optional[int] = ...) -> None: ...

class RunPod(_message.Message):
    __slots__ = ("pod",)
    POD_FIELD_NUMBER: _ClassVar[int]
    pod: PodSpec
    def __init__(self, pod: _Optional[_Union[PodSpec, _Mapping]] = ...) -> None: ...

class StopPod(_message.Message):
    __slots__ = ("uid", "grace_seconds", "reason", "message")
    UID_FIELD_NUMBER: _ClassVar[int]
    GRACE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    uid: str
    grace_seconds: float
    reason: str
    message: str
    def __init__(self, uid: _Optional[str] = ..., grace_seconds: _Optional[float] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class ForgetPod(_message.Message):
    __slots__ = ("uid", "purge")
    UID_FIELD_NUMBER: _ClassVar[int]
    PURGE_FIELD_NUMBER: _ClassVar[int]
    uid: str
    purge: bool
    def __init__(self, uid: _Optional[str] = ..., purge: _Optional[bool] = ...) -> None: ...

class LogRequest(_message.Message):
    __slots__ = ("request_id", "pod_uid", "container", "follow")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    POD_UID_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    pod_uid: str
    container: str
    follow: bool
    def __init__(self, request_id: _Optional[str] = ..., pod_uid: _Optional[str] = ..., container: _Optional[str] = ..., follow: _Optional[bool] = ...) -> None: ...

class CancelLogs(_message.Message):
    __slots__ = ("request_id",)
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    def __init__(self, request_id: _Optional[str] = ...) -> None: ...

class ControllerMessage(_message.Message):
    __slots__ = ("registered", "run_pod", "stop_pod", "log_request", "cancel_logs", "forget_pod", "batch", "heartbeat_ack", "epoch")
    REGISTERED_FIELD_NUMBER: _ClassVar[int]
    RUN_POD_FIELD_NUMBER: _ClassVar[int]
    STOP_POD_FIELD_NUMBER: _ClassVar[int]
    LOG_REQUEST_FIELD_NUMBER: _ClassVar[int]
    CANCEL_LOGS_FIELD_NUMBER: _ClassVar[int]
    FORGET_POD_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_ACK_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    registered: Registered
    run_pod: RunPod
    stop_pod: StopPod
    log_request: LogRequest
    cancel_logs: CancelLogs
    forget_pod: ForgetPod
    batch: ControllerBatch
    heartbeat_ack: HeartbeatAck
    epoch: int
    def __init__(self, registered: _Optional[_Union[Registered, _Mapping]] = ..., run_pod: _Optional[_Union[RunPod, _Mapping]] = ..., stop_pod: _Optional[_Union[StopPod, _Mapping]] = ..., log_request: _Optional[_Union[LogRequest, _Mapping]] = ..., cancel_logs: _Optional[_Union[CancelLogs, _Mapping]] = ..., forget_pod: _Optional[_Union[ForgetPod, _Mapping]] = ..., batch: _Optional[_Union[ControllerBatch, _Mapping]] = ..., heartbeat_ack: _Optional[_Union[HeartbeatAck, _Mapping]] = ..., epoch: _Optional[int] = ...) -> None: ...

class ControllerBatch(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[ControllerMessage]
    def __init__(self, messages: _Optional[_Iterable[_Union[ControllerMessage, _Mapping]]] = ...) -> None: ...

class NodeObject(_message.Message):
    __slots__ = ("node", "ready", "not_ready_reason", "last_heartbeat", "requested", "usage", "pods")
    class RequestedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    NODE_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    NOT_READY_REASON_FIELD_NUMBER: _ClassVar[int]
    LAST_HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    PODS_FIELD_NUMBER: _ClassVar[int]
    node: NodeInfo
    ready: bool
    not_ready_reason: str
    last_heartbeat: float
    requested: _containers.ScalarMap[str, int]
    usage: NodeUsage
    pods: int
    def __init__(self, node: _Optional[_Union[NodeInfo, _Mapping]] = ..., ready: _Optional[bool] = ..., not_ready_reason: _Optional[str] = ..., last_heartbeat: _Optional[float] = ..., requested: _Optional[_Mapping[str, int]] = ..., usage: _Optional[_Union[NodeUsage, _Mapping]] = ..., pods: _Optional[int] = ...) -> None: ...

class ListNodesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListNodesResponse(_message.Message):
    __slots__ = ("nodes",)
    NODES_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[NodeObject]
    def __init__(self, nodes: _Optional[_Iterable[_Union[NodeObject, _Mapping]]] = ...) -> None: ...

class LogsRequest(_message.Message):
    __slots__ = ("namespace", "workload", "pod", "container", "follow")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    POD_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    workload: str
    pod: str
    container: str
    follow: bool
    def __init__(self, namespace: _Optional[str] = ..., workload: _Optional[str] = ..., pod: _Optional[str] = ..., container: _Optional[str] = ..., follow: _Optional[bool] = ...) -> None: ...

class LogLine(_message.Message):
    __slots__ = ("pod", "container", "data")
    POD_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    pod: str
    container: str
    data: bytes
    def __init__(self, pod: _Optional[str] = ..., container: _Optional[str] = ..., data: _Optional[bytes] = ...) -> None: ...
