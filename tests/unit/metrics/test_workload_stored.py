"""``ControllerMetrics.workload_stored`` counts exactly what the condition-by-condition reading counted.

The hook reads each state's conditions once into a map and returns early
when no counted condition turned true; the reference below is the reading
it replaced (a scan of the conditions for every test).  Both are told the
same random sequences of stored states, duplicate condition types included
(the first of a type is the one that counts), and must leave the same
scrape text and the same admissions waiting for their pods' readiness.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from sluicegate.common.metrics import render
from sluicegate.controller.metrics import _EVICTION_REASON, ControllerMetrics
from sluicegate.model.names import ClusterQueueName
from sluicegate.model.pods import PodRecord
from sluicegate.model.workloads import Admission, Condition, Workload
from tests.builders import workload as pending_workload


def _queued_at(wl: Workload) -> float:
    at = wl.creation_timestamp
    for type_ in ("Requeued", "Evicted"):
        cond = wl.status.condition(type_)
        if cond is not None and cond.is_true:
            at = max(at, cond.last_transition_time)
    return at


def _since(wl: Workload, condition: str, start: float) -> float:
    cond = wl.status.condition(condition)
    return max(0.0, cond.last_transition_time - start) if cond is not None else 0.0


def reference(self: ControllerMetrics, old: Workload | None, new: Workload) -> None:
    """The hook as it read the conditions before (one scan per test)."""
    role = self.role
    pc = new.priority_class[1] if new.priority_class is not None else ""
    lq = (new.queue_name, new.namespace, pc, role)
    admission = new.status.admission or (old.status.admission if old is not None else None)
    if admission is None:
        return
    cq = (admission.cluster_queue, pc, role)
    queued_at = _queued_at(old if old is not None else new)
    if new.has_quota_reservation and (old is None or not old.has_quota_reservation):
        wait = _since(new, "QuotaReserved", queued_at)
        self.quota_reserved.inc(cq)
        self.quota_reserved_wait.observe(cq, wait)
        self.local_quota_reserved.inc(lq)
        self.local_quota_reserved_wait.observe(lq, wait)
    if new.is_admitted and (old is None or not old.is_admitted):
        wait = _since(new, "Admitted", queued_at)
        self.admitted.inc(cq)
        self.admission_wait.observe(cq, wait)
        admitted_cond = new.status.condition("Admitted")
        if new.status.pods and admitted_cond is not None:
            self._not_ready_yet[new.key] = (queued_at, admitted_cond.last_transition_time)
        self.local_admitted.inc(lq)
        self.local_admission_wait.observe(lq, wait)
    became_ready = new.status.is_true("PodsReady") and not (old is not None and old.status.is_true("PodsReady"))
    if new.is_admitted and became_ready:
        times = self._not_ready_yet.pop(new.key, None)
        if times is not None:
            since_queued, since_admitted = (_since(new, "PodsReady", at) for at in times)
            self.ready_wait.observe(cq, since_queued)
            self.local_ready_wait.observe(lq, since_queued)
            self.admitted_until_ready.observe(cq, since_admitted)
            self.local_admitted_until_ready.observe(lq, since_admitted)
    evicted = new.status.condition("Evicted")
    if evicted is not None and evicted.is_true and (old is None or not old.status.is_true("Evicted")):
        reason = _EVICTION_REASON.get(evicted.reason, evicted.reason)
        self.evicted.inc((admission.cluster_queue, reason, "", pc, role))
        self.local_evicted.inc((new.queue_name, new.namespace, reason, "", pc, role))
        self._not_ready_yet.pop(new.key, None)
    if new.is_finished and (old is None or not old.is_finished):
        self.finished.inc(cq)
        self.local_finished.inc(lq)
        self._not_ready_yet.pop(new.key, None)


def _counted(m: ControllerMetrics) -> list[bytes]:
    """The scrape's kueue_* families (the process_* ones before them change from one scrape to the next)."""
    return render(m.registry).split(b"\n# HELP kueue_")[1:]


_TYPES = ("QuotaReserved", "Admitted", "PodsReady", "Evicted", "Finished", "Requeued", "Other")
_PODS = (PodRecord(uid="u", name="p", pod_set="main", index=0, node="n"),)

conditions = st.lists(st.builds(
    Condition, type=st.sampled_from(_TYPES), status=st.sampled_from(("True", "False", "Unknown")),
    reason=st.sampled_from(("Preempted", "InactiveWorkload", "PodsReady")), message=st.just(""),
    last_transition_time=st.floats(min_value=0, max_value=1e4, allow_nan=False)), max_size=8).map(tuple)
