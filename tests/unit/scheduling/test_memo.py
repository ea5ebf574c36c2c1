"""Answers kept between cycles for heads that did not fit (AssignmentMemo).

A head whose queue never preempts gets, from an earlier cycle, the answer a
head of the same shape got in the same ClusterQueue, as long as nothing on
the queue's path to the root of its cohort tree changed.  Every answer must
be the one a fresh flavor search would give: Kueue's scheduler searches for
every head (``pkg/scheduler/flavorassigner/flavorassigner.go``), so reusing
one is only a saving, never a different decision.
"""

from __future__ import annotations

from sluicegate.controller.scheduling.cycle import AssignmentMemo, Entry, Head, run_cycle
from sluicegate.controller.scheduling.preemption import Preemptor
from sluicegate.model import ClusterQueueName
from tests.builders import cluster_queue, flavor, group, pod_set, with_admission, workload

from .caches import build_cache


def _cache(**policy: str):
    running = with_admission(workload("running", pod_set(cpu="4"), priority=0), "a", {"cpu": "default"})
    return build_cache(
        queues=[cluster_queue("a", group(flavor("default", cpu="2")), cohort="c", **policy),  # type: ignore[arg-type]
                cluster_queue("b", group(flavor("default", cpu="2")), cohort="c")],
        admitted_workloads=[running],
    )


def _cycle(cache, memo: AssignmentMemo, name: str, cpu: str = "1", priority: int = 0) -> Entry:
    head = Head(workload=workload(name, pod_set(cpu=cpu), priority=priority), cluster_queue=ClusterQueueName("a"))
    (entry,) = run_cycle([head], cache.snapshot(0.0), preemptor=Preemptor(), memo=memo)
    return entry


def _fresh(cache, name: str, cpu: str = "1") -> Entry:
    return _cycle(cache, AssignmentMemo(), name, cpu)


def decision(e: Entry) -> tuple[str, str, str, object]:
    assert e.assignment is not None
    return (e.status.value, e.requeue_reason.value, e.message, e.assignment.mode())


def test_a_head_of_the_same_shape_gets_the_answer_a_fresh_search_gives() -> None:
    cache, memo = _cache(), AssignmentMemo()
    first = _cycle(cache, memo, "first")
    assert "insufficient unused quota for cpu in flavor default, 1 more needed" in first.message
    second = _cycle(cache, memo, "second")
    assert memo.hits == 1
    assert decision(second) == decision(first) == decision(_fresh(cache, "second"))


def test_another_shape_is_searched_afresh() -> None:
    cache, memo = _cache(), AssignmentMemo()
    _cycle(cache, memo, "one-cpu")
    bigger = _cycle(cache, memo, "two-cpu", cpu="2")
    assert memo.hits == 0
    assert "2 more needed" in bigger.message


def test_quota_released_on_the_path_forgets_the_answer() -> None:
    cache, memo = _cache(), AssignmentMemo()
    _cycle(cache, memo, "first")
    cache.release(next(iter(cache.holder)))
    after = _cycle(cache, memo, "second")
    assert memo.hits == 0
    assert after.status.value == "Assumed"


def test_usage_elsewhere_in_the_cohort_forgets_the_answer() -> None:
    """Queue b's admission changes the cohort's usage, which queue a could borrow from."""
    cache, memo = _cache(), AssignmentMemo()
    _cycle(cache, memo, "first")
    other = with_admission(workload("in-b", pod_set(cpu="1")), "b", {"cpu": "default"})
    cache.workloads[other.key] = other
    cache.add_admitted(other, 0.0)
    second = _cycle(cache, memo, "second")
    assert memo.hits == 0
    assert decision(second) == decision(_fresh(cache, "third"))


def test_a_queue_that_may_preempt_is_always_searched() -> None:
    """Whether a victim exists depends on the preemptor's priority, not only on its shape."""
    cache, memo = _cache(within="LowerPriority"), AssignmentMemo()
    low = _cycle(cache, memo, "low", priority=0)
    high = _cycle(cache, memo, "high", priority=5)
    assert memo.hits == 0
    assert (low.status.value, high.status.value) == ("NotNominated", "Preempting")


def test_a_head_whose_last_search_walked_every_flavor_is_answered_too() -> None:
    """A StrictFIFO head that keeps blocking its queue comes back with every tried index at -1: its next
    search starts at the first flavor again, as a new head's does."""
    cache, memo = _cache(), AssignmentMemo()
    first = _cycle(cache, memo, "blocked")
    assert first.last_tried == ({"cpu": -1},)
    again = Head(workload=workload("blocked", pod_set(cpu="1")), cluster_queue=ClusterQueueName("a"),
                 last_tried=first.last_tried)
    (entry,) = run_cycle([again], cache.snapshot(0.0), preemptor=Preemptor(), memo=memo)
    assert memo.hits == 1
    assert decision(entry) == decision(first)


def test_a_search_resumed_past_the_first_flavor_is_not_answered_from_memory() -> None:
    cache, memo = _cache(), AssignmentMemo()
    _cycle(cache, memo, "first")
    resumed = Head(workload=workload("resumed", pod_set(cpu="1")), cluster_queue=ClusterQueueName("a"),
                   last_tried=({"cpu": 0},))
    run_cycle([resumed], cache.snapshot(0.0), preemptor=Preemptor(), memo=memo)
    assert memo.hits == 0


def test_answers_are_kept_per_queue_and_forgotten_all_at_once_at_the_limit() -> None:
    cache, memo = _cache(), AssignmentMemo(limit=2)
    _cycle(cache, memo, "one-cpu")
    _cycle(cache, memo, "two-cpu", cpu="2")
    _cycle(cache, memo, "one-cpu-again")
    assert memo.hits == 1
    _cycle(cache, memo, "three-cpu", cpu="3")  # a third shape: the limit drops the two kept, keeps this one
    _cycle(cache, memo, "one-cpu-afresh")
    assert memo.hits == 1
    _cycle(cache, memo, "three-cpu-again", cpu="3")
    assert memo.hits == 2
