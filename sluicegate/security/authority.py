"""The controller's certificate authority: its files, bootstrap tokens, issued and revoked certificates.

Layout of the PKI directory (``pkiDir``; every key 0600, the directory 0700)::

    ca.crt ca.key           the cluster CA (10 years)
    server.crt server.key   the controller's serving certificate; server.crt
                            carries the CA after the leaf, so a joining agent
                            can read the CA from the handshake and pin it
    state.json              bootstrap tokens (hashed), issued and revoked serials,
                            until the controller moves them into its store (meta
                            key ``pki-state``), where every controller sharing
                            the store sees them

``sluicegate-controller init`` creates it.  Bootstrap tokens follow
kubeadm's shape, ``[a-z0-9]{6}.[a-z0-9]{16}``: the id is public, the secret
is stored only as its SHA-256 and compared in constant time.  A token has an
expiry and a number of uses; each successful join spends one.

Revocation is a denylist of serials, checked on every call.  Issued node
certificates are remembered per node, so revoking a node revokes every
certificate it was ever given that has not expired yet.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import os
import re
import secrets
import socket
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec

from sluicegate.security import pki
from sluicegate.security.identity import CLUSTER_ADMIN_GROUP, NODE_USER_PREFIX, NODES_GROUP

TOKEN_RE = re.compile(r"^([a-z0-9]{6})\.([a-z0-9]{16})$")
_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"
DEFAULT_TOKEN_TTL = 3600.0
MAX_TOKEN_TTL = 30 * 86400.0
MAX_TOKEN_USES = 10_000
# DNS-1123 subdomain, as Kubernetes node names.
NODE_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
USER_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@:-]{0,252}$")


class AuthorityError(Exception):
    """A request the authority refuses; ``field`` names what is wrong."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}" if field else message)


class TokenRefused(Exception):
    """A bootstrap token that does not (or no longer) admit a join. The message never echoes the secret."""


@dataclass(slots=True)
class TokenRecord:
    id: str
    secret_sha256: str
    expires_at: float
    uses_left: int
    description: str = ""
    created_by: str = ""
    created_at: float = 0.0


@dataclass(slots=True)
class IssuedRecord:
    serial: str
    subject: str
    not_after: float


@dataclass(slots=True)
class _State:
    tokens: dict[str, TokenRecord] = field(default_factory=dict)
    # Issued node certificates by node name.
    issued: dict[str, list[IssuedRecord]] = field(default_factory=dict)
    # Revoked serial (hex) -> its not_after (pruned once expired: the handshake refuses it anyway).
    revoked: dict[str, float] = field(default_factory=dict)


def serial_hex(serial: int) -> str:
    return format(serial, "x")


def paths(pki_dir: Path) -> dict[str, Path]:
    return {name: pki_dir / name for name in ("ca.crt", "ca.key", "server.crt", "server.key", "state.json")}


def default_addresses() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(DNS names, IPs) a controller on this host answers to by default."""
    host = socket.gethostname()
    names = ["localhost", host]
    try:
        fqdn = socket.getfqdn()
        if fqdn and fqdn not in names:
            names.append(fqdn)
    except OSError:
        pass
    return tuple(names), ("127.0.0.1", "::1")


def split_addresses(addresses: list[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Split host names from IP addresses (ports stripped)."""
    dns: list[str] = []
    ips: list[str] = []
    for a in addresses:
        host = a.strip()
        if host.startswith("["):
            host = host[1:host.index("]")]
        elif host.count(":") == 1:
            host = host.split(":", 1)[0]
        try:
            ips.append(str(ipaddress.ip_address(host)))
        except ValueError:
            if not host:
                raise AuthorityError("address", f"empty host in {a!r}") from None
            dns.append(host)
    return tuple(dns), tuple(ips)


def init_pki(pki_dir: Path, *, addresses: list[str] | None = None, force: bool = False) -> bool:
    """Create the CA and the serving certificate unless they exist; True if anything was created."""
    p = paths(pki_dir)
    if p["ca.crt"].exists() and not force:
        return False
    pki_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(pki_dir, 0o700)
    ca_key, ca_cert = pki.make_ca()
    pki.write_private(p["ca.key"], pki.key_pem(ca_key))
    pki.write_public(p["ca.crt"], pki.cert_pem(ca_cert))
    issue_server_cert(pki_dir, addresses=addresses, ca=(ca_key, ca_cert))
    pki.write_private(p["state.json"], b"{}")
    return True


