"""Bad input stays harmless: property-based tests over manifests and every gRPC request message.

A real Manager on a real SQLite store behind a real gRPC server (the
Admin, Workloads, AgentLink, Nodes and Security services, with a cluster CA) runs on its own event loop in
a thread; hypothesis sends it generated requests over a plain channel on
127.0.0.1.  For each: an answer (a status, or the messages of a stream)
arrives within a short deadline, input errors are never INTERNAL or
UNKNOWN, the server stays up, and a refused request changes nothing (every
object's resourceVersion, as List reports them, is as before).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from google.protobuf import message_factory
from google.protobuf.descriptor import FieldDescriptor
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sluicegate.controller.manager import Manager
from sluicegate.controller.service.admin import AdminServicer
from sluicegate.controller.service.agents import AgentLinkServicer, NodesServicer
from sluicegate.controller.service.gate import Gate
from sluicegate.controller.service.security import SecurityServicer
from sluicegate.controller.service.workloads import WorkloadsServicer
from sluicegate.controller.store.sqlite import SqliteStore
from sluicegate.manifest.loader import parse_text
from sluicegate.security.authority import Authority, init_pki
from sluicegate.v1 import (
    agent_pb2,
    agent_pb2_grpc,
    objects_pb2,
    objects_pb2_grpc,
    security_pb2,
    security_pb2_grpc,
    workloads_pb2,
    workloads_pb2_grpc,
)

from .served import workload_body
from .test_manager import QUEUES, Clock

ROOT = Path(__file__).resolve().parents[3]
# Every call must be answered well within this; a hang fails the property.
DEADLINE = 5.0
# Input errors are the caller's: these codes would mean the server broke.
BROKEN = {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN, grpc.StatusCode.UNAVAILABLE,
          grpc.StatusCode.DEADLINE_EXCEEDED}
# Bounded: the whole module runs in seconds, and writes no example database.
SETTINGS = settings(max_examples=60, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


class Server:
    """The controller's services on a private event loop in a thread."""

    def __init__(self, tmp: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        init_pki(tmp / "pki", addresses=["127.0.0.1"])
        self.authority = Authority(tmp / "pki")
        self.store = SqliteStore(str(tmp / "store.db"))
        self.manager = Manager(self.store, clock=Clock(), placement=False)
        self.manager.apply(parse_text(QUEUES % {"strategy": "BestEffortFIFO"}, "queues.yaml"))
        self.address = self._run(self._start())
        self.channel = grpc.insecure_channel(self.address)
        self.admin = objects_pb2_grpc.AdminStub(self.channel)
        self.workloads = workloads_pb2_grpc.WorkloadsStub(self.channel)
        self.agents = agent_pb2_grpc.AgentLinkStub(self.channel)
        self.nodes = agent_pb2_grpc.NodesStub(self.channel)
        self.security = security_pb2_grpc.SecurityStub(self.channel)

    def _run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    async def _start(self) -> str:
        m = self.manager
        self.server = grpc.aio.server()
        objects_pb2_grpc.add_AdminServicer_to_server(AdminServicer(m), self.server)
        workloads_pb2_grpc.add_WorkloadsServicer_to_server(WorkloadsServicer(m), self.server)
        agent_pb2_grpc.add_AgentLinkServicer_to_server(AgentLinkServicer(m, heartbeat_interval=1.0), self.server)
        agent_pb2_grpc.add_NodesServicer_to_server(NodesServicer(m), self.server)
        security_pb2_grpc.add_SecurityServicer_to_server(SecurityServicer(
            self.authority, Gate(), node_connected=m.fleet.node_connected,
            node_revoked=m.fleet.node_revoked), self.server)
        port = self.server.add_insecure_port("127.0.0.1:0")
        await self.server.start()
        return f"127.0.0.1:{port}"

    def close(self) -> None:
        self.channel.close()
        self._run(self.server.stop(None))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.store.close()

    def snapshot(self) -> list[tuple[str, str, str, int]]:
        """Every object and its resourceVersion, as a client sees them."""
        out = []
        for kind in ("ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass",
                     "PriorityClass", "Namespace", "Workload"):
            resp = self.admin.List(objects_pb2.ListRequest(kind=kind), timeout=DEADLINE)
            out.extend((o.kind, o.namespace, o.name, o.resource_version) for o in resp.objects)
        return sorted(out)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = Server(tmp_path_factory.mktemp("bad-input"))
    try:
        yield s
    finally:
        s.close()


# ------------------------------------------------------------ manifests

def _no_surrogates(max_size: int = 12) -> st.SearchStrategy[str]:
    return st.text(st.characters(blacklist_categories=("Cs",)), max_size=max_size)


ODD_TEXT = st.one_of(
    st.text(max_size=12),  # any code point, lone surrogates included
    st.sampled_from(["", "\ud800", "a\udfff", "\x00", "\u202e", "😀", "default", "lq", "cq", "cpu", "memory",
                     "500m", "1e999999999", "8Ei", "9223372036854775808m", "-1", "NaN", "true", "~", "*a", "&a x"]),
)
SCALARS = st.one_of(
    st.none(), st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([2**63 - 1, 2**63, -(2**63) - 1, 10**400]),
    st.floats(allow_nan=False, allow_infinity=True),
    ODD_TEXT,
)
TREES = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(ODD_TEXT, children, max_size=4),
    max_leaves=16,
)


