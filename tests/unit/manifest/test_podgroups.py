"""PodGroup and Queue documents of kube-batch and Volcano, and Jobs that name a PodGroup.

Fields from kube-batch's pkg/apis/scheduling/v1alpha1/types.go (PodGroupSpec:
minMember, queue, priorityClassName; QueueSpec: weight, capability) and
Volcano's volcano-sh/apis pkg/apis/scheduling/v1beta1/types.go (adds
minResources, minTaskMember, networkTopology, subGroupPolicy; Queue: weight,
capability, reclaimable, guarantee, ...).  The group annotation keys are
kube-batch's ``scheduling.k8s.io/group-name`` and Volcano's
``scheduling.volcano.sh/group-name``; the default group is kube-batch's
``createShadowPodGroup`` (pkg/scheduler/cache/util.go).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from sluicegate.manifest.decode import decode
from sluicegate.manifest.encode import encode
from sluicegate.manifest.errors import ManifestError
from sluicegate.model.podgroups import BatchQueue, PodGroup

KB = "scheduling.incubator.k8s.io/v1alpha1"
VC = "scheduling.volcano.sh/v1beta1"


def group(api: str = VC, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": api, "kind": "PodGroup", "metadata": {"name": "g", "namespace": "ml"}, "spec": spec}


def queue(api: str = KB, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": api, "kind": "Queue", "metadata": {"name": "q"}, "spec": spec}


def job(annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None,
        template_extra: dict[str, Any] | None = None, pod_annotations: dict[str, str] | None = None) -> dict[str, Any]:
    pod_spec: dict[str, Any] = {"containers": [{"name": "c", "command": ["true"],
                                                "resources": {"requests": {"cpu": "1"}}}], **(template_extra or {})}
    template: dict[str, Any] = {"spec": pod_spec}
    if pod_annotations:
        template["metadata"] = {"annotations": pod_annotations}
    meta: dict[str, Any] = {"name": "j", "annotations": annotations or {}}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
            "spec": {"parallelism": 6, "completions": 6, "template": template}}


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (group(KB), PodGroup(namespace="ml", name="g", api_version=KB)),
        (group(KB, minMember=4, queue="research", priorityClassName="high"),
         PodGroup(namespace="ml", name="g", min_member=4, queue="research", priority_class_name="high",
                  api_version=KB)),
        (group(VC, minMember=2, minResources={"cpu": "3", "memory": "1Gi"}),
         PodGroup(namespace="ml", name="g", min_member=2, min_resources={"cpu": 3000, "memory": 2**30},
                  api_version=VC)),
        (queue(KB), BatchQueue(name="q")),
        (queue(VC, weight=3, capability={"cpu": "8"}), BatchQueue(name="q", weight=3, capability={"cpu": 8000},
                                                                  api_version=VC)),
    ],
    ids=["kube-batch defaults (minMember 1, queue default)", "kube-batch every field", "volcano minResources",
         "kube-batch Queue default weight 1", "volcano Queue weight and capability"],
)
def test_decodes_and_round_trips(doc: dict[str, Any], expected: object) -> None:
    obj = decode(doc)
    assert obj == expected
    assert decode(encode(obj)) == obj


@pytest.mark.parametrize(
    ("doc", "problems"),
    [
        (group(VC, minMember=0), ["spec.minMember: must be at least 1, got 0"]),
        (group(VC, minMember="4"), ["spec.minMember: must be an integer, got \"4\""]),
        (group(VC, minTaskMember={"main": 2}),
         ["spec.minTaskMember: not supported: a Job has one pod template (one task); use minMember"]),
        (group(VC, networkTopology={"mode": "hard"}),
         ["spec.networkTopology: not supported: network topology aware scheduling is not implemented"]),
        (group(VC, minResources={"cpu": "lots"}), ["spec.minResources[cpu]: not a valid quantity"]),
        (group(KB, minResources={"cpu": "1"}),
         [f"spec.minResources: is a {VC} field; {KB} has none"]),
        (group(VC, queue="Not_A_Name"), ["spec.queue:"]),
        (group(VC, minMember=2, colour="red"), ["spec.colour: unknown field"]),
        ({**group(VC), "status": {"phase": "Running"}}, ["status: not supported: status is computed"]),
        (queue(KB, weight=0), ["spec.weight: must be at least 1, got 0"]),
        (queue(VC, reclaimable=False), ["spec.reclaimable: not supported"]),
        (queue(VC, guarantee={"resource": {"cpu": "1"}}), ["spec.guarantee: not supported"]),
        (queue(VC, capability={"cpu": "-1"}), ["spec.capability[cpu]: must be non-negative"]),
        ({**queue(KB), "metadata": {"name": "q", "namespace": "ml"}}, ["metadata.namespace: Queue is cluster-scoped"]),
        ({**group(VC), "apiVersion": "scheduling.volcano.sh/v1alpha9"}, ["apiVersion: unsupported apiVersion"]),
        ({**group(VC), "kind": "Job"}, ["kind: must be one of PodGroup, Queue"]),
    ],
    ids=["minMember 0", "minMember a string", "minTaskMember", "networkTopology", "bad quantity",
         "minResources in kube-batch v1alpha1", "queue not a name", "unknown field", "status", "weight 0",
         "reclaimable", "guarantee", "negative capability", "namespaced Queue", "unknown version", "wrong kind"],
)
def test_bad_documents_name_the_field(doc: dict[str, Any], problems: list[str]) -> None:
    before = copy.deepcopy(doc)
    with pytest.raises(ManifestError) as err:
        decode(doc)
    text = str(err.value)
    for p in problems:
        assert p in text, text
    assert doc == before


@pytest.mark.parametrize("key", ["scheduling.k8s.io/group-name", "scheduling.volcano.sh/group-name"])
def test_a_job_naming_a_group_takes_no_queue_of_its_own(key: str) -> None:
    wl = decode(job({key: "g"}))
    ps = wl.pod_sets[0]
    # The queue, priority and gang come from the PodGroup once the controller has it.
    assert (wl.queue_name, ps.count, ps.min_count, wl.annotations[key]) == ("", 6, None, "g")


@pytest.mark.parametrize(
    ("doc", "problem"),
    [
        (job({"scheduling.k8s.io/group-name": "g"}, labels={"kueue.x-k8s.io/queue-name": "lq"}),
         "metadata.labels[kueue.x-k8s.io/queue-name]: a Job in a PodGroup takes this from the PodGroup's "
         "spec.queue; remove the label"),
        (job({"scheduling.k8s.io/group-name": "g", "kueue.x-k8s.io/job-min-parallelism": "2"}),
         "metadata.annotations[kueue.x-k8s.io/job-min-parallelism]: a Job in a PodGroup takes this from the "
         "PodGroup's spec.minMember; remove it"),
        (job({"scheduling.k8s.io/group-name": "g", "scheduling.volcano.sh/group-name": "h"}),
         "metadata.annotations[scheduling.volcano.sh/group-name]: names another PodGroup"),
        (job(template_extra={"schedulerName": "kube-batch"}, pod_annotations={"scheduling.k8s.io/group-min-member": "x"}),
         "spec.template.metadata.annotations[scheduling.k8s.io/group-min-member]: must be an integer, got 'x'"),
    ],
    ids=["queue label", "min-parallelism", "two groups", "bad default-group minMember"],
)
def test_bad_grouped_jobs_name_the_field(doc: dict[str, Any], problem: str) -> None:
    with pytest.raises(ManifestError) as err:
        decode(doc)
    assert problem in str(err.value)


@pytest.mark.parametrize(
    ("pod_annotations", "labels", "queue", "min_count"),
    [
        (None, None, "default", 1),
        ({"scheduling.k8s.io/group-min-member": "3"}, None, "default", 3),
        ({"scheduling.k8s.io/group-min-member": "6"}, {"kueue.x-k8s.io/queue-name": "lq"}, "lq", None),
    ],
    ids=["minMember 1 in the default queue", "group-min-member annotation", "a gang of all, in a named queue"],
)
def test_default_group_of_a_job_for_kube_batch(pod_annotations: dict[str, str] | None,
                                               labels: dict[str, str] | None, queue: str,
                                               min_count: int | None) -> None:
    """kube-batch's shadow group: a Job whose pods ask for kube-batch and name no group is a group of its own,
    minMember 1 (or the pods' group-min-member), waiting in the default queue."""
    wl = decode(job(labels=labels, template_extra={"schedulerName": "kube-batch"}, pod_annotations=pod_annotations))
    assert (wl.queue_name, wl.pod_sets[0].count, wl.pod_sets[0].min_count) == (queue, 6, min_count)


def test_a_plain_job_keeps_kueue_semantics() -> None:
    with pytest.raises(ManifestError, match=r"metadata.labels\[kueue.x-k8s.io/queue-name\]: required"):
        decode(job())
