"""What a controller that does not lead answers: "not me; the leader is there".

A follower binds the same ports as it would as leader and answers every
call except the health check with UNAVAILABLE, naming the leader's
addresses in trailing metadata (:mod:`sluicegate.common.leaders`), so that
``sluicectl``, the client library and agents go there at once.  Nothing is
served from a follower's copy of the store: reads from the leader are never
stale, and a follower needs no authorization decisions of its own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc

from sluicegate.common.leaders import LEADER_KEY, LEADER_TOKEN_KEY
from sluicegate.controller.leader import LeaseView

HEALTH_PREFIX = "/grpc.health.v1.Health/"


def split_advertised(address: str) -> tuple[str, str]:
    """The lease's address column: 'API_ADDRESS TOKEN_ADDRESS' (the token part may be missing)."""
    parts = address.split()
    return (parts[0] if parts else "", parts[1] if len(parts) > 1 else "")


def refusal(view: LeaseView | None) -> tuple[str, tuple[tuple[str, str], ...]]:
    """(details, trailing metadata) of a follower's answer."""
    if view is None or not view.holder:
        return "this controller does not lead and no leader is elected yet; retry shortly", ()
    api, token = split_advertised(view.address)
    meta = tuple((k, v) for k, v in ((LEADER_KEY, api), (LEADER_TOKEN_KEY, token)) if v)
    where = f" at {api}" if api else ""
    return f"this controller does not lead; the leader is {view.holder}{where} (epoch {view.epoch})", meta


class NotLeaderHandler(grpc.GenericRpcHandler):
    """Answers every method but the health check with UNAVAILABLE and the leader's address."""

    def __init__(self, view: Callable[[], LeaseView | None]) -> None:
        self._view = view

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler[Any, Any] | None:
        method = getattr(handler_call_details, "method", "") or ""
        if isinstance(method, bytes):
            method = method.decode()
        if method.startswith(HEALTH_PREFIX):
            return None

        async def refuse(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext[Any, Any]) -> None:
            details, meta = refusal(self._view())
            await context.abort(grpc.StatusCode.UNAVAILABLE, details, trailing_metadata=meta)

        # Raw bytes in and out: the call is refused before any message is read.
        return grpc.stream_stream_rpc_method_handler(refuse)
