"""A TLS cluster on 127.0.0.1: mutual TLS, node join with bootstrap tokens, node identity, revocation.

Everything is real: the PKI is made by ``sluicegate-controller init``, the
controller and agents are processes, the agent joins with ``sluicegate-agent
join``, and the refusals are asserted at the gRPC level where a user or an
attacker would meet them.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import ssl
import subprocess
import sys
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml

from sluicegate.security import pki
from sluicegate.v1 import agent_pb2, agent_pb2_grpc, objects_pb2, objects_pb2_grpc, security_pb2, security_pb2_grpc

from .harness import ROOT, Agent, Controller, sluicectl, wait_for

pytestmark = pytest.mark.integration

QUEUES = str(ROOT / "tests" / "integration" / "queues.yaml")


def run(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=60, cwd=ROOT, input=input,
                          env={**os.environ, "XDG_CONFIG_HOME": "/nonexistent/sluicegate-tests"})


@dataclass
class Tls:
    controller: Controller
    data: Path
    admin: Path

    @property
    def pki(self) -> Path:
        return self.data / "pki"

    def ctl(self, *args: str, check: bool = True, config: Path | None = None) -> subprocess.CompletedProcess[str]:
        return sluicectl(self.controller.address, *args, check=check, config=config or self.admin)

    def get(self, *args: str) -> Any:
        return json.loads(self.ctl("get", *args, "-o", "json").stdout)

    def token(self, *extra: str) -> str:
        return self.ctl("token", "create", *extra).stdout.strip()

    def join(self, node: str, token: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
        return run("-m", "sluicegate.agent.server", "join", "--controller", self.controller.token_address,
                   "--token", token, "--ca-cert-hash", self.controller.ca_hash, "--node-name", node,
                   "--data-dir", str(data_dir))


def init(data: Path, admin: Path) -> None:
    res = run("-m", "sluicegate.controller.server", "init", "--data-dir", str(data), "--admin-config", str(admin))
    assert res.returncode == 0, res.stderr


@pytest.fixture
def tls(tmp_path: Path) -> Iterator[Tls]:
    data, admin = tmp_path / "controller", tmp_path / "admin.conf"
    init(data, admin)
    c = Controller(tmp_path, extra=["--pki-dir", str(data / "pki"), "--token-listen", "127.0.0.1:0",
                                    "--node-heartbeat-timeout", "3", "--agent-heartbeat-interval", "0.3"]).start()
    try:
        yield Tls(c, data, admin)
    finally:
        c.stop()


def read_pem(path: Path) -> tuple[bytes, bytes]:
    """(key, cert) of an agent's node.pem."""
    data = path.read_bytes()
    end = data.index(b"-----END PRIVATE KEY-----") + len(b"-----END PRIVATE KEY-----\n")
    return data[:end], data[end:]


async def code_of(call: Callable[[], Awaitable[object]]) -> grpc.StatusCode:
    try:
        await call()
    except grpc.aio.AioRpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


def finished(tls: Tls, name: str) -> bool:
    conds = tls.get("workload", name).get("status", {}).get("conditions", [])
    return any(c["type"] == "Finished" and c["status"] == "True" for c in conds)


def test_init_writes_private_keys_and_an_admin_config(tls: Tls) -> None:
    for name in ("ca.key", "server.key", "state.json"):
        assert (tls.pki / name).stat().st_mode & 0o777 == 0o600, name
    assert tls.pki.stat().st_mode & 0o777 == 0o700
    assert tls.admin.stat().st_mode & 0o777 == 0o600
    cfg = yaml.safe_load(tls.admin.read_text())
    info = pki.info(pki.load_cert(cfg["clientCertificate"].encode()))
    assert (info.common_name, info.organizations) == ("admin", ("system:masters",))
    assert info.not_after - info.not_before <= 366 * 86400  # it expires
    out = tls.ctl("auth", "whoami").stdout
    assert "user: admin" in out and "system:masters" in out and "certificate" in out


