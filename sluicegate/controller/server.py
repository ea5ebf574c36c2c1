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

from sluicegate.common.heapgc import HEAP_GC
from sluicegate.common.health import HealthServer
from sluicegate.common.metrics import Registry
from sluicegate.common.sdnotify import Notifier, watchdog_interval, watchdog_task
from sluicegate.common.supervise import DEFAULT_HARD_DEADLINE, arm_hard_deadline, new_stop_future, stop_on_signals, supervise
from sluicegate.controller.manager import Manager
from sluicegate.controller.service.admin import AdminServicer
from sluicegate.controller.service.agents import AgentLinkServicer, NodesServicer
from sluicegate.controller.service.workloads import WorkloadsServicer
from sluicegate.controller.settings import ControllerSettings, SettingsError, load_settings, split_hostport
from sluicegate.common.streams import STREAM_WINDOW_OPTIONS
from sluicegate.controller.store import StoreError, open_store
from sluicegate.v1 import agent_pb2_grpc, objects_pb2_grpc, workloads_pb2_grpc

log = logging.getLogger("sluicegate.controller")


def controller_metrics(manager: Manager) -> Registry:
    reg = Registry()
    cache = manager.cache

    def pending() -> list[tuple[tuple[str, ...], float]]:
        return [((cq,), float(cache.queues.pending_count(cq))) for cq in sorted(cache.cluster_queues)]

    def reserving() -> list[tuple[tuple[str, ...], float]]:
        return [((cq,), float(len(cache.admitted.get(cq, {})))) for cq in sorted(cache.cluster_queues)]

    reg.callback_gauge("sluicegate_pending_workloads", "Workloads waiting in each ClusterQueue.",
                       collect=pending, labelnames=("cluster_queue",))
    reg.callback_gauge("sluicegate_reserving_workloads", "Workloads holding quota in each ClusterQueue.",
                       collect=reserving, labelnames=("cluster_queue",))
    reg.callback_gauge("sluicegate_scheduling_cycles", "Scheduling cycles run since start.",
                       collect=lambda: [((), float(manager.cycle))])
    reg.callback_gauge("sluicegate_admission_attempts", "Scheduling cycles since start, by result: success when "
                       "the cycle admitted a workload, inadmissible otherwise.",
                       collect=lambda: [(("success",), float(manager.cycles_admitting)),
                                        (("inadmissible",), float(manager.cycle - manager.cycles_admitting))],
                       labelnames=("result",))
    reg.callback_gauge("sluicegate_workloads", "Workloads known to the controller.",
                       collect=lambda: [((), float(len(cache.workloads)))])
    reg.callback_gauge("sluicegate_gc_full_collections", "Full garbage collections since start (see common/heapgc.py).",
                       collect=lambda: [((), float(HEAP_GC.full_collections))])
    reg.callback_gauge("sluicegate_gc_full_collection_seconds", "Seconds spent in full garbage collections since start.",
                       collect=lambda: [((), HEAP_GC.full_seconds)])
    return reg


