"""sluicegate-agent: wiring and lifecycle of the node agent.

Start-up: check the eviction settings, pick the cgroup driver, re-adopt the
pods a previous agent left running, start the static pods, bind the health
port, connect to the controller; then watch node pressure and the static-pod
directory.  Shutdown stops watching but never stops pods: the next agent
adopts them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import cast

import grpc

from sluicegate.agent import checkpoint as ckpt
from sluicegate.agent import credentials
from sluicegate.agent.cgroups import CgroupDriver, CgroupV1, NoCgroups, detect
from sluicegate.agent.devices import Devices
from sluicegate.agent.fencing import SelfFencing
from sluicegate.agent.link import Backoff, ControllerLink, join
from sluicegate.agent.metrics import AgentMetrics
from sluicegate.agent.monitor import Monitor, read_boot_id
from sluicegate.agent.node import AgentNode
from sluicegate.agent.nvml import open_nvml
from sluicegate.agent.policy import EvictionConfigError, Threshold, parse_eviction_config
from sluicegate.agent.pressure import PressureLoop
from sluicegate.agent.runtime import DEFAULT_PATH, PodRuntime, RuntimeConfig
from sluicegate.agent.settings import (
    AgentSettings,
    SettingsError,
    load_settings,
    parse_labels,
    parse_resources_flag,
    parse_taints,
)
from sluicegate.agent.static import StaticPods
from sluicegate.common.health import HealthServer, JsonValue
from sluicegate.common.leaders import split_addresses
from sluicegate.common.netaddr import is_loopback, split_hostport
from sluicegate.common.sdnotify import Notifier, watchdog_interval, watchdog_task
from sluicegate.common.supervise import (
    DEFAULT_HARD_DEADLINE,
    arm_hard_deadline,
    new_stop_future,
    stop_on_signals,
    supervise,
)
from sluicegate.model.topology import HOSTNAME_LABEL

log = logging.getLogger("sluicegate.agent")

# Kubernetes' default pod limit per node.
DEFAULT_MAX_PODS = 110


def node_resources(settings: AgentSettings, monitor: Monitor) -> tuple[dict[str, int], dict[str, int]]:
    """(capacity, allocatable): allocatable = capacity - systemReserved, unless overridden."""
    reading = monitor.node(disk_path=settings.data_dir)
    capacity = {
        "cpu": reading.logical_cpus * 1000,
        "memory": reading.memory_total_bytes,
        "ephemeral-storage": reading.disk_total_bytes,
        "pods": DEFAULT_MAX_PODS,
    }
    if settings.allocatable is not None:
        allocatable = dict(settings.allocatable)
        allocatable.setdefault("pods", DEFAULT_MAX_PODS)
        return capacity, allocatable
    allocatable = {r: max(0, q - settings.system_reserved.get(r, 0)) for r, q in capacity.items()}
    return capacity, allocatable


def node_devices(settings: AgentSettings) -> Devices | None:
    """The node's GPUs (NVML, unless ``nvidiaGpus: false``) and declared devices; None when it has neither."""
    nvml, gpus = open_nvml() if settings.nvidia_gpus else (None, [])
    if nvml is None and not settings.devices:
        return None
    return Devices(gpus=gpus, nvml=nvml, declared=settings.devices)


def isolate_devices(devices: Devices, cgroups: CgroupDriver) -> None:
    """Deny pods the device files they were not given where the cgroup driver can (v1's devices cgroup)."""
    devices.isolate = isinstance(cgroups, CgroupV1) and cgroups.controls_devices
    if devices.isolate:
        log.info("devices %s: each handed to one pod at a time, named in its environment; the others' device "
                 "files are denied through the cgroup v1 devices controller", devices.capacity())
    else:
        # cgroup v2 would need a BPF device program, which the agent does not load.
        log.warning("devices %s: each handed to one pod at a time, named in its environment only; access to the "
                    "others' device files is NOT denied (cgroup driver %s: no devices cgroup)", devices.capacity(),
                    cgroups.kind)


async def watch_devices(devices: Devices, node: AgentNode, link: ControllerLink, interval: float) -> None:
    """Re-check device health every ``interval``; a change of allocatable is registered with the controller."""
    while True:
        await asyncio.sleep(interval)
        if await asyncio.to_thread(devices.check_health):
            node.devices_changed()
            link.register_again()


