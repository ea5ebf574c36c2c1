"""A workload whose LocalQueue or ClusterQueue is missing says so (Kueue's Inadmissible), and runs once it exists."""

from __future__ import annotations

import json

from sluicegate.controller.manager import Manager
from sluicegate.controller.store.memory import MemoryStore
from sluicegate.manifest.loader import parse_text
from sluicegate.model.workloads import Workload
from tests.builders import container_doc, workload_doc

from .test_manager import QUEUES, Clock, settle

LQ_TO_NOWHERE = """
apiVersion: sluicegate.io/v1beta2
kind: LocalQueue
metadata: {name: orphan, namespace: default}
spec: {clusterQueue: later}
"""
LATER_CQ = """
apiVersion: sluicegate.io/v1beta2
kind: ClusterQueue
metadata: {name: later}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: %(flavor)s
      resources:
      - {name: cpu, nominalQuota: "4"}
"""
LATE_LQ = """
apiVersion: sluicegate.io/v1beta2
kind: LocalQueue
metadata: {name: late, namespace: default}
spec: {clusterQueue: cq}
"""


def manager() -> Manager:
    m = Manager(MemoryStore(), clock=Clock(), placement=False)
    m.apply(parse_text(QUEUES % {"strategy": "BestEffortFIFO"}, "queues.yaml"))
    return m


def submit(m: Manager, name: str, queue: str) -> Workload:
    body = workload_doc(name, container_doc(name="c", requests={"cpu": "1"}), queue=queue)
    wl, _ = m.create_workload(parse_text(json.dumps(body), name, fmt="json")[0])
    return wl


def quota_reserved(m: Manager, name: str) -> tuple[str, str, str]:
    c = m.get_workload("default", name).status.condition("QuotaReserved")
    assert c is not None
    return c.status, c.reason, c.message


def stored_condition(m: Manager, name: str) -> tuple[str, str, str]:
    (obj,) = [o for o in m.store.load() if (o.kind, o.name) == ("Workload", name)]
    conds = {c["type"]: c for c in json.loads(obj.body)["status"]["conditions"]}
    c = conds["QuotaReserved"]
    return c["status"], c["reason"], c["message"]


def test_missing_local_queue_then_created() -> None:
    m = manager()
    submit(m, "w", "late")
    expected = ("False", "Inadmissible", "LocalQueue default/late doesn't exist")
    assert quota_reserved(m, "w") == expected == stored_condition(m, "w")
    settle(m)
    assert quota_reserved(m, "w") == expected
    m.apply(parse_text(LATE_LQ, "lq.yaml"))
    settle(m)
    assert quota_reserved(m, "w")[:2] == ("True", "QuotaReserved")


def test_missing_cluster_queue_then_created() -> None:
    m = manager()
    m.apply(parse_text(LQ_TO_NOWHERE, "lq.yaml"))
    submit(m, "w", "orphan")
    assert quota_reserved(m, "w") == ("False", "Inadmissible", "ClusterQueue later doesn't exist")
    m.apply(parse_text(LATER_CQ % {"flavor": "default"}, "cq.yaml"))
    settle(m)
    assert quota_reserved(m, "w")[:2] == ("True", "QuotaReserved")


def test_inactive_cluster_queue() -> None:
    m = manager()
    m.apply(parse_text(LQ_TO_NOWHERE + "---" + LATER_CQ % {"flavor": "missing-flavor"}, "q.yaml"))
    submit(m, "w", "orphan")
    assert quota_reserved(m, "w") == ("False", "Inadmissible", "ClusterQueue later is inactive")


def test_deleting_the_local_queue_or_cluster_queue_of_pending_workloads() -> None:
    m = manager()
    m.apply(parse_text(LATE_LQ, "lq.yaml"))
    # Quota is 4 cpu: four are admitted; "w4" and "x" wait.
    for i in range(5):
        submit(m, f"w{i}", "lq")
    submit(m, "x", "late")
    settle(m)
    m.delete("LocalQueue", "default", "late")
    assert stored_condition(m, "x") == ("False", "Inadmissible", "LocalQueue default/late doesn't exist")
    assert quota_reserved(m, "w0")[0] == "True"
    # A ClusterQueue that holds quota cannot be deleted: its admitted workloads go first.
    for i in range(4):
        m.delete_workload("default", f"w{i}")
    settle(m)
    assert quota_reserved(m, "w4")[0] == "True"
    m.delete_workload("default", "w4")
    submit(m, "y", "lq")
    m.delete("ClusterQueue", "", "cq")
    assert stored_condition(m, "y") == ("False", "Inadmissible", "ClusterQueue cq doesn't exist")
