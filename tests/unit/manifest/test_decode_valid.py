"""Valid documents of every kind decode to exactly the expected model objects."""

from __future__ import annotations

from fractions import Fraction

import pytest

from sluicegate.manifest import decode, decode_all, parse_text
from sluicegate.manifest.errors import ManifestError
from sluicegate.model import (
    Admission,
    BorrowWithinCohortPolicy,
    ClusterQueueName,
    ClusterQueueSpec,
    CohortName,
    CohortSpec,
    Condition,
    Container,
    ControllerConfig,
    FairPreemptionStrategy,
    FairSharingConfig,
    FlavorFungibility,
    FlavorFungibilityPolicy,
    FlavorName,
    FlavorQuotas,
    FungibilityPreference,
    LabelSelector,
    LocalQueueSpec,
    Namespace,
    PodSet,
    PodSetAssignment,
    Preemption,
    PreemptionPolicy,
    PriorityClass,
    ReclaimPolicy,
    RequeueState,
    RequeuingTimestamp,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    SelectorRequirement,
    StopPolicy,
    WaitForPodsReadyConfig,
    Workload,
    WorkloadPriorityClass,
    WorkloadStatus,
)
from sluicegate.model.pods import PodRecord

from . import samples
from .samples import DELETE, KUEUE_V1BETA1, mutate

GI = 2**30
MI = 2**20


def test_resource_flavor() -> None:
    assert decode(samples.resource_flavor()) == ResourceFlavor(
        name=FlavorName("on-demand"), node_labels={"instance-type": "on-demand", "example.com/zone": "a"}
    )


def test_resource_flavor_without_spec() -> None:
    assert decode(mutate(samples.resource_flavor(), "spec", DELETE)) == ResourceFlavor(name=FlavorName("on-demand"))


def test_cluster_queue() -> None:
    assert decode(samples.cluster_queue()) == ClusterQueueSpec(
        name=ClusterQueueName("team-a"),
        cohort=CohortName("org"),
        namespace_selector=LabelSelector(match_labels={"team": "a"}),
        resource_groups=(
            ResourceGroup(
                covered_resources=("cpu", "memory"),
                flavors=(
                    FlavorQuotas(
                        name=FlavorName("on-demand"),
                        resources={
                            "cpu": ResourceQuota(nominal=10_000, borrowing_limit=5_000, lending_limit=2_000),
                            "memory": ResourceQuota(nominal=64 * GI),
                        },
                    ),
                    FlavorQuotas(
                        name=FlavorName("spot"),
                        resources={"cpu": ResourceQuota(nominal=20_000), "memory": ResourceQuota(nominal=128 * GI)},
                    ),
                ),
            ),
            ResourceGroup(
                covered_resources=("example.com/gpu",),
                flavors=(FlavorQuotas(name=FlavorName("a100"), resources={"example.com/gpu": ResourceQuota(nominal=4)}),),
            ),
        ),
    )


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        pytest.param(DELETE, None, id="absent-matches-nothing"),
        pytest.param(None, None, id="null-matches-nothing"),
        pytest.param({}, LabelSelector(), id="empty-matches-everything"),
        pytest.param(
            {
                "matchLabels": {"tier": "batch"},
                "matchExpressions": [
                    {"key": "team", "operator": "In", "values": ["a", "b"]},
                    {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]},
                    {"key": "gpu", "operator": "Exists"},
                    {"key": "legacy", "operator": "DoesNotExist", "values": []},
                ],
            },
            LabelSelector(
                match_labels={"tier": "batch"},
                match_expressions=(
                    SelectorRequirement("team", "In", ("a", "b")),
                    SelectorRequirement("kubernetes.io/metadata.name", "NotIn", ("kube-system",)),
                    SelectorRequirement("gpu", "Exists"),
                    SelectorRequirement("legacy", "DoesNotExist"),
                ),
            ),
            id="labels-and-expressions",
        ),
    ],
)
def test_cluster_queue_namespace_selector(selector: object, expected: LabelSelector | None) -> None:
    cq = decode(mutate(samples.cluster_queue(), "spec.namespaceSelector", selector))
    assert isinstance(cq, ClusterQueueSpec)
    assert cq.namespace_selector == expected


