"""The single mapping from domain errors to gRPC status codes."""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc

from sluicegate.controller.errors import FailedPrecondition, InvalidArgument, NotFound, PermissionDenied, Unauthenticated
from sluicegate.controller.store import StoreError

log = logging.getLogger(__name__)

T = TypeVar("T")


def status_for(exc: Exception) -> tuple[grpc.StatusCode, str]:
    if isinstance(exc, InvalidArgument):
        return grpc.StatusCode.INVALID_ARGUMENT, str(exc)
    if isinstance(exc, NotFound):
        return grpc.StatusCode.NOT_FOUND, str(exc)
    if isinstance(exc, FailedPrecondition):
        return grpc.StatusCode.FAILED_PRECONDITION, str(exc)
    if isinstance(exc, Unauthenticated):
        return grpc.StatusCode.UNAUTHENTICATED, str(exc)
    if isinstance(exc, PermissionDenied):
        return grpc.StatusCode.PERMISSION_DENIED, str(exc)
    if isinstance(exc, StoreError):
        return grpc.StatusCode.UNAVAILABLE, f"store unavailable, nothing was changed: {exc}"
    return grpc.StatusCode.INTERNAL, f"internal error: {type(exc).__name__}: {exc}"


def handled(fn: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    """Turn domain errors into gRPC statuses; log unexpected ones once, here."""

    @functools.wraps(fn)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> T:
        try:
            return await fn(self, request, context)
        except (InvalidArgument, NotFound, FailedPrecondition, Unauthenticated, PermissionDenied, StoreError) as exc:
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
