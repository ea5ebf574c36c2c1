"""Which Linux user a pod's processes run as: per-namespace policy and the securityContext check (pure).

Pods never run as root by default.  A policy says, for one namespace (or
for every namespace without its own entry: the default), which user and
group its pods run as and which ones a pod may ask for::

    team-a: {user: alice, group: alice}          # names (looked up here) or numbers
    team-b: {uidRange: {min: 20000, max: 20999}, group: 20000}
    ops:    {user: root, allowRoot: true}        # root only with allowRoot
    # the default, where nothing else is said: nobody/nogroup (65534)

A pod that sets no ``runAsUser`` runs as the policy's ``user``; with a
``uidRange`` and no ``user``, each such pod gets a uid of the range to
itself (the agent picks one no other pod on the node holds), so pods of
the namespace cannot read each other's HOME or signal each other's
processes, as pods sharing one user could.  A pod may ask for ``runAsUser`` equal to
that user, inside ``uidRange``, or 0 where ``allowRoot`` is true; likewise
``runAsGroup`` (the policy's group, a number inside ``uidRange``, or 0 with
``allowRoot``).  ``runAsNonRoot: true`` refuses a pod that would run as 0.
Every non-root pod runs with no_new_privs (``allowPrivilegeEscalation``
may be false or unset; true is refused outside an allowRoot namespace), as
the Kubernetes "restricted" pod security standard asks.  All containers of
a pod run as one user: the pod's private HOME belongs to it.

Container fields override the pod's (Kubernetes' merge rule).  Every
refusal is a :class:`PodSecurityError` naming the field path.

No asyncio, grpc, sqlite or psutil here: the controller (at workload
creation) and the agent (before it starts a pod) both call this.
"""

from __future__ import annotations

import grp
import pwd
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

__all__ = [
    "NOBODY",
    "PodSecurityError",
    "PolicyError",
    "PodUserPolicy",
    "PodUserPolicies",
    "RequestedContext",
    "ResolvedUser",
    "parse_policy",
    "parse_policies",
    "resolve_pod_user",
]

# The traditional unprivileged user and group ("nobody", "nogroup"/"nobody").
NOBODY = 65534
_MAX_ID = 2**32 - 2  # (uid_t)-1 means "unchanged" to the kernel


class PodSecurityError(ValueError):
    """A pod's securityContext breaks its namespace's policy; ``field`` is the full field path."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


class PolicyError(ValueError):
    """A policy in a settings file is wrong; the message names the setting."""


class RequestedContext(Protocol):
    """A securityContext as a manifest gives it (None: not set)."""

    @property
    def run_as_user(self) -> int | None: ...

    @property
    def run_as_group(self) -> int | None: ...

    @property
    def run_as_non_root(self) -> bool | None: ...

    @property
    def allow_privilege_escalation(self) -> bool | None: ...


@dataclass(frozen=True, slots=True)
class PodUserPolicy:
    """One namespace's rule (see the module docstring); ids already resolved to numbers."""

    uid: int = NOBODY
    gid: int = NOBODY
    uid_range: tuple[int, int] | None = None
    allow_root: bool = False
    # uidRange without user: the agent gives each pod a uid of the range to itself.
    per_pod: bool = False

    def allows_uid(self, uid: int) -> bool:
        if uid == 0:
            return self.allow_root
        return uid == self.uid or (self.uid_range is not None and self.uid_range[0] <= uid <= self.uid_range[1])

    def allows_gid(self, gid: int) -> bool:
        if gid == 0:
            return self.allow_root
        return gid == self.gid or (self.uid_range is not None and self.uid_range[0] <= gid <= self.uid_range[1])

    def describe(self) -> str:
        allowed = [] if self.per_pod else [f"uid {self.uid}"]
        if self.uid_range is not None:
            allowed.append(f"uids {self.uid_range[0]}-{self.uid_range[1]}")
        if self.allow_root:
            allowed.append("root")
        return ", ".join(allowed)


@dataclass(frozen=True, slots=True)
class PodUserPolicies:
    """Policies by namespace, and the default for the others."""

    default: PodUserPolicy = field(default_factory=PodUserPolicy)
    namespaces: Mapping[str, PodUserPolicy] = field(default_factory=dict)

    def for_namespace(self, namespace: str) -> PodUserPolicy:
        return self.namespaces.get(namespace, self.default)