def test_cluster_queue_policies() -> None:
    doc = mutate(samples.cluster_queue(), "spec.preemption", {
        "withinClusterQueue": "LowerOrNewerEqualPriority",
        "reclaimWithinCohort": "Any",
        "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100},
    })
    doc = mutate(doc, "spec.flavorFungibility", {
        "whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor", "preference": "PreemptionOverBorrowing"
    })
    doc = mutate(doc, "spec.queueingStrategy", "StrictFIFO")
    doc = mutate(doc, "spec.stopPolicy", "HoldAndDrain")
    doc = mutate(doc, "spec.fairSharing", {"weight": "1.5"})
    cq = decode(doc)
    assert isinstance(cq, ClusterQueueSpec)
    assert (cq.preemption, cq.flavor_fungibility, cq.queueing_strategy.value, cq.stop_policy, cq.fair_sharing_weight) == (
        Preemption(
            within_cluster_queue=PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY,
            reclaim_within_cohort=ReclaimPolicy.ANY,
            borrow_within_cohort=BorrowWithinCohortPolicy.LOWER_PRIORITY,
            max_priority_threshold=100,
        ),
        FlavorFungibility(
            when_can_borrow=FlavorFungibilityPolicy.TRY_NEXT_FLAVOR,
            when_can_preempt=FlavorFungibilityPolicy.TRY_NEXT_FLAVOR,
            preference=FungibilityPreference.PREEMPTION_OVER_BORROWING,
        ),
        "StrictFIFO",
        StopPolicy.HOLD_AND_DRAIN,
        Fraction(3, 2),
    )


@pytest.mark.parametrize(
    ("weight", "expected"),
    [
        pytest.param("0", Fraction(0), id="zero-weight"),
        pytest.param(0.25, Fraction(1, 4), id="yaml-float"),
        pytest.param(3, Fraction(3), id="yaml-int"),
        pytest.param("500m", Fraction(1, 2), id="milli-suffix"),
        pytest.param("2n", Fraction(2, 10**9), id="just-above-the-floor"),
    ],
)
def test_fair_sharing_weight(weight: object, expected: Fraction) -> None:
    cq = decode(mutate(samples.cluster_queue(), "spec.fairSharing", {"weight": weight}))
    assert isinstance(cq, ClusterQueueSpec)
    assert cq.fair_sharing_weight == expected


