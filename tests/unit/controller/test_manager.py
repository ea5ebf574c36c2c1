"""The controller's manager: queueing strategies, idempotency, activation, all-or-nothing apply."""

from __future__ import annotations

import json
from collections.abc import Iterable

import pytest

from sluicegate.controller.errors import InvalidArgument
from sluicegate.controller.manager import Manager, workload_state
from sluicegate.controller.store.memory import MemoryStore
from sluicegate.manifest.loader import RawDocument, parse_text
from tests.builders import container_doc, workload_doc

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
  queueingStrategy: %(strategy)s
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: "4"}
---
apiVersion: sluicegate.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: default}
spec: {clusterQueue: cq}
"""


def workload(name: str, cpu: str, *, priority: int | None = None, queue: str = "lq") -> RawDocument:
    body = workload_doc(name, container_doc(name="c", requests={"cpu": cpu}), queue=queue, priority=priority)
    return parse_text(json.dumps(body), name, fmt="json")[0]


class Clock:
    def __init__(self) -> None:
        self.t = 1_000.0

    def __call__(self) -> float:
        self.t += 1.0
        return self.t


def manager(strategy: str = "BestEffortFIFO") -> Manager:
    m = Manager(MemoryStore(), clock=Clock(), placement=False)
    m.apply(parse_text(QUEUES % {"strategy": strategy}, "queues.yaml"))
    return m


def settle(m: Manager, bound: int = 50) -> None:
    for _ in range(bound):
        if not m.schedule_once().made_progress:
            return
    raise AssertionError("scheduler did not settle")


def states(m: Manager, names: Iterable[str]) -> dict[str, str]:
    return {n: workload_state(m.get_workload("default", n)) for n in names}


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        ("BestEffortFIFO", {"big": "Pending", "small": "Admitted"}),
        ("StrictFIFO", {"big": "Pending", "small": "Pending"}),
    ],
    ids=["best-effort lets later workloads past an inadmissible head", "strict FIFO blocks behind the head"],
)
def test_queueing_strategy(strategy: str, expected: dict[str, str]) -> None:
    m = manager(strategy)
    m.create_workload(workload("filler", "3"))
    settle(m)
    m.create_workload(workload("big", "2"))
    m.create_workload(workload("small", "1"))
    settle(m)
    assert states(m, ["big", "small"]) == expected


def test_quota_release_wakes_parked_workloads() -> None:
    m = manager()
    m.create_workload(workload("filler", "4"))
    m.create_workload(workload("next", "2"))
    settle(m)
    assert states(m, ["filler", "next"]) == {"filler": "Admitted", "next": "Pending"}
    m.delete_workload("default", "filler")
    settle(m)
    assert states(m, ["next"]) == {"next": "Admitted"}


def test_higher_priority_is_admitted_first_within_a_queue() -> None:
    m = manager()
    m.create_workload(workload("filler", "4"))
    settle(m)
    m.create_workload(workload("low", "3", priority=1))
    m.create_workload(workload("high", "3", priority=100))
    settle(m)
    m.delete_workload("default", "filler")
    settle(m)
    assert states(m, ["low", "high"]) == {"low": "Pending", "high": "Admitted"}


def test_create_is_idempotent_by_name() -> None:
    m = manager()
    first, created1 = m.create_workload(workload("w", "1"))
    again, created2 = m.create_workload(workload("w", "1"))
    assert (created1, created2, again.uid) == (True, False, first.uid)
    assert len(m.list_workloads()) == 1


def test_deactivating_an_admitted_workload_evicts_without_requeue() -> None:
    m = manager()
    m.create_workload(workload("w", "4"))
    m.create_workload(workload("waiting", "4"))
    settle(m)
    m.set_active("default", "w", False)
    settle(m)
    w = m.get_workload("default", "w")
    assert (workload_state(w), w.status.condition("Evicted").reason, w.status.admission) == ("Inactive", "InactiveWorkload", None)
    assert states(m, ["waiting"]) == {"waiting": "Admitted"}
    m.set_active("default", "w", True)
    settle(m)
    assert states(m, ["w"]) == {"w": "Pending"}


def test_inactive_workload_is_never_admitted() -> None:
    m = manager()
    m.create_workload(workload("w", "1"))
    m.set_active("default", "w", False)
    settle(m)
    assert states(m, ["w"]) == {"w": "Inactive"}


def test_workload_waits_for_its_local_queue() -> None:
    m = manager()
    m.create_workload(workload("w", "1", queue="later"))
    settle(m)
    assert states(m, ["w"]) == {"w": "Pending"}
    m.apply(parse_text("apiVersion: sluicegate.io/v1beta2\nkind: LocalQueue\nmetadata: {name: later, namespace: default}\n"
                       "spec: {clusterQueue: cq}\n", "lq.yaml"))
    settle(m)
    assert states(m, ["w"]) == {"w": "Admitted"}


def test_apply_is_all_or_nothing() -> None:
    m = manager()
    bad = """
