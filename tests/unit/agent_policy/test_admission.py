"""Node admission and critical-pod preemption, against the kubelet's behaviour.

The preemption tables port the scenarios of the kubelet's own
pkg/kubelet/preemption/preemption_test.go (same pods, same requirements) and
add ties, tiers and failure cases.  Where the kubelet compares victims as a
set, we assert the exact order too: our tie-breaks are deterministic.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

import pytest

from sluicegate.agent.policy import (
    PREEMPTION_FAILED_REASON,
    SYSTEM_CLUSTER_CRITICAL,
    SYSTEM_CRITICAL_PRIORITY,
    SYSTEM_NODE_CRITICAL,
    AdmissionDecision,
    AdmissionFailure,
    InsufficientResource,
    InsufficientToPreempt,
    PodInfo,
    PredicateFailure,
    QOSClass,
    admit_pod,
    fit,
    handle_admission_failure,
    is_critical,
    is_preemptable,
    pods_to_preempt,
    preemption_tiers,
    requirement_distance,
)

from ._builders import (
    BEST_EFFORT,
    BURSTABLE,
    CLUSTER_CRITICAL,
    GUARANTEED,
    HIGH_PRIORITY_BURSTABLE,
    HIGH_REQUEST_BURSTABLE,
    HIGH_REQUEST_GUARANTEED,
    NODE_CRITICAL,
    Gi,
    Mi,
    pod,
)


def test_priority_constants() -> None:
    assert (SYSTEM_CLUSTER_CRITICAL, SYSTEM_NODE_CRITICAL, SYSTEM_CRITICAL_PRIORITY) == (
        2_000_000_000,
        2_000_001_000,
        2_000_000_000,
    )


@pytest.mark.parametrize(
    ("candidate", "expected"),
    [
        pytest.param(pod("plain"), False, id="priority-0"),
        pytest.param(pod("user-max", priority=1_000_000_000), False, id="highest-user-priority"),
        pytest.param(pod("just-below", priority=SYSTEM_CRITICAL_PRIORITY - 1), False, id="just-below-critical"),
        pytest.param(pod("negative", priority=-5), False, id="negative-priority"),
        pytest.param(CLUSTER_CRITICAL, True, id="system-cluster-critical"),
        pytest.param(NODE_CRITICAL, True, id="system-node-critical"),
        pytest.param(pod("static", static=True), True, id="static-pod-any-priority"),
        pytest.param(pod("mirror", mirror=True), True, id="mirror-pod-any-priority"),
    ],
)
def test_is_critical(candidate: PodInfo, expected: bool) -> None:
    assert is_critical(candidate) is expected


@pytest.mark.parametrize(
    ("preemptor", "victim", "expected"),
    [
        pytest.param(CLUSTER_CRITICAL, BURSTABLE, True, id="critical-over-non-critical"),
        pytest.param(
            CLUSTER_CRITICAL, pod("user-max", priority=1_000_000_000), True, id="critical-over-any-user-priority"
        ),
        pytest.param(NODE_CRITICAL, CLUSTER_CRITICAL, True, id="node-critical-over-cluster-critical"),
        pytest.param(CLUSTER_CRITICAL, NODE_CRITICAL, False, id="cluster-critical-not-over-node-critical"),
        pytest.param(CLUSTER_CRITICAL, CLUSTER_CRITICAL, False, id="equal-critical-priorities"),
        pytest.param(CLUSTER_CRITICAL, pod("static", static=True), True, id="critical-over-lower-priority-static-pod"),
        pytest.param(pod("static", static=True), CLUSTER_CRITICAL, False, id="static-priority-0-not-over-critical"),
        pytest.param(pod("high", priority=100), pod("low", priority=50), True, id="higher-user-priority"),
        pytest.param(pod("a", priority=100), pod("b", priority=100), False, id="equal-user-priority"),
        pytest.param(pod("low", priority=50), pod("high", priority=100), False, id="lower-user-priority"),
        pytest.param(BURSTABLE, CLUSTER_CRITICAL, False, id="non-critical-never-over-critical"),
    ],
)
def test_is_preemptable(preemptor: PodInfo, victim: PodInfo, expected: bool) -> None:
    assert is_preemptable(preemptor, victim) is expected


NODE = {"cpu": 4000, "memory": 8 * Gi, "pods": 110}


@pytest.mark.parametrize(
    ("allocatable", "admitted", "new", "expected"),
    [
        pytest.param(NODE, [], pod("p", cpu=4000, memory=8 * Gi), [], id="exactly-fills-empty-node"),
        pytest.param(
            NODE,
            [pod("a", cpu=3000, memory=2 * Gi)],
            pod("p", cpu=1000, memory=6 * Gi),
            [],
            id="exactly-fills-remaining",
        ),
        pytest.param(
            NODE,
            [pod("a", cpu=3800, memory=1 * Gi)],
            pod("p", cpu=500),
            [InsufficientResource(resource="cpu", requested=500, used=3800, capacity=4000)],
            id="short-of-cpu",
        ),
        pytest.param(
            NODE,
            [pod("a", cpu=3000, memory=7 * Gi), pod("b", cpu=500, memory=512 * Mi)],
            pod("p", cpu=1000, memory=1 * Gi),
            [
                InsufficientResource(resource="cpu", requested=1000, used=3500, capacity=4000),
                InsufficientResource(resource="memory", requested=1 * Gi, used=7 * Gi + 512 * Mi, capacity=8 * Gi),
            ],
            id="short-of-cpu-and-memory-in-kubelet-order",
        ),
        pytest.param(
            {"cpu": 4000, "pods": 2},
            [pod("a"), pod("b")],
            pod("p", qos=QOSClass.BESTEFFORT),
            [InsufficientResource(resource="pods", requested=1, used=2, capacity=2)],
            id="pod-count-reached",
        ),
        pytest.param(
            {"cpu": 1000, "pods": 1},
            [pod("a", cpu=1000)],
            pod("p", cpu=100),
            [
                InsufficientResource(resource="pods", requested=1, used=1, capacity=1),
                InsufficientResource(resource="cpu", requested=100, used=1000, capacity=1000),
            ],
            id="pod-count-reported-first",
        ),
        pytest.param(
            {"cpu": 1000, "memory": 1 * Gi},
            [pod("a", cpu=1000, memory=1 * Gi)],
            pod("p", qos=QOSClass.BESTEFFORT),
            [],
            id="requesting-nothing-fits-a-full-node",
        ),
        pytest.param(
            {"cpu": 1000},
            [pod(f"p{i}") for i in range(500)],
            pod("p", cpu=10),
            [],
            id="no-pod-count-when-node-does-not-advertise-pods",
        ),
        pytest.param(
            {"cpu": 1000, "memory": 1 * Gi},
            [],
            pod("p", cpu=100, extra={"example.com/gpu": 1}),
            [InsufficientResource(resource="example.com/gpu", requested=1, used=0, capacity=0)],
            id="resource-node-does-not-advertise",
        ),
        pytest.param(
            {"cpu": 1000, "memory": 1 * Gi, "ephemeral-storage": 10 * Gi, "example.com/gpu": 1, "example.com/fpga": 0},
            [pod("a", cpu=1000, memory=1 * Gi, extra={"ephemeral-storage": 10 * Gi, "example.com/gpu": 1})],
            pod("p", cpu=1, memory=1, extra={"ephemeral-storage": 1, "example.com/gpu": 1, "example.com/fpga": 1}),
            [
                InsufficientResource(resource="cpu", requested=1, used=1000, capacity=1000),
                InsufficientResource(resource="memory", requested=1, used=1 * Gi, capacity=1 * Gi),
                InsufficientResource(resource="ephemeral-storage", requested=1, used=10 * Gi, capacity=10 * Gi),
                InsufficientResource(resource="example.com/fpga", requested=1, used=0, capacity=0),
                InsufficientResource(resource="example.com/gpu", requested=1, used=1, capacity=1),
            ],
            id="fixed-resources-then-others-by-name",
        ),
    ],
)
def test_fit(
    allocatable: Mapping[str, int], admitted: list[PodInfo], new: PodInfo, expected: list[InsufficientResource]
) -> None:
    assert fit(allocatable=allocatable, admitted=admitted, pod=new) == expected


@pytest.mark.parametrize(
    ("failure", "reason", "message", "shortfall"),
    [
        pytest.param(
            InsufficientResource(resource="cpu", requested=500, used=3800, capacity=4000),
            "OutOfcpu",
            "Node didn't have enough resource: cpu, requested: 500, used: 3800, capacity: 4000",
            300,
            id="cpu",
        ),
        pytest.param(
            InsufficientResource(resource="memory", requested=1024, used=4096, capacity=4608),
            "OutOfmemory",
            "Node didn't have enough resource: memory, requested: 1024, used: 4096, capacity: 4608",
            512,
            id="memory",
        ),
        pytest.param(
            InsufficientResource(resource="pods", requested=1, used=110, capacity=110),
            "OutOfpods",
            "Node didn't have enough resource: pods, requested: 1, used: 110, capacity: 110",
            1,
            id="pods",
        ),
        pytest.param(
            InsufficientResource(resource="example.com/gpu", requested=2, used=0, capacity=1),
            "OutOfexample.com/gpu",
            "Node didn't have enough resource: example.com/gpu, requested: 2, used: 0, capacity: 1",
            1,
            id="extended-resource",
        ),
    ],
)
def test_insufficient_resource_reason_message_and_shortfall(
    failure: InsufficientResource, reason: str, message: str, shortfall: int
) -> None:
    assert (failure.reason, failure.message, failure.shortfall) == (reason, message, shortfall)


@pytest.mark.parametrize(
    ("requirements", "candidate", "expected"),
    [
        pytest.param({}, BURSTABLE, Fraction(0), id="no-requirements"),
        pytest.param(
            {"cpu": 100, "memory": 100 * Mi, "pods": 1}, BEST_EFFORT, Fraction(2), id="no-requests-some-requirements"
        ),
        pytest.param(
            {"cpu": 100, "memory": 100 * Mi, "pods": 1}, BURSTABLE, Fraction(0), id="requests-equal-requirements"
        ),
        pytest.param({"cpu": 50, "memory": 50 * Mi}, BURSTABLE, Fraction(0), id="requests-above-requirements"),
        pytest.param({"cpu": 200, "memory": 400 * Mi}, BURSTABLE, Fraction(1, 4) + Fraction(9, 16), id="partial-cover"),
        pytest.param({"example.com/gpu": 1}, BURSTABLE, Fraction(1), id="resource-the-pod-lacks"),
    ],
)
def test_requirement_distance(requirements: Mapping[str, int], candidate: PodInfo, expected: Fraction) -> None:
    assert requirement_distance(requirements, candidate) == expected


def test_preemption_tiers_split_by_qos_class_only() -> None:
    # The kubelet's sortPodsByQOS: candidates (filtered by Preemptable) are
    # grouped by QoS alone, whatever their priority or criticality.
    static_low = pod("static-low", static=True, cpu=100)
    pods = [
        NODE_CRITICAL,
        GUARANTEED,
        HIGH_PRIORITY_BURSTABLE,
        BURSTABLE,
        static_low,
        BEST_EFFORT,
        HIGH_REQUEST_BURSTABLE,
        HIGH_REQUEST_GUARANTEED,
        CLUSTER_CRITICAL,
    ]
    assert preemption_tiers(CLUSTER_CRITICAL, pods) == [
        (BEST_EFFORT,),
        (HIGH_PRIORITY_BURSTABLE, BURSTABLE, static_low, HIGH_REQUEST_BURSTABLE),
        (GUARANTEED, HIGH_REQUEST_GUARANTEED),
    ]


ALL_FIVE = [BEST_EFFORT, BURSTABLE, HIGH_REQUEST_BURSTABLE, GUARANTEED, HIGH_REQUEST_GUARANTEED]


@pytest.mark.parametrize(
    ("preemptor", "running", "requirements", "expected"),
    [
        # --- the kubelet's TestGetPodsToPreempt scenarios ---
        pytest.param(CLUSTER_CRITICAL, [], {}, (), id="kubelet-no-requirements"),
        pytest.param(
            CLUSTER_CRITICAL,
            [BURSTABLE],
            {"cpu": 100, "memory": 100 * Mi, "pods": 1},
            (BURSTABLE,),
            id="kubelet-equal-pods-and-resources",
        ),
        pytest.param(
            CLUSTER_CRITICAL,
            [BURSTABLE, BEST_EFFORT],
            {"pods": 1},
            (BEST_EFFORT,),
            id="kubelet-best-effort-before-burstable",
        ),
        pytest.param(
            CLUSTER_CRITICAL,
            [BURSTABLE, GUARANTEED],
            {"pods": 1},
            (BURSTABLE,),
            id="kubelet-burstable-before-guaranteed",
        ),
        pytest.param(
            CLUSTER_CRITICAL,
            [BEST_EFFORT, HIGH_REQUEST_BURSTABLE, BURSTABLE],
            {"cpu": 100, "memory": 100 * Mi},
            (BURSTABLE,),
            id="kubelet-smaller-burstable-when-it-suffices",
        ),
        pytest.param(
            CLUSTER_CRITICAL,
            [BEST_EFFORT, BURSTABLE, HIGH_REQUEST_BURSTABLE],
            {"cpu": 150, "memory": 150 * Mi},
            (HIGH_REQUEST_BURSTABLE,),
            id="kubelet-larger-burstable-when-smaller-falls-short",
        ),
        pytest.param(
            CLUSTER_CRITICAL,
            ALL_FIVE,
            {"cpu": 350, "memory": 350 * Mi},
            (HIGH_REQUEST_BURSTABLE, BURSTABLE),
            id="kubelet-multiple-pods-required",
        ),
        pytest.param(
            CLUSTER_CRITICAL,
            ALL_FIVE,
            {"memory": 550 * Mi},
            (HIGH_REQUEST_BURSTABLE, HIGH_REQUEST_GUARANTEED),
            id="kubelet-guaranteed-only-because-burstable-and-best-effort-fall-short",
        ),
        pytest.param(
            CLUSTER_CRITICAL,
            [BEST_EFFORT, HIGH_REQUEST_BURSTABLE, GUARANTEED, HIGH_REQUEST_GUARANTEED],
            {"memory": 350 * Mi},
            (HIGH_REQUEST_BURSTABLE, GUARANTEED),
            id="kubelet-smallest-guaranteed-that-closes-the-gap",
        ),
        pytest.param(
            NODE_CRITICAL,
            [CLUSTER_CRITICAL],
            {"cpu": 100},
            (CLUSTER_CRITICAL,),
            id="kubelet-node-critical-preempts-cluster-critical",
        ),
        pytest.param(
            CLUSTER_CRITICAL,
            [GUARANTEED, HIGH_PRIORITY_BURSTABLE],
            {"cpu": 100},
            (HIGH_PRIORITY_BURSTABLE,),
            id="kubelet-qos-not-priority-protects-guaranteed-over-a-higher-priority-burstable",
        ),
        pytest.param(
            CLUSTER_CRITICAL,
            [BEST_EFFORT, GUARANTEED, HIGH_REQUEST_BURSTABLE, HIGH_PRIORITY_BURSTABLE],
            {"memory": 500 * Mi},
            (HIGH_REQUEST_BURSTABLE, HIGH_PRIORITY_BURSTABLE),
            id="kubelet-one-burstable-tier-whatever-the-priorities",
        ),
        # --- further QoS mixes ---
        pytest.param(
            CLUSTER_CRITICAL,
            ALL_FIVE,
            {"pods": 2},
            (BEST_EFFORT, BURSTABLE),
            id="pod-count-takes-cheapest-tiers",
        ),
        pytest.param(
            CLUSTER_CRITICAL,
            [GUARANTEED, HIGH_REQUEST_GUARANTEED],
            {"cpu": 50},
            (GUARANTEED,),
            id="only-guaranteed-candidates-smallest-that-covers",
        ),
        pytest.param(
            CLUSTER_CRITICAL,
            ALL_FIVE,
            {"cpu": 800, "memory": 800 * Mi},
            (HIGH_REQUEST_BURSTABLE, BURSTABLE, HIGH_REQUEST_GUARANTEED, GUARANTEED),
            id="everything-with-requests-is-needed",
        ),
        pytest.param(
            CLUSTER_CRITICAL,
            [BEST_EFFORT, pod("be-2", qos=QOSClass.BESTEFFORT), BURSTABLE],
            {"pods": 1, "cpu": 100},
            (BURSTABLE,),
            id="burstable-covers-pod-count-so-no-best-effort",
        ),
        pytest.param(
            CLUSTER_CRITICAL,
            [CLUSTER_CRITICAL, NODE_CRITICAL, BEST_EFFORT, BURSTABLE],
            {"cpu": 100},
            (BURSTABLE,),
            id="critical-pods-are-never-candidates-for-an-equal-or-lower-critical",
        ),
        pytest.param(
            CLUSTER_CRITICAL,
            [BEST_EFFORT, pod("static-low", static=True, cpu=100)],
            {"cpu": 100},
            (pod("static-low", static=True, cpu=100),),
            id="lower-priority-static-pod-when-nothing-else-frees-enough",
        ),
        pytest.param(
            pod("prio-100-static", static=True, priority=100),
            [pod("a-prio-50", priority=50, cpu=100), pod("b-prio-0", cpu=100)],
            {"cpu": 100},
            (pod("a-prio-50", priority=50, cpu=100),),
            id="priority-does-not-order-pods-within-a-qos-class",
        ),
        # --- ties ---
        pytest.param(
            CLUSTER_CRITICAL,
            [
                pod("older", cpu=100, memory=100 * Mi, admitted_at=10.0),
                pod("newer", cpu=100, memory=100 * Mi, admitted_at=20.0),
            ],
            {"cpu": 100},
            (pod("newer", cpu=100, memory=100 * Mi, admitted_at=20.0),),
            id="tie-newest-admitted-first",
        ),
        pytest.param(
            CLUSTER_CRITICAL,
            [pod("b", cpu=100, memory=100 * Mi), pod("a", cpu=100, memory=100 * Mi)],
            {"cpu": 100},
            (pod("a", cpu=100, memory=100 * Mi),),
            id="tie-then-uid",
        ),
        pytest.param(
            CLUSTER_CRITICAL,
            [pod("more-cpu", cpu=300, memory=100 * Mi), pod("less-cpu", cpu=200, memory=100 * Mi)],
            {"cpu": 100},
            (pod("less-cpu", cpu=200, memory=100 * Mi),),
            id="equal-distance-equal-memory-smaller-cpu",
        ),
        pytest.param(
            CLUSTER_CRITICAL,
            [pod("less-memory-more-cpu", cpu=900, memory=100 * Mi), pod("more-memory", cpu=100, memory=200 * Mi)],
            {"cpu": 100},
            (pod("less-memory-more-cpu", cpu=900, memory=100 * Mi),),
            id="equal-distance-memory-decides-before-cpu",
        ),
    ],
)
def test_pods_to_preempt(
    preemptor: PodInfo, running: list[PodInfo], requirements: Mapping[str, int], expected: tuple[PodInfo, ...]
) -> None:
    assert pods_to_preempt(preemptor=preemptor, pods=running, requirements=requirements) == expected


@pytest.mark.parametrize(
    ("preemptor", "running", "requirements", "unmet", "candidates"),
    [
        pytest.param(CLUSTER_CRITICAL, [], {"pods": 1}, {"pods": 1}, 0, id="kubelet-no-pods"),
        pytest.param(
            CLUSTER_CRITICAL,
            [BURSTABLE],
            {"cpu": 200, "memory": 200 * Mi, "pods": 2},
            {"cpu": 100, "memory": 100 * Mi, "pods": 1},
            1,
            id="kubelet-higher-requirements-than-requests",
        ),
        pytest.param(
            CLUSTER_CRITICAL,
            [CLUSTER_CRITICAL],
            {"pods": 1},
            {"pods": 1},
            0,
            id="kubelet-critical-pods-cannot-be-preempted",
        ),
        pytest.param(
            CLUSTER_CRITICAL,
            [BEST_EFFORT],
            {"memory": 1 * Mi},
            {"memory": 1 * Mi},
            1,
            id="kubelet-best-effort-frees-no-memory",
        ),
        pytest.param(
            CLUSTER_CRITICAL,
            [NODE_CRITICAL],
            {"cpu": 100},
            {"cpu": 100},
            0,
            id="kubelet-cluster-critical-cannot-preempt-node-critical",
        ),
        pytest.param(
            CLUSTER_CRITICAL,
            ALL_FIVE,
            {"cpu": 1000, "memory": 100 * Mi},
            {"cpu": 200},
            5,
            id="all-candidates-together-still-short",
        ),
    ],
)
def test_pods_to_preempt_impossible(
    preemptor: PodInfo,
    running: list[PodInfo],
    requirements: Mapping[str, int],
    unmet: Mapping[str, int],
    candidates: int,
) -> None:
    with pytest.raises(InsufficientToPreempt) as caught:
        pods_to_preempt(preemptor=preemptor, pods=running, requirements=requirements)
    assert (caught.value.preemptor, dict(caught.value.unmet), caught.value.candidates) == (
        preemptor,
        unmet,
        candidates,
    )


def test_insufficient_to_preempt_message() -> None:
    with pytest.raises(InsufficientToPreempt) as caught:
        pods_to_preempt(preemptor=CLUSTER_CRITICAL, pods=ALL_FIVE, requirements={"cpu": 1000, "memory": 2 * Gi})
    assert str(caught.value) == (
        "cannot make room for critical pod default/cluster-critical: stopping all 5 preemptable pods "
        "would still leave cpu 200m, memory 1248Mi missing; no pod is stopped and the pod is rejected"
    )


CRITICAL_NEW = pod("new-critical", memory=650 * Mi, priority=SYSTEM_CLUSTER_CRITICAL)
NOT_CRITICAL_NEW = pod("new-guaranteed", qos=QOSClass.GUARANTEED, cpu=100, memory=650 * Mi)
NODE_1G = {"cpu": 1000, "memory": 1000 * Mi, "pods": 110}
OUT_OF_MEMORY_MESSAGE = (
    f"Node didn't have enough resource: memory, requested: {650 * Mi}, used: {900 * Mi}, capacity: {1000 * Mi}"
)
NODE_SELECTOR = PredicateFailure(reason="NodeAffinity", message="node didn't match the pod's node selector")


@pytest.mark.parametrize(
    ("new", "allocatable", "running", "other_failures", "expected"),
    [
        pytest.param(
            NOT_CRITICAL_NEW,
            NODE_1G,
            [BURSTABLE],
            [],
            AdmissionDecision(admitted=True),
            id="fits",
        ),
        pytest.param(
            NOT_CRITICAL_NEW,
            NODE_1G,
            [CLUSTER_CRITICAL, *ALL_FIVE],
            [],
            AdmissionDecision(
                admitted=False,
                failures=(
                    InsufficientResource(resource="memory", requested=650 * Mi, used=900 * Mi, capacity=1000 * Mi),
                ),
                reason="OutOfmemory",
                message=OUT_OF_MEMORY_MESSAGE,
            ),
            id="kubelet-non-critical-pod-does-not-preempt",
        ),
        pytest.param(
            NOT_CRITICAL_NEW,
            NODE_1G,
            [CLUSTER_CRITICAL, *ALL_FIVE],
            [NODE_SELECTOR],
            AdmissionDecision(
                admitted=False,
                failures=(
                    InsufficientResource(resource="memory", requested=650 * Mi, used=900 * Mi, capacity=1000 * Mi),
                    NODE_SELECTOR,
                ),
                reason="OutOfmemory",
                message=OUT_OF_MEMORY_MESSAGE,
            ),
            id="kubelet-non-critical-pod-keeps-all-reasons",
        ),
        pytest.param(
            CRITICAL_NEW,
            NODE_1G,
            [CLUSTER_CRITICAL, *ALL_FIVE],
            [],
            AdmissionDecision(admitted=True, victims=(HIGH_REQUEST_BURSTABLE, HIGH_REQUEST_GUARANTEED)),
            id="kubelet-multiple-pods-evicted-for-critical-pod",
        ),
        pytest.param(
            CRITICAL_NEW,
            NODE_1G,
            [CLUSTER_CRITICAL, *ALL_FIVE],
            [NODE_SELECTOR],
            AdmissionDecision(
                admitted=False, failures=(NODE_SELECTOR,), reason="NodeAffinity", message=NODE_SELECTOR.message
            ),
            id="kubelet-critical-pod-with-other-reason-rejected-without-resource-reasons",
        ),
        pytest.param(
            CRITICAL_NEW,
            {"cpu": 1000, "memory": 1000 * Mi, "pods": 1},
            [CLUSTER_CRITICAL],
            [],
            AdmissionDecision(
                admitted=False,
                failures=(InsufficientResource(resource="pods", requested=1, used=1, capacity=1),),
                reason=PREEMPTION_FAILED_REASON,
                message=(
                    "cannot make room for critical pod default/new-critical: stopping all 0 preemptable pods "
                    "would still leave pods 1 missing; no pod is stopped and the pod is rejected"
                ),
            ),
            id="kubelet-critical-pods-cannot-be-preempted",
        ),
        pytest.param(
            CRITICAL_NEW,
            {"cpu": 1000, "memory": 600 * Mi, "pods": 110},
            [BEST_EFFORT],
            [],
            AdmissionDecision(
                admitted=False,
                failures=(InsufficientResource(resource="memory", requested=650 * Mi, used=0, capacity=600 * Mi),),
                reason=PREEMPTION_FAILED_REASON,
                message=(
                    "cannot make room for critical pod default/new-critical: stopping all 1 preemptable pods "
                    "would still leave memory 50Mi missing; no pod is stopped and the pod is rejected"
                ),
            ),
            id="kubelet-best-effort-pods-free-no-memory",
        ),
        pytest.param(
            CRITICAL_NEW,
            {"cpu": 1000, "memory": 1000 * Mi, "pods": 2},
            [BURSTABLE, GUARANTEED],
            [],
            AdmissionDecision(admitted=True, victims=(BURSTABLE,)),
            id="critical-pod-frees-a-pod-slot",
        ),
        pytest.param(
            CRITICAL_NEW,
            NODE_1G,
            [CRITICAL_NEW, BURSTABLE],
            [],
            AdmissionDecision(admitted=True),
            id="pod-itself-in-running-list-is-ignored",
        ),
    ],
)
def test_admit_pod(
    new: PodInfo,
    allocatable: Mapping[str, int],
    running: list[PodInfo],
    other_failures: list[PredicateFailure],
    expected: AdmissionDecision,
) -> None:
    assert admit_pod(pod=new, allocatable=allocatable, running=running, other_failures=other_failures) == expected


@pytest.mark.parametrize(
    ("new", "failures", "expected"),
    [
        pytest.param(CRITICAL_NEW, [], AdmissionDecision(admitted=True), id="no-failures"),
        pytest.param(
            CRITICAL_NEW,
            [InsufficientResource(resource="cpu", requested=100, used=900, capacity=950)],
            AdmissionDecision(admitted=True, victims=(BURSTABLE,)),
            id="shortfall-not-the-full-request-is-freed",
        ),
        pytest.param(
            pod("static-new", static=True),
            [InsufficientResource(resource="pods", requested=1, used=2, capacity=2)],
            AdmissionDecision(admitted=True, victims=(BEST_EFFORT,)),
            id="static-pod-is-critical",
        ),
    ],
)
def test_handle_admission_failure(new: PodInfo, failures: list[AdmissionFailure], expected: AdmissionDecision) -> None:
    running = [BEST_EFFORT, BURSTABLE, GUARANTEED]
    assert handle_admission_failure(pod=new, failures=failures, running=running) == expected


def test_pod_info_requests_are_copied_and_read_only() -> None:
    requests = {"cpu": 100}
    info = PodInfo(uid="u", namespace="n", name="p", priority=0, qos=QOSClass.BURSTABLE, requests=requests)
    requests["cpu"] = 5
    assert (info.requests, info.key, hash(info) == hash(info)) == ({"cpu": 100}, "n/p", True)
    with pytest.raises(TypeError):
        info.requests["cpu"] = 1  # type: ignore[index]
