"""decode(encode(x)) == x for every kind, over many generated valid objects.

The generator draws valid objects from a seeded random source (the same
seed gives the same objects), covering optional fields, every enum value,
v1beta2 defaults and workload status.  Each object also survives a trip
through YAML and JSON text, as it would through a file or the store.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import replace
from fractions import Fraction
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped, unused-ignore]
from hypothesis import given, settings
from hypothesis import strategies as st

from sluicegate.manifest import Decoded, decode, encode, object_ref, parse_text
from sluicegate.manifest.decode_workload import effective_requests
from sluicegate.manifest.encode import encode_json
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
    QueueingStrategy,
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
from tests import builders

from . import samples

SEEDS = range(60)
GI = 2**30
RESOURCES = ("cpu", "memory", "example.com/gpu", "ephemeral-storage", "pods", "example.com/fpga")
FLAVORS = ("on-demand", "spot", "a100", "h100", "arm", "x86.large", "reserved")
LABEL_KEYS = ("team", "tier", "example.com/zone", "kubernetes.io/arch")
LABEL_VALUES = ("a", "b", "on", "yes", "1", "prod-2", "")


def _amount(rng: random.Random, resource: str) -> int:
    if resource == "cpu":
        return rng.choice([0, 250, 500, 1000, 1500, rng.randrange(0, 200_000)])
    if resource in ("memory", "ephemeral-storage"):
        return rng.choice([0, rng.randrange(1, 64) * GI, rng.randrange(1, 4096) * 2**20, rng.randrange(0, 10**12)])
    return rng.randrange(0, 100)


def _labels(rng: random.Random, n: int | None = None) -> dict[str, str]:
    count = rng.randrange(0, 3) if n is None else n
    return {k: rng.choice(LABEL_VALUES) for k in rng.sample(LABEL_KEYS, count)}


def _groups(rng: random.Random, *, limits: bool, lending_within_nominal: bool) -> tuple[ResourceGroup, ...]:
    resources = list(RESOURCES)
    flavors = list(FLAVORS)
    rng.shuffle(resources)
    rng.shuffle(flavors)
    groups = []
    for _ in range(rng.randrange(0, 3)):
        covered = tuple(resources.pop() for _ in range(rng.randrange(1, 3)))
        fqs = []
        for _ in range(rng.randrange(1, 3)):
            quotas = {}
            for res in covered:
                nominal = _amount(rng, res)
                borrowing = _amount(rng, res) if limits and rng.random() < 0.5 else None
                lending = None
                if limits and rng.random() < 0.5:
                    lending = rng.randrange(0, nominal + 1) if lending_within_nominal else _amount(rng, res)
                quotas[res] = ResourceQuota(nominal=nominal, borrowing_limit=borrowing, lending_limit=lending)
            fqs.append(FlavorQuotas(name=FlavorName(flavors.pop()), resources=quotas))
        groups.append(ResourceGroup(covered_resources=covered, flavors=tuple(fqs)))
    return tuple(groups)


def _weight(rng: random.Random) -> Fraction:
    return rng.choice([Fraction(1), Fraction(0), Fraction(rng.randrange(1, 5000), 1000), Fraction(3, 8)])


def _selector(rng: random.Random) -> LabelSelector | None:
    choice = rng.randrange(3)
    if choice == 0:
        return None
    if choice == 1:
        return LabelSelector()
    reqs = []
    for key in rng.sample(LABEL_KEYS, rng.randrange(0, 3)):
        op = rng.choice(["In", "NotIn", "Exists", "DoesNotExist"])
        values = tuple(rng.sample(LABEL_VALUES, rng.randrange(1, 3))) if op in ("In", "NotIn") else ()
        reqs.append(SelectorRequirement(key=key, operator=op, values=values))
    return LabelSelector(match_labels=_labels(rng), match_expressions=tuple(reqs))


def cluster_queue(rng: random.Random) -> ClusterQueueSpec:
    cohort = rng.choice([None, "org", "research.ml"])
    reclaim = rng.choice(list(ReclaimPolicy))
    borrow = BorrowWithinCohortPolicy.NEVER if reclaim is ReclaimPolicy.NEVER else rng.choice(list(BorrowWithinCohortPolicy))
    when_borrow = rng.choice(list(FlavorFungibilityPolicy))
    when_preempt = rng.choice(list(FlavorFungibilityPolicy))
    preference = None
    if when_borrow is when_preempt is FlavorFungibilityPolicy.TRY_NEXT_FLAVOR and rng.random() < 0.7:
        preference = rng.choice(list(FungibilityPreference))
    return ClusterQueueSpec(
        name=ClusterQueueName(rng.choice(["team-a", "cq.batch", "x"])),
        resource_groups=_groups(rng, limits=cohort is not None, lending_within_nominal=True),
        cohort=CohortName(cohort) if cohort else None,
        namespace_selector=_selector(rng),
        queueing_strategy=rng.choice(list(QueueingStrategy)),
        preemption=Preemption(
            within_cluster_queue=rng.choice(list(PreemptionPolicy)),
            reclaim_within_cohort=reclaim,
            borrow_within_cohort=borrow,
            max_priority_threshold=rng.choice([None, 0, -5, 1000]),
        ),
        flavor_fungibility=FlavorFungibility(when_can_borrow=when_borrow, when_can_preempt=when_preempt, preference=preference),
        fair_sharing_weight=_weight(rng),
        stop_policy=rng.choice(list(StopPolicy)),
    )


def cohort(rng: random.Random) -> CohortSpec:
    parent = rng.choice([None, "org"])
    return CohortSpec(
        name=CohortName(rng.choice(["research", "ml.team"])),
        parent=CohortName(parent) if parent else None,
        resource_groups=_groups(rng, limits=parent is not None, lending_within_nominal=False),
        fair_sharing_weight=_weight(rng),
    )


def _container(rng: random.Random, name: str) -> Container:
    limits = {res: _amount(rng, res) for res in rng.sample(["cpu", "memory", "example.com/gpu"], rng.randrange(0, 3))}
    requests = {}
    for res in ["cpu", "memory", "ephemeral-storage", "hugepages-2Mi"]:
        if rng.random() < 0.5:
            requests[res] = _amount(rng, res) if res not in limits else rng.randrange(0, limits[res] + 1)
    for res, lim in limits.items():
        requests.setdefault(res, lim)  # what decoding does for a limit without a request
    return Container(
        name=name,
        command=tuple(rng.sample(["python", "train.py", "sleep", "10", "--flag=a b"], rng.randrange(0, 3))),
        args=tuple(rng.sample(["--epochs", "3", "", "yes", "1e3"], rng.randrange(0, 3))),
        env=tuple((f"VAR_{i}", rng.choice(["", "x", "true", "a=b"])) for i in range(rng.randrange(0, 3))),
        working_dir=rng.choice(["", "/srv/job", "relative/dir"]),
        requests=requests,
        limits=limits,
    )


def _pod_set(rng: random.Random, name: str, *, partial: bool) -> PodSet:
    init = tuple(_container(rng, f"init-{i}") for i in range(rng.randrange(0, 2)))
    containers = tuple(_container(rng, f"c{i}") for i in range(rng.randrange(1, 3)))
    count = rng.randrange(1, 6)  # a pod set has at least one pod
    return PodSet(
        name=name,
        count=count,
        min_count=rng.randrange(1, count + 1) if partial else None,
        requests=effective_requests(containers, init),
        node_selector=_labels(rng),
        containers=containers,
        init_containers=init,
        restart_policy=rng.choice(["Never", "OnFailure"]),
        termination_grace_period_seconds=rng.choice([30, 0, 5, 3600]),
        priority_class_name=rng.choice(["", "batch-high", "system-node-critical"]),
    )


def _time(rng: random.Random) -> float:
    return rng.choice([1714564800.0, rng.uniform(1.6e9, 1.8e9), 1714564800.25])


def _status(rng: random.Random, pod_sets: tuple[PodSet, ...]) -> WorkloadStatus:
    if rng.random() < 0.3:
        return WorkloadStatus()
    conditions = tuple(
        Condition(
            type=t,
            status=rng.choice(["True", "False", "Unknown"]),
            reason=rng.choice(["Pending", "QuotaReserved", "Preempted", "InCohortReclamation", ""]),
            message=rng.choice(["", "couldn't assign flavors to pod set main: insufficient quota"]),
            last_transition_time=_time(rng),
        )
        for t in rng.sample(["QuotaReserved", "Admitted", "Evicted", "Finished", "example.com/Custom"], rng.randrange(0, 4))
    )
    admission = None
    if rng.random() < 0.6:
        psas = []
        for ps in pod_sets:
            count = rng.randrange(0, ps.count + 1)
            psas.append(
                PodSetAssignment(
                    name=ps.name,
                    flavors={res: FlavorName(rng.choice(FLAVORS)) for res in ps.requests},
                    resource_usage={res: qty * count for res, qty in ps.requests.items()},
                    count=count,
                )
            )
        admission = Admission(cluster_queue=ClusterQueueName("team-a"), pod_set_assignments=tuple(psas))
    extra: dict[str, object] = {}
    pods: tuple[PodRecord, ...] = ()
    last_pods: tuple[PodRecord, ...] = ()
    terminate: tuple[str, str] | None = None
    if rng.random() < 0.4:
        # sluicegate's own status (stored under status.extra) plus other extra keys kept as they are.
        extra = {"notes": [{"node": "n1", "phase": "Running", "exitCode": None, "restarts": 0, "cpu": 0.5}], "ok": True}
        pods = (PodRecord(uid="u1", name="w-main-0", pod_set="main", index=0, node="n1", requests={"cpu": 500},
                          phase="Running", ready=True, restarts=2, started_at=_time(rng), qos_class="Burstable"),)
        last_pods = tuple(rng.choice([(), (PodRecord(uid="u0", name="w-main-0", pod_set="main", index=0, node="n2",
                                                     phase="Failed", reason="Stopping", exit_code=137, exited=True,
                                                     replaced=True, finished_at=_time(rng)),)]))
        terminate = rng.choice([None, ("Failed", "DeadlineExceeded")])
    return WorkloadStatus(
        pods=pods,
        last_pods=last_pods,
        deleting=bool(pods) and rng.random() < 0.5,
        terminate=terminate,
        conditions=conditions,
        admission=admission,
        requeue_state=rng.choice([None, RequeueState(), RequeueState(count=3, requeue_at=_time(rng))]),
        reclaimable_pods={ps.name: rng.randrange(0, ps.count + 1) for ps in pod_sets if rng.random() < 0.5},
        accumulated_past_execution_time_seconds=rng.choice([0, 42]),
        extra=extra,
    )


def workload(rng: random.Random) -> Workload:
    names = rng.sample(["main", "driver", "workers", "ps"], rng.randrange(1, 4))
    partial_at = rng.choice([None, *range(len(names))])
    pod_sets = tuple(_pod_set(rng, n, partial=i == partial_at) for i, n in enumerate(names))
    return Workload(
        namespace=rng.choice(["default", "team-a"]),
        name=rng.choice(["train", "job.v2-1"]),
        uid=rng.choice(["", "a3f1c2d4-0000-4000-8000-000000000001"]),
        creation_timestamp=rng.choice([0.0, _time(rng)]),
        queue_name=rng.choice(["user-queue", "lq.a"]),
        pod_sets=pod_sets,
        priority=rng.choice([0, -10, 1000, 2**31 - 1]),
        priority_class=rng.choice([None, ("WorkloadPriorityClass", "high"), ("PriorityClass", "system-node-critical")]),
        active=rng.random() < 0.8,
        maximum_execution_time_seconds=rng.choice([None, 1, 3600]),
        labels=_labels(rng),
        annotations=rng.choice([{}, {"example.com/note": "free text: anything\nmultiline"}]),
        generation=rng.choice([1, 2, 17]),
        status=_status(rng, pod_sets),
    )


def configuration(rng: random.Random) -> ControllerConfig:
    sequences = [
        (FairPreemptionStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,),
        (FairPreemptionStrategy.LESS_THAN_INITIAL_SHARE,),
        (FairPreemptionStrategy.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, FairPreemptionStrategy.LESS_THAN_INITIAL_SHARE),
    ]
    return ControllerConfig(
        fair_sharing=FairSharingConfig(enabled=rng.random() < 0.5, preemption_strategies=rng.choice(sequences)),
        wait_for_pods_ready=rng.choice(
            [
                WaitForPodsReadyConfig(),
                WaitForPodsReadyConfig(
                    enabled=rng.random() < 0.5,
                    timeout_seconds=rng.choice([300.0, 0.5, 5400.0, 61.25]),
                    recovery_timeout_seconds=rng.choice([None, 0.0, 90.0]),
                    block_admission=rng.random() < 0.5,
                    requeuing_timestamp=rng.choice(list(RequeuingTimestamp)),
                    backoff_base_seconds=rng.choice([60.0, 1.0, 0.0]),
                    backoff_max_seconds=rng.choice([3600.0, 7200.0, 1.5]),
                    backoff_limit_count=rng.choice([None, 0, 10]),
                ),
            ]
        ),
        label_keys_to_copy=tuple(rng.sample(LABEL_KEYS, rng.randrange(0, 3))),
    )


def small_objects(rng: random.Random) -> list[Decoded]:
    return [
        ResourceFlavor(name=FlavorName(rng.choice(FLAVORS)), node_labels=_labels(rng)),
        LocalQueueSpec(
            namespace=rng.choice(["default", "team-a"]),
            name="user-queue",
            cluster_queue=ClusterQueueName("team-a"),
            stop_policy=rng.choice(list(StopPolicy)),
        ),
        WorkloadPriorityClass(name="high", value=rng.randrange(-(2**31), 2**31), description=rng.choice(["", "urgent"])),
        PriorityClass(
            name=rng.choice(["batch-high", "low"]),
            value=rng.randrange(-(10**9), 10**9 + 1),
            global_default=rng.random() < 0.5,
            description=rng.choice(["", "for batch"]),
            preemption_policy=rng.choice(["PreemptLowerPriority", "Never"]),
        ),
        PriorityClass(name="system-cluster-critical", value=2_000_000_000),
        Namespace(name=rng.choice(["team-a", "default"]), labels=_labels(rng)),
    ]


GENERATORS: dict[str, Callable[[random.Random], list[Decoded]]] = {
    "ClusterQueue": lambda rng: [cluster_queue(rng)],
    "Cohort": lambda rng: [cohort(rng)],
    "Workload": lambda rng: [workload(rng)],
    "Configuration": lambda rng: [configuration(rng)],
    "other-kinds": small_objects,
}


@pytest.mark.parametrize("seed", SEEDS, ids=lambda s: f"seed-{s}")
@pytest.mark.parametrize("kind", list(GENERATORS))
def test_decode_of_encode_is_identity(kind: str, seed: int) -> None:
    rng = random.Random(f"{kind}-{seed}")
    for obj in GENERATORS[kind](rng):
        doc = encode(obj)
        assert decode(doc) == obj
        # ... and through the text forms a file or the store would hold.
        (from_yaml,) = parse_text(yaml.safe_dump(doc, sort_keys=False), "roundtrip.yaml")
        assert decode(from_yaml) == obj
        (from_json,) = parse_text(json.dumps(doc), "roundtrip.json", fmt="json")
        assert decode(from_json) == obj


@pytest.mark.parametrize("seed", SEEDS, ids=lambda s: f"seed-{s}")
@pytest.mark.parametrize("kind", list(GENERATORS))
def test_encode_json_is_the_encoded_document_and_places_the_resource_version_in_metadata(kind: str, seed: int) -> None:
    rng = random.Random(f"json-{kind}-{seed}")
    for obj in GENERATORS[kind](rng):
        enc = encode_json(obj)
        doc = encode(obj)
        # The stored body: encode's document, key order included, compact.
        assert enc.body == json.dumps(doc, separators=(",", ":")).encode()
        assert decode(parse_text(enc.body.decode(), "store.json", fmt="json")[0]) == obj
        # What readers get: the same text, resourceVersion last in metadata.
        if "metadata" in doc:
            doc["metadata"]["resourceVersion"] = "4711"
        assert enc.with_resource_version(4711) == json.dumps(doc, separators=(",", ":")).encode()


def test_encode_json_finds_the_top_level_metadata_whatever_the_strings_hold() -> None:
    # Text that looks like a metadata mapping inside labels/annotations must not be taken for it.
    wl = decode(samples.workload())
    wl = replace(wl, annotations={"note": '"metadata":{"name":"x"}}', "metadata": "{"}, labels={"metadata": "x"})
    doc = json.loads(encode_json(wl).with_resource_version(3))
    assert doc["metadata"]["resourceVersion"] == "3"
    assert doc["metadata"]["annotations"] == {"note": '"metadata":{"name":"x"}}', "metadata": "{"}
    assert doc["metadata"]["labels"] == {"metadata": "x"}


def test_encode_json_writes_condition_texts_as_json_dumps_does() -> None:
    """Conditions' JSON is written without the encoder (a status write makes new ones): quotes,
    backslashes, control characters and non-ASCII text come out escaped exactly as json.dumps does."""
    wl = decode(samples.workload())
    assert isinstance(wl, Workload)
    texts = ['say "no"', "back\\slash", "line\nbreak\ttab\x00nul\x1f", "é ☃ 𝄞", "", "</script>"]
    conditions = tuple(Condition(type=f"T{i}", status="True" if i % 2 else "False", reason=t, message=t[::-1],
                                 last_transition_time=1714564801.0 + i / 8) for i, t in enumerate(texts))
    obj = replace(wl, status=WorkloadStatus(conditions=conditions))
    assert encode_json(obj).body == json.dumps(encode(obj), separators=(",", ":")).encode()


@pytest.mark.parametrize(
    "build",
    [
        samples.resource_flavor,
        samples.cluster_queue,
        samples.cohort,
        samples.local_queue,
        samples.workload_priority_class,
        samples.priority_class,
        samples.namespace,
        samples.workload,
        samples.workload_with_status,
        samples.configuration,
    ],
    ids=lambda f: f.__name__,
)
def test_encode_of_decoded_manifest_decodes_to_the_same_object(build) -> None:  # type: ignore[no-untyped-def]
    obj = decode(build())
    assert decode(encode(obj)) == obj


def test_encoded_workload_shape() -> None:
    wl = decode(samples.workload_with_status())
    assert encode(wl) == {
        "apiVersion": "sluicegate.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "train", "namespace": "team-a", "generation": 1},
        "spec": {
            "queueName": "user-queue",
            "podSets": [
                {
                    "name": "workers",
                    "count": 4,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "main",
                                    "command": ["python", "train.py"],
                                    "args": ["--epochs", "3"],
                                    "env": [{"name": "MODE", "value": "fast"}],
                                    "workingDir": "/srv/job",
                                    "resources": {
                                        "requests": {"cpu": "1", "memory": "1Gi"},
                                        "limits": {"cpu": "2", "memory": "2Gi"},
                                    },
                                }
                            ],
                            "initContainers": [
                                {"name": "fetch", "command": ["fetch-data"], "resources": {"requests": {"cpu": "3"}}}
                            ],
                            "restartPolicy": "Never",
                            "terminationGracePeriodSeconds": 30,
                        }
                    },
                }
            ],
            "priority": 0,
            "active": True,
        },
        "status": {
            "conditions": [
                {
                    "type": "QuotaReserved",
                    "status": "True",
                    "reason": "QuotaReserved",
                    "message": "Quota reserved in ClusterQueue team-a",
                    "lastTransitionTime": "2024-05-01T12:00:00Z",
                }
            ],
            "admission": {
                "clusterQueue": "team-a",
                "podSetAssignments": [
                    {
                        "name": "workers",
                        "flavors": {"cpu": "on-demand", "memory": "on-demand"},
                        "resourceUsage": {"cpu": "12", "memory": "4Gi"},
                        "count": 4,
                    }
                ],
            },
            "requeueState": {"count": 1, "requeueAt": "2024-05-01T12:05:00Z"},
            "reclaimablePods": [{"name": "workers", "count": 1}],
            "accumulatedPastExecutionTimeSeconds": 30,
        },
    }


def test_encoded_cluster_queue_shape() -> None:
    cq = decode(samples.cluster_queue())
    doc = encode(cq)
    assert doc["apiVersion"] == "sluicegate.io/v1beta2"
    assert doc["spec"] == {
        "cohortName": "org",
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [
                    {
                        "name": "on-demand",
                        "resources": [
                            {"name": "cpu", "nominalQuota": "10", "borrowingLimit": "5", "lendingLimit": "2"},
                            {"name": "memory", "nominalQuota": "64Gi"},
                        ],
                    },
                    {
                        "name": "spot",
                        "resources": [{"name": "cpu", "nominalQuota": "20"}, {"name": "memory", "nominalQuota": "128Gi"}],
                    },
                ],
            },
            {
                "coveredResources": ["example.com/gpu"],
                "flavors": [{"name": "a100", "resources": [{"name": "example.com/gpu", "nominalQuota": "4"}]}],
            },
        ],
        "namespaceSelector": {"matchLabels": {"team": "a"}},
        "queueingStrategy": "BestEffortFIFO",
        "preemption": {"withinClusterQueue": "Never", "reclaimWithinCohort": "Never", "borrowWithinCohort": {"policy": "Never"}},
        "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
        "stopPolicy": "None",
    }


def test_encoded_configuration_uses_explicit_enable_flags() -> None:
    cfg = ControllerConfig(
        fair_sharing=FairSharingConfig(enabled=False, preemption_strategies=(FairPreemptionStrategy.LESS_THAN_INITIAL_SHARE,)),
        wait_for_pods_ready=WaitForPodsReadyConfig(enabled=True, timeout_seconds=5400.0, recovery_timeout_seconds=30.0),
    )
    assert encode(cfg) == {
        "apiVersion": "sluicegate.io/v1beta2",
        "kind": "Configuration",
        "fairSharing": {"enable": False, "preemptionStrategies": ["LessThanInitialShare"]},
        "waitForPodsReady": {
            "enable": True,
            "timeout": "1h30m",
            "blockAdmission": False,
            "recoveryTimeout": "30s",
            "requeuingStrategy": {"timestamp": "Eviction", "backoffBaseSeconds": 60, "backoffMaxSeconds": 3600},
        },
    }
    assert encode(ControllerConfig()) == {"apiVersion": "sluicegate.io/v1beta2", "kind": "Configuration"}


def test_fair_sharing_weight_without_a_finite_decimal_is_written_at_nano_precision() -> None:
    cohort_spec = CohortSpec(name=CohortName("c"), fair_sharing_weight=Fraction(1, 3))
    doc = encode(cohort_spec)
    assert doc["spec"] == {"fairSharing": {"weight": "0.333333333"}}
    decoded = decode(doc)
    assert isinstance(decoded, CohortSpec)
    assert decoded.fair_sharing_weight == Fraction(333333333, 10**9)


@pytest.mark.parametrize(
    ("obj", "ref"),
    [
        pytest.param(builders.resource_flavor("spot"), ("ResourceFlavor", "", "spot"), id="flavor"),
        pytest.param(builders.cohort("org"), ("Cohort", "", "org"), id="cohort"),
        pytest.param(builders.cluster_queue("cq"), ("ClusterQueue", "", "cq"), id="cluster-queue"),
        pytest.param(builders.local_queue("lq", "cq", ns="ns"), ("LocalQueue", "ns", "lq"), id="local-queue"),
        pytest.param(WorkloadPriorityClass(name="high", value=1), ("WorkloadPriorityClass", "", "high"), id="wpc"),
        pytest.param(PriorityClass(name="pc", value=1), ("PriorityClass", "", "pc"), id="priority-class"),
        pytest.param(Namespace(name="ns"), ("Namespace", "", "ns"), id="namespace"),
        pytest.param(
            builders.workload("w", ns="ns", queue="q"),
            ("Workload", "ns", "w"),
            id="workload",
        ),
        pytest.param(ControllerConfig(), ("Configuration", "", ""), id="configuration"),
    ],
)
def test_object_ref(obj: Decoded, ref: tuple[str, str, str]) -> None:
    assert object_ref(obj) == ref


def test_encode_json_of_a_workload_written_again_follows_every_change() -> None:
    """A workload's metadata and spec JSON is kept between writes of its status; any other change shows."""
    wl = decode(samples.workload())
    assert isinstance(wl, Workload)

    def same(obj: Workload) -> None:
        assert encode_json(obj).body == json.dumps(encode(obj), separators=(",", ":")).encode()
        assert encode_json(obj).with_resource_version(9) == json.dumps(
            {**encode(obj), "metadata": {**encode(obj)["metadata"], "resourceVersion": "9"}},
            separators=(",", ":")).encode()

    same(wl)
    cond = Condition("QuotaReserved", "True", "QuotaReserved", "ok", 1_700_000_000.0)
    admitted = replace(wl, status=replace(wl.status, conditions=(cond,)))
    same(admitted)
    same(replace(admitted, status=replace(admitted.status, conditions=())))
    same(replace(admitted, labels={**wl.labels, "team": "b"}))
    same(replace(admitted, annotations={"a": "1"}))
    same(replace(admitted, active=not admitted.active))
    same(replace(admitted, priority=admitted.priority + 1))
    same(replace(admitted, generation=admitted.generation + 1))
    same(replace(admitted, pod_sets=tuple(replace(ps, count=ps.count + 1) for ps in admitted.pod_sets)))
    same(replace(admitted, uid="other"))
    same(admitted)