def eviction_thresholds(settings: AgentSettings) -> tuple[Threshold, ...]:
    try:
        return parse_eviction_config(hard=settings.eviction_hard, soft=settings.eviction_soft,
                                     soft_grace_periods=settings.eviction_soft_grace_period)
    except EvictionConfigError as exc:
        raise SettingsError(str(exc)) from exc


def node_identity(settings: AgentSettings) -> tuple[AgentSettings, bool]:
    """(settings with the node name the certificate gives, whether the node has credentials),
    after checking that plaintext is allowed where it has none."""
    node_creds = credentials.load(settings.pki_path)
    if node_creds is None:
        hosts = [split_hostport(a, key="controller")[0] for a in split_addresses(settings.controller)]
        if not all(is_loopback(h) for h in hosts) and not settings.insecure:
            raise SettingsError(
                f"controller: {settings.controller} is not a loopback address and this node has no credentials in "
                f"{settings.pki_path}: join it first ('sluicegate-agent join'), or set 'insecure: true' to send pods' "
                f"commands in plaintext")
        return settings, False
    if node_creds.node != settings.node_name:
        log.info("node name %s comes from the node certificate (settings said %s)", node_creds.node, settings.node_name)
    remaining = node_creds.not_after - time.time()
    if remaining <= 0:
        raise SettingsError(f"the node certificate in {settings.pki_path} expired; join the node again")
    return replace(settings, node_name=node_creds.node), True


