"""Decoding Kueue's TAS API: Topology, ResourceFlavor topologyName, pod set topology requests
(the field and the podset annotations) and the topology assignment on an admission.

Validation follows Kueue: apis/kueue/v1beta2/topology_types.go and resourceflavor_types.go (CRD
rules), pkg/controller/jobframework/tas_validation.go (annotations).
"""

from __future__ import annotations

import pytest

from sluicegate.manifest import decode
from sluicegate.manifest.encode import encode
from sluicegate.model import ResourceFlavor, Topology, Workload
from sluicegate.model.topology import TopologyAssignment, TopologyDomain, TopologyRequest
from tests.unit.manifest import samples
from tests.unit.manifest.samples import errors_of, mutate

RACK = "cloud.provider.com/topology-rack"
BLOCK = "cloud.provider.com/topology-block"
HOST = "kubernetes.io/hostname"
ANN = "spec.podSets[0].template.metadata.annotations"


def topology(*levels: str, api: str = samples.KUEUE) -> dict:
    return {"apiVersion": api, "kind": "Topology", "metadata": {"name": "default"},
            "spec": {"levels": [{"nodeLabel": lv} for lv in levels]}}


@pytest.mark.parametrize("api", [samples.KUEUE, samples.KUEUE_V1BETA1, samples.OWN])
def test_topology_decodes_in_every_api_version(api: str) -> None:
    topo = decode(topology(BLOCK, RACK, HOST, api=api))
    assert topo == Topology("default", (BLOCK, RACK, HOST))
    assert decode(encode(topo)) == topo


@pytest.mark.parametrize(("levels", "path", "fragment"), [
    ((), "spec.levels", "must list at least 1"),
    ((HOST, RACK), "spec.levels", "kubernetes.io/hostname label can only be used at the lowest level"),
    ((RACK, RACK), "spec.levels[1].nodeLabel", "must be unique"),
    (("not a label!",), "spec.levels[0].nodeLabel", ""),
])
def test_topology_rules(levels: tuple[str, ...], path: str, fragment: str) -> None:
    errors = errors_of(topology(*levels))
    assert [e.path for e in errors] == [path]
    assert fragment in errors[0].message


def test_flavor_topology_name_needs_node_labels() -> None:
    flavor = decode(mutate(samples.resource_flavor(), "spec.topologyName", "default"))
    assert isinstance(flavor, ResourceFlavor) and flavor.topology_name == "default"
    assert decode(encode(flavor)) == flavor
    doc = mutate(mutate(samples.resource_flavor(), "spec.topologyName", "default"), "spec.nodeLabels", samples.DELETE)
    errors = errors_of(doc)
    assert [(e.path, e.message) for e in errors] == [
        ("spec.topologyName", "at least one nodeLabel is required when topology is set")]


@pytest.mark.parametrize(("annotations", "want"), [
    ({"kueue.x-k8s.io/podset-required-topology": RACK}, TopologyRequest(required=RACK)),
    ({"kueue.x-k8s.io/podset-preferred-topology": BLOCK}, TopologyRequest(preferred=BLOCK)),
    ({"kueue.x-k8s.io/podset-unconstrained-topology": "true"}, TopologyRequest(unconstrained=True)),
    ({"kueue.x-k8s.io/podset-required-topology": BLOCK, "kueue.x-k8s.io/podset-slice-required-topology": RACK,
      "kueue.x-k8s.io/podset-slice-size": "2"},
     TopologyRequest(required=BLOCK, slice_required=RACK, slice_size=2)),
    ({"example.com/other": "x"}, None),
])
def test_podset_annotations(annotations: dict, want: TopologyRequest | None) -> None:
    wl = decode(mutate(samples.workload(), ANN, annotations))
    assert isinstance(wl, Workload)
    assert wl.pod_sets[0].topology_request == want
    assert decode(encode(wl)) == wl


def test_topology_request_field() -> None:
    wl = decode(mutate(samples.workload(), "spec.podSets[0].topologyRequest",
                       {"preferred": RACK, "podSetSliceRequiredTopology": HOST, "podSetSliceSize": 2}))
    assert isinstance(wl, Workload)
    assert wl.pod_sets[0].topology_request == TopologyRequest(preferred=RACK, slice_required=HOST, slice_size=2)
    assert decode(encode(wl)) == wl