def test_encode_json_of_a_workload_status_follows_each_pod_and_condition_change() -> None:
    """A write after one pod's report is the whole document as ``encode`` gives it, though the
    status's unchanged conditions, admission and pods are spliced from JSON kept from earlier writes."""
    wl = decode(samples.workload())
    assert isinstance(wl, Workload)

    def same(obj: Workload) -> None:
        assert encode_json(obj).body == json.dumps(encode(obj), separators=(",", ":")).encode()

    pods = tuple(PodRecord(uid=f"u{i}", name=f"p{i}", pod_set="main", index=i, node="n1", requests={"cpu": 1000})
                 for i in range(3))
    cond = Condition("QuotaReserved", "True", "QuotaReserved", "ok", 1_700_000_000.0)
    running = replace(wl, status=replace(wl.status, conditions=(cond,), pods=pods))
    same(running)
    for i in range(3):
        pods = tuple(replace(p, phase="Running", started_at=1_700_000_001.0 + i) if p.index == i else p for p in pods)
        running = replace(running, status=replace(running.status, pods=pods))
        same(running)
    done = Condition("Finished", "True", "Succeeded", "all pods succeeded", 1_700_000_009.0)
    finished = replace(running, status=replace(running.status, conditions=(cond, done), pods=(), last_pods=pods,
                                                deleting=True, terminate=("r", "m"),
                                                accumulated_past_execution_time_seconds=7))
    same(finished)
    same(replace(finished, status=replace(finished.status, extra={"note": "x"})))
    same(replace(finished, status=replace(finished.status, conditions=(replace(cond, message="changed"), done))))