def test_cluster_queue_defaults() -> None:
    doc = {"apiVersion": "sluicegate.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "empty"}}
    assert decode(doc) == ClusterQueueSpec(name=ClusterQueueName("empty"))


def test_cluster_queue_v1beta1_spellings() -> None:
    doc = samples.cluster_queue()
    doc["apiVersion"] = KUEUE_V1BETA1
    doc["spec"]["cohort"] = doc["spec"].pop("cohortName")
    doc["spec"]["flavorFungibility"] = {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"}
    cq = decode(doc)
    assert isinstance(cq, ClusterQueueSpec)
    assert (cq.cohort, cq.flavor_fungibility) == (
        "org",
        FlavorFungibility(
            when_can_borrow=FlavorFungibilityPolicy.MAY_STOP_SEARCH,
            when_can_preempt=FlavorFungibilityPolicy.MAY_STOP_SEARCH,
        ),
    )


def test_cohort() -> None:
    assert decode(samples.cohort()) == CohortSpec(
        name=CohortName("research"),
        parent=CohortName("org"),
        resource_groups=(
            ResourceGroup(
                covered_resources=("cpu",),
                flavors=(
                    FlavorQuotas(
                        name=FlavorName("on-demand"),
                        resources={"cpu": ResourceQuota(nominal=4000, borrowing_limit=2000, lending_limit=1000)},
                    ),
                ),
            ),
        ),
        fair_sharing_weight=Fraction(1, 2),
    )


def test_cohort_lending_limit_may_exceed_its_own_nominal_quota() -> None:
    # Unlike a ClusterQueue, a cohort lends its members' quota as well.
    doc = mutate(samples.cohort(), "spec.resourceGroups[0].flavors[0].resources[0].lendingLimit", "10")
    cohort = decode(doc)
    assert isinstance(cohort, CohortSpec)
    assert cohort.quotas()[next(iter(cohort.quotas()))].lending_limit == 10_000


@pytest.mark.parametrize("key", ["parentName", "parent"])
def test_cohort_v1beta1_parent_spellings(key: str) -> None:
    doc = samples.cohort()
    doc["apiVersion"] = KUEUE_V1BETA1
    doc["spec"][key] = doc["spec"].pop("parentName")
    cohort = decode(doc)
    assert isinstance(cohort, CohortSpec)
    assert cohort.parent == "org"


def test_local_queue() -> None:
    assert decode(samples.local_queue()) == LocalQueueSpec(
        namespace="team-a", name="user-queue", cluster_queue=ClusterQueueName("team-a")
    )


def test_local_queue_namespace_defaults_to_default() -> None:
    doc = mutate(samples.local_queue(), "metadata.namespace", DELETE)
    doc = mutate(doc, "spec.stopPolicy", "Hold")
    assert decode(doc) == LocalQueueSpec(
        namespace="default", name="user-queue", cluster_queue=ClusterQueueName("team-a"), stop_policy=StopPolicy.HOLD
    )


def test_workload_priority_class() -> None:
    assert decode(samples.workload_priority_class()) == WorkloadPriorityClass(
        name="high", value=1000, description="urgent jobs"
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [
        pytest.param("batch-high", 100000, id="user-class"),
        pytest.param("max-user", 1_000_000_000, id="highest-user-value"),
        pytest.param("system-node-critical", 2_000_001_000, id="builtin-node-critical"),
        pytest.param("system-cluster-critical", 2_000_000_000, id="builtin-cluster-critical"),
        pytest.param("negative", -5, id="negative-value"),
    ],
)
def test_priority_class(name: str, value: int) -> None:
    doc = mutate(mutate(samples.priority_class(), "metadata.name", name), "value", value)
    assert decode(doc) == PriorityClass(
        name=name, value=value, description="important batch pods", preemption_policy="PreemptLowerPriority"
    )


def test_namespace() -> None:
    assert decode(samples.namespace()) == Namespace(name="team-a", labels={"team": "a"})


def _main_container() -> Container:
    return Container(
        name="main",
        command=("python", "train.py"),
        args=("--epochs", "3"),
        env=(("MODE", "fast"),),
        working_dir="/srv/job",
        requests={"cpu": 1000, "memory": GI},
        limits={"cpu": 2000, "memory": 2 * GI},
    )


def test_workload() -> None:
    assert decode(samples.workload()) == Workload(
        namespace="team-a",
        name="train",
        uid="",
        creation_timestamp=0.0,
        queue_name="user-queue",
        pod_sets=(
            PodSet(
                name="workers",
                count=4,
                # cpu: the init container (3) needs more than the app containers (1).
                requests={"cpu": 3000, "memory": GI},
                containers=(_main_container(),),
                init_containers=(Container(name="fetch", command=("fetch-data",), requests={"cpu": 3000}),),
            ),
        ),
    )


def test_workload_defaults_and_metadata() -> None:
    doc = {
        "apiVersion": "sluicegate.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": "w",
            "uid": "1f0e-42",
            "creationTimestamp": "2024-05-01T12:00:00.25Z",
            "generation": 3,
            "resourceVersion": "991",
            "labels": {"team": "a"},
            "annotations": {"example.com/note": "anything at all"},
        },
        "spec": {
            "queueName": "q",
            "priority": 7,
            "active": False,
            "maximumExecutionTimeSeconds": 600,
            "podSets": [
                {
                    "template": {
                        "metadata": {"labels": {"app": "w"}, "annotations": {"a": "b"}},
                        "spec": {
                            "priorityClassName": "batch-high",
                            "restartPolicy": "OnFailure",
                            "terminationGracePeriodSeconds": 5,
                            "nodeSelector": {"disk": "ssd"},
                            "containers": [{"name": "c", "command": ["true"]}],
                        },
                    }
                }
            ],
        },
    }
    assert decode(doc) == Workload(
        namespace="default",
        name="w",
        uid="1f0e-42",
        creation_timestamp=1714564800.25,
        queue_name="q",
        pod_sets=(
            PodSet(
                name="main",
                count=1,
                node_selector={"disk": "ssd"},
                containers=(Container(name="c", command=("true",)),),
                restart_policy="OnFailure",
                termination_grace_period_seconds=5,
                priority_class_name="batch-high",
            ),
        ),
        priority=7,
        active=False,
        maximum_execution_time_seconds=600,
        labels={"team": "a"},
        annotations={"example.com/note": "anything at all"},
        generation=3,
    )


def test_limit_without_request_sets_the_request() -> None:
    doc = mutate(
        samples.workload(),
        "spec.podSets[0].template.spec.containers[0].resources",
        {"requests": {"cpu": "250m"}, "limits": {"cpu": "1", "memory": "512Mi", "example.com/gpu": 1}},
    )
    wl = decode(doc)
    assert isinstance(wl, Workload)
    main = wl.pod_sets[0].containers[0]
    assert (main.requests, main.limits, wl.pod_sets[0].requests) == (
        {"cpu": 250, "memory": 512 * MI, "example.com/gpu": 1},
        {"cpu": 1000, "memory": 512 * MI, "example.com/gpu": 1},
        {"cpu": 3000, "memory": 512 * MI, "example.com/gpu": 1},
    )


def test_effective_requests_sum_app_containers_and_take_the_largest_init_container() -> None:
    doc = mutate(samples.workload(), "spec.podSets[0].template.spec", {
        "initContainers": [
            {"name": "i1", "resources": {"requests": {"cpu": "2", "memory": "3Gi"}}},
            {"name": "i2", "resources": {"requests": {"cpu": "4"}}},
        ],
        "containers": [
            {"name": "a", "resources": {"requests": {"cpu": "1500m", "memory": "1Gi"}}},
            {"name": "b", "resources": {"requests": {"cpu": "1", "memory": "1Gi", "hugepages-2Mi": "4Mi"}}},
        ],
    })
    wl = decode(doc)
    assert isinstance(wl, Workload)
    assert wl.pod_sets[0].requests == {"cpu": 4000, "memory": 3 * GI, "hugepages-2Mi": 4 * MI}


@pytest.mark.parametrize(
    ("spec_patch", "expected"),
    [
        pytest.param(
            {"priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "high"}},
            ("WorkloadPriorityClass", "high"),
            id="ref-workload-priority-class",
        ),
        pytest.param(
            {"priorityClassRef": {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "batch-high"}},
            ("PriorityClass", "batch-high"),
            id="ref-pod-priority-class",
        ),
        pytest.param(
            {"priorityClassName": "high", "priorityClassSource": "kueue.x-k8s.io/workloadpriorityclass"},
            ("WorkloadPriorityClass", "high"),
            id="older-name-and-source-workload",
        ),
        pytest.param(
            {"priorityClassName": "batch-high", "priorityClassSource": "scheduling.k8s.io/priorityclass"},
            ("PriorityClass", "batch-high"),
            id="older-name-and-source-pod",
        ),
        pytest.param({}, None, id="no-class"),
    ],
)
def test_workload_priority_class_reference(spec_patch: dict[str, object], expected: tuple[str, str] | None) -> None:
    doc = samples.workload()
    doc["spec"].update(spec_patch)
    doc["spec"]["priority"] = 42
    wl = decode(doc)
    assert isinstance(wl, Workload)
    assert (wl.priority_class, wl.priority) == (expected, 42)


def test_workload_status() -> None:
    wl = decode(samples.workload_with_status())
    assert isinstance(wl, Workload)
    assert wl.status == WorkloadStatus(
        conditions=(
            Condition(
                type="QuotaReserved",
                status="True",
                reason="QuotaReserved",
                message="Quota reserved in ClusterQueue team-a",
                last_transition_time=1714564800.0,
            ),
        ),
        admission=Admission(
            cluster_queue=ClusterQueueName("team-a"),
            pod_set_assignments=(
                PodSetAssignment(
                    name="workers",
                    flavors={"cpu": FlavorName("on-demand"), "memory": FlavorName("on-demand")},
                    resource_usage={"cpu": 12_000, "memory": 4 * GI},
                    count=4,
                ),
            ),
        ),
        requeue_state=RequeueState(count=1, requeue_at=1714565100.0),
        reclaimable_pods={"workers": 1},
        accumulated_past_execution_time_seconds=30,
    )
    assert wl.has_quota_reservation and not wl.is_admitted


def test_workload_status_assignment_count_defaults_to_the_pod_set_count() -> None:
    doc = mutate(samples.workload_with_status(), "status.admission.podSetAssignments[0].count", DELETE)
    wl = decode(doc)
    assert isinstance(wl, Workload)
    assert wl.status.admission is not None
    assert wl.status.admission.pod_set_assignments[0].count == 4


def test_workload_v1beta1_spellings() -> None:
    doc = samples.workload_with_status()
    doc["apiVersion"] = KUEUE_V1BETA1
    doc["status"]["accumulatedPastExexcutionTimeSeconds"] = doc["status"].pop("accumulatedPastExecutionTimeSeconds")
    doc["spec"].update({"priorityClassName": "high", "priorityClassSource": "kueue.x-k8s.io/workloadpriorityclass"})
    wl = decode(doc)
    assert isinstance(wl, Workload)
    assert (wl.status.accumulated_past_execution_time_seconds, wl.priority_class) == (
        30,
        ("WorkloadPriorityClass", "high"),
    )


def test_workload_status_extra_under_own_api_version() -> None:
    # status.extra's pods are typed pod records (WorkloadStatus.pods); other keys are kept as they were.
    doc = samples.workload_with_status()
    doc["apiVersion"] = "sluicegate.io/v1beta2"
    pod = {"uid": "u1", "name": "w-main-0", "podSet": "main", "index": 0, "node": "n1", "phase": "Running",
           "exitCode": None}
    doc["status"]["extra"] = {"pods": [pod], "attempt": 2}
    wl = decode(doc)
    assert isinstance(wl, Workload)
    assert wl.status.extra == {"attempt": 2}
    assert wl.status.pods == (PodRecord(uid="u1", name="w-main-0", pod_set="main", index=0, node="n1", phase="Running"),)


def test_workload_status_extra_pods_must_be_pod_records() -> None:
    doc = samples.workload_with_status()
    doc["apiVersion"] = "sluicegate.io/v1beta2"
    doc["status"]["extra"] = {"pods": [{"node": "n1", "phase": "Running", "exitCode": None}], "attempt": 2}
    with pytest.raises(ManifestError, match=r"status\.extra.*pods\[0\]\.uid: required"):
        decode(doc)


def test_configuration_v1beta2() -> None:
    assert decode(samples.configuration()) == ControllerConfig(
        fair_sharing=FairSharingConfig(
            enabled=True,
            preemption_strategies=(
                FairPreemptionStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
                FairPreemptionStrategy.LESS_THAN_INITIAL_SHARE,
            ),
        ),
        wait_for_pods_ready=WaitForPodsReadyConfig(
            enabled=True,
            timeout_seconds=300.0,
            recovery_timeout_seconds=90.0,
            block_admission=True,
            requeuing_timestamp=RequeuingTimestamp.CREATION,
            backoff_base_seconds=10.0,
            backoff_max_seconds=600.0,
            backoff_limit_count=5,
        ),
        label_keys_to_copy=("team", "example.com/project"),
    )


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        pytest.param(
            {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"},
            ControllerConfig(),
            id="v1beta2-empty-means-all-off",
        ),
        pytest.param(
            {
                "apiVersion": "config.kueue.x-k8s.io/v1beta2",
                "kind": "Configuration",
                "fairSharing": {},
                "waitForPodsReady": {"timeout": "10m"},
            },
            ControllerConfig(
                fair_sharing=FairSharingConfig(enabled=True),
                wait_for_pods_ready=WaitForPodsReadyConfig(enabled=True, timeout_seconds=600.0, block_admission=False),
            ),
            id="v1beta2-present-sections-are-enabled",
        ),
        pytest.param(
            {
                "apiVersion": "config.kueue.x-k8s.io/v1beta1",
                "kind": "Configuration",
                "fairSharing": {"enable": True, "preemptionStrategies": ["LessThanInitialShare"]},
                "waitForPodsReady": {"enable": True},
            },
            ControllerConfig(
                fair_sharing=FairSharingConfig(
                    enabled=True, preemption_strategies=(FairPreemptionStrategy.LESS_THAN_INITIAL_SHARE,)
                ),
                # v1beta1: timeout defaults to 5m and blockAdmission to true when enabled.
                wait_for_pods_ready=WaitForPodsReadyConfig(enabled=True, timeout_seconds=300.0, block_admission=True),
            ),
            id="v1beta1-enable-flags",
        ),
        pytest.param(
            {
                "apiVersion": "config.kueue.x-k8s.io/v1beta1",
                "kind": "Configuration",
                "fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare"]},
                "waitForPodsReady": {"timeout": "1m"},
            },
            ControllerConfig(
                fair_sharing=FairSharingConfig(
                    enabled=False, preemption_strategies=(FairPreemptionStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,)
                ),
                wait_for_pods_ready=WaitForPodsReadyConfig(enabled=False, timeout_seconds=60.0, block_admission=False),
            ),
            id="v1beta1-sections-off-without-enable",
        ),
        pytest.param(
            {
                "apiVersion": "sluicegate.io/v1beta2",
                "kind": "Configuration",
                "fairSharing": {"enable": False},
                "waitForPodsReady": {"timeout": "2m"},
            },
            ControllerConfig(
                fair_sharing=FairSharingConfig(enabled=False),
                wait_for_pods_ready=WaitForPodsReadyConfig(enabled=True, timeout_seconds=120.0),
            ),
            id="own-api-version-enable-defaults-true",
        ),
    ],
)
def test_configuration_dialects(doc: dict[str, object], expected: ControllerConfig) -> None:
    assert decode(doc) == expected


