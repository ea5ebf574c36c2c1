from sluicegate.v1 import objects_pb2 as _objects_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class WorkloadRef(_message.Message):
    __slots__ = ("namespace", "name")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    name: str
    def __init__(self, namespace: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class CreateWorkloadRequest(_message.Message):
    __slots__ = ("document", "workload")
    DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    document: _objects_pb2.Document
    workload: NewWorkload
    def __init__(self, document: _Optional[_Union[_objects_pb2.Document, _Mapping]] = ..., workload: _Optional[_Union[NewWorkload, _Mapping]] = ...) -> None: ...

class NewWorkload(_message.Message):
    __slots__ = ("api_version", "namespace", "name", "generate_name", "labels", "annotations", "spec", "source")
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    GENERATE_NAME_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    api_version: str
    namespace: str
    name: str
    generate_name: str
    labels: bytes
    annotations: bytes
    spec: bytes
    source: str
    def __init__(self, api_version: _Optional[str] = ..., namespace: _Optional[str] = ..., name: _Optional[str] = ..., generate_name: _Optional[str] = ..., labels: _Optional[bytes] = ..., annotations: _Optional[bytes] = ..., spec: _Optional[bytes] = ..., source: _Optional[str] = ...) -> None: ...

class CreateWorkloadResponse(_message.Message):
    __slots__ = ("workload", "created")
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    workload: _objects_pb2.Object
    created: bool
    def __init__(self, workload: _Optional[_Union[_objects_pb2.Object, _Mapping]] = ..., created: _Optional[bool] = ...) -> None: ...

class CreateWorkloadsRequest(_message.Message):
    __slots__ = ("items", "brief")
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    BRIEF_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[CreateWorkloadRequest]
    brief: bool
    def __init__(self, items: _Optional[_Iterable[_Union[CreateWorkloadRequest, _Mapping]]] = ..., brief: _Optional[bool] = ...) -> None: ...

class CreateWorkloadResult(_message.Message):
    __slots__ = ("code", "message", "response")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    response: CreateWorkloadResponse
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ..., response: _Optional[_Union[CreateWorkloadResponse, _Mapping]] = ...) -> None: ...

class CreateWorkloadsResponse(_message.Message):
    __slots__ = ("results", "typed_items")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    TYPED_ITEMS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[CreateWorkloadResult]
    typed_items: bool
    def __init__(self, results: _Optional[_Iterable[_Union[CreateWorkloadResult, _Mapping]]] = ..., typed_items: _Optional[bool] = ...) -> None: ...

class ListWorkloadsRequest(_message.Message):
    __slots__ = ("namespace", "local_queue", "cluster_queue", "state", "label_selector", "limit")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    LOCAL_QUEUE_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_QUEUE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    LABEL_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    local_queue: str
    cluster_queue: str
    state: str
    label_selector: str
    limit: int
    def __init__(self, namespace: _Optional[str] = ..., local_queue: _Optional[str] = ..., cluster_queue: _Optional[str] = ..., state: _Optional[str] = ..., label_selector: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class WatchWorkloadsRequest(_message.Message):
    __slots__ = ("namespace", "name", "send_initial", "max_batch")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SEND_INITIAL_FIELD_NUMBER: _ClassVar[int]
    MAX_BATCH_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    name: str
    send_initial: bool
    max_batch: int
    def __init__(self, namespace: _Optional[str] = ..., name: _Optional[str] = ..., send_initial: _Optional[bool] = ..., max_batch: _Optional[int] = ...) -> None: ...

class WorkloadEvent(_message.Message):
    __slots__ = ("type", "workload", "more", "time")
    class Type(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        TYPE_UNSPECIFIED: _ClassVar[WorkloadEvent.Type]
        ADDED: _ClassVar[WorkloadEvent.Type]
        MODIFIED: _ClassVar[WorkloadEvent.Type]
        DELETED: _ClassVar[WorkloadEvent.Type]
    TYPE_UNSPECIFIED: WorkloadEvent.Type
    ADDED: WorkloadEvent.Type
    MODIFIED: WorkloadEvent.Type
    DELETED: WorkloadEvent.Type
    TYPE_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    MORE_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    type: WorkloadEvent.Type
    workload: _objects_pb2.Object
    more: _containers.RepeatedCompositeFieldContainer[WorkloadEvent]
    time: float
    def __init__(self, type: _Optional[_Union[WorkloadEvent.Type, str]] = ..., workload: _Optional[_Union[_objects_pb2.Object, _Mapping]] = ..., more: _Optional[_Iterable[_Union[WorkloadEvent, _Mapping]]] = ..., time: _Optional[float] = ...) -> None: ...

class SetActiveRequest(_message.Message):
    __slots__ = ("namespace", "name", "active")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    name: str
    active: bool
    def __init__(self, namespace: _Optional[str] = ..., name: _Optional[str] = ..., active: _Optional[bool] = ...) -> None: ...

class PendingWorkloadsRequest(_message.Message):
    __slots__ = ("cluster_queue", "namespace", "local_queue", "offset", "limit")
    CLUSTER_QUEUE_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    LOCAL_QUEUE_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    cluster_queue: str
    namespace: str
    local_queue: str
    offset: int
    limit: int
    def __init__(self, cluster_queue: _Optional[str] = ..., namespace: _Optional[str] = ..., local_queue: _Optional[str] = ..., offset: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class PendingWorkload(_message.Message):
    __slots__ = ("namespace", "name", "local_queue_name", "cluster_queue", "priority", "position_in_cluster_queue", "position_in_local_queue", "reason", "message", "creation_timestamp")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    LOCAL_QUEUE_NAME_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_QUEUE_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    POSITION_IN_CLUSTER_QUEUE_FIELD_NUMBER: _ClassVar[int]
    POSITION_IN_LOCAL_QUEUE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CREATION_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    name: str
    local_queue_name: str
    cluster_queue: str
    priority: int
    position_in_cluster_queue: int
    position_in_local_queue: int
    reason: str
    message: str
    creation_timestamp: str
    def __init__(self, namespace: _Optional[str] = ..., name: _Optional[str] = ..., local_queue_name: _Optional[str] = ..., cluster_queue: _Optional[str] = ..., priority: _Optional[int] = ..., position_in_cluster_queue: _Optional[int] = ..., position_in_local_queue: _Optional[int] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ..., creation_timestamp: _Optional[str] = ...) -> None: ...

class PendingWorkloadsResponse(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[PendingWorkload]
    def __init__(self, items: _Optional[_Iterable[_Union[PendingWorkload, _Mapping]]] = ...) -> None: ...

class PositionResponse(_message.Message):
    __slots__ = ("pending", "workload")
    PENDING_FIELD_NUMBER: _ClassVar[int]
    WORKLOAD_FIELD_NUMBER: _ClassVar[int]
    pending: bool
    workload: PendingWorkload
    def __init__(self, pending: _Optional[bool] = ..., workload: _Optional[_Union[PendingWorkload, _Mapping]] = ...) -> None: ...
