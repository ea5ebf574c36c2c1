"""decide_cycle's helpers: a workload's new state made without ``dataclasses.replace`` is the same value."""

from __future__ import annotations

from dataclasses import fields, replace

from sluicegate.controller.decide_cycle import status_with, with_status
from sluicegate.controller.manager import Manager
from sluicegate.controller.store.memory import MemoryStore
from sluicegate.manifest.loader import RawDocument, parse_text
from sluicegate.model.conditions import set_condition
from sluicegate.model.names import WorkloadKey
from sluicegate.model.workloads import Condition, Workload, WorkloadStatus
from tests.builders import admission, workload, workload_doc


def test_with_status_is_replace_of_the_status_alone() -> None:
    wl = replace(workload("w", ns="team", priority=3, created=12.5, count=2),
                 priority_class=("WorkloadPriorityClass", "high"), active=False, maximum_execution_time_seconds=60,
                 labels={"a": "b"}, annotations={"c": "d"}, generation=4)
    status = WorkloadStatus(conditions=(Condition("QuotaReserved", "False", "Pending", "waiting", 13.0),))

    got = with_status(wl, status)
    want = replace(wl, status=status)

    assert got == want and got is not wl
    assert got.status is status and wl.status is not status  # the original is untouched
    # Every field the same value, the derived key (compare=False) included.
    assert [getattr(got, f.name) for f in fields(Workload)] == [getattr(want, f.name) for f in fields(Workload)]
    assert got.key == "team/w"


def test_status_with_is_replace_of_conditions_and_admission() -> None:
    status = WorkloadStatus(conditions=(Condition("QuotaReserved", "False", "Pending", "waiting", 13.0),),
                            reclaimable_pods={"main": 1}, accumulated_past_execution_time_seconds=7,
                            deleting=True, extra={"x": 1})
    conds = (Condition("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cq", 14.0),)
    adm = admission("cq")
    got = status_with(status, conds, adm)
    assert got == replace(status, conditions=conds, admission=adm)
    assert status.admission is None and status.conditions[0].status == "False"  # the original is untouched


def _admitted_by_a_cycle(queues: str, names: list[str]) -> dict[str, Workload]:
    m = Manager(MemoryStore(), clock=lambda: 100.0, placement=False)
    m.apply(parse_text(queues, source="q.yaml"))
    m.create_workloads([RawDocument(source="w", body=workload_doc(n, queue=f"lq-{n}")) for n in names])
    m.schedule_once()
    return {n: m.cache.workloads[WorkloadKey(f"default/{n}")] for n in names}


def _queues(names: list[str]) -> str:
    docs = ["apiVersion: sluicegate.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: default}"]
    for n in names:
        docs.append(f"""apiVersion: sluicegate.io/v1beta2
kind: ClusterQueue
metadata: {{name: cq-{n}}}
spec:
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {{name: cpu, nominalQuota: "4"}}""")
        docs.append(f"""apiVersion: sluicegate.io/v1beta2
kind: LocalQueue
metadata: {{name: lq-{n}, namespace: default}}
spec: {{clusterQueue: cq-{n}}}""")
    return "\n---\n".join(docs)


def test_a_fresh_workload_admitted_gets_the_conditions_set_condition_gives() -> None:
    """The admitted conditions of a workload nothing happened to before are made directly; they are the
    values set_condition makes, and the Admitted condition of one cycle is one object for every queue."""
    names = ["a", "b"]
    got = _admitted_by_a_cycle(_queues(names), names)
    for n, wl in got.items():
        want = set_condition((), type_="QuotaReserved", status=True, reason="QuotaReserved",
                             message=f"Quota reserved in ClusterQueue cq-{n}", now=100.0)
        want = set_condition(want, type_="Admitted", status=True, reason="Admitted",
                             message="The workload is admitted", now=100.0)
        assert wl.status.conditions == want
        assert wl.status.admission is not None and wl.status.admission.cluster_queue == f"cq-{n}"
    assert got["a"].status.conditions[1] is got["b"].status.conditions[1]


def test_an_admission_is_found_again_by_its_assignment_and_queue() -> None:
    """A kept assignment's pod sets (one list) give one Admission per queue; another list of the same
    content gives the same one; another queue its own."""
    from sluicegate.controller.scheduling.flavors import FlavorChoice, Mode, PodSetResult
    from sluicegate.model.names import ClusterQueueName, FlavorName

    m = Manager(MemoryStore(), clock=lambda: 100.0, placement=False)
    pod_sets = [PodSetResult("main", 2, {"cpu": 2000}, {"cpu": FlavorChoice(FlavorName("default"), Mode.FIT, 0)})]
    same = [PodSetResult("main", 2, {"cpu": 2000}, {"cpu": FlavorChoice(FlavorName("default"), Mode.FIT, 1)})]
    a, b = ClusterQueueName("a"), ClusterQueueName("b")
    first = m.scheduler._admission(a, pod_sets, {})
    assert m.scheduler._admission(a, pod_sets, {}) is first
    assert m.scheduler._admission(a, same, {}) is first
    other = m.scheduler._admission(b, pod_sets, {})
    assert other.cluster_queue == "b" and first.cluster_queue == "a"
    assert m.scheduler._admission(a, pod_sets, {}) is first
    assert first.pod_set_assignments[0].resource_usage == {"cpu": 2000} and first.pod_set_assignments[0].count == 2
