"""The client library behind sluicectl: typed calls over the controller's gRPC API.

Objects come back as plain dicts in the Kubernetes shape (what
``sluicectl get -o json`` prints).  Errors raise :class:`ClientError` with
the server's status code and message.
"""

from __future__ import annotations

import asyncio
import builtins
import collections
import itertools
import json
import os
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

import grpc

from sluicegate.clientconfig import ClientConfig
from sluicegate.common.channels import open_channel
from sluicegate.common.leaders import Endpoints, leader_hint
from sluicegate.strictjson import DECODER, compact_encoder
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

DEFAULT_SERVER = "127.0.0.1:7420"
# Watch events the server may put in one message when several are waiting
# (the server's most): each message costs both sides far more than the
# events' bytes do, and a watch sends one message per turn of the server's
# loop, so while that loop is busy the batch size is the watch's throughput.
# With 256, a reader of every workload fell more than the server's backlog
# behind during a burst of creations and was ended (and re-listed 50,000
# workloads, 14 times in the large-scale bench).
WATCH_BATCH = 1000


def default_server(config: ClientConfig | None = None) -> str:
    """$SLUICEGATE_SERVER, else the config's servers (comma-separated), else 127.0.0.1:7420."""
    env = os.environ.get("SLUICEGATE_SERVER")
    if env:
        return env
    if config is not None and config.servers:
        return ",".join(config.servers)
    return DEFAULT_SERVER


def _server_ended(exc: grpc.aio.AioRpcError) -> bool:
    """A call the server ended in a way worth sending it again for: ``_transient``, or CANCELLED.

    The client cancels its calls through asyncio (CancelledError, not this
    error), so a CANCELLED status came from the other side: a controller
    shutting its port when its role changes sends GOAWAY, which cancels
    every call on it.  Only for calls this client did not cancel itself."""
    code = exc.code()
    return code is grpc.StatusCode.CANCELLED or _transient(code, exc.details() or "")


def _transient(code: grpc.StatusCode, details: str) -> bool:
    """A transport failure worth sending the call again for: UNAVAILABLE, or gRPC core's own INTERNAL
    (a stream cut while a server shuts its port, as a controller does when its role changes)."""
    return code is grpc.StatusCode.UNAVAILABLE or (
        code is grpc.StatusCode.INTERNAL and details.startswith("Internal error from Core"))


# Failing over: a call refused by a follower goes to the leader it names at
# once; a controller that does not answer is passed over for the next; after
# a whole round of failures the client waits (doubling from FAILOVER_PAUSE up
# to FAILOVER_PAUSE_CAP) until the call's own timeout runs out.
FAILOVER_PAUSE = 0.1
FAILOVER_PAUSE_CAP = 0.5


class ClientError(Exception):
    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        self.code = code
        self.message = message
        super().__init__(f"{code.name}: {message}")


@dataclass(frozen=True, slots=True)
class Document:
    body: str
    source: str


# Creations go out on one long-lived CreateStream call: a message each way
# per request costs the server about a third of what a call costs.  What
# queues while a request is being written goes out as the next one.
# Most creations one request carries.
CREATE_BATCH = 256

# Client.create_workloads: most documents sent and not yet taken by the
# caller (flow control: neither the server nor the caller falls further behind).
CREATE_WINDOW = 8192

_CreateFuture = asyncio.Future[workloads_pb2.CreateWorkloadResponse]
_STATUS_BY_NUMBER = {code.value[0]: code for code in grpc.StatusCode}


def _result_of(result: workloads_pb2.CreateWorkloadResult, fut: _CreateFuture) -> None:
    if fut.done():
        return
    if result.code == grpc.StatusCode.OK.value[0]:
        fut.set_result(result.response)
    else:
        fut.set_exception(ClientError(_STATUS_BY_NUMBER.get(result.code, grpc.StatusCode.UNKNOWN), result.message))


def _retrieve(fut: _CreateFuture) -> None:
    # A caller that stopped waiting (its deadline passed) never reads the
    # outcome; reading it here keeps asyncio from reporting it as lost.
    if not fut.cancelled():
        fut.exception()


