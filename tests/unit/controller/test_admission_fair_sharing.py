"""Admission Fair Sharing in the controller: ordering, entry penalties, sampling and durable usage.

The ordering table follows Kueue's pkg/scheduler/scheduler_afs_test.go (TestScheduleForAFS: half-life 10s,
sampling 1s, one ClusterQueue of 8 cpu with admissionMode UsageBasedAdmissionFairSharing); the sampling and
restart cases follow pkg/controller/core/localqueue_controller.go (reconcileConsumedUsage,
initializeAfsIfNeeded) and pkg/cache/queue/afs/usage_ledger_test.go.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import pytest

from sluicegate.controller.errors import InvalidArgument
from sluicegate.controller.manager import Manager, workload_state
from sluicegate.controller.store.memory import MemoryStore
from sluicegate.controller.store.sqlite import SqliteStore
from sluicegate.controller.timers import AFS_KEY, AFS_SAMPLE
from sluicegate.manifest.loader import RawDocument, parse_text
from sluicegate.model.config import AdmissionFairSharingConfig, ControllerConfig
from sluicegate.model.queues import AdmissionFairSharingStatus
from tests.builders import container_doc, workload_doc

CONFIG = ControllerConfig(admission_fair_sharing=AdmissionFairSharingConfig(
    usage_half_life_seconds=10.0, usage_sampling_interval_seconds=1.0))

QUEUES = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq1}
spec:
  namespaceSelector: {}
  %(scope)s
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: "8"}
"""
LOCAL_QUEUE = """
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: %(name)s, namespace: default}
spec: {clusterQueue: cq1, fairSharing: {weight: "%(weight)s"}}
"""
USAGE_BASED = "admissionScope: {admissionMode: UsageBasedAdmissionFairSharing}"


class Clock:
    def __init__(self) -> None:
        self.t = 1_000.0

    def __call__(self) -> float:
        return self.t


def queues(weights: dict[str, str], scope: str = USAGE_BASED) -> list[RawDocument]:
    text = QUEUES % {"scope": scope} + "".join(LOCAL_QUEUE % {"name": n, "weight": w} for n, w in weights.items())
    return parse_text(text, "queues.yaml")


def workload(name: str, queue: str, cpu: str = "8") -> RawDocument:
    body = workload_doc(name, container_doc(name="c", requests={"cpu": cpu}), queue=queue)
    return parse_text(json.dumps(body), name, fmt="json")[0]


def manager(weights: dict[str, str], *, scope: str = USAGE_BASED, store: MemoryStore | SqliteStore | None = None,
            clock: Clock | None = None, config: ControllerConfig = CONFIG) -> Manager:
    m = Manager(store or MemoryStore(), clock=clock or Clock(), placement=False, config=config)
    m.load()
    m.apply(queues(weights, scope))
    return m


def settle(m: Manager, bound: int = 50) -> None:
    for _ in range(bound):
        if not m.schedule_once().made_progress:
            return
    raise AssertionError("scheduler did not settle")


def states(m: Manager, names: Iterable[str]) -> dict[str, str]:
    return {n: workload_state(m.get_workload("default", n)) for n in names}


def seed(m: Manager, usage: dict[str, float]) -> None:
    for lq, cpu in usage.items():
        m.cache.afs[("default", lq)] = AdmissionFairSharingStatus({"cpu": cpu}, m.clock())


