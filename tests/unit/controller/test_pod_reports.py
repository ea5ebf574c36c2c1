"""Pod reports gathered over a turn of the event loop: applied in order, each workload stored once.

The pods of one workload run on many nodes and report on many agent
streams; the fleet gathers what arrives in one turn of the loop
(``Fleet.report_pods``) and stores each workload once with every report
applied, as the kubelet's status manager sends only a pod's latest status
(kubernetes/kubernetes pkg/kubelet/status/status_manager.go keeps one
pending status per pod and syncs the newest).  What the workload ends up as
is what handling the reports one by one gave.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from sluicegate.controller.manager import Manager, workload_state
from sluicegate.controller.nodes import ReportedPod
from sluicegate.controller.store import Delete, Put, StoreError
from sluicegate.controller.store.memory import MemoryStore
from sluicegate.manifest.loader import parse_text
from sluicegate.model.pods import PENDING, RUNNING, SUCCEEDED, PodRecord
from sluicegate.model.workloads import Workload
from tests.builders import container_doc, workload_doc

from .test_manager import QUEUES, Clock, RecordingSession, settle


def cluster() -> tuple[Manager, RecordingSession]:
    m = Manager(MemoryStore(), clock=Clock())
    m.apply(parse_text(QUEUES % {"strategy": "BestEffortFIFO"}, "queues.yaml"))
    session = RecordingSession()
    for node in ("n1", "n2"):
        m.fleet.register(name=node, labels={}, capacity={"cpu": 2000}, allocatable={"cpu": 2000}, boot_id="b",
                         agent_version="t", health_address="", pods=[], session=session)
    return m, session


def admitted(m: Manager, name: str, count: int) -> Workload:
    body = workload_doc(name, container_doc(name="c", requests={"cpu": "1"}), count=count)
    m.create_workload(parse_text(json.dumps(body), name, fmt="json")[0])
    settle(m)
    wl = m.get_workload("default", name)
    assert workload_state(wl) == "Admitted"
    return wl


def report(pod: PodRecord, phase: str, *, started: float = 10.0, finished: float | None = None) -> ReportedPod:
    return ReportedPod(uid=pod.uid, name=pod.name, namespace="default", workload="w", phase=phase, ready=True,
                       started_at=started, finished_at=finished)


def writes(m: Manager, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the objects each store write puts, from now on."""
    put: list[str] = []
    write = m.store.write

    def counting(changes: Sequence[Put | Delete]) -> int:
        put.extend(c.name for c in changes if isinstance(c, Put))
        return write(changes)

    monkeypatch.setattr(m.store, "write", counting)
    return put


async def test_reports_from_many_streams_store_each_workload_once_with_every_report_applied(
        monkeypatch: pytest.MonkeyPatch) -> None:
    m, session = cluster()
    wl = admitted(m, "w", 4)
    stored = writes(m, monkeypatch)
    pods = wl.status.pods
    acked: list[int] = []
    # Four pods on two nodes, each reported Running then Succeeded, on both streams, in one turn.
    for pod in pods:
        m.fleet.report_pods(pod.node, [report(pod, RUNNING)])
    for i, pod in enumerate(pods):
        m.fleet.report_pods(pod.node, [report(pod, SUCCEEDED, finished=20.0 + i)], lambda i=i: acked.append(i))
    # Nothing is handled (nor acknowledged) before the loop's next turn.
    assert m.get_workload("default", "w").status.pods == pods
    assert acked == []
    m.fleet.flush_reports()
    done = m.get_workload("default", "w")
    assert [p.phase for p in done.status.pods] == [SUCCEEDED] * 4
    assert [p.started_at for p in done.status.pods] == [10.0] * 4
    assert done.status.is_true("Finished")
    assert acked == [0, 1, 2, 3]
    # Finishing released the quota and told each node to forget its pods, after the write.
    assert not m.cache.holds_quota(done.key)
    assert sum(1 for c in session.sent if type(c).__name__ == "ForgetPodCommand") == 4
    # Stored once: the last report finished it (a release is acted on at once, with everything before it).
    assert stored == ["w"]


async def test_a_workload_still_running_is_stored_once_per_turn_whatever_the_number_of_reports(
        monkeypatch: pytest.MonkeyPatch) -> None:
    m, _ = cluster()
    wl = admitted(m, "w", 4)
    stored = writes(m, monkeypatch)
    for pod in wl.status.pods:
        m.fleet.report_pods(pod.node, [report(pod, RUNNING)])
    m.fleet.flush_reports()
    running = m.get_workload("default", "w")
    assert [p.phase for p in running.status.pods] == [RUNNING] * 4
    assert running.status.is_true("PodsReady")
    assert stored == ["w"]
    # The same reports again change nothing and write nothing.
    for pod in wl.status.pods:
        m.fleet.report_pods(pod.node, [report(pod, RUNNING)])
    m.fleet.flush_reports()
    assert stored == ["w"]


