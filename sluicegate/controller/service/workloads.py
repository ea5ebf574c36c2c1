"""The Workloads service: create (idempotent), get, list, watch, delete, set active."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import grpc

from sluicegate.controller.errors import FailedPrecondition, InvalidArgument
from sluicegate.controller.manager import Manager, parse_label_selector
from sluicegate.controller.service.codec import documents_from_proto, event_object, object_to_proto
from sluicegate.controller.service.errors import handled, status_for
from sluicegate.controller.store import StoreError
from sluicegate.manifest.loader import RawDocument
from sluicegate.v1 import objects_pb2, workloads_pb2, workloads_pb2_grpc

log = logging.getLogger(__name__)

_EVENT = {
    "ADDED": workloads_pb2.WorkloadEvent.ADDED,
    "MODIFIED": workloads_pb2.WorkloadEvent.MODIFIED,
    "DELETED": workloads_pb2.WorkloadEvent.DELETED,
}
_STATES = ("", "Pending", "QuotaReserved", "Admitted", "Finished", "Inactive")
# Most watch events one message carries (WatchWorkloadsRequest.max_batch): a
# workload's JSON is a few KiB, so a full message stays within a few MiB.
MAX_WATCH_BATCH = 1000


class WorkloadsServicer(workloads_pb2_grpc.WorkloadsServicer):
    def __init__(self, manager: Manager) -> None:
        self.m = manager

    @handled
    async def Create(
        self, request: workloads_pb2.CreateWorkloadRequest, context: grpc.aio.ServicerContext
    ) -> workloads_pb2.CreateWorkloadResponse:
        docs = documents_from_proto([request.document])
        if len(docs) != 1:
            raise InvalidArgument("document", f"expected exactly one Workload document, got {len(docs)}")
        wl, created = self.m.create_workload(docs[0])
        return workloads_pb2.CreateWorkloadResponse(workload=object_to_proto(self.m, wl), created=created)

    @handled
    async def CreateMany(
        self, request: workloads_pb2.CreateWorkloadsRequest, context: grpc.aio.ServicerContext
    ) -> workloads_pb2.CreateWorkloadsResponse:
        return self._create_many(request)

    async def CreateStream(
        self, request_iterator: AsyncIterator[workloads_pb2.CreateWorkloadsRequest], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[workloads_pb2.CreateWorkloadsResponse]:
        async for request in request_iterator:
            try:
                response = self._create_many(request)
            except Exception as exc:
                # Only this request failed (a store failure stored none of it);
                # the client's later requests still deserve their answers.
                if not isinstance(exc, (InvalidArgument, StoreError)):
                    log.exception("CreateStream: a request failed")
                failed = _failed(exc)
                response = workloads_pb2.CreateWorkloadsResponse(results=[failed] * len(request.items))
            yield response

    def _create_many(self, request: workloads_pb2.CreateWorkloadsRequest) -> workloads_pb2.CreateWorkloadsResponse:
        # Per item: its result when it failed before reaching the manager, else None.
        out: list[workloads_pb2.CreateWorkloadResult | None] = []
        docs: list[RawDocument] = []
        for item in request.items:
            try:
                parsed = documents_from_proto([item.document])
                if len(parsed) != 1:
                    raise InvalidArgument("document", f"expected exactly one Workload document, got {len(parsed)}")
            except InvalidArgument as exc:
                out.append(_failed(exc))
                continue
            out.append(None)
            docs.append(parsed[0])
        # A store failure raises here and fails the whole request: nothing was stored.
        created = iter(self.m.create_workloads(docs))
        results: list[workloads_pb2.CreateWorkloadResult] = []
        for r in out:
            if r is None:
                res = next(created)
                if isinstance(res, Exception):
                    r = _failed(res)
                else:
                    wl, was_new = res
                    r = workloads_pb2.CreateWorkloadResult(response=workloads_pb2.CreateWorkloadResponse(
                        workload=object_to_proto(self.m, wl), created=was_new))
            results.append(r)
        return workloads_pb2.CreateWorkloadsResponse(results=results)

    @handled
    async def Get(self, request: workloads_pb2.WorkloadRef, context: grpc.aio.ServicerContext) -> objects_pb2.Object:
        return object_to_proto(self.m, self.m.get_workload(request.namespace or "default", request.name))

    @handled
    async def List(
        self, request: workloads_pb2.ListWorkloadsRequest, context: grpc.aio.ServicerContext
    ) -> objects_pb2.ListResponse:
        if request.state not in _STATES:
            raise InvalidArgument("state", f"unknown state {request.state!r}; expected one of {', '.join(s for s in _STATES if s)}")
        if request.limit < 0:
            raise InvalidArgument("limit", "must not be negative")
        wls = self.m.list_workloads(
            namespace=request.namespace,
            local_queue=request.local_queue,
            cluster_queue=request.cluster_queue,
            state=request.state,
            labels=parse_label_selector(request.label_selector),
            limit=request.limit,
        )
        return objects_pb2.ListResponse(objects=[object_to_proto(self.m, w) for w in wls])

    async def Watch(
        self, request: workloads_pb2.WatchWorkloadsRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[workloads_pb2.WorkloadEvent]:
        max_batch = min(max(request.max_batch, 1), MAX_WATCH_BATCH)
        try:
            async for batch in self.m.watch_batches(request.namespace, request.name, request.send_initial, max_batch=max_batch):
                first = workloads_pb2.WorkloadEvent(type=_EVENT[batch[0].type], workload=event_object(batch[0]))
                if len(batch) > 1:
                    first.more.extend(
                        workloads_pb2.WorkloadEvent(type=_EVENT[ev.type], workload=event_object(ev)) for ev in batch[1:])
                yield first
        except FailedPrecondition as exc:
            code, msg = status_for(exc)
            await context.abort(code, msg)

    @handled
    async def Delete(self, request: workloads_pb2.WorkloadRef, context: grpc.aio.ServicerContext) -> objects_pb2.DeleteResponse:
        return objects_pb2.DeleteResponse(deleted=self.m.delete_workload(request.namespace or "default", request.name))

    @handled
    async def SetActive(self, request: workloads_pb2.SetActiveRequest, context: grpc.aio.ServicerContext) -> objects_pb2.Object:
        wl = self.m.set_active(request.namespace or "default", request.name, request.active)
        return object_to_proto(self.m, wl)


def _failed(exc: Exception) -> workloads_pb2.CreateWorkloadResult:
    code, message = status_for(exc)
    return workloads_pb2.CreateWorkloadResult(code=code.value[0], message=message)