KUEUE_DEFAULT_CONFIG = """
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
health:
  healthProbeBindAddress: :8081
metrics:
  bindAddress: :8443
webhook:
  port: 9443
leaderElection:
  leaderElect: true
  resourceName: c1f6bfd2.kueue.x-k8s.io
controller:
  groupKindConcurrency:
    Job.batch: 5
    Workload.kueue.x-k8s.io: 5
clientConnection:
  qps: 50
  burst: 100
managedJobsNamespaceSelector:
  matchExpressions:
  - key: kubernetes.io/metadata.name
    operator: NotIn
    values: [kube-system, kueue-system]
integrations:
  frameworks:
  - batch/job
  - kubeflow.org/mpijob
waitForPodsReady:
  timeout: 5m
  recoveryTimeout: 3m
  requeuingStrategy:
    timestamp: Eviction
    backoffBaseSeconds: 60
    backoffMaxSeconds: 3600
"""


def test_kueue_style_configuration_file_loads_with_its_kubernetes_sections_ignored() -> None:
    (doc,) = parse_text(KUEUE_DEFAULT_CONFIG, "controller_manager_config.yaml")
    assert decode(doc) == ControllerConfig(
        wait_for_pods_ready=WaitForPodsReadyConfig(enabled=True, timeout_seconds=300.0, recovery_timeout_seconds=180.0)
    )


