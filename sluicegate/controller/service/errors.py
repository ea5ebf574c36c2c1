"""The single mapping from domain errors to gRPC status codes."""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc

from sluicegate.controller.errors import (
    AlreadyExists,
    ControllerError,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Unauthenticated,
)
from sluicegate.controller.store import StoreError, StoreFull

log = logging.getLogger(__name__)

T = TypeVar("T")

# The context every servicer method receives.  The servicers only abort
# through it and read its metadata and peer, never its message types.
Context = grpc.aio.ServicerContext[Any, Any]


# Longest status message sent: messages quote user input, which may be huge.
MAX_MESSAGE_CHARS = 16 * 1024


def sanitized(message: str) -> str:
    """``message`` as something gRPC can always send: valid UTF-8, bounded.

    Messages quote what the caller sent, and a string decoded from JSON may
    hold code points UTF-8 cannot encode (a lone surrogate such as \\ud800);
    gRPC fails to send such a status at all, and the caller then waits until
    its deadline.  Those code points are written as their escapes instead.
    """
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[:MAX_MESSAGE_CHARS] + f"... ({len(message) - MAX_MESSAGE_CHARS} more characters)"
    try:
        message.encode("utf-8")
    except UnicodeEncodeError:
        message = message.encode("utf-8", "backslashreplace").decode("utf-8")
    return message


def status_for(exc: Exception) -> tuple[grpc.StatusCode, str]:
    """The status code and message a failure is answered with; every message leaving the server comes from here."""
    code, message = _status_for(exc)
    return code, sanitized(message)


def _status_for(exc: Exception) -> tuple[grpc.StatusCode, str]:
    if isinstance(exc, InvalidArgument):
        return grpc.StatusCode.INVALID_ARGUMENT, str(exc)
    if isinstance(exc, AlreadyExists):
        return grpc.StatusCode.ALREADY_EXISTS, str(exc)
    if isinstance(exc, NotFound):
        return grpc.StatusCode.NOT_FOUND, str(exc)
    if isinstance(exc, FailedPrecondition):
        return grpc.StatusCode.FAILED_PRECONDITION, str(exc)
    if isinstance(exc, Unauthenticated):
        return grpc.StatusCode.UNAUTHENTICATED, str(exc)
    if isinstance(exc, PermissionDenied):
        return grpc.StatusCode.PERMISSION_DENIED, str(exc)
    if isinstance(exc, StoreFull):
        return grpc.StatusCode.RESOURCE_EXHAUSTED, f"store is full, nothing was changed: {exc}"
    if isinstance(exc, StoreError):
        return grpc.StatusCode.UNAVAILABLE, f"store unavailable, nothing was changed: {exc}"
    return grpc.StatusCode.INTERNAL, f"internal error: {type(exc).__name__}: {exc}"


def handled(fn: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    """Turn domain errors into gRPC statuses; log unexpected ones once, here."""

    @functools.wraps(fn)
    async def wrapper(self: Any, request: Any, context: Context) -> T:
        try:
            return await fn(self, request, context)
        except (ControllerError, StoreError) as exc:
            code, msg = status_for(exc)
            await context.abort(code, msg)
        except Exception as exc:
            if isinstance(exc, grpc.aio.AbortError):
                raise
            log.exception("%s failed", fn.__name__)
            code, msg = status_for(exc)
            await context.abort(code, msg)
        raise AssertionError("unreachable")

    return wrapper