def _valid_documents() -> list[dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all((ROOT / "examples" / "workload.yaml").read_text()) if d]
    docs += [d for d in yaml.safe_load_all((ROOT / "examples" / "queues.yaml").read_text()) if d]
    for f in sorted((ROOT / "tests" / "scenarios").glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(f.read_text()) if isinstance(d, dict)][:6]
    docs.append(json.loads(workload_body("w", "1")))
    return docs


VALID = _valid_documents()


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*prefix, i))


def _set(doc: Any, path: tuple[Any, ...], value: Any, delete: bool) -> Any:
    if not path:
        return value
    parent = doc
    for p in path[:-1]:
        parent = parent[p]
    if delete:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return doc


@st.composite
def mutated(draw: st.DrawFn) -> Any:
    """A valid Kueue/sluicegate document with a few of its fields replaced, deleted or nested deep."""
    doc = json.loads(json.dumps(draw(st.sampled_from(VALID))))
    for _ in range(draw(st.integers(1, 3))):
        paths = list(_paths(doc))
        path = draw(st.sampled_from(paths))
        how = draw(st.sampled_from(["replace", "delete", "deepen"]))
        if how == "delete" and path:
            doc = _set(doc, path, None, True)
        elif how == "deepen":
            depth = draw(st.sampled_from([50, 101, 500]))
            deep: Any = "x"
            for _ in range(depth):
                deep = [deep]
            doc = _set(doc, path, deep, False)
            break  # the last change: walking the deep tree again is the server's job, not the test's
        else:
            doc = _set(doc, path, draw(TREES), False)
    return doc


@st.composite
def with_surrogate(draw: st.DrawFn) -> Any:
    """A valid document with one string value or key given a lone surrogate (as JSON's "\\ud800" decodes)."""
    doc = json.loads(json.dumps(draw(st.sampled_from(VALID))))
    odd = draw(st.sampled_from(["\ud800", "\udfff", "a\udc80b"]))
    strings = [p for p in _paths(doc) if p and isinstance(_get(doc, p), str)]
    keyed = [p for p in _paths(doc) if p and isinstance(p[-1], str)]
    if draw(st.booleans()) and strings:
        path = draw(st.sampled_from(strings))
        return _set(doc, path, _get(doc, path) + odd, False)
    path = draw(st.sampled_from(keyed))
    parent = _get(doc, path[:-1])
    parent[path[-1] + odd] = parent.pop(path[-1])
    return doc


QUANTITY_KEYS = {"cpu", "memory", "nominalQuota", "borrowingLimit", "lendingLimit", "weight"}
HUGE = st.sampled_from(["8Ei", "9223372036854775808m", "9223372036854776", "1e19", "1e999999999", "-1e999999999",
                        "1e-999999999", "1" + "0" * 100, 10**19, 2**63, 1e308, "9223372036854775807m", "8Pi"])


@st.composite
def with_huge_quantity(draw: st.DrawFn) -> Any:
    """A valid document with one quantity at, above or far beyond Kubernetes' bound."""
    doc = json.loads(json.dumps(draw(st.sampled_from(VALID))))
    paths = [p for p in _paths(doc) if p and p[-1] in QUANTITY_KEYS and not isinstance(_get(doc, p), (dict, list))]
    if not paths:
        return doc
    return _set(doc, draw(st.sampled_from(paths)), draw(HUGE), False)


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        doc = doc[p]
    return doc