def _random_pod(rng: random.Random) -> PodRecord:
    text = ["", "x", "Stopping", "naïve \"quoted\"\n", "\x00\u2028", "a" * 40]
    return PodRecord(
        uid=rng.choice(["u1", "é-uid", "u\"2"]), name=rng.choice(["w-main-0", "w\\0"]), pod_set="main",
        index=rng.choice([0, 7, 10**12]), node=rng.choice(["n1", "nœud"]),
        requests=rng.choice([{}, {"cpu": 500}, {"cpu": 1000, "memory": 2**40, "nvidia.com/gpu": 1}]),
        phase=rng.choice(["Pending", "Running", "Succeeded", "Failed"]), reason=rng.choice(text),
        message=rng.choice(text), exit_code=rng.choice([None, 0, 137, -9]), ready=rng.random() < 0.5,
        restarts=rng.choice([0, 3]),
        started_at=rng.choice([None, 1_700_000_000.0, 1_700_000_000.123456789, 0.1 + 0.2, 1e21, 5, float("inf")]),
        finished_at=rng.choice([None, 1_700_000_009.5, 7, float("nan")]), exited=rng.random() < 0.5,
        replaced=rng.random() < 0.5, qos_class=rng.choice(["", "Burstable", "Guaranteed"]),
    )


