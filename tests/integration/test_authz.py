"""The real controller: the audit log beside the store, SIGHUP reloading the authorization policy."""

from __future__ import annotations

import json
import signal
import stat
import subprocess
from pathlib import Path

import pytest
import yaml

from .harness import ROOT, Controller, sluicectl, wait_for

pytestmark = pytest.mark.integration


def test_audit_log_and_sighup_reload(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("bindings:\n- {role: view, namespaces: ['*'], groups: [auditors]}\n")
    settings = tmp_path / "controller.yaml"
    settings.write_text(f"authorizationPolicy: {policy}\n")
    c = Controller(tmp_path, extra=["--no-placement", "--config", str(settings)]).start()
    try:
        s = c.address
        # Authentication off: the anonymous cluster admin may do everything, and is audited.
        sluicectl(s, "apply", "-f", str(ROOT / "tests" / "integration" / "queues.yaml"))
        audit = tmp_path / "audit.log"
        assert stat.S_IMODE(audit.stat().st_mode) == 0o600
        lines = [json.loads(line) for line in audit.read_text().splitlines()]
        assert lines and {(r["user"], r["outcome"]) for r in lines} == {("system:anonymous", "allowed")}
        assert ("create", "ClusterQueue", "team-a") in {(r["verb"], r["kind"], r["name"]) for r in lines}

        assert c.proc is not None
        policy.write_text("bindings:\n- {role: ops, users: [u]}\n")
        c.proc.send_signal(signal.SIGHUP)
        wait_for("the reload error", lambda: 'bindings[0].role: unknown role "ops"' in c.log.read_text())
        policy.write_text("bindings:\n- {role: edit, namespaces: [a], users: [u]}\n")
        c.proc.send_signal(signal.SIGHUP)
        wait_for("the reload", lambda: "policy reloaded from" in c.log.read_text())
        assert "team-a" in sluicectl(s, "get", "clusterqueues").stdout  # still serving
    finally:
        assert c.stop() == 0


TEAM_QUEUES = """
apiVersion: sluicegate.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: sluicegate.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: "4"}
---
apiVersion: sluicegate.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: team-a}
spec: {clusterQueue: cq}
---
apiVersion: sluicegate.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: team-b}
spec: {clusterQueue: cq}
"""


def test_a_token_user_bound_to_team_a_over_tls(tmp_path: Path) -> None:
    from .test_security import init, run

    data, admin = tmp_path / "controller", tmp_path / "admin.conf"
    init(data, admin)
    digest = run("-m", "sluicegate.controller.server", "hash-token", input="alice-token\n").stdout.strip()
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(yaml.safe_dump({"tokens": [{"user": "alice", "groups": ["dev"], "sha256": digest}]}))
    policy = tmp_path / "policy.yaml"
    policy.write_text("bindings:\n- {role: edit, namespaces: [team-a], users: [alice]}\n")
    settings = tmp_path / "controller.yaml"
    settings.write_text(yaml.safe_dump({"tokenFile": str(tokens), "authorizationPolicy": str(policy)}))
    c = Controller(tmp_path, extra=["--no-placement", "--pki-dir", str(data / "pki"), "--token-listen", "127.0.0.1:0",
                                    "--config", str(settings)]).start()
    try:
        queues = tmp_path / "queues.yaml"
        queues.write_text(TEAM_QUEUES)
        sluicectl(c.address, "apply", "-f", str(queues), config=admin)
        for ns in ("team-a", "team-b"):
            sluicectl(c.address, "run", "-n", ns, "-q", "lq", "--name", f"{ns}-1", "--", "true", config=admin)
        alice = tmp_path / "alice.conf"
        alice.write_text(yaml.safe_dump({"servers": [c.token_address], "certificateAuthority":
                                         (data / "pki" / "ca.crt").read_text(), "token": "alice-token"}))

        def as_alice(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
            return sluicectl(c.token_address, *args, config=alice, check=check)

        assert as_alice("get", "workloads", "-A", "-o", "name").stdout.split() == ["workload/team-a-1"]  # kubectl: singular kind
        for args, verb in ((("get", "workload", "team-b-1"), "get"), (("delete", "workload", "team-b-1"), "delete"),
                           (("logs", "team-b-1"), "logs"), (("get", "workloads"), "list")):
            res = as_alice(*args, "-n", "team-b", check=False)
            assert res.returncode != 0
            assert f'user "alice" (groups: dev) may not {verb} Workload in namespace "team-b"' in res.stderr, res.stderr
        as_alice("run", "-n", "team-a", "-q", "lq", "--name", "mine", "--", "true")
        as_alice("delete", "workload", "mine", "-n", "team-a")
        lines = [json.loads(line) for line in (tmp_path / "audit.log").read_text().splitlines()]
        mine = [(r["verb"], r["namespace"], r["name"], r["outcome"]) for r in lines if r["user"] == "alice"]
        assert mine == [("get", "team-b", "team-b-1", "denied"), ("delete", "team-b", "team-b-1", "denied"),
                        ("logs", "team-b", "team-b-1", "denied"), ("list", "team-b", "", "denied"),
                        ("create", "team-a", "mine", "allowed"), ("delete", "team-a", "mine", "allowed")]

        # SIGHUP re-reads the token file too: a new token works, and its user has no binding.
        bob = run("-m", "sluicegate.controller.server", "hash-token", input="bob-token\n").stdout.strip()
        tokens.write_text(yaml.safe_dump({"tokens": [{"user": "alice", "groups": ["dev"], "sha256": digest},
                                                     {"user": "bob", "groups": [], "sha256": bob}]}))
        assert c.proc is not None
        c.proc.send_signal(signal.SIGHUP)
        wait_for("the policy reload", lambda: "policy reloaded from" in c.log.read_text())
        alice.write_text(alice.read_text().replace("alice-token", "bob-token"))
        res = as_alice("get", "workloads", "-A", check=False)
        assert 'user "bob" (groups: none) may not list Workload in all namespaces' in res.stderr, res.stderr
    finally:
        assert c.stop() == 0
