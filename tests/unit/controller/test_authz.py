"""Authorization and audit through the real gRPC services (in-process server on 127.0.0.1).

The test authenticator below maps an ``x-test-user`` / ``x-test-groups``
header to a Principal; it lives here only (the controller authenticates by
certificate or token).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

from sluicegate.controller.errors import Unauthenticated
from sluicegate.controller.manager import Manager
from sluicegate.controller.service.admin import AdminServicer
from sluicegate.controller.service.agents import NodesServicer
from sluicegate.controller.service.gate import Gate
from sluicegate.controller.service.workloads import WorkloadsServicer
from sluicegate.controller.store.sqlite import SqliteStore
from sluicegate.manifest.loader import parse_text
from sluicegate.security.audit import AuditLog
from sluicegate.security.authz import Authorizer
from sluicegate.security.identity import CLUSTER_ADMIN_GROUP, Principal
from sluicegate.v1 import agent_pb2, agent_pb2_grpc, objects_pb2, objects_pb2_grpc, workloads_pb2, workloads_pb2_grpc

from .test_manager import Clock

QUEUES = """
apiVersion: sluicegate.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: sluicegate.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: "4"}
---
apiVersion: sluicegate.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: team-a}
spec: {clusterQueue: cq}
---
apiVersion: sluicegate.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: team-b}
spec: {clusterQueue: cq}
"""

POLICY = """
bindings:
  - role: edit
    namespaces: [team-a]
    users: [alice]
  - role: view
    namespaces: ["*"]
    groups: [auditors]