@pytest.mark.parametrize("seed", SEEDS, ids=lambda s: f"seed-{s}")
def test_encode_json_writes_pods_and_every_status_shape_as_json_dumps_does(seed: int) -> None:
    """The status is spliced from pieces (pods, conditions, admission, requeue state, reclaimable pods,
    extra entries): the bytes are json.dumps's of ``encode``, whatever the values hold."""
    from sluicegate.model.workloads import RequeueState

    rng = random.Random(f"status-{seed}")
    wl = workload(random.Random(f"json-Workload-{seed}"))
    for _ in range(10):
        pods = tuple(_random_pod(rng) for _ in range(rng.randrange(0, 4)))
        status = replace(
            wl.status,
            pods=pods,
            last_pods=tuple(_random_pod(rng) for _ in range(rng.randrange(0, 2))),
            requeue_state=rng.choice([None, RequeueState(count=2), RequeueState(count=1, requeue_at=1_700_000_100.0)]),
            reclaimable_pods=rng.choice([{}, {"main": 2}, {"main": 1, "workers": 3}]),
            extra=rng.choice([{}, {"note": "x", "n": [1, 2.5, None]}, {"pods": "theirs"}, {"deleting": False, "z": 1},
                              {"terminate": {"reason": "r"}}]),
            deleting=rng.random() < 0.3,
            terminate=rng.choice([None, ("Failed", "DeadlineExceeded")]),
        )
        obj = replace(wl, status=status)
        assert encode_json(obj).body == json.dumps(encode(obj), separators=(",", ":")).encode()