def _encode(tree: Any, how: str) -> bytes:
    if how == "yaml":
        try:
            text = yaml.safe_dump(tree, allow_unicode=True)
        except (yaml.YAMLError, RecursionError):
            text = json.dumps(tree)
        return text.encode("utf-8", "surrogatepass")
    # ensure_ascii writes a lone surrogate as the JSON escape \ud800, which decodes to one.
    return json.dumps(tree, ensure_ascii=True).encode()


MANIFESTS = st.one_of(
    st.tuples(st.one_of(mutated(), TREES), st.sampled_from(["json", "yaml"])).map(lambda t: _encode(*t)),
    with_surrogate().map(lambda t: _encode(t, "json")),
    st.tuples(with_huge_quantity(), st.sampled_from(["json", "yaml"])).map(lambda t: _encode(*t)),
    st.binary(max_size=64),
    st.sampled_from([b"[" * 5000, b'{"a":' * 5000, b"a: &a [*a]", b"a: &s xxxxxxxx\nb: &l [*s,*s,*s,*s,*s,*s,*s,*s]\nc: [*l,*l,*l]",
                     b"\xff\xfe", b"--- \n---\n", b"{\"a\": 1, \"a\": 2}", b"!!python/object:os.system x"]),
)


def _document(body: bytes) -> objects_pb2.Document:
    return objects_pb2.Document(body=body, source="property")


def _code(call: Any) -> grpc.StatusCode:
    try:
        call()
    except grpc.RpcError as exc:
        return exc.code()  # type: ignore[no-any-return]
    return grpc.StatusCode.OK


@settings(SETTINGS, max_examples=100)
@given(bodies=st.lists(MANIFESTS, min_size=1, max_size=3), rpc=st.sampled_from(["Apply", "Create", "CreateMany", "CreateStream"]))
def test_any_manifest_is_answered_in_time_and_a_refusal_changes_nothing(server: Server, bodies: list[bytes], rpc: str) -> None:
    before = server.snapshot()
    docs = [_document(b) for b in bodies]
    if rpc == "Apply":
        codes = [_code(lambda: server.admin.Apply(objects_pb2.ApplyRequest(documents=docs), timeout=DEADLINE))]
    elif rpc == "Create":
        codes = [_code(lambda: server.workloads.Create(
            workloads_pb2.CreateWorkloadRequest(document=docs[0]), timeout=DEADLINE))]
    else:
        req = workloads_pb2.CreateWorkloadsRequest(items=[workloads_pb2.CreateWorkloadRequest(document=d) for d in docs])
        if rpc == "CreateMany":
            resp = server.workloads.CreateMany(req, timeout=DEADLINE)
        else:
            (resp,) = list(server.workloads.CreateStream(iter([req]), timeout=DEADLINE))
        assert len(resp.results) == len(docs)
        codes = [grpc.StatusCode.OK if r.code == 0 else _status(r.code) for r in resp.results]
        for r in resp.results:
            r.message.encode("utf-8")  # always sendable text
    assert not BROKEN & set(codes), codes
    if all(c is not grpc.StatusCode.OK for c in codes):
        assert server.snapshot() == before


def _status(value: int) -> grpc.StatusCode:
    return next(c for c in grpc.StatusCode if c.value[0] == value)


# ------------------------------------------------- every request message

def _field(f: FieldDescriptor, depth: int) -> st.SearchStrategy[Any]:
    if f.type == FieldDescriptor.TYPE_MESSAGE:
        if f.message_type.GetOptions().map_entry:
            key_f, value_f = f.message_type.fields_by_name["key"], f.message_type.fields_by_name["value"]
            return st.dictionaries(_field(key_f, depth + 1), _field(value_f, depth + 1), max_size=3)
        inner = messages(message_factory.GetMessageClass(f.message_type), depth + 1)
    else:
        inner = _scalar(f)
    if f.is_repeated:
        return st.lists(inner, max_size=3)
    return inner


def _scalar(f: FieldDescriptor) -> st.SearchStrategy[Any]:
    t = f.type
    if t == FieldDescriptor.TYPE_STRING:
        # A protobuf string cannot carry a lone surrogate (the client cannot send one).
        return _no_surrogates() | st.sampled_from(["default", "w", "lq", "cq", "Workload", "ClusterQueue", "Pending", "a=b,c"])
    if t == FieldDescriptor.TYPE_BYTES:
        return MANIFESTS
    if t == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if t in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return st.floats(width=64 if t == FieldDescriptor.TYPE_DOUBLE else 32)
    if t == FieldDescriptor.TYPE_ENUM:
        return st.integers(-3, 8)  # unknown values included: proto3 enums are open
    if t in (FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_SINT32, FieldDescriptor.TYPE_SFIXED32):
        return st.integers(-(2**31), 2**31 - 1)
    if t in (FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_FIXED32):
        return st.integers(0, 2**32 - 1)
    if t in (FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64):
        return st.integers(0, 2**64 - 1)
    return st.integers(-(2**63), 2**63 - 1)


