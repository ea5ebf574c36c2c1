"""The cluster PKI: certificates, CSRs, CA pinning, bootstrap tokens, revocation, token files, client configs."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sluicegate import clientconfig
from sluicegate.controller.errors import Unauthenticated
from sluicegate.security import pki
from sluicegate.security.authn import ClusterAuthenticator, TokenFileError, hash_token, load_token_file
from sluicegate.security.authority import Authority, AuthorityError, TokenRefused, init_pki, issue_server_cert


class Clock:
    def __init__(self, t: float = 1_800_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def authority(tmp_path: Path) -> Authority:
    init_pki(tmp_path / "pki", addresses=["ctl.example", "10.1.2.3"])
    return Authority(tmp_path / "pki", clock=Clock())


def test_serving_certificate_names_and_chain(authority: Authority, tmp_path: Path) -> None:
    chain = (tmp_path / "pki" / "server.crt").read_bytes()
    assert chain.count(b"BEGIN CERTIFICATE") == 2  # leaf, then the CA a joining node pins
    leaf = pki.load_cert(chain)
    from cryptography import x509

    san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {"localhost", "ctl.example"} <= set(san.get_values_for_type(x509.DNSName))
    assert {"127.0.0.1", "10.1.2.3"} <= {str(i) for i in san.get_values_for_type(x509.IPAddress)}
    assert pki.signed_by(leaf, authority.ca_cert)
    # Renewal keeps the names.
    renewed = issue_server_cert(tmp_path / "pki")
    san2 = renewed.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "ctl.example" in set(san2.get_values_for_type(x509.DNSName))
    assert renewed.serial_number != leaf.serial_number


def test_init_keeps_an_existing_ca(tmp_path: Path) -> None:
    assert init_pki(tmp_path / "pki") is True
    before = (tmp_path / "pki" / "ca.crt").read_bytes()
    assert init_pki(tmp_path / "pki") is False
    assert (tmp_path / "pki" / "ca.crt").read_bytes() == before


def test_ca_hash_is_of_the_public_key_and_stable(authority: Authority) -> None:
    assert authority.ca_hash.startswith("sha256:") and len(authority.ca_hash) == 71
    again = pki.load_cert(pki.cert_pem(authority.ca_cert))
    assert pki.ca_cert_hash(again) == authority.ca_hash


def test_node_certificates_name_the_node_and_come_from_a_valid_csr(authority: Authority) -> None:
    key = pki.new_key()
    pub = pki.csr_public_key(pki.make_csr(key, "whatever-the-node-says"))
    cert = authority.issue_node("worker-1", pub)
    info = pki.info(cert)
    assert (info.common_name, info.organizations, info.is_ca) == ("system:node:worker-1", ("system:nodes",), False)
    with pytest.raises(AuthorityError, match="node_name"):
        authority.issue_node("Bad_Name", pub)
    with pytest.raises(pki.PkiError, match="csr"):
        pki.csr_public_key(b"-----BEGIN CERTIFICATE REQUEST-----\ngarbage\n-----END CERTIFICATE REQUEST-----\n")


def test_bootstrap_tokens_expire_and_run_out(authority: Authority) -> None:
    clock = authority.clock
    assert isinstance(clock, Clock)
    token, rec = authority.create_token(ttl=60, uses=2, created_by="admin")
    tid, secret = token.split(".")
    assert len(tid) == 6 and len(secret) == 16 and secret not in (authority.dir / "state.json").read_text()
    authority.spend_token(token)
    authority.spend_token(token)
    with pytest.raises(TokenRefused, match="no uses left"):
        authority.spend_token(token)
    token2, _ = authority.create_token(ttl=60)
    clock.t += 61
    with pytest.raises(TokenRefused, match="expired"):
        authority.spend_token(token2)
    with pytest.raises(TokenRefused, match="not a bootstrap token"):
        authority.spend_token("nonsense")
    with pytest.raises(AuthorityError, match="ttl"):
        authority.create_token(ttl=10 ** 9)
    with pytest.raises(AuthorityError, match="uses"):
        authority.create_token(uses=-1)
    # State survives a restart of the controller.
    reloaded = Authority(authority.dir, clock=clock)
    token3, _ = reloaded.create_token(ttl=60)
    assert Authority(authority.dir, clock=clock).spend_token(token3).uses_left == 0


def test_revoking_a_node_denies_every_certificate_it_was_issued(authority: Authority) -> None:
    certs = [authority.issue_node("worker-1", pki.new_key().public_key()) for _ in range(2)]
    other = authority.issue_node("worker-2", pki.new_key().public_key())
    serials = authority.revoke_node("worker-1")
    assert sorted(serials) == sorted(format(c.serial_number, "x") for c in certs)
    assert all(authority.is_revoked(c.serial_number) for c in certs)
    assert not authority.is_revoked(other.serial_number)
    assert Authority(authority.dir, clock=authority.clock).is_revoked(certs[0].serial_number)
    with pytest.raises(AuthorityError, match="serial"):
        authority.revoke_serial("not-hex")


def _auth_context(cert_pem: bytes) -> dict[str, list[bytes]]:
    return {"transport_security_type": [b"ssl"], "x509_pem_cert": [cert_pem]}


def test_authenticator_reads_user_groups_and_refuses_revoked(authority: Authority) -> None:
    user = authority.issue_user("alice", ("dev", "ops"), pki.new_key().public_key())
    node = authority.issue_node("worker-1", pki.new_key().public_key())
    auth = ClusterAuthenticator(is_revoked=authority.is_revoked)
    p = auth.authenticate(_auth_context(pki.cert_pem(user)), ())
    assert (p.user, p.groups, p.method, p.node) == ("alice", frozenset({"dev", "ops"}), "certificate", None)
    assert auth.authenticate(_auth_context(pki.cert_pem(node)), ()).node == "worker-1"
    authority.revoke_serial(format(user.serial_number, "x"))
    with pytest.raises(Unauthenticated, match="revoked"):
        auth.authenticate(_auth_context(pki.cert_pem(user)), ())
    with pytest.raises(Unauthenticated, match="no client certificate and no bearer token"):
        auth.authenticate({"transport_security_type": [b"ssl"]}, ())
    with pytest.raises(AuthorityError, match="user"):
        authority.issue_user("system:admin", (), pki.new_key().public_key())


def test_bearer_tokens_from_a_hashed_token_file(tmp_path: Path, authority: Authority) -> None:
    f = tmp_path / "tokens.yaml"
    f.write_text(yaml.safe_dump({"tokens": [{"user": "ci", "groups": ["builders"], "sha256": hash_token("t0ken")}]}))
    auth = ClusterAuthenticator(is_revoked=authority.is_revoked, token_file=str(f))
    p = auth.authenticate({}, (("authorization", "Bearer t0ken"),))
    assert (p.user, p.groups, p.method) == ("ci", frozenset({"builders"}), "token")
    with pytest.raises(Unauthenticated, match="not known"):
        auth.authenticate({}, (("authorization", "Bearer other"),))
    # A bad file on reload keeps the tokens in force.
    f.write_text(yaml.safe_dump({"tokens": [{"user": "ci", "sha256": "short"}]}))
    with pytest.raises(TokenFileError, match=r"tokens\[0\]\.sha256"):
        auth.reload()
    assert auth.authenticate({}, (("authorization", "Bearer t0ken"),)).user == "ci"


@pytest.mark.parametrize(("doc", "field"), [
    ({"tokens": [{"groups": []}]}, "tokens[0].user"),
    ({"tokens": [{"user": "a", "sha256": "x" * 64}]}, "tokens[0].sha256"),
    ({"tokens": [{"user": "a", "sha256": "a" * 64, "extra": 1}]}, "tokens[0].extra"),
    ({"tokns": []}, "tokns"),
    ({"tokens": [{"user": "system:x", "sha256": "a" * 64}]}, "tokens[0].user"),
])
def test_token_file_errors_name_the_field(tmp_path: Path, doc: dict, field: str) -> None:
    f = tmp_path / "tokens.yaml"
    f.write_text(yaml.safe_dump(doc))
    with pytest.raises(TokenFileError) as err:
        load_token_file(str(f))
    assert field in str(err.value)


def test_client_config_round_trips_and_is_private(tmp_path: Path, authority: Authority) -> None:
    key = pki.new_key()
    cert = authority.issue_user("bob", ("dev",), key.public_key())
    path = tmp_path / "conf" / "config"
    clientconfig.write(path, servers=["ctl:7420"], ca=authority.ca_pem, cert=pki.cert_pem(cert), key=pki.key_pem(key))
    assert path.stat().st_mode & 0o777 == 0o600
    cfg = clientconfig.load(str(path))
    assert cfg is not None and cfg.servers == ("ctl:7420",) and cfg.ca == authority.ca_pem and cfg.tls
    assert "-----BEGIN CERTIFICATE-----\n" in path.read_text()  # literal blocks, readable
    path.write_text(yaml.safe_dump({"servers": ["x:1"], "clientCertificate": "-----BEGIN x"}))
    with pytest.raises(clientconfig.ConfigError, match="clientKey"):
        clientconfig.load(str(path))
    with pytest.raises(clientconfig.ConfigError, match="no such client config"):
        clientconfig.load(str(tmp_path / "missing"))
