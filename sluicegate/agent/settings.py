"""The agent's settings file (YAML) and command-line overrides.

    controller: 127.0.0.1:7420        # the controller's gRPC address; several (HA): a list, or "a:7420,b:7420"
    nodeName: worker-1                # default: the host name
    labels: {zone: a, kubernetes.io/arch: amd64}
    taints: ["dedicated=gpu:NoSchedule"]   # or [{key: dedicated, value: gpu, effect: NoSchedule}]; sent at registration
    dataDir: /var/lib/sluicegate/agent   # pods' logs and the checkpoint
    healthListen: 127.0.0.1:7422      # /livez /readyz /metrics /pods
    systemReserved: {cpu: 500m, memory: 1Gi}   # allocatable = capacity - this
    allocatable: {cpu: "16", memory: 32Gi}     # explicit override (small test nodes)
    staticPodDir: /etc/sluicegate/pods
    staticPodSyncInterval: 5s         # how often the static-pod directory is read
    evictionHard: "memory.available<100Mi,nodefs.available<10%"
    evictionSoft: ""
    evictionSoftGracePeriod: ""       # e.g. "memory.available=1m30s"
    evictionInterval: 1s              # how often pressure is checked
    evictionPressureTransitionPeriod: 5m   # how long MemoryPressure/DiskPressure outlive the pressure
    restartBackoff: {base: 10s, cap: 5m}   # crash-loop back-off of restarting containers
    cgroupRoot: /sys/fs/cgroup
    cgroupBase: sluicegate            # this agent's cgroups live under <root>/<controller>/<base>
    reconnectBackoff: {base: 0.5s, cap: 30s}
    pkiDir: /var/lib/sluicegate/agent/pki   # the node's credentials from 'sluicegate-agent join' (default DATA_DIR/pki)
    insecure: false                   # true: allow plaintext to a controller that is not on loopback
    # Who pods run as, by namespace (sluicegate.security.podsecurity); never
    # root unless allowRoot.  The agent refuses a pod whose securityContext
    # breaks its namespace's rule (Failed, CreateContainerConfigError).
    podUsers:
      team-a: {user: alice, group: alice}          # names or numbers
      team-b: {uidRange: {min: 20000, max: 20999}, group: 20000}   # a uid of its own per pod
      ops: {user: root, allowRoot: true}
    defaultPodUser: {user: nobody, group: nogroup}   # the default: 65534/65534
    nvidiaGpus: true                  # discover NVIDIA GPUs through NVML (the [gpu] extra); false: none
    devices:                          # generic devices, each handed to one pod at a time (docs/gpus.md)
      - {resource: example.com/fpga, paths: [/dev/fpga0, /dev/fpga1], env: FPGA_DEVICES}
    deviceHealthInterval: 10s         # how often GPU and device health is checked

Once the node has joined (``pkiDir`` holds ``node.pem``) the agent connects
with mutual TLS and its node name is the one in its certificate.  Without
credentials it connects in plaintext, which it does only to a loopback
controller unless ``insecure: true``.
"""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from sluicegate.manifest.taints import read_taint_list
from sluicegate.manifest.timefmt import parse_duration
from sluicegate.model.taints import Taint
from sluicegate.quantity import QuantityError, parse_canonical
from sluicegate.security.podsecurity import PodUserPolicies, PolicyError, parse_policies


class SettingsError(Exception):
    """A setting is wrong; the message names it."""


@dataclass(frozen=True, slots=True)
class DeviceSpec:
    """A generic device resource (``devices:``): its name, its device files, the variable naming a pod's share."""

    resource: str
    paths: tuple[str, ...]
    env: str


# The resource NVML discovery owns; settings cannot declare it.
GPU_RESOURCE = "nvidia.com/gpu"
_RESOURCE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def default_device_env(resource: str) -> str:
    """``example.com/fpga`` -> ``SLUICEGATE_DEVICES_EXAMPLE_COM_FPGA``."""
    return "SLUICEGATE_DEVICES_" + re.sub(r"[^A-Za-z0-9]", "_", resource).upper()


