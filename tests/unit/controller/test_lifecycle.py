"""Pure lifecycle rules: backoff, requeue state, execution time, reclaimable pods, Jobs, partial admission."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from sluicegate.controller.lifecycle import (
    JOB_ANNOTATION,
    JobSpec,
    backoff_seconds,
    due_eviction,
    evict,
    released,
    settle,
)
from sluicegate.controller.scheduling.cycle import search_partial_counts
from sluicegate.controller.scheduling.flavors import Assignment
from sluicegate.model import WaitForPodsReadyConfig
from sluicegate.model.pods import PodRecord, with_pods
from sluicegate.model.workloads import RequeueState
from tests.builders import pod_set as podset
from tests.builders import with_admission as admitted
from tests.builders import workload as wl

WFPR = WaitForPodsReadyConfig(enabled=True, timeout_seconds=10, backoff_base_seconds=60, backoff_max_seconds=3600,
                              backoff_limit_count=3)


@pytest.mark.parametrize(("count", "expected"), [(1, 60), (2, 120), (3, 240), (6, 1920), (7, 3600), (20, 3600)],
                         ids=lambda v: str(v))
def test_backoff_doubles_from_the_base_up_to_the_cap(count: int, expected: float) -> None:
    got = backoff_seconds(count, WFPR, random.Random(1))
    assert expected <= got <= expected * 1.0001


def running(name: str = "w", *, at: float = 100.0, pods: int = 2, **ps: str):
    w = admitted(wl(name, podset("main", count=pods, cpu="1")), "cq", {"cpu": "default"}, at=at)
    recs = tuple(PodRecord(uid=f"{name}-{i}", name=f"{name}-main-{i}", pod_set="main", index=i, node="n",
                           requests={"cpu": 1000}, phase="Running", ready=True) for i in range(pods))
    return with_pods(w, recs)


def test_pods_ready_timeout_then_requeue_state_counts_and_deactivates_past_the_limit() -> None:
    w = running(pods=1)
    w = with_pods(w, (replace(w.status.pods[0], ready=False),))
    w = settle(w, 101.0, wait_for_pods_ready=WFPR).workload
    assert w.status.condition("PodsReady").reason == "WaitForStart"
    assert due_eviction(w, 109.0, WFPR) is None
    fired = due_eviction(w, 110.0, WFPR)
    assert fired is not None and fired.status.condition("Evicted").reason == "PodsReadyTimeout"
    states = []
    for round_ in range(1, 5):
        w2 = replace(fired, status=replace(fired.status, requeue_state=RequeueState(count=round_ - 1) if round_ > 1 else None))
        done = released(w2, 200.0, WFPR)
        states.append((done.status.requeue_state.count, done.active,
                       None if done.status.requeue_state.requeue_at is None else round(done.status.requeue_state.requeue_at - 200)))
    assert states == [(1, True, 60), (2, True, 120), (3, True, 240), (4, False, None)]


def test_recovery_timeout_applies_after_the_workload_was_ready_once() -> None:
    cfg = replace(WFPR, recovery_timeout_seconds=5)
    w = settle(running(pods=1), 101.0, wait_for_pods_ready=cfg).workload
    assert w.status.condition("PodsReady").is_true
    w = settle(with_pods(w, (replace(w.status.pods[0], ready=False),)), 150.0, wait_for_pods_ready=cfg).workload
    assert w.status.condition("PodsReady").reason == "WaitForRecovery"
    assert due_eviction(w, 154.0, cfg) is None
    assert due_eviction(w, 155.0, cfg).status.condition("Evicted").reason == "PodsReadyTimeout"


def test_execution_time_accumulates_across_admissions_and_resets_on_deactivation() -> None:
    w = replace(running(pods=1, at=100.0), maximum_execution_time_seconds=50)
    # Evicted after 30s admitted: 30s accumulate.
    back = released(evict(w, reason="Preempted", message="x", now=130.0), 130.0, WFPR)
    assert back.status.accumulated_past_execution_time_seconds == 30
    again = admitted(back, "cq", {"cpu": "default"}, at=200.0)
    again = replace(again, status=replace(again.status, accumulated_past_execution_time_seconds=30))
    assert due_eviction(again, 219.0, WFPR) is None
    fired = due_eviction(again, 220.0, WFPR)
    assert fired is not None and not fired.active and "maximum execution time" in fired.status.condition("Evicted").message
    assert released(fired, 220.0, WFPR).status.accumulated_past_execution_time_seconds == 0


def test_reclaimable_pods_only_grow_while_quota_is_held() -> None:
    w = running(pods=4)
    pods = list(w.status.pods)
    pods[0] = replace(pods[0], phase="Succeeded")
    s = settle(with_pods(w, tuple(pods)), 110.0)
    assert (dict(s.workload.status.reclaimable_pods), s.reclaimed) == ({"main": 1}, True)
    pods[1] = replace(pods[1], phase="Succeeded")
    s2 = settle(with_pods(s.workload, tuple(pods)), 111.0)
    assert (dict(s2.workload.status.reclaimable_pods), s2.reclaimed) == ({"main": 2}, True)
    s3 = settle(s2.workload, 112.0)
    assert s3.reclaimed is False


def job(completions: int, parallelism: int, *, indexed: bool = False, backoff: int = 6):
    w = running(pods=parallelism)
    spec = JobSpec(completions=completions, parallelism=parallelism, indexed=indexed, backoff_limit=backoff)
    return replace(w, annotations={JOB_ANNOTATION: spec.to_json()})


def test_a_job_replaces_succeeded_pods_until_completions_and_reclaims_the_rest() -> None:
    uids = iter(f"new-{i}" for i in range(10))
    w = job(3, 2)
    pods = list(w.status.pods)
    pods[0] = replace(pods[0], phase="Succeeded")
    s = settle(with_pods(w, tuple(pods)), 110.0, new_uid=lambda: next(uids))
    assert [p.uid for p in s.launch] == ["new-0"]
    assert dict(s.workload.status.reclaimable_pods) == {}
    pods = [replace(p, phase="Succeeded") if p.uid == "w-1" else p for p in s.workload.status.pods]
    s = settle(with_pods(s.workload, tuple(pods)), 111.0, new_uid=lambda: next(uids))
    # Two done, one running: one completion remains, so one of the two slots is reclaimable.
    assert (s.launch, dict(s.workload.status.reclaimable_pods)) == ((), {"main": 1})
    pods = [replace(p, phase="Succeeded") for p in s.workload.status.pods]
    s = settle(with_pods(s.workload, tuple(pods)), 112.0, new_uid=lambda: next(uids))
    assert (s.release, s.workload.status.condition("Finished").reason) == (True, "Succeeded")


def test_a_job_fails_after_its_backoff_limit() -> None:
    uids = iter(f"new-{i}" for i in range(10))
    w = job(1, 1, backoff=1)
    w = with_pods(w, (replace(w.status.pods[0], phase="Failed", exit_code=2),))
    s = settle(w, 110.0, new_uid=lambda: next(uids))
    assert [p.uid for p in s.launch] == ["new-0"]
    pods = [replace(p, phase="Failed", exit_code=2) for p in s.workload.status.pods]
    s = settle(with_pods(s.workload, tuple(pods)), 111.0, new_uid=lambda: next(uids))
    fin = s.workload.status.condition("Finished")
    assert (s.release, fin.reason) == (True, "Failed") and "backoff limit (1)" in fin.message


@pytest.mark.parametrize(
    ("count", "min_count", "fits_up_to", "expected"),
    [(8, 2, 5, 5), (8, 2, 7, 7), (8, 2, 1, None), (10, 1, 1, 1)],
    ids=["largest that fits", "one less than full", "below the minimum never", "down to a minimum of one"],
)
def test_partial_admission_finds_the_largest_count_that_fits(count, min_count, fits_up_to, expected) -> None:
    w = wl("p", podset("main", count=count, min_count=min_count, cpu="1"))
    tried = []

    def attempt(counts):
        tried.append(counts[0])
        return (Assignment(), []) if counts[0] <= fits_up_to and counts[0] < count else None

    found = search_partial_counts(w, attempt)
    got = max((c for c in tried if c <= fits_up_to), default=None) if found else None
    assert got == expected
    assert all(c >= min_count for c in tried)
    # Binary search: a logarithmic number of assignments, not one per count.
    assert len(tried) <= 4
