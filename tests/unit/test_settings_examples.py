"""The shipped example settings load, and unknown keys are refused by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluicegate.agent.settings import SettingsError as AgentSettingsError
from sluicegate.agent.settings import load_settings as load_agent
from sluicegate.controller.settings import SettingsError, load_settings
from sluicegate.security.authz import Authorizer
from sluicegate.security.identity import Principal

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "settings"


def test_controller_example_loads() -> None:
    s = load_settings(str(DEPLOY / "controller.yaml"), {})
    assert (s.listen, s.node_heartbeat_timeout, s.placement) == ("0.0.0.0:7420", 40.0, True)
    assert (s.pki_dir, s.token_listen) == ("/var/lib/sluicegate/pki", "0.0.0.0:7423")
    assert (s.fencing_grace, s.self_fencing) == (45.0, True)


def test_policy_example_loads_and_settings_name_it(tmp_path: Path) -> None:
    a = Authorizer(str(DEPLOY / "policy.yaml"))
    assert a.allowed(Principal("alice", frozenset()), "create", "LocalQueue", "team-a")
    assert not a.allowed(Principal("alice", frozenset()), "get", "Workload", "team-b")
    assert a.allowed(Principal("bob", frozenset({"auditors"})), "list", "Workload", "team-b")
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"store: {tmp_path}/db/c.db\nauthorizationPolicy: {DEPLOY / 'policy.yaml'}\n")
    s = load_settings(str(cfg), {})
    assert (s.authorization_policy, s.audit_log) == (str(DEPLOY / "policy.yaml"), f"{tmp_path}/db/audit.log")
    assert load_settings(None, {"store": "sqlite:///x/y.db"}).audit_log == "/x/audit.log"
    cfg.write_text("auditLog: ''\n")
    assert load_settings(str(cfg), {}).audit_log == ""
    bad = tmp_path / "p.yaml"
    bad.write_text("bindings:\n- {role: ops, users: [u]}\n")
    cfg.write_text(f"authorizationPolicy: {bad}\n")
    with pytest.raises(SettingsError, match=r'authorizationPolicy: .*p.yaml: bindings\[0\].role: unknown role "ops"'):
        load_settings(str(cfg), {})


def test_agent_example_loads() -> None:
    s = load_agent(str(DEPLOY / "agent.yaml"), {})
    assert (s.controller, s.system_reserved, s.reconnect_cap) == ("ctl.example.org:7420", {"cpu": 500, "memory": 1 << 30}, 30.0)
    assert (s.data_dir, s.pki_path) == ("/var/lib/sluicegate-agent", Path("/var/lib/sluicegate-agent/pki"))


def test_unknown_keys_are_named(tmp_path: Path) -> None:
    bad = tmp_path / "c.yaml"
    bad.write_text("listen: 127.0.0.1:1\nlisen: x\n")
    with pytest.raises(SettingsError, match="lisen: unknown setting"):
        load_settings(str(bad), {})
    bad.write_text("dataDr: /x\n")
    with pytest.raises(AgentSettingsError, match="dataDr: unknown setting"):
        load_agent(str(bad), {})


def test_pod_user_settings_load_and_bad_ones_are_named(tmp_path: Path) -> None:
    agent = tmp_path / "a.yaml"
    agent.write_text("podUsers:\n  ops: {user: root, allowRoot: true}\n  team: {uidRange: {min: 20000, max: 20999}}\n"
                     "defaultPodUser: {user: nobody}\n")
    s = load_agent(str(agent), {})
    assert (s.pod_users.for_namespace("ops").uid, s.pod_users.for_namespace("team").uid,
            s.pod_users.for_namespace("other").uid) == (0, 20000, 65534)
    agent.write_text("podUsers:\n  ops: {user: root}\n")
    with pytest.raises(AgentSettingsError, match="podUsers.ops.user: root needs allowRoot: true"):
        load_agent(str(agent), {})
    controller = tmp_path / "c.yaml"
    controller.write_text("podSecurity:\n  namespaces:\n    ops: {user: 0, allowRoot: true}\n")
    assert load_settings(str(controller), {}).pod_security.for_namespace("ops").allow_root is True
    controller.write_text("podSecurity:\n  default: {uidRange: {min: 10, max: 1}}\n")
    with pytest.raises(SettingsError, match=r"podSecurity.default.uidRange: need 0 < min <= max"):
        load_settings(str(controller), {})
    controller.write_text("podSecurity:\n  namespace: {}\n")
    with pytest.raises(SettingsError, match="podSecurity: expected"):
        load_settings(str(controller), {})


def test_watch_backlog_loads_and_a_bad_one_is_named(tmp_path: Path) -> None:
    assert load_settings(str(DEPLOY / "controller.yaml"), {}).watch_backlog == 10_000
    cfg = tmp_path / "c.yaml"
    cfg.write_text("watchBacklog: 50\n")
    assert load_settings(str(cfg), {}).watch_backlog == 50
    for bad in ("0", "-3", "many", "true", "2.5"):
        cfg.write_text(f"watchBacklog: {bad}\n")
        with pytest.raises(SettingsError, match="watchBacklog: expected a positive whole number"):
            load_settings(str(cfg), {})
