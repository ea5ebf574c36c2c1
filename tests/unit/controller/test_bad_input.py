"""Bad input stays harmless: a reused name with another spec, unencodable messages, a full store."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import grpc
import pytest

from sluicegate.client import Client, ClientError, Document
from sluicegate.controller.errors import InvalidArgument
from sluicegate.controller.service.errors import status_for
from sluicegate.controller.service.workloads import WorkloadsServicer
from sluicegate.controller.store import StoreFull
from sluicegate.manifest.loader import parse_text
from sluicegate.v1 import objects_pb2, workloads_pb2, workloads_pb2_grpc

from .served import Served, serve, workload_body

DEADLINE = 10.0


def versions(served: Served) -> dict[str, int]:
    return {o.name: o.resource_version for o in served.store.load() if o.kind == "Workload"}


async def test_a_name_reused_with_another_spec_is_already_exists_and_the_same_spec_is_idempotent(served: Served) -> None:
    async with Client(served.address) as client:
        async with asyncio.timeout(DEADLINE):
            _, created = await client.create_workload(Document(workload_body("w", "1"), "w.json"))
            assert created is True
            before = versions(served)
            wl, created = await client.create_workload(Document(workload_body("w", "1"), "again.json"))
            assert created is False and wl["metadata"]["name"] == "w"
            with pytest.raises(ClientError) as info:
                await client.create_workload(Document(workload_body("w", "2"), "other.json"))
    assert info.value.code is grpc.StatusCode.ALREADY_EXISTS
    assert info.value.message.startswith("Workload default/w already exists with a different spec (spec.podSets differs)")
    assert "\n" not in info.value.message  # sluicectl prints it as one `error:` line
    assert versions(served) == before


async def test_already_exists_in_create_and_create_many_changes_nothing(served: Served) -> None:
    relabelled = json.loads(workload_body("w", "1"))
    relabelled["metadata"]["labels"] = {"team": "b"}  # metadata, not spec: still the same workload
    other_queue = json.loads(workload_body("w", "1"))
    other_queue["spec"]["queueName"] = "elsewhere"
    async with grpc.aio.insecure_channel(served.address) as channel:
        stub = workloads_pb2_grpc.WorkloadsStub(channel)

        def item(body: str) -> workloads_pb2.CreateWorkloadRequest:
            return workloads_pb2.CreateWorkloadRequest(document=objects_pb2.Document(body=body.encode()))

        await stub.Create(item(workload_body("w", "1")), timeout=DEADLINE)
        before = versions(served)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.Create(item(json.dumps(other_queue)), timeout=DEADLINE)
        assert info.value.code() is grpc.StatusCode.ALREADY_EXISTS
        assert "Workload default/w already exists with a different spec (spec.queueName differs)" in (info.value.details() or "")
        resp = await stub.CreateMany(workloads_pb2.CreateWorkloadsRequest(items=[
            item(json.dumps(relabelled)), item(workload_body("w", "3")), item(workload_body("x", "1")),
            item(workload_body("x", "2"))]), timeout=DEADLINE)
    codes = [grpc.StatusCode.OK.value[0] if r.code == 0 else r.code for r in resp.results]
    assert codes == [0, grpc.StatusCode.ALREADY_EXISTS.value[0], 0, grpc.StatusCode.ALREADY_EXISTS.value[0]]
    assert resp.results[0].response.created is False and resp.results[2].response.created is True
    after = versions(served)
    assert after["w"] == before["w"] and set(after) == {"w", "x"}


def test_a_message_that_utf8_cannot_encode_is_sent_with_escapes() -> None:
    code, message = status_for(InvalidArgument("metadata.labels[\udc80]", "bad value \ud800"))
    assert code is grpc.StatusCode.INVALID_ARGUMENT
    assert message == "metadata.labels[\\udc80]: bad value \\ud800"
    message.encode("utf-8")
    code, message = status_for(StoreFull("store x: database or disk is full (SQLITE_FULL)"))
    assert code is grpc.StatusCode.RESOURCE_EXHAUSTED and "SQLITE_FULL" in message
    _, long = status_for(InvalidArgument("f", "x" * 100_000))
    assert len(long) < 20_000


class Surrogates(WorkloadsServicer):
    """A servicer whose failures quote input that UTF-8 cannot encode (as decoded JSON can hold)."""

    def _create_many(self, request: workloads_pb2.CreateWorkloadsRequest, *_: object) -> workloads_pb2.CreateWorkloadsResponse:
        raise InvalidArgument("metadata.name", "got \"\ud800\"")


async def test_a_status_quoting_a_lone_surrogate_still_reaches_the_client(tmp_path: Path) -> None:
    async with serve(tmp_path, workloads=Surrogates) as served:
        async with grpc.aio.insecure_channel(served.address) as channel:
            stub = workloads_pb2_grpc.WorkloadsStub(channel)
            req = workloads_pb2.CreateWorkloadsRequest(items=[workloads_pb2.CreateWorkloadRequest()])
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await stub.CreateMany(req, timeout=DEADLINE)
            assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT
            assert info.value.details() == 'metadata.name: got "\\ud800"'
            (resp,) = [r async for r in stub.CreateStream(iter([req]), timeout=DEADLINE)]
            assert resp.results[0].message == 'metadata.name: got "\\ud800"'


async def test_a_document_holding_a_lone_surrogate_is_refused_naming_the_field(served: Served) -> None:
    body = workload_body("w", "1").replace('"true"', '"\\ud800"')
    async with grpc.aio.insecure_channel(served.address) as channel:
        stub = workloads_pb2_grpc.WorkloadsStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.Create(workloads_pb2.CreateWorkloadRequest(
                document=objects_pb2.Document(body=body.encode())), timeout=DEADLINE)
    assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "spec.podSets[0].template.spec.containers[0].command[0]: contains a lone surrogate" in (info.value.details() or "")
    assert versions(served) == {}


@pytest.mark.parametrize(("errorcode", "errorname", "text", "status"), [
    (13, "SQLITE_FULL", "database or disk is full", grpc.StatusCode.RESOURCE_EXHAUSTED),
    (8, "SQLITE_READONLY", "attempt to write a readonly database", grpc.StatusCode.UNAVAILABLE),
    (10, "SQLITE_IOERR", "disk I/O error", grpc.StatusCode.UNAVAILABLE),
])
async def test_a_store_that_cannot_write_refuses_keeps_serving_reads_and_recovers(
    served: Served, errorcode: int, errorname: str, text: str, status: grpc.StatusCode
) -> None:
    m, store = served.manager, served.store
    m.create_workload(parse_text(workload_body("kept", "1"), "kept.json", fmt="json")[0])

    class Full:
        """The store's connection on a disk that fails every write, as SQLite reports it."""

        def __init__(self, db: sqlite3.Connection) -> None:
            self.db, self.full = db, True

        @property
        def in_transaction(self) -> bool:
            return self.db.in_transaction

        def execute(self, sql: str, *args: object) -> sqlite3.Cursor:
            if self.full and not sql.startswith("SELECT") and sql not in ("ROLLBACK", "BEGIN IMMEDIATE"):
                err = sqlite3.OperationalError(text)
                err.sqlite_errorcode = errorcode  # type: ignore[attr-defined]
                err.sqlite_errorname = errorname  # type: ignore[attr-defined]
                raise err
            return self.db.execute(sql, *args)

        def executemany(self, sql: str, rows: list[tuple[object, ...]]) -> sqlite3.Cursor:
            return self.execute(sql) if self.full else self.db.executemany(sql, rows)

        def close(self) -> None:
            self.db.close()

    disk = Full(store._db)
    store._db = disk  # type: ignore[assignment]
    async with Client(served.address) as client:
        async with asyncio.timeout(DEADLINE):
            with pytest.raises(ClientError) as info:
                await client.create_workload(Document(workload_body("lost", "1"), "lost.json"))
            assert info.value.code is status
            assert f"{text} ({errorname})" in info.value.message
            assert "rollback" not in info.value.message
            ready, reason = m.readiness()
            assert not ready and errorname in reason
            # Reads are served; nothing was acknowledged, so nothing is there.
            assert [w["metadata"]["name"] for w in await client.list_workloads()] == ["kept"]
            m.tick()  # the timers' probe: still full, still degraded
            assert not m.readiness()[0]
            disk.full = False
            m.tick()  # space came back: the probe's write succeeds
            assert m.readiness()[0]
            _, created = await client.create_workload(Document(workload_body("lost", "1"), "lost.json"))
            assert created is True
    assert set(versions(served)) == {"kept", "lost"}