class _CreateStream:
    """One CreateStream call: requests go out in order and are answered in order.

    ``submit`` queues a creation; a sender writes everything queued as one
    request whenever the previous write has finished.  Answers are matched to
    requests by order.  When the call ends, every unanswered creation fails
    with the call's status and the stream is ``closed``.
    """

    def __init__(self, stub: workloads_pb2_grpc.WorkloadsStub) -> None:
        self._call = stub.CreateStream()
        self._waiting: list[tuple[workloads_pb2.CreateWorkloadRequest, _CreateFuture]] = []
        self._sent: collections.deque[list[_CreateFuture]] = collections.deque()
        self._sender: asyncio.Task[None] | None = None
        self.closed = False
        # The UNAVAILABLE status the call ended with (a follower's refusal names the leader).
        self.refusal: grpc.aio.AioRpcError | None = None
        self._reader = asyncio.create_task(self._read(), name="sluicegate-create-stream")

    def submit(self, req: workloads_pb2.CreateWorkloadRequest) -> _CreateFuture:
        fut: _CreateFuture = asyncio.get_running_loop().create_future()
        fut.add_done_callback(_retrieve)
        self._waiting.append((req, fut))
        if self._sender is None:
            self._sender = asyncio.create_task(self._send(), name="sluicegate-create-send")
        return fut

    async def _send(self) -> None:
        try:
            while self._waiting and not self.closed:
                # A caller that gave up before its request left is not sent.
                batch = [(r, f) for r, f in self._waiting[:CREATE_BATCH] if not f.done()]
                del self._waiting[:CREATE_BATCH]
                if not batch:
                    continue
                self._sent.append([f for _, f in batch])
                await self._call.write(workloads_pb2.CreateWorkloadsRequest(items=[r for r, _ in batch]))
        except (grpc.aio.AioRpcError, asyncio.InvalidStateError, grpc.aio.UsageError):
            # The call is over; the reader learns why and answers everyone.
            pass
        finally:
            self._sender = None

    async def _read(self) -> None:
        error: Callable[[], Exception]
        try:
            async for resp in self._call:
                batch = self._sent.popleft() if self._sent else None
                if batch is None or len(batch) != len(resp.results):
                    self._call.cancel()
                    error = lambda: ClientError(  # noqa: E731
                        grpc.StatusCode.INTERNAL, "the server's answers did not match the requests sent")
                    break
                for fut, result in zip(batch, resp.results, strict=True):
                    _result_of(result, fut)
            else:
                error = lambda: ClientError(grpc.StatusCode.UNAVAILABLE, "the server ended the creation stream")  # noqa: E731
        except grpc.aio.AioRpcError as exc:
            code, details = exc.code(), exc.details() or ""
            if not self.closed and _server_ended(exc):
                # Reported as UNAVAILABLE so that create_workload fails over;
                # creations are idempotent by name.  (Once closed, the
                # cancellation was this client's own.)
                if code is grpc.StatusCode.CANCELLED:
                    code, details = grpc.StatusCode.UNAVAILABLE, f"the server cancelled the creation stream ({details})"
                self.refusal = exc
            if code is grpc.StatusCode.UNIMPLEMENTED:
                details = f"the server has no CreateStream (it is older than this client): {details}"
            error = lambda: ClientError(code, details)  # noqa: E731
        except asyncio.CancelledError:
            # The call was cancelled (the client is closing, or the call was
            # cut from outside): nothing more will be answered on it.
            self.end(lambda: ClientError(grpc.StatusCode.CANCELLED,
                                         "the creation stream was cancelled before the creation was answered"))
            raise
        self.end(error)

    def end(self, error: Callable[[], Exception]) -> None:
        """Fail every unanswered creation with a fresh ``error()``; no more are sent."""
        self.closed = True
        unanswered = [f for batch in self._sent for f in batch] + [f for _, f in self._waiting]
        self._sent.clear()
        self._waiting.clear()
        for fut in unanswered:
            if not fut.done():
                fut.set_exception(error())

    async def close(self) -> None:
        self.end(lambda: ClientError(grpc.StatusCode.CANCELLED,
                                     "the client was closed before the creation was answered"))
        self._call.cancel()
        for task in (self._reader, self._sender):
            if task is not None and not task.done():
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    pass


@dataclass(frozen=True, slots=True)
class Created:
    """One answer of :meth:`Client.create_workloads`: the workload and whether it is new."""

    namespace: str
    name: str
    resource_version: int
    # False: a workload of that name and the same spec existed, and nothing changed.
    created: bool


class _Typed(NamedTuple):
    """A Workload document read into the fields of a typed creation item (workloads_pb2.NewWorkload);
    a tuple, made once per document of a bulk creation."""

    api_version: str
    namespace: str
    name: str
    generate_name: str
    # metadata.labels, metadata.annotations and spec as JSON (b"": none).
    labels: bytes
    annotations: bytes
    spec: bytes
    source: str
    # The document as it came, for a server that does not read typed items.
    body: bytes
    document_source: str


# A document of a bulk creation as it goes out: its body's bytes (encoded when it is read) and source,
# or the typed item it was read into.
_Item = tuple[bytes, str] | _Typed

_TOP_KEYS = frozenset({"apiVersion", "kind", "metadata", "spec"})
_META_KEYS = frozenset({"name", "namespace", "generateName", "labels", "annotations"})
_json = compact_encoder()
_SPACE = " \t\n\r"
# Spec texts read valid (no repeated key, no NaN: a mapping), with their bytes: bulk-submitted documents
# share a few, which are then neither read nor written again.
_SPECS_SEEN_SIZE = 4096
_SPEC_SEEN_MAX = 16 * 1024
# Places where "spec" is written that are tried as the spec member's.
_SPEC_CUTS = 3
_specs_seen: dict[str, bytes] = {}