def test_encode_json_keeps_each_workloads_pods_json_between_writes_and_forgets_the_oldest(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A write after one pod's report encodes that pod only (the others are the same records as at the
    workload's last write); workloads whose pods were dropped from memory, or another workload under the same
    name, are encoded in full: always json.dumps's bytes."""
    import importlib

    encode_module = importlib.import_module("sluicegate.manifest.encode")  # the package's ``encode`` is the function
    monkeypatch.setattr(encode_module, "_POD_LISTS_SIZE", 2)
    monkeypatch.setattr(encode_module, "_pod_lists", type(encode_module._pod_lists)())
    encoded: list[PodRecord] = []
    real = encode_module._pod_json

    def counting(p: PodRecord, *was: Any) -> str:
        encoded.append(p)
        return real(p, *was)

    monkeypatch.setattr(encode_module, "_pod_json", counting)
    base = workload(random.Random("json-Workload-1"))
    lives = {}
    for w in range(3):
        pods = tuple(PodRecord(uid=f"u{w}-{i}", name=f"w{w}-{i}", pod_set="main", index=i, node="n1",
                               requests={"cpu": 1000}) for i in range(4))
        lives[w] = replace(base, name=f"wl-{w}", status=replace(base.status, pods=pods, extra={}))

    def write(w: int) -> None:
        obj = lives[w]
        assert encode_json(obj).body == json.dumps(encode(obj), separators=(",", ":")).encode()

    for w in range(2):
        write(w)
    for i in range(4):
        for w in range(2):
            pods = lives[w].status.pods
            new = replace(pods[i], phase="Running", started_at=1_700_000_000.0 + i)
            lives[w] = replace(lives[w], status=replace(lives[w].status, pods=pods[:i] + (new,) + pods[i + 1:]))
            encoded.clear()
            write(w)
            assert encoded == [new]  # only the pod that changed
    write(2)  # a third workload: the first one's pods are forgotten
    pods = lives[0].status.pods
    lives[0] = replace(lives[0], status=replace(lives[0].status, pods=(replace(pods[0], phase="Succeeded"),) + pods[1:]))
    write(0)
    other = tuple(replace(p, uid=p.uid + "-again") for p in lives[1].status.pods)
    lives[1] = replace(lives[1], uid="recreated", status=replace(lives[1].status, pods=other))
    encoded.clear()
    write(1)
    assert encoded == list(other)


def test_a_finished_workloads_write_drops_what_was_kept_for_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its head and pods' JSON are kept while it is written again and again; once finished (usually its
    last write) they go, and later writes of it keep nothing: the bytes stay json.dumps's throughout."""
    import importlib

    encode_module = importlib.import_module("sluicegate.manifest.encode")
    monkeypatch.setattr(encode_module, "_workload_heads", type(encode_module._workload_heads)())
    monkeypatch.setattr(encode_module, "_pod_lists", type(encode_module._pod_lists)())
    base = workload(random.Random("json-Workload-2"))
    pods = tuple(PodRecord(uid=f"u{i}", name=f"p{i}", pod_set="main", index=i, node="n1", requests={"cpu": 1000})
                 for i in range(2))
    cond = Condition("QuotaReserved", "True", "QuotaReserved", "ok", 1_700_000_000.0)
    running = replace(base, status=replace(base.status, conditions=(cond,), pods=pods, extra={}))
    ref = (running.namespace, running.name)

    def same(obj: Workload) -> None:
        assert encode_json(obj).body == json.dumps(encode(obj), separators=(",", ":")).encode()

    same(running)
    assert ref in encode_module._workload_heads and ref in encode_module._pod_lists
    done = Condition("Finished", "True", "Succeeded", "all pods succeeded", 1_700_000_009.0)
    finished = replace(running, status=replace(running.status, conditions=(cond, done),
                                               pods=tuple(replace(p, phase="Succeeded") for p in pods)))
    same(finished)
    assert ref not in encode_module._workload_heads and ref not in encode_module._pod_lists
    same(replace(finished, labels={"again": "yes"}))
    assert ref not in encode_module._workload_heads and ref not in encode_module._pod_lists
    # Not finished (a Finished condition that is False): kept as before.
    same(replace(running, status=replace(running.status, conditions=(cond, replace(done, status="False")))))
    assert ref in encode_module._workload_heads


