"""The Workloads service: create (idempotent), get, list, watch, delete, set active."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import aclosing

import grpc

from sluicegate.controller.errors import (
    ControllerError,
    FailedPrecondition,
    InvalidArgument,
    PermissionDenied,
)
from sluicegate.controller.manager import Manager
from sluicegate.controller.queueing import pending_positions
from sluicegate.controller.queues import Position
from sluicegate.controller.service.codec import documents_from_proto, object_to_proto
from sluicegate.controller.service.errors import Context, handled, status_for
from sluicegate.controller.service.gate import Gate
from sluicegate.controller.service.rawwire import add_with_raw_responses
from sluicegate.controller.service.watchwire import batch_bytes, batch_message
from sluicegate.controller.store import StoreError
from sluicegate.controller.watch import WatchExpired
from sluicegate.manifest.generate import NameTaken, draw_name, generate_name
from sluicegate.manifest.loader import RawDocument
from sluicegate.manifest.new_workload import NewWorkload
from sluicegate.manifest.selectors import Selector, SelectorError, parse_selector
from sluicegate.manifest.timefmt import format_rfc3339
from sluicegate.model.names import workload_key
from sluicegate.security.audit import AuditRecord
from sluicegate.security.identity import Principal
from sluicegate.v1 import objects_pb2, workloads_pb2, workloads_pb2_grpc

log = logging.getLogger(__name__)

# Most creations of one request handled in one turn of the loop (see _create_in_parts).
CREATE_PART = 512
# Requests of a CreateStream call read while one is being created (see CreateStream).
CREATE_READ_AHEAD = 4

_STATES = ("", "Pending", "QuotaReserved", "Admitted", "Finished", "Inactive")
# Most watch events one message carries (WatchWorkloadsRequest.max_batch): a
# workload's JSON is a few KiB, so a full message stays within a few MiB.
MAX_WATCH_BATCH = 1000


def workload_ref(doc: RawDocument) -> tuple[str, str]:
    """(namespace, name) of the Workload a document (a Workload or a batch/v1 Job) creates.

    The decoder reads the same fields (an empty or missing namespace is
    "default"); a namespace that is not a string fails decoding, so nothing
    is created where this guessed.
    """
    meta = doc.body.get("metadata")
    if not isinstance(meta, dict):
        return "default", ""
    ns, name = meta.get("namespace"), meta.get("name")
    return (ns if isinstance(ns, str) and ns else "default"), (name if isinstance(name, str) else "")


def _ref(item: RawDocument | NewWorkload) -> tuple[str, str]:
    return item.ref if isinstance(item, NewWorkload) else workload_ref(item)


SERVICE = "sluicegate.v1.Workloads"


def add_workloads_servicer(servicer: WorkloadsServicer, server: grpc.aio.Server) -> None:
    """Register the Workloads service as the generated code does, except that Watch's messages
    are handed to the transport as the bytes watchwire joined (no message is built per batch, only
    to be serialized again: for a watch of every workload that was most of sending a batch)."""
    add_with_raw_responses(workloads_pb2_grpc.add_WorkloadsServicer_to_server, servicer, server, SERVICE, "Watch")
    servicer.raw_watch = True


class WorkloadsServicer(workloads_pb2_grpc.WorkloadsServicer):
    def __init__(self, manager: Manager, gate: Gate | None = None) -> None:
        self.m = manager
        self.gate = gate or Gate()
        # Set by add_workloads_servicer: Watch writes bytes (else messages, for the generated serializer).
        self.raw_watch = False

    @handled
    async def Create(
        self, request: workloads_pb2.CreateWorkloadRequest, context: Context
    ) -> workloads_pb2.CreateWorkloadResponse:
        p = self.gate.authenticate(context)
        try:
            item = self._item(request, set())
        except InvalidArgument as exc:
            self.gate.audit(p, "create", "Workload", "", "", context, exc=exc)
            raise
        with self.gate.mutation(p, "create", "Workload", *_ref(item), context) as mut:
            wl, created = self.m.create_workload(item)
            mut.detail = "created" if created else "existing"
        return workloads_pb2.CreateWorkloadResponse(workload=object_to_proto(self.m, wl), created=created)

    @handled
    async def CreateMany(
        self, request: workloads_pb2.CreateWorkloadsRequest, context: Context
    ) -> workloads_pb2.CreateWorkloadsResponse:
        return await self._create_in_parts(request, self.gate.authenticate(context), context)

    async def _create_in_parts(
        self, request: workloads_pb2.CreateWorkloadsRequest, p: Principal, context: Context
    ) -> workloads_pb2.CreateWorkloadsResponse:
        """A request's creations, at most CREATE_PART per turn of the loop.

        Each creation costs a few hundred µs of the loop; a client's request
        of thousands would otherwise hold everything else (agents'
        heartbeats, cycles, other clients) for a second.  Each part is
        stored on its own: a store failure after the first part fails only
        that part's items (the earlier ones are stored and answered).
        """
        if len(request.items) <= CREATE_PART:
            return self._create_many(request, p, context)
        results: list[workloads_pb2.CreateWorkloadResult] = []
        for start in range(0, len(request.items), CREATE_PART):
            if start:
                await asyncio.sleep(0)
            part = workloads_pb2.CreateWorkloadsRequest(brief=request.brief)
            part.items.extend(request.items[start:start + CREATE_PART])
            try:
                results.extend(self._create_many(part, p, context).results)
            except Exception as exc:
                if not start:
                    raise  # nothing stored yet: the request fails as a whole, as a one-part one would
                if not isinstance(exc, (InvalidArgument, StoreError)):
                    log.exception("a creation request failed")
                results.extend([_failed(exc)] * len(part.items))
        return workloads_pb2.CreateWorkloadsResponse(results=results, typed_items=True)

    async def CreateStream(
        self, request_iterator: AsyncIterator[workloads_pb2.CreateWorkloadsRequest], context: Context
    ) -> None:
        """Each request's creations, answered in order, the call's reading and writing overlapping them.

        A request read (or an answer written) completes on the loop a turn
        after the transport finished it: reading, creating and answering in
        turn, a busy loop spent its turns waiting on the stream rather than
        creating.  Here a reader keeps up to CREATE_READ_AHEAD requests
        waiting and a writer sends the answers, so each turn the creator gets
        creates (it still lets the loop run between requests, and between the
        parts of a large one).
        """
        try:
            p = self.gate.authenticate(context)
        except ControllerError as exc:
            code, msg = status_for(exc)
            await context.abort(code, msg)
        requests: asyncio.Queue[workloads_pb2.CreateWorkloadsRequest | BaseException | None] = asyncio.Queue(
            CREATE_READ_AHEAD)
        answers: asyncio.Queue[workloads_pb2.CreateWorkloadsResponse | None] = asyncio.Queue()

        async def read() -> None:
            try:
                async for request in request_iterator:
                    await requests.put(request)
            except Exception as exc:  # the call failed: the creator raises it
                await requests.put(exc)
            else:
                await requests.put(None)

        # Whether an answer is being written (by the writer or by the creator itself, see below).
        writing = False

        async def write() -> None:
            nonlocal writing
            while (response := await answers.get()) is not None:
                writing = True
                try:
                    await context.write(response)
                finally:
                    writing = False

        reader = asyncio.create_task(read(), name="CreateStream-read")
        writer = asyncio.create_task(write(), name="CreateStream-write")
        try:
            while (request := await requests.get()) is not None:
                if isinstance(request, BaseException):
                    raise request
                try:
                    response = await self._create_in_parts(request, p, context)
                except Exception as exc:
                    # Only this request failed (a store failure stored none of it);
                    # the client's later requests still deserve their answers.
                    if not isinstance(exc, (InvalidArgument, StoreError)):
                        log.exception("CreateStream: a request failed")
                    failed = _failed(exc)
                    response = workloads_pb2.CreateWorkloadsResponse(results=[failed] * len(request.items),
                                                                        typed_items=True)
                if writer.done():
                    break  # the call is over (its writes fail): the writer's error ends it below
                if not writing and answers.empty():
                    # Nothing ahead of it: written now, before what the creation woke (a scheduling
                    # cycle) takes the loop; handed to the writer, a lone creation's answer waited for it.
                    writing = True
                    try:
                        await context.write(response)
                    finally:
                        writing = False
                else:
                    answers.put_nowait(response)
                    await asyncio.sleep(0)  # the loop's other work runs between requests
            answers.put_nowait(None)
            await writer  # every answer written before the call ends (its status follows them)
        finally:
            for task in (reader, writer):
                task.cancel()
            await asyncio.gather(reader, writer, return_exceptions=True)

    def _create_many(
        self, request: workloads_pb2.CreateWorkloadsRequest, p: Principal, context: Context
    ) -> workloads_pb2.CreateWorkloadsResponse:
        gate = self.gate
        grants = gate.authorizer.grants(p)
        # One peer for the whole request: each item's audit record names it.
        peer = _KnownPeer(context)
        # Per item: its result when it failed before reaching the manager, else None.
        out: list[workloads_pb2.CreateWorkloadResult | None] = []
        docs: list[RawDocument | NewWorkload] = []
        refs: list[tuple[str, str]] = []
        # One audit line per item, written together once the outcome is known.
        early: list[AuditRecord | None] = []
        # Names generated for this request's items, so that two never get the same one.
        generated: set[tuple[str, str]] = set()
        for item in request.items:
            try:
                parsed = self._item(item, generated)
            except InvalidArgument as exc:
                out.append(_failed(exc))
                early.append(gate.record(p, "create", "Workload", "", "", peer, exc=exc))
                continue
            ns, name = _ref(parsed)
            if not grants.allows("create", "Workload", ns):
                denied = gate.denied_error(p, "create", "Workload", ns)
                out.append(_failed(denied))
                early.append(gate.record(p, "create", "Workload", ns, name, peer, exc=denied))
                continue
            out.append(None)
            early.append(None)
            docs.append(parsed)
            refs.append((ns, name))
        try:
            # A store failure raises here and fails the whole request: nothing was stored.
            created = iter(self.m.create_workloads(docs))
        except Exception as exc:
            gate.audit_many([r for r in early if r is not None]
                            + [gate.record(p, "create", "Workload", ns, name, peer, exc=exc) for ns, name in refs])
            raise
        ref_iter = iter(refs)
        records: list[AuditRecord] = []
        # The answer is built in place: a result made on its own and then put into the answer is
        # copied there, nested message by nested message (several times the cost of filling it).
        response = workloads_pb2.CreateWorkloadsResponse(typed_items=True)
        add = response.results.add
        versions = self.m.versions
        brief = request.brief
        for r, rec in zip(out, early, strict=True):
            if r is not None:
                add().CopyFrom(r)
            else:
                res = next(created)
                ns, name = next(ref_iter)
                if isinstance(res, Exception):
                    add().CopyFrom(_failed(res))
                    rec = gate.record(p, "create", "Workload", ns, name, peer, exc=res)
                else:
                    wl, was_new = res
                    answer = add().response
                    answer.created = was_new
                    obj = answer.workload
                    if brief:
                        # The created workload's reference and version, without its JSON.
                        obj.kind = "Workload"
                        obj.namespace = wl.namespace
                        obj.name = wl.name
                        obj.resource_version = versions.get(("Workload", wl.namespace, wl.name), 0)
                    else:
                        obj.CopyFrom(object_to_proto(self.m, wl))
                    rec = gate.record(p, "create", "Workload", ns, name, peer,
                                      detail="created" if was_new else "existing")
            assert rec is not None
            records.append(rec)
        gate.audit_many(records)
        return response

    def _item(self, item: workloads_pb2.CreateWorkloadRequest,
              generated: set[tuple[str, str]]) -> RawDocument | NewWorkload:
        """A creation item as the manager takes it: its one document, or the typed item (a name drawn for each
        that asks for one)."""
        if item.HasField("workload"):
            return self._new_workload(item.workload, generated)
        docs = documents_from_proto([item.document])
        if len(docs) != 1:
            raise InvalidArgument("document", f"expected exactly one Workload document, got {len(docs)}")
        return self._named(docs[0], generated)

    def _new_workload(self, w: workloads_pb2.NewWorkload, generated: set[tuple[str, str]]) -> NewWorkload:
        name = w.name
        if not name and w.generate_name:
            workloads = self.m.cache.workloads
            namespace = w.namespace or "default"
            try:
                name = draw_name(namespace, w.generate_name, lambda ns, n: (ns, n) in generated
                                 or workload_key(ns, n) in workloads)
            except NameTaken as exc:
                raise FailedPrecondition(str(exc)) from None
            generated.add((namespace, name))
        # Its fields by position (NewWorkload's order): keywords cost a bulk creation 0.4 us an item more.
        return NewWorkload(w.source, w.namespace, name, w.spec, w.labels, w.annotations, w.api_version)

    def _named(self, doc: RawDocument, generated: set[tuple[str, str]]) -> RawDocument:
        """The document with metadata.generateName turned into a name no workload has (Kubernetes' way)."""
        workloads = self.m.cache.workloads

        def taken(namespace: str, name: str) -> bool:
            return (namespace, name) in generated or workload_key(namespace, name) in workloads

        try:
            named = generate_name(doc, taken)
        except NameTaken as exc:
            raise FailedPrecondition(str(exc)) from None
        if named is not doc:
            generated.add(workload_ref(named))
        return named

    @handled
    async def Pending(
        self, request: workloads_pb2.PendingWorkloadsRequest, context: Context
    ) -> workloads_pb2.PendingWorkloadsResponse:
        p = self.gate.authenticate(context)
        namespace = (request.namespace or "default") if request.local_queue else ""
        # The gate of List: a namespace's viewer sees its own entries, at their global positions.
        visible = self._visible(p, "list", namespace, "", context)
        positions = pending_positions(
            self.m.cache, cluster_queue=request.cluster_queue, namespace=namespace,
            local_queue=request.local_queue, offset=request.offset, limit=request.limit, namespaces=visible,
        )
        return workloads_pb2.PendingWorkloadsResponse(items=[_pending(x) for x in positions])

    @handled
    async def Position(self, request: workloads_pb2.WorkloadRef, context: Context) -> workloads_pb2.PositionResponse:
        p = self.gate.authenticate(context)
        ns = request.namespace or "default"
        self.gate.authorize(p, "get", "Workload", ns, request.name, context)
        wl = self.m.get_workload(ns, request.name)
        at = self.m.cache.queues.position(wl.key)
        if at is None:
            return workloads_pb2.PositionResponse(pending=False)
        return workloads_pb2.PositionResponse(pending=True, workload=_pending(at))

    @handled
    async def Get(self, request: workloads_pb2.WorkloadRef, context: Context) -> objects_pb2.Object:
        p = self.gate.authenticate(context)
        ns = request.namespace or "default"
        self.gate.authorize(p, "get", "Workload", ns, request.name, context)
        return object_to_proto(self.m, self.m.get_workload(ns, request.name))

    def _visible(self, p: Principal, verb: str, namespace: str, name: str, context: Context) -> frozenset[str] | None:
        """None: the caller may see every namespace asked for; else only these (never empty)."""
        if namespace:
            self.gate.authorize(p, verb, "Workload", namespace, name, context)
            return None
        visible = self.gate.visible(p, verb, "Workload")
        if visible is not None and not visible:
            self.gate.authorize(p, verb, "Workload", "", name, context)
        return visible

    @handled
    async def List(
        self, request: workloads_pb2.ListWorkloadsRequest, context: Context
    ) -> objects_pb2.ListResponse:
        if request.state not in _STATES:
            expected = ", ".join(s for s in _STATES if s)
            raise InvalidArgument("state", f"unknown state {request.state!r}; expected one of {expected}")
        if request.limit < 0:
            raise InvalidArgument("limit", "must not be negative")
        selector = label_selector(request.label_selector)
        visible = self._visible(self.gate.authenticate(context), "list", request.namespace, "", context)
        # The manager filters by the equalities; the rest of the selector (and the limit) apply after.
        wls = self.m.list_workloads(
            namespaces=visible,
            namespace=request.namespace,
            local_queue=request.local_queue,
            cluster_queue=request.cluster_queue,
            state=request.state,
            labels=selector.equalities(),
        )
        wls = [w for w in wls if selector.matches(w.labels)]
        if request.limit:
            wls = wls[:request.limit]
        return objects_pb2.ListResponse(objects=[object_to_proto(self.m, w) for w in wls])

    async def Watch(self, request: workloads_pb2.WatchWorkloadsRequest, context: Context) -> None:
        max_batch = min(max(request.max_batch, 1), MAX_WATCH_BATCH)
        try:
            p = self.gate.authenticate(context)
            visible = self._visible(p, "watch", request.namespace, request.name, context)
        except ControllerError as exc:
            code, msg = status_for(exc)
            await context.abort(code, msg)
        authorizer = self.gate.authorizer
        policy = authorizer.policy
        # Set when a policy reload narrowed what this watch may see (the
        # manager still filters by the set it was started with).
        narrowed: frozenset[str] | None = None
        try:
            # Written with context.write under a deadline rather than yielded: a
            # watch that expires while its reader reads nothing has the deadline
            # brought to now, and the call ends with the expiry as its status
            # (queued behind what was in flight), where cancelling a yielding
            # handler would end it with no status and leave its client waiting.
            async with asyncio.timeout(None) as deadline, aclosing(self.m.watch_batches(
                request.namespace, request.name, request.send_initial, max_batch=max_batch,
                namespaces=visible, deadline=deadline,
            )) as batches:
                async for batch in batches:
                    if authorizer.policy is not policy:
                        # SIGHUP changed the policy: ask again (PERMISSION_DENIED ends the watch).
                        policy = authorizer.policy
                        narrowed = self._visible(p, "watch", request.namespace, request.name, context)
                    if narrowed is not None:
                        batch = [ev for ev in batch if ev.workload.namespace in narrowed]
                        if not batch:
                            continue
                    await context.write(batch_bytes(batch) if self.raw_watch else batch_message(batch))
            return
        except TimeoutError:
            code, msg = status_for(WatchExpired(
                f"watch expired: it fell more than {self.m.commit.watchers.backlog} events behind while "
                "reading nothing; start a new watch with its initial events (re-list)"))
        except (FailedPrecondition, PermissionDenied) as exc:
            code, msg = status_for(exc)
        # Outside the handler: the error ending the call must not chain (and so
        # keep alive, until a garbage collection) the watch's frames.
        await context.abort(code, msg)

    @handled
    async def Delete(self, request: workloads_pb2.WorkloadRef, context: Context) -> objects_pb2.DeleteResponse:
        p = self.gate.authenticate(context)
        ns = request.namespace or "default"
        with self.gate.mutation(p, "delete", "Workload", ns, request.name, context):
            return objects_pb2.DeleteResponse(deleted=self.m.delete_workload(ns, request.name))

    @handled
    async def SetActive(self, request: workloads_pb2.SetActiveRequest, context: Context) -> objects_pb2.Object:
        p = self.gate.authenticate(context)
        ns = request.namespace or "default"
        with self.gate.mutation(p, "resume" if request.active else "stop", "Workload", ns, request.name, context):
            wl = self.m.set_active(ns, request.name, request.active)
        return object_to_proto(self.m, wl)


def label_selector(text: str) -> Selector:
    """The request's label selector; InvalidArgument naming label_selector when it does not parse."""
    try:
        return parse_selector(text)
    except SelectorError as exc:
        raise InvalidArgument("label_selector", str(exc)) from None


def _pending(at: Position) -> workloads_pb2.PendingWorkload:
    wl = at.workload
    cond = wl.status.condition("QuotaReserved")
    waiting = cond is not None and cond.status == "False"
    return workloads_pb2.PendingWorkload(
        namespace=wl.namespace, name=wl.name, local_queue_name=wl.queue_name, cluster_queue=at.cluster_queue,
        priority=wl.priority, position_in_cluster_queue=at.in_cluster_queue,
        position_in_local_queue=at.in_local_queue,
        reason=cond.reason if cond is not None and waiting else "",
        message=cond.message if cond is not None and waiting else "",
        creation_timestamp=format_rfc3339(wl.creation_timestamp),
    )


class _KnownPeer:
    """A request's context whose peer was read once (the gate asks for it per audit record)."""

    def __init__(self, context: Context) -> None:
        try:
            self._peer = str(context.peer())
        except Exception:  # a context without a peer (tests' fakes)
            self._peer = ""

    def peer(self) -> str:
        return self._peer


def _failed(exc: Exception) -> workloads_pb2.CreateWorkloadResult:
    code, message = status_for(exc)
    return workloads_pb2.CreateWorkloadResult(code=code.value[0], message=message)