async def serve(
    settings: ControllerSettings,
    *,
    stop: asyncio.Future[str],
    ready_file: str | None = None,
    clock: Callable[[], float] = time.time,
) -> str:
    store = open_store(settings.store, synchronous=settings.store_synchronous)
    try:
        manager = Manager(store, clock=clock, config=settings.config, placement=settings.placement,
                          node_timeout=settings.node_heartbeat_timeout,
                          finished_retention=settings.finished_retention)
        t0 = time.monotonic()
        loaded = manager.load()
        log.info("loaded %d objects from %s in %.2fs", loaded, settings.store, time.monotonic() - t0)

        server = grpc.aio.server(options=[("grpc.max_receive_message_length", 64 * 1024 * 1024), *STREAM_WINDOW_OPTIONS])
        objects_pb2_grpc.add_AdminServicer_to_server(AdminServicer(manager), server)
        workloads_pb2_grpc.add_WorkloadsServicer_to_server(WorkloadsServicer(manager), server)
        agent_pb2_grpc.add_AgentLinkServicer_to_server(
            AgentLinkServicer(manager, heartbeat_interval=settings.agent_heartbeat_interval), server)
        agent_pb2_grpc.add_NodesServicer_to_server(NodesServicer(manager), server)
        grpc_health = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(grpc_health, server)
        host, port = split_hostport(settings.listen, key="listen")
        bound = server.add_insecure_port(f"{host}:{port}" if ":" not in host else f"[{host}]:{port}")
        if bound == 0:
            raise SettingsError(f"listen: cannot bind gRPC on {settings.listen}")
        await server.start()
        await grpc_health.set("", health_pb2.HealthCheckResponse.SERVING)
        grpc_addr = f"{host}:{bound}"
        log.info("serving gRPC on %s", grpc_addr)

        hhost, hport = split_hostport(settings.health_listen, key="healthListen")
        health_server = HealthServer(
            registry=controller_metrics(manager),
            readiness=manager.readiness,
            host=hhost,
            port=hport,
        )
        await health_server.start()
        try:
            notifier = Notifier.from_environment()
            if ready_file:
                tmp = f"{ready_file}.tmp"
                Path(tmp).write_text(json.dumps({"grpc": grpc_addr, "health": "%s:%d" % health_server.address, "pid": os.getpid()}))
                os.replace(tmp, ready_file)
            notifier.ready(f"serving gRPC on {grpc_addr}")

            async def grpc_task() -> None:
                try:
                    await server.wait_for_termination()
                finally:
                    await grpc_health.enter_graceful_shutdown()
                    await server.stop(settings.grpc_grace)

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

            tasks = {"grpc": grpc_task(), "scheduler": manager.run_scheduler(), "timers": timers(),
                     "gc": HEAP_GC.rescans()}
            period = watchdog_interval()
            if period is not None:
                tasks["watchdog"] = watchdog_task(notifier, period=period, healthy=lambda: True)
            return await supervise(tasks, stop=stop, on_stopping=stopping)
        finally:
            await health_server.stop()
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
        },
    )
    stop = new_stop_future()
    with stop_on_signals(stop):
        reason = await serve(settings, stop=stop, ready_file=ns.ready_file)
    log.info("stopped: %s", reason)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sluicegate-controller", description="The sluicegate controller.")
    parser.add_argument("--config", help="settings YAML (see deploy/systemd/controller.yaml.example)")
    parser.add_argument("--listen", help="gRPC HOST:PORT (port 0 picks one)")
    parser.add_argument("--health-listen", help="health/metrics HOST:PORT")
    parser.add_argument("--store", help="sqlite path or sqlite:///path")
    parser.add_argument("--configuration", help="Kueue Configuration YAML (fairSharing, waitForPodsReady, ...)")
    parser.add_argument("--node-heartbeat-timeout", type=float, help="seconds without heartbeat before a node is NotReady")
    parser.add_argument("--agent-heartbeat-interval", type=float, help="seconds between agent heartbeats")
    parser.add_argument("--no-placement", action="store_true",
                        help="quota-only mode: admit workloads without binding or running pods")
    parser.add_argument("--ready-file", help="write {grpc, health, pid} JSON here once serving")
    parser.add_argument("--log-level", default=os.environ.get("SLUICEGATE_LOG_LEVEL", "INFO"))
    ns = parser.parse_args(argv)
    logging.basicConfig(level=ns.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    # The process's, not serve()'s: in-process users keep their own collector settings.
    HEAP_GC.install()
    try:
        return asyncio.run(_main(ns))
    except (SettingsError, StoreError) as exc:
        log.error("%s", exc)
        return 2
    except BaseExceptionGroup as group:
        log.error("exiting after root task failure(s): %s", group)
        return 1


if __name__ == "__main__":
    sys.exit(main())
