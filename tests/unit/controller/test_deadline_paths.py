"""The timers' one-pass readings give what the readings they replaced gave.

``eviction_deadline`` runs at every write of a workload that holds quota;
it now finds the conditions it reads in one pass over them, and returns at
once when the workload has no timer.  Checked here against the way it was
written before, over workloads in every state the conditions can describe
(repeated types included: the first of each counts).
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from sluicegate.controller.lifecycle import JOB_ANNOTATION, JobSpec
from sluicegate.controller.timers import _active_deadline, eviction_deadline
from sluicegate.model.config import WaitForPodsReadyConfig
from sluicegate.model.copying import copy_with
from sluicegate.model.pods import PodRecord
from sluicegate.model.workloads import Condition, Workload, WorkloadStatus
from tests.builders import workload


def eviction_deadline_before(wl: Workload, wfpr: WaitForPodsReadyConfig) -> float | None:
    """``eviction_deadline`` as it was written before its one pass over the conditions."""
    if not wl.is_admitted or wl.is_finished or wl.status.is_true("Evicted"):
        return None
    admitted = wl.status.condition("Admitted")
    start = admitted.last_transition_time if admitted is not None else None
    out: list[float] = []
    if wl.maximum_execution_time_seconds is not None and start is not None:
        out.append(start + wl.maximum_execution_time_seconds - wl.status.accumulated_past_execution_time_seconds)
    job = _active_deadline(wl)
    if job is not None and start is not None and wl.status.terminate is None:
        out.append(start + job)
    if wfpr.enabled and wl.status.pods:
        cond = wl.status.condition("PodsReady")
        if cond is None or not cond.is_true:
            if cond is not None and cond.reason == "WaitForRecovery":
                timeout = (wfpr.recovery_timeout_seconds if wfpr.recovery_timeout_seconds is not None
                           else wfpr.timeout_seconds)
                out.append(cond.last_transition_time + timeout)
            elif start is not None:
                out.append(start + wfpr.timeout_seconds)
            else:
                out.append(float("-inf"))
    return min(out) if out else None


conditions = st.lists(st.builds(
    Condition, type=st.sampled_from(["Admitted", "QuotaReserved", "PodsReady", "Finished", "Evicted", "Requeued"]),
    status=st.sampled_from(["True", "False", "Unknown"]), reason=st.sampled_from(["PodsReady", "WaitForRecovery", "X"]),
    message=st.just("m"), last_transition_time=st.floats(0, 1000)), max_size=7)
configs = st.builds(WaitForPodsReadyConfig, enabled=st.booleans(), timeout_seconds=st.sampled_from([60.0, 300.0]),
                    recovery_timeout_seconds=st.sampled_from([None, 30.0]))


@settings(max_examples=500, deadline=None)
@given(conds=conditions, wfpr=configs, limit=st.sampled_from([None, 0, 600]), accumulated=st.integers(0, 100),
       active_deadline=st.sampled_from([None, "none", 50]), pods=st.booleans(), terminated=st.booleans())
def test_the_eviction_deadline_in_one_pass_is_the_deadline_as_it_was(
        conds: list[Condition], wfpr: WaitForPodsReadyConfig, limit: int | None, accumulated: int,
        active_deadline: int | str | None, pods: bool, terminated: bool) -> None:
    wl = workload("w")
    if active_deadline is not None:
        spec = JobSpec(completions=1, parallelism=1,
                       active_deadline_seconds=None if active_deadline == "none" else int(active_deadline))
        wl = copy_with(wl, annotations={JOB_ANNOTATION: spec.to_json()})
        assert json.loads(wl.annotations[JOB_ANNOTATION])["activeDeadlineSeconds"] == spec.active_deadline_seconds
    status = WorkloadStatus(
        conditions=tuple(conds), accumulated_past_execution_time_seconds=accumulated,
        pods=(PodRecord(uid="p", name="w-main-0", pod_set="main", index=0, node="n"),) if pods else (),
        terminate=("Failed", "deadline") if terminated else None)
    wl = copy_with(wl, maximum_execution_time_seconds=limit, status=status)
    assert eviction_deadline(wl, wfpr) == eviction_deadline_before(wl, wfpr)
