from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class JoinRequest(_message.Message):
    __slots__ = ("token", "node_name", "csr")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    CSR_FIELD_NUMBER: _ClassVar[int]
    token: str
    node_name: str
    csr: bytes
    def __init__(self, token: _Optional[str] = ..., node_name: _Optional[str] = ..., csr: _Optional[bytes] = ...) -> None: ...

class JoinResponse(_message.Message):
    __slots__ = ("certificate", "ca_certificate")
    CERTIFICATE_FIELD_NUMBER: _ClassVar[int]
    CA_CERTIFICATE_FIELD_NUMBER: _ClassVar[int]
    certificate: bytes
    ca_certificate: bytes
    def __init__(self, certificate: _Optional[bytes] = ..., ca_certificate: _Optional[bytes] = ...) -> None: ...

class RenewRequest(_message.Message):
    __slots__ = ("csr",)
    CSR_FIELD_NUMBER: _ClassVar[int]
    csr: bytes
    def __init__(self, csr: _Optional[bytes] = ...) -> None: ...

class RenewResponse(_message.Message):
    __slots__ = ("certificate",)
    CERTIFICATE_FIELD_NUMBER: _ClassVar[int]
    certificate: bytes
    def __init__(self, certificate: _Optional[bytes] = ...) -> None: ...

class CreateTokenRequest(_message.Message):
    __slots__ = ("ttl_seconds", "uses", "description")
    TTL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    USES_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    ttl_seconds: float
    uses: int
    description: str
    def __init__(self, ttl_seconds: _Optional[float] = ..., uses: _Optional[int] = ..., description: _Optional[str] = ...) -> None: ...

class BootstrapToken(_message.Message):
    __slots__ = ("id", "expires_at", "uses_left", "description", "created_by", "created_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    USES_LEFT_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    CREATED_BY_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    expires_at: float
    uses_left: int
    description: str
    created_by: str
    created_at: float
    def __init__(self, id: _Optional[str] = ..., expires_at: _Optional[float] = ..., uses_left: _Optional[int] = ..., description: _Optional[str] = ..., created_by: _Optional[str] = ..., created_at: _Optional[float] = ...) -> None: ...

class CreateTokenResponse(_message.Message):
    __slots__ = ("token", "info", "ca_cert_hash")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    INFO_FIELD_NUMBER: _ClassVar[int]
    CA_CERT_HASH_FIELD_NUMBER: _ClassVar[int]
    token: str
    info: BootstrapToken
    ca_cert_hash: str
    def __init__(self, token: _Optional[str] = ..., info: _Optional[_Union[BootstrapToken, _Mapping]] = ..., ca_cert_hash: _Optional[str] = ...) -> None: ...

class ListTokensRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListTokensResponse(_message.Message):
    __slots__ = ("tokens",)
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    tokens: _containers.RepeatedCompositeFieldContainer[BootstrapToken]
    def __init__(self, tokens: _Optional[_Iterable[_Union[BootstrapToken, _Mapping]]] = ...) -> None: ...

class DeleteTokenRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class DeleteTokenResponse(_message.Message):
    __slots__ = ("deleted",)
    DELETED_FIELD_NUMBER: _ClassVar[int]
    deleted: bool
    def __init__(self, deleted: _Optional[bool] = ...) -> None: ...

class IssueUserCertificateRequest(_message.Message):
    __slots__ = ("user", "groups", "csr", "ttl_seconds")
    USER_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    CSR_FIELD_NUMBER: _ClassVar[int]
    TTL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    user: str
    groups: _containers.RepeatedScalarFieldContainer[str]
    csr: bytes
    ttl_seconds: float
    def __init__(self, user: _Optional[str] = ..., groups: _Optional[_Iterable[str]] = ..., csr: _Optional[bytes] = ..., ttl_seconds: _Optional[float] = ...) -> None: ...

class IssueUserCertificateResponse(_message.Message):
    __slots__ = ("certificate", "ca_certificate", "serial")
    CERTIFICATE_FIELD_NUMBER: _ClassVar[int]
    CA_CERTIFICATE_FIELD_NUMBER: _ClassVar[int]
    SERIAL_FIELD_NUMBER: _ClassVar[int]
    certificate: bytes
    ca_certificate: bytes
    serial: str
    def __init__(self, certificate: _Optional[bytes] = ..., ca_certificate: _Optional[bytes] = ..., serial: _Optional[str] = ...) -> None: ...

class RevokeNodeRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class RevokeResponse(_message.Message):
    __slots__ = ("serials",)
    SERIALS_FIELD_NUMBER: _ClassVar[int]
    serials: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, serials: _Optional[_Iterable[str]] = ...) -> None: ...

class RevokeCertificateRequest(_message.Message):
    __slots__ = ("serial",)
    SERIAL_FIELD_NUMBER: _ClassVar[int]
    serial: str
    def __init__(self, serial: _Optional[str] = ...) -> None: ...

class WhoAmIRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class WhoAmIResponse(_message.Message):
    __slots__ = ("user", "groups", "method", "serial")
    USER_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    SERIAL_FIELD_NUMBER: _ClassVar[int]
    user: str
    groups: _containers.RepeatedScalarFieldContainer[str]
    method: str
    serial: str
    def __init__(self, user: _Optional[str] = ..., groups: _Optional[_Iterable[str]] = ..., method: _Optional[str] = ..., serial: _Optional[str] = ...) -> None: ...