states = st.tuples(conditions, st.sampled_from(("", "cq-a", "cq-b")), st.booleans(), st.booleans())


def _state(base: Workload, state: tuple[tuple[Condition, ...], str, bool, bool], previous: Workload | None) -> Workload:
    conds, cq, pods, same_conditions = state
    if same_conditions and previous is not None:
        conds = previous.status.conditions  # rewritten without a condition changing (the common write)
    admission = Admission(ClusterQueueName(cq), ()) if cq else None
    return replace(base, status=replace(base.status, conditions=conds, admission=admission,
                                        pods=_PODS if pods else ()))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(("w1", "w2")), states), min_size=1, max_size=12),
       st.floats(min_value=0, max_value=1e4, allow_nan=False))
def test_the_same_counts_as_reading_each_condition_again(steps: list, created: float) -> None:
    fast, slow = ControllerMetrics(), ControllerMetrics()
    stored: dict[str, Workload] = {}
    for name, state in steps:
        old = stored.get(name)
        new = _state(pending_workload(name, created=created), state, old)
        fast.workload_stored(old, new)
        reference(slow, old, new)
        stored[name] = new
    assert _counted(fast) == _counted(slow)
    assert fast._not_ready_yet == slow._not_ready_yet


def test_a_rewrite_with_the_same_conditions_counts_nothing() -> None:
    m = ControllerMetrics()
    wl = pending_workload("w", created=1.0)
    admitted = replace(wl, status=replace(wl.status, admission=Admission(ClusterQueueName("cq"), ()), conditions=(
        Condition("QuotaReserved", "True", "", "", 2.0), Condition("Admitted", "True", "", "", 3.0))))
    m.workload_stored(wl, admitted)
    before = _counted(m)
    m.workload_stored(admitted, replace(admitted, status=replace(admitted.status, pods=_PODS)))
    assert _counted(m) == before
    assert m.admitted.value(("cq", "", "standalone")) == 1


def test_observe_counting_is_observe_and_inc() -> None:
    from sluicegate.common.metrics import CounterFamily, HistogramFamily

    def families() -> tuple[HistogramFamily, CounterFamily]:
        return (HistogramFamily("wait_seconds", "Waits.", ["cq"], buckets=[1.0, 5.0]),
                CounterFamily("admitted_total", "Admitted.", ["cq"]))

    (h1, c1), (h2, c2) = families(), families()
    for cq, wait in (("a", 0.5), ("b", 7.0), ("a", 3.0), ("a", 1.0), ("c", 0.0)):
        h1.observe_counting((cq,), wait, c1)
        h2.observe((cq,), wait)
        c2.inc((cq,))
    assert (h1.text(), c1.text()) == (h2.text(), c2.text())
    assert c1.value(("a",)) == 3


# Who a workload is: (name, namespace and local queue, priority class); the hook keeps a series per queue and class.
_WHO = st.tuples(st.sampled_from(("w1", "w2", "w3")), st.sampled_from(("ns-a", "ns-b")),
                 st.sampled_from((None, ("WorkloadPriorityClass", "low"), ("WorkloadPriorityClass", "high"))))
_ACTIONS = st.lists(st.one_of(
    st.tuples(st.just("write"), _WHO, states),
    st.tuples(st.just("scrape")),
    st.tuples(st.just("role"), st.sampled_from(("leader", "follower", "standalone")))), min_size=1, max_size=16)


@settings(max_examples=300, deadline=None)
@given(_ACTIONS, st.floats(min_value=0, max_value=1e4, allow_nan=False))
def test_the_same_scrapes_across_queues_classes_roles_and_scrapes_between(actions: list, created: float) -> None:
    """The series the hook holds (one per ClusterQueue, LocalQueue and priority class) give, at every scrape,
    the text of the families told one by one, also after the role changed (the label sets carry it)."""
    fast, slow = ControllerMetrics(), ControllerMetrics()
    stored: dict[str, Workload] = {}
    for action in actions:
        if action[0] == "scrape":
            assert _counted(fast) == _counted(slow)
        elif action[0] == "role":
            fast.set_role(action[1], 1)
            slow.set_role(action[1], 1)
        else:
            (name, namespace, priority_class), state = action[1], action[2]
            old = stored.get(name)
            base = replace(pending_workload(name, created=created), namespace=namespace, queue_name=f"lq-{namespace}",
                           priority_class=priority_class)
            new = _state(base, state, old)
            fast.workload_stored(old, new)
            reference(slow, old, new)
            stored[name] = new
    assert _counted(fast) == _counted(slow)
    assert fast._not_ready_yet == slow._not_ready_yet