def _spec_last(body: str) -> tuple[object, bytes] | None:
    """For a document whose last member is the spec (as Kubernetes and most programs write one): its
    other members (read as the server reads documents) with the spec's own text as the typed item's spec.
    None when the text is not so cut (the caller reads it whole).

    The cut is checked, not guessed: the text before the spec's member, closed, must read as an object
    without a spec, and the spec's text must read on its own as a mapping, so the document is exactly
    those members plus the spec.  A spec text read valid once is not read again."""
    end = len(body.rstrip(_SPACE)) - 1
    if body[end] != "}":
        return None
    key = -1
    for _ in range(_SPEC_CUTS):  # "spec" may also be written before the member (a label's value)
        key = body.find('"spec"', key + 1)
        if key < 0:
            return None
        comma = len(body[:key].rstrip(_SPACE)) - 1
        after = body[key + 6:].lstrip(_SPACE)
        if body[comma] != "," or not after.startswith(":"):
            continue
        text = after[1:end - len(body) + len(after)].strip(_SPACE)
        spec = _specs_seen.get(text)
        try:
            if spec is None:
                if type(DECODER.decode(text)) is not dict:
                    continue
                spec = text.encode()
                if len(text) <= _SPEC_SEEN_MAX:
                    if len(_specs_seen) >= _SPECS_SEEN_SIZE:
                        _specs_seen.clear()  # (whole: safe where several threads create)
                    _specs_seen[text] = spec
            rest = DECODER.decode(body[:comma] + "}")
        except (ValueError, RecursionError):
            continue  # not cut there (or not JSON: reading it whole says)
        if type(rest) is not dict or "spec" in rest:
            return None
        rest["spec"] = {}  # (read by the caller for its type only: the item carries the text)
        return rest, spec
    return None


def _string_map(value: object) -> bool:
    return type(value) is dict and all(type(v) is str for v in value.values())


def _typed(body: str, source: str, raw: bytes) -> _Typed | None:
    """The typed creation item for a JSON Workload document whose metadata has only the item's fields and
    that has no status; None for any other (it goes as the document, and the server reads it as ever).

    The server decodes each distinct spec of typed items once, and so skips parsing and checking
    the spec that bulk-submitted workloads share.  The document is read with the decoder the server
    reads documents with, so a repeated key or NaN still fails (as the document, where the server says
    so); a spec that comes last goes as its own text (see _spec_last), another one written compactly."""
    if not body.startswith("{") or "\\ud" in body or "\\uD" in body:
        return None  # YAML, or a lone surrogate escape (not sendable as a proto string): as a document
    try:
        split = _spec_last(body)
        if split is not None:
            doc, spec_bytes = split
        else:
            doc = DECODER.decode(body)
            spec_bytes = b""
    except (ValueError, RecursionError):
        return None
    if type(doc) is not dict or doc.get("kind") != "Workload" or not doc.keys() <= _TOP_KEYS:
        return None
    api, meta, spec = doc.get("apiVersion"), doc.get("metadata"), doc.get("spec")
    if type(api) is not str or type(meta) is not dict or type(spec) is not dict or not meta.keys() <= _META_KEYS:
        return None
    spec_bytes = spec_bytes or _json(spec).encode()
    name, namespace = meta.get("name"), meta.get("namespace", "")
    generate_name = meta.get("generateName", "")
    labels, annotations = meta.get("labels", {}), meta.get("annotations", {})
    if (type(namespace) is not str or type(generate_name) is not str
            or not (type(name) is str and name or name is None and generate_name)
            or not _string_map(labels) or not _string_map(annotations)):
        return None
    # Named in errors as the server names the document (its first, of a text without a source "request#0").
    named = f"{source or 'request#0'}#1"
    return _Typed(api, namespace, name or "", generate_name, _json(labels).encode() if labels else b"",
                  _json(annotations).encode() if annotations else b"", spec_bytes, named, raw, source)


def _bulk_request(batch: Iterable[_Item], *, typed: bool) -> workloads_pb2.CreateWorkloadsRequest:
    """The request for a batch, built in place: a document message made on its own and then put into the
    request is copied there (and its request message again), several times the cost of filling it.
    ``typed`` False: typed items go as the documents they were read from."""
    request = workloads_pb2.CreateWorkloadsRequest(brief=True)
    add = request.items.add
    for item in batch:
        if not isinstance(item, _Typed):
            doc = add().document
            doc.body, doc.source = item
            continue
        if not typed:
            doc = add().document
            doc.body, doc.source = item.body, item.document_source
            continue
        w = add().workload
        w.api_version = item.api_version
        w.namespace = item.namespace
        if item.name:
            w.name = item.name
        else:
            w.generate_name = item.generate_name
        if item.labels:
            w.labels = item.labels
        if item.annotations:
            w.annotations = item.annotations
        w.spec = item.spec
        w.source = item.source
    return request