@pytest.mark.parametrize(("scope", "weights", "usage", "submitted", "admitted"), [
    pytest.param(USAGE_BASED, {"lq-a": "1", "lq-b": "1"}, {"lq-a": 8000, "lq-b": 2000},
                 [("wl-a1", "lq-a"), ("wl-b1", "lq-b")], {"wl-b1"},
                 id="admits workload from less active localqueue"),
    pytest.param(USAGE_BASED, {"lq-a": "1", "lq-zero": "0"}, {"lq-a": 0, "lq-zero": 0},
                 [("wl-z1", "lq-zero"), ("wl-a1", "lq-a")], {"wl-a1"},
                 id="does not prioritize a zero-weight localqueue"),
    pytest.param("", {"lq-a": "1", "lq-b": "1"}, {"lq-a": 8000, "lq-b": 2000},
                 [("wl-a1", "lq-a"), ("wl-b1", "lq-b")], {"wl-a1"},
                 id="without AFS: classic admission decision ignores queue usage"),
    pytest.param(USAGE_BASED, {"lq-a": "1", "lq-b": "1"}, {"lq-a": 4000, "lq-b": 4000},
                 [("wl-a1", "lq-a"), ("wl-a2", "lq-a"), ("wl-b1", "lq-b"), ("wl-b2", "lq-b")], {"wl-a1", "wl-b1"},
                 id="admits one workload from each localqueue when quota is limited (entry penalty)"),
    pytest.param(USAGE_BASED, {"lq-a": "1", "lq-b": "1"}, {},
                 [("wl-a1", "lq-a"), ("wl-b1", "lq-b")], {"wl-a1"},
                 id="schedules normally when queues have equal usage"),
    pytest.param(USAGE_BASED, {"lq-a": "4", "lq-b": "1"}, {"lq-a": 8000, "lq-b": 3000},
                 [("wl-b1", "lq-b"), ("wl-a1", "lq-a")], {"wl-a1"},
                 id="usage is divided by the LocalQueue weight (8/4 < 3/1)"),
])
def test_scheduling_order(scope: str, weights: dict[str, str], usage: dict[str, float],
                          submitted: list[tuple[str, str]], admitted: set[str]) -> None:
    m = manager(weights, scope=scope)
    seed(m, usage)
    for name, lq in submitted:
        m.create_workload(workload(name, lq, cpu="8" if len(submitted) == 2 else "4"))
        m.clock.t += 1  # type: ignore[attr-defined]
    settle(m)
    got = states(m, [n for n, _ in submitted])
    assert {n for n, s in got.items() if s == "Admitted"} == admitted, got


def test_ties_fall_back_to_priority_then_fifo_within_and_across_local_queues() -> None:
    """Equal usage: the usual order decides (Kueue's baseCmp after cmp.Compare of the usages)."""
    m = manager({"lq-a": "1", "lq-b": "1"}, config=ControllerConfig(
        admission_fair_sharing=AdmissionFairSharingConfig(usage_half_life_seconds=0.0)))
    for i, lq in enumerate(["lq-a", "lq-b", "lq-a", "lq-b"]):
        m.create_workload(workload(f"w{i}", lq, cpu="2"))
        m.clock.t += 1  # type: ignore[attr-defined]
    positions = [m.cache.queues.position(m.get_workload("default", f"w{i}").key) for i in range(4)]
    assert [p.in_cluster_queue for p in positions if p is not None] == [0, 1, 2, 3]


def test_the_pending_listing_follows_the_fair_order() -> None:
    m = manager({"lq-a": "1", "lq-b": "1"})
    seed(m, {"lq-a": 5000, "lq-b": 1000})
    m.create_workload(workload("a", "lq-a"))
    m.clock.t += 1
    m.create_workload(workload("b", "lq-b"))
    page = m.cache.queues.pending_page(m.cache.local_queues[("default", "lq-a")].cluster_queue, offset=0, limit=10)
    assert [p.workload.name for p in page] == ["b", "a"]


def test_entry_penalty_and_sampling_follow_kueue() -> None:
    """Admission charges alpha(sampling) * requests after decaying to now; a sample decays towards what is admitted."""
    clock = Clock()
    m = manager({"lq-a": "1"}, clock=clock)
    m.create_workload(workload("a", "lq-a", cpu="2"))
    settle(m)
    alpha = 1 - 0.5 ** (1 / 10)
    assert m.cache.afs[("default", "lq-a")].consumed_resources["cpu"] == pytest.approx(2000 * alpha)
    charged = 2000 * alpha
    clock.t += 10  # one half-life later; the timer is due
    m.tick()
    status = m.cache.afs[("default", "lq-a")]
    assert status.consumed_resources["cpu"] == pytest.approx(charged * 0.5 + 2000 * 0.5)
    assert status.last_update == clock.t
    assert m.deadlines.armed(AFS_SAMPLE, AFS_KEY) == clock.t + 1.0
    # The sample is stored in the LocalQueue's status, where describe (and a restart) reads it.
    doc = json.loads(m.encoded(m.cache.local_queues[("default", "lq-a")]).body)
    assert doc["status"]["fairSharing"]["admissionFairSharingStatus"]["consumedResources"]["cpu"] == \
        f"{round(status.consumed_resources['cpu'])}m"


