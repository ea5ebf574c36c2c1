"""The policy, as a table: every role x verb x kind, in and outside its namespaces; bad files name the field."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import yaml

from sluicegate.controller.errors import PermissionDenied
from sluicegate.controller.manager import KIND_ALIASES
from sluicegate.security.authz import (
    CLUSTER_KINDS,
    KINDS,
    NAMESPACED_KINDS,
    VERBS,
    Authorizer,
    PolicyError,
    parse_policy,
)
from sluicegate.security.identity import ANONYMOUS_ADMIN, CLUSTER_ADMIN_GROUP, NODES_GROUP, Principal

# What each namespace role may do inside its namespace, written out by hand
# (not derived from the module's tables).
VIEW = {
    "get Workload", "list Workload", "watch Workload", "logs Workload",
    "get LocalQueue", "list LocalQueue", "watch LocalQueue",
    "get PodGroup", "list PodGroup", "watch PodGroup",
}
EDIT = VIEW | {"create Workload", "update Workload", "delete Workload", "stop Workload", "resume Workload",
               "create PodGroup", "update PodGroup", "delete PodGroup"}
ADMIN = EDIT | {"create LocalQueue", "update LocalQueue", "delete LocalQueue"}
EXPECTED = {"view": VIEW, "edit": EDIT, "admin": ADMIN}
CLUSTER_READS = {f"{v} {k}" for v in ("get", "list", "watch") for k in CLUSTER_KINDS}


def authorizer(doc: str) -> Authorizer:
    return Authorizer(policy=parse_policy(yaml.safe_load(doc)))


def user(name: str, *groups: str) -> Principal:
    return Principal(name, frozenset(groups), "certificate")


def test_every_kind_the_controller_knows_is_classified() -> None:
    assert set(KIND_ALIASES.values()) <= KINDS
    assert NAMESPACED_KINDS == {"Workload", "LocalQueue", "PodGroup"}
    assert "Node" in CLUSTER_KINDS


@pytest.mark.parametrize("role", ["view", "edit", "admin"])
@pytest.mark.parametrize("by", ["user", "group"])
def test_namespace_role_table(role: str, by: str) -> None:
    subject = "users: [alice]" if by == "user" else "groups: [dev]"
    a = authorizer(f"bindings:\n- role: {role}\n  namespaces: [team-a]\n  {subject}\n")
    alice = user("alice", "dev") if by == "group" else user("alice")
    for verb, kind in itertools.product(VERBS, sorted(KINDS)):
        key = f"{verb} {kind}"
        if kind in CLUSTER_KINDS:
            want = key in CLUSTER_READS
            # A cluster-scoped kind has no namespace: whatever is passed, the answer is the same.
            for ns in ("", "team-a", "team-b"):
                assert a.allowed(alice, verb, kind, ns) is want, (key, ns)
        else:
            assert a.allowed(alice, verb, kind, "team-a") is (key in EXPECTED[role]), key
            assert a.allowed(alice, verb, kind, "team-b") is False, key
            assert a.allowed(alice, verb, kind, "") is False, key  # "all namespaces" needs them all
            assert a.visible_namespaces(alice, verb, kind) == (
                frozenset({"team-a"}) if key in EXPECTED[role] else frozenset()), key
    # Somebody else, not in the group, gets nothing.
    for verb, kind in itertools.product(VERBS, sorted(KINDS)):
        assert not a.allowed(user("mallory", "other"), verb, kind, "team-a")


def test_cluster_admin_binding_and_system_masters_do_everything() -> None:
    a = authorizer("bindings:\n- role: cluster-admin\n  users: [root]\n")
    for p in (user("root"), user("someone", CLUSTER_ADMIN_GROUP), ANONYMOUS_ADMIN):
        for verb, kind, ns in itertools.product(VERBS, sorted(KINDS), ("", "team-a", "x")):
            assert a.allowed(p, verb, kind, ns)
        assert a.visible_namespaces(p, "list", "Workload") is None
    # Kinds nobody classified: only cluster admins.
    assert a.allowed(user("root"), "create", "AdmissionCheck", "")
    assert not authorizer("bindings:\n- {role: admin, namespaces: ['*'], users: [u]}\n").allowed(
        user("u"), "get", "AdmissionCheck", "")


def test_no_policy_is_closed_to_all_but_cluster_admins() -> None:
    a = Authorizer()
    assert a.allowed(ANONYMOUS_ADMIN, "delete", "ClusterQueue", "")
    assert a.allowed(user("x", CLUSTER_ADMIN_GROUP), "create", "Workload", "team-a")
    for verb, kind in itertools.product(VERBS, sorted(KINDS)):
        assert not a.allowed(user("alice", "dev"), verb, kind, "default")
    assert a.visible_namespaces(user("alice"), "list", "Workload") == frozenset()
    assert Authorizer(policy=parse_policy(None)).policy.bindings == ()


def test_wildcard_namespace_and_several_bindings_add_up() -> None:
    a = authorizer("""
bindings:
  - {role: view, namespaces: ["*"], groups: [auditors]}
  - {role: edit, namespaces: [team-a, team-c], users: [alice]}
  - {role: admin, namespaces: [team-b], groups: [b-admins]}