def issue_server_cert(pki_dir: Path, *, addresses: list[str] | None = None,
                      ca: tuple[ec.EllipticCurvePrivateKey, x509.Certificate] | None = None,
                      days: int = pki.SERVER_DAYS) -> x509.Certificate:
    """(Re)issue the controller's serving certificate; renewal is this with the same addresses."""
    p = paths(pki_dir)
    ca_key, ca_cert = ca if ca is not None else load_ca(pki_dir)
    dns, ips = default_addresses()
    if addresses:
        more_dns, more_ips = split_addresses(addresses)
        dns = tuple(dict.fromkeys(dns + more_dns))
        ips = tuple(dict.fromkeys(ips + more_ips))
    elif p["server.crt"].exists():
        # Renewal keeps the names the certificate had.
        old = pki.load_cert(p["server.crt"].read_bytes())
        try:
            san = old.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
            dns = tuple(dict.fromkeys(dns + tuple(san.get_values_for_type(x509.DNSName))))
            ips = tuple(dict.fromkeys(ips + tuple(str(i) for i in san.get_values_for_type(x509.IPAddress))))
        except x509.ExtensionNotFound:
            pass
    key = pki.new_key()
    cert = pki.issue(ca_key, ca_cert, key.public_key(), common_name="sluicegate-controller", dns_names=dns,
                     ip_addresses=ips, server=True, client=True, days=days)
    pki.write_private(p["server.key"], pki.key_pem(key))
    # The chain: leaf, then the CA (joining agents read the CA from it).
    pki.write_public(p["server.crt"], pki.cert_pem(cert) + pki.cert_pem(ca_cert))
    return cert


def load_ca(pki_dir: Path) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    p = paths(pki_dir)
    try:
        key = pki.load_key(p["ca.key"].read_bytes())
        cert = pki.load_cert(p["ca.crt"].read_bytes())
    except OSError as exc:
        raise pki.PkiError(f"pkiDir: cannot read the cluster CA in {pki_dir} ({exc.strerror}); "
                           f"run 'sluicegate-controller init' first") from exc
    return key, cert


# The store's meta key holding the authority's state (JSON, as state.json has it).
STATE_KEY = "pki-state"


class StateStore(Protocol):
    """Where the authority keeps its state: the controller's store (its meta table)."""

    def get_meta(self, key: str) -> str | None: ...

    def set_meta(self, key: str, value: str) -> None: ...