def test_half_life_zero_orders_by_nothing_but_the_usual_order() -> None:
    """Kueue: "If set to 0, usage will be reset to 0 immediately": no penalty, samples reset, plain FIFO."""
    clock = Clock()
    m = manager({"lq-a": "1", "lq-b": "1"}, clock=clock, config=ControllerConfig(
        admission_fair_sharing=AdmissionFairSharingConfig(usage_half_life_seconds=0.0)))
    seed(m, {"lq-a": 9000})
    clock.t += 300
    m.tick()
    assert m.cache.afs[("default", "lq-a")].consumed_resources == {}


def test_applying_a_local_queue_keeps_its_usage_and_refuses_a_status() -> None:
    m = manager({"lq-a": "1"})
    seed(m, {"lq-a": 4000})
    m.apply(parse_text(LOCAL_QUEUE % {"name": "lq-a", "weight": "2"}, "lq.yaml"))
    lq = m.cache.local_queues[("default", "lq-a")]
    assert lq.fair_sharing_weight == 2 and m.cache.afs_usage(("default", "lq-a")) == 2000
    stored = json.loads(m.encoded(lq).body)
    assert stored["status"]["fairSharing"]["admissionFairSharingStatus"]["consumedResources"] == {"cpu": "4"}
    bad = (LOCAL_QUEUE % {"name": "lq-a", "weight": "1"}) + \
        "status: {fairSharing: {admissionFairSharingStatus: {consumedResources: {}, lastUpdate: '2025-06-03T14:25:15Z'}}}"
    with pytest.raises(InvalidArgument, match="status is computed by the controller"):
        m.apply(parse_text(bad, "lq.yaml"))


def test_usage_survives_a_restart_with_the_real_sqlite_store(tmp_path: Path) -> None:
    """What the last sample stored seeds the next controller (Kueue seeds its ledger from LocalQueue status,
    with lastUpdate = now, so decay continues from the restart)."""
    path = tmp_path / "state.db"
    clock = Clock()
    m = manager({"lq-a": "1", "lq-b": "1"}, store=SqliteStore(str(path)), clock=clock)
    m.create_workload(workload("a", "lq-a", cpu="8"))
    settle(m)
    clock.t += 1
    m.tick()  # the sample stores the usage
    before = dict(m.cache.afs[("default", "lq-a")].consumed_resources)
    assert before["cpu"] > 0
    m.stop()
    m.store.close()

    clock.t += 3600  # down for an hour: Kueue does not decay over the gap
    again = Manager(SqliteStore(str(path)), clock=clock, placement=False, config=CONFIG)
    again.load()
    status = again.cache.afs[("default", "lq-a")]
    assert status.consumed_resources["cpu"] == pytest.approx(before["cpu"], abs=1.0)
    assert status.last_update == clock.t
    assert again.cache.afs_usage(("default", "lq-a")) > again.cache.afs_usage(("default", "lq-b"))
    assert again.deadlines.armed(AFS_SAMPLE, AFS_KEY) == clock.t + 1.0


def test_a_vanishing_half_life_orders_by_current_usage_as_kube_batch_drf_does() -> None:
    """Half-life -> 0 from above: alpha is 1, a sample sets usage to what each LocalQueue holds now, so the order
    is by current (weighted) usage -- with one resource, kube-batch's drf order by current dominant share
    (pkg/scheduler/plugins/drf: share = allocated / total, lowest first)."""
    clock = Clock()
    m = manager({"lq-a": "1", "lq-b": "1"}, clock=clock, config=ControllerConfig(
        admission_fair_sharing=AdmissionFairSharingConfig(usage_half_life_seconds=0.001,
                                                          usage_sampling_interval_seconds=1.0)))
    m.create_workload(workload("a-running", "lq-a", cpu="3"))
    settle(m)
    m.create_workload(workload("b-running", "lq-b", cpu="1"))
    settle(m)
    clock.t += 1
    m.tick()
    assert {lq: s.consumed_resources for (_, lq), s in m.cache.afs.items()} == {
        "lq-a": {"cpu": pytest.approx(3000)}, "lq-b": {"cpu": pytest.approx(1000)}}
    m.create_workload(workload("a-next", "lq-a", cpu="4"))
    clock.t += 0.5
    m.create_workload(workload("b-next", "lq-b", cpu="4"))
    settle(m)
    assert states(m, ["a-next", "b-next"]) == {"a-next": "Pending", "b-next": "Admitted"}


