"""The pod report's fast paths give what the general ones give.

A pod report settles its workload, builds the effects of the settlement and
may send commands; each of these has a cheaper way for the common case
(``settle``'s one pass over conditions and pods, ``settlement_effects`` for a
settlement that only stores, ``command_to_proto`` filling messages in place,
``reported_pod`` made as a tuple).  Each is checked here against the way it
was written before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from sluicegate.controller.decide_pods import settlement_effects
from sluicegate.controller.effects import Effects, SetWorkload, Track, UpdateAdmitted
from sluicegate.controller.lifecycle import (
    JOB_ANNOTATION,
    JobSpec,
    Settlement,
    _failure,
    _finished,
    _pods_ready,
    _reclaimable,
    _stop_all,
    evict,
    settle,
)
from sluicegate.controller.nodes import (
    CancelLogsCommand,
    ForgetPodCommand,
    LogRequestCommand,
    ReportedPod,
    StopPodCommand,
)
from sluicegate.controller.service.agents import command_to_proto, forget_bytes, reported_pod
from sluicegate.model.conditions import set_condition
from sluicegate.model.pods import FAILED, PENDING, RUNNING, SUCCEEDED, PodRecord, with_pods
from sluicegate.model.workloads import Workload
from sluicegate.v1 import agent_pb2
from tests.builders import pod_set as podset
from tests.builders import with_admission as admitted
from tests.builders import workload as wl


def settle_before(w: Workload, now: float) -> Settlement:
    """``settle`` for a workload that is not deleted, evicted, terminated nor a Job, as it was written
    before its one pass (each rule finding the conditions and the pods again)."""
    pods = w.status.pods
    if not pods or w.is_finished and all(p.terminal for p in pods):
        return Settlement(w)
    assert not w.status.deleting and not w.status.is_true("Evicted") and w.status.terminate is None
    failed = [p for p in pods if p.phase == FAILED]
    if failed:
        first = min(failed, key=lambda p: (p.finished_at or now, p.name))
        pods, asked = _stop_all(pods, f"pod {first.name} of the workload failed")
        w = with_pods(w, pods)
        if not all(p.terminal for p in pods):
            return Settlement(w, stop=asked)
        return Settlement(_finished(w, "Failed", _failure(first), now), release=True)
    if all(p.phase == SUCCEEDED for p in pods):
        return Settlement(_finished(w, "Succeeded", "Job finished successfully", now), release=True)
    w, grew = _reclaimable(w, {ps.name: sum(1 for p in pods if p.pod_set == ps.name and p.phase == SUCCEEDED)
                               for ps in w.pod_sets})
    return Settlement(_pods_ready(w, pods, now), reclaimed=grew)


pod_states = st.tuples(st.sampled_from([PENDING, RUNNING, SUCCEEDED, FAILED]), st.booleans(), st.booleans(),
                       st.sampled_from(["", "Stopping", "Error"]), st.sampled_from(["main", "side"]))


@settings(max_examples=300, deadline=None)
@given(
    states=st.lists(pod_states, min_size=0, max_size=5),
    pods_ready=st.sampled_from([None, ("True", "PodsReady"), ("False", "WaitForStart"), ("False", "WaitForRecovery")]),
    finished=st.booleans(),
    reclaimable=st.sampled_from([{}, {"main": 1}, {"side": 0}, {"gone": 1}]),
)
def test_settle_in_one_pass_is_settle_as_it_was(states: list[tuple[str, bool, bool, str, str]],
                                                 pods_ready: tuple[str, str] | None, finished: bool,
                                                 reclaimable: dict[str, int]) -> None:
    w = admitted(wl("w", podset("main", count=3, cpu="1"), podset("side", count=2, cpu="1")), "cq",
                 {"cpu": "default"}, at=100.0)
    pods = tuple(PodRecord(uid=f"u{i}", name=f"w-{ps}-{i}", pod_set=ps, index=i, node="n", phase=phase, ready=ready,
                           replaced=replaced, reason=reason, finished_at=50.0 + i if phase in (SUCCEEDED, FAILED) else None)
                 for i, (phase, ready, replaced, reason, ps) in enumerate(states))
    conds = w.status.conditions
    if pods_ready is not None:
        conds = set_condition(conds, type_="PodsReady", status=pods_ready[0], reason=pods_ready[1], message="m", now=90.0)
    if finished:
        conds = set_condition(conds, type_="Finished", status=True, reason="Succeeded", message="done", now=95.0)
    w = replace(w, status=replace(w.status, conditions=conds, pods=pods, reclaimable_pods=reclaimable))
    assert settle(w, 200.0) == settle_before(w, 200.0)
    # A report's pods handed over with the workload stored before it: the same settlement.
    stored = with_pods(w, tuple(replace(p, phase=PENDING, ready=False) for p in pods[:1]) + pods[1:])
    assert settle(stored, 200.0, pods=pods) == settle_before(w, 200.0)


@settings(max_examples=200, deadline=None)
@given(
    states=st.lists(pod_states, min_size=1, max_size=4),
    way=st.sampled_from(["evicted", "deleting", "terminate", "job", "indexed-job", "plain"]),
)
def test_a_reports_pods_handed_over_settle_as_the_workload_holding_them(
        states: list[tuple[str, bool, bool, str, str]], way: str) -> None:
    w = admitted(wl("w", podset("main", count=3, cpu="1")), "cq", {"cpu": "default"}, at=100.0)
    pods = tuple(PodRecord(uid=f"u{i}", name=f"w-main-{i}", pod_set="main", index=i, node="n", phase=phase,
                           ready=ready, replaced=replaced, reason=reason)
                 for i, (phase, ready, replaced, reason, _) in enumerate(states))
    if way == "evicted":
        w = evict(w, reason="Preempted", message="for a test", now=150.0)
    elif way == "deleting":
        w = replace(w, status=replace(w.status, deleting=True))
    elif way == "terminate":
        w = replace(w, status=replace(w.status, terminate=("Failed", "DeadlineExceeded")))
    elif way.endswith("job"):
        job = JobSpec(completions=3, parallelism=2, indexed=way == "indexed-job", backoff_limit=1)
        w = replace(w, annotations={JOB_ANNOTATION: job.to_json()})
    stored = with_pods(w, tuple(replace(p, phase=RUNNING, ready=not p.ready) for p in pods))

    def uids() -> Callable[[], str]:
        n = iter(range(100))
        return lambda: f"new-{next(n)}"

    assert (settle(stored, 200.0, pods=pods, new_uid=uids())
            == settle(with_pods(stored, pods), 200.0, new_uid=uids()))


def running_workload() -> Workload:
    w = admitted(wl("w", podset("main", count=1, cpu="1")), "cq", {"cpu": "default"}, at=100.0)
    return with_pods(w, (PodRecord(uid="u0", name="w-main-0", pod_set="main", index=0, node="n", phase=RUNNING,
                                   ready=True),))


class Holding:
    def __init__(self, w: Workload, holds: bool) -> None:
        self.workloads = {w.key: w}
        self.holds = holds

    def holds_quota(self, key: str) -> bool:
        return self.holds


def test_the_effects_of_a_settlement_that_only_stores_are_those_of_the_general_path() -> None:
    w = running_workload()
    for holds in (True, False):
        for block in (True, False):
            got = settlement_effects(Settlement(w), Holding(w, holds), now=0.0, block_admission=block)
            cache = (SetWorkload(w), UpdateAdmitted(w), Track(w)) if holds else (SetWorkload(w), Track(w))
            assert got == Effects(puts=(w,), cache=cache, events=(("MODIFIED", w),), wake=block)


def test_commands_filled_in_place_are_the_messages_built_from_their_parts() -> None:
    cases = [
        (ForgetPodCommand("u1"), agent_pb2.ControllerMessage(forget_pod=agent_pb2.ForgetPod(uid="u1"))),
        (ForgetPodCommand("u2", purge=True),
         agent_pb2.ControllerMessage(forget_pod=agent_pb2.ForgetPod(uid="u2", purge=True))),
        (StopPodCommand("u3", 30.0, "Stopping", "why"),
         agent_pb2.ControllerMessage(stop_pod=agent_pb2.StopPod(uid="u3", grace_seconds=30.0, reason="Stopping",
                                                                message="why"))),
        (LogRequestCommand("r1", "u4", "c", True),
         agent_pb2.ControllerMessage(log_request=agent_pb2.LogRequest(request_id="r1", pod_uid="u4", container="c",
                                                                      follow=True))),
        (CancelLogsCommand("r2"), agent_pb2.ControllerMessage(cancel_logs=agent_pb2.CancelLogs(request_id="r2"))),
    ]
    for cmd, expected in cases:
        got = command_to_proto(cmd)
        assert got == expected and got.WhichOneof("kind") == expected.WhichOneof("kind"), cmd
        assert got.SerializeToString(deterministic=True) == expected.SerializeToString(deterministic=True)


def test_a_report_read_off_the_wire_has_every_field() -> None:
    running_c = agent_pb2.ContainerStatus(name="a", state="Running", restart_count=2)
    failed_c = agent_pb2.ContainerStatus(name="b", state="Terminated", exit_code=3, restart_count=1)
    ok_c = agent_pb2.ContainerStatus(name="c", state="Terminated", exit_code=0)
    p = agent_pb2.PodStatus(uid="u", name="n", namespace="ns", workload="w", phase=FAILED, reason="r", message="m",
                            containers=[ok_c, failed_c, running_c], ready=False, started_at=5.0, finished_at=9.0,
                            rss_bytes=7, cpu_seconds=1.5, requests={"cpu": 500}, priority=3, qos_class="Burstable")
    assert reported_pod(p) == ReportedPod(
        uid="u", name="n", namespace="ns", workload="w", phase=FAILED, reason="r", message="m", exit_code=3,
        ready=False, restarts=3, started_at=5.0, finished_at=9.0, rss_bytes=7, cpu_seconds=1.5, static=False,
        priority=3, qos_class="Burstable")
    # Unset times read as None; a static pod's requests are kept (they count on its node).
    static = reported_pod(agent_pb2.PodStatus(uid="s", phase=RUNNING, static=True, requests={"cpu": 250}))
    assert static.started_at is None and static.finished_at is None and static.exit_code is None
    assert static.static and dict(static.requests) == {"cpu": 250}


def restarts_and_exit_code_before(p: agent_pb2.PodStatus) -> tuple[int, int | None]:
    """What ``reported_pod`` read off the containers before its one-container path: every container iterated."""
    exit_code = None
    restarts = 0
    for c in p.containers:
        restarts += c.restart_count
        if c.state == "Terminated" and (exit_code is None or c.exit_code != 0):
            exit_code = c.exit_code
    return restarts, exit_code


containers = st.lists(st.builds(
    agent_pb2.ContainerStatus, name=st.sampled_from(["a", "b"]),
    state=st.sampled_from(["", "Waiting", "Running", "Terminated"]), exit_code=st.integers(-2, 3),
    restart_count=st.integers(0, 3)), max_size=3)


@settings(max_examples=200, deadline=None)
@given(containers=containers)
def test_a_reports_restarts_and_exit_code_are_read_as_from_every_container(
        containers: list[agent_pb2.ContainerStatus]) -> None:
    # Read off the wire, as the stream reader gets it (a parsed message, not the one built here).
    p = agent_pb2.PodStatus.FromString(agent_pb2.PodStatus(uid="u", phase=RUNNING,
                                                           containers=containers).SerializeToString())
    got = reported_pod(p)
    assert (got.restarts, got.exit_code) == restarts_and_exit_code_before(p)


@settings(max_examples=200, deadline=None)
@given(uid=st.one_of(st.text(max_size=200), st.sampled_from(["", "0b8f2c1e-5d0a-4e7b-9c3f-1a2b3c4d5e6f", "é" * 70])))
def test_a_forget_pod_written_directly_is_the_generated_message_s_bytes(uid: str) -> None:
    # Lengths past 127 bytes take a two-byte varint; an empty uid is left out, as proto3 leaves it.
    assert forget_bytes(uid) == command_to_proto(ForgetPodCommand(uid)).SerializeToString()
    assert agent_pb2.ControllerMessage.FromString(forget_bytes(uid)).forget_pod.uid == uid
