"""The pod user policy: which uid/gid a pod runs as, and every refusal names its field."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

from sluicegate.security.podsecurity import (
    NOBODY,
    PodSecurityError,
    PodUserPolicy,
    PolicyError,
    ResolvedUser,
    parse_policies,
    parse_policy,
    resolve_pod_user,
)

POD = "spec.podSets[0].template.spec.securityContext"
C0 = "spec.podSets[0].template.spec.containers[0].securityContext"
C1 = "spec.podSets[0].template.spec.containers[1].securityContext"


@dataclass(frozen=True)
class SC:
    run_as_user: int | None = None
    run_as_group: int | None = None
    run_as_non_root: bool | None = None
    allow_privilege_escalation: bool | None = None


DEFAULT = PodUserPolicy()
RANGE = PodUserPolicy(uid=20000, gid=20000, uid_range=(20000, 20999))
ROOT_OK = PodUserPolicy(allow_root=True)
PER_POD = PodUserPolicy(uid=30000, gid=30000, uid_range=(30000, 30099), per_pod=True)


def resolve(policy: PodUserPolicy, pod: SC | None = None, *containers: SC | None) -> ResolvedUser:
    paths = [f"spec.podSets[0].template.spec.containers[{i}].securityContext" for i in range(len(containers) or 1)]
    return resolve_pod_user(namespace="team-a", policy=policy, pod_context=pod, pod_path=POD,
                            containers=list(zip(paths, containers or (None,), strict=True)))


@pytest.mark.parametrize(
    ("policy", "pod", "containers", "expected"),
    [
        (DEFAULT, None, (None,), ResolvedUser(NOBODY, NOBODY, True)),
        (RANGE, None, (None,), ResolvedUser(20000, 20000, True)),
        (RANGE, SC(run_as_user=20500), (None,), ResolvedUser(20500, 20000, True)),
        (RANGE, SC(run_as_user=20500), (SC(run_as_user=20600),), ResolvedUser(20600, 20000, True)),  # container wins
        (RANGE, SC(run_as_group=20001), (SC(run_as_user=20001),), ResolvedUser(20001, 20001, True)),
        (ROOT_OK, None, (SC(run_as_user=0),), ResolvedUser(0, 0, False)),
        (ROOT_OK, None, (SC(run_as_user=0, allow_privilege_escalation=False),), ResolvedUser(0, 0, True)),
        (ROOT_OK, None, (None,), ResolvedUser(NOBODY, NOBODY, True)),  # root only when asked for
        (DEFAULT, SC(run_as_non_root=True), (SC(allow_privilege_escalation=False),), ResolvedUser(NOBODY, NOBODY, True)),
        # Per pod: unasked, the agent allocates; asked, the pod gets what it asked for inside the range.
        (PER_POD, None, (None, SC()), ResolvedUser(30000, 30000, True, allocate=True)),
        (PER_POD, SC(run_as_user=30050), (None,), ResolvedUser(30050, 30000, True)),
    ],
)
def test_resolves(policy: PodUserPolicy, pod: SC | None, containers: tuple[SC | None, ...], expected: ResolvedUser) -> None:
    assert resolve(policy, pod, *containers) == expected


@pytest.mark.parametrize(
    ("policy", "pod", "containers", "field", "fragment"),
    [
        (DEFAULT, None, (SC(run_as_user=0),), f"{C0}.runAsUser", "0 (root) is not allowed in namespace team-a"),
        (DEFAULT, SC(run_as_user=0), (None,), f"{POD}.runAsUser", "0 (root) is not allowed in namespace team-a"),
        (DEFAULT, SC(run_as_user=0), (SC(),), f"{POD}.runAsUser", "0 (root) is not allowed"),
        (RANGE, None, (SC(run_as_user=21000),), f"{C0}.runAsUser", "21000 is not allowed in namespace team-a"),
        (RANGE, SC(run_as_group=0), (None,), f"{POD}.runAsGroup", "0 (root's group) is not allowed"),
        (RANGE, None, (SC(run_as_group=5),), f"{C0}.runAsGroup", "5 is not allowed"),
        (ROOT_OK, SC(run_as_non_root=True), (SC(run_as_user=0),), f"{C0}.runAsUser", f"{POD}.runAsNonRoot is true"),
        (ROOT_OK, SC(run_as_user=0), (SC(run_as_non_root=True),), f"{POD}.runAsUser", f"{C0}.runAsNonRoot is true"),
        (DEFAULT, None, (SC(allow_privilege_escalation=True),), f"{C0}.allowPrivilegeEscalation", "no_new_privs"),
        (RANGE, None, (SC(run_as_user=20001), SC(run_as_user=20002)), f"{C1}.runAsUser", "run as one user"),
        (PER_POD, None, (None, SC(run_as_user=30000)), f"{C1}.runAsUser", "runs as a uid of its own, group 30000"),
        (PER_POD, None, (SC(run_as_user=30100),), f"{C0}.runAsUser", "30100 is not allowed in namespace team-a "
                                                                     "(allowed: uids 30000-30099)"),
    ],
)
def test_refusals_name_the_field(policy: PodUserPolicy, pod: SC | None, containers: tuple[SC | None, ...],
                                 field: str, fragment: str) -> None:
    with pytest.raises(PodSecurityError) as info:
        resolve(policy, pod, *containers)
    assert info.value.field == field
    assert fragment in info.value.message
    assert str(info.value).startswith(field + ": ")


def test_parse_policy_by_name_and_number() -> None:
    assert parse_policy(None, "d") == PodUserPolicy()
    assert parse_policy({"user": "nobody"}, "d").uid == NOBODY
    assert parse_policy({"user": 1234, "group": "65534"}, "d") == PodUserPolicy(uid=1234, gid=NOBODY)
    assert parse_policy({"user": "root", "allowRoot": True}, "d") == PodUserPolicy(uid=0, gid=0, allow_root=True)
    assert parse_policy({"uidRange": {"min": 100, "max": 200}}, "d") == PodUserPolicy(uid=100, gid=NOBODY, uid_range=(100, 200), per_pod=True)
    assert parse_policy({"user": 150, "uidRange": {"min": 100, "max": 200}}, "d").per_pod is False


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ({"user": 0}, "podUsers.a.user: root needs allowRoot: true"),
        ({"user": "no-such-user-here"}, "podUsers.a.user: there is no user named"),
        ({"group": "no-such-group-here"}, "podUsers.a.group: there is no group named"),
        ({"user": -1}, "podUsers.a.user: must be between"),
        ({"user": True}, "podUsers.a.user: expected a user name or number"),
        ({"uidRange": {"min": 5}}, "podUsers.a.uidRange: expected"),
        ({"uidRange": {"min": 5, "max": 1}}, "podUsers.a.uidRange: need 0 < min <= max"),
        ({"allowRoot": "yes"}, "podUsers.a.allowRoot: expected true or false"),
        ({"users": 1}, "podUsers.a.users: unknown setting"),
        ("nobody", "podUsers.a: expected a mapping"),
    ],
)
def test_bad_policies_name_the_setting(raw: object, fragment: str) -> None:
    with pytest.raises(PolicyError) as info:
        parse_policies({"a": raw}, None, where="podUsers", default_where="defaultPodUser")
    assert fragment in str(info.value)


def test_namespace_lookup_falls_back_to_the_default() -> None:
    p = parse_policies({"ops": {"user": "root", "allowRoot": True}}, {"user": 4242}, where="x", default_where="y")
    assert p.for_namespace("ops").uid == 0
    assert p.for_namespace("other") == PodUserPolicy(uid=4242, gid=NOBODY)


def test_module_is_pure() -> None:
    path = Path(__file__).resolve().parents[3] / "sluicegate" / "security" / "podsecurity.py"
    mods = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            mods |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            mods.add(node.module.split(".")[0])
    assert mods <= {"__future__", "grp", "pwd", "collections", "dataclasses", "typing"}