def _devices(value: Any, where: str) -> tuple[DeviceSpec, ...]:
    if not isinstance(value, list):
        raise SettingsError(f"{where}: expected a list of {{resource, paths, env}}, got {value!r}")
    out: list[DeviceSpec] = []
    seen_paths: dict[str, str] = {}
    for i, item in enumerate(value):
        at = f"{where}[{i}]"
        if not isinstance(item, dict):
            raise SettingsError(f"{at}: expected a mapping {{resource, paths, env}}, got {item!r}")
        unknown = set(item) - {"resource", "paths", "env"}
        if unknown:
            raise SettingsError(f"{at}.{sorted(unknown)[0]}: unknown field (known: env, paths, resource)")
        resource = item.get("resource")
        if not isinstance(resource, str) or not _RESOURCE_NAME.match(resource):
            raise SettingsError(f"{at}.resource: expected an extended resource name DOMAIN/NAME "
                                f"(e.g. example.com/fpga), got {resource!r}")
        if resource == GPU_RESOURCE or resource.split("/", 1)[0].endswith("kubernetes.io"):
            raise SettingsError(f"{at}.resource: {resource} is not for declaring here "
                                f"({GPU_RESOURCE} comes from NVML; kubernetes.io names are the system's)")
        if any(d.resource == resource for d in out):
            raise SettingsError(f"{at}.resource: {resource} is declared twice")
        paths = item.get("paths")
        if not isinstance(paths, list) or not paths:
            raise SettingsError(f"{at}.paths: expected a non-empty list of absolute paths, got {paths!r}")
        for j, path in enumerate(paths):
            if not isinstance(path, str) or not path.startswith("/") or "," in path:
                raise SettingsError(f"{at}.paths[{j}]: expected an absolute path without commas, got {path!r}")
            if path in seen_paths:
                raise SettingsError(f"{at}.paths[{j}]: {path} is already a device of {seen_paths[path]}")
            seen_paths[path] = resource
        env = item.get("env", default_device_env(resource))
        if not isinstance(env, str) or not _ENV_NAME.match(env):
            raise SettingsError(f"{at}.env: expected an environment variable name, got {env!r}")
        if any(d.env == env for d in out):
            raise SettingsError(f"{at}.env: {env} already names another resource's devices")
        out.append(DeviceSpec(resource=resource, paths=tuple(paths), env=env))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class AgentSettings:
    controller: str = "127.0.0.1:7420"
    node_name: str = field(default_factory=socket.gethostname)
    labels: dict[str, str] = field(default_factory=dict)
    # Kubernetes' node taints; the controller places and evicts by them (NoExecute).
    taints: tuple[Taint, ...] = ()
    data_dir: str = "/var/lib/sluicegate/agent"
    health_listen: str = "127.0.0.1:7422"
    system_reserved: dict[str, int] = field(default_factory=dict)
    allocatable: dict[str, int] | None = None
    static_pod_dir: str = ""
    static_pod_sync_interval: float = 5.0
    eviction_hard: str = "memory.available<100Mi,nodefs.available<10%"
    eviction_soft: str = ""
    eviction_soft_grace_period: str = ""
    eviction_interval: float = 1.0
    # The kubelet's default: a node hovering at a threshold is not offered new pods every other second.
    eviction_pressure_transition_period: float = 300.0
    # The kubelet's crash-loop back-off: 10s doubling up to 5m.
    restart_backoff_base: float = 10.0
    restart_backoff_cap: float = 300.0
    cgroup_root: str = "/sys/fs/cgroup"
    # An agent empties every cgroup under its base that its checkpoint does not
    # record, so two agents on one machine (tests, several nodes on one host)
    # must not share a base.
    cgroup_base: str = "sluicegate"
    reconnect_base: float = 0.5
    reconnect_cap: float = 30.0
    default_grace_seconds: float = 30.0
    pod_users: PodUserPolicies = field(default_factory=PodUserPolicies)
    pki_dir: str = ""
    insecure: bool = False
    nvidia_gpus: bool = True
    devices: tuple[DeviceSpec, ...] = ()
    device_health_interval: float = 10.0

    @property
    def pki_path(self) -> Path:
        return Path(self.pki_dir) if self.pki_dir else Path(self.data_dir) / "pki"


def _resources(value: Any, key: str) -> dict[str, int]:
    if not isinstance(value, dict):
        raise SettingsError(f"{key}: expected a mapping of resource to quantity, got {value!r}")
    out: dict[str, int] = {}
    for res, q in value.items():
        try:
            out[str(res)] = parse_canonical(str(res), q)
        except QuantityError as exc:
            raise SettingsError(f"{key}.{res}: {exc}") from exc
    return out


def _duration(value: Any, key: str) -> float:
    try:
        return parse_duration(value) if isinstance(value, str) else float(value)
    except (ValueError, TypeError) as exc:
        raise SettingsError(f"{key}: {exc}") from exc


_STRINGS = {
    "controller": "controller", "nodeName": "node_name", "dataDir": "data_dir", "healthListen": "health_listen",
    "staticPodDir": "static_pod_dir", "evictionHard": "eviction_hard", "evictionSoft": "eviction_soft",
    "evictionSoftGracePeriod": "eviction_soft_grace_period", "cgroupRoot": "cgroup_root",
    "cgroupBase": "cgroup_base", "pkiDir": "pki_dir",
}


