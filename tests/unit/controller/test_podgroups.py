"""kube-batch PodGroups on a controller in quota-only mode: a Job joins its group, waits for it, is gang-admitted.

Semantics from kube-batch (kubernetes-sigs/kube-batch): the gang of
``minMember`` (pkg/scheduler/plugins/gang/gang.go), the PodGroup's queue and
priorityClassName (pkg/apis/scheduling/v1alpha1/types.go), and Volcano's
``minResources`` (volcano-sh/apis pkg/apis/scheduling/v1beta1/types.go).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from sluicegate.controller.errors import FailedPrecondition, InvalidArgument
from sluicegate.controller.manager import Manager
from sluicegate.controller.queueing import INADMISSIBLE
from sluicegate.controller.service.codec import document_of
from sluicegate.controller.simulate import simulate
from sluicegate.controller.store.memory import MemoryStore
from sluicegate.manifest.loader import parse_text
from sluicegate.model.config import ControllerConfig, FairSharingConfig
from sluicegate.model.names import workload_key

from .test_manager import Clock, settle

QUEUES = """
apiVersion: sluicegate.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: sluicegate.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: "%(cpu)s"}
---
apiVersion: sluicegate.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: default}
spec: {clusterQueue: cq}
"""


def pod_group(name: str = "g", *, min_member: int = 4, api: str = "scheduling.incubator.k8s.io/v1alpha1",
              **spec: Any) -> str:
    return json.dumps({"apiVersion": api, "kind": "PodGroup", "metadata": {"name": name, "namespace": "default"},
                       "spec": {"minMember": min_member, "queue": "lq", **spec}})


def job(name: str = "j", *, group: str = "g", pods: int = 6, cpu: str = "1") -> str:
    return json.dumps({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "default", "annotations": {"scheduling.k8s.io/group-name": group}},
        "spec": {"parallelism": pods, "completions": pods, "template": {"spec": {"containers": [
            {"name": "c", "command": ["true"], "resources": {"requests": {"cpu": cpu}}}]}}},
    })


def manager(cpu: str = "6", config: ControllerConfig | None = None) -> Manager:
    m = Manager(MemoryStore(), clock=Clock(), placement=False, config=config)
    m.apply(parse_text(QUEUES % {"cpu": cpu}, "queues.yaml"))
    return m


def apply(m: Manager, text: str) -> None:
    m.apply(parse_text(text, "doc.json", fmt="json" if text.startswith("{") else "yaml"))


def admitted_count(m: Manager, name: str = "j") -> int:
    adm = m.get_workload("default", name).status.admission
    return 0 if adm is None else adm.pod_set_assignments[0].count


def test_job_joins_its_pod_group_as_a_gang() -> None:
    m = manager()
    apply(m, pod_group())
    apply(m, job())
    wl = m.get_workload("default", "j")
    assert (wl.queue_name, wl.pod_sets[0].count, wl.pod_sets[0].min_count) == ("lq", 6, 4)


@pytest.mark.parametrize(
    ("free_cpu", "admitted"),
    [(3, 0), (4, 4), (5, 5), (6, 6)],
    ids=["3 free: fewer than minMember, nothing", "4 free: the gang", "5 free: gang and one more", "6 free: all"],
)
def test_gang_admitted_only_when_min_member_fits(free_cpu: int, admitted: int) -> None:
    m = manager()
    blocker = 6 - free_cpu
    if blocker:
        m.create_workload(parse_text(json.dumps({
            "apiVersion": "sluicegate.io/v1beta2", "kind": "Workload", "metadata": {"name": "blocker"},
            "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                "containers": [{"name": "c", "command": ["true"],
                                "resources": {"requests": {"cpu": str(blocker)}}}]}}}]}}), "b", fmt="json")[0])
        settle(m)
    apply(m, pod_group())
    apply(m, job())
    settle(m)
    assert admitted_count(m) == admitted


def test_job_waits_for_its_pod_group_then_runs_when_it_is_applied() -> None:
    m = manager()
    apply(m, job())
    settle(m)
    cond = m.get_workload("default", "j").status.condition("QuotaReserved")
    assert cond is not None
    assert (cond.status, cond.reason, cond.message) == ("False", INADMISSIBLE, "PodGroup default/g doesn't exist")
    assert workload_key("default", "j") not in {wl.key for wl in m.cache.queues.queues["cq"].pending_workloads()}
    apply(m, pod_group(min_member=5))
    settle(m)
    wl = m.get_workload("default", "j")
    assert (wl.queue_name, wl.pod_sets[0].min_count) == ("lq", 5)
    assert admitted_count(m) == 6


def test_min_resources_raises_the_gang() -> None:
    """Volcano's minResources: the gang starts only once that much fits (here 5 pods of 1 cpu)."""
    m = manager(cpu="4")
    apply(m, pod_group(min_member=2, api="scheduling.volcano.sh/v1beta1", minResources={"cpu": "4500m"}))
    apply(m, job())
    settle(m)
    wl = m.get_workload("default", "j")
    assert wl.pod_sets[0].min_count == 5
    assert admitted_count(m) == 0


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"minMember": 7}, "PodGroup default/g needs 7 pods to start together (spec.minMember 7), but the Job has 6"),
        ({"minMember": 1, "minResources": {"memory": "1Gi"}},
         "PodGroup default/g spec.minResources asks for memory, which the Job's pods do not request"),
    ],
    ids=["minMember above the Job's pods", "minResources of a resource the pods do not request"],
)
def test_a_gang_larger_than_the_job_waits_with_the_reason(spec: dict[str, Any], message: str) -> None:
    m = manager()
    apply(m, json.dumps({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                         "metadata": {"name": "g"}, "spec": {"queue": "lq", **spec}}))
    apply(m, job())
    settle(m)
    cond = m.get_workload("default", "j").status.condition("QuotaReserved")
    assert cond is not None and (cond.reason, cond.message) == (INADMISSIBLE, message)


