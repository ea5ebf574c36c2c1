"""Authorization: who may do what, from a policy file of role bindings.

Pure: no gRPC, no asyncio.  The controller's services ask
:meth:`Authorizer.allowed` (or :meth:`Authorizer.check`, which raises
PERMISSION_DENIED) with the caller's :class:`Principal`, a verb, a kind and
a namespace.

The policy file (YAML; ``authorizationPolicy:`` in the controller settings,
reloaded on SIGHUP)::

    bindings:
      - role: cluster-admin          # everything, every kind, every namespace
        groups: [system:masters]
        users: [root]
      - role: admin                  # admin | edit | view: per namespace
        namespaces: [team-a]
        users: [alice]
      - role: view
        namespaces: ["*"]            # "*": every namespace, present or future
        groups: [auditors]

A binding has ``role``, at least one of ``users`` / ``groups`` (lists of
names, matched exactly against the certificate's CN / O or the token's user
and groups), and, for a namespace role, ``namespaces`` (required; none for
cluster-admin).  Anything else is an error naming the field, e.g.
``bindings[2].role: unknown role "ops"``.  Bindings only add: there are no
deny rules.

Verbs: get, list, watch, create, update, delete, logs, stop, resume.

Roles:

* ``view``: get/list/watch of Workloads, LocalQueues and PodGroups and
  ``logs`` of Workloads in the bound namespaces.
* ``edit``: view + create/update/delete/stop/resume of Workloads (a batch/v1
  Job is submitted as the Workload it stands for) + create/update/delete of
  kube-batch PodGroups (a kube-batch Queue is a ClusterQueue: cluster-admin).
* ``admin``: edit + create/update/delete of LocalQueues.
* ``cluster-admin``: everything, including every change to cluster-scoped
  kinds (ClusterQueue, Cohort, ResourceFlavor, Topology,
  WorkloadPriorityClass, PriorityClass, Namespace, Node).

Cluster-scoped kinds are readable (get/list/watch) by anyone holding any
namespace role, in any namespace: a user must see the ClusterQueues,
flavors, priority classes and nodes to know where and how their workloads
can run, and those objects say nothing about other namespaces' workloads.
Changing them needs cluster-admin.

Members of ``system:masters`` are always cluster admins (the anonymous
caller of the authentication-off modes is one), with or without a policy;
with no policy file nobody else may do anything.  Node identities (group
``system:nodes``) get nothing here, whatever the policy says: agents use
AgentLink only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from sluicegate.security.identity import CLUSTER_ADMIN_GROUP, NODES_GROUP, PermissionDenied, Principal

VERBS = ("get", "list", "watch", "create", "update", "delete", "logs", "stop", "resume")
READ_VERBS = frozenset({"get", "list", "watch"})
NAMESPACED_KINDS = frozenset({"Workload", "LocalQueue", "PodGroup"})
CLUSTER_KINDS = frozenset(
    {"ClusterQueue", "Cohort", "ResourceFlavor", "WorkloadPriorityClass", "PriorityClass", "Namespace", "Node",
     "Topology"}
)
KINDS = NAMESPACED_KINDS | CLUSTER_KINDS
NAMESPACE_ROLES = ("admin", "edit", "view")
ROLES = ("cluster-admin", *NAMESPACE_ROLES)
ALL_NAMESPACES = "*"

_VIEW = frozenset(
    {(v, k) for v in READ_VERBS for k in NAMESPACED_KINDS} | {("logs", "Workload")}
)
_EDIT = _VIEW | {(v, "Workload") for v in ("create", "update", "delete", "stop", "resume")} | {
    (v, "PodGroup") for v in ("create", "update", "delete")}
_ADMIN = _EDIT | {(v, "LocalQueue") for v in ("create", "update", "delete")}
# (verb, kind) pairs each namespace role grants within its namespaces.
ROLE_RULES: dict[str, frozenset[tuple[str, str]]] = {"view": _VIEW, "edit": _EDIT, "admin": _ADMIN}
# What any namespace role grants on cluster-scoped kinds (see the module docstring).
CLUSTER_READ = frozenset((v, k) for v in READ_VERBS for k in CLUSTER_KINDS)

_BINDING_KEYS = ("role", "users", "groups", "namespaces")


class PolicyError(ValueError):
    """The policy file is wrong; the message names the file and the field."""


@dataclass(frozen=True, slots=True)
class Binding:
    role: str
    users: frozenset[str]
    groups: frozenset[str]
    # Empty for cluster-admin; may contain ALL_NAMESPACES.
    namespaces: frozenset[str]

    def matches(self, p: Principal) -> bool:
        return p.user in self.users or not self.groups.isdisjoint(p.groups)


@dataclass(frozen=True, slots=True)
class Policy:
    bindings: tuple[Binding, ...] = ()


# The policy with no file: only system:masters (always cluster admins) may do anything.
EMPTY_POLICY = Policy()


def parse_policy(data: Any, source: str = "policy") -> Policy:
    """Validate a loaded YAML policy; PolicyError names ``source: field: problem``."""

    def fail(field: str, msg: str) -> PolicyError:
        return PolicyError(f"{source}: {field}: {msg}" if field else f"{source}: {msg}")

    if data is None:
        return EMPTY_POLICY
    if not isinstance(data, Mapping):
        raise fail("", f"expected a mapping with a bindings list, got {_show(data)}")
    for key in data:
        if key != "bindings":
            raise fail(str(key), "unknown field (expected bindings)")
    raw = data.get("bindings")
    if raw is None:
        return EMPTY_POLICY
    if not isinstance(raw, list):
        raise fail("bindings", f"expected a list, got {_show(raw)}")
    out: list[Binding] = []
    for i, b in enumerate(raw):
        where = f"bindings[{i}]"
        if not isinstance(b, Mapping):
            raise fail(where, f"expected a mapping with role, users/groups, namespaces, got {_show(b)}")
        for key in b:
            if key not in _BINDING_KEYS:
                raise fail(f"{where}.{key}", f"unknown field (expected one of {', '.join(_BINDING_KEYS)})")
        role = b.get("role")
        if role is None:
            raise fail(f"{where}.role", f"required (one of {', '.join(ROLES)})")
        if not isinstance(role, str) or role not in ROLES:
            raise fail(f"{where}.role", f"unknown role {_show(role)} (expected one of {', '.join(ROLES)})")
        users = _names(b, "users", where, fail)
        groups = _names(b, "groups", where, fail)
        if not users and not groups:
            raise fail(where, "names no users and no groups")
        for u in users:
            if u.startswith("system:node:"):
                raise fail(f"{where}.users", f"{_show(u)} is a node: nodes get nothing on the user API")
        if NODES_GROUP in groups:
            raise fail(f"{where}.groups", f"{NODES_GROUP}: nodes get nothing on the user API")
        namespaces = _names(b, "namespaces", where, fail)
        if role == "cluster-admin":
            if "namespaces" in b:
                raise fail(f"{where}.namespaces", "cluster-admin is cluster-wide; remove namespaces")
        elif not namespaces:
            raise fail(f"{where}.namespaces", f'required for role {role} (a list of namespaces, or ["*"] for all)')
        out.append(Binding(role, users, groups, namespaces))
    return Policy(tuple(out))


def _names(b: Mapping[Any, Any], key: str, where: str, fail: Any) -> frozenset[str]:
    v = b.get(key)
    if v is None:
        return frozenset()
    if not isinstance(v, list):
        raise fail(f"{where}.{key}", f"expected a list of names, got {_show(v)}")
    for j, name in enumerate(v):
        if not isinstance(name, str) or not name:
            raise fail(f"{where}.{key}[{j}]", f"expected a non-empty name, got {_show(name)}")
    return frozenset(v)


def _show(v: Any) -> str:
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, (dict, list)):
        return type(v).__name__
    return repr(v)


def load_policy(path: str) -> Policy:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise PolicyError(f"{path}: cannot read the authorization policy: {exc}") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise PolicyError(f"{path}: not valid YAML: {exc}") from exc
    return parse_policy(data, path)


class Grants:
    """One principal's rights under one policy, precomputed: a check is a dict lookup."""

    __slots__ = ("cluster_admin", "table")

    def __init__(self, cluster_admin: bool, table: dict[tuple[str, str], frozenset[str] | None]) -> None:
        self.cluster_admin = cluster_admin
        # (verb, kind) -> None: every namespace (and cluster-scoped); else the namespaces.
        self.table = table

    def allows(self, verb: str, kind: str, namespace: str) -> bool:
        if self.cluster_admin:
            return True
        try:
            where = self.table[(verb, kind)]
        except KeyError:
            return False
        return where is None or namespace in where

    def namespaces(self, verb: str, kind: str) -> frozenset[str] | None:
        if self.cluster_admin:
            return None
        return self.table.get((verb, kind), frozenset())


