"""A store written by earlier versions (pods as JSON under status.extra) loads unchanged.

Pod bindings are a typed field of the workload's status in memory
(``WorkloadStatus.pods``); the stored and served document keeps the shape it
always had: ``status.extra.pods``, ``lastPods``, ``deleting``, ``terminate``.
"""

from __future__ import annotations

import json

from sluicegate.controller.manager import Manager
from sluicegate.controller.store import Put
from sluicegate.manifest.encode import encode_json
from sluicegate.model.pods import PodRecord
from tests.conftest import StoreFactory

from .test_manager import Clock

POD = {"uid": "u1", "name": "old-main-0", "podSet": "main", "index": 0, "node": "n1", "requests": {"cpu": 1000},
       "phase": "Running", "ready": True, "startedAt": 1714564801.0, "qosClass": "Guaranteed"}
LAST = {"uid": "u0", "name": "old-main-0-1", "podSet": "main", "index": 0, "node": "n2", "requests": {"cpu": 1000},
        "phase": "Failed", "reason": "Stopping", "exitCode": 137, "exited": True}
EXTRA = {"pods": [POD], "lastPods": [LAST], "deleting": True,
         "terminate": {"reason": "Failed", "message": "DeadlineExceeded"}, "someoneElses": {"kept": [1, None]}}

# A running workload as the previous code stored it (status.extra a plain JSON bag).
OLD_DOCUMENT = {
    "apiVersion": "sluicegate.io/v1beta2",
    "kind": "Workload",
    "metadata": {"name": "old", "namespace": "default", "uid": "0b5c", "creationTimestamp": "2024-05-01T12:00:00Z",
                 "generation": 1},
    "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [
        {"name": "c", "command": ["sleep", "60"], "resources": {"requests": {"cpu": "1"}}}]}}}]},
    "status": {"extra": EXTRA},
}


def test_a_workload_stored_by_the_previous_code_loads_with_typed_pods(store_factory: StoreFactory) -> None:
    store = store_factory()
    store.write([Put("Workload", "default", "old", json.dumps(OLD_DOCUMENT).encode())])
    m = Manager(store, clock=Clock())
    assert m.load() == 1
    wl = m.get_workload("default", "old")
    st = wl.status
    assert st.pods == (PodRecord(uid="u1", name="old-main-0", pod_set="main", index=0, node="n1",
                                 requests={"cpu": 1000}, phase="Running", ready=True, started_at=1714564801.0,
                                 qos_class="Guaranteed"),)
    assert [p.uid for p in st.last_pods] == ["u0"] and st.last_pods[0].exit_code == 137
    assert (st.deleting, st.terminate) == (True, ("Failed", "DeadlineExceeded"))
    assert st.extra == {"someoneElses": {"kept": [1, None]}}
    # Written back (and served) in the very shape it was read.
    assert json.loads(encode_json(wl).body)["status"]["extra"] == EXTRA