def test_clients_and_agents_without_credentials_are_refused(tls: Tls) -> None:
    c = tls.controller
    ca = (tls.pki / "ca.crt").read_bytes()
    req = objects_pb2.ListRequest(kind="ClusterQueue")

    async def main() -> None:
        # Plaintext to the TLS port, or TLS without a client certificate: refused in the handshake.
        async with grpc.aio.insecure_channel(c.address) as ch:
            assert await code_of(lambda: objects_pb2_grpc.AdminStub(ch).List(req, timeout=5)) == grpc.StatusCode.UNAVAILABLE
        async with grpc.aio.secure_channel(c.address, grpc.ssl_channel_credentials(ca)) as ch:
            assert await code_of(lambda: objects_pb2_grpc.AdminStub(ch).List(req, timeout=5)) == grpc.StatusCode.UNAVAILABLE
        # The token port without a token: refused, naming what is missing.
        async with grpc.aio.secure_channel(c.token_address, grpc.ssl_channel_credentials(ca)) as ch:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await objects_pb2_grpc.AdminStub(ch).List(req, timeout=5)
            assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert "no client certificate and no bearer token" in (err.value.details() or "")
            # Nor can an agent open the node stream there.
            # (gRPC core may report its own INTERNAL when the request's write races the refusal: try again.)
            for _ in range(5):
                call = agent_pb2_grpc.AgentLinkStub(ch).Connect(iter([agent_pb2.AgentMessage(
                    register=agent_pb2.Register(node=agent_pb2.NodeInfo(name="intruder")))]), timeout=5)
                code = await code_of(call.read)
                if code != grpc.StatusCode.INTERNAL:
                    break
            assert code == grpc.StatusCode.UNIMPLEMENTED
        # An agent without credentials on the API port.
        async with grpc.aio.insecure_channel(c.address) as ch:
            call = agent_pb2_grpc.AgentLinkStub(ch).Connect(iter([agent_pb2.AgentMessage(register=agent_pb2.Register(
                node=agent_pb2.NodeInfo(name="intruder")))]), timeout=5)
            assert await code_of(call.read) == grpc.StatusCode.UNAVAILABLE

    asyncio.run(main())
    res = sluicectl(c.address, "get", "clusterqueues", check=False)
    assert res.returncode == 3 and res.stderr.startswith("error: cannot reach the controller")
    assert tls.ctl("get", "nodes", "-o", "json").stdout.count("intruder") == 0


def test_tls13_is_negotiated(tls: Tls) -> None:
    host, port = tls.controller.token_address.rsplit(":", 1)
    ctx = ssl.create_default_context(cadata=(tls.pki / "ca.crt").read_text())
    ctx.set_alpn_protocols(["h2"])
    with socket.create_connection((host, int(port)), timeout=5) as raw, ctx.wrap_socket(raw, server_hostname=host) as s:
        assert s.version() == "TLSv1.3"


def test_a_joined_node_runs_pods_and_can_only_be_itself_until_revoked(tls: Tls, tmp_path: Path) -> None:
    c = tls.controller
    tls.ctl("apply", "-f", QUEUES)
    a_dir = tmp_path / "agent-node-a"
    res = tls.join("node-a", tls.token(), a_dir)
    assert res.returncode == 0, res.stderr
    assert (a_dir / "pki" / "node.pem").stat().st_mode & 0o777 == 0o600
    agent = Agent(tmp_path, c.address, "node-a").start()
    try:
        tls.ctl("run", "--queue", "default", "--name", "hello", "--cpu", "500m", "--", "sh", "-c", "echo over tls")
        wait_for("the job finished", lambda: finished(tls, "hello"), timeout=60)
        assert tls.ctl("logs", "hello").stdout == "over tls\n"

        key, cert = read_pem(a_dir / "pki" / "node.pem")
        ca = (a_dir / "pki" / "ca.crt").read_bytes()

        async def connect_as(name: str) -> tuple[grpc.StatusCode, str]:
            async with grpc.aio.secure_channel(c.address, grpc.ssl_channel_credentials(ca, key, cert)) as ch:
                call = agent_pb2_grpc.AgentLinkStub(ch).Connect(iter([agent_pb2.AgentMessage(register=agent_pb2.Register(
                    node=agent_pb2.NodeInfo(name=name, allocatable={"cpu": 1000})))]), timeout=10)
                try:
                    await call.read()
                except grpc.aio.AioRpcError as exc:
                    return exc.code(), exc.details() or ""
                call.cancel()
                return grpc.StatusCode.OK, ""

        code, details = asyncio.run(connect_as("node-b"))
        assert code == grpc.StatusCode.PERMISSION_DENIED
        assert "certificate is for node 'node-a'" in details and "'node-b'" in details
        assert [n["name"] for n in tls.get("nodes")["items"]] == ["node-a"]

        async def node_creates_token() -> grpc.StatusCode:
            async with grpc.aio.secure_channel(c.address, grpc.ssl_channel_credentials(ca, key, cert)) as ch:
                return await code_of(lambda: security_pb2_grpc.SecurityStub(ch).CreateToken(
                    security_pb2.CreateTokenRequest(), timeout=5))

        assert asyncio.run(node_creates_token()) == grpc.StatusCode.PERMISSION_DENIED

        out = tls.ctl("delete", "node", "node-a").stdout
        assert "node/node-a deleted" in out
        code, details = asyncio.run(connect_as("node-a"))
        assert code == grpc.StatusCode.UNAUTHENTICATED and "revoked" in details
        wait_for("the agent saw its revocation", lambda: "revoked" in agent.log.read_text(), timeout=20)
    finally:
        agent.stop()


