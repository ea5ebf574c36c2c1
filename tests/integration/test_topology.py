"""Topology Aware Scheduling on real agents labelled with their rack (docs/topology.md).

Semantics are Kueue's (site/content/en/docs/concepts/topology_aware_scheduling.md,
pkg/cache/scheduler/tas_flavor_snapshot.go): a required-rack gang lands in one
rack or waits with a reason naming the level and the shortfall; a preferred one
spans the fewest racks.  Four agents of 2 CPUs: rack r1 = node-a, node-b;
rack r2 = node-c, node-d.  Each agent labels itself kubernetes.io/hostname.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from .harness import Agent, Controller, get_json, sluicectl, wait_for

pytestmark = pytest.mark.integration

RACK = "cloud.provider.com/topology-rack"
BLOCK = "cloud.provider.com/topology-block"
OBJECTS = f"""
apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata: {{name: default}}
spec:
  levels:
  - nodeLabel: {BLOCK}
  - nodeLabel: {RACK}
  - nodeLabel: kubernetes.io/hostname
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {{name: tas}}
spec:
  nodeLabels: {{pool: tas}}
  topologyName: default
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: tas}}
spec:
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: tas
      resources: [{{name: cpu, nominalQuota: "16"}}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {{name: default, namespace: default}}
spec: {{clusterQueue: tas}}
"""
RACK_OF = {"node-a": "r1", "node-b": "r1", "node-c": "r2", "node-d": "r2"}


def gang(path: Path, name: str, count: int, annotation: str, level: str) -> str:
    spec = {"terminationGracePeriodSeconds": 1,
            "containers": [{"name": "c", "command": ["sleep", "60"], "resources": {"requests": {"cpu": "1"}}}]}
    doc = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
           "metadata": {"name": name, "namespace": "default"},
           "spec": {"queueName": "default", "podSets": [{"name": "main", "count": count, "template": {
               "metadata": {"annotations": {f"kueue.x-k8s.io/podset-{annotation}-topology": level}},
               "spec": spec}}]}}
    f = path / f"{name}.yaml"
    f.write_text(yaml.safe_dump(doc))
    return str(f)


def nodes_of(server: str, name: str) -> list[str] | None:
    pods = get_json(server, "workload", name).get("status", {}).get("extra", {}).get("pods", [])
    if pods and all(p.get("phase") == "Running" for p in pods):
        return sorted(p["node"] for p in pods)
    return None


def pending_message(server: str, name: str) -> str | None:
    for cond in get_json(server, "workload", name).get("status", {}).get("conditions", []):
        if cond["type"] == "QuotaReserved" and cond["status"] == "False" and "topology" in cond["message"]:
            return str(cond["message"])
    return None


@pytest.fixture
def racks(tmp_path: Path) -> Iterator[Controller]:
    c = Controller(tmp_path).start()
    agents = [Agent(tmp_path, c.address, name, allocatable="cpu=2,memory=2Gi",
                    labels=("pool=tas", f"{BLOCK}=b1", f"{RACK}={rack}")).start()
              for name, rack in RACK_OF.items()]
    objects = tmp_path / "tas.yaml"
    objects.write_text(OBJECTS)
    sluicectl(c.address, "apply", "-f", str(objects))
    try:
        yield c
    finally:
        for a in agents:
            a.stop()
        c.stop()


def test_required_rack_gang_lands_in_one_rack_or_waits_naming_the_level(racks: Controller, tmp_path: Path) -> None:
    s = racks.address
    assert "default" in sluicectl(s, "get", "topologies").stdout
    sluicectl(s, "apply", "-f", gang(tmp_path, "one-rack", 4, "required", RACK))
    placed = wait_for("one-rack running", lambda: nodes_of(s, "one-rack"))
    assert len({RACK_OF[n] for n in placed}) == 1, placed
    described = sluicectl(s, "describe", "workload", "one-rack").stdout
    assert "topology: kubernetes.io/hostname: " in described
    # The other rack holds 4 more: a 5-pod gang that must share a rack waits, and says why.
    sluicectl(s, "apply", "-f", gang(tmp_path, "too-big", 5, "required", RACK))
    msg = wait_for("too-big pending reason", lambda: pending_message(s, "too-big"))
    assert f'topology "default" allows to fit only 4 out of 5 pod(s) (level {RACK})' in msg
    described = sluicectl(s, "describe", "workload", "too-big").stdout
    assert "allows to fit only 4 out of 5 pod(s)" in described
    # Two pods preferring a rack fit in the free one.
    sluicectl(s, "apply", "-f", gang(tmp_path, "preferred", 2, "preferred", RACK))
    placed = wait_for("preferred running", lambda: nodes_of(s, "preferred"))
    assert len({RACK_OF[n] for n in placed}) == 1, placed


def test_preferred_gang_spans_the_fewest_racks(racks: Controller, tmp_path: Path) -> None:
    s = racks.address
    # 6 pods of 1 CPU: no rack holds 6 (each has 4), so a preferred gang spans two racks, not more.
    sluicectl(s, "apply", "-f", gang(tmp_path, "wide", 6, "preferred", RACK))
    placed = wait_for("wide running", lambda: nodes_of(s, "wide"), timeout=30)
    assert len({RACK_OF[n] for n in placed}) == 2
    ta = get_json(s, "workload", "wide")["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]
    assert ta["levels"] == ["kubernetes.io/hostname"]
    # 3 pods preferring a rack: only 2 CPUs are left, in one rack; it waits, Kueue's reason given.
    sluicectl(s, "apply", "-f", gang(tmp_path, "rest", 3, "preferred", RACK))
    msg = wait_for("rest pending reason", lambda: pending_message(s, "rest"))
    assert 'allows to fit only 2 out of 3 pod(s)' in msg