async def serve(settings: AgentSettings, *, stop: asyncio.Future[str], ready_file: str | None = None) -> str:
    settings, tls = node_identity(settings)
    thresholds = eviction_thresholds(settings)
    data_dir = Path(settings.data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    monitor = Monitor()
    devices = node_devices(settings)
    cgroups = detect(root=Path(settings.cgroup_root), base=settings.cgroup_base, devices=devices is not None)
    if devices is not None:
        isolate_devices(devices, cgroups)
    runtime = PodRuntime(data_dir=data_dir, cgroups=cgroups, monitor=monitor,
                         config=RuntimeConfig(default_grace_seconds=settings.default_grace_seconds,
                                              backoff_base_seconds=settings.restart_backoff_base,
                                              backoff_cap_seconds=settings.restart_backoff_cap,
                                              base_env=(("PATH", DEFAULT_PATH), ("HOSTNAME", settings.node_name))))
    path = ckpt.path_for(data_dir)
    try:
        previous = ckpt.load(path)
    except ckpt.CheckpointError as exc:
        # Writes are atomic renames, so this is rare (a machine crash, a disk
        # fault, a hand edit), and its pods' processes may still run: adopt()
        # kills whatever runs in our cgroups without a record (orphans).
        aside = path.with_name(path.name + f".unreadable-{int(time.time())}")
        log.error("%s; moving it to %s and starting with no pods", exc, aside)
        os.replace(path, aside)
        previous = None
    if previous is None and isinstance(cgroups, NoCgroups):
        log.warning("no checkpoint and no writable cgroups: pods a previous agent left running cannot be found "
                    "(orphans are only found in the agent's cgroups); they are not stopped or reported")
    report = await runtime.adopt(previous)
    log.info("re-adopted %d container(s); %d lost; %d pod(s) had finished meanwhile",
             len(report.adopted), len(report.lost), len(report.finished))
    for lost in report.lost:
        log.warning("pod %s container %s could not be re-adopted: %s", lost.uid, lost.container, lost.why)
    capacity, allocatable = node_resources(settings, monitor)
    node = AgentNode(name=settings.node_name, data_dir=data_dir, runtime=runtime, monitor=monitor,
                     pod_users=settings.pod_users, devices=devices,
                     capacity=capacity, allocatable=allocatable, clock=time.time)
    node.devices_changed()
    if previous is not None and previous.boot_id != read_boot_id():
        # Its pods died with the machine: a fault of the node, which the controller
        # answers by requeueing their workloads (not by failing them).
        for uid in sorted({lost.uid for lost in report.lost}):
            node.set_reason(uid, "NodeRebooted", f"node {settings.node_name} rebooted while the pod ran")
    for orphan in report.swept_cgroups:
        # Its workload is requeued by the controller (reason names the cause), not failed.
        node.add_orphan(orphan, f"pod {orphan} ran in node {settings.node_name}'s cgroups without a checkpoint "
                                "record (the checkpoint was lost); the agent killed it, as it cannot manage it safely")
    static: StaticPods | None = None
    if settings.static_pod_dir:
        static = StaticPods(node=node, directory=Path(settings.static_pod_dir),
                            interval=settings.static_pod_sync_interval)
        # Before registering: the controller's first view of the node already
        # counts the static pods, so it places nothing they would then preempt.
        await static.sync()
    pressure = PressureLoop(node=node, thresholds=thresholds, interval=settings.eviction_interval,
                            transition_seconds=settings.eviction_pressure_transition_period)
    log.info("eviction thresholds: %s", ", ".join(str(t) for t in thresholds) or "none")
    for adopted_uid in {a.uid for a in report.adopted}:
        node.start_probes(adopted_uid)
    hhost, hport = split_hostport(settings.health_listen, key="healthListen")
    boot_id = read_boot_id()
    fencing = SelfFencing(node=node, data_dir=data_dir, boot_id=boot_id)
    link = ControllerLink(
        address=settings.controller, node=node, taints=settings.taints, boot_id=boot_id,
        # kubernetes.io/hostname (the node's name, as the kubelet sets it; a label value holds at most
        # 63 characters) and discovered GPU labels first: a label the settings name wins.
        labels={**({HOSTNAME_LABEL: settings.node_name} if len(settings.node_name) <= 63 else {}),
                **(devices.labels() if devices is not None else {}), **settings.labels},
        health_address="", backoff=Backoff(settings.reconnect_base, settings.reconnect_cap),
        pki_dir=settings.pki_path if tls else None, fencing=fencing, epoch_file=data_dir / "controller-epoch",
    )

    def readiness() -> tuple[bool, str]:
        if not link.connected:
            return False, f"not registered with the controller at {link.address}: {link.last_error}"
        return True, f"registered with {link.address} as {settings.node_name}"

    def pods_json() -> JsonValue:
        # Only JSON values, in containers whose exact types JsonValue's invariant ones do not match.
        return cast(JsonValue, node.pods_json())

    metrics = AgentMetrics()
    metrics.attach(node, link)
    health = HealthServer(registry=metrics.registry, readiness=readiness, host=hhost, port=hport,
                          json_routes={"/pods": pods_json})
    await health.start()
    health_host, health_port = health.address
    link.health_address = f"{health_host}:{health_port}"
    notifier = Notifier.from_environment()
    try:
        async def announce_ready() -> None:
            # Ready means: pods re-adopted, health bound, registered with the controller.
            while not link.registered_once:
                await asyncio.sleep(0.05)
            if ready_file:
                tmp = f"{ready_file}.tmp"
                Path(tmp).write_text(json.dumps({"health": link.health_address, "pid": os.getpid(),
                                                 "node": settings.node_name}))
                os.replace(tmp, ready_file)
            notifier.ready(f"node {settings.node_name} registered with {settings.controller}")
            await asyncio.Event().wait()

        def stopping(reason: str) -> None:
            health.mark_stopping(reason)
            notifier.stopping(reason)
            arm_hard_deadline(DEFAULT_HARD_DEADLINE)

        tasks = {
            "runtime": runtime.watch(),
            "controller-link": link.run(),
            "pod-events": link.forward_events(),
            "ready": announce_ready(),
            "node-pressure": pressure.run(),
            "self-fencing": fencing.run(),
        }
        if static is not None:
            tasks["static-pods"] = static.run()
        if devices is not None:
            tasks["device-health"] = watch_devices(devices, node, link, settings.device_health_interval)
        period = watchdog_interval()
        if period is not None:
            tasks["watchdog"] = watchdog_task(notifier, period=period, healthy=lambda: True)
        return await supervise(tasks, stop=stop, on_stopping=stopping)
    finally:
        await runtime.close()
        await health.stop()
        if devices is not None:
            devices.close()


async def _main(ns: argparse.Namespace) -> int:
    settings = load_settings(ns.config, {
        "controller": ns.controller,
        "node_name": ns.node_name,
        "data_dir": ns.data_dir,
        "health_listen": ns.health_listen,
        "labels": parse_labels(ns.label),
        "taints": parse_taints(ns.taint, "--taint") if ns.taint else None,
        "allocatable": parse_resources_flag(ns.allocatable, "--allocatable"),
        "static_pod_dir": ns.static_pod_dir,
        "static_pod_sync_interval": ns.static_pod_sync_interval,
        "eviction_hard": ns.eviction_hard,
        "eviction_soft": ns.eviction_soft,
        "eviction_soft_grace_period": ns.eviction_soft_grace_period,
        "eviction_interval": ns.eviction_interval,
        "eviction_pressure_transition_period": ns.eviction_pressure_transition_period,
        "restart_backoff_base": ns.restart_backoff_base,
        "cgroup_base": ns.cgroup_base,
    })
    stop = new_stop_future()
    with stop_on_signals(stop):
        reason = await serve(settings, stop=stop, ready_file=ns.ready_file)
    log.info("stopped: %s (pods keep running)", reason)
    return 0


def join_main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="sluicegate-agent join",
                                description="Join this node to a cluster: get a node certificate with a bootstrap "
                                            "token.")
    p.add_argument("--controller", required=True,
                   help="the controller's token port HOST:PORT (tokenListen, e.g. :7423)")
    p.add_argument("--token", required=True, help="a bootstrap token from 'sluicectl token create'")
    p.add_argument("--ca-cert-hash", required=True,
                   help="sha256:... of the cluster CA ('sluicegate-controller init' prints it)")
    p.add_argument("--config", help="the agent's settings YAML (for dataDir, pkiDir, nodeName)")
    p.add_argument("--node-name")
    p.add_argument("--data-dir")
    p.add_argument("--pki-dir")
    ns = p.parse_args(argv)
    logging.basicConfig(level="INFO", format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    try:
        settings = load_settings(ns.config, {"node_name": ns.node_name, "data_dir": ns.data_dir, "pki_dir": ns.pki_dir})
        joined = asyncio.run(join(address=ns.controller, token=ns.token.strip(), ca_hash=ns.ca_cert_hash.strip(),
                                  node_name=settings.node_name, pki_dir=settings.pki_path))
    except (SettingsError, credentials.CredentialsError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except grpc.aio.AioRpcError as exc:
        print(f"error: {exc.code().name}: {exc.details()}", file=sys.stderr)
        return 1
    print(f"node {joined.node} joined; credentials in {settings.pki_path} (valid until "
          f"{time.strftime('%Y-%m-%d', time.gmtime(joined.not_after))}); start the agent with the controller's "
          f"API address (listen, e.g. :7420)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "join":
        return join_main(args[1:])
    p = argparse.ArgumentParser(prog="sluicegate-agent", description="The sluicegate node agent.")
    p.add_argument("--config", help="settings YAML (see deploy/settings/agent.yaml)")
    p.add_argument("--controller", help="controller gRPC HOST:PORT")
    p.add_argument("--node-name")
    p.add_argument("--data-dir")
    p.add_argument("--health-listen", help="HOST:PORT for /livez /readyz /metrics /pods (port 0 picks one)")
    p.add_argument("--label", action="append", help="node label KEY=VALUE (repeatable)")
    p.add_argument("--taint", action="append", help="node taint KEY[=VALUE]:EFFECT (repeatable; replaces the file's)")
    p.add_argument("--allocatable", help="override, e.g. cpu=4,memory=8Gi")
    p.add_argument("--static-pod-dir")
    p.add_argument("--static-pod-sync-interval", type=float, metavar="SECONDS")
    p.add_argument("--eviction-hard", help='e.g. "memory.available<100Mi,nodefs.available<10%%" ("" for none)')
    p.add_argument("--eviction-soft", help='e.g. "memory.available<500Mi"')
    p.add_argument("--eviction-soft-grace-period", help='e.g. "memory.available=1m30s"')
    p.add_argument("--eviction-interval", type=float, metavar="SECONDS", help="how often node pressure is checked")
    p.add_argument("--eviction-pressure-transition-period", type=float, metavar="SECONDS",
                   help="how long a pressure condition outlives the pressure")
    p.add_argument("--cgroup-base", help="directory name of this agent's cgroups (unique per agent on a machine)")
    p.add_argument("--restart-backoff-base", type=float, metavar="SECONDS",
                   help="first crash-loop back-off of restarting containers (doubles up to the cap)")
    p.add_argument("--ready-file", help="write {health, pid, node} JSON here once registered")
    p.add_argument("--log-level", default=os.environ.get("SLUICEGATE_LOG_LEVEL", "INFO"))
    ns = p.parse_args(args)
    logging.basicConfig(level=ns.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        stream=sys.stderr)
    try:
        return asyncio.run(_main(ns))
    except (SettingsError, credentials.CredentialsError) as exc:
        log.error("%s", exc)
        return 2
    except BaseExceptionGroup as group:
        log.error("exiting after root task failure(s): %s", group)
        return 1


if __name__ == "__main__":
    sys.exit(main())