async def test_reports_refused_by_the_store_change_nothing_and_are_not_acknowledged(
        monkeypatch: pytest.MonkeyPatch) -> None:
    m, _ = cluster()
    wl = admitted(m, "w", 2)
    acked: list[bool] = []

    def refuse(*_: object) -> int:
        raise StoreError("disk full")

    monkeypatch.setattr(m.store, "write", refuse)
    for pod in wl.status.pods:
        m.fleet.report_pods(pod.node, [report(pod, RUNNING)], lambda: acked.append(True))
    m.fleet.flush_reports()
    assert m.get_workload("default", "w") == wl
    assert acked == []


async def test_a_node_registering_again_comes_after_the_reports_still_gathered() -> None:
    m, session = cluster()
    wl = admitted(m, "w", 1)
    pod = wl.status.pods[0]
    # Reported Running on the old stream, then the node registers again saying it succeeded.
    m.fleet.report_pods(pod.node, [report(pod, RUNNING)])
    m.fleet.register(name=pod.node, labels={}, capacity={"cpu": 2000}, allocatable={"cpu": 2000}, boot_id="b",
                     agent_version="t", health_address="", pods=[report(pod, SUCCEEDED, finished=20.0)],
                     session=session)
    done = m.get_workload("default", "w")
    assert done.status.is_true("Finished")
    assert done.status.is_true("PodsReady")  # the Running report was handled first
    m.fleet.flush_reports()  # nothing left to handle
    assert m.get_workload("default", "w") == done


async def test_a_pending_pods_qos_class_alone_waits_for_its_next_change_or_the_nodes_heartbeat(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent reports a pod Pending with its QoS class as it accepts it; on its own that is not
    worth a write of the workload (which its start or end write follows at once).  Kubernetes too
    sets ``status.qosClass`` once, when the pod is made (pkg/registry/core/pod/strategy.go,
    PrepareForCreate), not as a status update of its own."""
    m, _ = cluster()
    wl = admitted(m, "w", 2)
    first, second = wl.status.pods
    stored = writes(m, monkeypatch)

    def pending(pod: PodRecord) -> ReportedPod:
        return ReportedPod(uid=pod.uid, name=pod.name, namespace="default", workload="w", phase=PENDING,
                           qos_class="Burstable")

    for pod in (first, second):
        m.fleet.report_pods(pod.node, [pending(pod)], periodic=False)
    m.fleet.flush_reports()
    assert stored == [] and m.get_workload("default", "w") == wl
    # Its start brings the class along.
    m.fleet.report_pods(first.node, [report(first, RUNNING)._replace(qos_class="Burstable")], periodic=False)
    m.fleet.flush_reports()
    assert stored == ["w"]
    assert [(p.phase, p.qos_class) for p in m.get_workload("default", "w").status.pods] == [
        (RUNNING, "Burstable"), (PENDING, "")]
    # A pod still pending gets its class stored at the latest with the node's heartbeat (every pod it runs).
    m.fleet.report_pods(second.node, [pending(second)])
    m.fleet.flush_reports()
    assert stored == ["w", "w"]
    assert [p.qos_class for p in m.get_workload("default", "w").status.pods] == ["Burstable", "Burstable"]
    # A change report that tells more than the class is stored at once.
    m.fleet.report_pods(second.node, [pending(second)._replace(message="pulling")], periodic=False)
    m.fleet.flush_reports()
    assert stored == ["w", "w", "w"]


async def test_a_pod_the_controller_does_not_know_is_stopped_unless_it_has_ended_then_only_forgotten() -> None:
    """A released workload's pod that a heartbeat reports again, ended, before the ForgetPod reached its
    agent: told to forget it, with no StopPod (its processes are gone; the agent would ignore it)."""
    from sluicegate.controller.nodes import ForgetPodCommand, StopPodCommand

    m, session = cluster()
    wl = admitted(m, "w", 1)
    (pod,) = wl.status.pods
    m.fleet.report_pods(pod.node, [report(pod, RUNNING)], periodic=False)
    m.fleet.report_pods(pod.node, [report(pod, SUCCEEDED, finished=20.0)], periodic=False)
    m.fleet.flush_reports()
    assert m.get_workload("default", "w").is_finished
    session.sent.clear()
    m.fleet.report_pods(pod.node, [report(pod, SUCCEEDED, finished=20.0)])
    m.fleet.flush_reports()
    assert session.sent == [ForgetPodCommand(pod.uid)]
    session.sent.clear()
    stranger = ReportedPod(uid="not-ours", name="x", namespace="default", workload="x", phase=RUNNING)
    m.fleet.report_pods(pod.node, [stranger])
    m.fleet.flush_reports()
    assert session.sent == [StopPodCommand("not-ours", 0.0, "Unknown", "the controller does not know this pod")]
