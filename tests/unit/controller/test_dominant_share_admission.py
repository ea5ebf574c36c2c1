"""The DominantResourceShare admission mode (a sluicegate extension): kube-batch's DRF order of LocalQueues.

kube-batch's drf plugin (pkg/scheduler/plugins/drf/drf.go) keeps, per job, the share
``max over resources of allocated / total`` and orders the lower share first, from what
is allocated now (no history).  Here the same share is kept per LocalQueue over what
its ClusterQueue could hold, divided by the LocalQueue's fairSharing.weight.
"""

from __future__ import annotations

import json
import math

import pytest

from sluicegate.controller.manager import Manager, workload_state
from sluicegate.controller.scheduling.afs import dominant_share
from sluicegate.controller.status import local_queue_status
from sluicegate.controller.store.memory import MemoryStore
from sluicegate.manifest import decode
from sluicegate.manifest.encode import encode
from sluicegate.manifest.loader import RawDocument, parse_text
from sluicegate.model import ClusterQueueSpec
from tests.builders import container_doc, workload_doc
from tests.unit.manifest import samples
from tests.unit.manifest.samples import KUEUE, OWN, errors_of, mutate

QUEUES = """
apiVersion: sluicegate.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: sluicegate.io/v1beta2
kind: ClusterQueue
metadata: {name: cq1}
spec:
  namespaceSelector: {}
  admissionScope: {admissionMode: DominantResourceShare}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: "10"}
      - {name: memory, nominalQuota: "10Gi"}
---
apiVersion: sluicegate.io/v1beta2
kind: LocalQueue
metadata: {name: lq-a, namespace: default}
spec: {clusterQueue: cq1, fairSharing: {weight: "%(wa)s"}}
---
apiVersion: sluicegate.io/v1beta2
kind: LocalQueue
metadata: {name: lq-b, namespace: default}
spec: {clusterQueue: cq1}
"""


@pytest.mark.parametrize(("admitted", "capacity", "weight", "want"), [
    ({}, {"cpu": 10.0}, 1, 0.0),
    ({"cpu": 2.0, "memory": 6.0}, {"cpu": 10.0, "memory": 10.0}, 1, 0.6),  # memory dominates
    ({"cpu": 2.0, "memory": 6.0}, {"cpu": 10.0, "memory": 10.0}, 2, 0.3),
    ({"cpu": 5.0}, {"cpu": 10.0}, 0, math.inf),  # weight 0 goes last
    ({"gpu": 1.0}, {"cpu": 10.0}, 1, math.inf),  # holds what the queue cannot: last
    ({"cpu": 0.0}, {}, 1, 0.0),
])
def test_dominant_share(admitted: dict[str, float], capacity: dict[str, float], weight: int, want: float) -> None:
    assert dominant_share(admitted, capacity, weight) == pytest.approx(want)


def workload(name: str, queue: str, cpu: str, memory: str) -> RawDocument:
    body = workload_doc(name, container_doc(name="c", requests={"cpu": cpu, "memory": memory}), queue=queue)
    return parse_text(json.dumps(body), name, fmt="json")[0]


def manager(weight_a: str = "1") -> Manager:
    m = Manager(MemoryStore(), clock=lambda: 1_000.0, placement=False)
    m.load()
    m.apply(parse_text(QUEUES % {"wa": weight_a}, "queues.yaml"))
    return m


def settle(m: Manager) -> None:
    for _ in range(50):
        if not m.schedule_once().made_progress:
            return
    raise AssertionError("scheduler did not settle")


def test_the_local_queue_with_the_lower_dominant_share_goes_first_whatever_the_fifo_order() -> None:
    m = manager()
    # lq-a holds 2 cpu and 6Gi (dominant: memory 0.6); lq-b holds 4 cpu and 1Gi (dominant: cpu 0.4).
    m.create_workload(workload("a-run", "lq-a", "2", "6Gi"))
    m.create_workload(workload("b-run", "lq-b", "4", "1Gi"))
    settle(m)
    # Older a-next would go first in FIFO order; lq-b's lower share wins the 4 cpu left.
    m.create_workload(workload("a-next", "lq-a", "4", "1Gi"))
    m.create_workload(workload("b-next", "lq-b", "4", "1Gi"))
    settle(m)
    got = {n: workload_state(m.get_workload("default", n)) for n in ("a-next", "b-next")}
    assert got == {"a-next": "Pending", "b-next": "Admitted"}
    status = local_queue_status(m.cache, m.cache.local_queues[("default", "lq-a")])
    assert status["fairSharing"] == {"weightedShare": pytest.approx(0.6)}


def test_the_weight_divides_the_share() -> None:
    m = manager(weight_a="2")  # lq-a: 0.6 / 2 = 0.3 < lq-b's 0.4
    m.create_workload(workload("a-run", "lq-a", "2", "6Gi"))
    m.create_workload(workload("b-run", "lq-b", "4", "1Gi"))
    settle(m)
    m.create_workload(workload("b-next", "lq-b", "4", "1Gi"))
    m.create_workload(workload("a-next", "lq-a", "4", "1Gi"))
    settle(m)
    got = {n: workload_state(m.get_workload("default", n)) for n in ("a-next", "b-next")}
    assert got == {"a-next": "Admitted", "b-next": "Pending"}


@pytest.mark.parametrize("api", [KUEUE, OWN])
def test_the_mode_is_read_only_with_our_own_api_version(api: str) -> None:
    doc = mutate(mutate(samples.cluster_queue(), "apiVersion", api),
                 "spec.admissionScope", {"admissionMode": "DominantResourceShare"})
    if api == OWN:
        spec = decode(doc, source="test.yaml#1")
        assert isinstance(spec, ClusterQueueSpec) and spec.dominant_share_admission
        assert decode(encode(spec), source="again.yaml#1") == spec
        return
    (err,) = errors_of(doc)
    assert err.path == "spec.admissionScope.admissionMode"
    assert "DominantResourceShare is a sluicegate extension" in err.message
