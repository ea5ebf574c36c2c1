"""A real Manager on a real SQLite store behind a real gRPC server on 127.0.0.1 (port 0)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from sluicegate.controller.manager import Manager
from sluicegate.controller.service.admin import AdminServicer
from sluicegate.controller.service.workloads import WorkloadsServicer, add_workloads_servicer
from sluicegate.controller.store.sqlite import SqliteStore
from sluicegate.manifest.loader import parse_text
from sluicegate.v1 import objects_pb2_grpc
from tests.builders import container_doc, workload_doc

from .test_manager import QUEUES, Clock


def workload_body(name: str, cpu: str) -> str:
    return json.dumps(workload_doc(name, container_doc(name="c", requests={"cpu": cpu}), labels={"team": "a"}))


@dataclass
class Served:
    manager: Manager
    store: SqliteStore
    address: str


@asynccontextmanager
async def serve(tmp_path: Path, *, workloads: type[WorkloadsServicer] = WorkloadsServicer) -> AsyncIterator[Served]:
    store = SqliteStore(str(tmp_path / "store.db"))
    m = Manager(store, clock=Clock(), placement=False)
    m.apply(parse_text(QUEUES % {"strategy": "BestEffortFIFO"}, "queues.yaml"))
    server = grpc.aio.server()
    objects_pb2_grpc.add_AdminServicer_to_server(AdminServicer(m), server)
    add_workloads_servicer(workloads(m), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield Served(m, store, f"127.0.0.1:{port}")
    finally:
        await server.stop(None)
        store.close()


def stored(store: SqliteStore, kind: str, namespace: str, name: str) -> tuple[dict[str, Any], int]:
    """The stored document with the resourceVersion a reader should see in its metadata."""
    (obj,) = [o for o in store.load() if (o.kind, o.namespace, o.name) == (kind, namespace, name)]
    doc = json.loads(obj.body)
    doc["metadata"]["resourceVersion"] = str(obj.resource_version)
    return doc, obj.resource_version