_TEXTS = st.sampled_from(["", "x", "Stopping", 'naïve "quoted"\n', ',"phase":"Running"', "\x00\u2028"])


@st.composite
def _write_steps(draw: st.DrawFn) -> list[tuple[str, Any]]:
    """A workload's writes: conditions appended or replaced, one pod reported (its phase and what follows
    changed, or the fields before the phase too), the workload finished or not."""
    step = st.one_of(
        st.tuples(st.just("append"), st.tuples(st.sampled_from(["Admitted", "PodsReady", "Finished", "Evicted"]),
                                               st.sampled_from(["True", "False"]), _TEXTS,
                                               st.sampled_from([1_700_000_000.0, 1_700_000_000.25, 0.1 + 0.2]))),
        st.tuples(st.just("replace"), st.tuples(st.integers(0, 3), _TEXTS)),
        st.tuples(st.just("report"), st.tuples(st.integers(0, 3), st.sampled_from(["Running", "Succeeded", "Failed"]),
                                               _TEXTS, st.sampled_from([None, 1_700_000_001.5, 7]))),
        st.tuples(st.just("move"), st.tuples(st.integers(0, 3), st.sampled_from([
            {"cpu": 500}, {"cpu": 1, "phase": 2}, {'a,"phase":': 3}]), st.sampled_from(["n1", "n2"]))),
    )
    return draw(st.lists(step, min_size=1, max_size=12))