def _document(d: Document) -> _Item:
    return d.body.encode(), d.source


def _item(d: Document) -> _Item:
    raw = d.body.encode()  # text that is not UTF-8 fails here, as it always did, typed or not
    return _typed(d.body, d.source, raw) or (raw, d.source)


def _bulk_result(r: workloads_pb2.CreateWorkloadResult) -> Created | ClientError:
    if r.code != 0:
        return ClientError(_STATUS_BY_NUMBER.get(r.code, grpc.StatusCode.UNKNOWN), r.message)
    w = r.response.workload
    return Created(w.namespace, w.name, w.resource_version, r.response.created)


class _BulkCreate:
    """The state of one ``create_workloads``: documents read but not sent, batches sent but not answered.

    A feeder reads the documents (``window`` ahead at most); per CreateStream
    call a sender writes what waits, up to CREATE_BATCH per request, while
    fewer than ``window`` are sent and not yet taken by the caller (so a slow
    reader holds the stream back as a slow server does), and a reader
    matches answers to the batches in order and hands them to ``answers``.
    """

    def __init__(self, documents: Iterable[Document] | AsyncIterable[Document], window: int, *,
                 typed: bool = True) -> None:
        self.documents = documents
        self.item = _item if typed else _document
        self.window = max(1, window)
        self.waiting: collections.deque[_Item] = collections.deque()
        self.sent: collections.deque[list[_Item]] = collections.deque()
        # Sent and not answered (what a new call sends again); sent and not yet taken by the caller.
        self.unanswered = 0
        self.untaken = 0
        self.source_done = False
        # Set when there may be something to send (documents came, the window opened, the source ended).
        self.wake = asyncio.Event()
        # Set when the feeder may read more documents.
        self.room = asyncio.Event()
        self.room.set()
        # Lists of answers in order; None once the call ended with everything answered.
        self.answers: asyncio.Queue[list[Created | ClientError] | None] = asyncio.Queue()
        # Whether this call's server reads typed items: None until its answer to an empty request
        # (sent before the first typed item) says; ``probed`` is set then.
        self.typed: bool | None = None
        self.probed = asyncio.Event()

    async def _hold(self) -> None:
        if len(self.waiting) >= self.window:
            self.wake.set()
            self.room.clear()
            await self.room.wait()

    async def feed(self) -> None:
        if isinstance(self.documents, AsyncIterable):
            async for d in self.documents:
                self.waiting.append(self.item(d))
                self.wake.set()
                await self._hold()
        else:
            for d in self.documents:
                self.waiting.append(self.item(d))
                await self._hold()
        self.source_done = True
        self.wake.set()

    async def send(self, call: Any) -> None:
        self.typed = None
        self.probed.clear()
        try:
            while True:
                while not self.waiting or self.untaken >= self.window:
                    if self.source_done and not self.waiting:
                        await call.done_writing()
                        return
                    self.wake.clear()
                    await self.wake.wait()
                if self.typed is None and any(type(item) is _Typed for item in itertools.islice(
                        self.waiting, min(CREATE_BATCH, len(self.waiting)))):
                    # Asked once per call, one round trip: an older server finds no document in a typed item.
                    self.sent.append([])
                    await call.write(workloads_pb2.CreateWorkloadsRequest(brief=True))
                    await self.probed.wait()
                n = min(CREATE_BATCH, len(self.waiting), self.window - self.untaken)
                batch = [self.waiting.popleft() for _ in range(n)]
                self.room.set()
                self.sent.append(batch)
                self.unanswered += n
                self.untaken += n
                await call.write(_bulk_request(batch, typed=bool(self.typed)))
        except (grpc.aio.AioRpcError, asyncio.InvalidStateError, grpc.aio.UsageError):
            pass  # the call is over; the reader learns why

    async def read(self, call: Any) -> None:
        """Answers until the call ends; raises its AioRpcError (or ClientError) when it failed."""
        async for resp in call:
            batch = self.sent.popleft() if self.sent else None
            if batch is None or len(batch) != len(resp.results):
                call.cancel()
                raise ClientError(grpc.StatusCode.INTERNAL, "the server's answers did not match the requests sent")
            if not batch:  # the answer to the empty request
                self.typed = resp.typed_items
                self.probed.set()
                continue
            self.unanswered -= len(batch)
            self.answers.put_nowait([_bulk_result(r) for r in resp.results])
        if self.sent or self.waiting or not self.source_done:
            raise ClientError(grpc.StatusCode.UNAVAILABLE, "the server ended the creation stream")
        self.answers.put_nowait(None)

    def resend(self) -> None:
        """After a call failed: its unanswered batches go out again first, in order, on the next call."""
        for batch in reversed(self.sent):
            self.waiting.extendleft(reversed(batch))
        self.sent.clear()
        self.untaken -= self.unanswered
        self.unanswered = 0

    def taken(self, n: int) -> None:
        """The caller took ``n`` answers: as many more may go out."""
        self.untaken -= n
        self.wake.set()