"""


class HeaderAuthenticator:
    """Test only: the caller is whoever the x-test-user header says; none given is unauthenticated."""

    def authenticate(self, auth_context: dict[str, list[bytes]], metadata: tuple[tuple[str, Any], ...]) -> Principal:
        md = dict(metadata)
        if "x-test-user" not in md:
            raise Unauthenticated("no x-test-user header")
        groups = frozenset(g for g in str(md.get("x-test-groups", "")).split(",") if g)
        return Principal(str(md["x-test-user"]), groups, "token")


def who(user: str, *groups: str) -> tuple[tuple[str, str], ...]:
    return (("x-test-user", user), ("x-test-groups", ",".join(groups)))


ALICE = who("alice", "dev")
ROOT = who("root", CLUSTER_ADMIN_GROUP)


def wl_doc(name: str, namespace: str, *, job: bool = False) -> objects_pb2.Document:
    if job:
        body: dict[str, Any] = {
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {"template": {"spec": {"containers": [
                {"name": "c", "command": ["true"], "resources": {"requests": {"cpu": "1"}}}]}}},
        }
    else:
        body = {
            "apiVersion": "sluicegate.io/v1beta2", "kind": "Workload",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [
                {"name": "c", "command": ["true"], "resources": {"requests": {"cpu": "1"}}}]}}}]},
        }
    return objects_pb2.Document(body=json.dumps(body).encode(), source=f"{name}.json")


@dataclass
class Api:
    manager: Manager
    authorizer: Authorizer
    policy: Path
    audit_path: Path
    admin: objects_pb2_grpc.AdminStub
    workloads: workloads_pb2_grpc.WorkloadsStub
    nodes: agent_pb2_grpc.NodesStub

    def audit(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.audit_path.read_text().splitlines()]


@asynccontextmanager
async def served(tmp_path: Path) -> AsyncIterator[Api]:
    store = SqliteStore(str(tmp_path / "store.db"))
    m = Manager(store, clock=Clock(), placement=False)
    m.apply(parse_text(QUEUES, "queues.yaml"))
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    authorizer = Authorizer(str(policy))
    audit_path = tmp_path / "audit" / "audit.log"
    gate = Gate(HeaderAuthenticator(), authorizer, AuditLog(str(audit_path)))
    server = grpc.aio.server()
    objects_pb2_grpc.add_AdminServicer_to_server(AdminServicer(m, gate), server)
    workloads_pb2_grpc.add_WorkloadsServicer_to_server(WorkloadsServicer(m, gate), server)
    agent_pb2_grpc.add_NodesServicer_to_server(NodesServicer(m, gate), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as ch:
            yield Api(m, authorizer, policy, audit_path, objects_pb2_grpc.AdminStub(ch),
                      workloads_pb2_grpc.WorkloadsStub(ch), agent_pb2_grpc.NodesStub(ch))
    finally:
        await server.stop(None)
        gate.close()
        store.close()


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Api]:
    async with served(tmp_path) as a:
        for ns, name in (("team-a", "a1"), ("team-b", "b1")):
            await a.workloads.Create(workloads_pb2.CreateWorkloadRequest(document=wl_doc(name, ns)), metadata=ROOT)
        yield a


async def denied(call: Any) -> str:
    with pytest.raises(grpc.aio.AioRpcError) as e:
        await call
    assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED, e.value.details()
    return str(e.value.details())


async def denied_stream(call: Any) -> str:
    with pytest.raises(grpc.aio.AioRpcError) as e:
        async for _ in call:
            raise AssertionError("a denied stream delivered a message")
    assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED, e.value.details()
    return str(e.value.details())


def names(resp: objects_pb2.ListResponse) -> list[str]:
    return sorted(f"{o.namespace}/{o.name}" for o in resp.objects)


async def test_a_user_bound_to_a_is_denied_in_b_and_sees_only_a(api: Api) -> None:
    w, md = api.workloads, ALICE
    msg = await denied(w.Get(workloads_pb2.WorkloadRef(namespace="team-b", name="b1"), metadata=md))
    assert msg == 'user "alice" (groups: dev) may not get Workload in namespace "team-b"'
    msg = await denied(w.List(workloads_pb2.ListWorkloadsRequest(namespace="team-b"), metadata=md))
    assert msg == 'user "alice" (groups: dev) may not list Workload in namespace "team-b"'
    msg = await denied_stream(w.Watch(workloads_pb2.WatchWorkloadsRequest(namespace="team-b", send_initial=True), metadata=md))
    assert msg == 'user "alice" (groups: dev) may not watch Workload in namespace "team-b"'
    msg = await denied(w.Delete(workloads_pb2.WorkloadRef(namespace="team-b", name="b1"), metadata=md))
    assert msg == 'user "alice" (groups: dev) may not delete Workload in namespace "team-b"'
    msg = await denied_stream(api.nodes.Logs(agent_pb2.LogsRequest(namespace="team-b", workload="b1"), metadata=md))
    assert msg == 'user "alice" (groups: dev) may not logs Workload in namespace "team-b"'
    await denied(w.SetActive(workloads_pb2.SetActiveRequest(namespace="team-b", name="b1", active=False), metadata=md))
    await denied(api.admin.Get(objects_pb2.ObjectRef(kind="Workload", namespace="team-b", name="b1"), metadata=md))
    await denied(api.admin.Get(objects_pb2.ObjectRef(kind="lq", namespace="team-b", name="lq"), metadata=md))
    await denied(api.admin.Delete(objects_pb2.ObjectRef(kind="Workload", namespace="team-b", name="b1"), metadata=md))
    assert api.manager.get_workload("team-b", "b1").active  # nothing happened to it

    # In A all of it works.
    got = await w.Get(workloads_pb2.WorkloadRef(namespace="team-a", name="a1"), metadata=md)
    assert got.name == "a1"
    with pytest.raises(grpc.aio.AioRpcError) as e:  # authorized; there are just no pods to read
        async for _ in api.nodes.Logs(agent_pb2.LogsRequest(namespace="team-a", workload="nope"), metadata=md):
            pass
    assert e.value.code() == grpc.StatusCode.NOT_FOUND

    # All namespaces: only A.
    assert names(await w.List(workloads_pb2.ListWorkloadsRequest(), metadata=md)) == ["team-a/a1"]
    assert names(await w.List(workloads_pb2.ListWorkloadsRequest(limit=1), metadata=md)) == ["team-a/a1"]
    assert names(await api.admin.List(objects_pb2.ListRequest(kind="Workload"), metadata=md)) == ["team-a/a1"]
    assert names(await api.admin.List(objects_pb2.ListRequest(kind="LocalQueue"), metadata=md)) == ["team-a/lq"]
    # Queues (cluster-scoped) are readable, not writable.
    assert names(await api.admin.List(objects_pb2.ListRequest(kind="ClusterQueue"), metadata=md)) == ["/cq"]
    assert len((await api.nodes.List(agent_pb2.ListNodesRequest(), metadata=md)).nodes) == 0
    msg = await denied(api.admin.Delete(objects_pb2.ObjectRef(kind="ClusterQueue", name="cq"), metadata=md))
    assert msg == 'user "alice" (groups: dev) may not delete ClusterQueue cluster-wide'
    # A cluster admin sees both.
    assert names(await w.List(workloads_pb2.ListWorkloadsRequest(), metadata=ROOT)) == ["team-a/a1", "team-b/b1"]
    # A user with no binding may not list all namespaces at all.
    msg = await denied(w.List(workloads_pb2.ListWorkloadsRequest(), metadata=who("bob")))
    assert msg == 'user "bob" (groups: none) may not list Workload in all namespaces'


async def test_watch_over_all_namespaces_never_delivers_another_namespace(api: Api) -> None:
    w = api.workloads
    stream = w.Watch(workloads_pb2.WatchWorkloadsRequest(send_initial=True), metadata=ALICE)
    first = await stream.read()
    assert [(first.workload.namespace, first.workload.name, first.type)] == [("team-a", "a1", workloads_pb2.WorkloadEvent.ADDED)]
    assert not first.more
    # Changes in B, then one in A: the next event is A's (events are delivered in order).
    await w.Create(workloads_pb2.CreateWorkloadRequest(document=wl_doc("b2", "team-b")), metadata=ROOT)
    await w.SetActive(workloads_pb2.SetActiveRequest(namespace="team-b", name="b1", active=False), metadata=ROOT)
    await w.Delete(workloads_pb2.WorkloadRef(namespace="team-b", name="b2"), metadata=ROOT)
    await w.Create(workloads_pb2.CreateWorkloadRequest(document=wl_doc("a2", "team-a")), metadata=ALICE)
    nxt = await stream.read()
    events = [nxt, *nxt.more]
    assert [(e.workload.namespace, e.workload.name) for e in events] == [("team-a", "a2")]
    stream.cancel()


async def test_every_mutation_gets_an_audit_line(api: Api) -> None:
    w = api.workloads
    before = len(api.audit())
    await w.Create(workloads_pb2.CreateWorkloadRequest(document=wl_doc("a2", "team-a")), metadata=ALICE)
    await w.Create(workloads_pb2.CreateWorkloadRequest(document=wl_doc("a2", "team-a")), metadata=ALICE)  # exists
    await denied(w.Create(workloads_pb2.CreateWorkloadRequest(document=wl_doc("j1", "team-b", job=True)), metadata=ALICE))
    many = await w.CreateMany(workloads_pb2.CreateWorkloadsRequest(items=[
        workloads_pb2.CreateWorkloadRequest(document=wl_doc("a3", "team-a")),
        workloads_pb2.CreateWorkloadRequest(document=wl_doc("b3", "team-b")),
        workloads_pb2.CreateWorkloadRequest(document=wl_doc("j2", "team-a", job=True)),
    ]), metadata=ALICE)
    assert [r.code for r in many.results] == [0, grpc.StatusCode.PERMISSION_DENIED.value[0], 0]
    assert many.results[1].message == 'user "alice" (groups: dev) may not create Workload in namespace "team-b"'

    async def stream_requests() -> AsyncIterator[workloads_pb2.CreateWorkloadsRequest]:
        yield workloads_pb2.CreateWorkloadsRequest(items=[
            workloads_pb2.CreateWorkloadRequest(document=wl_doc("a4", "team-a")),
            workloads_pb2.CreateWorkloadRequest(document=wl_doc("b4", "team-b"))])

    streamed = [r async for r in w.CreateStream(stream_requests(), metadata=ALICE)]
    assert [r.code for r in streamed[0].results] == [0, grpc.StatusCode.PERMISSION_DENIED.value[0]]
    await w.SetActive(workloads_pb2.SetActiveRequest(namespace="team-a", name="a2", active=False), metadata=ALICE)
    await w.SetActive(workloads_pb2.SetActiveRequest(namespace="team-a", name="a2", active=True), metadata=ALICE)
    await w.Delete(workloads_pb2.WorkloadRef(namespace="team-a", name="a3"), metadata=ALICE)
    with pytest.raises(grpc.aio.AioRpcError) as e:
        await w.Delete(workloads_pb2.WorkloadRef(namespace="team-a", name="gone"), metadata=ALICE)
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
    await denied(w.Get(workloads_pb2.WorkloadRef(namespace="team-b", name="b1"), metadata=ALICE))  # a denied read
    await w.Get(workloads_pb2.WorkloadRef(namespace="team-a", name="a1"), metadata=ALICE)  # an allowed read: no line

    got = [(r["user"], r["verb"], r["kind"], r["namespace"], r["name"], r["outcome"], r.get("code", ""), r.get("detail", ""))
           for r in api.audit()[before:]]
    assert got == [
        ("alice", "create", "Workload", "team-a", "a2", "allowed", "", "created"),
        ("alice", "create", "Workload", "team-a", "a2", "allowed", "", "existing"),
        ("alice", "create", "Workload", "team-b", "j1", "denied", "PERMISSION_DENIED", ""),
        ("alice", "create", "Workload", "team-a", "a3", "allowed", "", "created"),
        ("alice", "create", "Workload", "team-b", "b3", "denied", "PERMISSION_DENIED", ""),
        ("alice", "create", "Workload", "team-a", "j2", "allowed", "", "created"),
        ("alice", "create", "Workload", "team-a", "a4", "allowed", "", "created"),
        ("alice", "create", "Workload", "team-b", "b4", "denied", "PERMISSION_DENIED", ""),
        ("alice", "stop", "Workload", "team-a", "a2", "allowed", "", ""),
        ("alice", "resume", "Workload", "team-a", "a2", "allowed", "", ""),
        ("alice", "delete", "Workload", "team-a", "a3", "allowed", "", ""),
        ("alice", "delete", "Workload", "team-a", "gone", "error", "NOT_FOUND", ""),
        ("alice", "get", "Workload", "team-b", "b1", "denied", "PERMISSION_DENIED", ""),
    ]
    for r in api.audit()[before:]:
        assert r["groups"] == ["dev"] and r["source"].startswith("ipv4:127.0.0.1:") and r["time"].endswith("Z")
    assert {wl.name for wl in api.manager.cache.workloads.values() if wl.namespace == "team-b"} == {"b1"}  # none denied was created


async def test_apply_is_checked_per_document_and_all_or_nothing(api: Api) -> None:
    lq = ("apiVersion: sluicegate.io/v1beta2\nkind: LocalQueue\nmetadata: {name: lq2, namespace: %s}\n"
          "spec: {clusterQueue: cq}\n")
    cq = "apiVersion: sluicegate.io/v1beta2\nkind: Cohort\nmetadata: {name: c1}\n"

    def req(*texts: str, dry_run: bool = False) -> objects_pb2.ApplyRequest:
        return objects_pb2.ApplyRequest(
            documents=[objects_pb2.Document(body=t.encode(), source=f"d{i}") for i, t in enumerate(texts)], dry_run=dry_run)

    before = len(api.audit())
    # alice is edit in team-a: LocalQueues there need admin.
    msg = await denied(api.admin.Apply(req(lq % "team-a"), metadata=ALICE))
    assert msg == 'user "alice" (groups: dev) may not create LocalQueue in namespace "team-a"'
    # A policy change (SIGHUP calls reload) makes her admin there; a cohort still needs cluster-admin.
    api.policy.write_text(POLICY.replace("role: edit", "role: admin"))
    api.authorizer.reload()
    msg = await denied(api.admin.Apply(req(lq % "team-a", cq), metadata=ALICE))
    assert msg == 'user "alice" (groups: dev) may not create Cohort cluster-wide'
    assert [lq.name for lq in api.manager.list("LocalQueue", "team-a")] == ["lq"]  # all or nothing
    dry = await api.admin.Apply(req(lq % "team-a", dry_run=True), metadata=ALICE)
    assert [r.action for r in dry.results] == ["created"]
    done = await api.admin.Apply(req(lq % "team-a"), metadata=ALICE)
    assert [r.action for r in done.results] == ["created"]
    again = await api.admin.Apply(req((lq % "team-a").replace("cq}", "cq, stopPolicy: Hold}")), metadata=ALICE)
    assert [r.action for r in again.results] == ["configured"]
    await api.admin.Delete(objects_pb2.ObjectRef(kind="LocalQueue", namespace="team-a", name="lq2"), metadata=ALICE)
    await denied(api.admin.Apply(req(lq % "team-b"), metadata=ALICE))
    await api.admin.Apply(req(cq), metadata=ROOT)
    with pytest.raises(grpc.aio.AioRpcError) as e:  # invalid: nothing applied, still audited
        await api.admin.Apply(req(lq % "team-a", (lq % "team-a").replace("lq2", "lq3").replace("clusterQueue", "clusterQ")),
                              metadata=ALICE)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.aio.AioRpcError) as e:
        await api.admin.Apply(req("kind: [unclosed"), metadata=ALICE)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    got = [(r["user"], r["verb"], r["kind"], r["namespace"], r["name"], r["outcome"], r.get("detail", ""))
           for r in api.audit()[before:]]
    assert got == [
        ("alice", "create", "LocalQueue", "team-a", "lq2", "denied", ""),
        ("alice", "create", "LocalQueue", "team-a", "lq2", "error", ""),  # not applied: the cohort was denied
        ("alice", "create", "Cohort", "", "c1", "denied", ""),
        ("alice", "create", "LocalQueue", "team-a", "lq2", "allowed", "dry run: created"),
        ("alice", "create", "LocalQueue", "team-a", "lq2", "allowed", "created"),
        ("alice", "update", "LocalQueue", "team-a", "lq2", "allowed", "configured"),
        ("alice", "delete", "LocalQueue", "team-a", "lq2", "allowed", ""),
        ("alice", "create", "LocalQueue", "team-b", "lq2", "denied", ""),
        ("root", "create", "Cohort", "", "c1", "allowed", "created"),
        ("alice", "create", "LocalQueue", "team-a", "lq2", "error", ""),
        ("alice", "apply", "LocalQueue", "team-a", "lq3", "error", ""),
        ("alice", "apply", "", "", "", "error", ""),
    ]
    assert {r.get("code") for r in api.audit()[-3:]} == {"INVALID_ARGUMENT"}


async def test_reload_changes_the_outcome_and_a_bad_file_keeps_the_old_policy(api: Api, caplog: pytest.LogCaptureFixture) -> None:
    w = api.workloads
    ref = workloads_pb2.WorkloadRef(namespace="team-b", name="b1")
    await denied(w.Get(ref, metadata=ALICE))
    api.policy.write_text(POLICY.replace("[team-a]", "[team-a, team-b]"))
    gate = Gate(authorizer=api.authorizer)
    gate.reload()  # what SIGHUP does
    assert (await w.Get(ref, metadata=ALICE)).name == "b1"
    api.policy.write_text("bindings:\n- {role: ops, users: [alice]}\n")
    gate.reload()
    assert 'bindings[0].role: unknown role "ops"' in caplog.text
    assert (await w.Get(ref, metadata=ALICE)).name == "b1"  # the previous policy stays
    api.policy.write_text(POLICY)
    gate.reload()
    await denied(w.Get(ref, metadata=ALICE))


async def test_group_bindings_and_unauthenticated_callers(api: Api) -> None:
    carol = who("carol", "auditors")
    assert names(await api.workloads.List(workloads_pb2.ListWorkloadsRequest(), metadata=carol)) == ["team-a/a1", "team-b/b1"]
    await denied(api.workloads.Delete(workloads_pb2.WorkloadRef(namespace="team-a", name="a1"), metadata=carol))
    with pytest.raises(grpc.aio.AioRpcError) as e:
        await api.workloads.List(workloads_pb2.ListWorkloadsRequest())
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
    last = api.audit()[-1]
    assert (last["user"], last["outcome"], last["code"], last["message"]) == ("", "denied", "UNAUTHENTICATED", "no x-test-user header")
    assert last["source"].startswith("ipv4:127.0.0.1:")
    with pytest.raises(grpc.aio.AioRpcError) as e:
        async for _ in api.workloads.Watch(workloads_pb2.WatchWorkloadsRequest()):
            pass
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
    node = who("system:node:n1", "system:nodes")
    await denied(api.nodes.List(agent_pb2.ListNodesRequest(), metadata=node))


async def test_a_policy_reload_narrows_open_watches_and_log_streams_too(api: Api) -> None:
    w = api.workloads
    api.policy.write_text(POLICY.replace("[team-a]", "[team-a, team-c]"))
    api.authorizer.reload()
    stream = w.Watch(workloads_pb2.WatchWorkloadsRequest(send_initial=True), metadata=ALICE)
    assert (await stream.read()).workload.name == "a1"
    api.policy.write_text(POLICY.replace("[team-a]", "[team-c]"))
    api.authorizer.reload()
    for name, ns in (("a2", "team-a"), ("c1", "team-c")):
        await w.Create(workloads_pb2.CreateWorkloadRequest(document=wl_doc(name, ns)), metadata=ROOT)
    nxt = await stream.read()
    assert [(e.workload.namespace, e.workload.name) for e in (nxt, *nxt.more)] == [("team-c", "c1")]
    api.policy.write_text("bindings: []\n")
    api.authorizer.reload()
    await w.Create(workloads_pb2.CreateWorkloadRequest(document=wl_doc("c2", "team-c")), metadata=ROOT)
    with pytest.raises(grpc.aio.AioRpcError) as e:
        await stream.read()
    assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert e.value.details() == 'user "alice" (groups: dev) may not watch Workload in all namespaces'


async def test_a_followed_log_stream_ends_when_a_reload_takes_the_right_away(api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    lines: asyncio.Queue[bytes] = asyncio.Queue()

    async def fake_logs(namespace: str, workload: str, pod: str, container: str, follow: bool) -> AsyncIterator[tuple[str, str, bytes]]:
        # Stands in for an agent's followed pod log: one line per put.
        assert (namespace, workload, follow) == ("team-a", "a1", True)
        while True:
            yield "a1-0", "c", await lines.get()

    monkeypatch.setattr(api.manager.fleet, "logs", fake_logs)
    stream = api.nodes.Logs(agent_pb2.LogsRequest(namespace="team-a", workload="a1", follow=True), metadata=ALICE)
    lines.put_nowait(b"one\n")
    assert (await stream.read()).data == b"one\n"
    api.policy.write_text(POLICY.replace("[team-a]", "[team-c]"))
    api.authorizer.reload()
    lines.put_nowait(b"two\n")
    with pytest.raises(grpc.aio.AioRpcError) as e:
        await stream.read()
    assert e.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert e.value.details() == 'user "alice" (groups: dev) may not logs Workload in namespace "team-a"'
