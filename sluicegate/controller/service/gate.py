"""The gate every user-API call passes: authenticate, authorize, audit.

A servicer method starts with ``p = gate.authenticate(context)``; a read
then calls ``gate.authorize(p, verb, kind, namespace, name, context)``
(PERMISSION_DENIED, audited); a change runs inside ``with
gate.mutation(...)``, which authorizes on entry and writes the audit line
with the outcome on exit.  Lists and watches over all namespaces ask
:meth:`Gate.visible` for the namespaces the caller may see.

The default gate (no arguments) is the authentication-off one: everyone is
the anonymous cluster admin and nothing is audited.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable
from types import TracebackType
from typing import Any

import grpc

from sluicegate.controller.errors import PermissionDenied, Unauthenticated
from sluicegate.controller.service.errors import Context, status_for
from sluicegate.security.audit import ALLOWED, DENIED, ERROR, AuditLog, AuditRecord
from sluicegate.security.authz import Authorizer, PolicyError, denial_message
from sluicegate.security.identity import Authenticator, OpenAuthenticator, Principal

log = logging.getLogger(__name__)

# The audit log's "user" of a call that proved no identity.
_NOBODY = Principal("")


def _peer(context: Any) -> str:
    try:
        return str(context.peer())
    except Exception:  # a context without a peer (tests' fakes)
        return ""


class Gate:
    def __init__(
        self,
        authenticator: Authenticator | None = None,
        authorizer: Authorizer | None = None,
        audit: AuditLog | None = None,
    ) -> None:
        self.authenticator: Authenticator = authenticator or OpenAuthenticator()
        self.authorizer = authorizer or Authorizer()
        self.audit_log = audit

    # ------------------------------------------------------------ who

    def authenticate(self, context: Context) -> Principal:
        """The caller, or Unauthenticated (raised by the authenticator; audited with the peer's address)."""
        a = self.authenticator
        if type(a) is OpenAuthenticator:
            return a.authenticate({}, ())
        try:
            return a.authenticate(dict(context.auth_context()), tuple(context.invocation_metadata() or ()))
        except Unauthenticated as exc:
            if self.audit_log is not None:  # who and what are unknown; where from is not
                self.audit_log.record(AuditRecord(
                    _NOBODY, "", "", "", "", DENIED, _peer(context), code="UNAUTHENTICATED", message=str(exc)))
            raise

    # ------------------------------------------------------------ may they

    def allowed(self, p: Principal, verb: str, kind: str, namespace: str) -> bool:
        return self.authorizer.allowed(p, verb, kind, namespace)

    def visible(self, p: Principal, verb: str, kind: str) -> frozenset[str] | None:
        """None: all namespaces; else the namespaces where the caller may ``verb`` ``kind``."""
        return self.authorizer.visible_namespaces(p, verb, kind)

    def authorize(self, p: Principal, verb: str, kind: str, namespace: str, name: str, context: Any) -> None:
        """Raise PermissionDenied (and audit the denial) unless allowed."""
        if not self.authorizer.allowed(p, verb, kind, namespace):
            raise self.denied(p, verb, kind, namespace, name, context)

    def denied(self, p: Principal, verb: str, kind: str, namespace: str, name: str, context: Any) -> PermissionDenied:
        """The denial to raise (or report per item), audited."""
        exc = self.denied_error(p, verb, kind, namespace)
        self.audit(p, verb, kind, namespace, name, context, exc=exc)
        return exc

    @staticmethod
    def denied_error(p: Principal, verb: str, kind: str, namespace: str) -> PermissionDenied:
        """The denial, not audited (for callers that audit it themselves)."""
        return PermissionDenied(denial_message(p, verb, kind, namespace))

    def mutation(self, p: Principal, verb: str, kind: str, namespace: str, name: str, context: Any) -> Mutation:
        return Mutation(self, p, verb, kind, namespace, name, context)

    # ------------------------------------------------------------ record

    def record(
        self, p: Principal, verb: str, kind: str, namespace: str, name: str, context: Any,
        *, exc: BaseException | None = None, detail: str = "", outcome: str = "",
    ) -> AuditRecord:
        if exc is None:
            return AuditRecord(p, verb, kind, namespace, name, ALLOWED, _peer(context), detail=detail)
        if isinstance(exc, Exception):
            code, message = status_for(exc)
        else:  # cancelled: the caller went away mid-request
            code, message = grpc.StatusCode.CANCELLED, "cancelled"
        outcome = outcome or (DENIED if isinstance(exc, PermissionDenied) else ERROR)
        return AuditRecord(p, verb, kind, namespace, name, outcome, _peer(context), code=code.name, message=message)

    def audit(
        self, p: Principal, verb: str, kind: str, namespace: str, name: str, context: Any,
        *, exc: BaseException | None = None, detail: str = "",
    ) -> None:
        if self.audit_log is not None:
            self.audit_log.record(self.record(p, verb, kind, namespace, name, context, exc=exc, detail=detail))

    def audit_many(self, records: list[AuditRecord]) -> None:
        if self.audit_log is not None and records:
            self.audit_log.write(records)

    # ------------------------------------------------------------ SIGHUP

    def reload(self) -> None:
        """SIGHUP: re-read the policy and the authenticator's token file (a bad file keeps the old one),
        reopen the audit log."""
        reload_tokens = getattr(self.authenticator, "reload", None)
        if reload_tokens is not None:
            try:
                reload_tokens()
            except Exception as exc:
                log.error("token file not reloaded, the tokens in force stay: %s", exc)
        try:
            self.authorizer.reload()
        except PolicyError as exc:
            log.error("authorization policy not reloaded, the previous one stays in force: %s", exc)
        else:
            if self.authorizer.path:
                log.info(
                    "authorization policy reloaded from %s (%d bindings)",
                    self.authorizer.path,
                    len(self.authorizer.policy.bindings),
                )
        if self.audit_log is not None:
            self.audit_log.reopen()

    def close(self) -> None:
        if self.audit_log is not None:
            self.audit_log.close()


class Mutation:
    """``with gate.mutation(...) as m:``: authorized on entry, audited with the outcome on exit."""

    __slots__ = ("gate", "p", "verb", "kind", "namespace", "name", "context", "detail")

    def __init__(self, gate: Gate, p: Principal, verb: str, kind: str, namespace: str, name: str, context: Any) -> None:
        self.gate, self.p, self.verb, self.kind, self.namespace, self.name = gate, p, verb, kind, namespace, name
        self.context = context
        self.detail = ""

    def __enter__(self) -> Mutation:
        self.gate.authorize(self.p, self.verb, self.kind, self.namespace, self.name, self.context)
        return self

    def __exit__(self, et: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.gate.audit(
            self.p, self.verb, self.kind, self.namespace, self.name, self.context, exc=exc, detail=self.detail
        )


def gate_from_settings(settings: Any, authenticator: Authenticator | None = None) -> Gate:
    """The controller's gate: its policy file (none: only cluster admins) and its audit log."""
    from sluicegate.controller.settings import SettingsError, default_audit_log

    try:
        authorizer = Authorizer(settings.authorization_policy or None)
    except PolicyError as exc:
        raise SettingsError(f"authorizationPolicy: {exc}") from exc
    path = settings.audit_log if settings.audit_log is not None else default_audit_log(settings.store, settings.pki_dir)
    try:
        audit = AuditLog(path) if path else None
    except OSError as exc:
        raise SettingsError(f"auditLog: cannot open {path}: {exc}") from exc
    if authorizer.path is None:
        log.info("no authorizationPolicy: only members of system:masters may use the API")
    return Gate(authenticator, authorizer, audit)


def install_sighup(gate: Gate) -> Callable[[], None]:
    """SIGHUP reloads the policy and reopens the audit log; returns the undo (call it at shutdown)."""
    loop = asyncio.get_running_loop()
    try:
        loop.add_signal_handler(signal.SIGHUP, gate.reload)
    except (RuntimeError, ValueError, NotImplementedError):  # not the main thread: no signals here
        return lambda: None

    def undo() -> None:
        loop.remove_signal_handler(signal.SIGHUP)

    return undo