@settings(max_examples=150, deadline=None)
@given(steps=_write_steps(), name=st.sampled_from(["hyp-a", "hyp-b"]))
def test_encode_json_of_successive_writes_is_json_dumps_whatever_changed(steps: list[tuple[str, Any]],
                                                                         name: str) -> None:
    """Each write reuses the JSON of the conditions and the pods' leading fields kept from the last write of
    the workload (compared by identity); whatever the sequence of changes, the bytes are json.dumps's."""
    base = workload(random.Random("json-Workload-3"))
    pods = tuple(PodRecord(uid=f"u{i}", name=f"p{i}", pod_set="main", index=i, node="n1", requests={"cpu": 1000})
                 for i in range(2))
    first = Condition("QuotaReserved", "True", "QuotaReserved", "ok", 1_700_000_000.0)
    obj = replace(base, name=name, status=replace(base.status, conditions=(first,), pods=pods, extra={}))

    def same(o: Workload) -> None:
        assert encode_json(o).body == json.dumps(encode(o), separators=(",", ":")).encode()

    same(obj)
    for kind, args in steps:
        status = obj.status
        if kind == "append":
            type_, truth, message, at = args
            status = replace(status, conditions=status.conditions + (Condition(type_, truth, "R", message, at),))
        elif kind == "replace":
            i, message = args
            conditions = status.conditions
            if conditions:
                i %= len(conditions)
                conditions = conditions[:i] + (replace(conditions[i], message=message),) + conditions[i + 1:]
            status = replace(status, conditions=conditions)
        else:
            i = args[0] % len(status.pods)
            was = status.pods[i]
            if kind == "report":
                new = replace(was, phase=args[1], message=args[2], started_at=args[3])
            else:
                new = replace(was, requests=args[1], node=args[2])
            status = replace(status, pods=status.pods[:i] + (new,) + status.pods[i + 1:])
        obj = replace(obj, status=status)
        same(obj)
