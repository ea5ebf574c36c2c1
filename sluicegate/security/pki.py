"""The cluster PKI: keys, certificates, CSRs and CA pinning, with ``cryptography``.

Every key is EC P-256.  The cluster CA signs three kinds of leaf:

- the controller's serving certificate (serverAuth, SANs from its addresses);
- node certificates (clientAuth, CN ``system:node:NAME``, O ``system:nodes``),
  issued when an agent joins with a bootstrap token and renewed by the agent;
- user certificates (clientAuth, CN = user, O = groups).

A joining agent pins the CA by the SHA-256 of its SubjectPublicKeyInfo,
printed as ``sha256:<hex>`` (the form ``kubeadm join --discovery-token-ca-cert-hash``
uses), so a man in the middle cannot hand it another CA.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_DAYS = 3650
SERVER_DAYS = 365
NODE_DAYS = 365
USER_DAYS = 365
# Leaves start this long before "now": a peer whose clock is a little behind still accepts them.
BACKDATE = dt.timedelta(minutes=5)


class PkiError(Exception):
    """A key, certificate or CSR is missing, unreadable or not what it must be; the message says which."""


@dataclass(frozen=True, slots=True)
class CertInfo:
    common_name: str
    organizations: tuple[str, ...]
    serial: int
    not_before: float
    not_after: float
    is_ca: bool


def new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def load_key(pem: bytes) -> ec.EllipticCurvePrivateKey:
    key = serialization.load_pem_private_key(pem, password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise PkiError("expected an EC private key")
    return key


def load_cert(pem: bytes) -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(pem)
    except ValueError as exc:
        raise PkiError(f"not a PEM certificate: {exc}") from exc


def cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _name(common_name: str, organizations: tuple[str, ...] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attrs)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def make_ca(
    common_name: str = "sluicegate-ca", *, days: int = CA_DAYS
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = new_key()
    now = _now()
    name = _name(common_name)
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ski, critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def issue(
    ca_key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    public_key: ec.EllipticCurvePublicKey,
    *,
    common_name: str,
    organizations: tuple[str, ...] = (),
    dns_names: tuple[str, ...] = (),
    ip_addresses: tuple[str, ...] = (),
    server: bool = False,
    client: bool = False,
    days: int,
) -> x509.Certificate:
    """A leaf certificate signed by the CA, valid from a little before now for ``days``."""
    now = _now()
    not_after = min(now + dt.timedelta(days=days), ca_cert.not_valid_after_utc)
    usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server else []) + (
        [ExtendedKeyUsageOID.CLIENT_AUTH] if client else []
    )
    b = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name, organizations))
        .issuer_name(ca_cert.subject)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
    )
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses]
    if sans:
        b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return b.sign(ca_key, hashes.SHA256())


def make_csr(key: ec.EllipticCurvePrivateKey, common_name: str, organizations: tuple[str, ...] = ()) -> bytes:
    csr = (
        x509.CertificateSigningRequestBuilder()
        .subject_name(_name(common_name, organizations))
        .sign(key, hashes.SHA256())
    )
    return csr.public_bytes(serialization.Encoding.PEM)


def csr_public_key(pem: bytes) -> ec.EllipticCurvePublicKey:
    """The public key of a CSR whose signature proves possession of the private key."""
    try:
        csr = x509.load_pem_x509_csr(pem)
    except ValueError as exc:
        raise PkiError(f"csr: not a PEM certificate signing request: {exc}") from exc
    if not csr.is_signature_valid:
        raise PkiError("csr: its signature does not verify")
    key = csr.public_key()
    if not isinstance(key, ec.EllipticCurvePublicKey) or not isinstance(key.curve, ec.SECP256R1):
        raise PkiError("csr: the key must be EC P-256")
    return key


def info(cert: x509.Certificate) -> CertInfo:
    cn = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    orgs = cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
    try:
        is_ca = bool(cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca)
    except x509.ExtensionNotFound:
        is_ca = False
    return CertInfo(
        common_name=str(cn[0].value) if cn else "",
        organizations=tuple(str(o.value) for o in orgs),
        serial=cert.serial_number,
        not_before=cert.not_valid_before_utc.timestamp(),
        not_after=cert.not_valid_after_utc.timestamp(),
        is_ca=is_ca,
    )


def ca_cert_hash(cert: x509.Certificate) -> str:
    """``sha256:<hex>`` of the certificate's SubjectPublicKeyInfo."""
    spki = cert.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return "sha256:" + hashlib.sha256(spki).hexdigest()


def signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, Exception):  # noqa: BLE001 - any failure means "not issued by this CA"
        return False
    return True


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` atomically with mode 0600 (its directory 0700 when created here)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def write_public(path: Path, data: bytes) -> None:
    """Write a certificate atomically, readable by all (it holds no secret)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
