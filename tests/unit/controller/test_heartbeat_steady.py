"""A heartbeat's pods that say nothing new are not handled again (service.agents._heartbeat_pods).

Every heartbeat reports every pod of its node; the controller skips a pod
whose report is the one of the stream's last heartbeat, checked then against
the same workload object.  What must still be handled: a change in anything
the controller acts on, any change of the workload on the controller's side,
pods it does not own, and the first heartbeat of a stream.
"""

from __future__ import annotations

from sluicegate.controller.service.agents import _heartbeat_pods, _StreamSession
from sluicegate.model.pods import PodRecord
from sluicegate.v1 import agent_pb2

from .test_node_loss import cluster, running


def status(pod: PodRecord, phase: str = "Running", **fields: object) -> agent_pb2.PodStatus:
    return agent_pb2.PodStatus(uid=pod.uid, name=pod.name, namespace="default", workload="w", phase=phase,
                               containers=[agent_pb2.ContainerStatus(name="c", state=phase)], **fields)


def uids(pods: list[object]) -> list[str]:
    return [p.uid for p in pods]  # type: ignore[attr-defined]


def test_a_pod_reported_as_before_is_skipped_until_something_changes() -> None:
    m, _, _ = cluster()
    _, pod = running(m, "a")
    session = _StreamSession("n1")
    assert uids(_heartbeat_pods(m.fleet, session, [status(pod)])) == [pod.uid], "a stream's first heartbeat"
    assert _heartbeat_pods(m.fleet, session, [status(pod)]) == []
    # Usage figures change at every heartbeat and are not acted on.
    assert _heartbeat_pods(m.fleet, session, [status(pod, rss_bytes=1 << 20, cpu_seconds=3.5)]) == []
    # What the controller acts on: handled.
    assert uids(_heartbeat_pods(m.fleet, session, [status(pod, ready=True)])) == [pod.uid]
    assert uids(_heartbeat_pods(m.fleet, session, [status(pod, ready=True, message="m")])) == [pod.uid]
    changed = status(pod, ready=True, message="m")
    changed.containers[0].restart_count = 1
    assert uids(_heartbeat_pods(m.fleet, session, [changed])) == [pod.uid]
    assert _heartbeat_pods(m.fleet, session, [changed]) == []
    # A new stream starts over.
    assert uids(_heartbeat_pods(m.fleet, _StreamSession("n1"), [changed])) == [pod.uid]


def test_a_change_on_the_controllers_side_has_the_same_report_handled_again() -> None:
    m, _, _ = cluster()
    wl, pod = running(m, "a")
    session = _StreamSession("n1")
    _heartbeat_pods(m.fleet, session, [status(pod)])
    assert _heartbeat_pods(m.fleet, session, [status(pod)]) == []
    m.evict_now(m.get_workload("default", "a"), reason="Preempted", message="for a test")
    assert m.get_workload("default", "a") is not wl
    assert uids(_heartbeat_pods(m.fleet, session, [status(pod)])) == [pod.uid], "the controller now stops it"


def test_pods_the_controller_does_not_own_are_always_handled_and_gone_pods_are_forgotten() -> None:
    m, _, _ = cluster()
    _, pod = running(m, "a")
    session = _StreamSession("n1")
    stranger = agent_pb2.PodStatus(uid="not-ours", name="x", namespace="default", workload="x", phase="Running")
    for _ in range(3):
        # Told to stop at every heartbeat while it runs (the controller does not know it).
        assert "not-ours" in uids(_heartbeat_pods(m.fleet, session, [status(pod), stranger]))
    assert set(session.steady) == {pod.uid}
    _heartbeat_pods(m.fleet, session, [])
    assert session.steady == {}