def messages(cls: Any, depth: int = 0) -> st.SearchStrategy[Any]:
    """Any message of type ``cls``: every field optional, values from the whole range of its type."""
    if depth > 3:
        return st.just(cls())
    fields = {f.name: _field(f, depth) for f in cls.DESCRIPTOR.fields}
    return st.fixed_dictionaries({}, optional=fields).map(lambda kw: cls(**kw))


UNARY = [
    ("admin.Get", objects_pb2.ObjectRef), ("admin.List", objects_pb2.ListRequest),
    ("admin.Delete", objects_pb2.ObjectRef), ("admin.Apply", objects_pb2.ApplyRequest),
    ("workloads.Get", workloads_pb2.WorkloadRef), ("workloads.List", workloads_pb2.ListWorkloadsRequest),
    ("workloads.Delete", workloads_pb2.WorkloadRef), ("workloads.SetActive", workloads_pb2.SetActiveRequest),
    ("workloads.Create", workloads_pb2.CreateWorkloadRequest),
    ("workloads.CreateMany", workloads_pb2.CreateWorkloadsRequest), ("nodes.List", agent_pb2.ListNodesRequest),
    *((f"security.{m.name}", message_factory.GetMessageClass(m.input_type))
      for m in security_pb2.DESCRIPTOR.services_by_name["Security"].methods),
]


@settings(SETTINGS, max_examples=200)
@given(data=st.data(), which=st.sampled_from(UNARY))
def test_every_unary_request_is_answered_in_time_and_a_refusal_changes_nothing(
    server: Server, data: st.DataObject, which: tuple[str, Any]
) -> None:
    name, cls = which
    request = data.draw(messages(cls), label=name)
    stub, method = name.split(".")
    before = server.snapshot()
    code = _code(lambda: getattr(getattr(server, stub), method)(request, timeout=DEADLINE))
    assert code not in BROKEN, (name, request)
    if code is not grpc.StatusCode.OK:
        assert server.snapshot() == before


@SETTINGS
@given(data=st.data(), which=st.sampled_from(["watch", "logs", "stream"]))
def test_every_streaming_request_is_answered_and_a_refusal_changes_nothing(
    server: Server, data: st.DataObject, which: str
) -> None:
    before = server.snapshot()
    if which == "watch":
        request = data.draw(messages(workloads_pb2.WatchWorkloadsRequest))
        call = server.workloads.Watch(request, timeout=0.3)
    elif which == "logs":
        request = data.draw(messages(agent_pb2.LogsRequest))
        call = server.nodes.Logs(request, timeout=DEADLINE)
    else:
        requests = data.draw(st.lists(messages(workloads_pb2.CreateWorkloadsRequest), max_size=3))
        call = server.workloads.CreateStream(iter(requests), timeout=DEADLINE)
    code = _code(lambda: list(call))
    broken = BROKEN - {grpc.StatusCode.DEADLINE_EXCEEDED} if which == "watch" else BROKEN
    # A watch is a long poll: it may run to its deadline, but must not fail otherwise.
    assert code not in broken, (which, code)
    if which != "stream" and code is not grpc.StatusCode.OK:
        assert server.snapshot() == before


@SETTINGS
@given(first=st.lists(messages(agent_pb2.AgentMessage), min_size=0, max_size=2))
def test_an_agent_stream_with_garbage_first_messages_is_answered_in_time(
    server: Server, first: list[agent_pb2.AgentMessage]
) -> None:
    before = server.snapshot()
    call = server.agents.Connect(iter(first), timeout=DEADLINE)
    code = _code(lambda: list(call))
    assert code not in BROKEN, (code, first)
    if first and first[0].WhichOneof("kind") != "register":
        assert code is grpc.StatusCode.INVALID_ARGUMENT
    # Agent reports about pods no workload has change no object.
    assert server.snapshot() == before


def test_the_server_is_still_up_and_consistent_with_its_store(server: Server) -> None:
    listed = {(k, ns, n): rv for k, ns, n, rv in server.snapshot()}
    stored = {(o.kind, o.namespace, o.name): o.resource_version for o in server.store.load()}
    assert listed == stored
