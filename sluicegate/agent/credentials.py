"""The agent's TLS identity: the cluster CA it pinned at join, and its node key and certificate.

Files in the agent's PKI directory (``pkiDir``, default ``DATA_DIR/pki``; 0700):

    ca.crt     the cluster CA, pinned by hash when the node joined
    node.pem   the node's key followed by its certificate (0600), replaced
               atomically on renewal so the two never disagree

``join`` makes them; the agent renews its certificate once two thirds of
its lifetime have passed and then reconnects with the new one.
"""

from __future__ import annotations

import _ssl
import ipaddress
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path

from sluicegate.security import pki
from sluicegate.security.identity import NODE_USER_PREFIX, NODES_GROUP

# Renew once this share of the certificate's lifetime has passed.
RENEW_AT = 2 / 3


class CredentialsError(Exception):
    """Missing or unusable credentials; the message says what to do."""


@dataclass(frozen=True, slots=True)
class NodeCredentials:
    ca: bytes
    key: bytes
    cert: bytes
    node: str
    not_before: float
    not_after: float

    @property
    def renew_at(self) -> float:
        """The time (epoch seconds) at which renewal is due."""
        return self.not_before + (self.not_after - self.not_before) * RENEW_AT


def load(pki_dir: Path) -> NodeCredentials | None:
    """The node's credentials, or None if it has not joined."""
    pem_path, ca_path = pki_dir / "node.pem", pki_dir / "ca.crt"
    if not pem_path.exists():
        return None
    try:
        data, ca = pem_path.read_bytes(), ca_path.read_bytes()
    except OSError as exc:
        raise CredentialsError(f"pkiDir: cannot read {exc.filename}: {exc.strerror}") from exc
    key_end = data.find(b"-----END PRIVATE KEY-----")
    if key_end < 0:
        raise CredentialsError(f"{pem_path}: no private key in it; join the node again")
    key_end += len(b"-----END PRIVATE KEY-----\n")
    key, cert = data[:key_end], data[key_end:]
    try:
        pki.load_key(key)
        parsed = pki.load_cert(cert)
    except (pki.PkiError, ValueError) as exc:
        raise CredentialsError(f"{pem_path}: {exc}; join the node again") from exc
    inf = pki.info(parsed)
    if NODES_GROUP not in inf.organizations or not inf.common_name.startswith(NODE_USER_PREFIX):
        raise CredentialsError(f"{pem_path}: not a node certificate (subject {inf.common_name})")
    return NodeCredentials(ca=ca, key=key, cert=cert, node=inf.common_name[len(NODE_USER_PREFIX):],
                           not_before=inf.not_before, not_after=inf.not_after)


def save(pki_dir: Path, *, ca: bytes, key: bytes, cert: bytes) -> None:
    pki_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    pki.write_public(pki_dir / "ca.crt", ca)
    pki.write_private(pki_dir / "node.pem", key + cert)


def fetch_ca(address: str, ca_hash: str, *, timeout: float = 10.0) -> bytes:
    """The cluster CA from the controller's TLS handshake, accepted only if its key hashes to ``ca_hash``.

    Nothing is trusted yet, so the handshake is not verified; the pin is what
    makes the answer trustworthy (a man in the middle cannot produce a CA
    whose public key has that hash).
    """
    if not ca_hash.startswith("sha256:") or len(ca_hash) != 7 + 64:
        raise CredentialsError(f"--ca-cert-hash: expected sha256:<64 hex digits>, got {ca_hash!r}")
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["h2"])
    with socket.create_connection((host, int(port)), timeout=timeout) as raw:
        with ctx.wrap_socket(raw, server_hostname=host if not _is_ip(host) else None) as tls:
            chain_of = getattr(tls, "get_unverified_chain", None) or tls._sslobj.get_unverified_chain  # type: ignore[attr-defined]
            chain = chain_of() or []
    for c in chain:
        der = c.public_bytes(_ssl.ENCODING_DER)
        cert = pki.load_cert(ssl.DER_cert_to_PEM_cert(der).encode())
        if pki.info(cert).is_ca and pki.ca_cert_hash(cert) == ca_hash.lower():
            return pki.cert_pem(cert)
    raise CredentialsError(f"the controller at {address} presented no CA certificate with hash {ca_hash}: "
                           f"wrong address (use the token port) or wrong hash")


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
