"""sluicegate-controller: wiring, lifecycle, signals, health and metrics.

Start-up: open the store, rebuild the cache from it, bind gRPC and the
health port, then tell systemd we are ready.  Shutdown (SIGTERM/SIGINT):
mark not ready, stop accepting, let in-flight RPCs finish within the grace
period, cancel the scheduler, close the store.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from sluicegate.common.health import HealthServer
from sluicegate.common.heapgc import HEAP_GC
from sluicegate.common.sdnotify import Notifier, watchdog_interval, watchdog_task
from sluicegate.common.streams import STREAM_WINDOW_OPTIONS
from sluicegate.common.supervise import (
    DEFAULT_HARD_DEADLINE,
    arm_hard_deadline,
    new_stop_future,
    stop_on_signals,
    supervise,
)
from sluicegate.controller.initcmd import COMMANDS
from sluicegate.controller.initcmd import main as init_main
from sluicegate.controller.manager import Manager
from sluicegate.controller.metrics import ControllerMetrics
from sluicegate.controller.service.admin import AdminServicer
from sluicegate.controller.service.agents import AgentLinkServicer, NodesServicer
from sluicegate.controller.service.gate import gate_from_settings, install_sighup
from sluicegate.controller.service.security import SecurityServicer
from sluicegate.controller.service.workloads import WorkloadsServicer
from sluicegate.controller.settings import ControllerSettings, SettingsError, load_settings, split_hostport
from sluicegate.controller.store import StoreError, open_store
from sluicegate.security.authn import ClusterAuthenticator, TokenFileError
from sluicegate.security.authority import Authority
from sluicegate.security.authority import paths as pki_paths
from sluicegate.security.identity import Authenticator, OpenAuthenticator
from sluicegate.security.pki import PkiError
from sluicegate.v1 import agent_pb2_grpc, objects_pb2_grpc, security_pb2_grpc, workloads_pb2_grpc

log = logging.getLogger("sluicegate.controller")


def server_credentials(pki_dir: Path, *, require_client_cert: bool) -> grpc.ServerCredentials:
    """TLS from the PKI directory; a renewed serving certificate is used from the next handshake on."""
    p = pki_paths(pki_dir)

    def load() -> grpc.ServerCertificateConfiguration:
        return grpc.ssl_server_certificate_configuration(
            [(p["server.key"].read_bytes(), p["server.crt"].read_bytes())], root_certificates=p["ca.crt"].read_bytes()
        )

    def stamp() -> tuple[float, float]:
        return p["server.crt"].stat().st_mtime, p["server.key"].stat().st_mtime

    seen = [stamp()]

    def fetch() -> grpc.ServerCertificateConfiguration | None:
        # Called by gRPC before each handshake: a stat() is all it costs while nothing changed.
        try:
            now = stamp()
            if now == seen[0]:
                return None
            config = load()
        except OSError as exc:
            log.error("cannot reload the serving certificate (%s); keeping the one in use", exc)
            return None
        seen[0] = now
        log.info("serving certificate in %s changed; using it for new connections", pki_dir)
        return config

    # grpc documents fetch's None as "keep the current configuration"; the stub's
    # Callable[[], ServerCertificateConfiguration] leaves that out.
    return grpc.dynamic_ssl_server_credentials(load(), fetch, require_client_authentication=require_client_cert)  # type: ignore[arg-type]


def _bind(server: grpc.aio.Server, address: str, key: str, credentials: grpc.ServerCredentials | None) -> str:
    host, port = split_hostport(address, key=key)
    target = f"{host}:{port}" if ":" not in host else f"[{host}]:{port}"
    bound = server.add_secure_port(target, credentials) if credentials else server.add_insecure_port(target)
    if bound == 0:
        raise SettingsError(f"{key}: cannot bind gRPC on {address}")
    return f"{host}:{bound}" if ":" not in host else f"[{host}]:{bound}"


async def serve(
    settings: ControllerSettings,
    *,
    stop: asyncio.Future[str],
    ready_file: str | None = None,
    clock: Callable[[], float] = time.time,
) -> str:
    store = open_store(settings.store, synchronous=settings.store_synchronous)
    metrics = ControllerMetrics()
    try:
        manager = Manager(
            store,
            clock=clock,
            config=settings.config,
            placement=settings.placement,
            node_timeout=settings.node_heartbeat_timeout,
            fencing_grace=settings.fencing_grace,
            self_fencing=settings.self_fencing,
            monotonic=time.monotonic if clock is time.time else None,
            finished_retention=settings.finished_retention,
            pod_security=settings.pod_security,
            observer=metrics,
        )
        metrics.attach(manager)
        t0 = time.monotonic()
        loaded = manager.load()
        log.info("loaded %d objects from %s in %.2fs", loaded, settings.store, time.monotonic() - t0)

        authority: Authority | None = None
        authenticator: Authenticator = OpenAuthenticator()
        if settings.pki_dir:
            authority = Authority(Path(settings.pki_dir))
            authenticator = ClusterAuthenticator(is_revoked=authority.is_revoked, token_file=settings.token_file)
        elif settings.insecure:
            log.warning(
                "insecure: true: serving plaintext gRPC on %s with no authentication; anyone who can reach "
                "it can run commands on every node",
                settings.listen,
            )
        else:
            log.info(
                "serving plaintext gRPC on loopback %s without authentication (set pkiDir for TLS)", settings.listen
            )
        gate = gate_from_settings(settings, authenticator)  # authz + audit; SIGHUP reloads policy and tokens
        undo_sighup = install_sighup(gate)

        def build(*, agents: bool) -> tuple[grpc.aio.Server, health.aio.HealthServicer]:
            srv = grpc.aio.server(
                options=[("grpc.max_receive_message_length", 64 * 1024 * 1024), *STREAM_WINDOW_OPTIONS]
            )
            objects_pb2_grpc.add_AdminServicer_to_server(AdminServicer(manager, gate), srv)
            workloads_pb2_grpc.add_WorkloadsServicer_to_server(WorkloadsServicer(manager, gate), srv)
            if agents:
                agent_pb2_grpc.add_AgentLinkServicer_to_server(
                    AgentLinkServicer(
                        manager, heartbeat_interval=settings.agent_heartbeat_interval, authenticator=authenticator
                    ),
                    srv,
                )
            agent_pb2_grpc.add_NodesServicer_to_server(NodesServicer(manager, gate), srv)
            security_pb2_grpc.add_SecurityServicer_to_server(
                SecurityServicer(
                    authority,
                    gate,
                    node_connected=manager.fleet.node_connected,
                    node_revoked=manager.fleet.node_revoked,
                    serial_of=getattr(authenticator, "serial_of", None),
                ),
                srv,
            )
            hs = health.aio.HealthServicer()
            health_pb2_grpc.add_HealthServicer_to_server(hs, srv)
            return srv, hs

        server, grpc_health = build(agents=True)
        grpc_addr = _bind(
            server,
            settings.listen,
            "listen",
            server_credentials(Path(settings.pki_dir), require_client_cert=True) if settings.pki_dir else None,
        )
        token_server: grpc.aio.Server | None = None
        token_addr = ""
        if settings.pki_dir:
            token_server, token_health = build(agents=False)
            token_addr = _bind(
                token_server,
                settings.token_listen,
                "tokenListen",
                server_credentials(Path(settings.pki_dir), require_client_cert=False),
            )
            await token_server.start()
            await token_health.set("", health_pb2.HealthCheckResponse.SERVING)
            log.info("serving TLS for joining agents and bearer tokens on %s", token_addr)
        await server.start()
        await grpc_health.set("", health_pb2.HealthCheckResponse.SERVING)
        log.info("serving gRPC%s on %s", " (mutual TLS)" if settings.pki_dir else "", grpc_addr)

        hhost, hport = split_hostport(settings.health_listen, key="healthListen")
        health_server = HealthServer(
            registry=metrics.registry,
            readiness=manager.readiness,
            host=hhost,
            port=hport,
        )
        await health_server.start()
        try:
            notifier = Notifier.from_environment()
            if ready_file:
                tmp = f"{ready_file}.tmp"
                Path(tmp).write_text(
                    json.dumps(
                        {
                            "grpc": grpc_addr,
                            "health": "{}:{}".format(*health_server.address),
                            "pid": os.getpid(),
                            "token": token_addr,
                            "caCertHash": authority.ca_hash if authority else "",
                        }
                    )
                )
                os.replace(tmp, ready_file)
            notifier.ready(f"serving gRPC on {grpc_addr}")

            async def grpc_task() -> None:
                try:
                    await server.wait_for_termination()
                finally:
                    await grpc_health.enter_graceful_shutdown()
                    stops = [server.stop(settings.grpc_grace)]
                    if token_server is not None:
                        stops.append(token_server.stop(settings.grpc_grace))
                    await asyncio.gather(*stops)

            def stopping(reason: str) -> None:
                health_server.mark_stopping(reason)
                manager.stop()
                notifier.stopping(reason)
                arm_hard_deadline(DEFAULT_HARD_DEADLINE)

            async def timers() -> None:
                # Heartbeats are checked at a quarter of the timeout (a lost node
                # is noticed at most 25% late) and at least every second, which
                # also bounds how late a backoff or a pods-ready timeout fires.
                period = min(1.0, max(0.05, settings.node_heartbeat_timeout / 4))
                while True:
                    await asyncio.sleep(period)
                    manager.tick()

            tasks = {
                "grpc": grpc_task(),
                "scheduler": manager.run_scheduler(),
                "timers": timers(),
                "gc": HEAP_GC.rescans(),
            }
            period = watchdog_interval()
            if period is not None:
                tasks["watchdog"] = watchdog_task(notifier, period=period, healthy=lambda: True)
            return await supervise(tasks, stop=stop, on_stopping=stopping)
        finally:
            await health_server.stop()
            undo_sighup()
            gate.close()
    finally:
        store.close()


async def _main(ns: argparse.Namespace) -> int:
    settings = load_settings(
        ns.config,
        {
            "listen": ns.listen,
            "health_listen": ns.health_listen,
            "store": ns.store,
            "configuration_path": ns.configuration,
            "node_heartbeat_timeout": ns.node_heartbeat_timeout,
            "agent_heartbeat_interval": ns.agent_heartbeat_interval,
            "placement": False if ns.no_placement else None,
            "pki_dir": ns.pki_dir,
            "token_listen": ns.token_listen,
        },
    )
    stop = new_stop_future()
    with stop_on_signals(stop):
        reason = await serve(settings, stop=stop, ready_file=ns.ready_file)
    log.info("stopped: %s", reason)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in COMMANDS:
        return init_main(args)
    parser = argparse.ArgumentParser(prog="sluicegate-controller", description="The sluicegate controller.")
    parser.add_argument("--config", help="settings YAML (see deploy/systemd/controller.yaml.example)")
    parser.add_argument("--listen", help="gRPC HOST:PORT (port 0 picks one)")
    parser.add_argument("--health-listen", help="health/metrics HOST:PORT")
    parser.add_argument("--store", help="sqlite path or sqlite:///path")
    parser.add_argument("--configuration", help="Kueue Configuration YAML (fairSharing, waitForPodsReady, ...)")
    parser.add_argument(
        "--node-heartbeat-timeout", type=float, help="seconds without heartbeat before a node is NotReady"
    )
    parser.add_argument("--agent-heartbeat-interval", type=float, help="seconds between agent heartbeats")
    parser.add_argument(
        "--no-placement", action="store_true", help="quota-only mode: admit workloads without binding or running pods"
    )
    parser.add_argument("--pki-dir", help="TLS: the directory 'sluicegate-controller init' made (DATA_DIR/pki)")
    parser.add_argument("--token-listen", help="TLS port without client certificates (joins, bearer tokens) HOST:PORT")
    parser.add_argument("--ready-file", help="write {grpc, health, pid} JSON here once serving")
    parser.add_argument("--log-level", default=os.environ.get("SLUICEGATE_LOG_LEVEL", "INFO"))
    ns = parser.parse_args(args)
    logging.basicConfig(
        level=ns.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    # The process's, not serve()'s: in-process users keep their own collector settings.
    HEAP_GC.install()
    try:
        return asyncio.run(_main(ns))
    except (SettingsError, StoreError, PkiError, TokenFileError) as exc:
        log.error("%s", exc)
        return 2
    except BaseExceptionGroup as group:
        log.error("exiting after root task failure(s): %s", group)
        return 1


if __name__ == "__main__":
    sys.exit(main())