def test_priority_class_name_gives_the_priority() -> None:
    m = manager()
    apply(m, "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: high}\nvalue: 1000\n")
    apply(m, pod_group(priorityClassName="high"))
    apply(m, job())
    wl = m.get_workload("default", "j")
    assert (wl.priority, wl.priority_class) == (1000, ("PriorityClass", "high"))


def test_bad_input_names_the_field_and_changes_nothing() -> None:
    m = manager()
    with pytest.raises(InvalidArgument, match=r"spec.priorityClassName: PriorityClass 'nope' not found"):
        apply(m, pod_group(priorityClassName="nope"))
    assert m.cache.pod_groups == {}
    apply(m, pod_group())
    apply(m, job())
    with pytest.raises(InvalidArgument, match=r"already has the Job j; sluicegate runs one Job per PodGroup"):
        apply(m, job("k"))
    assert "k" not in {wl.name for wl in m.cache.workloads.values()}
    with pytest.raises(FailedPrecondition, match="used by the unfinished Job"):
        m.delete("PodGroup", "default", "g")
    assert ("default", "g") in m.cache.pod_groups


@pytest.mark.parametrize(
    ("api", "free_cpu", "phase"),
    [
        ("scheduling.incubator.k8s.io/v1alpha1", 3, "Pending"),
        ("scheduling.incubator.k8s.io/v1alpha1", 6, "Pending"),
        ("scheduling.volcano.sh/v1beta1", 3, "Pending"),
        ("scheduling.volcano.sh/v1beta1", 6, "Inqueue"),
    ],
    ids=["kube-batch, waiting", "kube-batch, admitted but no pods placed",
         "volcano, waiting", "volcano, admitted: Inqueue"],
)
def test_phase_without_placement(api: str, free_cpu: int, phase: str) -> None:
    m = manager(cpu=str(free_cpu))
    apply(m, pod_group(api=api))
    apply(m, job())
    settle(m)
    status = document_of(m, m.get("PodGroup", "default", "g"))["status"]
    assert (status["phase"], status["running"], status["succeeded"], status["failed"]) == (phase, 0, 0, 0)
    assert status["workload"] == "j"


