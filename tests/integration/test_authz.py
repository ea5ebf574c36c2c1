"""The real controller: the audit log beside the store, SIGHUP reloading the authorization policy."""

from __future__ import annotations

import json
import signal
import stat
from pathlib import Path

import pytest

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
        sluicectl(s, "apply", "-f", str(ROOT / "examples" / "queues.yaml"))
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
