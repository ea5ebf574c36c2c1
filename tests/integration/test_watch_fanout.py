"""Many watchers of one real controller, over the client library's Watch stream on 127.0.0.1.

Semantics follow the Kubernetes API server's watch cache
(kubernetes/kubernetes staging/src/k8s.io/apiserver/pkg/storage/cacher/
cacher.go and cache_watcher.go): every watcher is served from one shared
buffer of events, in the order they were stored; a watcher that cannot keep
up is ended rather than buffered without bound, and its client lists again
and starts a new watch (client-go's reflector does so on an expired watch).
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from .harness import Controller, wait_for

pytestmark = pytest.mark.integration


def _metric(c: Controller, name: str) -> float:
    with urllib.request.urlopen(f"http://{c.health}/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics")


def _workload(name: str, pad: int = 0) -> str:
    meta: dict[str, object] = {"name": name, "namespace": "default"}
    if pad:
        meta["annotations"] = {"pad": "x" * pad}
    return json.dumps({"apiVersion": "sluicegate.io/v1beta2", "kind": "Workload", "metadata": meta,
                       "spec": {"queueName": "nowhere", "podSets": [{"count": 1, "template": {"spec": {
                           "containers": [{"name": "c", "command": ["true"]}]}}}]}})


async def test_many_watchers_each_get_every_event_in_order_and_closing_frees_them(controller: Controller) -> None:
    from sluicegate.client import Client, Document
    from sluicegate.v1 import workloads_pb2

    watchers, names = 24, [f"w-{i:03d}" for i in range(40)]
    clients = [Client(controller.address, timeout=30) for _ in range(3)]
    for c in clients:
        await c.__aenter__()
    seen: list[list[tuple[int, str, str]]] = [[] for _ in range(watchers)]

    async def watch(i: int) -> None:
        async for batch in clients[i % 3].watch_workload_events(namespace="default", send_initial=False):
            for ev in batch:
                seen[i].append((ev.workload.resource_version, ev.workload.name,
                                workloads_pb2.WorkloadEvent.Type.Name(ev.type)))

    tasks = [asyncio.create_task(watch(i)) for i in range(watchers)]
    try:
        await asyncio.to_thread(wait_for, "every watch registered",
                                lambda: _metric(controller, "sluicegate_watchers") == watchers)
        async with Client(controller.address, timeout=30) as c:
            for n in names:
                await c.create_workload(Document(_workload(n), "test"))
            for n in names:
                await c.delete_workload(n)
        deleted = "DELETED"
        async with asyncio.timeout(30):  # bounded: a lost event fails the test, not hangs it
            while not all(sum(1 for e in s if e[2] == deleted) == len(names) for s in seen):
                await asyncio.sleep(0.02)  # polling the watchers' own lists, bounded by the timeout
        reference = seen[0]
        assert [e[1] for e in reference if e[2] == "ADDED"] == names  # in creation order
        assert len({(rv, n) for rv, n, _ in reference}) == len(reference)  # no duplicates
        assert [rv for rv, _, _ in reference] == sorted(rv for rv, _, _ in reference)  # store order
        for s in seen[1:]:
            assert s == reference
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for c in clients:
            await c.__aexit__(None, None, None)
    # Closed watches free their watchers: none open, none left alive.
    await asyncio.to_thread(wait_for, "watchers freed", lambda: (
        _metric(controller, "sluicegate_watchers"), _metric(controller, "sluicegate_watchers_alive"),
        _metric(controller, "sluicegate_watch_events_held")) == (0.0, 0.0, 0.0))


@pytest.fixture
def small_backlog(tmp_path: Path) -> AsyncIterator[Controller]:
    settings = tmp_path / "settings.yaml"
    settings.write_text("watchBacklog: 50\n")
    c = Controller(tmp_path, extra=["--no-placement", "--config", str(settings)]).start()
    try:
        yield c  # type: ignore[misc]
    finally:
        c.stop()


async def test_a_stalled_watcher_is_ended_resumably_without_holding_memory_or_the_others(
        small_backlog: Controller) -> None:
    from sluicegate.client import Client, Document
    from sluicegate.v1 import workloads_pb2, workloads_pb2_grpc

    ctl = small_backlog
    total = 400
    # The stalled reader turns off the transport's window growth (BDP probing),
    # so what it leaves unread fills its 64 KiB window and the controller's
    # send blocks, as it would for any reader further behind than its window.
    channel = grpc.aio.insecure_channel(ctl.address, options=[("grpc.http2.bdp_probe", 0)])
    stub = workloads_pb2_grpc.WorkloadsStub(channel)
    async with Client(ctl.address, timeout=30) as c, Client(ctl.address, timeout=30) as other, channel:
        await c.create_workload(Document(_workload("first"), "test"))
        stalled = stub.Watch(workloads_pb2.WatchWorkloadsRequest(namespace="default", send_initial=True,
                                                                  max_batch=256))
        assert (await stalled.read()).workload.name == "first"  # registered; now it reads nothing

        fast_names: list[str] = []
        progressed = asyncio.Event()

        async def fast() -> None:
            async for batch in c.watch_workload_events(namespace="default", send_initial=False):
                fast_names.extend(ev.workload.name for ev in batch)
                progressed.set()
                if len(fast_names) >= total:
                    return

        fast_task = asyncio.create_task(fast())
        await asyncio.to_thread(wait_for, "both watches registered",
                                lambda: _metric(ctl, "sluicegate_watchers") == 2)
        # 4 KiB each: far more than the transport buffers for a reader that reads nothing.
        # The fast reader is kept within 10 events of the writer (well inside the
        # backlog of 50) whatever the machine's load: it shares this process's loop.
        async with asyncio.timeout(60):
            for i in range(total):
                while len(fast_names) < i - 10 and not fast_task.done():
                    progressed.clear()
                    await progressed.wait()
                await c.create_workload(Document(_workload(f"n-{i:04d}", pad=4096), "test"))
        # The fast watcher got everything, in order, while the stalled one sat there.
        await asyncio.wait_for(fast_task, 30)
        assert fast_names == [f"n-{i:04d}" for i in range(total)]
        # The stalled watch was ended: only the fast one is counted, and the
        # controller holds at most a backlog's worth of events for anyone.
        await asyncio.to_thread(wait_for, "the stalled watch ended",
                                lambda: _metric(ctl, "sluicegate_watchers") == 0)
        assert _metric(ctl, "sluicegate_watch_events_held") == 0
        # Freed while its reader still reads nothing: the call is ended with its
        # status queued behind what is in flight, not left blocked in the send.
        await asyncio.to_thread(wait_for, "the stalled watcher freed before its reader reads",
                                lambda: _metric(ctl, "sluicegate_watchers_alive") == 0, timeout=10)
        # Its reader, reading again, gets what was in flight, then a clear error to resume from.
        got: list[str] = []
        with pytest.raises(grpc.aio.AioRpcError) as err:
            async with asyncio.timeout(30):
                for _ in range(total + 1):  # bounded: at most one message per event
                    ev = await stalled.read()
                    assert ev is not grpc.aio.EOF
                    got.extend(e.workload.name for e in (ev, *ev.more))
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "watch expired" in (err.value.details() or "") and "re-list" in (err.value.details() or "")
        assert len(got) < total and got == [f"n-{i:04d}" for i in range(len(got))]
        # Resuming: a new watch lists everything again, then goes on with new events.
        resumed = other.watch_workload_events(namespace="default", send_initial=True)
        listed: list[str] = []
        async with asyncio.timeout(30):
            while len(listed) < total + 1:
                listed.extend(ev.workload.name for ev in await anext(resumed))
        assert sorted(listed) == sorted(["first", *(f"n-{i:04d}" for i in range(total))])
        await c.create_workload(Document(_workload("after"), "test"))
        async with asyncio.timeout(30):
            assert [ev.workload.name for ev in await anext(resumed)] == ["after"]
        await resumed.aclose()
    # Ended, cancelled and closed watches alike are freed (by reference counting: nothing waits for a collection).
    await asyncio.to_thread(wait_for, "watchers freed", lambda: (
        _metric(ctl, "sluicegate_watchers"), _metric(ctl, "sluicegate_watchers_alive")) == (0.0, 0.0), timeout=5)
