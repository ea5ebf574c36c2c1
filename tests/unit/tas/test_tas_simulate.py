"""``sluicectl simulate`` with ``v1`` Node documents: TAS pod sets get a topology assignment, or wait
with Kueue's reason; without nodes, the cycle stays quota-only."""

from __future__ import annotations

import pytest

from sluicegate.controller.errors import InvalidArgument
from sluicegate.controller.objects import decode_for_apply
from sluicegate.controller.simulate import simulate
from sluicegate.manifest.loader import parse_text

RACK = "cloud.provider.com/topology-rack"
OBJECTS = f"""
apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata: {{name: default}}
spec:
  levels: [{{nodeLabel: {RACK}}}, {{nodeLabel: kubernetes.io/hostname}}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {{name: tas}}
spec: {{nodeLabels: {{pool: tas}}, topologyName: default}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: tas}}
spec:
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{{name: tas, resources: [{{name: cpu, nominalQuota: "100"}}]}}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {{name: default, namespace: default}}
spec: {{clusterQueue: tas}}
"""


def node(name: str, rack: str, cpu: int) -> str:
    return f"""---
apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels: {{pool: tas, {RACK}: {rack}, kubernetes.io/hostname: {name}}}
status: {{allocatable: {{cpu: "{cpu}", pods: "110"}}}}
"""


def job(name: str, count: int) -> str:
    return f"""---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {{name: {name}, namespace: default}}
spec:
  queueName: default
  podSets:
  - name: main
    count: {count}
    template:
      metadata: {{annotations: {{kueue.x-k8s.io/podset-required-topology: {RACK}}}}}
      spec: {{containers: [{{name: c, command: [sleep, "1"], resources: {{requests: {{cpu: "1"}}}}}}]}}
"""


NODES = node("a1", "r1", 2) + node("a2", "r1", 2) + node("b1", "r2", 3)


def test_simulate_assigns_a_topology_on_the_given_nodes() -> None:
    out = simulate(parse_text(OBJECTS + NODES + job("fits", 3), "sim.yaml"))
    (decision,) = out["decisions"]
    assert decision["result"] == "Admitted"
    assert decision["topologyAssignments"] == {"main": {
        "levels": ["kubernetes.io/hostname"],
        "slices": [{"domainCount": 1, "valuesPerLevel": [{"universal": "b1"}], "podCounts": {"universal": 3}}]}}


def test_simulate_reports_the_topology_shortfall() -> None:
    out = simulate(parse_text(OBJECTS + NODES + job("too-big", 5), "sim.yaml"))
    (decision,) = out["decisions"]
    assert decision["result"] == "Pending"
    assert f'topology "default" allows to fit only 4 out of 5 pod(s) (level {RACK})' in decision["message"]


def test_simulate_without_nodes_stays_quota_only() -> None:
    out = simulate(parse_text(OBJECTS + job("quota-only", 5), "sim.yaml"))
    (decision,) = out["decisions"]
    assert decision["result"] == "Admitted"
    assert "topologyAssignments" not in decision


def test_a_node_document_is_not_applied_to_a_controller() -> None:
    with pytest.raises(InvalidArgument, match="Node documents are for sluicectl simulate"):
        decode_for_apply(parse_text(node("a1", "r1", 2), "n.yaml"))
