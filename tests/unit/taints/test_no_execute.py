"""A node that registers again with a NoExecute taint: the controller evicts and requeues.

As Kubernetes' taint eviction controller (``pkg/controller/tainteviction/taint_eviction.go``):
an untolerating pod goes at once, one tolerating with ``tolerationSeconds`` after
that long, one tolerating without a limit stays.  The workload is evicted the way
other node-side evictions are (reason ``DeletionByTaintManager``) and requeued once
its pods have stopped.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import grpc
import pytest

from sluicegate.controller.manager import Manager, workload_state
from sluicegate.controller.nodes import NodeUsage, StopPodCommand
from sluicegate.controller.store.memory import MemoryStore
from sluicegate.manifest.loader import parse_text
from sluicegate.model.pods import FAILED, RUNNING
from sluicegate.model.taints import NO_EXECUTE, NO_SCHEDULE, Taint
from sluicegate.v1 import agent_pb2, agent_pb2_grpc
from tests.builders import container_doc, workload_doc
from tests.unit.controller.test_manager import settle
from tests.unit.controller.test_node_loss import Session, cluster, evicted, reported

MAINT = Taint("maint", NO_EXECUTE)


def start(m: Manager, name: str, tolerations: list[dict[str, Any]] | None = None) -> None:
    body = workload_doc(name, container_doc(name="c", requests={"cpu": "1"}),
                        pod_spec={"tolerations": tolerations} if tolerations else None)
    m.create_workload(parse_text(json.dumps(body), name, fmt="json")[0])
    settle(m)
    for pod in m.get_workload("default", name).status.pods:
        m.fleet.pod_status("n1", reported(pod, RUNNING))


def reregister(m: Manager, *taints: Taint) -> Session:
    session = Session()
    pods = [reported(wl.status.pods[0], RUNNING) for wl in m.cache.workloads.values() if wl.status.pods]
    m.fleet.register(name="n1", labels={}, capacity={"cpu": 8000}, allocatable={"cpu": 8000}, boot_id="b",
                     agent_version="t", health_address="", pods=pods, session=session, taints=taints)
    return session


def advance(m: Manager, clock: Any, seconds: int, name: str) -> None:
    """``seconds`` pass one by one, the node heartbeating and the controller's timers ticking."""
    pod = m.get_workload("default", name).status.pods[0]
    for _ in range(seconds):
        clock.t += 1
        m.fleet.heartbeat("n1", NodeUsage(), [], [reported(pod, RUNNING)])
        m.fleet.check_nodes()


def test_a_new_no_execute_taint_evicts_the_pods_that_do_not_tolerate_it_and_requeues_them() -> None:
    m, clock, _ = cluster()
    start(m, "plain")
    start(m, "tolerant", [{"key": "maint", "operator": "Exists", "effect": "NoExecute"}])
    session = reregister(m, MAINT)
    plain = m.get_workload("default", "plain")
    reason, message = evicted(plain)
    assert reason == "DeletionByTaintManager"
    assert message == ("Taint manager: deleting due to NoExecute taint: pod plain-main-0 does not tolerate taint "
                       "maint:NoExecute of node n1")
    assert [c.uid for c in session.sent if isinstance(c, StopPodCommand)] == [plain.status.pods[0].uid]
    assert evicted(m.get_workload("default", "tolerant")) == ("", "")
    # The pod stops: the workload is requeued, and the tainted node takes it no more.
    m.fleet.pod_status("n1", reported(plain.status.pods[0], FAILED, reason="Killed"))
    settle(m)
    wl = m.get_workload("default", "plain")
    assert (workload_state(wl), wl.is_finished) == ("Pending", False)
    assert workload_state(m.get_workload("default", "tolerant")) == "Admitted"


def test_no_schedule_leaves_running_pods_alone() -> None:
    m, _, _ = cluster()
    start(m, "plain")
    reregister(m, Taint("maint", NO_SCHEDULE))
    assert evicted(m.get_workload("default", "plain")) == ("", "")


