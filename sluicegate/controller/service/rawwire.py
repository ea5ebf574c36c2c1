"""Registering a service whose streams may hand the transport bytes already serialized.

The watch (``watchwire``) and the agent stream (``agents.py``) build their
messages' bytes themselves, once: a batch is its parts' bytes joined, not a
message built only to be serialized again.  The generated
``add_*Servicer_to_server`` fixes each method's response serializer, so
:func:`add_with_raw_responses` registers a servicer as that function does
and then gives the named methods a serializer that passes bytes through
(and still serializes a message, for callers that yield one).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
from google.protobuf.message import Message


def _as_bytes(message: bytes | Message) -> bytes:
    return message if isinstance(message, bytes) else message.SerializeToString()


class _Handlers:
    """Stands in for a server to the generated registration, to keep the handlers it makes."""

    def __init__(self, service: str) -> None:
        self.service = service
        self.handlers: dict[str, Any] = {}

    def add_generic_rpc_handlers(self, handlers: object) -> None:
        pass

    def add_registered_method_handlers(self, service: str, handlers: dict[str, Any]) -> None:
        assert service == self.service, service
        self.handlers = dict(handlers)


def add_with_raw_responses(add_generated: Callable[[Any, Any], None], servicer: object, server: grpc.aio.Server,
                           service: str, *methods: str) -> None:
    """Register ``servicer`` as ``add_generated`` (the generated ``add_*Servicer_to_server``) would,
    except that the responses of ``methods`` go to the transport as they are when they are bytes."""
    made = _Handlers(service)
    add_generated(servicer, made)
    handlers = made.handlers
    for name in methods:
        handlers[name] = handlers[name]._replace(response_serializer=_as_bytes)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, handlers),))
    server.add_registered_method_handlers(service, handlers)
