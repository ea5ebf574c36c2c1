"""The Security service: node join and renewal, bootstrap tokens, user certificates, revocation."""

from __future__ import annotations

import logging
from collections.abc import Callable

from sluicegate.controller.errors import FailedPrecondition, InvalidArgument, PermissionDenied
from sluicegate.controller.service.errors import Context, handled
from sluicegate.controller.service.gate import Gate
from sluicegate.security import pki
from sluicegate.security.authority import (
    Authority,
    AuthorityError,
    TokenRecord,
    TokenRefused,
    check_node_name,
    serial_hex,
)
from sluicegate.security.identity import AuthContext, Principal
from sluicegate.v1 import security_pb2, security_pb2_grpc

log = logging.getLogger(__name__)

# Who joins: the token's id is all that is known of the caller.
def _joiner(token: str) -> Principal:
    return Principal(f"bootstrap-token:{token.split('.', 1)[0][:6]}", method="token")


class SecurityServicer(security_pb2_grpc.SecurityServicer):
    """Cluster-admin only, except Join (the token is the credential), Renew (a node, for itself) and WhoAmI."""

    def __init__(
        self,
        authority: Authority | None,
        gate: Gate,
        *,
        node_connected: Callable[[str], bool],
        node_revoked: Callable[[str], None],
        serial_of: Callable[[AuthContext], int | None] | None = None,
    ) -> None:
        self.authority = authority
        self.gate = gate
        self.node_connected = node_connected
        self.node_revoked = node_revoked
        self._serial_of = serial_of

    def _ca(self) -> Authority:
        if self.authority is None:
            raise FailedPrecondition(
                "the controller serves without TLS (no pkiDir): there is no cluster CA to join or issue from"
            )
        return self.authority

    def _admin(self, context: Context, verb: str, what: str, name: str = "") -> Principal:
        p = self.gate.authenticate(context)
        if not p.is_cluster_admin:
            exc = PermissionDenied(f"user {p.user!r} may not {verb} {what}: it needs cluster-admin")
            self.gate.audit(p, verb, what, "", name, context, exc=exc)
            raise exc
        return p

    @handled
    async def Join(self, request: security_pb2.JoinRequest, context: Context) -> security_pb2.JoinResponse:
        ca = self._ca()
        try:
            check_node_name(request.node_name)
            key = pki.csr_public_key(request.csr)
        except (AuthorityError, pki.PkiError) as exc:
            raise InvalidArgument("", str(exc)) from exc
        who = _joiner(request.token)
        try:
            rec = ca.spend_token(request.token)
        except TokenRefused as exc:
            log.warning("join as node %s refused: %s (peer %s)", request.node_name, exc, context.peer())
            denied = PermissionDenied(f"join refused: {exc}")
            self.gate.audit(who, "join", "Node", "", request.node_name, context, exc=denied)
            raise denied from exc
        if self.node_connected(request.node_name):
            # A live agent holds that name: joining must not take it over.
            busy = FailedPrecondition(
                f"node {request.node_name} is connected now; "
                f"run 'sluicectl delete node {request.node_name}' first to replace it"
            )
            self.gate.audit(who, "join", "Node", "", request.node_name, context, exc=busy)
            raise busy
        cert = ca.issue_node(request.node_name, key)
        log.info(
            "node %s joined with token %s; certificate serial %s",
            request.node_name,
            rec.id,
            serial_hex(cert.serial_number),
        )
        self.gate.audit(
            who, "join", "Node", "", request.node_name, context, detail=f"serial {serial_hex(cert.serial_number)}"
        )
        return security_pb2.JoinResponse(certificate=pki.cert_pem(cert), ca_certificate=ca.ca_pem)

    @handled
    async def Renew(self, request: security_pb2.RenewRequest, context: Context) -> security_pb2.RenewResponse:
        ca = self._ca()
        p = self.gate.authenticate(context)
        node = p.node
        if node is None or p.method != "certificate":
            raise PermissionDenied(f"user {p.user!r} may not renew: only a node renews its own certificate")
        try:
            key = pki.csr_public_key(request.csr)
        except pki.PkiError as exc:
            raise InvalidArgument("csr", str(exc)) from exc
        cert = ca.issue_node(node, key)
        log.info("node %s renewed its certificate; new serial %s", node, serial_hex(cert.serial_number))
        self.gate.audit(p, "renew", "Node", "", node, context, detail=f"serial {serial_hex(cert.serial_number)}")
        return security_pb2.RenewResponse(certificate=pki.cert_pem(cert))

    @handled
    async def CreateToken(
        self, request: security_pb2.CreateTokenRequest, context: Context
    ) -> security_pb2.CreateTokenResponse:
        ca = self._ca()
        p = self._admin(context, "create", "BootstrapToken")
        try:
            token, rec = ca.create_token(
                ttl=request.ttl_seconds, uses=request.uses, description=request.description, created_by=p.user
            )
        except AuthorityError as exc:
            raise InvalidArgument(exc.field, str(exc).split(": ", 1)[-1]) from exc
        self.gate.audit(p, "create", "BootstrapToken", "", rec.id, context)
        return security_pb2.CreateTokenResponse(token=token, info=_token(rec), ca_cert_hash=ca.ca_hash)

    @handled
    async def ListTokens(
        self, request: security_pb2.ListTokensRequest, context: Context
    ) -> security_pb2.ListTokensResponse:
        ca = self._ca()
        self._admin(context, "list", "BootstrapToken")
        return security_pb2.ListTokensResponse(tokens=[_token(t) for t in ca.tokens()])

    @handled
    async def DeleteToken(
        self, request: security_pb2.DeleteTokenRequest, context: Context
    ) -> security_pb2.DeleteTokenResponse:
        ca = self._ca()
        p = self._admin(context, "delete", "BootstrapToken")
        deleted = ca.delete_token(request.id)
        self.gate.audit(p, "delete", "BootstrapToken", "", request.id, context)
        return security_pb2.DeleteTokenResponse(deleted=deleted)

    @handled
    async def IssueUserCertificate(
        self, request: security_pb2.IssueUserCertificateRequest, context: Context
    ) -> security_pb2.IssueUserCertificateResponse:
        ca = self._ca()
        p = self._admin(context, "create", "UserCertificate")
        try:
            key = pki.csr_public_key(request.csr)
            days = int(request.ttl_seconds // 86400) if request.ttl_seconds else pki.USER_DAYS
            if not 1 <= days <= 3650:
                raise AuthorityError("ttl_seconds", "must be between 1 and 3650 days")
            cert = ca.issue_user(request.user, tuple(request.groups), key, days=days)
        except (AuthorityError, pki.PkiError) as exc:
            raise InvalidArgument("", str(exc)) from exc
        serial = serial_hex(cert.serial_number)
        log.info(
            "issued a certificate for user %s (groups %s), serial %s, by %s",
            request.user,
            ",".join(request.groups) or "-",
            serial,
            p.user,
        )
        self.gate.audit(p, "create", "UserCertificate", "", request.user, context, detail=f"serial {serial}")
        return security_pb2.IssueUserCertificateResponse(
            certificate=pki.cert_pem(cert), ca_certificate=ca.ca_pem, serial=serial
        )

    @handled
    async def RevokeNode(
        self, request: security_pb2.RevokeNodeRequest, context: Context
    ) -> security_pb2.RevokeResponse:
        ca = self._ca()
        p = self._admin(context, "delete", "Node", request.name)
        serials = ca.revoke_node(request.name)
        self.node_revoked(request.name)
        log.warning("node %s revoked by %s: serials %s", request.name, p.user, ", ".join(serials) or "none")
        self.gate.audit(
            p, "delete", "Node", "", request.name, context, detail=f"revoked {', '.join(serials) or 'none'}"
        )
        return security_pb2.RevokeResponse(serials=serials)

    @handled
    async def RevokeCertificate(
        self, request: security_pb2.RevokeCertificateRequest, context: Context
    ) -> security_pb2.RevokeResponse:
        ca = self._ca()
        p = self._admin(context, "revoke", "Certificate")
        try:
            serials = ca.revoke_serial(request.serial)
        except AuthorityError as exc:
            raise InvalidArgument(exc.field, str(exc).split(": ", 1)[-1]) from exc
        self.gate.audit(p, "revoke", "Certificate", "", request.serial, context)
        return security_pb2.RevokeResponse(serials=serials)

    @handled
    async def WhoAmI(self, request: security_pb2.WhoAmIRequest, context: Context) -> security_pb2.WhoAmIResponse:
        p = self.gate.authenticate(context)
        serial = self._serial_of(context.auth_context()) if self._serial_of else None
        return security_pb2.WhoAmIResponse(
            user=p.user,
            groups=sorted(p.groups),
            method=p.method,
            serial=serial_hex(serial) if serial is not None else "",
        )


def _token(t: TokenRecord) -> security_pb2.BootstrapToken:
    return security_pb2.BootstrapToken(
        id=t.id,
        expires_at=t.expires_at,
        uses_left=t.uses_left,
        description=t.description,
        created_by=t.created_by,
        created_at=t.created_at,
    )