apiVersion: sluicegate.io/v1beta2
kind: ResourceFlavor
metadata: {name: spot}
---
apiVersion: sluicegate.io/v1beta2
kind: ClusterQueue
metadata: {name: broken}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: spot
      resources:
      - {name: cpu, nominalQuota: "-1"}
"""
    with pytest.raises(InvalidArgument) as err:
        m.apply(parse_text(bad, "bad.yaml"))
    assert "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota" in str(err.value)
    assert [f.name for f in m.list("ResourceFlavor")] == ["default"]


def test_cohort_cycle_is_refused() -> None:
    m = manager()
    docs = "\n---\n".join(
        f"apiVersion: sluicegate.io/v1beta2\nkind: Cohort\nmetadata: {{name: {a}}}\nspec: {{parentName: {b}}}"
        for a, b in (("x", "y"), ("y", "z"), ("z", "x"))
    )
    with pytest.raises(InvalidArgument, match="cycle"):
        m.apply(parse_text(docs, "cohorts.yaml"))
    assert m.list("Cohort") == []


def test_state_survives_a_reload_from_the_store() -> None:
    store = MemoryStore()
    m = Manager(store, clock=Clock(), placement=False)
    m.apply(parse_text(QUEUES % {"strategy": "BestEffortFIFO"}, "queues.yaml"))
    m.create_workload(workload("a", "3"))
    m.create_workload(workload("b", "3"))
    settle(m)
    before = {w.key: (w.uid, workload_state(w), w.status.admission) for w in m.list_workloads()}
    again = Manager(store, clock=Clock(), placement=False)
    again.load()
    after = {w.key: (w.uid, workload_state(w), w.status.admission) for w in again.list_workloads()}
    assert after == before
    assert again.cache.tree.cluster_queues["cq"].usage == m.cache.tree.cluster_queues["cq"].usage
    again.delete_workload("default", "a")
    settle(again)
    assert workload_state(again.get_workload("default", "b")) == "Admitted"


def _queue_with_stop(policy: str) -> RawDocument:
    return parse_text(f"""
apiVersion: sluicegate.io/v1beta2
kind: ClusterQueue
metadata: {{name: cq}}
spec:
  namespaceSelector: {{}}
  stopPolicy: {policy}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {{name: cpu, nominalQuota: "4"}}
