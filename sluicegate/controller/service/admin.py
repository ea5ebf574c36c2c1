"""The Admin service: apply/get/list/delete for every kind."""

from __future__ import annotations

import grpc

from sluicegate.controller.manager import Manager, parse_label_selector
from sluicegate.controller.service.codec import documents_from_proto, object_to_proto
from sluicegate.controller.service.errors import handled
from sluicegate.v1 import objects_pb2, objects_pb2_grpc


class AdminServicer(objects_pb2_grpc.AdminServicer):
    def __init__(self, manager: Manager) -> None:
        self.m = manager

    @handled
    async def Apply(self, request: objects_pb2.ApplyRequest, context: grpc.aio.ServicerContext) -> objects_pb2.ApplyResponse:
        docs = documents_from_proto(request.documents)
        results = self.m.apply(docs, dry_run=request.dry_run)
        return objects_pb2.ApplyResponse(
            results=[
                objects_pb2.ApplyResult(ref=objects_pb2.ObjectRef(kind=k, namespace=ns, name=n), action=action)
                for (k, ns, n), action in results
            ]
        )

    @handled
    async def Get(self, request: objects_pb2.ObjectRef, context: grpc.aio.ServicerContext) -> objects_pb2.Object:
        return object_to_proto(self.m, self.m.get(request.kind, request.namespace, request.name))

    @handled
    async def List(self, request: objects_pb2.ListRequest, context: grpc.aio.ServicerContext) -> objects_pb2.ListResponse:
        labels = parse_label_selector(request.label_selector)
        objs = self.m.list(request.kind, request.namespace, labels)
        return objects_pb2.ListResponse(objects=[object_to_proto(self.m, o) for o in objs])

    @handled
    async def Delete(self, request: objects_pb2.ObjectRef, context: grpc.aio.ServicerContext) -> objects_pb2.DeleteResponse:
        return objects_pb2.DeleteResponse(deleted=self.m.delete(request.kind, request.namespace, request.name))
