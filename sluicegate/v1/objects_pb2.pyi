from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Object(_message.Message):
    __slots__ = ("kind", "namespace", "name", "json", "resource_version")
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    JSON_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_VERSION_FIELD_NUMBER: _ClassVar[int]
    kind: str
    namespace: str
    name: str
    json: bytes
    resource_version: int
    def __init__(self, kind: _Optional[str] = ..., namespace: _Optional[str] = ..., name: _Optional[str] = ..., json: _Optional[bytes] = ..., resource_version: _Optional[int] = ...) -> None: ...

class ObjectRef(_message.Message):
    __slots__ = ("kind", "namespace", "name")
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    kind: str
    namespace: str
    name: str
    def __init__(self, kind: _Optional[str] = ..., namespace: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class Document(_message.Message):
    __slots__ = ("body", "source")
    BODY_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    body: bytes
    source: str
    def __init__(self, body: _Optional[bytes] = ..., source: _Optional[str] = ...) -> None: ...

class ApplyRequest(_message.Message):
    __slots__ = ("documents", "dry_run")
    DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    documents: _containers.RepeatedCompositeFieldContainer[Document]
    dry_run: bool
    def __init__(self, documents: _Optional[_Iterable[_Union[Document, _Mapping]]] = ..., dry_run: _Optional[bool] = ...) -> None: ...

class ApplyResult(_message.Message):
    __slots__ = ("ref", "action")
    REF_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    ref: ObjectRef
    action: str
    def __init__(self, ref: _Optional[_Union[ObjectRef, _Mapping]] = ..., action: _Optional[str] = ...) -> None: ...

class ApplyResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[ApplyResult]
    def __init__(self, results: _Optional[_Iterable[_Union[ApplyResult, _Mapping]]] = ...) -> None: ...

class ListRequest(_message.Message):
    __slots__ = ("kind", "namespace", "label_selector")
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    LABEL_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    kind: str
    namespace: str
    label_selector: str
    def __init__(self, kind: _Optional[str] = ..., namespace: _Optional[str] = ..., label_selector: _Optional[str] = ...) -> None: ...

class ListResponse(_message.Message):
    __slots__ = ("objects",)
    OBJECTS_FIELD_NUMBER: _ClassVar[int]
    objects: _containers.RepeatedCompositeFieldContainer[Object]
    def __init__(self, objects: _Optional[_Iterable[_Union[Object, _Mapping]]] = ...) -> None: ...

class DeleteResponse(_message.Message):
    __slots__ = ("deleted",)
    DELETED_FIELD_NUMBER: _ClassVar[int]
    deleted: bool
    def __init__(self, deleted: _Optional[bool] = ...) -> None: ...