def _obj(o: objects_pb2.Object) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(o.json)
    return doc


class Client:
    """Async client; use as ``async with Client(addr) as c: ...``."""

    def __init__(self, server: str | None = None, *, timeout: float = 30.0, config: ClientConfig | None = None) -> None:
        """``server``: HOST:PORT, or several comma-separated (controllers sharing a store: the client
        finds the leader and follows it across takeovers).  ``config``: credentials and servers (see
        :mod:`sluicegate.clientconfig`); None is plaintext."""
        self._endpoints = Endpoints(server or default_server(config))
        self.timeout = timeout
        self._config = config
        # Creations share this stream (see create_workload); a new one opens when it ended.
        self._create_stream: _CreateStream | None = None
        self._old_channels: builtins.list[grpc.aio.Channel] = []
        self._open(self._endpoints.current)

    @property
    def server(self) -> str:
        """The controller this client talks to now."""
        return self._endpoints.current

    def _open(self, address: str) -> None:
        config = self._config
        self._channel = open_channel(
            address,
            ca=config.ca if config else None, cert=config.cert if config else None,
            key=config.key if config else None, token=config.token if config else None,
            options=[("grpc.max_receive_message_length", 256 * 1024 * 1024)],
        )
        self._address = address
        self._security = security_pb2_grpc.SecurityStub(self._channel)
        self._admin = objects_pb2_grpc.AdminStub(self._channel)
        self._workloads = workloads_pb2_grpc.WorkloadsStub(self._channel)
        self._nodes = agent_pb2_grpc.NodesStub(self._channel)

    def _switch(self) -> None:
        """Talk to ``self._endpoints.current`` from now on (calls in flight finish on the old channel)."""
        if self._endpoints.current == self._address:
            return
        self._old_channels.append(self._channel)
        if self._create_stream is not None:
            self._create_stream.end(lambda: ClientError(grpc.StatusCode.UNAVAILABLE, "switching controllers"))
            self._create_stream = None
        self._open(self._endpoints.current)

    async def _failover(self, exc: grpc.aio.AioRpcError | None, deadline: float, pause: float) -> float | None:
        """After UNAVAILABLE: move to the leader or the next controller and return the next pause,
        or None when the call should fail now (one controller that does not answer, or out of time)."""
        hint = leader_hint(exc, token=bool(self._config and self._config.token)) if exc is not None else None
        details = (exc.details() or "") if exc is not None else ""
        loop = asyncio.get_running_loop()
        if hint is not None and hint != self._address:
            self._endpoints.redirect(hint)
            self._switch()
            return pause
        if not self._endpoints.several and hint is None and "no leader" not in details:
            return None
        round_failed = self._endpoints.failed() if self._endpoints.several else True
        self._switch()
        if round_failed:
            if loop.time() + pause >= deadline:
                return None
            await asyncio.sleep(pause)
            return min(pause * 2, FAILOVER_PAUSE_CAP)
        return pause

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._create_stream is not None:
            await self._create_stream.close()
            self._create_stream = None
        for ch in [*self._old_channels, self._channel]:
            await ch.close()
        self._old_channels.clear()

    def _method_of(self, fn: Any) -> tuple[str, str]:
        """(stub attribute, method name) of a bound stub method, to call it again on another channel."""
        for stub_attr in ("_admin", "_workloads", "_nodes", "_security"):
            for name, value in vars(getattr(self, stub_attr)).items():
                if value is fn:
                    return stub_attr, name
        raise ValueError(f"{fn!r} is not a method of this client's stubs")

    async def _call(self, fn: Any, request: Any) -> Any:
        """One unary call; on UNAVAILABLE it is sent to the leader (or the next controller) until the timeout.

        Every call is safe to resend: reads are, and each mutation is refused
        without effect by a follower, or names its object (a creation sent
        again finds the workload it made and answers created=False)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        pause = FAILOVER_PAUSE
        for _ in range(1000):
            try:
                return await fn(request, timeout=max(0.001, deadline - loop.time()))
            except grpc.aio.AioRpcError as exc:
                if not _server_ended(exc):
                    raise ClientError(exc.code(), exc.details() or "") from None
                # Found on the stubs in use before _failover replaces them (only when failing over).
                stub_attr, name = self._method_of(fn)
                next_pause = await self._failover(exc, deadline, pause)
                if next_pause is None:
                    raise ClientError(exc.code(), exc.details() or "") from None
                pause = next_pause
                fn = getattr(getattr(self, stub_attr), name)
        raise ClientError(grpc.StatusCode.UNAVAILABLE, "no controller accepted the call")

    async def apply(self, documents: Iterable[Document], *, dry_run: bool = False) -> list[tuple[str, str, str, str]]:
        req = objects_pb2.ApplyRequest(
            documents=[objects_pb2.Document(body=d.body.encode(), source=d.source) for d in documents],
            dry_run=dry_run,
        )
        resp = await self._call(self._admin.Apply, req)
        return [(r.ref.kind, r.ref.namespace, r.ref.name, r.action) for r in resp.results]

    async def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any]:
        resp = await self._call(self._admin.Get, objects_pb2.ObjectRef(kind=kind, namespace=namespace, name=name))
        return _obj(resp)

    async def list(self, kind: str, namespace: str = "", label_selector: str = "") -> list[dict[str, Any]]:
        resp = await self._call(
            self._admin.List, objects_pb2.ListRequest(kind=kind, namespace=namespace, label_selector=label_selector)
        )
        return [_obj(o) for o in resp.objects]

    async def delete(self, kind: str, name: str, namespace: str = "") -> bool:
        resp = await self._call(self._admin.Delete, objects_pb2.ObjectRef(kind=kind, namespace=namespace, name=name))
        return bool(resp.deleted)

    async def create_workload(self, document: Document) -> tuple[dict[str, Any], bool]:
        """Create one workload; returns it and whether it is new (False: it existed by that name).

        Creations share one CreateStream call: a lone creation goes out at
        once, and those that queue meanwhile go out together.  The server
        answers each as its own Create, after its write committed.
        """
        req = workloads_pb2.CreateWorkloadRequest(
            document=objects_pb2.Document(body=document.body.encode(), source=document.source)
        )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        pause = FAILOVER_PAUSE
        for _ in range(1000):
            stream = self._create_stream
            if stream is None or stream.closed:
                stream = self._create_stream = _CreateStream(self._workloads)
            fut = stream.submit(req)
            try:
                # Shielded: a caller that stops waiting leaves its creation in
                # its place in the stream, so later answers still match.
                resp = await asyncio.wait_for(asyncio.shield(fut), max(0.001, deadline - loop.time()))
            except TimeoutError:
                raise ClientError(grpc.StatusCode.DEADLINE_EXCEEDED,
                                  f"no answer within {self.timeout:g} s; the workload may have been created") from None
            except ClientError as exc:
                # The stream ended (a follower refused it, or the leader went away): send it again
                # where the leader is; a creation that did commit is found by name (created=False).
                if not _transient(exc.code, exc.message):
                    raise
                next_pause = await self._failover(stream.refusal, deadline, pause)
                if next_pause is None:
                    raise
                pause = next_pause
                continue
            return _obj(resp.workload), bool(resp.created)
        raise ClientError(grpc.StatusCode.UNAVAILABLE, "no controller accepted the creation")

    async def create_workloads(
        self, documents: Iterable[Document] | AsyncIterable[Document], *, window: int = CREATE_WINDOW,
        typed: bool = True,
    ) -> AsyncIterator[Created | ClientError]:
        """Create many workloads: one answer per document, in their order, as the server gives them.

        Each answer is a :class:`Created` or the ClientError that document's
        own create would raise (the others go on).  The documents travel on a
        CreateStream call of their own, as fast as they come (an async
        iterable may pace them), CREATE_BATCH to a request, with at most
        ``window`` sent and not yet taken by the caller; answers are brief
        (no JSON).  When the call
        ends UNAVAILABLE (a follower, a takeover) the unanswered ones go again
        to the leader: one that had committed answers created=False.  Raises
        ClientError when the stream itself fails (refused, no controller).

        A JSON Workload document whose metadata holds only a name (or
        generateName), namespace, labels and annotations, and that has no
        status, goes as a typed item (CreateWorkloadRequest.workload) to a
        server that reads them: created the same, with the same errors, at
        a fraction of the server's cost, as the server decodes each distinct
        spec once.  ``typed`` False sends every document as it is.
        """
        bulk = _BulkCreate(documents, window, typed=typed)
        loop = asyncio.get_running_loop()
        pause = FAILOVER_PAUSE
        feeder = asyncio.create_task(bulk.feed(), name="sluicegate-bulk-feed")
        tasks: list[asyncio.Task[None]] = []
        call: Any = None
        try:
            for _ in range(1000):
                call = self._workloads.CreateStream()
                sender = asyncio.create_task(bulk.send(call), name="sluicegate-bulk-send")
                reader = asyncio.create_task(bulk.read(call), name="sluicegate-bulk-read")
                tasks = [sender, reader]
                failure: BaseException | None = None
                while True:
                    got = asyncio.ensure_future(bulk.answers.get())
                    watched = [got, reader] if feeder.done() else [got, reader, feeder]
                    await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
                    bad_source = feeder.exception() if feeder.done() else None
                    if bad_source is not None:
                        got.cancel()
                        raise bad_source  # the caller's iterable failed: its error, unchanged
                    if not got.done():
                        got.cancel()
                        if reader.done() and bulk.answers.empty():
                            failure = reader.exception()
                            break
                        continue
                    answers = got.result()
                    if answers is None:
                        return
                    for a in answers:
                        yield a
                    bulk.taken(len(answers))
                    if answers:
                        pause = FAILOVER_PAUSE
                call.cancel()
                sender.cancel()
                exc = failure
                if isinstance(exc, ClientError):
                    if not _transient(exc.code, exc.message):
                        raise exc
                    rpc = None
                elif isinstance(exc, grpc.aio.AioRpcError):
                    code, details = exc.code(), exc.details() or ""
                    if not _server_ended(exc):
                        if code is grpc.StatusCode.UNIMPLEMENTED:
                            details = f"the server has no CreateStream (it is older than this client): {details}"
                        raise ClientError(code, details) from None
                    rpc = exc
                elif exc is not None:
                    raise exc
                else:
                    rpc = None
                bulk.resend()
                next_pause = await self._failover(rpc, loop.time() + self.timeout, pause)
                if next_pause is None:
                    raise ClientError(grpc.StatusCode.UNAVAILABLE, "the creation stream ended and no controller "
                                      "took it up") from None
                pause = next_pause
            raise ClientError(grpc.StatusCode.UNAVAILABLE, "no controller accepted the creations")
        finally:
            # Also when the caller stopped reading early: the call ends here, not when the client closes.
            if call is not None:
                call.cancel()
            for t in (feeder, *tasks):
                t.cancel()
            await asyncio.gather(feeder, *tasks, return_exceptions=True)

    async def get_workload(self, name: str, namespace: str = "default") -> dict[str, Any]:
        resp = await self._call(self._workloads.Get, workloads_pb2.WorkloadRef(namespace=namespace, name=name))
        return _obj(resp)

    async def list_workloads(
        self,
        *,
        namespace: str = "",
        local_queue: str = "",
        cluster_queue: str = "",
        state: str = "",
        label_selector: str = "",
        limit: int = 0,
    ) -> builtins.list[dict[str, Any]]:
        req = workloads_pb2.ListWorkloadsRequest(
            namespace=namespace,
            local_queue=local_queue,
            cluster_queue=cluster_queue,
            state=state,
            label_selector=label_selector,
            limit=limit,
        )
        resp = await self._call(self._workloads.List, req)
        return [_obj(o) for o in resp.objects]

    async def delete_workload(self, name: str, namespace: str = "default") -> bool:
        resp = await self._call(self._workloads.Delete, workloads_pb2.WorkloadRef(namespace=namespace, name=name))
        return bool(resp.deleted)

    async def set_active(self, name: str, active: bool, namespace: str = "default") -> dict[str, Any]:
        resp = await self._call(
            self._workloads.SetActive, workloads_pb2.SetActiveRequest(namespace=namespace, name=name, active=active)
        )
        return _obj(resp)

    async def pending(
        self, *, cluster_queue: str = "", local_queue: str = "", namespace: str = "", offset: int = 0, limit: int = 0,
    ) -> builtins.list[dict[str, Any]]:
        """Kueue's visibility API: pending workloads of a ClusterQueue or a LocalQueue, in the order tried."""
        resp = await self._call(self._workloads.Pending, workloads_pb2.PendingWorkloadsRequest(
            cluster_queue=cluster_queue, local_queue=local_queue, namespace=namespace, offset=offset, limit=limit))
        return [_pending_dict(p) for p in resp.items]

    async def position(self, name: str, namespace: str = "default") -> dict[str, Any] | None:
        """Where a pending workload stands (None when it waits in no queue)."""
        resp = await self._call(self._workloads.Position, workloads_pb2.WorkloadRef(namespace=namespace, name=name))
        return _pending_dict(resp.workload) if resp.pending else None

    async def watch_workloads(
        self, *, namespace: str = "", name: str = "", send_initial: bool = True
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """Yield (event type, workload) until the caller stops iterating.

        Across a leader takeover the watch starts again on the new leader,
        with its initial events (as a Kubernetes watch re-lists)."""
        names = {v: k for k, v in workloads_pb2.WorkloadEvent.Type.items()}
        async for batch in self.watch_workload_events(namespace=namespace, name=name, send_initial=send_initial):
            for ev in batch:
                yield names[ev.type], _obj(ev.workload)

    async def watch_workload_events(
        self, *, namespace: str = "", name: str = "", send_initial: bool = True
    ) -> AsyncIterator[builtins.list[workloads_pb2.WorkloadEvent]]:
        """The watch's events undecoded, as the server batched them (each message's events, in order).

        For a reader that needs only some events' bodies (``ev.workload.json``)
        or their timing (``ev.time``: when the controller published it).
        Restarts across a leader takeover like :meth:`watch_workloads`.  A
        reader that falls further behind than the controller keeps events for
        gets ClientError FAILED_PRECONDITION "watch expired ..." (as Kubernetes
        ends such a watch): it resumes by watching again with
        ``send_initial=True``, which lists every workload first."""
        loop = asyncio.get_running_loop()
        initial = send_initial
        for _ in range(1000):
            call = self._workloads.Watch(
                workloads_pb2.WatchWorkloadsRequest(
                    namespace=namespace, name=name, send_initial=initial, max_batch=WATCH_BATCH)
            )
            try:
                async for ev in call:
                    yield [ev, *ev.more] if ev.more else [ev]
                return
            except grpc.aio.AioRpcError as exc:
                if not _server_ended(exc) or (
                    await self._failover(exc, loop.time() + self.timeout, FAILOVER_PAUSE) is None
                ):
                    raise ClientError(exc.code(), exc.details() or "") from None
                initial = True
            finally:
                call.cancel()

    async def list_nodes(self) -> builtins.list[dict[str, Any]]:
        resp = await self._call(self._nodes.List, agent_pb2.ListNodesRequest())
        out = []
        for n in resp.nodes:
            out.append({
                "name": n.node.name, "labels": dict(n.node.labels), "ready": n.ready,
                "notReadyReason": n.not_ready_reason, "lastHeartbeat": n.last_heartbeat,
                "capacity": dict(n.node.capacity), "allocatable": dict(n.node.allocatable),
                "requested": dict(n.requested), "pods": n.pods, "agentVersion": n.node.agent_version,
                "healthAddress": n.node.health_address,
                "taints": [{"key": t.key, **({"value": t.value} if t.value else {}), "effect": t.effect}
                           for t in n.node.taints],
                "usage": {"memoryTotal": n.usage.memory_total, "memoryAvailable": n.usage.memory_available,
                          "cpuUsageCores": n.usage.cpu_usage_cores, "nodefsAvailable": n.usage.nodefs_available,
                          "conditions": list(n.usage.conditions)},
            })
        return out

    async def logs(
        self, workload: str, *, namespace: str = "default", pod: str = "", container: str = "", follow: bool = False
    ) -> AsyncIterator[tuple[str, str, bytes]]:
        """Yield (pod, container, bytes) as the agents send them."""
        call = self._nodes.Logs(
            agent_pb2.LogsRequest(namespace=namespace, workload=workload, pod=pod, container=container, follow=follow),
            timeout=None if follow else self.timeout,
        )
        try:
            async for line in call:
                yield line.pod, line.container, line.data
        except grpc.aio.AioRpcError as exc:
            raise ClientError(exc.code(), exc.details() or "") from None
        finally:
            call.cancel()

    # ------------------------------------------------------------ security

    async def whoami(self) -> dict[str, Any]:
        r = await self._call(self._security.WhoAmI, security_pb2.WhoAmIRequest())
        return {"user": r.user, "groups": list(r.groups), "method": r.method, "serial": r.serial}

    async def create_token(self, *, ttl: float = 0.0, uses: int = 0, description: str = "") -> dict[str, Any]:
        r = await self._call(self._security.CreateToken, security_pb2.CreateTokenRequest(
            ttl_seconds=ttl, uses=uses, description=description))
        return {"token": r.token, "caCertHash": r.ca_cert_hash, **_token_dict(r.info)}

    async def list_tokens(self) -> builtins.list[dict[str, Any]]:
        r = await self._call(self._security.ListTokens, security_pb2.ListTokensRequest())
        return [_token_dict(t) for t in r.tokens]

    async def delete_token(self, token_id: str) -> bool:
        r = await self._call(self._security.DeleteToken, security_pb2.DeleteTokenRequest(id=token_id))
        return bool(r.deleted)

    async def issue_user_certificate(
        self, user: str, groups: builtins.list[str], csr: bytes, *, ttl: float = 0.0,
    ) -> tuple[bytes, bytes, str]:
        r = await self._call(self._security.IssueUserCertificate, security_pb2.IssueUserCertificateRequest(
            user=user, groups=groups, csr=csr, ttl_seconds=ttl))
        return r.certificate, r.ca_certificate, r.serial

    async def revoke_node(self, name: str) -> builtins.list[str]:
        r = await self._call(self._security.RevokeNode, security_pb2.RevokeNodeRequest(name=name))
        return list(r.serials)

    async def revoke_certificate(self, serial: str) -> builtins.list[str]:
        r = await self._call(self._security.RevokeCertificate, security_pb2.RevokeCertificateRequest(serial=serial))
        return list(r.serials)


def _pending_dict(p: workloads_pb2.PendingWorkload) -> dict[str, Any]:
    """Kueue's visibility PendingWorkload, as ``kubectl get --raw`` shows it."""
    return {
        "metadata": {"name": p.name, "namespace": p.namespace, "creationTimestamp": p.creation_timestamp},
        "priority": p.priority, "localQueueName": p.local_queue_name, "clusterQueueName": p.cluster_queue,
        "positionInClusterQueue": p.position_in_cluster_queue, "positionInLocalQueue": p.position_in_local_queue,
        "reason": p.reason, "message": p.message,
    }


def _token_dict(t: security_pb2.BootstrapToken) -> dict[str, Any]:
    return {"id": t.id, "expiresAt": t.expires_at, "usesLeft": t.uses_left, "description": t.description,
            "createdBy": t.created_by, "createdAt": t.created_at}
