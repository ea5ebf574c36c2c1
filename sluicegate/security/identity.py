"""Principals: the authenticated caller of one gRPC call.

A caller is a user (client certificate CN = user, O = groups; or a bearer
token from the controller's token file) or a node (a certificate issued at
join, subject CN ``system:node:NAME``, O ``system:nodes``).  Where
authentication is off (plaintext on loopback, or ``insecure: true``) every
caller is the anonymous cluster admin: that is what those modes mean, and
the controller logs it at every start.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from sluicegate.common.errors import RequestError

# What grpc's ServicerContext.auth_context() gives: property name -> values (lists of bytes in practice).
AuthContext = Mapping[str, Iterable[bytes]]

# The group whose members may do everything (Kubernetes' name for it).
CLUSTER_ADMIN_GROUP = "system:masters"
# Nodes: certificate subject CN is NODE_USER_PREFIX + node name, O is NODES_GROUP.
NODE_USER_PREFIX = "system:node:"
NODES_GROUP = "system:nodes"
ANONYMOUS_USER = "system:anonymous"


@dataclass(frozen=True, slots=True)
class Principal:
    user: str
    groups: frozenset[str] = field(default_factory=frozenset)
    # How it was authenticated: "certificate", "token" or "none" (authentication off).
    method: str = "none"

    @property
    def node(self) -> str | None:
        """The node name, when this caller is a node's agent."""
        if NODES_GROUP in self.groups and self.user.startswith(NODE_USER_PREFIX):
            return self.user[len(NODE_USER_PREFIX):]
        return None

    @property
    def is_cluster_admin(self) -> bool:
        return CLUSTER_ADMIN_GROUP in self.groups


# The caller where authentication is off.
ANONYMOUS_ADMIN = Principal(ANONYMOUS_USER, frozenset({CLUSTER_ADMIN_GROUP}), method="none")


class Unauthenticated(RequestError):
    """The caller proved no identity (no valid certificate or token)."""


class PermissionDenied(RequestError):
    """The caller is known but may not do this; the message names user, verb, kind and namespace."""


class Authenticator(Protocol):
    """Turns a call's transport facts into a Principal, or raises Unauthenticated."""

    def authenticate(self, auth_context: AuthContext, metadata: tuple[tuple[str, str | bytes], ...]) -> Principal: ...


class OpenAuthenticator:
    """Authentication off: everyone is the anonymous cluster admin."""

    def authenticate(self, auth_context: AuthContext, metadata: tuple[tuple[str, str | bytes], ...]) -> Principal:
        return ANONYMOUS_ADMIN
