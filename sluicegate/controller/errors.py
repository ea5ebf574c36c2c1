"""Domain errors of the controller; the gRPC layer maps each to one status code."""

from __future__ import annotations

from sluicegate.common.errors import RequestError

# Security errors live with the identities they are about; the controller maps them like its own.
from sluicegate.security.identity import PermissionDenied, Unauthenticated

__all__ = [
    "AlreadyExists", "ControllerError", "FailedPrecondition", "InvalidArgument", "NotFound", "PermissionDenied",
    "Unauthenticated",
]


# Base of errors a caller can act on.
ControllerError = RequestError


class NotFound(ControllerError):
    def __init__(self, kind: str, namespace: str, name: str) -> None:
        self.kind, self.namespace, self.name = kind, namespace, name
        where = f"{namespace}/{name}" if namespace else name
        super().__init__(f"{kind} {where} not found")


class InvalidArgument(ControllerError):
    """Bad input; ``field`` names the offending field path."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}" if field else message)


class FailedPrecondition(ControllerError):
    """The request is valid but the current state forbids it (e.g. deleting a queue in use)."""


class AlreadyExists(ControllerError):
    """An object with this name exists with a different spec (an identical one is an idempotent success)."""

    def __init__(self, kind: str, namespace: str, name: str, detail: str = "") -> None:
        self.kind, self.namespace, self.name = kind, namespace, name
        where = f"{namespace}/{name}" if namespace else name
        super().__init__(f"{kind} {where} already exists with a different spec" + (f" ({detail})" if detail else "")
                         + "; delete it first or choose another name")