@dataclass(frozen=True, slots=True)
class ResolvedUser:
    """Who a pod's processes run as; ``no_new_privs``: set PR_SET_NO_NEW_PRIVS before exec.

    ``allocate``: no container asked for a user and the policy is per pod:
    the agent replaces ``uid`` with one of the range that no other pod holds.
    """

    uid: int
    gid: int
    no_new_privs: bool
    allocate: bool = False


def _id(value: object, where: str, *, names: str) -> tuple[int, str | None]:
    """A user or group given as a number or a name: (number, name if one was given)."""
    if isinstance(value, bool):
        raise PolicyError(f"{where}: expected a {names} name or number, got {value!r}")
    if isinstance(value, int):
        if not 0 <= value <= _MAX_ID:
            raise PolicyError(f"{where}: must be between 0 and {_MAX_ID}, got {value}")
        return value, None
    if isinstance(value, str) and value:
        if value.isdigit():
            return _id(int(value), where, names=names)
        try:
            number = pwd.getpwnam(value).pw_uid if names == "user" else grp.getgrnam(value).gr_gid
        except KeyError:
            raise PolicyError(f"{where}: there is no {names} named {value!r} on this machine") from None
        return number, value
    raise PolicyError(f"{where}: expected a {names} name or number, got {value!r}")


