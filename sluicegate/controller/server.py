"""sluicegate-controller: wiring, lifecycle, signals, health and metrics.

Start-up: open the store, rebuild the cache from it, bind gRPC and the
health port, then tell systemd we are ready.  Shutdown (SIGTERM/SIGINT):
mark not ready, stop accepting, let in-flight RPCs finish within the grace
period, cancel the scheduler, close the store.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import socket
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from sluicegate.common.health import HealthServer
from sluicegate.common.heapgc import HEAP_GC
from sluicegate.common.netaddr import join_hostport
from sluicegate.common.sdnotify import Notifier, watchdog_interval, watchdog_task
from sluicegate.common.streams import STREAM_WINDOW_OPTIONS
from sluicegate.common.supervise import (
    DEFAULT_HARD_DEADLINE,
    arm_hard_deadline,
    new_stop_future,
    stop_on_signals,
    supervise,
)
from sluicegate.controller import memtrace
from sluicegate.controller.dashboard import Dashboard, DashboardError, serving_context, start_dashboard
from sluicegate.controller.follower import NotLeaderHandler
from sluicegate.controller.initcmd import COMMANDS
from sluicegate.controller.initcmd import main as init_main
from sluicegate.controller.leader import Elector, LeaseView
from sluicegate.controller.manager import Manager
from sluicegate.controller.metrics import ControllerMetrics
from sluicegate.controller.mirror import Mirror
from sluicegate.controller.service.admin import AdminServicer
from sluicegate.controller.service.agents import AgentLinkServicer, NodesServicer, add_agent_link_servicer
from sluicegate.controller.service.gate import Gate, gate_from_settings, install_sighup
from sluicegate.controller.service.security import SecurityServicer
from sluicegate.controller.service.workloads import WorkloadsServicer, add_workloads_servicer
from sluicegate.controller.settings import ControllerSettings, SettingsError, load_settings, split_hostport
from sluicegate.controller.store import Shared, Store, StoreError, open_store
from sluicegate.security.authn import ClusterAuthenticator, TokenFileError
from sluicegate.security.authority import Authority
from sluicegate.security.authority import paths as pki_paths
from sluicegate.security.identity import Authenticator, OpenAuthenticator
from sluicegate.security.pki import PkiError
from sluicegate.v1 import agent_pb2_grpc, objects_pb2_grpc, security_pb2_grpc

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
    target = join_hostport(host, port)
    bound = server.add_secure_port(target, credentials) if credentials else server.add_insecure_port(target)
    if bound == 0:
        raise SettingsError(f"{key}: cannot bind gRPC on {address}")
    return join_hostport(host, bound)


def _advertised(settings: ControllerSettings, grpc_addr: str, token_addr: str) -> str:
    """'API TOKEN' as followers pass it on: where clients and agents reach this controller when it leads."""
    api = settings.advertise_address or _reachable(grpc_addr)
    token = settings.advertise_token_address
    if not token and token_addr:
        token = join_hostport(split_hostport(api, key="advertiseAddress")[0],
                              split_hostport(token_addr, key="tokenListen")[1])
    return f"{api} {token}".strip()


def _reachable(bound: str) -> str:
    """A bound HOST:PORT as others may dial it (a wildcard host becomes this host's name)."""
    host, port = split_hostport(bound, key="listen")
    if host in ("0.0.0.0", "::", ""):
        return join_hostport(socket.getfqdn(), port)
    return bound


class _Controller:
    """One controller process: its ports, credentials and health endpoint, across leader and follower roles.

    With a PostgreSQL store it campaigns for the leader lease: while it
    follows, its ports answer "the leader is there" and it keeps a warm copy
    of the store; when elected it builds a Manager from that copy and serves;
    when it loses the lease it stops acting at once (every agent stream is
    cut, no write can commit under the old epoch) and follows again.  With
    SQLite it leads from the start, as the only controller.
    """

    def __init__(
        self,
        settings: ControllerSettings,
        store: Store,
        *,
        stop: asyncio.Future[str],
        ready_file: str | None,
        clock: Callable[[], float],
    ) -> None:
        self.settings = settings
        self.store = store
        self.stop = stop
        self.ready_file = ready_file
        self.clock = clock
        # The Manager of the term this process leads (None while it follows), and that term's epoch.
        self.manager: Manager | None = None
        self.epoch = 0
        self.elector: Elector | None = None
        self.view: LeaseView | None = None
        # The ports, once bound (port 0 resolved), so that every role binds the same ones.
        self.grpc_addr = settings.listen
        self.token_addr = settings.token_listen if settings.pki_dir else ""
        self.authority: Authority | None = None
        self.authenticator: Authenticator = OpenAuthenticator()
        self.gate: Gate | None = None
        self.notifier = Notifier.from_environment()
        self.announced = False
        # Process-wide: counters and histograms outlive a term; gauges read the current Manager.
        self.metrics = ControllerMetrics()

    # -------------------------------------------------------------- run

    async def run(self) -> str:
        s = self.settings
        if s.pki_dir:
            self.authority = Authority(Path(s.pki_dir), state=self.store)
            self.authenticator = ClusterAuthenticator(is_revoked=self._is_revoked, token_file=s.token_file)
        elif s.insecure:
            log.warning(
                "insecure: true: serving plaintext gRPC on %s with no authentication; anyone who can reach "
                "it can run commands on every node",
                s.listen,
            )
        else:
            log.info("serving plaintext gRPC on loopback %s without authentication (set pkiDir for TLS)", s.listen)
        self.gate = gate_from_settings(s, self.authenticator)  # authz + audit; SIGHUP reloads policy and tokens
        undo_sighup = install_sighup(self.gate)
        hhost, hport = split_hostport(s.health_listen, key="healthListen")
        self.health = HealthServer(
            registry=self.metrics.registry,
            readiness=self.readiness,
            host=hhost,
            port=hport,
        )
        await self.health.start()
        self.dashboard: Dashboard | None = None
        try:
            if s.dashboard_listen:
                # One per process, across terms: it reads whichever Manager leads now (none while following).
                self.dashboard = await start_dashboard(
                    listen=s.dashboard_listen, manager=lambda: self.manager, gate=self.gate, insecure=s.insecure,
                    ssl_context=serving_context(s.pki_dir) if s.pki_dir else None, leader=self._leader_address)
            if not isinstance(self.store, Shared):
                return await self._lead(epoch=0, objects=None)
            return await self._campaign(self.store)
        finally:
            if self.dashboard is not None:
                await self.dashboard.stop()
            await self.health.stop()
            undo_sighup()
            self.gate.close()

    def _leader_address(self) -> str | None:
        v = self.view
        return v.address.split()[0] if v is not None and v.holder and v.address else None

    def _is_revoked(self, serial: int) -> bool:
        return self.authority is not None and self.authority.is_revoked(serial)

    def readiness(self) -> tuple[bool, str]:
        if self.manager is not None:
            ready, reason = self.manager.readiness()
            role = f"leader (epoch {self.epoch})" if self.elector is not None else "leader"
            return ready, f"{role}: {reason}"
        if self.elector is None:
            return False, "starting"
        v = self.view
        leader = f"the leader is {v.holder} at {v.address.split()[0] if v.address else '?'} (epoch {v.epoch})" \
            if v is not None and v.holder else "no leader elected yet"
        error = f"; lease: {self.elector.last_error}" if self.elector.last_error else ""
        # A follower is ready: it answers every call with where the leader is.
        return True, f"follower: {leader}{error}"

    # --------------------------------------------------------- follower

    async def _campaign(self, store: Shared) -> str:
        s = self.settings
        loop = asyncio.get_running_loop()
        events: asyncio.Queue[tuple[str, object]] = asyncio.Queue()
        self.elector = Elector(
            lambda application_name: store.lease_connection(application_name),
            address="",  # set once the ports are bound
            timing=s.lease_timing(),
            on_elected=lambda epoch: _post(loop, events, ("elected", epoch)),
            on_lost=lambda reason: _post(loop, events, ("lost", reason)),
            on_observed=lambda view: setattr(self, "view", view),
        )
        mirror = Mirror()
        try:
            while True:
                epoch = await self._follow(store, mirror, events)
                if epoch is None:
                    return _stop_reason(self.stop)
                t0 = time.monotonic()
                try:
                    # The last changes the old leader made, then the Manager from the decoded objects.
                    changed = await asyncio.to_thread(mirror.catch_up, store)
                    store.set_epoch(epoch)
                except StoreError as exc:
                    log.warning("elected (epoch %d) but cannot read the store (%s); following", epoch, exc)
                    with contextlib.suppress(StoreError):
                        store.set_epoch(None)
                    self.elector.resign()
                    continue
                objects = mirror.take()
                log.info("taking over as leader (epoch %d): %d objects warm, %d changed since the last poll, "
                         "caught up in %.3fs", epoch, len(objects), changed, time.monotonic() - t0)
                reason = await self._lead(epoch=epoch, objects=objects, events=events)
                with contextlib.suppress(StoreError):  # unfenced all the same; re-read when we next lead
                    store.set_epoch(None)
                if self.stop.done():
                    return reason
                log.warning("stepped down (%s); following", reason)
                # The elector may still think it leads (we gave up for a store reason): make it campaign anew.
                self.elector.resign()
        finally:
            self.elector.stop(release=True)

    async def _follow(
        self, store: Shared, mirror: Mirror, events: asyncio.Queue[tuple[str, object]]
    ) -> int | None:
        """Serve redirects and keep the mirror warm until elected (the epoch) or told to stop (None)."""
        assert self.elector is not None
        self.metrics.attach(None)
        self.metrics.set_role("follower", self.epoch)
        server = grpc.aio.server()
        grpc_health = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(grpc_health, server)
        server.add_generic_rpc_handlers((NotLeaderHandler(lambda: self.view),))
        token_server: grpc.aio.Server | None = None
        self._bind_all(server)
        if self.settings.pki_dir:
            token_server = grpc.aio.server()
            token_server.add_generic_rpc_handlers((NotLeaderHandler(lambda: self.view),))
            self._bind_token(token_server)
        await server.start()
        if token_server is not None:
            await token_server.start()
        await grpc_health.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
        if self.elector.address == "":
            self.elector.address = _advertised(self.settings, self.grpc_addr, self.token_addr)
            self.elector.start()
        self._announce()
        log.info("following: campaigning for the leader lease as %s (%s)", self.elector.holder, self.elector.address)
        try:
            while True:
                next_event: asyncio.Future[tuple[str, object]] = asyncio.ensure_future(events.get())
                waiting: set[asyncio.Future[Any]] = {next_event, self.stop}
                done, _ = await asyncio.wait(
                    waiting, timeout=self.settings.mirror_interval, return_when=asyncio.FIRST_COMPLETED
                )
                if self.stop.done():
                    next_event.cancel()
                    return None
                if next_event in done:
                    kind, value = next_event.result()
                    if kind == "elected":
                        assert isinstance(value, int)
                        return value
                    continue  # a late "lost" from the term that just ended
                next_event.cancel()
                try:
                    await asyncio.to_thread(mirror.catch_up, store)
                except StoreError as exc:
                    log.warning("cannot bring the warm copy of the store up to date: %s", exc)
        finally:
            stops = [server.stop(0)]
            if token_server is not None:
                stops.append(token_server.stop(0))
            await asyncio.gather(*stops)

    # ----------------------------------------------------------- leader

    def _bind_all(self, server: grpc.aio.Server) -> None:
        s = self.settings
        creds = server_credentials(Path(s.pki_dir), require_client_cert=True) if s.pki_dir else None
        self.grpc_addr = _bind(server, self.grpc_addr, "listen", creds)

    def _bind_token(self, server: grpc.aio.Server) -> None:
        s = self.settings
        self.token_addr = _bind(
            server, self.token_addr, "tokenListen", server_credentials(Path(s.pki_dir), require_client_cert=False)
        )

    def _announce(self) -> None:
        """Once per process, when the ports are bound: the ready file and systemd's READY=1."""
        if self.announced:
            return
        self.announced = True
        if self.ready_file:
            tmp = f"{self.ready_file}.tmp"
            Path(tmp).write_text(
                json.dumps(
                    {
                        "grpc": self.grpc_addr,
                        "health": "{}:{}".format(*self.health.address),
                        "pid": os.getpid(),
                        "token": self.token_addr,
                        "caCertHash": self.authority.ca_hash if self.authority else "",
                        "dashboard": self.dashboard.url if self.dashboard is not None else "",
                    }
                )
            )
            os.replace(tmp, self.ready_file)
        self.notifier.ready(f"serving gRPC on {self.grpc_addr}")

    async def _lead(
        self,
        *,
        epoch: int,
        objects: list[tuple[object, int]] | None,
        events: asyncio.Queue[tuple[str, object]] | None = None,
    ) -> str:
        """Serve as the leader until told to stop, or (under election) until the lease is lost."""
        s = self.settings
        manager = Manager(
            self.store,
            clock=self.clock,
            config=s.config,
            placement=s.placement,
            node_timeout=s.node_heartbeat_timeout,
            fencing_grace=s.fencing_grace,
            self_fencing=s.self_fencing,
            monotonic=time.monotonic if self.clock is time.time else None,
            finished_retention=s.finished_retention,
            pod_security=s.pod_security,
            observer=self.metrics,
        )
        manager.commit.watchers.backlog = s.watch_backlog
        t0 = time.monotonic()
        loaded = manager.load(objects)
        log.info("loaded %d objects %s in %.2fs", loaded, "from the warm copy" if objects is not None else
                 f"from {s.store}", time.monotonic() - t0)
        if self.authority is not None and epoch:
            # Tokens and revocations as the store has them now (another controller may have changed them).
            self.authority = Authority(Path(s.pki_dir), state=self.store)
        gate = self.gate
        assert gate is not None
        # The phase ends on stop, or when the lease is lost (under election).
        phase: asyncio.Future[str] = asyncio.get_running_loop().create_future()

        def step_down(reason: str) -> None:
            # Synchronous, so nothing queued for an agent leaves after this.
            if not phase.done():
                manager.fleet.end_all_streams(f"this controller no longer leads: {reason}")
                manager.halt()
                phase.set_result(f"lost the lead: {reason}")

        if epoch:
            manager.commit.on_lost_writes = lambda exc: step_down(f"store: {exc}")

        def build(*, agents: bool) -> tuple[grpc.aio.Server, health.aio.HealthServicer]:
            srv = grpc.aio.server(
                options=[("grpc.max_receive_message_length", 64 * 1024 * 1024), *STREAM_WINDOW_OPTIONS,
                         # A peer that vanished (no FIN: a lost node, a cut link) is found by
                         # an unanswered ping, so its calls (a watch ended while its reader
                         # read nothing waits to send its status) do not wait on TCP for ever.
                         ("grpc.keepalive_time_ms", 60_000), ("grpc.keepalive_timeout_ms", 20_000)]
            )
            objects_pb2_grpc.add_AdminServicer_to_server(AdminServicer(manager, gate), srv)
            add_workloads_servicer(WorkloadsServicer(manager, gate), srv)
            if agents:
                add_agent_link_servicer(
                    AgentLinkServicer(
                        manager,
                        heartbeat_interval=s.agent_heartbeat_interval,
                        authenticator=self.authenticator,
                        epoch=epoch,
                    ),
                    srv,
                )
            agent_pb2_grpc.add_NodesServicer_to_server(NodesServicer(manager, gate), srv)
            security_pb2_grpc.add_SecurityServicer_to_server(
                SecurityServicer(
                    self.authority,
                    gate,
                    node_connected=manager.fleet.node_connected,
                    node_revoked=manager.fleet.node_revoked,
                    serial_of=getattr(self.authenticator, "serial_of", None),
                ),
                srv,
            )
            hs = health.aio.HealthServicer()
            health_pb2_grpc.add_HealthServicer_to_server(hs, srv)
            return srv, hs

        server, grpc_health = build(agents=True)
        self._bind_all(server)
        token_server: grpc.aio.Server | None = None
        if s.pki_dir:
            token_server, token_health = build(agents=False)
            self._bind_token(token_server)
            await token_server.start()
            await token_health.set("", health_pb2.HealthCheckResponse.SERVING)
            log.info("serving TLS for joining agents and bearer tokens on %s", self.token_addr)
        await server.start()
        await grpc_health.set("", health_pb2.HealthCheckResponse.SERVING)
        log.info("serving gRPC%s on %s", " (mutual TLS)" if s.pki_dir else "", self.grpc_addr)
        self.manager = manager
        self.epoch = epoch
        self.metrics.attach(manager)
        self.metrics.set_role("leader" if self.elector is not None else "standalone", epoch)
        self._announce()

        async def grpc_task() -> None:
            try:
                await server.wait_for_termination()
            finally:
                # Losing the lead stops at once; a shutdown lets in-flight calls finish.
                grace = 0 if phase.done() and not self.stop.done() else s.grpc_grace
                await grpc_health.enter_graceful_shutdown()
                stops = [server.stop(grace)]
                if token_server is not None:
                    stops.append(token_server.stop(grace))
                await asyncio.gather(*stops)

        def stopping(reason: str) -> None:
            manager.stop()
            if self.stop.done() or not epoch:
                self.health.mark_stopping(reason)
                self.notifier.stopping(reason)
                arm_hard_deadline(DEFAULT_HARD_DEADLINE)

        async def timers() -> None:
            # Heartbeats are checked at a quarter of the timeout (a lost node
            # is noticed at most 25% late) and at least every second, which
            # also bounds how late a backoff or a pods-ready timeout fires.
            period = min(1.0, max(0.05, s.node_heartbeat_timeout / 4))
            while True:
                await asyncio.sleep(period)
                manager.tick()

        def forward_stop(stop: asyncio.Future[str]) -> None:
            if not phase.done():
                phase.set_result(_stop_reason(stop))

        self.stop.add_done_callback(forward_stop)
        async def lease_guard() -> None:
            # The elector reports a lost lease; past the renew deadline we stop even if it cannot say so.
            assert self.elector is not None and events is not None
            while True:
                try:
                    kind, value = await asyncio.wait_for(events.get(), timeout=0.2)
                except TimeoutError:
                    kind, value = "", None
                if kind == "lost":
                    step_down(str(value))
                elif not self.elector.leading():
                    step_down(f"the lease was not renewed within {s.lease_renew_deadline:g}s")
                if phase.done():
                    await asyncio.Event().wait()  # supervise() cancels us with the rest

        tasks = {
            "grpc": grpc_task(),
            "scheduler": manager.run_scheduler(),
            "timers": timers(),
            "gc": HEAP_GC.rescans(),
        }
        if epoch:
            tasks["lease"] = lease_guard()
        period = watchdog_interval()
        if period is not None:
            tasks["watchdog"] = watchdog_task(self.notifier, period=period, healthy=lambda: True)
        try:
            return await supervise(tasks, stop=phase, on_stopping=stopping)
        finally:
            self.stop.remove_done_callback(forward_stop)
            self.manager = None
            self.metrics.attach(None)


def _post(loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[tuple[str, object]], item: tuple[str, object]) -> None:
    """From the elector's thread into the event loop."""
    loop.call_soon_threadsafe(queue.put_nowait, item)


def _stop_reason(stop: asyncio.Future[str]) -> str:
    return stop.result() if stop.done() and not stop.cancelled() and stop.exception() is None else "stopped"


async def serve(
    settings: ControllerSettings,
    *,
    stop: asyncio.Future[str],
    ready_file: str | None = None,
    clock: Callable[[], float] = time.time,
) -> str:
    store = open_store(
        settings.store, synchronous=settings.store_synchronous, password_file=settings.store_password_file
    )
    try:
        return await _Controller(settings, store, stop=stop, ready_file=ready_file, clock=clock).run()
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
            "dashboard_listen": ns.dashboard_listen,
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
    parser.add_argument("--config", help="settings YAML (see deploy/settings/controller.yaml)")
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
    parser.add_argument("--dashboard-listen", help="web dashboard HOST:PORT ('' turns it off)")
    parser.add_argument("--ready-file", help="write {grpc, health, pid} JSON here once serving")
    parser.add_argument("--log-level", default=os.environ.get("SLUICEGATE_LOG_LEVEL", "INFO"))
    ns = parser.parse_args(args)
    logging.basicConfig(
        level=ns.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    # The process's, not serve()'s: in-process users keep their own collector settings.
    HEAP_GC.install()
    memtrace.start_from_environment()
    try:
        return asyncio.run(_main(ns))
    except (SettingsError, StoreError, PkiError, TokenFileError, DashboardError) as exc:
        log.error("%s", exc)
        return 2
    except BaseExceptionGroup as group:
        log.error("exiting after root task failure(s): %s", group)
        return 1


if __name__ == "__main__":
    sys.exit(main())