class Authority:
    """The CA's key in hand, plus tokens and revocations; the state file is rewritten on every change."""

    def __init__(self, pki_dir: Path, *, clock: Any = time.time, state: StateStore | None = None) -> None:
        """``state``: where tokens, issued and revoked serials live (the controller's store, so that every
        controller sharing it sees them); None: ``state.json`` in the PKI directory."""
        self.dir = pki_dir
        self.state_store = state
        self.paths = paths(pki_dir)
        self.clock = clock
        self.ca_key, self.ca_cert = load_ca(pki_dir)
        self.ca_pem = pki.cert_pem(self.ca_cert)
        self.ca_hash = pki.ca_cert_hash(self.ca_cert)
        self._lock = threading.Lock()
        self._state = self._load_state()
        self.revoked: set[int] = {int(s, 16) for s in self._state.revoked}

    # ------------------------------------------------------------- state

    def _load_state(self) -> _State:
        path = self.paths["state.json"]
        stored = self.state_store.get_meta(STATE_KEY) if self.state_store is not None else None
        try:
            if stored is not None:
                raw = json.loads(stored)
            else:
                # A store without the state yet takes it over from the file (PKI made before it moved).
                raw = json.loads(path.read_text() or "{}")
        except FileNotFoundError:
            return _State()
        except (OSError, ValueError) as exc:
            where = f"store meta {STATE_KEY!r}" if stored is not None else str(path)
            raise pki.PkiError(f"{where}: unreadable ({exc})") from exc
        return _State(
            tokens={k: TokenRecord(**v) for k, v in raw.get("tokens", {}).items()},
            issued={k: [IssuedRecord(**r) for r in v] for k, v in raw.get("issued", {}).items()},
            revoked={k: float(v) for k, v in raw.get("revoked", {}).items()},
        )

    def _save(self) -> None:
        now = self.clock()
        s = self._state
        # Forget what can no longer matter: expired tokens (a spent one is kept until then,
        # to say so), expired certificates.
        s.tokens = {k: t for k, t in s.tokens.items() if t.expires_at > now}
        s.revoked = {k: v for k, v in s.revoked.items() if v > now}
        s.issued = {n: [r for r in rs if r.not_after > now] for n, rs in s.issued.items()}
        s.issued = {n: rs for n, rs in s.issued.items() if rs}
        data = {
            "tokens": {k: asdict(t) for k, t in s.tokens.items()},
            "issued": {k: [asdict(r) for r in v] for k, v in s.issued.items()},
            "revoked": s.revoked,
        }
        text = json.dumps(data, indent=1, sort_keys=True)
        if self.state_store is not None:
            self.state_store.set_meta(STATE_KEY, text)
        else:
            pki.write_private(self.paths["state.json"], text.encode())
        self.revoked = {int(k, 16) for k in s.revoked}

    # ------------------------------------------------------------ tokens

    def create_token(
        self, *, ttl: float = 0.0, uses: int = 0, description: str = "", created_by: str = ""
    ) -> tuple[str, TokenRecord]:
        ttl = ttl or DEFAULT_TOKEN_TTL
        uses = uses or 1
        if not 0 < ttl <= MAX_TOKEN_TTL:
            raise AuthorityError("ttl", f"must be between 1s and {MAX_TOKEN_TTL / 86400:g} days, got {ttl:g}s")
        if not 0 < uses <= MAX_TOKEN_USES:
            raise AuthorityError("uses", f"must be between 1 and {MAX_TOKEN_USES}, got {uses}")
        if len(description) > 256:
            raise AuthorityError("description", "must be at most 256 characters")
        with self._lock:
            while True:
                tid = "".join(secrets.choice(_ALPHABET) for _ in range(6))
                if tid not in self._state.tokens:
                    break
            secret = "".join(secrets.choice(_ALPHABET) for _ in range(16))
            now = self.clock()
            rec = TokenRecord(
                id=tid,
                secret_sha256=hashlib.sha256(secret.encode()).hexdigest(),
                expires_at=now + ttl,
                uses_left=uses,
                description=description,
                created_by=created_by,
                created_at=now,
            )
            self._state.tokens[tid] = rec
            self._save()
        return f"{tid}.{secret}", rec

    def tokens(self) -> list[TokenRecord]:
        now = self.clock()
        return sorted(
            (t for t in self._state.tokens.values() if t.expires_at > now and t.uses_left > 0),
            key=lambda t: t.created_at,
        )

    def delete_token(self, tid: str) -> bool:
        with self._lock:
            if self._state.tokens.pop(tid, None) is None:
                return False
            self._save()
            return True

    def spend_token(self, token: str) -> TokenRecord:
        """Check a bootstrap token and spend one use of it, or raise TokenRefused."""
        m = TOKEN_RE.match(token.strip())
        if m is None:
            raise TokenRefused("token: not a bootstrap token (expected [a-z0-9]{6}.[a-z0-9]{16})")
        tid, secret = m.groups()
        with self._lock:
            rec = self._state.tokens.get(tid)
            digest = hashlib.sha256(secret.encode()).hexdigest()
            # Compare even when the id is unknown, so timing does not tell which ids exist.
            ok = hmac.compare_digest(digest, rec.secret_sha256 if rec else "0" * 64)
            if rec is None or not ok:
                raise TokenRefused(f"token {tid}: unknown or wrong secret")
            if rec.expires_at <= self.clock():
                raise TokenRefused(f"token {tid}: expired")
            if rec.uses_left <= 0:
                raise TokenRefused(f"token {tid}: no uses left")
            rec.uses_left -= 1
            self._save()
            return rec

    # ------------------------------------------------------- certificates

    def issue_node(
        self, node: str, public_key: ec.EllipticCurvePublicKey, *, days: int = pki.NODE_DAYS
    ) -> x509.Certificate:
        check_node_name(node)
        cert = pki.issue(
            self.ca_key,
            self.ca_cert,
            public_key,
            common_name=NODE_USER_PREFIX + node,
            organizations=(NODES_GROUP,),
            client=True,
            days=days,
        )
        with self._lock:
            self._state.issued.setdefault(node, []).append(
                IssuedRecord(
                    serial_hex(cert.serial_number), NODE_USER_PREFIX + node, cert.not_valid_after_utc.timestamp()
                )
            )
            self._save()
        return cert

    def issue_user(
        self, user: str, groups: tuple[str, ...], public_key: ec.EllipticCurvePublicKey, *, days: int = pki.USER_DAYS
    ) -> x509.Certificate:
        if not USER_RE.match(user) or user.startswith("system:"):
            raise AuthorityError("user", f"{user!r} is not a valid user name (letters, digits, ._@:-; not system:*)")
        for i, g in enumerate(groups):
            if not USER_RE.match(g) or (g.startswith("system:") and g != CLUSTER_ADMIN_GROUP):
                raise AuthorityError(f"groups[{i}]", f"{g!r} is not a valid group name")
        return pki.issue(
            self.ca_key, self.ca_cert, public_key, common_name=user, organizations=groups, client=True, days=days
        )

    def revoke_node(self, node: str) -> list[str]:
        with self._lock:
            records = self._state.issued.get(node, [])
            out = []
            for r in records:
                if r.serial not in self._state.revoked:
                    self._state.revoked[r.serial] = r.not_after
                    out.append(r.serial)
            self._save()
        return out

    def revoke_serial(self, serial: str, *, not_after: float | None = None) -> list[str]:
        s = serial.lower().removeprefix("0x").replace(":", "")
        try:
            int(s, 16)
        except ValueError:
            raise AuthorityError("serial", f"{serial!r} is not a hexadecimal serial number") from None
        with self._lock:
            if s in self._state.revoked:
                return []
            # Unknown expiry: keep it for the longest a leaf can live.
            self._state.revoked[s] = not_after or (self.clock() + pki.USER_DAYS * 86400.0)
            self._save()
        return [s]

    def is_revoked(self, serial: int) -> bool:
        return serial in self.revoked


def check_node_name(node: str) -> None:
    if not node or len(node) > 253 or not NODE_NAME_RE.match(node):
        raise AuthorityError(
            "node_name", f"{node!r} is not a valid node name (lower-case DNS subdomain, at most 253 characters)"
        )