def test_bootstrap_tokens_are_spent_bounded_and_pinned(tls: Tls, tmp_path: Path) -> None:
    token = tls.token("--uses", "1")
    first = tls.join("node-x", token, tmp_path / "x")
    assert first.returncode == 0, first.stderr
    second = tls.join("node-y", token, tmp_path / "y")
    assert second.returncode == 1 and "PERMISSION_DENIED" in second.stderr and "no uses left" in second.stderr
    assert not (tmp_path / "y" / "pki" / "node.pem").exists()
    wrong = tls.join("node-z", token.split(".")[0] + ".0000000000000000", tmp_path / "z")
    assert wrong.returncode == 1 and "unknown or wrong secret" in wrong.stderr
    bad_pin = run("-m", "sluicegate.agent.server", "join", "--controller", tls.controller.token_address,
                  "--token", tls.token(), "--ca-cert-hash", "sha256:" + "0" * 64, "--node-name", "node-w",
                  "--data-dir", str(tmp_path / "w"))
    assert bad_pin.returncode == 1 and "no CA certificate with hash" in bad_pin.stderr
    listing = tls.ctl("token", "list").stdout
    assert token.split(".")[1] not in listing and token.split(".")[0] not in listing


def test_bearer_tokens_on_the_token_port(tmp_path: Path) -> None:
    data = tmp_path / "controller"
    init(data, tmp_path / "admin.conf")
    digest = run("-m", "sluicegate.controller.server", "hash-token", input="s3cret-ci-token\n").stdout.strip()
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(yaml.safe_dump({"tokens": [{"user": "ci", "groups": ["system:masters"], "sha256": digest}]}))
    settings = tmp_path / "controller.yaml"
    settings.write_text(yaml.safe_dump({"tokenFile": str(tokens)}))
    c = Controller(tmp_path, extra=["--pki-dir", str(data / "pki"), "--token-listen", "127.0.0.1:0",
                                    "--config", str(settings)]).start()
    try:
        cfg = tmp_path / "ci.conf"
        ca = (data / "pki" / "ca.crt").read_text()
        cfg.write_text(yaml.safe_dump({"servers": [c.token_address], "certificateAuthority": ca, "token": "s3cret-ci-token"}))
        out = sluicectl(c.token_address, "auth", "whoami", config=cfg).stdout
        assert "user: ci" in out and "authenticated by: token" in out
        cfg.write_text(yaml.safe_dump({"servers": [c.token_address], "certificateAuthority": ca, "token": "wrong"}))
        res = sluicectl(c.token_address, "auth", "whoami", config=cfg, check=False)
        assert res.returncode == 1 and "bearer token is not known" in res.stderr
    finally:
        c.stop()


def test_plaintext_on_a_routable_address_is_refused_unless_insecure(tmp_path: Path) -> None:
    res = run("-m", "sluicegate.controller.server", "--store", str(tmp_path / "c.db"), "--listen", "0.0.0.0:0",
              "--health-listen", "127.0.0.1:0")
    assert res.returncode == 2 and "listen: 0.0.0.0:0 is not a loopback address" in res.stderr