_NOTHING = Grants(False, {})


def grants_of(policy: Policy, p: Principal) -> Grants:
    if NODES_GROUP in p.groups:
        return _NOTHING
    if CLUSTER_ADMIN_GROUP in p.groups:
        return Grants(True, {})
    per: dict[tuple[str, str], set[str] | None] = {}
    for b in policy.bindings:
        if not b.matches(p):
            continue
        if b.role == "cluster-admin":
            return Grants(True, {})
        everywhere = ALL_NAMESPACES in b.namespaces
        for rule in ROLE_RULES[b.role]:
            cur = per.get(rule, set())
            if cur is None:
                continue
            per[rule] = None if everywhere else cur | b.namespaces
        for rule in CLUSTER_READ:
            per[rule] = None
    return Grants(False, {k: (None if v is None else frozenset(v)) for k, v in per.items()})


def describe(p: Principal) -> str:
    groups = ", ".join(sorted(p.groups)) or "none"
    return f'user "{p.user}" (groups: {groups})'


def denial_message(p: Principal, verb: str, kind: str, namespace: str) -> str:
    if kind in CLUSTER_KINDS or not namespace:
        where = "cluster-wide" if kind in CLUSTER_KINDS else "in all namespaces"
        return f"{describe(p)} may not {verb} {kind} {where}"
    return f'{describe(p)} may not {verb} {kind} in namespace "{namespace}"'