def test_the_usage_metric_and_the_described_status() -> None:
    """kueue_local_queue_admission_fair_sharing_usage (Kueue's pkg/metrics) and status.fairSharing in describe."""
    from sluicegate.controller.metrics import ControllerMetrics
    from sluicegate.controller.status import local_queue_status
    from tests.unit.metrics.exposition import Scrape

    metrics, clock = ControllerMetrics(), Clock()
    m = Manager(MemoryStore(), clock=clock, placement=False, observer=metrics, config=CONFIG)
    metrics.attach(m)
    m.apply(queues({"lq-a": "2", "lq-b": "1"}))
    seed(m, {"lq-a": 6000, "lq-b": 1000})
    s = Scrape.of(metrics.registry)
    labels = {"namespace": "default", "cluster_queue": "cq1", "replica_role": "standalone"}
    assert s.value("kueue_local_queue_admission_fair_sharing_usage", name="lq-a", **labels) == 3000
    assert s.value("kueue_local_queue_admission_fair_sharing_usage", name="lq-b", **labels) == 1000
    status = local_queue_status(m.cache, m.cache.local_queues[("default", "lq-a")])
    assert status["fairSharing"]["admissionFairSharingStatus"] == {
        "consumedResources": {"cpu": "6"}, "lastUpdate": "1970-01-01T00:16:40Z"}


def test_freed_quota_is_offered_to_parked_workloads_in_fair_order() -> None:
    """Workloads parked for want of quota come back, when quota is released, lowest-usage LocalQueue first
    (the release budget must not fall back to plain FIFO, or the fair order is lost under contention)."""
    clock = Clock()
    m = manager({"lq-a": "1", "lq-b": "1"}, clock=clock)
    m.create_workload(workload("running", "lq-b", cpu="8"))
    settle(m)
    m.create_workload(workload("a-old", "lq-a", cpu="8"))
    clock.t += 1
    m.create_workload(workload("b-new", "lq-b", cpu="8"))
    settle(m)  # both parked: no quota left
    assert states(m, ["a-old", "b-new"]) == {"a-old": "Pending", "b-new": "Pending"}
    seed(m, {"lq-a": 5000, "lq-b": 1000})
    m.delete_workload("default", "running")
    settle(m)
    assert states(m, ["a-old", "b-new"]) == {"a-old": "Pending", "b-new": "Admitted"}


def test_turning_the_admission_scope_on_and_off_reorders_what_waits() -> None:
    """Re-applying the ClusterQueue with or without admissionScope rebuilds its heaps (pending and parked alike)."""
    clock = Clock()
    m = manager({"lq-a": "1", "lq-b": "1"}, scope="", clock=clock)
    seed(m, {"lq-a": 5000, "lq-b": 1000})
    m.create_workload(workload("running", "lq-b", cpu="8"))
    settle(m)
    for name, lq in (("a1", "lq-a"), ("b1", "lq-b"), ("a2", "lq-a")):
        m.create_workload(workload(name, lq, cpu="8"))
        clock.t += 1
    cq = m.cache.local_queues[("default", "lq-a")].cluster_queue

    def order() -> list[str]:
        return [p.workload.name for p in m.cache.queues.pending_page(cq, offset=0, limit=10)]

    assert order() == ["a1", "b1", "a2"]
    m.apply(queues({"lq-a": "1", "lq-b": "1"}))
    assert order() == ["b1", "a1", "a2"]
    settle(m)  # all parked for want of quota, now by LocalQueue
    m.delete_workload("default", "running")
    settle(m)
    assert states(m, ["a1", "b1", "a2"]) == {"a1": "Pending", "b1": "Admitted", "a2": "Pending"}
    m.apply(queues({"lq-a": "1", "lq-b": "1"}, scope=""))
    assert order() == ["a1", "a2"]
