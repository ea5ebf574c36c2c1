"""One encoding per write: the store, watch events and replies carry the same bytes.

A real Manager on a real SQLite store behind a real gRPC server on 127.0.0.1,
driven with the client library.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import grpc
import pytest

from sluicegate.client import Client, ClientError, Document
from sluicegate.manifest.loader import parse_text
from sluicegate.v1 import workloads_pb2, workloads_pb2_grpc

from .served import Served, stored, workload_body

WATCH_DEADLINE = 10.0


async def next_events(stream: Any, count: int) -> list[workloads_pb2.WorkloadEvent]:
    out: list[workloads_pb2.WorkloadEvent] = []
    async with asyncio.timeout(WATCH_DEADLINE):
        while len(out) < count:
            out.append(await stream.read())
    return out


async def events_until(stream: Any, last: Callable[[workloads_pb2.WorkloadEvent], bool]) -> list[workloads_pb2.WorkloadEvent]:
    out: list[workloads_pb2.WorkloadEvent] = []
    async with asyncio.timeout(WATCH_DEADLINE):
        while not out or not last(out[-1]):
            out.append(await stream.read())
    return out


async def test_create_reply_watch_event_and_get_carry_what_the_store_holds(served: Served) -> None:
    m = served.manager
    async with Client(served.address) as client:
        channel = grpc.aio.insecure_channel(served.address)
        watch = workloads_pb2_grpc.WorkloadsStub(channel).Watch(
            workloads_pb2.WatchWorkloadsRequest(namespace="default", send_initial=True))
        try:
            # Whether the watch registers before or after the creation, "a" arrives once as ADDED.
            created, was_new = await client.create_workload(Document(workload_body("a", "1"), "test"))
            (added,) = await next_events(watch, 1)
            stats = m.schedule_once()
            (modified,) = await next_events(watch, 1)
        finally:
            watch.cancel()
            await channel.close()
        got = await client.get_workload("a")
        via_admin = await client.get("workload", "a", "default")

    assert (was_new, stats.admitted) == (True, 1)
    doc, version = stored(served.store, "Workload", "default", "a")
    assert doc["status"]["admission"]["clusterQueue"] == "cq"
    assert got == via_admin == doc
    assert json.loads(modified.workload.json) == doc
    assert (modified.type, modified.workload.resource_version) == (workloads_pb2.WorkloadEvent.MODIFIED, version)
    # The creation: the reply and the ADDED event are the workload as first stored.
    assert created == json.loads(added.workload.json)
    assert created["metadata"]["resourceVersion"] == str(added.workload.resource_version)
    assert added.workload.resource_version < version
    assert "status" not in created


async def test_a_lagging_watcher_gets_each_event_with_its_own_write_and_version(served: Served) -> None:
    m = served.manager
    async with Client(served.address) as client:
        channel = grpc.aio.insecure_channel(served.address)
        watch = workloads_pb2_grpc.WorkloadsStub(channel).Watch(
            workloads_pb2.WatchWorkloadsRequest(namespace="default", send_initial=True))
        try:
            # Once warm-up arrived (from the initial list or as an event) the
            # watcher is registered.  Then b is written twice with no await in
            # between, so the stream sends both events only after the second write.
            await client.create_workload(Document(workload_body("warm-up", "100"), "test"))
            await next_events(watch, 1)
            m.create_workload(parse_text(workload_body("b", "1"), "test", fmt="json")[0])
            first_version = m.versions[("Workload", "default", "b")]
            for _ in range(5):  # warm-up never fits; b is admitted by the cycle after it
                if m.schedule_once().admitted:
                    break
            events = await events_until(
                watch, lambda e: e.workload.name == "b" and e.type == workloads_pb2.WorkloadEvent.MODIFIED)
        finally:
            watch.cancel()
            await channel.close()

    # The cycles also wrote warm-up's pending reason: keep b's events only.
    of_b = [e for e in events if e.workload.name == "b"]
    final_version = m.versions[("Workload", "default", "b")]
    assert [(e.type, e.workload.resource_version) for e in of_b] == [
        (workloads_pb2.WorkloadEvent.ADDED, first_version),
        (workloads_pb2.WorkloadEvent.MODIFIED, final_version),
    ]
    added = json.loads(of_b[0].workload.json)
    assert (added["metadata"]["resourceVersion"], "status" in added) == (str(first_version), False)
    doc, _ = stored(served.store, "Workload", "default", "b")
    assert json.loads(of_b[1].workload.json) == doc


async def test_queue_replies_still_carry_live_status(served: Served) -> None:
    async with Client(served.address) as client:
        await client.create_workload(Document(workload_body("c", "1"), "test"))
        served.manager.schedule_once()
        cq = await client.get("clusterqueue", "cq")
    assert (cq["status"]["reservingWorkloads"], cq["metadata"]["resourceVersion"]) == (
        1, str(served.manager.versions[("ClusterQueue", "", "cq")]))


async def watched_after_burst(served: Served, max_batch: int, burst: int) -> list[workloads_pb2.WorkloadEvent]:
    """The messages a raw watch receives for ``burst`` creations written with no await in between."""
    m = served.manager
    channel = grpc.aio.insecure_channel(served.address)
    watch = workloads_pb2_grpc.WorkloadsStub(channel).Watch(
        workloads_pb2.WatchWorkloadsRequest(namespace="default", send_initial=True, max_batch=max_batch))
    try:
        async with Client(served.address) as client:
            await client.create_workload(Document(workload_body("warm-up", "100"), "test"))
        await next_events(watch, 1)  # registered now (see above)
        for i in range(burst):
            m.create_workload(parse_text(workload_body(f"w{i:02d}", "1"), "test", fmt="json")[0])
        messages: list[workloads_pb2.WorkloadEvent] = []
        async with asyncio.timeout(WATCH_DEADLINE):
            while sum(1 + len(msg.more) for msg in messages) < burst:
                messages.append(await watch.read())
        return messages
    finally:
        watch.cancel()
        await channel.close()


@pytest.mark.parametrize(
    ("max_batch", "sizes"),
    [
        pytest.param(0, [1] * 20, id="unset-one-per-message"),
        pytest.param(1, [1] * 20, id="one"),
        pytest.param(8, [8, 8, 4], id="eight"),
        pytest.param(5000, [20], id="capped-by-what-is-waiting"),
    ],
)
async def test_waiting_watch_events_share_a_message_up_to_the_requested_batch(
    served: Served, max_batch: int, sizes: list[int]
) -> None:
    messages = await watched_after_burst(served, max_batch, 20)
    assert [1 + len(msg.more) for msg in messages] == sizes
    flat = [e for msg in messages for e in (msg, *msg.more)]
    assert [(e.type, e.workload.name) for e in flat] == [(workloads_pb2.WorkloadEvent.ADDED, f"w{i:02d}") for i in range(20)]
    assert all(not e.more for msg in messages for e in msg.more)
    doc, version = stored(served.store, "Workload", "default", "w07")
    assert (json.loads(flat[7].workload.json), flat[7].workload.resource_version) == (doc, version)


async def test_the_client_library_yields_batched_events_one_by_one_in_order(served: Served) -> None:
    m = served.manager
    seen: list[tuple[str, str]] = []
    async with Client(served.address) as client:
        await client.create_workload(Document(workload_body("warm-up", "100"), "test"))
        events = client.watch_workloads(namespace="default", send_initial=True)
        try:
            async with asyncio.timeout(WATCH_DEADLINE):
                first = await anext(events)
                for i in range(30):
                    m.create_workload(parse_text(workload_body(f"w{i:02d}", "1"), "test", fmt="json")[0])
                while len(seen) < 30:
                    kind, wl = await anext(events)
                    seen.append((kind, wl["metadata"]["name"]))
        finally:
            await events.aclose()
    assert (first[0], first[1]["metadata"]["name"]) == ("ADDED", "warm-up")
    assert seen == [("ADDED", f"w{i:02d}") for i in range(30)]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param('{"apiVersion": "sluicegate.io/v1beta2", "kind": "Workload", "kind": "Workload"}',
                     "gen.json: could not parse JSON: found the key 'kind' twice; each field may appear only once",
                     id="json-duplicate-key"),
        pytest.param('{\n  "kind": "Workload",\n  "metadata": {"name": "a",}\n}',
                     "gen.json (line 3): could not parse JSON: Expecting property name enclosed in double quotes",
                     id="json-syntax-with-line"),
        pytest.param("kind: Workload\nkind: Workload\n",
                     "gen.json (line 2): could not parse YAML: found the key 'kind' twice",
                     id="yaml-duplicate-key"),
        pytest.param(json.dumps({"apiVersion": "sluicegate.io/v1beta2", "kind": "Workload",
                                 "metadata": {"name": "a", "namespace": "default"},
                                 "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": -1}]}}),
                     "spec.podSets[0].count: must be non-negative, got -1",
                     id="invalid-field"),
    ],
)
async def test_a_document_that_does_not_parse_or_validate_is_an_invalid_argument_naming_where(
    served: Served, body: str, message: str
) -> None:
    async with Client(served.address) as client:
        with pytest.raises(ClientError) as info:
            await client.create_workload(Document(body, "gen.json"))
    assert info.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert message in info.value.message
    assert [o for o in served.store.load() if o.kind == "Workload"] == []


async def test_a_new_watch_lists_the_state_when_it_started_though_it_encodes_each_batch_later(served: Served) -> None:
    """The initial list is taken when the watch starts and encoded a batch at a time as it goes out
    (a re-list of 50,000 workloads must not hold all their JSON at once): a workload written after
    the start still shows, in the list, as it was then, and its change follows as MODIFIED (as a
    Kubernetes watch with its initial events lists, then streams from that point)."""
    m = served.manager
    for i in range(5):
        m.create_workload(parse_text(workload_body(f"w{i}", "100"), "test", fmt="json")[0])
    listed_version = m.versions[("Workload", "default", "w4")]
    batches = m.watch_batches("default", "", True, max_batch=2)
    try:
        first = await batches.__anext__()
        assert [e.workload.name for e in first] == ["w0", "w1"]
        m.set_active("default", "w4", False)  # written before w4's batch of the list is encoded
        events = list(first)
        for _ in range(10):
            if any(e.type == "MODIFIED" for e in events):
                break
            events.extend(await asyncio.wait_for(batches.__anext__(), 5.0))
    finally:
        await batches.aclose()
    of_w4 = [(e.type, e.resource_version, json.loads(e.encoded.body)["spec"]["active"])
             for e in events if e.workload.name == "w4"]
    assert of_w4 == [("ADDED", listed_version, True), ("MODIFIED", m.versions[("Workload", "default", "w4")], False)]
