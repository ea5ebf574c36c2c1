"""The Admin service: apply/get/list/delete for every kind."""

from __future__ import annotations

from sluicegate.controller.errors import InvalidArgument, NotFound, PermissionDenied
from sluicegate.controller.manager import KIND_OF, NAMESPACED, Manager, canonical_kind, ref_of
from sluicegate.controller.service.codec import documents_from_proto, object_to_proto
from sluicegate.controller.service.errors import Context, handled
from sluicegate.controller.service.gate import Gate
from sluicegate.controller.service.workloads import label_selector
from sluicegate.manifest.decode import decode
from sluicegate.manifest.dialect import peek_identity
from sluicegate.manifest.errors import ManifestError
from sluicegate.manifest.loader import RawDocument
from sluicegate.security.audit import ERROR, AuditRecord
from sluicegate.security.identity import Principal
from sluicegate.v1 import objects_pb2, objects_pb2_grpc


def namespace_of(kind: str, namespace: str) -> str:
    """The namespace a request about ``kind`` is in: "" for cluster-scoped kinds, "default" when unnamed."""
    return (namespace or "default") if kind in NAMESPACED else ""


def _applied_ref(doc: RawDocument) -> tuple[str, str, str] | None:
    """(kind, namespace, name) exactly as the manager will store it; None when the document is invalid."""
    try:
        obj = decode(doc, source=doc.source)
    except ManifestError:
        return None
    if KIND_OF.get(type(obj)) is None:
        return None
    return ref_of(obj)


class AdminServicer(objects_pb2_grpc.AdminServicer):
    def __init__(self, manager: Manager, gate: Gate | None = None) -> None:
        self.m = manager
        self.gate = gate or Gate()

    def _exists(self, kind: str, ns: str, name: str) -> bool:
        try:
            self.m.get(kind, ns, name)
        except NotFound:
            return False
        return True

    @handled
    async def Apply(self, request: objects_pb2.ApplyRequest, context: Context) -> objects_pb2.ApplyResponse:
        p = self.gate.authenticate(context)
        try:
            docs = documents_from_proto(request.documents)
        except InvalidArgument as exc:  # text that does not parse: nothing to name but the attempt
            self.gate.audit(p, "apply", "", "", "", context, exc=exc)
            raise
        # Each valid document's object and verb; an invalid one fails the whole
        # apply in the manager (all or nothing) and so is checked for nothing.
        checks: list[tuple[str, str, str, str]] = []
        invalid: list[tuple[str, str, str, str]] = []  # audited as what they seemed to be
        for doc in docs:
            ref = _applied_ref(doc)
            if ref is not None:
                checks.append(("update" if self._exists(*ref) else "create", *ref))
            else:
                kind, name = peek_identity(doc.body)
                ns, _, short = name.rpartition("/")
                invalid.append(("apply", kind, ns, short))
        denied = [c for c in checks if not self.gate.allowed(p, c[0], c[1], c[2])]
        if denied:
            self._audit_denied_apply(p, checks + invalid, denied, context)
            verb, kind, ns, _ = denied[0]
            raise self.gate.denied_error(p, verb, kind, ns)
        try:
            results = self.m.apply(docs, dry_run=request.dry_run)
        except Exception as exc:
            self.gate.audit_many(
                [self.gate.record(p, v, k, ns, n, context, exc=exc) for v, k, ns, n in checks + invalid]
            )
            raise
        verbs = {(k, ns, n): v for v, k, ns, n in checks}
        prefix = "dry run: " if request.dry_run else ""
        self.gate.audit_many(
            [
                self.gate.record(p, verbs.get(ref, "update"), *ref, context, detail=prefix + action)
                for ref, action in results
            ]
        )
        return objects_pb2.ApplyResponse(
            results=[
                objects_pb2.ApplyResult(ref=objects_pb2.ObjectRef(kind=k, namespace=ns, name=n), action=action)
                for (k, ns, n), action in results
            ]
        )

    def _audit_denied_apply(
        self,
        p: Principal,
        checks: list[tuple[str, str, str, str]],
        denied: list[tuple[str, str, str, str]],
        context: Context,
    ) -> None:
        refused = set(denied)
        not_applied = PermissionDenied("not applied: another document of the same apply was denied")
        recs: list[AuditRecord] = []
        for c in checks:
            v, k, ns, n = c
            if c in refused:
                recs.append(self.gate.record(p, v, k, ns, n, context, exc=self.gate.denied_error(p, v, k, ns)))
            else:
                recs.append(self.gate.record(p, v, k, ns, n, context, exc=not_applied, outcome=ERROR))
        self.gate.audit_many(recs)

    @handled
    async def Get(self, request: objects_pb2.ObjectRef, context: Context) -> objects_pb2.Object:
        p = self.gate.authenticate(context)
        kind = canonical_kind(request.kind)
        self.gate.authorize(p, "get", kind, namespace_of(kind, request.namespace), request.name, context)
        return object_to_proto(self.m, self.m.get(kind, request.namespace, request.name))

    @handled
    async def List(self, request: objects_pb2.ListRequest, context: Context) -> objects_pb2.ListResponse:
        p = self.gate.authenticate(context)
        kind = canonical_kind(request.kind)
        selector = label_selector(request.label_selector)
        visible: frozenset[str] | None = None
        if kind not in NAMESPACED or request.namespace:
            self.gate.authorize(p, "list", kind, namespace_of(kind, request.namespace), "", context)
        else:
            visible = self.gate.visible(p, "list", kind)
            if visible is not None and not visible:
                self.gate.authorize(p, "list", kind, "", "", context)
        objs = self.m.list(kind, request.namespace, selector.equalities())
        if visible is not None:
            objs = [o for o in objs if ref_of(o)[1] in visible]
        if not selector.empty:
            objs = [o for o in objs if selector.matches(getattr(o, "labels", None) or {})]
        return objects_pb2.ListResponse(objects=[object_to_proto(self.m, o) for o in objs])

    @handled
    async def Delete(self, request: objects_pb2.ObjectRef, context: Context) -> objects_pb2.DeleteResponse:
        p = self.gate.authenticate(context)
        kind = canonical_kind(request.kind)
        with self.gate.mutation(p, "delete", kind, namespace_of(kind, request.namespace), request.name, context):
            return objects_pb2.DeleteResponse(deleted=self.m.delete(kind, request.namespace, request.name))