# Distinct callers remembered; beyond this the cache starts afresh (a
# controller serves tens of users, not thousands).
_CACHE_LIMIT = 4096


class Authorizer:
    """Answers "may this principal do this?" from the current policy.

    ``path`` None: no policy file, so only cluster admins may do anything.
    Decisions are precomputed per (user, groups) and cached; :meth:`reload`
    (SIGHUP) swaps policy and cache together.
    """

    def __init__(self, path: str | None = None, *, policy: Policy | None = None) -> None:
        self.path = path
        self.policy = policy if policy is not None else (load_policy(path) if path else EMPTY_POLICY)
        self._cache: dict[tuple[str, frozenset[str]], Grants] = {}

    def reload(self) -> None:
        """Read the file again; a bad file raises PolicyError and the old policy stays."""
        if not self.path:
            return
        new = load_policy(self.path)
        self.policy, self._cache = new, {}

    def grants(self, p: Principal) -> Grants:
        key = (p.user, p.groups)
        g = self._cache.get(key)
        if g is None:
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache = {}
            g = self._cache[key] = grants_of(self.policy, p)
        return g

    def allowed(self, p: Principal, verb: str, kind: str, namespace: str) -> bool:
        return self.grants(p).allows(verb, kind, "" if kind in CLUSTER_KINDS else namespace)

    def visible_namespaces(self, p: Principal, verb: str, kind: str) -> frozenset[str] | None:
        """None: every namespace; else exactly the namespaces where ``verb`` on ``kind`` is allowed."""
        return self.grants(p).namespaces(verb, kind)

    def check(self, p: Principal, verb: str, kind: str, namespace: str) -> None:
        if not self.allowed(p, verb, kind, namespace):
            raise PermissionDenied(denial_message(p, verb, kind, namespace))