def test_toleration_seconds_delay_the_eviction() -> None:
    m, clock, _ = cluster()
    start(m, "brief", [{"key": "maint", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}])
    reregister(m, MAINT)
    advance(m, clock, 29, "brief")
    assert evicted(m.get_workload("default", "brief")) == ("", "")
    advance(m, clock, 1, "brief")
    reason, message = evicted(m.get_workload("default", "brief"))
    assert (reason, message.endswith("tolerates taint(s) maint:NoExecute of node n1 for only 30s")) == (
        "DeletionByTaintManager", True)


def test_the_taint_gone_before_the_time_cancels_the_eviction() -> None:
    m, clock, _ = cluster()
    start(m, "brief", [{"key": "maint", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}])
    reregister(m, MAINT)
    advance(m, clock, 10, "brief")
    reregister(m)
    advance(m, clock, 60, "brief")
    assert evicted(m.get_workload("default", "brief")) == ("", "")


def test_why_pending_names_the_taint() -> None:
    m, _, _ = cluster()
    reregister(m, MAINT)
    start(m, "later")
    wl = m.get_workload("default", "later")
    assert workload_state(wl) == "Pending"
    assert [c.message for c in wl.status.conditions if c.type == "QuotaReserved"] == [
        "quota is available but the pods cannot be placed: no Ready node matches pod set main (node labels <any>); "
        "1 node(s) known, 0 not ready or under pressure; 1 node(s) had untolerated taint {maint: }"]


def test_a_pod_placed_later_on_the_tainted_node_gets_its_toleration_seconds_too() -> None:
    m, clock, _ = cluster()
    reregister(m, MAINT)
    start(m, "late", [{"key": "maint", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5}])
    assert workload_state(m.get_workload("default", "late")) == "Admitted"
    advance(m, clock, 4, "late")
    assert evicted(m.get_workload("default", "late")) == ("", "")
    advance(m, clock, 1, "late")
    assert evicted(m.get_workload("default", "late"))[0] == "DeletionByTaintManager"


async def test_over_grpc_taints_are_validated_at_registration_and_listed() -> None:
    from sluicegate.controller.service.agents import NodesServicer
    from tests.unit.controller.test_node_loss import ManualClock, _messages, _serve

    m = Manager(MemoryStore(), clock=ManualClock())
    server, address = await _serve(m)

    def register(*taints: agent_pb2.Taint) -> agent_pb2.AgentMessage:
        return agent_pb2.AgentMessage(register=agent_pb2.Register(node=agent_pb2.NodeInfo(name="n1", taints=taints)))

    try:
        async with grpc.aio.insecure_channel(address) as ch:
            stub = agent_pb2_grpc.AgentLinkStub(ch)
            more: asyncio.Queue[agent_pb2.AgentMessage | None] = asyncio.Queue()
            bad = stub.Connect(_messages(register(agent_pb2.Taint(key="k", effect="NoRun")), more))
            async with asyncio.timeout(5):
                with pytest.raises(grpc.aio.AioRpcError) as exc:
                    await bad.read()
            assert exc.value.code() is grpc.StatusCode.INVALID_ARGUMENT
            assert "register.node.taints[0].effect: must be one of NoSchedule, PreferNoSchedule, NoExecute" in str(
                exc.value.details())
            assert "n1" not in m.fleet.registry.nodes
            good = stub.Connect(_messages(register(agent_pb2.Taint(key="k", value="v", effect="NoSchedule")), more))
            async with asyncio.timeout(5):
                await good.read()
            assert m.fleet.registry.nodes["n1"].taints == (Taint("k", NO_SCHEDULE, "v"),)
            listed = await NodesServicer(m).List(agent_pb2.ListNodesRequest(), None)  # type: ignore[arg-type]
            assert [(t.key, t.value, t.effect) for t in listed.nodes[0].node.taints] == [("k", "v", "NoSchedule")]
            more.put_nowait(None)
            good.cancel()
    finally:
        await server.stop(None)
