"""Creations that arrive together: each answered as its own Create, the new ones stored in one commit."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from sluicegate.client import Client, ClientError, Document
from sluicegate.controller.decide_api import new_uid
from sluicegate.controller.errors import ControllerError, InvalidArgument
from sluicegate.controller.manager import Manager
from sluicegate.controller.service.workloads import WorkloadsServicer
from sluicegate.controller.store import StoreError
from sluicegate.controller.store.memory import MemoryStore
from sluicegate.manifest.loader import RawDocument, parse_text
from sluicegate.security.podsecurity import PodUserPolicies, PodUserPolicy
from sluicegate.v1 import objects_pb2, workloads_pb2, workloads_pb2_grpc

from .served import Served, serve, workload_body
from .test_manager import Clock

CREATE_DEADLINE = 10.0


def doc(name: str, cpu: str = "1", **spec: object) -> RawDocument:
    body = json.loads(workload_body(name, cpu))
    body["spec"].update(spec)
    return parse_text(json.dumps(body), f"{name}.json", fmt="json")[0]


def outcome(result: tuple[object, bool] | ControllerError) -> str:
    if isinstance(result, ControllerError):
        return f"{type(result).__name__}: {result}"
    wl, created = result
    return f"{wl.name}: {'created' if created else 'existed'}"  # type: ignore[attr-defined]


def test_each_document_gets_its_own_result_and_the_new_ones_share_one_commit(served: Served) -> None:
    m = served.manager
    m.create_workload(doc("old"))
    before = served.store.load()
    results = m.create_workloads([
        doc("a"),
        doc("bad", podSets=[{"name": "main", "count": -1, "template": {"spec": {"containers": [{"name": "c"}]}}}]),
        doc("a"),  # the same name twice in one call: one workload
        doc("old"),
        doc("ghost", priorityClassRef={"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "nope"}),
        doc("b"),
    ])
    assert [outcome(r) for r in results] == [
        "a: created",
        "InvalidArgument: bad.json#1 Workload/default/bad: spec.podSets[0].count: must be non-negative, got -1",
        "a: existed",
        "old: existed",
        "InvalidArgument: spec.priorityClassRef.name: WorkloadPriorityClass 'nope' not found",
        "b: created",
    ]
    written = {o.name: o.resource_version for o in served.store.load() if o not in before}
    assert set(written) == {"a", "b"}
    assert len(set(written.values())) == 1  # one transaction
    assert results[0][0] is results[2][0]  # type: ignore[index]
    assert sorted(wl.name for wl in m.cache.workloads.values()) == ["a", "b", "old"]


def test_a_store_failure_creates_nothing(served: Served) -> None:
    m = served.manager
    served.store._db.close()  # every later statement fails, as a broken disk would make it
    with pytest.raises(StoreError):
        m.create_workloads([doc("a"), doc("b")])
    assert (list(m.cache.workloads), m.cache.queues.has_heads()) == ([], False)


def test_create_workload_raises_its_items_error() -> None:
    m = Manager(MemoryStore(), clock=Clock(), placement=False)
    with pytest.raises(InvalidArgument) as info:
        m.create_workload(doc("bad", podSets=[]))
    assert "spec.podSets: must list at least 1 item(s)" in str(info.value)


async def test_create_many_over_grpc_answers_each_item_with_the_status_its_own_create_would_have(served: Served) -> None:
    items = [
        workloads_pb2.CreateWorkloadRequest(document=objects_pb2.Document(body=workload_body("a", "1").encode(), source="a")),
        workloads_pb2.CreateWorkloadRequest(document=objects_pb2.Document(body=b'{"kind": "Workload",', source="cut")),
        workloads_pb2.CreateWorkloadRequest(document=objects_pb2.Document(body=workload_body("a", "1").encode(), source="a2")),
    ]
    async with grpc.aio.insecure_channel(served.address) as channel:
        resp = await workloads_pb2_grpc.WorkloadsStub(channel).CreateMany(workloads_pb2.CreateWorkloadsRequest(items=items))
    r0, r1, r2 = resp.results
    version = served.manager.versions[("Workload", "default", "a")]
    assert (r0.code, r0.response.created, r0.response.workload.resource_version) == (0, True, version)
    assert (r1.code, r1.message) == (grpc.StatusCode.INVALID_ARGUMENT.value[0],
                                     "cut (line 1): could not parse JSON: Expecting property name enclosed in double quotes")
    assert (r2.code, r2.response.created, json.loads(r2.response.workload.json)) == (
        0, False, json.loads(r0.response.workload.json))


async def test_concurrent_client_creations_go_out_together_and_each_caller_gets_its_own_answer(served: Served) -> None:
    names = [f"w{i:03d}" for i in range(200)]
    bodies = {n: workload_body(n, "1") for n in names}
    bodies["w007"] = workload_body("w007", "-1")  # invalid: only its caller fails

    async def create(client: Client, name: str) -> str:
        try:
            wl, created = await client.create_workload(Document(bodies[name], name))
        except ClientError as exc:
            return f"{exc.code.name}: {exc.message}"
        return f"{wl['metadata']['name']} {created} {wl['metadata']['resourceVersion']}"

    async with Client(served.address) as client:
        async with asyncio.timeout(CREATE_DEADLINE):
            answers = await asyncio.gather(*(create(client, n) for n in names))

    versions = served.manager.versions
    valid = [n for n in names if n != "w007"]
    assert [a for n, a in zip(names, answers, strict=True) if n != "w007"] == [
        f"{n} True {versions[('Workload', 'default', n)]}" for n in valid]
    assert answers[7].startswith("INVALID_ARGUMENT: w007#1 Workload/default/w007: spec.podSets[0].template.spec.containers[0]")
    assert ("Workload", "default", "w007") not in versions
    # Two calls go out alone; the other creations waited and shared commits.
    assert len({versions[("Workload", "default", n)] for n in valid}) < len(valid) // 2


async def test_the_stream_answers_each_request_in_order_and_a_failed_request_does_not_end_it(served: Served) -> None:
    def request(*bodies: bytes) -> workloads_pb2.CreateWorkloadsRequest:
        return workloads_pb2.CreateWorkloadsRequest(items=[
            workloads_pb2.CreateWorkloadRequest(document=objects_pb2.Document(body=b, source=f"item{i}"))
            for i, b in enumerate(bodies)])

    async with grpc.aio.insecure_channel(served.address) as channel:
        call = workloads_pb2_grpc.WorkloadsStub(channel).CreateStream()
        async with asyncio.timeout(CREATE_DEADLINE):
            await call.write(request(workload_body("a", "1").encode(), b'{"kind": "Workload",'))
            first = await call.read()
            served.store._db.close()  # every later statement fails, as a broken disk would make it
            await call.write(request(workload_body("b", "1").encode(), workload_body("c", "1").encode()))
            second = await call.read()
            await call.write(request(workload_body("a", "1").encode()))
            third = await call.read()
            await call.done_writing()
            assert await call.code() == grpc.StatusCode.OK
    ok, cut = first.results
    assert (ok.code, ok.response.created, json.loads(ok.response.workload.json)["metadata"]["name"]) == (0, True, "a")
    assert (cut.code, cut.message) == (grpc.StatusCode.INVALID_ARGUMENT.value[0],
                                       "item1 (line 1): could not parse JSON: Expecting property name enclosed in double quotes")
    unavailable = grpc.StatusCode.UNAVAILABLE.value[0]
    assert [r.code for r in second.results] == [unavailable, unavailable]
    assert second.results[0].message.startswith("store unavailable, nothing was changed")
    # "a" exists already: answered from memory, nothing to store.
    assert (third.results[0].code, third.results[0].response.created) == (0, False)
    assert sorted(wl.name for wl in served.manager.cache.workloads.values()) == ["a"]


async def test_the_stream_reads_the_next_requests_while_one_is_being_created(tmp_path: Path) -> None:
    """A busy controller creates instead of waiting on the stream: while one request is being created
    the next ones are read (up to CREATE_READ_AHEAD), and the answers still go out in order."""
    from sluicegate.controller.service.workloads import CREATE_READ_AHEAD

    total = CREATE_READ_AHEAD + 4
    read: list[int] = []
    ahead = asyncio.Event()
    # Requests read by the time each one's creation began.
    seen: list[int] = []

    class Watching(WorkloadsServicer):
        async def CreateStream(self, request_iterator, context):  # type: ignore[no-untyped-def]
            async def counted() -> AsyncIterator[workloads_pb2.CreateWorkloadsRequest]:
                async for request in request_iterator:
                    read.append(len(request.items))
                    if len(read) == 1 + CREATE_READ_AHEAD:
                        ahead.set()
                    yield request

            await super().CreateStream(counted(), context)

        async def _create_in_parts(self, request, p, context):  # type: ignore[no-untyped-def]
            seen.append(len(read))
            if len(seen) == 1:
                await ahead.wait()  # the first creation waits until the reader has read ahead
            return await super()._create_in_parts(request, p, context)

    def request(i: int) -> workloads_pb2.CreateWorkloadsRequest:
        return workloads_pb2.CreateWorkloadsRequest(brief=True, items=[workloads_pb2.CreateWorkloadRequest(
            document=objects_pb2.Document(body=workload_body(f"r{i}", "1").encode(), source=f"r{i}"))])

    async with serve(tmp_path, workloads=Watching) as served, grpc.aio.insecure_channel(served.address) as channel:
        call = workloads_pb2_grpc.WorkloadsStub(channel).CreateStream()
        async with asyncio.timeout(CREATE_DEADLINE):
            for i in range(total):
                await call.write(request(i))
            await call.done_writing()
            answers = [await call.read() for _ in range(total)]
            assert await call.code() == grpc.StatusCode.OK
    assert [a.results[0].response.workload.name for a in answers] == [f"r{i}" for i in range(total)]
    assert all(a.results[0].response.created for a in answers)
    # The first creation began after one read; the reader went on while it waited, and stopped at its
    # bound: the queue full, one more request in its hands at most.
    assert seen[0] == 1 and 1 + CREATE_READ_AHEAD <= seen[1] <= 2 + CREATE_READ_AHEAD < total
    assert len(read) == total


async def test_a_lone_creations_answer_goes_out_before_what_the_creation_woke(tmp_path: Path) -> None:
    """A creation wakes the scheduler, whose cycle (a preemption's, say) takes the loop for a while; the
    answer to a request with nothing queued ahead of it starts on its way first, not after that cycle."""
    order: list[str] = []

    class Recording:
        def __init__(self, context: object) -> None:
            self._context = context

        def __getattr__(self, name: str) -> object:
            return getattr(self._context, name)

        async def write(self, response: object) -> None:
            order.append("answer")
            await self._context.write(response)  # type: ignore[attr-defined]

    class Waking(WorkloadsServicer):
        async def CreateStream(self, request_iterator, context):  # type: ignore[no-untyped-def]
            await super().CreateStream(request_iterator, Recording(context))

        async def _create_in_parts(self, request, p, context):  # type: ignore[no-untyped-def]
            response = await super()._create_in_parts(request, p, context)
            # What a creation wakes runs at the loop's next turn, as the woken scheduler does.
            asyncio.get_running_loop().call_soon(order.append, "woken work")
            return response

    request = workloads_pb2.CreateWorkloadsRequest(brief=True, items=[workloads_pb2.CreateWorkloadRequest(
        document=objects_pb2.Document(body=workload_body("lone", "1").encode(), source="lone"))])
    async with serve(tmp_path, workloads=Waking) as served, grpc.aio.insecure_channel(served.address) as channel:
        call = workloads_pb2_grpc.WorkloadsStub(channel).CreateStream()
        async with asyncio.timeout(CREATE_DEADLINE):
            await call.write(request)
            answer = await call.read()
            await call.done_writing()
            assert await call.code() == grpc.StatusCode.OK
    assert answer.results[0].response.created
    assert order[:2] == ["answer", "woken work"]


async def test_a_broken_stream_fails_its_unanswered_creations_and_the_next_creation_opens_a_new_one(served: Served) -> None:
    async with Client(served.address) as client:
        async with asyncio.timeout(CREATE_DEADLINE):
            await client.create_workload(Document(workload_body("first", "1"), "first"))
            broken = client._create_stream
            assert broken is not None
            pending = asyncio.ensure_future(client.create_workload(Document(workload_body("second", "1"), "second")))
            broken._call.cancel()  # as a lost connection ends it
            outcome = await asyncio.gather(pending, return_exceptions=True)
            _, created = await client.create_workload(Document(workload_body("third", "1"), "third"))
    assert broken.closed and client._create_stream is not broken
    (err,) = outcome
    # Cancelled before or after it was sent: either way its caller hears of it.
    assert isinstance(err, ClientError) and err.code is grpc.StatusCode.CANCELLED, err
    assert created is True
    assert {"first", "third"} <= {wl.name for wl in served.manager.cache.workloads.values()}


async def test_closing_the_client_answers_every_creation_on_the_stream(served: Served) -> None:
    client = Client(served.address)
    calls = [asyncio.ensure_future(client.create_workload(Document(workload_body(f"w{i}", "1"), f"w{i}")))
             for i in range(50)]
    for _ in range(100):  # a few loop steps until the first request is on its way
        if client._create_stream is not None and client._create_stream._sent:
            break
        await asyncio.sleep(0)
    await client.close()
    async with asyncio.timeout(CREATE_DEADLINE):
        outcomes = await asyncio.gather(*calls, return_exceptions=True)
    assert all(isinstance(o, tuple) or (isinstance(o, ClientError) and o.code is grpc.StatusCode.CANCELLED)
               for o in outcomes), outcomes
    # Whoever was told "created" finds it stored.
    told = {o[0]["metadata"]["name"] for o in outcomes if isinstance(o, tuple)}
    assert told <= {wl.name for wl in served.manager.cache.workloads.values()}


async def test_create_workloads_answers_every_document_in_order_with_brief_answers(served: Served) -> None:
    names = [f"b{i:04d}" for i in range(1200)]
    bodies = {n: workload_body(n, "1") for n in names}
    bodies["b0007"] = workload_body("b0007", "-1")  # invalid: only its own answer is an error
    docs = [Document(bodies[n], n) for n in names] + [Document(bodies["b0001"], "again")]
    async with Client(served.address) as client:
        async with asyncio.timeout(CREATE_DEADLINE):
            # A small window: the stream must wait for answers before it sends more, and still finish.
            answers = [a async for a in client.create_workloads(docs, window=300)]
    versions = served.manager.versions
    assert len(answers) == len(docs)
    for n, a in zip(names, answers, strict=False):
        if n == "b0007":
            assert isinstance(a, ClientError) and a.code is grpc.StatusCode.INVALID_ARGUMENT, a
            assert "spec.podSets[0].template.spec.containers[0]" in a.message
        else:
            assert not isinstance(a, ClientError), a
            assert (a.namespace, a.name, a.created, a.resource_version) == (
                "default", n, True, versions[("Workload", "default", n)])
    last = answers[-1]
    assert not isinstance(last, ClientError) and (last.name, last.created) == ("b0001", False)
    assert ("Workload", "default", "b0007") not in versions
    assert len(served.manager.cache.workloads) == len(names) - 1


async def test_create_workloads_takes_a_paced_async_source(served: Served) -> None:
    async def paced() -> AsyncIterator[Document]:
        for i in range(30):
            if i % 10 == 0:
                await asyncio.sleep(0)  # the source yields between groups, as a schedule does
            yield Document(workload_body(f"p{i}", "1"), f"p{i}")

    async with Client(served.address) as client:
        async with asyncio.timeout(CREATE_DEADLINE):
            answers = [a async for a in client.create_workloads(paced())]
    assert [(a.name, a.created) for a in answers if not isinstance(a, ClientError)] == [
        (f"p{i}", True) for i in range(30)]


async def test_create_workloads_sends_the_unanswered_again_when_the_stream_breaks(tmp_path: Path) -> None:
    """A broken call (a takeover, a lost connection) is not the end: what had no answer goes again,
    and what had committed answers created=False."""
    sent: list[int] = []

    class Flaky(WorkloadsServicer):
        async def CreateStream(self, request_iterator, context):  # type: ignore[no-untyped-def]
            async for request in request_iterator:
                response = self._create_many(request, self.gate.authenticate(context), context)
                if not request.items:
                    yield response  # the client's question whether typed items are read
                    continue
                sent.append(len(request.items))
                if len(sent) == 1:
                    # Stored, then the call breaks before the answer leaves.
                    await context.abort(grpc.StatusCode.UNAVAILABLE, "controller going away")
                yield response

    async with serve(tmp_path, workloads=Flaky) as flaky:
        # A second address for the same controller state: where the client goes once the first breaks.
        other = grpc.aio.server()
        workloads_pb2_grpc.add_WorkloadsServicer_to_server(WorkloadsServicer(flaky.manager), other)
        port = other.add_insecure_port("127.0.0.1:0")
        await other.start()
        try:
            async with Client(f"{flaky.address},127.0.0.1:{port}") as client:
                async with asyncio.timeout(CREATE_DEADLINE):
                    docs = [Document(workload_body(f"f{i}", "1"), f"f{i}") for i in range(5)]
                    answers = [a async for a in client.create_workloads(docs)]
        finally:
            await other.stop(None)
        stored_names = {wl.name for wl in flaky.manager.cache.workloads.values()}
    assert len(sent) == 1  # the flaky address saw one request; the rest went to the other
    assert [a.name for a in answers if not isinstance(a, ClientError)] == [f"f{i}" for i in range(5)]
    # The first request's workloads were stored before the break: sent again, they are found.
    assert [a.created for a in answers if not isinstance(a, ClientError)][:sent[0]] == [False] * sent[0]
    assert stored_names == {f"f{i}" for i in range(5)}


def test_a_new_uid_is_a_random_version_4_uuid() -> None:
    uids = {new_uid() for _ in range(1000)}
    assert len(uids) == 1000
    for text in uids:
        u = uuid.UUID(text)
        assert (str(u), u.version, u.variant) == (text, 4, uuid.RFC_4122)


def test_a_forked_child_does_not_hand_out_its_parents_next_uids() -> None:
    import os

    new_uid()  # the parent holds random bytes for the next uids
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next uids, to the parent
        os.close(read)
        os.write(write, ",".join(new_uid() for _ in range(5)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        child = set(f.read().split(","))
    os.waitpid(pid, 0)
    assert len(child) == 5
    assert child.isdisjoint(new_uid() for _ in range(5))


def test_pod_sets_shared_across_namespaces_meet_each_namespace_s_policy() -> None:
    """Workloads of one shape share one decoded pod set value; passing one namespace's policy
    says nothing about another's."""
    policies = PodUserPolicies(namespaces={"trusted": PodUserPolicy(uid=1000, gid=1000, allow_root=True)})
    m = Manager(MemoryStore(), clock=Clock(), placement=False, pod_security=policies)

    def as_root(name: str, namespace: str) -> RawDocument:
        body = json.loads(workload_body(name, "1"))
        body["metadata"]["namespace"] = namespace
        body["spec"]["podSets"][0]["template"]["spec"]["securityContext"] = {"runAsUser": 0}
        return parse_text(json.dumps(body), f"{name}.json", fmt="json")[0]

    results = m.create_workloads([as_root("a", "trusted"), as_root("b", "default"), as_root("c", "trusted")])
    assert [outcome(r) for r in results][0::2] == ["a: created", "c: created"]
    refused = results[1]
    assert isinstance(refused, InvalidArgument)
    assert "spec.podSets[0].template.spec.securityContext.runAsUser" in str(refused), refused
    assert sorted(wl.name for wl in m.cache.workloads.values()) == ["a", "c"]


async def test_a_caller_that_stops_reading_early_ends_its_stream_and_the_client_goes_on(served: Served) -> None:
    docs = [Document(workload_body(f"e{i}", "1"), f"e{i}") for i in range(600)]
    async with Client(served.address) as client:
        async with asyncio.timeout(CREATE_DEADLINE):
            answers = client.create_workloads(docs, window=256)
            first = await anext(answers)
            await answers.aclose()
            _, created = await client.create_workload(Document(workload_body("after", "1"), "after"))
    assert not isinstance(first, ClientError) and (first.name, first.created) == ("e0", True)
    assert created is True
    # What was sent before the stop may have been stored; nothing after the window was.
    names = {wl.name for wl in served.manager.cache.workloads.values()}
    assert "e0" in names and "after" in names and len(names) <= 256 + 1


async def test_a_large_request_is_created_in_parts_with_the_loop_free_between_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A request of thousands is handled CREATE_PART at a time, other work running between parts
    (one part holds the loop for a few hundred µs per creation); a store failure after the first
    part fails only that part's items, the stored ones keep their answers."""
    from sluicegate.controller.service import workloads as service

    monkeypatch.setattr(service, "CREATE_PART", 4)
    parts: list[int] = []
    # Per part: how many callbacks that earlier parts scheduled have run by then (the loop's other work).
    ran: list[int] = []
    ticks: list[int] = []

    class Counting(WorkloadsServicer):
        def _create_many(self, request, p, context):  # type: ignore[no-untyped-def]
            parts.append(len(request.items))
            ticks.append(len(ran))
            asyncio.get_running_loop().call_soon(ran.append, len(parts))  # runs only if the loop gets a turn
            if len(parts) == 3 and fail_third:
                raise StoreError("disk full")
            return super()._create_many(request, p, context)

    fail_third = False

    def request_of(prefix: str) -> workloads_pb2.CreateWorkloadsRequest:
        request = workloads_pb2.CreateWorkloadsRequest(brief=True)
        for i in range(10):
            request.items.add().document.CopyFrom(objects_pb2.Document(
                source=f"{prefix}{i}", body=workload_body(f"{prefix}{i}", "1").encode()))
        return request

    async with serve(tmp_path, workloads=Counting) as served, grpc.aio.insecure_channel(served.address) as channel:
        stub = workloads_pb2_grpc.WorkloadsStub(channel)
        response = await stub.CreateMany(request_of("n"), timeout=CREATE_DEADLINE)
        assert [(r.code, r.response.workload.name) for r in response.results] == [(0, f"n{i}") for i in range(10)]
        assert parts == [4, 4, 2]
        assert ticks == [0, 1, 2]  # the loop ran other work between the parts
        parts.clear()
        fail_third = True
        response = await stub.CreateMany(request_of("m"), timeout=CREATE_DEADLINE)
        assert [r.code == grpc.StatusCode.OK.value[0] for r in response.results] == [True] * 8 + [False] * 2
        assert "disk full" in response.results[9].message
        assert sorted(wl.name for wl in served.manager.cache.workloads.values() if wl.name.startswith("m")) == [
            f"m{i}" for i in range(8)]


async def test_the_client_sends_plain_workload_documents_as_typed_items_created_as_the_documents_are(
        tmp_path: Path) -> None:
    """The same documents, once as documents (CreateMany) and once through the client's stream (typed
    items): the same answers, errors naming the same fields, and the same stored JSON but for the uid and
    the creation time."""
    bodies = [workload_body(f"t{i}", "1") for i in range(6)]
    bodies[2] = workload_body("t2", "-1")
    bodies[4] = bodies[4].replace('"labels": {"team": "a"}', '"labels": {"team": "a", "Bad Key": "x"}')
    bodies.append(bodies[0])  # again: found (created=False)
    kinds: list[str] = []

    class Watching(WorkloadsServicer):
        def _create_many(self, request, p, context):  # type: ignore[no-untyped-def]
            kinds.extend(item.WhichOneof("item") for item in request.items)
            return super()._create_many(request, p, context)

    outcomes: list[list[str]] = []
    stored_json: list[dict[str, Any]] = []
    for typed in (False, True):
        async with serve(tmp_path / str(typed), workloads=Watching) as served:
            async with Client(served.address) as client, asyncio.timeout(CREATE_DEADLINE):
                if typed:
                    answers = [a async for a in client.create_workloads(
                        [Document(b, f"t{i}") for i, b in enumerate(bodies)])]
                else:
                    async with grpc.aio.insecure_channel(served.address) as channel:
                        resp = await workloads_pb2_grpc.WorkloadsStub(channel).CreateMany(
                            workloads_pb2.CreateWorkloadsRequest(items=[workloads_pb2.CreateWorkloadRequest(
                                document=objects_pb2.Document(body=b.encode(), source=f"t{i}"))
                                for i, b in enumerate(bodies)]))
                    answers = [ClientError(grpc.StatusCode.INVALID_ARGUMENT, r.message) if r.code else r.response
                               for r in resp.results]
            outcomes.append([f"{a.code.name}: {a.message}" if isinstance(a, ClientError)
                             else f"{a.created}" for a in answers])
            docs = [json.loads(o.body) for o in served.store.load() if o.kind == "Workload"]
            for d in docs:
                del d["metadata"]["uid"], d["metadata"]["creationTimestamp"]
            stored_json.append(sorted(docs, key=lambda d: d["metadata"]["name"]))
    assert kinds[:len(bodies)] == ["document"] * len(bodies)
    assert kinds[len(bodies):] == ["workload"] * len(bodies)
    assert outcomes[0] == outcomes[1]
    assert outcomes[1][2].startswith("INVALID_ARGUMENT: t2#1 Workload/default/t2: spec.podSets[0].template.spec")
    assert "metadata.labels[Bad Key]" in outcomes[1][4]
    assert (outcomes[1][0], outcomes[1][-1]) == ("True", "False")
    assert stored_json[0] == stored_json[1] and len(stored_json[0]) == 4


async def test_a_server_that_does_not_read_typed_items_gets_documents(tmp_path: Path) -> None:
    """Against an older server (its answers do not say typed_items) the client sends the documents."""

    class Older(WorkloadsServicer):
        def _create_many(self, request, p, context):  # type: ignore[no-untyped-def]
            assert not any(item.HasField("workload") for item in request.items)
            response = super()._create_many(request, p, context)
            response.typed_items = False
            return response

    async with serve(tmp_path, workloads=Older) as served:
        async with Client(served.address) as client, asyncio.timeout(CREATE_DEADLINE):
            answers = [a async for a in client.create_workloads(
                [Document(workload_body(f"o{i}", "1"), f"o{i}") for i in range(300)])]
    assert [(a.name, a.created) for a in answers if not isinstance(a, ClientError)] == [
        (f"o{i}", True) for i in range(300)]


async def test_typed_items_draw_generated_names_and_create_and_create_many_take_them(served: Served) -> None:
    spec = json.loads(workload_body("x", "1"))["spec"]
    item = workloads_pb2.NewWorkload(namespace="default", generate_name="gen-", spec=json.dumps(spec).encode(),
                                     labels=b'{"team": "a"}', source="typed")
    async with grpc.aio.insecure_channel(served.address) as channel:
        stub = workloads_pb2_grpc.WorkloadsStub(channel)
        resp = await stub.CreateMany(workloads_pb2.CreateWorkloadsRequest(
            items=[workloads_pb2.CreateWorkloadRequest(workload=item)] * 3, brief=True))
        one = await stub.Create(workloads_pb2.CreateWorkloadRequest(workload=workloads_pb2.NewWorkload(
            name="single", spec=json.dumps(spec).encode())))
        bad = await stub.CreateMany(workloads_pb2.CreateWorkloadsRequest(items=[workloads_pb2.CreateWorkloadRequest(
            workload=workloads_pb2.NewWorkload(name="bad", spec=b'{"queueName": "lq", "podSets": []}',
                                               source="bad-item"))]))
    names = [r.response.workload.name for r in resp.results]
    assert all(r.code == 0 and r.response.created for r in resp.results)
    assert len(set(names)) == 3 and all(n.startswith("gen-") and len(n) == 9 for n in names)
    assert json.loads(one.workload.json)["metadata"]["name"] == "single" and one.created
    (b,) = bad.results
    assert (b.code, b.message) == (grpc.StatusCode.INVALID_ARGUMENT.value[0],
                                   "bad-item Workload/default/bad: spec.podSets: must list at least 1 item(s), got 0")
    assert ("Workload", "default", "bad") not in served.manager.versions
    assert sorted(served.manager.cache.workloads) == sorted([f"default/{n}" for n in names] + ["default/single"])