""")
    carol = user("carol", "auditors")
    assert a.allowed(carol, "get", "Workload", "anything")
    assert a.allowed(carol, "logs", "Workload", "")  # every namespace at once, too
    assert a.visible_namespaces(carol, "list", "Workload") is None
    assert not a.allowed(carol, "delete", "Workload", "team-a")
    alice = user("alice", "auditors", "b-admins")
    assert a.allowed(alice, "delete", "Workload", "team-c")
    assert a.allowed(alice, "delete", "LocalQueue", "team-b")
    assert not a.allowed(alice, "delete", "LocalQueue", "team-a")  # edit there, not admin
    assert a.visible_namespaces(alice, "delete", "Workload") == {"team-a", "team-b", "team-c"}
    assert a.visible_namespaces(alice, "list", "Workload") is None  # auditors see all
    assert not a.allowed(alice, "update", "ClusterQueue", "")


def test_nodes_get_nothing_whatever_their_other_groups() -> None:
    a = authorizer("bindings:\n- {role: view, namespaces: ['*'], groups: [everyone]}\n")
    node = Principal("system:node:n1", frozenset({NODES_GROUP, "everyone"}), "certificate")
    assert node.node == "n1"
    for verb, kind in itertools.product(VERBS, sorted(KINDS)):
        assert not a.allowed(node, verb, kind, "default")


def test_denial_names_user_groups_verb_kind_and_namespace() -> None:
    a = authorizer("bindings:\n- {role: edit, namespaces: [team-a], users: [alice]}\n")
    alice = user("alice", "dev")
    with pytest.raises(PermissionDenied) as e:
        a.check(alice, "delete", "Workload", "team-b")
    assert str(e.value) == 'user "alice" (groups: dev) may not delete Workload in namespace "team-b"'
    with pytest.raises(PermissionDenied, match='user "alice" \\(groups: dev\\) may not update ClusterQueue cluster-wide'):
        a.check(alice, "update", "ClusterQueue", "")
    with pytest.raises(PermissionDenied, match=r'user "bob" \(groups: none\) may not list Workload in all namespaces'):
        a.check(user("bob"), "list", "Workload", "")
    a.check(alice, "delete", "Workload", "team-a")


def test_reload_swaps_the_policy_and_drops_cached_decisions(tmp_path: Path) -> None:
    f = tmp_path / "policy.yaml"
    f.write_text("bindings:\n- {role: view, namespaces: [team-a], users: [alice]}\n")
    a = Authorizer(str(f))
    alice = user("alice")
    assert a.allowed(alice, "get", "Workload", "team-a") and not a.allowed(alice, "get", "Workload", "team-b")
    f.write_text("bindings:\n- {role: view, namespaces: [team-b], users: [alice]}\n")
    a.reload()
    assert not a.allowed(alice, "get", "Workload", "team-a") and a.allowed(alice, "get", "Workload", "team-b")
    f.write_text("bindings:\n- {role: ops, namespaces: [team-a], users: [alice]}\n")
    with pytest.raises(PolicyError, match=r'bindings\[0\].role: unknown role "ops"'):
        a.reload()
    assert a.allowed(alice, "get", "Workload", "team-b")  # the old policy stays


BAD = [
    ("- x", 'expected a mapping with a bindings list'),
    ("bindngs: []", "bindngs: unknown field"),
    ("bindings: {}", "bindings: expected a list, got dict"),
    ("bindings: [1]", r"bindings\[0\]: expected a mapping"),
    ("bindings:\n- {role: view, namespaces: [a], users: [u]}\n- {role: view, namespaces: [a], users: [u]}\n"
     "- {role: ops, users: [u]}", r'bindings\[2\].role: unknown role "ops"'),
    ("bindings:\n- {users: [u]}", r"bindings\[0\].role: required"),
    ("bindings:\n- {role: view, namespaces: [a]}", r"bindings\[0\]: names no users and no groups"),
    ("bindings:\n- {role: view, users: [u]}", r"bindings\[0\].namespaces: required for role view"),
    ("bindings:\n- {role: view, namespaces: [], users: [u]}", r"bindings\[0\].namespaces: required"),
    ("bindings:\n- {role: cluster-admin, namespaces: [a], users: [u]}", r"bindings\[0\].namespaces: cluster-admin is cluster-wide"),
    ("bindings:\n- {role: view, namespaces: [a], users: u}", r"bindings\[0\].users: expected a list"),
    ("bindings:\n- {role: view, namespaces: [a], users: [u, 3]}", r"bindings\[0\].users\[1\]: expected a non-empty name"),
    ("bindings:\n- {role: view, namespaces: [a], user: [u]}", r"bindings\[0\].user: unknown field"),
    ("bindings:\n- {role: view, namespaces: [a], groups: [system:nodes]}", r"bindings\[0\].groups: system:nodes"),
    ("bindings:\n- {role: view, namespaces: [a], users: ['system:node:n1']}", r"bindings\[0\].users: .* is a node"),
]


@pytest.mark.parametrize(("text", "message"), BAD)
def test_bad_policy_names_the_field(tmp_path: Path, text: str, message: str) -> None:
    f = tmp_path / "p.yaml"
    f.write_text(text)
    with pytest.raises(PolicyError, match=message) as e:
        Authorizer(str(f))
    assert str(e.value).startswith(f"{f}: ")


def test_unreadable_or_invalid_yaml(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="cannot read"):
        Authorizer(str(tmp_path / "missing.yaml"))
    f = tmp_path / "p.yaml"
    f.write_text("bindings: [\n")
    with pytest.raises(PolicyError, match="not valid YAML"):
        Authorizer(str(f))


def test_decisions_are_cached_per_user_and_groups() -> None:
    a = authorizer("bindings:\n- {role: edit, namespaces: [team-a], groups: [dev]}\n")
    g1 = a.grants(user("alice", "dev"))
    assert a.grants(Principal("alice", frozenset({"dev"}), "token")) is g1  # same user and groups
    assert a.grants(user("alice")) is not g1
    assert not a.allowed(user("alice"), "create", "Workload", "team-a")
