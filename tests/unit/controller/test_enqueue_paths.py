"""Queueing.enqueue's one lookup of the LocalQueue gives what asking cq_for and unqueued_reason gave.

Every creation and requeue goes through enqueue; it used to look the
LocalQueue up twice (``cq_for``, then ``unqueued_reason``).  Whatever the
LocalQueue, its stop policy, its ClusterQueue and a PodGroup the workload
may name, a workload must wait in the same ClusterQueue's heap (or in none)
as the two questions said.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from sluicegate.controller.cache import Cache
from sluicegate.controller.queueing import Queueing, unqueued_reason
from sluicegate.controller.timers import Deadlines
from sluicegate.model.podgroups import GROUP_NAME_ANNOTATIONS, PodGroup
from sluicegate.model.queues import StopPolicy
from tests.builders import cluster_queue, flavor, group, local_queue, workload


@settings(max_examples=300, deadline=None)
@given(
    lq_exists=st.booleans(),
    stop=st.sampled_from(list(StopPolicy)),
    cq_exists=st.booleans(),
    queue_name=st.sampled_from(["lq", "", "other"]),
    pod_group=st.sampled_from([None, "pg", "missing"]),
    active=st.booleans(),
)
def test_enqueue_queues_where_cq_for_and_unqueued_reason_say(lq_exists, stop, cq_exists, queue_name, pod_group,  # type: ignore[no-untyped-def]
                                                              active) -> None:
    c = Cache()
    c.set_cluster_queue(cluster_queue("cq", _cpu()))
    if lq_exists:
        c.set_local_queue(replace(local_queue("lq", "cq" if cq_exists else "gone"), stop_policy=stop))
        c.set_local_queue(replace(local_queue("", "cq" if cq_exists else "gone"), stop_policy=stop))
    c.pod_groups[("default", "pg")] = PodGroup("default", "pg", queue="lq")
    w = workload("w", queue=queue_name)
    if pod_group is not None:
        w = replace(w, annotations={GROUP_NAME_ANNOTATIONS[0]: pod_group})
    if not active:
        w = replace(w, active=False)
    queueing = Queueing(c, Deadlines(), clock=lambda: 0.0)
    before = queueing.cq_for(w)
    reason = unqueued_reason(c, w)
    queueing.enqueue(w)
    want = None if not w.active or before is None or reason is not None else before
    assert c.queues.cluster_queue_of(w.key) == want


def _cpu():  # type: ignore[no-untyped-def]
    return group(flavor("default", cpu="10"))