def load_settings(path: str | None, overrides: dict[str, Any]) -> AgentSettings:
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
    pod_user_raw: dict[str, Any] = {}
    for key, value in raw.items():
        where = f"{path}: {key}"
        if key == "controller" and isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            values["controller"] = ",".join(value)  # several controllers (HA): the link finds the leader
        elif key in _STRINGS:
            if not isinstance(value, str):
                raise SettingsError(f"{where}: expected a string, got {value!r}")
            values[_STRINGS[key]] = value
        elif key == "labels":
            if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
                raise SettingsError(f"{where}: expected a mapping of label to string value")
            values["labels"] = {str(k): v for k, v in value.items()}
        elif key == "taints":
            values["taints"] = parse_taints(value, where)
        elif key == "systemReserved":
            values["system_reserved"] = _resources(value, where)
        elif key == "allocatable":
            values["allocatable"] = _resources(value, where)
        elif key == "evictionInterval":
            values["eviction_interval"] = _duration(value, where)
        elif key == "evictionPressureTransitionPeriod":
            values["eviction_pressure_transition_period"] = _duration(value, where)
        elif key == "staticPodSyncInterval":
            values["static_pod_sync_interval"] = _duration(value, where)
        elif key == "restartBackoff":
            if not isinstance(value, dict) or set(value) - {"base", "cap"}:
                raise SettingsError(f"{where}: expected {{base: DURATION, cap: DURATION}}")
            if "base" in value:
                values["restart_backoff_base"] = _duration(value["base"], f"{where}.base")
            if "cap" in value:
                values["restart_backoff_cap"] = _duration(value["cap"], f"{where}.cap")
        elif key in ("podUsers", "defaultPodUser"):
            pod_user_raw[key] = value
        elif key == "insecure":
            if not isinstance(value, bool):
                raise SettingsError(f"{where}: expected true or false, got {value!r}")
            values["insecure"] = value
        elif key == "nvidiaGpus":
            if not isinstance(value, bool):
                raise SettingsError(f"{where}: expected true or false, got {value!r}")
            values["nvidia_gpus"] = value
        elif key == "devices":
            values["devices"] = _devices(value, where)
        elif key == "deviceHealthInterval":
            values["device_health_interval"] = _duration(value, where)
        elif key == "defaultGracePeriod":
            values["default_grace_seconds"] = _duration(value, where)
        elif key == "reconnectBackoff":
            if not isinstance(value, dict) or set(value) - {"base", "cap"}:
                raise SettingsError(f"{where}: expected {{base: DURATION, cap: DURATION}}")
            if "base" in value:
                values["reconnect_base"] = _duration(value["base"], f"{where}.base")
            if "cap" in value:
                values["reconnect_cap"] = _duration(value["cap"], f"{where}.cap")
        else:
            known = sorted([*_STRINGS, "labels", "taints", "systemReserved", "allocatable", "evictionInterval",
                            "defaultGracePeriod", "reconnectBackoff", "evictionPressureTransitionPeriod",
                            "staticPodSyncInterval", "restartBackoff", "insecure", "podUsers", "defaultPodUser",
                            "nvidiaGpus", "devices", "deviceHealthInterval"])
            raise SettingsError(f"{where}: unknown setting (known: {', '.join(known)})")
    if pod_user_raw:
        try:
            values["pod_users"] = parse_policies(pod_user_raw.get("podUsers"), pod_user_raw.get("defaultPodUser"),
                                                 where=f"{path}: podUsers", default_where=f"{path}: defaultPodUser")
        except PolicyError as exc:
            raise SettingsError(str(exc)) from exc
    for k, v in overrides.items():
        if v is None:
            continue
        values[k] = v
    s = replace(AgentSettings(), **values)
    if not s.node_name:
        raise SettingsError("nodeName: must not be empty")
    if s.reconnect_base <= 0 or s.reconnect_cap < s.reconnect_base:
        raise SettingsError("reconnectBackoff: need 0 < base <= cap")
    if not s.cgroup_base or "/" in s.cgroup_base or s.cgroup_base in (".", ".."):
        raise SettingsError(f"cgroupBase: must be one directory name, got {s.cgroup_base!r}")
    if s.restart_backoff_base <= 0 or s.restart_backoff_cap < s.restart_backoff_base:
        raise SettingsError("restartBackoff: need 0 < base <= cap")
    intervals = (("evictionInterval", s.eviction_interval), ("staticPodSyncInterval", s.static_pod_sync_interval),
                 ("deviceHealthInterval", s.device_health_interval))
    for key, seconds in intervals:
        if seconds <= 0:
            raise SettingsError(f"{key}: must be a positive duration, got {seconds:g}s")
    if s.eviction_pressure_transition_period < 0:
        raise SettingsError("evictionPressureTransitionPeriod: must not be negative")
    return s


def parse_labels(items: list[str] | None) -> dict[str, str] | None:
    if not items:
        return None
    out: dict[str, str] = {}
    for item in items:
        if "=" not in item:
            raise SettingsError(f"--label: expected KEY=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        out[k] = v
    return out


def parse_taints(value: Any, where: str) -> tuple[Taint, ...]:
    try:
        return read_taint_list(value, where=where)
    except ValueError as exc:
        raise SettingsError(str(exc)) from exc


def parse_resources_flag(text: str | None, key: str) -> dict[str, int] | None:
    if not text:
        return None
    pairs = {}
    for part in text.split(","):
        if "=" not in part:
            raise SettingsError(f"{key}: expected RESOURCE=QUANTITY[,...], got {text!r}")
        r, q = part.split("=", 1)
        pairs[r.strip()] = q.strip()
    return _resources(pairs, key)