def test_an_agent_renews_its_certificate_when_due_and_reconnects_with_it(tls: Tls, tmp_path: Path) -> None:
    import datetime as dt

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes

    a_dir = tmp_path / "agent-node-r"
    assert tls.join("node-r", tls.token(), a_dir).returncode == 0
    # Replace the node's certificate with one two thirds through a short life: renewal is due now.
    ca_key = pki.load_key((tls.pki / "ca.key").read_bytes())
    ca_cert = pki.load_cert((tls.pki / "ca.crt").read_bytes())
    key = pki.new_key()
    now = dt.datetime.now(dt.UTC)
    short = (x509.CertificateBuilder().subject_name(x509.Name([
        x509.NameAttribute(x509.oid.NameOID.ORGANIZATION_NAME, "system:nodes"),
        x509.NameAttribute(x509.oid.NameOID.COMMON_NAME, "system:node:node-r")]))
        .issuer_name(ca_cert.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=20)).not_valid_after(now + dt.timedelta(minutes=10))
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256()))
    (a_dir / "pki" / "node.pem").write_bytes(pki.key_pem(key) + pki.cert_pem(short))
    agent = Agent(tmp_path, tls.controller.address, "node-r").start()
    try:
        def renewed() -> bool:
            _, cert = read_pem(a_dir / "pki" / "node.pem")
            return pki.load_cert(cert).serial_number != short.serial_number
        wait_for("the agent renewed its certificate", renewed, timeout=30)
        _, cert = read_pem(a_dir / "pki" / "node.pem")
        info = pki.info(pki.load_cert(cert))
        assert info.common_name == "system:node:node-r" and info.not_after - info.not_before > 300 * 86400
        wait_for("the agent registered again with the new certificate",
                 lambda: agent.log.read_text().count("registered with controller") >= 2, timeout=30)
        assert [n["name"] for n in tls.get("nodes")["items"]] == ["node-r"]
    finally:
        agent.stop()


def test_joins_tokens_and_revocations_are_audited(tls: Tls, tmp_path: Path) -> None:
    token = tls.token("--uses", "1")
    assert tls.join("node-q", token, tmp_path / "q").returncode == 0
    assert tls.join("node-q2", token, tmp_path / "q2").returncode == 1
    tls.ctl("delete", "node", "node-q")
    lines = [json.loads(x) for x in (tmp_path / "audit.log").read_text().splitlines()]
    seen = [(x["user"], x["verb"], x["kind"], x["name"], x["outcome"]) for x in lines]
    tid = token.split(".")[0]
    assert ("admin", "create", "BootstrapToken", tid, "allowed") in seen
    assert (f"bootstrap-token:{tid}", "join", "Node", "node-q", "allowed") in seen
    assert (f"bootstrap-token:{tid}", "join", "Node", "node-q2", "denied") in seen
    assert ("admin", "delete", "Node", "node-q", "allowed") in seen
    assert token.split(".")[1] not in (tmp_path / "audit.log").read_text()


def served_certificate_serial(address: str, ca: str) -> int:
    host, port = address.rsplit(":", 1)
    ctx = ssl.create_default_context(cadata=ca)
    ctx.set_alpn_protocols(["h2"])
    with socket.create_connection((host, int(port)), timeout=5) as raw, ctx.wrap_socket(raw, server_hostname=host) as s:
        der = s.getpeercert(binary_form=True)
    assert der is not None
    return pki.load_cert(ssl.DER_cert_to_PEM_cert(der).encode()).serial_number


def test_renewing_the_serving_certificate_needs_no_restart(tls: Tls) -> None:
    ca = (tls.pki / "ca.crt").read_text()
    before = served_certificate_serial(tls.controller.token_address, ca)
    res = run("-m", "sluicegate.controller.server", "certs", "renew", "--data-dir", str(tls.data))
    assert res.returncode == 0, res.stderr
    wait_for("new connections get the renewed certificate",
             lambda: served_certificate_serial(tls.controller.token_address, ca) != before, timeout=20)
    # Existing credentials keep working against it.
    assert "user: admin" in tls.ctl("auth", "whoami").stdout