""", "cq.yaml")[0]


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("Hold", {"running": "Admitted", "waiting": "Pending"}),
        ("HoldAndDrain", {"running": "Pending", "waiting": "Pending"}),
    ],
    ids=["Hold keeps admitted work, admits nothing new", "HoldAndDrain also evicts what is admitted"],
)
def test_cluster_queue_stop_policy(policy: str, expected: dict[str, str]) -> None:
    m = manager()
    m.create_workload(workload("running", "2"))
    settle(m)
    m.apply([_queue_with_stop(policy)])
    m.create_workload(workload("waiting", "1"))
    settle(m)
    assert states(m, ["running", "waiting"]) == expected
    if policy == "HoldAndDrain":
        assert m.get_workload("default", "running").status.condition("Evicted").reason == "ClusterQueueStopped"
    m.apply([_queue_with_stop("None")])
    settle(m)
    assert states(m, ["running", "waiting"]) == {"running": "Admitted", "waiting": "Admitted"}


def test_finished_workloads_are_deleted_after_the_retention() -> None:
    clock = Clock()
    m = Manager(MemoryStore(), clock=clock, placement=False, finished_retention=60)
    m.apply(parse_text(QUEUES % {"strategy": "BestEffortFIFO"}, "queues.yaml"))
    m.create_workload(workload("done", "1"))
    settle(m)
    w = m.get_workload("default", "done")
    from dataclasses import replace as dc_replace

    from sluicegate.model.conditions import set_condition

    finished = dc_replace(w, status=dc_replace(w.status, conditions=set_condition(
        w.status.conditions, type_="Finished", status=True, reason="Succeeded", message="ok", now=clock.t)))
    # Stored as a settlement stores a workload that finished (it arms the retention timer).
    from sluicegate.controller.lifecycle import Settlement

    m.fleet.apply(Settlement(finished))
    m.tick()
    assert [x.name for x in m.list_workloads()] == ["done"]
    clock.t += 61
    m.tick()
    assert m.list_workloads() == []
    assert [o.name for o in m.store.load() if o.kind == "Workload"] == []


def test_a_release_offers_the_freed_quota_in_queue_order_instead_of_retrying_every_parked_workload() -> None:
    m = manager()
    m.create_workload(workload("filler", "4"))
    for i in range(40):
        m.create_workload(workload(f"w{i:02d}", "1"))
    settle(m, bound=200)
    start = m.cycle
    m.delete_workload("default", "filler")
    settle(m, bound=200)
    admitted = sorted(n for n, s in states(m, [f"w{i:02d}" for i in range(40)]).items() if s == "Admitted")
    # FIFO: the four oldest fit the freed 4 cpus; nobody else was tried again.
    assert admitted == ["w00", "w01", "w02", "w03"]
    assert m.cycle - start <= 6


def test_releases_between_two_cycles_do_not_offer_the_same_quota_twice() -> None:
    m = manager()
    for i in range(4):
        m.create_workload(workload(f"f{i}", "1"))
    for i in range(10):
        m.create_workload(workload(f"w{i:02d}", "1"))
    settle(m, bound=100)
    # Two releases before the next cycle: the second offers one more cpu, not two.
    m.delete_workload("default", "f0")
    m.delete_workload("default", "f1")
    start = m.cycle
    settle(m, bound=100)
    names = [f"w{i:02d}" for i in range(10)]
    assert [n for n, s in states(m, names).items() if s == "Admitted"] == ["w00", "w01"]
    assert m.cycle - start <= 3


def test_a_new_workload_that_does_not_fit_leaves_the_deferred_ones_parked() -> None:
    m = manager()
    m.create_workload(workload("filler", "4"))
    for i in range(10):
        m.create_workload(workload(f"w{i:02d}", "1"))
    settle(m, bound=100)
    m.delete_workload("default", "filler")
    # The release offers the freed 4 cpus to w00..w03; w04..w09 stay parked behind them.
    # A newcomer is tried once and does not fit: that says nothing about the offer,
    # so the six deferred workloads are not all tried again.
    m.create_workload(workload("late", "5"))
    start = m.cycle
    settle(m, bound=100)
    names = [f"w{i:02d}" for i in range(10)] + ["late"]
    assert [n for n, s in states(m, names).items() if s == "Admitted"] == ["w00", "w01", "w02", "w03"]
    assert m.cycle - start <= 6
    assert m.cache.queues.queues["cq"].deferred  # type: ignore[index]


COHORT = """
apiVersion: sluicegate.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
""" + "".join(f"""---
apiVersion: sluicegate.io/v1beta2
kind: ClusterQueue
metadata: {{name: {q}}}
spec:
  cohortName: pool
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {{name: cpu, nominalQuota: "2"}}
---
apiVersion: sluicegate.io/v1beta2
kind: LocalQueue
metadata: {{name: {q}, namespace: default}}
spec: {{clusterQueue: {q}}}
""" for q in ("a", "b"))


def test_a_wrong_guess_falls_back_to_retrying_every_parked_workload() -> None:
    m = Manager(MemoryStore(), clock=Clock(), placement=False)
    m.apply(parse_text(COHORT, "cohort.yaml"))
    m.create_workload(workload("filler", "4", queue="a"))
    settle(m)
    for name, cpu, q in (("a1", "2", "a"), ("b1", "2", "b"), ("b2", "1", "b"), ("b3", "3", "b")):
        m.create_workload(workload(name, cpu, queue=q))
    settle(m)
    # Each queue is offered the whole freed pool; b2 was promised quota a1 then takes,
    # so when b2 does not fit, b3 (deferred behind it) is tried the ordinary way.
    m.delete_workload("default", "filler")
    settle(m)
    assert states(m, ["a1", "b1", "b2", "b3"]) == {"a1": "Admitted", "b1": "Admitted", "b2": "Pending", "b3": "Pending"}
    assert not m.cache.queues.queues["b"].deferred


class RecordingSession:
    """The controller's end of an agent stream, recording what would be sent."""

    def __init__(self) -> None:
        self.sent: list[object] = []

    def send(self, command: object) -> None:
        self.sent.append(command)


def test_block_admission_waits_for_every_admitted_workload_to_be_ready() -> None:
    from sluicegate.controller.nodes import ReportedPod
    from sluicegate.model import ControllerConfig, WaitForPodsReadyConfig

    cfg = ControllerConfig(wait_for_pods_ready=WaitForPodsReadyConfig(enabled=True, timeout_seconds=300, block_admission=True))
    m = Manager(MemoryStore(), clock=Clock(), config=cfg)
    m.apply(parse_text(QUEUES % {"strategy": "BestEffortFIFO"}, "queues.yaml"))
    m.fleet.register(name="n1", labels={}, capacity={"cpu": 8000}, allocatable={"cpu": 8000}, boot_id="b",
                     agent_version="t", health_address="", pods=[], session=RecordingSession())
    m.create_workload(workload("first", "1"))
    settle(m)
    m.create_workload(workload("second", "1"))
    settle(m)
    assert states(m, ["first", "second"]) == {"first": "Admitted", "second": "Pending"}
    pod = m.get_workload("default", "first").status.pods[0]
    m.fleet.pod_status("n1", ReportedPod(uid=pod.uid, name=pod.name, namespace="default", workload="first",
                                         phase="Running", ready=True))
    assert m.get_workload("default", "first").status.is_true("PodsReady")
    settle(m)
    assert states(m, ["second"]) == {"second": "Admitted"}
