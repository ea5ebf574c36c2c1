"""The base of every error a caller can act on, shared by the controller and the security layer."""

from __future__ import annotations


class RequestError(Exception):
    """A request that is refused for a reason the caller can act on (each subclass maps to one gRPC code)."""
