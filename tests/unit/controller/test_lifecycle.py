"""Pure lifecycle rules: backoff, requeue state, execution time, reclaimable pods, Jobs, partial admission."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from sluicegate.controller.cache import Cache
from sluicegate.controller.lifecycle import (
    JOB_ANNOTATION,
    JobSpec,
    backoff_seconds,
    carried_over,
    due_eviction,
    evict,
    released,
    settle,
    skip_done_indexes,
)
from sluicegate.controller.scheduling.cycle import search_partial_counts
from sluicegate.controller.scheduling.flavors import Assignment
from sluicegate.controller.scheduling.placement import PodPlacement
from sluicegate.model import WaitForPodsReadyConfig
from sluicegate.model.names import FlavorName
from sluicegate.model.pods import PodRecord, with_pods
from sluicegate.model.resources import FlavorResource
from sluicegate.model.workloads import PodSetAssignment, RequeueState
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


def _evict_and_release(w, now: float):
    """Evict ``w``; its running pods report that they were stopped; give the quota back."""
    s = settle(evict(w, reason="Preempted", message="preempted", now=now), now)
    stopped = tuple(replace(p, phase="Failed", reason="Killed") if p.reason == "Stopping" else p
                    for p in s.workload.status.pods)
    s = settle(with_pods(s.workload, stopped), now + 1)
    assert s.release and s.requeue
    return s.workload


def _readmit(w, count: int, at: float):
    """Admit ``w`` again with ``count`` new pods, as the scheduler does (carried pods first)."""
    back = admitted(w, "cq", {"cpu": "default"}, at=at)
    carried = carried_over(w)
    fresh = skip_done_indexes(carried, [PodPlacement("main", i, "n", {"cpu": 1000}) for i in range(count)])
    recs = tuple(PodRecord(uid=f"again-{p.index}", name=f"w-main-{p.index}", pod_set="main", index=p.index, node="n",
                           requests={"cpu": 1000}, phase="Running", ready=True) for p in fresh)
    return with_pods(back, (*carried, *recs))


def test_reclaimable_pods_survive_an_eviction_and_completed_pods_are_not_run_again() -> None:
    # Kueue keeps status.reclaimablePods when a workload is evicted and counts
    # pods after reclaim when it assigns flavors again (podSetsCountsAfterReclaim).
    w = running(pods=4)
    pods = list(w.status.pods)
    pods[0] = replace(pods[0], phase="Succeeded")
    w = settle(with_pods(w, tuple(pods)), 110.0).workload
    back = _evict_and_release(w, 120.0)
    assert dict(back.status.reclaimable_pods) == {"main": 1}
    assert back.counts_after_reclaim() == (3,)
    assert [(p.uid, p.replaced) for p in carried_over(back)] == [("w-0", True)]
    again = _readmit(back, 3, at=200.0)
    assert sorted(p.index for p in again.status.pods if not p.replaced) == [1, 2, 3]
    done = with_pods(again, tuple(replace(p, phase="Succeeded") for p in again.status.pods))
    s = settle(done, 210.0)
    assert (s.release, s.workload.status.condition("Finished").reason) == (True, "Succeeded")


def test_an_indexed_job_requeued_after_completions_runs_only_the_missing_indexes() -> None:
    uids = iter(f"new-{i}" for i in range(10))
    w = replace(job(3, 2, indexed=True), name="w")
    pods = [replace(p, phase="Succeeded") if p.index == 0 else p for p in w.status.pods]
    s = settle(with_pods(w, tuple(pods)), 110.0, new_uid=lambda: next(uids))
    # Index 0 done; its slot runs index 2; index 1 still runs.
    pods = [replace(p, phase="Succeeded") if p.index == 2 else p for p in s.workload.status.pods]
    s = settle(with_pods(s.workload, tuple(pods)), 111.0, new_uid=lambda: next(uids))
    assert dict(s.workload.status.reclaimable_pods) == {"main": 1}
    back = _evict_and_release(s.workload, 120.0)
    # One completion (index 1) remains: quota for one pod, not two.
    assert (dict(back.status.reclaimable_pods), back.counts_after_reclaim()) == ({"main": 1}, (1,))
    again = _readmit(back, 1, at=200.0)
    assert [p.index for p in again.status.pods if not p.replaced] == [1]
    pods = [replace(p, phase="Succeeded") if p.uid == "again-1" else p for p in again.status.pods]
    s = settle(with_pods(again, tuple(pods)), 210.0, new_uid=lambda: next(uids))
    assert (s.release, s.launch, s.workload.status.condition("Finished").reason) == (True, (), "Succeeded")


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


@pytest.mark.parametrize(
    ("admitted_count", "reclaimable", "held_cpu"),
    [
        (5, 0, 5000),
        (5, 2, 3000),  # a full admission shrinks with every reclaimable pod
        (3, 1, 3000),  # admitted for 3 of 5: 4 still to run, the admission is not too big yet
        (3, 2, 3000),
        (3, 3, 2000),  # only 2 still to run: it holds 2 pods' worth
        (3, 9, 0),
    ],
)
def test_an_admission_holds_quota_for_at_most_the_pods_still_to_run(admitted_count, reclaimable, held_cpu) -> None:
    # Kueue's totalRequestsFromAdmission: scale down only below the admitted count.
    w = admitted(wl("w", podset("main", count=5, cpu="1")), "cq", {"cpu": "default"})
    adm = replace(w.status.admission, pod_set_assignments=(PodSetAssignment(
        name="main", flavors={"cpu": FlavorName("default")}, resource_usage={"cpu": 1000 * admitted_count},
        count=admitted_count),))
    w = replace(w, status=replace(w.status, admission=adm, reclaimable_pods={"main": reclaimable}))
    assert Cache.held_usage(w).get(FlavorResource(FlavorName("default"), "cpu"), 0) == held_cpu