@pytest.mark.parametrize(("path", "value", "want"), [
    (ANN, {"kueue.x-k8s.io/podset-required-topology": RACK, "kueue.x-k8s.io/podset-preferred-topology": RACK},
     [(ANN, "must not contain more than one topology request")]),
    (ANN, {"kueue.x-k8s.io/podset-unconstrained-topology": "maybe"},
     [(f"{ANN}[kueue.x-k8s.io/podset-unconstrained-topology]", "must be a boolean value")]),
    (ANN, {"kueue.x-k8s.io/podset-slice-required-topology": RACK},
     [(f"{ANN}[kueue.x-k8s.io/podset-slice-size]", "must be set when")]),
    (ANN, {"kueue.x-k8s.io/podset-slice-size": "2"},
     [(f"{ANN}[kueue.x-k8s.io/podset-slice-size]", "may not be set when")]),
    (ANN, {"kueue.x-k8s.io/podset-slice-required-topology": RACK, "kueue.x-k8s.io/podset-slice-size": "x"},
     [(f"{ANN}[kueue.x-k8s.io/podset-slice-size]", "must be a numeric value"),
      (f"{ANN}[kueue.x-k8s.io/podset-slice-size]", "must be set when")]),
    (ANN, {"kueue.x-k8s.io/podset-slice-required-topology": RACK, "kueue.x-k8s.io/podset-slice-size": "3"},
     [(f"{ANN}[kueue.x-k8s.io/podset-slice-size]", "must divide the pod set's count (4), got 3")]),
    ("spec.podSets[0].topologyRequest", {"required": "Not A Label"},
     [("spec.podSets[0].topologyRequest.required", "")]),
    ("spec.podSets[0].topologyRequest", {"podSetGroupName": "g"},
     [("spec.podSets[0].topologyRequest.podSetGroupName", "not supported")]),
])
def test_topology_request_errors(path: str, value: object, want: list[tuple[str, str]]) -> None:
    errors = errors_of(mutate(samples.workload(), path, value))
    assert [e.path for e in errors] == [p for p, _ in want], [str(e) for e in errors]
    for err, (_, fragment) in zip(errors, want, strict=True):
        assert fragment in err.message


PSA = "status.admission.podSetAssignments[0]"


def test_assignment_decodes_v1beta2_slices_with_prefix_and_universal() -> None:
    """The v1beta2 example from Kueue's workload_types.go: a universal block, racks by prefix."""
    doc = mutate(samples.workload_with_status(), f"{PSA}.topologyAssignment", {
        "levels": [BLOCK, RACK],
        "slices": [{"domainCount": 2,
                    "valuesPerLevel": [{"universal": "block-1"}, {"individual": {"prefix": "rack-", "roots": ["1", "2"]}}],
                    "podCounts": {"individual": [3, 1]}}],
    })
    wl = decode(doc)
    assert isinstance(wl, Workload) and wl.status.admission is not None
    ta = wl.status.admission.pod_set_assignments[0].topology_assignment
    assert ta == TopologyAssignment((BLOCK, RACK), (TopologyDomain(("block-1", "rack-1"), 3),
                                                     TopologyDomain(("block-1", "rack-2"), 1)))
    assert decode(encode(wl)) == wl


def test_assignment_decodes_v1beta1_domains() -> None:
    doc = mutate(samples.workload_with_status(), f"{PSA}.topologyAssignment",
                 {"levels": [HOST], "domains": [{"values": ["n1"], "count": 4}]})
    doc["apiVersion"] = samples.KUEUE_V1BETA1
    doc["status"]["accumulatedPastExexcutionTimeSeconds"] = doc["status"].pop("accumulatedPastExecutionTimeSeconds")
    wl = decode(doc)
    assert isinstance(wl, Workload) and wl.status.admission is not None
    assert wl.status.admission.pod_set_assignments[0].topology_assignment == \
        TopologyAssignment((HOST,), (TopologyDomain(("n1",), 4),))


def test_assignment_slice_errors_name_the_field() -> None:
    doc = mutate(samples.workload_with_status(), f"{PSA}.topologyAssignment", {
        "levels": [HOST],
        "slices": [{"domainCount": 2, "valuesPerLevel": [{"individual": {"roots": ["a"]}}],
                    "podCounts": {"universal": 2}}],
    })
    errors = errors_of(doc)
    assert [e.path for e in errors] == [f"{PSA}.topologyAssignment.slices[0].valuesPerLevel[0].individual.roots"]


def test_job_template_annotations_become_the_pod_sets_request() -> None:
    """Kueue's Job integration reads the podset annotations on spec.template (jobframework/tas.go)."""
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": "default",
                                                                  "labels": {"kueue.x-k8s.io/queue-name": "q"}},
           "spec": {"parallelism": 4, "completions": 4, "template": {
               "metadata": {"annotations": {"kueue.x-k8s.io/podset-preferred-topology": RACK}},
               "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "command": ["true"]}]}}}}
    wl = decode(job)
    assert isinstance(wl, Workload)
    assert wl.pod_sets[0].topology_request == TopologyRequest(preferred=RACK)