def parse_policy(raw: object, where: str) -> PodUserPolicy:
    """``{user, group, uidRange: {min, max}, allowRoot}`` as a settings file gives it."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise PolicyError(f"{where}: expected a mapping with user, group, uidRange, allowRoot; got {raw!r}")
    unknown = sorted(set(raw) - {"user", "group", "uidRange", "allowRoot"})
    if unknown:
        raise PolicyError(f"{where}.{unknown[0]}: unknown setting (known: allowRoot, group, uidRange, user)")
    allow_root = raw.get("allowRoot", False)
    if not isinstance(allow_root, bool):
        raise PolicyError(f"{where}.allowRoot: expected true or false, got {allow_root!r}")
    uid_range: tuple[int, int] | None = None
    if "uidRange" in raw:
        r = raw["uidRange"]
        if not isinstance(r, dict) or set(r) != {"min", "max"}:
            raise PolicyError(f"{where}.uidRange: expected {{min: UID, max: UID}}, got {r!r}")
        low, _ = _id(r["min"], f"{where}.uidRange.min", names="user")
        high, _ = _id(r["max"], f"{where}.uidRange.max", names="user")
        if low == 0 or high < low:
            raise PolicyError(f"{where}.uidRange: need 0 < min <= max, got {low}-{high}")
        uid_range = (low, high)
    user_name: str | None = None
    if "user" in raw:
        uid, user_name = _id(raw["user"], f"{where}.user", names="user")
    elif uid_range is not None:
        uid = uid_range[0]
    else:
        uid = NOBODY
    if uid == 0 and not allow_root:
        raise PolicyError(f"{where}.user: root needs allowRoot: true")
    if "group" in raw:
        gid, _ = _id(raw["group"], f"{where}.group", names="group")
    elif user_name is not None:
        gid = pwd.getpwnam(user_name).pw_gid
    elif uid == 0:
        gid = 0
    else:
        gid = NOBODY
    if gid == 0 and not allow_root:
        raise PolicyError(f"{where}.group: root's group needs allowRoot: true")
    return PodUserPolicy(uid=uid, gid=gid, uid_range=uid_range, allow_root=allow_root,
                         per_pod=uid_range is not None and "user" not in raw)


def parse_policies(namespaces: object, default: object, *, where: str, default_where: str) -> PodUserPolicies:
    """A namespace -> policy mapping plus the default (None: nobody/nogroup)."""
    if namespaces is None:
        namespaces = {}
    if not isinstance(namespaces, dict):
        raise PolicyError(f"{where}: expected a mapping of namespace to policy, got {namespaces!r}")
    by_ns: dict[str, PodUserPolicy] = {}
    for ns, raw in namespaces.items():
        if not isinstance(ns, str) or not ns:
            raise PolicyError(f"{where}: namespace names must be non-empty strings, got {ns!r}")
        by_ns[ns] = parse_policy(raw, f"{where}.{ns}")
    return PodUserPolicies(default=parse_policy(default, default_where), namespaces=by_ns)


def _merged(pod: RequestedContext | None, container: RequestedContext | None, attr: str,
            pod_path: str, container_path: str) -> tuple[object, str]:
    """The effective value of one field and the path it came from (container over pod)."""
    value = getattr(container, attr) if container is not None else None
    if value is not None:
        return value, container_path
    value = getattr(pod, attr, None) if pod is not None else None
    return value, pod_path


_FIELD = {"run_as_user": "runAsUser", "run_as_group": "runAsGroup", "run_as_non_root": "runAsNonRoot",
          "allow_privilege_escalation": "allowPrivilegeEscalation"}


def resolve_pod_user(
    *,
    namespace: str,
    policy: PodUserPolicy,
    pod_context: RequestedContext | None,
    pod_path: str,
    containers: Sequence[tuple[str, RequestedContext | None]],
) -> ResolvedUser:
    """The user a pod runs as, or PodSecurityError naming the first offending field.

    ``pod_path`` is the path of the pod's securityContext (e.g.
    ``spec.podSets[0].template.spec.securityContext``); ``containers``
    pairs each container's securityContext path with its value.
    """
    chosen: ResolvedUser | None = None
    chosen_path = ""
    for cpath, csc in containers:
        def pick(attr: str, csc: RequestedContext | None = csc, cpath: str = cpath) -> tuple[object, str]:
            return _merged(pod_context, csc, attr, f"{pod_path}.{_FIELD[attr]}", f"{cpath}.{_FIELD[attr]}")

        run_as_user, user_path = pick("run_as_user")
        if run_as_user is None:
            uid = policy.uid
        else:
            assert isinstance(run_as_user, int)
            uid = run_as_user
            if not policy.allows_uid(uid):
                what = "0 (root) is" if uid == 0 else f"{uid} is"
                raise PodSecurityError(
                    user_path, f"{what} not allowed in namespace {namespace} (allowed: {policy.describe()})"
                )
        run_as_group, group_path = pick("run_as_group")
        if run_as_group is None:
            gid = 0 if uid == 0 and policy.gid == NOBODY and policy.allow_root else policy.gid
        else:
            assert isinstance(run_as_group, int)
            gid = run_as_group
            if not policy.allows_gid(gid):
                what = "0 (root's group) is" if gid == 0 else f"{gid} is"
                raise PodSecurityError(group_path, f"{what} not allowed in namespace {namespace}")
        non_root, non_root_path = pick("run_as_non_root")
        if non_root is True and uid == 0:
            where = user_path if run_as_user is not None else non_root_path
            raise PodSecurityError(where, f"the container would run as root (uid 0) but {non_root_path} is true")
        escalation, escalation_path = pick("allow_privilege_escalation")
        if escalation is True and not policy.allow_root:
            raise PodSecurityError(
                escalation_path,
                f"true is not allowed in namespace {namespace}: its pods run "
                "with no_new_privs (set false or leave it unset)",
            )
        resolved = ResolvedUser(
            uid=uid,
            gid=gid,
            no_new_privs=uid != 0 or escalation is False,
            allocate=policy.per_pod and run_as_user is None,
        )
        if chosen is None:
            chosen, chosen_path = resolved, cpath
        elif (resolved.uid, resolved.gid, resolved.allocate) != (chosen.uid, chosen.gid, chosen.allocate):

            def who(r: ResolvedUser) -> str:
                return f"a uid of its own, group {r.gid}" if r.allocate else f"{r.uid}:{r.gid}"

            raise PodSecurityError(
                user_path if run_as_user is not None else group_path,
                f"all containers of a pod run as one user (the owner of its HOME); "
                f"{chosen_path} runs as {who(chosen)}, this one as {who(resolved)}",
            )
        elif resolved.no_new_privs and not chosen.no_new_privs:
            chosen = resolved
    if chosen is None:
        return ResolvedUser(uid=policy.uid, gid=policy.gid, no_new_privs=policy.uid != 0, allocate=policy.per_pod)
    return chosen
