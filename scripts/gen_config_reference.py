#!/usr/bin/env python3
"""Write docs/configuration.md: every setting of both daemons, its type, default and meaning.

Usage: python scripts/gen_config_reference.py [--check]

The names come from the settings code itself (each loader lists the keys it
knows when it refuses an unknown one), the defaults from the settings it
returns for an empty file, and the meanings from the table below. A key the
code accepts that the table lacks, or a table entry the code no longer
accepts, is an error naming it, so adding a setting means adding its row
here and regenerating. --check exits 1 when the committed page is stale
(tests/unit/test_config_reference.py runs the same comparison).
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "configuration.md"
sys.path.insert(0, str(ROOT))

from sluicegate.agent import settings as agent_settings  # noqa: E402
from sluicegate.controller import settings as controller_settings  # noqa: E402


@dataclass(frozen=True)
class Setting:
    type: str
    meaning: str
    # The attribute of the loaded settings whose empty-file value is the default,
    # or a function of the loaded settings, or a fixed text.
    default: str | Callable[[Any], str]


def attr(name: str, fmt: Callable[[Any], str] | None = None) -> Callable[[Any], str]:
    return lambda s: (fmt or show)(getattr(s, name))


def show(value: Any) -> str:
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if value in ("", None, {}):
        return "(none)"
    return f"`{value}`"


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "(none)"
    ms = round(seconds * 1000)
    if ms % 1000:
        return f"`{ms}ms`" if ms < 1000 else f"`{seconds:g}s`"
    s = ms // 1000
    for unit, size in (("h", 3600), ("m", 60)):
        if s >= size and s % size == 0:
            return f"`{s // size}{unit}`"
    return f"`{s}s`"


def resources(value: dict[str, int] | None) -> str:
    if not value:
        return "(none)"
    return ", ".join(f"`{k}: {v}`" for k, v in sorted(value.items()))


CONTROLLER: dict[str, Setting] = {
    "listen": Setting("HOST:PORT", "The gRPC API: sluicectl and the agents connect here. With `pkiDir` it requires a "
                      "client certificate from the cluster CA; without, it is plaintext with no authentication, "
                      "allowed only on a loopback address unless `insecure: true`. Port 0 picks a free port.",
                      attr("listen")),
    "healthListen": Setting("HOST:PORT", "HTTP `/livez`, `/healthz`, `/readyz` and `/metrics`. Keep it on "
                            "loopback unless a scraper elsewhere needs it.", attr("health_listen")),
    "store": Setting("path, `sqlite:///path` or `postgresql://…`", "Where every object is kept. A path: the "
                     "embedded SQLite store (WAL mode), whose directory also holds the default audit log. A "
                     "PostgreSQL URL (anything libpq accepts: several hosts, `sslmode=verify-full`, "
                     "`target_session_attrs=read-write`): a store several controllers can share, one leading at a "
                     "time ([ha.md](ha.md)).", attr("store")),
    "storeSynchronous": Setting("`NORMAL`, `FULL` or `OFF`", "SQLite's synchronous mode: NORMAL survives the "
                                "process being killed at any moment, FULL also survives power loss, at one fsync "
                                "per commit. PostgreSQL: `OFF` sets synchronous_commit off (the last commits may "
                                "be lost if the database server crashes); anything else keeps it on.",
                                attr("store_synchronous")),
    "storePasswordFile": Setting("path", "PostgreSQL: the password, read from this file (owner-only; the content, "
                                 "stripped). Otherwise the URL, `$PGPASSWORD` or `~/.pgpass`.",
                                 attr("store_password_file")),
    "advertiseAddress": Setting("HOST:PORT", "PostgreSQL store: where clients and agents reach this controller "
                                "when it leads; followers pass it on. Default: `listen` (a wildcard host becomes "
                                "this host's name).", attr("advertise_address")),
    "advertiseTokenAddress": Setting("HOST:PORT", "The same for `tokenListen`. Default: `advertiseAddress`'s host "
                                     "with `tokenListen`'s port.", attr("advertise_token_address")),
    "leaseDuration": Setting("duration", "PostgreSQL store: a leader that stops renewing its lease is replaced "
                             "after this (a crashed one sooner: about 1.5 × `leaseRenewInterval`).",
                             attr("lease_duration", duration)),
    "leaseRenewDeadline": Setting("duration", "A leader that could not renew for this long stops acting by itself; "
                                  "less than `leaseDuration`.", attr("lease_renew_deadline", duration)),
    "leaseRenewInterval": Setting("duration", "How often the leader renews its lease; less than "
                                  "`leaseRenewDeadline`.", attr("lease_renew_interval", duration)),
    "leaseRetryInterval": Setting("duration", "How often followers look at the lease.",
                                  attr("lease_retry_interval", duration)),
    "mirrorInterval": Setting("duration", "How often followers bring their warm copy of the store up to date.",
                              attr("mirror_interval", duration)),
    "configuration": Setting("path", "Kueue's Configuration document (`config.kueue.x-k8s.io/v1beta2`): "
                             "fairSharing, admissionFairSharing, waitForPodsReady, integrations.labelKeysToCopy, ... "
                             "(see [kueue-compatibility.md](kueue-compatibility.md#configuration)).",
                             attr("configuration_path")),
    "nodeHeartbeatTimeout": Setting("duration", "A node whose heartbeats stop for this long becomes NotReady: "
                                    "nothing new is placed there; its workloads keep their quota for "
                                    "`fencingGrace` more. Must exceed `agentHeartbeatInterval`.",
                                    attr("node_heartbeat_timeout", duration)),
    "agentHeartbeatInterval": Setting("duration", "How often agents report usage and pods (sent to them at "
                                      "registration).", attr("agent_heartbeat_interval", duration)),
    "fencingGrace": Setting("duration", "After `nodeHeartbeatTimeout`, how much longer a lost node's workloads "
                            "wait before they are evicted (reason NodeLost) and requeued; never less than the "
                            "longest termination grace of the node's pods + 2s.", attr("fencing_grace", duration)),
    "selfFencing": Setting("bool", "Agents cut off from the controller for `nodeHeartbeatTimeout` stop their "
                           "non-static pods themselves (reason NodeFenced). `false`: they never do, and a lost "
                           "node's workloads are not requeued until it returns.", attr("self_fencing")),
    "grpcGrace": Setting("duration", "How long in-flight RPCs may run on at shutdown.", attr("grpc_grace", duration)),
    "watchBacklog": Setting("int", "Events kept for watchers that have not read them; a watch further behind "
                            "whose client reads nothing (the send to it blocked for 1 s or more), or four times "
                            "as far behind while a send to it is under way, is ended with FAILED_PRECONDITION "
                            "\"watch expired\", after the events in flight, and its client starts a new one "
                            "(re-listing). The second allowance is for a busy controller, whose sends also wait "
                            "for its event loop.", attr("watch_backlog")),
    "placement": Setting("bool", "`false`: quota-only mode; workloads are admitted but not run anywhere.",
                         attr("placement")),
    "finishedRetention": Setting("duration", "Finished workloads stay listable this long, then are deleted with "
                                 "their logs.", attr("finished_retention", duration)),
    "pkiDir": Setting("path", "TLS on: the directory `sluicegate-controller init` made (the cluster CA, the "
                      "serving certificate). Empty: plaintext, loopback only.", attr("pki_dir")),
    "tokenListen": Setting("HOST:PORT", "With `pkiDir`: a TLS port that asks for no client certificate, for "
                           "`sluicegate-agent join` and bearer-token users.", attr("token_listen")),
    "tokenFile": Setting("path", "Bearer tokens (their SHA-256 only, from `sluicegate-controller hash-token`) with "
                         "their user and groups; TLS only; re-read on SIGHUP.", attr("token_file")),
    "insecure": Setting("bool", "`true`: allow plaintext on a non-loopback `listen` address (warned at every "
                        "start).", attr("insecure")),
    "dashboardListen": Setting("HOST:PORT", "The read-only web dashboard ([dashboard.md](dashboard.md)): HTTPS "
                               "with the API's authentication when `pkiDir` is set, else plain HTTP on loopback "
                               "only (unless `insecure: true`). `\"\"` turns it off.", attr("dashboard_listen")),
    "authorizationPolicy": Setting("path", "Role bindings ([deploy/settings/policy.yaml](../deploy/settings/"
                                   "policy.yaml)); re-read on SIGHUP. None: only `system:masters` may use the API "
                                   "(everyone, when authentication is off).", attr("authorization_policy")),
    "auditLog": Setting("path", "Every change and every denied request as a JSON line (mode 0600); reopened on "
                        "SIGHUP. `\"\"` turns it off.",
                        "`audit.log` beside the SQLite store; with a PostgreSQL store, beside `pkiDir` "
                        "(off without TLS)"),
    "podSecurity": Setting("`{default: RULE, namespaces: {NS: RULE}}`", "Who pods may run as, by namespace; a "
                           "workload whose securityContext breaks its namespace's rule is refused at creation. "
                           "RULE: `user`, `group` (names or numbers), `uidRange: {min, max}`, `allowRoot`. Keep "
                           "it in step with the agents' `podUsers`/`defaultPodUser`.",
                           "`{default: {user: 65534, group: 65534}}` (nobody, never root)"),
}

AGENT: dict[str, Setting] = {
    "controller": Setting("HOST:PORT, or a list", "The controller's gRPC API (its `listen`). Several controllers "
                          "sharing a PostgreSQL store: a YAML list or `a:7420,b:7420`; the agent finds the leader, "
                          "follows redirects and refuses a lower leader epoch than it has seen ([ha.md](ha.md)). "
                          "While none answers the agent reconnects with capped, jittered backoff; pods keep "
                          "running until self-fencing.",
                          attr("controller")),
    "nodeName": Setting("string", "The name this node registers under. Once joined, the name in the node's "
                        "certificate.", "the host name"),
    "labels": Setting("map of string", "Node labels; ResourceFlavors select nodes by them (`spec.nodeLabels`), "
                      "and a Topology's levels group nodes by them (e.g. `cloud.provider.com/topology-rack`; "
                      "[topology.md](topology.md)). `kubernetes.io/hostname` is set to the node name unless "
                      "given here.",
                      attr("labels")),
    "taints": Setting("list of taints", "Node taints, Kubernetes' semantics: `KEY[=VALUE]:EFFECT` strings or "
                      "`{key, value, effect}` mappings, effect `NoSchedule`, `PreferNoSchedule` or `NoExecute`. "
                      "Sent at registration; a restart with new taints takes effect when the agent registers "
                      "again, and a new `NoExecute` taint evicts the pods that do not tolerate it. "
                      "`--taint` (repeatable) replaces them.", "(none)"),
    "dataDir": Setting("path", "Pods' logs and HOME directories, the runtime checkpoint, the fencing state.",
                       attr("data_dir")),
    "pkiDir": Setting("path", "The node's credentials from `sluicegate-agent join` (pinned CA, key, node.pem). "
                      "With them the agent uses mutual TLS and renews its certificate itself.", "`DATA_DIR/pki`"),
    "insecure": Setting("bool", "`true`: allow plaintext to a controller that is not on loopback.",
                        attr("insecure")),
    "healthListen": Setting("HOST:PORT", "HTTP `/livez`, `/healthz`, `/readyz`, `/metrics`, `/pods`.",
                            attr("health_listen")),
    "systemReserved": Setting("map of quantity", "Allocatable = capacity − this (the kubelet's system-reserved).",
                              attr("system_reserved", resources)),
    "allocatable": Setting("map of quantity", "An explicit allocatable that replaces the computation "
                           "(small test nodes).", attr("allocatable", resources)),
    "staticPodDir": Setting("path", "Pod manifests here run on this node without the controller (static pods).",
                            attr("static_pod_dir")),
    "staticPodSyncInterval": Setting("duration", "How often `staticPodDir` is read.",
                                     attr("static_pod_sync_interval", duration)),
    "evictionHard": Setting("kubelet thresholds", "Hard eviction thresholds, kubelet syntax "
                            "(`memory.available<100Mi,nodefs.available<10%`); `\"\"` for none.",
                            attr("eviction_hard")),
    "evictionSoft": Setting("kubelet thresholds", "Soft eviction thresholds (each needs a grace period).",
                            attr("eviction_soft")),
    "evictionSoftGracePeriod": Setting("kubelet grace periods", "How long a soft threshold must hold before "
                                       "eviction (`memory.available=1m30s`).", attr("eviction_soft_grace_period")),
    "evictionInterval": Setting("duration", "How often node pressure is checked.",
                                attr("eviction_interval", duration)),
    "evictionPressureTransitionPeriod": Setting("duration", "How long MemoryPressure/DiskPressure stay set after "
                                                "the signal recovers (the kubelet's default).",
                                                attr("eviction_pressure_transition_period", duration)),
    "cgroupRoot": Setting("path", "Where the cgroup file system is mounted; v2 where delegated, else v1, else "
                          "RSS watching (logged once).", attr("cgroup_root")),
    "cgroupBase": Setting("directory name", "This agent's pods live under `<root>/<controller>/<base>`; one agent "
                          "per base (at start it removes cgroups under it that it does not know).",
                          attr("cgroup_base")),
    "restartBackoff": Setting("`{base: DURATION, cap: DURATION}`", "Crash-loop back-off of containers restarted "
                              "under restartPolicy OnFailure/Always: base, doubling up to cap.",
                              lambda s: f"`{{base: {duration(s.restart_backoff_base).strip('`')}, "
                                        f"cap: {duration(s.restart_backoff_cap).strip('`')}}}`"),
    "reconnectBackoff": Setting("`{base: DURATION, cap: DURATION}`", "Reconnect backoff to the controller.",
                                lambda s: f"`{{base: {duration(s.reconnect_base).strip('`')}, "
                                          f"cap: {duration(s.reconnect_cap).strip('`')}}}`"),
    "defaultGracePeriod": Setting("duration", "SIGTERM-to-SIGKILL time for pods that do not set "
                                  "terminationGracePeriodSeconds.", attr("default_grace_seconds", duration)),
    "podUsers": Setting("map of namespace to RULE", "Who pods run as, by namespace: `user`/`group` (names looked "
                        "up on this node, or numbers), or `uidRange: {min, max}` for a uid of its own per pod; "
                        "`allowRoot` for root. A pod breaking its rule is refused (CreateContainerConfigError).",
                        "(none)"),
    "defaultPodUser": Setting("RULE", "The rule for namespaces not in `podUsers`.",
                              "`{user: 65534, group: 65534}` (nobody, never root)"),
    "nvidiaGpus": Setting("bool", "Discover NVIDIA GPUs through NVML (the `[gpu]` extra, `nvidia-ml-py`): "
                          "`nvidia.com/gpu` and GPU feature discovery's labels; `false`: no GPUs "
                          "([gpus.md](gpus.md)).", attr("nvidia_gpus")),
    "devices": Setting("list of `{resource, paths, env}`", "Generic devices: `resource` (`DOMAIN/NAME`), its "
                       "device `paths` (one device each, handed to one pod at a time), and `env`, the variable "
                       "that names a pod's paths (default `SLUICEGATE_DEVICES_<RESOURCE>`) ([gpus.md](gpus.md)).",
                       "(none)"),
    "deviceHealthInterval": Setting("duration", "How often GPU and device health is checked; a change of "
                                    "allocatable is registered with the controller.",
                                    attr("device_health_interval", duration)),
}

_KNOWN = re.compile(r"unknown setting \(known: (?P<keys>[^)]*)\)")


def known_keys(load: Callable[[str, dict[str, Any]], Any], error: type[Exception]) -> set[str]:
    """The keys a loader accepts, as it lists them when it refuses an unknown one."""
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        f.write("zzNoSuchSetting: 1\n")
        f.flush()
        try:
            load(f.name, {})
        except error as exc:
            m = _KNOWN.search(str(exc))
            if m:
                return {k.strip() for k in m["keys"].split(",")}
        raise SystemExit(f"{load.__module__}: cannot read its list of known settings")


def check_table(daemon: str, table: dict[str, Setting], known: set[str]) -> None:
    missing, gone = sorted(known - table.keys()), sorted(table.keys() - known)
    if missing or gone:
        raise SystemExit(f"scripts/gen_config_reference.py: {daemon} settings out of step with the code: "
                         f"undocumented {missing}, no longer accepted {gone}; edit the {daemon.upper()} table")


def section(title: str, file: str, table: dict[str, Setting], defaults: Any) -> list[str]:
    lines = [f"## {title}", "", f"File: `{file}` (example: `deploy/settings/{Path(file).name}`).", "",
             "| setting | type | default | meaning |", "| --- | --- | --- | --- |"]
    for key in sorted(table):
        s = table[key]
        default = s.default if isinstance(s.default, str) else s.default(defaults)
        lines.append(f"| `{key}` | {s.type} | {default} | {s.meaning} |")
    return [*lines, ""]


def render() -> str:
    check_table("controller", CONTROLLER,
                known_keys(controller_settings.load_settings, controller_settings.SettingsError))
    check_table("agent", AGENT, known_keys(agent_settings.load_settings, agent_settings.SettingsError))
    lines = [
        "# Configuration reference",
        "",
        "<!-- Generated by scripts/gen_config_reference.py from the settings code; do not edit by hand. -->",
        "",
        "Both daemons read one YAML file (`--config`), once at start: restart the service to apply a change",
        "(the controller re-reads `tokenFile` and `authorizationPolicy`, and reopens `auditLog`, on SIGHUP,",
        "i.e. `systemctl reload sluicegate-controller`). Every key is optional; an unknown key, or a value of",
        "the wrong type, stops the daemon with an error naming the file and the key. Command-line flags",
        "(`--help`) override the file.",
        "",
        "Durations: `500ms`, `40s`, `1m30s`, `24h` (or a number of seconds). Quantities: Kubernetes notation",
        "(`2`, `500m`, `512Mi`, `4Gi`); a default shown as a number is in the canonical unit (milli-CPU, bytes).",
        "",
        *section("Controller (`sluicegate-controller`)", "/etc/sluicegate/controller.yaml", CONTROLLER,
                 controller_settings.load_settings(None, {})),
        *section("Agent (`sluicegate-agent`)", "/etc/sluicegate/agent.yaml", AGENT,
                 agent_settings.load_settings(None, {})),
        "See also: [install.md](install.md) (where the files go), [security.md](security.md) (TLS, tokens,",
        "roles, pod users), [operations.md](operations.md).",
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--check", action="store_true", help="exit 1 if docs/configuration.md is stale")
    ns = p.parse_args()
    text = render()
    if ns.check:
        if not OUT.exists() or OUT.read_text() != text:
            print("docs/configuration.md is stale: run python scripts/gen_config_reference.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
