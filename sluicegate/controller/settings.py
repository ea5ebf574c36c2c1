"""The controller's settings file (YAML), with command-line overrides.

Every key is optional; unknown keys are errors that name the key.

    listen: 127.0.0.1:7420          # gRPC API (sluicectl, agents)
    healthListen: 127.0.0.1:7421    # /livez /readyz /metrics
    store: /var/lib/sluicegate/controller.db   # sqlite path or sqlite:///path
    storeSynchronous: NORMAL        # NORMAL survives kill -9; FULL also power loss
    configuration: /etc/sluicegate/configuration.yaml   # Kueue Configuration document
    nodeHeartbeatTimeout: 40s       # a node silent this long becomes NotReady
    fencingGrace: 45s               # ... and its workloads are requeued this much later
    selfFencing: true               # agents cut off for nodeHeartbeatTimeout stop their pods
    agentHeartbeatInterval: 2s      # how often agents report usage and pods
    placement: true                 # false: quota-only mode, admitted workloads are not run
    finishedRetention: 24h          # finished workloads (and their logs) are deleted after this
    grpcGrace: 5s                   # in-flight RPCs get this long at shutdown
    watchBacklog: 10000             # events kept for a slow watcher; one behind by more, blocked 1 s, is ended
    pkiDir: /var/lib/sluicegate/pki # TLS on: the cluster CA and serving certificate ('sluicegate-controller init')
    tokenListen: 127.0.0.1:7423     # TLS without client certificates: agents joining, bearer-token users
    tokenFile: /etc/sluicegate/tokens.yaml   # bearer tokens (hashed) -> user and groups; reloaded on SIGHUP
    insecure: false                 # true: allow plaintext on a non-loopback listen address (warned at every start)
    dashboardListen: 127.0.0.1:7425 # the read-only web dashboard (docs/dashboard.md); "" turns it off
    authorizationPolicy: /etc/sluicegate/policy.yaml   # role bindings (security/authz.py); none: only system:masters
    auditLog: /var/lib/sluicegate/audit.log   # default: audit.log beside the store; "" turns it off
    advertiseAddress: ctl-1.example.org:7420   # HA: where clients and agents reach this controller when it leads
    advertiseTokenAddress: ctl-1.example.org:7423   # HA: the same for tokenListen (default: advertiseAddress's host)
    leaseDuration: 15s              # HA (postgresql store): a leader silent this long is replaced
    leaseRenewDeadline: 10s         # ... and stops acting itself when it could not renew for this long
    leaseRenewInterval: 2s          # ... renewing this often; a crashed leader is replaced after about 1.5x this
    leaseRetryInterval: 500ms       # how often followers check the lease
    mirrorInterval: 1s              # how often followers bring their warm copy of the store up to date
    podSecurity:                    # who pods may run as (sluicegate.security.podsecurity)
      default: {user: nobody}       # the default: nobody/nogroup (65534); never root
      namespaces:
        team-a: {uidRange: {min: 20000, max: 20999}}
        ops: {user: root, allowRoot: true}

Without ``pkiDir`` the controller serves plaintext and authenticates nobody
(every caller is the anonymous cluster admin), which it allows only on a
loopback address: anything else needs TLS, or ``insecure: true``.
With ``pkiDir`` the ``listen`` port requires a client certificate signed by
the cluster CA (agents, and users with certificates), and ``tokenListen``
serves TLS without one, for ``sluicegate-agent join`` and bearer tokens
(grpcio can only require a client certificate or not ask for one, so the
two kinds of caller get a port each).

Node loss and self-fencing (no workload runs on two nodes at once).  A node
whose heartbeats stop for ``nodeHeartbeatTimeout`` becomes NotReady: nothing
new is placed there, but its workloads keep their quota and their pods.  With
``selfFencing`` its agent, if alive but cut off, counts the same timeout
(the controller sends it in Registered) from the last heartbeat the controller
acknowledged, and then stops its non-static pods (reason NodeFenced).  The
controller requeues the node's workloads (Evicted, reason NodeLost) only after
``nodeHeartbeatTimeout`` + max(``fencingGrace``, the longest
terminationGracePeriodSeconds of the node's pods + FENCING_MARGIN): by then the
agent has stopped them.  Trade-off: a longer grace delays the recovery of a
lost node's quota; a shorter one than the pods' termination grace would let
a requeued copy start while the old one is still ending (it is therefore
never shorter).  ``selfFencing: false``: agents never stop pods on their own
and a lost node's workloads are not requeued automatically: they keep their
quota until the node returns and reports what its pods did (safe against two
copies, but a node that never returns holds them for good: there is no node
deletion yet).

A workload whose securityContext breaks its namespace's podSecurity rule is
refused at creation (INVALID_ARGUMENT naming the field).  The agents apply
their own podUsers/defaultPodUser settings (the same schema) when they start
a pod: keep the two in step.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from sluicegate.common import netaddr
from sluicegate.common.netaddr import is_loopback
from sluicegate.controller.leader import LeaseTiming
from sluicegate.manifest.timefmt import parse_duration
from sluicegate.model.config import ControllerConfig
from sluicegate.security.podsecurity import PodUserPolicies, PolicyError, parse_policies


class SettingsError(Exception):
    """The settings file or a flag is wrong; the message names the key."""


@dataclass(frozen=True, slots=True)
class ControllerSettings:
    listen: str = "127.0.0.1:7420"
    health_listen: str = "127.0.0.1:7421"
    store: str = "/var/lib/sluicegate/controller.db"
    store_synchronous: str = "NORMAL"
    store_password_file: str = ""  # PostgreSQL's password (the file's content, stripped); owner-only
    configuration_path: str = ""
    node_heartbeat_timeout: float = 40.0
    # Covers the default termination grace (30s) plus a margin; see the module docstring.
    fencing_grace: float = 45.0
    self_fencing: bool = True
    agent_heartbeat_interval: float = 2.0
    placement: bool = True
    finished_retention: float | None = 86400.0
    grpc_grace: float = 5.0
    watch_backlog: int = 10_000
    pki_dir: str = ""
    token_listen: str = "127.0.0.1:7423"
    token_file: str = ""
    insecure: bool = False
    dashboard_listen: str = "127.0.0.1:7425"
    config: ControllerConfig = field(default_factory=ControllerConfig)
    authorization_policy: str = ""
    # None: audit.log in the store's directory; "": no audit log.
    audit_log: str | None = None
    pod_security: PodUserPolicies = field(default_factory=PodUserPolicies)
    advertise_address: str = ""
    advertise_token_address: str = ""
    lease_duration: float = 15.0
    lease_renew_deadline: float = 10.0
    lease_renew_interval: float = 2.0
    lease_retry_interval: float = 0.5
    mirror_interval: float = 1.0


    def lease_timing(self) -> LeaseTiming:
        return LeaseTiming(duration=self.lease_duration, renew_deadline=self.lease_renew_deadline,
                           renew_interval=self.lease_renew_interval, retry_interval=self.lease_retry_interval)


_KEYS = {
    "listen": ("listen", str),
    "healthListen": ("health_listen", str),
    "store": ("store", str),
    "storeSynchronous": ("store_synchronous", str),
    "storePasswordFile": ("store_password_file", str),
    "configuration": ("configuration_path", str),
    "nodeHeartbeatTimeout": ("node_heartbeat_timeout", "duration"),
    "fencingGrace": ("fencing_grace", "duration"),
    "selfFencing": ("self_fencing", bool),
    "grpcGrace": ("grpc_grace", "duration"),
    "watchBacklog": ("watch_backlog", int),
    "agentHeartbeatInterval": ("agent_heartbeat_interval", "duration"),
    "placement": ("placement", bool),
    "finishedRetention": ("finished_retention", "duration"),
    "pkiDir": ("pki_dir", str),
    "tokenListen": ("token_listen", str),
    "tokenFile": ("token_file", str),
    "insecure": ("insecure", bool),
    "dashboardListen": ("dashboard_listen", str),
    "authorizationPolicy": ("authorization_policy", str),
    "auditLog": ("audit_log", str),
    "advertiseAddress": ("advertise_address", str),
    "advertiseTokenAddress": ("advertise_token_address", str),
    "leaseDuration": ("lease_duration", "duration"),
    "leaseRenewDeadline": ("lease_renew_deadline", "duration"),
    "leaseRenewInterval": ("lease_renew_interval", "duration"),
    "leaseRetryInterval": ("lease_retry_interval", "duration"),
    "mirrorInterval": ("mirror_interval", "duration"),
}


def split_hostport(value: str, *, key: str) -> tuple[str, int]:
    """HOST:PORT, or a SettingsError naming the key."""
    try:
        return netaddr.split_hostport(value, key=key)
    except netaddr.AddressError as exc:
        raise SettingsError(str(exc)) from exc


def load_settings(path: str | None, overrides: dict[str, Any]) -> ControllerSettings:
    s = ControllerSettings()
    raw: dict[str, Any] = {}
    if path:
        try:
            loaded = yaml.safe_load(Path(path).read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise SettingsError(f"{path}: cannot read settings: {exc}") from exc
        if not isinstance(loaded, dict):
            raise SettingsError(f"{path}: expected a mapping of settings")
        raw = loaded
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key == "podSecurity":
            values["pod_security"] = _pod_security(value, f"{path}: podSecurity")
            continue
        if key not in _KEYS:
            raise SettingsError(f"{path}: {key}: unknown setting (known: {', '.join(sorted([*_KEYS, 'podSecurity']))})")
        attr, typ = _KEYS[key]
        if typ == "duration":
            try:
                values[attr] = parse_duration(value) if isinstance(value, str) else float(value)
            except (ValueError, TypeError) as exc:
                raise SettingsError(f"{path}: {key}: {exc}") from exc
        elif typ is int:
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SettingsError(f"{path}: {key}: expected a positive whole number, got {value!r}")
            values[attr] = value
        elif typ is bool:
            if not isinstance(value, bool):
                raise SettingsError(f"{path}: {key}: expected true or false, got {value!r}")
            values[attr] = value
        else:
            if not isinstance(value, str):
                raise SettingsError(f"{path}: {key}: expected a string, got {value!r}")
            values[attr] = value
    values.update({k: v for k, v in overrides.items() if v is not None})
    s = replace(s, **values)
    if s.agent_heartbeat_interval <= 0 or s.node_heartbeat_timeout <= s.agent_heartbeat_interval:
        raise SettingsError(
            f"nodeHeartbeatTimeout ({s.node_heartbeat_timeout:g}s) must exceed agentHeartbeatInterval "
            f"({s.agent_heartbeat_interval:g}s), which must be positive"
        )
    if s.fencing_grace < 0:
        raise SettingsError(f"fencingGrace ({s.fencing_grace:g}s) must not be negative")
    split_hostport(s.listen, key="listen")
    split_hostport(s.health_listen, key="healthListen")
    if s.pki_dir:
        split_hostport(s.token_listen, key="tokenListen")
    elif not is_loopback(split_hostport(s.listen, key="listen")[0]) and not s.insecure:
        raise SettingsError(
            f"listen: {s.listen} is not a loopback address, and without TLS anyone who can reach it could run "
            f"commands on every node; set pkiDir (run 'sluicegate-controller init'), "
            f"or 'insecure: true' to accept that")
    try:
        s.lease_timing().check()
    except ValueError as exc:
        raise SettingsError(str(exc)) from exc
    if s.mirror_interval <= 0:
        raise SettingsError(f"mirrorInterval ({s.mirror_interval:g}s) must be positive")
    for key, value in (("advertiseAddress", s.advertise_address), ("advertiseTokenAddress", s.advertise_token_address)):
        if value:
            split_hostport(value, key=key)
    if s.dashboard_listen and not s.pki_dir and not s.insecure and not is_loopback(
            split_hostport(s.dashboard_listen, key="dashboardListen")[0]):
        raise SettingsError(f"dashboardListen: {s.dashboard_listen} is not a loopback address; without TLS anyone "
                            "who can reach it could read every queue and workload; set pkiDir, or 'insecure: true'")
    if s.token_file and not s.pki_dir:
        raise SettingsError("tokenFile: bearer tokens are only accepted over TLS; set pkiDir too")
    if s.configuration_path:
        s = replace(s, config=load_configuration(s.configuration_path))
    if s.authorization_policy:
        from sluicegate.security.authz import PolicyError, load_policy

        try:
            load_policy(s.authorization_policy)
        except PolicyError as exc:
            raise SettingsError(f"authorizationPolicy: {exc}") from exc
    if s.audit_log is None:
        s = replace(s, audit_log=default_audit_log(s.store, s.pki_dir))
    return s


def _pod_security(value: Any, where: str) -> PodUserPolicies:
    if value is None:
        value = {}
    if not isinstance(value, dict) or set(value) - {"default", "namespaces"}:
        raise SettingsError(f"{where}: expected {{default: POLICY, namespaces: {{NAMESPACE: POLICY}}}}, got {value!r}")
    try:
        return parse_policies(
            value.get("namespaces"), value.get("default"), where=f"{where}.namespaces", default_where=f"{where}.default"
        )
    except PolicyError as exc:
        raise SettingsError(str(exc)) from exc


def default_audit_log(store: str, pki_dir: str = "") -> str:
    """audit.log beside the store's file; for a database store, in the data directory that holds
    ``pkiDir`` (none without TLS); none for an in-memory store."""
    path = store.removeprefix("sqlite://")
    if "://" in path:
        return str(Path(pki_dir).parent / "audit.log") if pki_dir else ""
    if not path or path == ":memory:":
        return ""
    return str(Path(path).parent / "audit.log")


def load_configuration(path: str) -> ControllerConfig:
    from sluicegate.manifest.decode import decode
    from sluicegate.manifest.errors import ManifestError
    from sluicegate.manifest.loader import load_documents

    try:
        docs = load_documents([path])
    except ManifestError as exc:
        raise SettingsError(str(exc)) from exc
    if len(docs) != 1:
        raise SettingsError(f"{path}: expected exactly one Configuration document, found {len(docs)}")
    try:
        cfg = decode(docs[0], source=docs[0].source)
    except ManifestError as exc:
        raise SettingsError(str(exc)) from exc
    if not isinstance(cfg, ControllerConfig):
        raise SettingsError(f"{path}: expected kind Configuration (config.kueue.x-k8s.io/v1beta2)")
    return cfg