QUEUE_PAIR = """
apiVersion: sluicegate.io/v1beta2
kind: Cohort
metadata: {name: kube-batch}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: "6"}
---
apiVersion: scheduling.incubator.k8s.io/v1alpha1
kind: Queue
metadata: {name: two}
spec: {weight: 2}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: one}
spec: {weight: 1}
---
apiVersion: sluicegate.io/v1beta2
kind: LocalQueue
metadata: {name: two, namespace: default}
spec: {clusterQueue: two}
---
apiVersion: sluicegate.io/v1beta2
kind: LocalQueue
metadata: {name: one, namespace: default}
spec: {clusterQueue: one}
"""


def test_queue_pair_with_weights_two_to_one_gets_shares_two_to_one() -> None:
    """kube-batch's proportion gives queues of weight 2 and 1 over 6 cpus deserved 4 and 2 when both want
    everything; as ClusterQueues borrowing from the cohort kube-batch with those fair-sharing weights, the
    admissions converge there (the queue over its share is reclaimed down to it, never below)."""
    m = manager(config=ControllerConfig(fair_sharing=FairSharingConfig(enabled=True)))
    apply(m, QUEUE_PAIR)
    two = m.get("ClusterQueue", "", "two")
    assert (two.cohort, two.fair_sharing_weight, two.quotas()[next(iter(two.quotas()))].nominal) == ("kube-batch", 2, 0)
    for i in range(6):
        for q in ("one", "two"):
            m.create_workload(parse_text(json.dumps({
                "apiVersion": "sluicegate.io/v1beta2", "kind": "Workload", "metadata": {"name": f"{q}-{i}"},
                "spec": {"queueName": q, "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                    "containers": [{"name": "c", "command": ["true"],
                                    "resources": {"requests": {"cpu": "1"}}}]}}}]}}), q, fmt="json")[0])
    settle(m)
    assert held(m) == {"two": 4, "one": 2}
    # A cpu frees in "two": "one" is at its deserved share, so it gets nothing new while "two" waits.
    (done,) = [wl for wl in m.cache.workloads.values() if wl.queue_name == "two" and wl.has_quota_reservation][:1]
    m.delete_workload("default", done.name)
    settle(m)
    assert held(m) == {"two": 4, "one": 2}


def held(m: Manager) -> dict[str, int]:
    return {q: sum(1 for wl in m.cache.workloads.values()
                   if wl.queue_name == q and wl.has_quota_reservation and not wl.status.is_true("Evicted"))
            for q in ("one", "two")}


def test_queue_needs_fair_sharing_and_the_cohort() -> None:
    m = manager()
    queue = '{"apiVersion": "scheduling.incubator.k8s.io/v1alpha1", "kind": "Queue", "metadata": {"name": "q"}}'
    with pytest.raises(InvalidArgument, match="add a fairSharing section"):
        apply(m, queue)
    m = manager(config=ControllerConfig(fair_sharing=FairSharingConfig(enabled=True)))
    with pytest.raises(InvalidArgument, match="Cohort kube-batch"):
        apply(m, queue)
    assert "q" not in m.cache.cluster_queues


def test_simulate_reads_pod_groups_and_queues() -> None:
    """`sluicectl simulate` runs the same mapping: a Queue is a ClusterQueue, a Job joins its PodGroup."""
    config = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nfairSharing: {}\n"
    text = "\n---\n".join([config, QUEUES % {"cpu": "1"}, QUEUE_PAIR, pod_group(min_member=3).replace('"lq"', '"two"'),
                           job(pods=4)])
    out = simulate(parse_text(text, "all.yaml"))
    (decision,) = [d for d in out["decisions"] if d["workload"] == "default/j"]
    assert (decision["clusterQueue"], decision["result"]) == ("two", "Admitted")


def test_changing_the_pod_group_regroups_a_waiting_job_but_not_an_admitted_one() -> None:
    m = manager(cpu="3")
    apply(m, pod_group(min_member=4))
    apply(m, job())
    settle(m)
    assert admitted_count(m) == 0
    apply(m, pod_group(min_member=3))
    settle(m)
    wl = m.get_workload("default", "j")
    assert (wl.pod_sets[0].min_count, admitted_count(m)) == (3, 3)
    apply(m, pod_group(min_member=5))
    assert m.get_workload("default", "j").pod_sets[0].min_count == 3
    m.delete("Workload", "default", "j")
    m.delete("PodGroup", "default", "g")
    assert m.cache.pod_groups == {}
