"""Authentication on a TLS port: client certificates, revocation, and bearer tokens.

gRPC has already verified a presented client certificate against the
cluster CA during the handshake; what is left is to read who it names
(CN = user, O = groups), refuse revoked serials, and, where no certificate
was presented (the token port), look the bearer token up in the token file.

The token file (``tokenFile``, reloaded on SIGHUP) stores only hashes::

    tokens:
      - user: ci-bot
        groups: [team-a-ci]
        sha256: 5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8

``sluicegate-controller hash-token`` prints the hash of a token read from
standard input.
"""

from __future__ import annotations

import hashlib
import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from sluicegate.security import pki
from sluicegate.security.identity import AuthContext, Principal, Unauthenticated

log = logging.getLogger(__name__)

# Parsed client certificates kept, by their PEM (a handful of users and nodes in practice).
CERT_CACHE = 4096


class TokenFileError(Exception):
    """The token file is wrong; the message names the entry and field."""


@dataclass(frozen=True, slots=True)
class _Cert:
    principal: Principal
    serial: int


def load_token_file(path: str) -> dict[str, Principal]:
    """sha256 hex -> Principal; raises TokenFileError naming the field."""
    try:
        raw = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise TokenFileError(f"{path}: cannot read token file: {exc}") from exc
    if not isinstance(raw, dict) or not isinstance(raw.get("tokens", []), list):
        raise TokenFileError(f"{path}: tokens: expected a list")
    unknown = set(raw) - {"tokens"}
    if unknown:
        raise TokenFileError(f"{path}: {sorted(unknown)[0]}: unknown field (known: tokens)")
    out: dict[str, Principal] = {}
    for i, entry in enumerate(raw.get("tokens", [])):
        where = f"{path}: tokens[{i}]"
        if not isinstance(entry, dict):
            raise TokenFileError(f"{where}: expected a mapping")
        extra = set(entry) - {"user", "groups", "sha256"}
        if extra:
            raise TokenFileError(f"{where}.{sorted(extra)[0]}: unknown field (known: user, groups, sha256)")
        user, groups, digest = entry.get("user"), entry.get("groups", []), entry.get("sha256")
        if not isinstance(user, str) or not user or user.startswith("system:"):
            raise TokenFileError(f"{where}.user: must be a non-empty name not starting with system:")
        if not isinstance(groups, list) or not all(isinstance(g, str) and g for g in groups):
            raise TokenFileError(f"{where}.groups: must be a list of names")
        if not isinstance(digest, str) or len(digest.removeprefix("sha256:")) != 64:
            raise TokenFileError(f"{where}.sha256: must be the 64-hex-digit SHA-256 of the token")
        digest = digest.removeprefix("sha256:").lower()
        try:
            int(digest, 16)
        except ValueError:
            raise TokenFileError(f"{where}.sha256: must be hexadecimal") from None
        if digest in out:
            raise TokenFileError(f"{where}.sha256: the same token is listed twice")
        out[digest] = Principal(user, frozenset(groups), method="token")
    return out


def hash_token(token: str) -> str:
    return hashlib.sha256(token.strip().encode()).hexdigest()


class ClusterAuthenticator:
    """Authenticates callers of a TLS-serving controller (both its ports)."""

    def __init__(self, *, is_revoked: Callable[[int], bool], token_file: str = "") -> None:
        self.is_revoked = is_revoked
        self.token_file = token_file
        self._tokens: dict[str, Principal] = load_token_file(token_file) if token_file else {}
        self._certs: OrderedDict[bytes, _Cert] = OrderedDict()

    def reload(self) -> None:
        """Re-read the token file; a bad file keeps the tokens in force and raises TokenFileError."""
        if self.token_file:
            self._tokens = load_token_file(self.token_file)

    def authenticate(self, auth_context: AuthContext, metadata: tuple[tuple[str, str | bytes], ...]) -> Principal:
        pem = _first_cert(auth_context)
        if pem is not None:
            cert = self._cert(pem)
            if self.is_revoked(cert.serial):
                raise Unauthenticated(
                    f"certificate {pki_serial(cert.serial)} of {cert.principal.user!r} has been revoked"
                )
            return cert.principal
        token = bearer_token(metadata)
        if token is None:
            raise Unauthenticated(
                "no client certificate and no bearer token: present the certificate from your "
                "sluicegate config, or a token on the token port"
            )
        principal = self._tokens.get(hash_token(token))
        if principal is None:
            raise Unauthenticated("the bearer token is not known to the controller")
        return principal

    def serial_of(self, auth_context: AuthContext) -> int | None:
        pem = _first_cert(auth_context)
        return self._cert(pem).serial if pem is not None else None

    def _cert(self, pem: bytes) -> _Cert:
        hit = self._certs.get(pem)
        if hit is not None:
            self._certs.move_to_end(pem)
            return hit
        try:
            inf = pki.info(pki.load_cert(pem))
        except pki.PkiError as exc:
            raise Unauthenticated(f"unreadable client certificate: {exc}") from exc
        parsed = _Cert(Principal(inf.common_name, frozenset(inf.organizations), method="certificate"), inf.serial)
        self._certs[pem] = parsed
        if len(self._certs) > CERT_CACHE:
            self._certs.popitem(last=False)
        return parsed


def pki_serial(serial: int) -> str:
    return format(serial, "x")


def bearer_token(metadata: tuple[tuple[str, str | bytes], ...]) -> str | None:
    for key, value in metadata:
        if key == "authorization":
            text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
            scheme, _, token = text.partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
    return None


def _first_cert(auth_context: AuthContext) -> bytes | None:
    """The peer's certificate (PEM), if the call came over mutual TLS."""
    return next(iter(auth_context.get("x509_pem_cert") or ()), None)