TUTORIAL = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: on-demand
spec:
  nodeLabels:
    instance-type: on-demand
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: spot
spec:
  nodeLabels:
    instance-type: spot
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata:
  name: org
spec:
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: on-demand
      resources:
      - name: cpu
        nominalQuota: 8
      - name: memory
        nominalQuota: 32Gi
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata:
  name: research
spec:
  parentName: org
  fairSharing:
    weight: 2
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: team-a
spec:
  cohortName: research
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: on-demand
      resources:
      - name: cpu
        nominalQuota: 9
        borrowingLimit: 6
      - name: memory
        nominalQuota: 36Gi
        lendingLimit: 12Gi
    - name: spot
      resources:
      - name: cpu
        nominalQuota: 18
      - name: memory
        nominalQuota: 72Gi
  preemption:
    reclaimWithinCohort: Any
    withinClusterQueue: LowerPriority
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: team-b
spec:
  cohortName: research
  namespaceSelector:
    matchLabels:
      kubernetes.io/metadata.name: team-b
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: on-demand
      resources:
      - name: cpu
        nominalQuota: 9
        lendingLimit: 3
      - name: memory
        nominalQuota: 36Gi
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  namespace: team-a
  name: lq-a
spec:
  clusterQueue: team-a
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  namespace: team-b
  name: lq-b
spec:
  clusterQueue: team-b
"""


def test_tutorial_style_multi_document_yaml() -> None:
    objects = decode_all(parse_text(TUTORIAL, "tutorial.yaml"))
    summary = [
        (type(o).__name__, o.name, getattr(o, "parent", None) or getattr(o, "cohort", None))
        for o in objects
    ]
    assert summary == [
        ("ResourceFlavor", "on-demand", None),
        ("ResourceFlavor", "spot", None),
        ("CohortSpec", "org", None),
        ("CohortSpec", "research", "org"),
        ("ClusterQueueSpec", "team-a", "research"),
        ("ClusterQueueSpec", "team-b", "research"),
        ("LocalQueueSpec", "lq-a", None),
        ("LocalQueueSpec", "lq-b", None),
    ]
    team_a = objects[4]
    assert isinstance(team_a, ClusterQueueSpec)
    assert team_a.quotas() == {
        (FlavorName("on-demand"), "cpu"): ResourceQuota(nominal=9000, borrowing_limit=6000),
        (FlavorName("on-demand"), "memory"): ResourceQuota(nominal=36 * GI, lending_limit=12 * GI),
        (FlavorName("spot"), "cpu"): ResourceQuota(nominal=18_000),
        (FlavorName("spot"), "memory"): ResourceQuota(nominal=72 * GI),
    }
    assert team_a.namespace_selector == LabelSelector()
    team_b = objects[5]
    assert isinstance(team_b, ClusterQueueSpec)
    assert team_b.namespace_selector == LabelSelector(match_labels={"kubernetes.io/metadata.name": "team-b"})
    research = objects[3]
    assert isinstance(research, CohortSpec)
    assert research.fair_sharing_weight == 2
