"""QoS class and effective requests, against Kubernetes' GetPodQOS and defaulting rules."""

from __future__ import annotations

import pytest

from sluicegate.agent.policy import (
    ContainerResources,
    QOSClass,
    default_requests_from_limits,
    effective_requests,
    pod_qos,
)

from ._builders import Gi, Mi, container

G, BU, BE = QOSClass.GUARANTEED, QOSClass.BURSTABLE, QOSClass.BESTEFFORT


@pytest.mark.parametrize(
    ("containers", "init_containers", "expected"),
    [
        pytest.param([container()], [], BE, id="no-requests-no-limits"),
        pytest.param([container(), container()], [], BE, id="two-empty-containers"),
        pytest.param([container(cpu=0, memory=0)], [], BE, id="zero-requests-count-as-unset"),
        pytest.param(
            [container(extra={"ephemeral-storage": 1 * Gi, "example.com/gpu": 1})],
            [],
            BE,
            id="only-non-compute-requests-are-ignored",
        ),
        pytest.param([container(cpu=100)], [], BU, id="cpu-request-only"),
        pytest.param([container(memory=64 * Mi)], [], BU, id="memory-request-only"),
        pytest.param([container(memory_limit=64 * Mi)], [], BU, id="memory-limit-only-lacks-cpu-limit"),
        pytest.param(
            [container(cpu=500, memory=1 * Gi, cpu_limit=500, memory_limit=1 * Gi)],
            [],
            G,
            id="requests-equal-limits",
        ),
        pytest.param(
            [container(cpu_limit=500, memory_limit=1 * Gi)],
            [],
            G,
            id="limits-only-guaranteed-through-defaulting",
        ),
        pytest.param(
            [container(cpu=500, cpu_limit=500, memory_limit=1 * Gi)],
            [],
            G,
            id="memory-request-defaulted-from-limit",
        ),
        pytest.param(
            [container(cpu=250, memory=1 * Gi, cpu_limit=500, memory_limit=1 * Gi)],
            [],
            BU,
            id="cpu-request-below-limit",
        ),
        pytest.param(
            [container(cpu=500, memory=512 * Mi, cpu_limit=500, memory_limit=1 * Gi)],
            [],
            BU,
            id="memory-request-below-limit",
        ),
        pytest.param(
            [container(cpu=0, cpu_limit=500, memory_limit=1 * Gi)],
            [],
            BU,
            id="explicit-zero-request-is-not-defaulted",
        ),
        pytest.param(
            [container(cpu=500, memory=1 * Gi, cpu_limit=0, memory_limit=1 * Gi)],
            [],
            BU,
            id="zero-limit-counts-as-missing",
        ),
        pytest.param(
            [
                container(
                    cpu=500, memory=1 * Gi, cpu_limit=500, memory_limit=1 * Gi, extra={"ephemeral-storage": 5 * Gi}
                ),
            ],
            [],
            G,
            id="non-compute-request-does-not-spoil-guaranteed",
        ),
        pytest.param(
            [container(cpu_limit=500, memory_limit=1 * Gi), container(cpu_limit=100, memory_limit=64 * Mi)],
            [],
            G,
            id="every-container-guaranteed",
        ),
        pytest.param(
            [container(cpu_limit=500, memory_limit=1 * Gi), container()],
            [],
            BU,
            id="one-guaranteed-one-best-effort-container",
        ),
        pytest.param(
            [container(cpu_limit=500, memory_limit=1 * Gi), container(cpu=100)],
            [],
            BU,
            id="one-guaranteed-one-burstable-container",
        ),
        pytest.param(
            [container(cpu_limit=500, memory_limit=1 * Gi)],
            [container(cpu_limit=200, memory_limit=256 * Mi)],
            G,
            id="init-and-app-containers-guaranteed",
        ),
        pytest.param(
            [container(cpu_limit=500, memory_limit=1 * Gi)],
            [container()],
            BU,
            id="best-effort-init-container-spoils-guaranteed",
        ),
        pytest.param(
            [container()],
            [container(cpu=100)],
            BU,
            id="init-container-request-makes-burstable",
        ),
        pytest.param(
            [container()],
            [container(cpu_limit=100, memory_limit=64 * Mi)],
            BU,
            id="guaranteed-init-best-effort-app",
        ),
        pytest.param([], [], BE, id="no-containers-at-all"),
    ],
)
def test_pod_qos(
    containers: list[ContainerResources], init_containers: list[ContainerResources], expected: QOSClass
) -> None:
    assert pod_qos(containers=containers, init_containers=init_containers) is expected


def test_qos_class_values_are_the_api_spellings() -> None:
    assert [cls.value for cls in QOSClass] == ["Guaranteed", "Burstable", "BestEffort"]


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        pytest.param(container(), container(), id="nothing-to-default"),
        pytest.param(
            container(cpu_limit=500, memory_limit=1 * Gi),
            ContainerResources(requests={"cpu": 500, "memory": 1 * Gi}, limits={"cpu": 500, "memory": 1 * Gi}),
            id="limits-copied-to-requests",
        ),
        pytest.param(
            container(cpu=100, cpu_limit=500, memory_limit=1 * Gi),
            ContainerResources(requests={"cpu": 100, "memory": 1 * Gi}, limits={"cpu": 500, "memory": 1 * Gi}),
            id="explicit-request-kept",
        ),
        pytest.param(
            ContainerResources(limits={"example.com/gpu": 2}),
            ContainerResources(requests={"example.com/gpu": 2}, limits={"example.com/gpu": 2}),
            id="any-resource-is-defaulted",
        ),
        pytest.param(
            container(cpu=100, memory=64 * Mi),
            container(cpu=100, memory=64 * Mi),
            id="requests-without-limits",
        ),
    ],
)
def test_default_requests_from_limits(given: ContainerResources, expected: ContainerResources) -> None:
    assert default_requests_from_limits(given) == expected
    # Applying it again changes nothing.
    assert default_requests_from_limits(expected) == expected


@pytest.mark.parametrize(
    ("containers", "init_containers", "expected"),
    [
        pytest.param([container()], [], {}, id="nothing-requested"),
        pytest.param(
            [container(cpu=200, memory=1 * Gi), container(cpu=100, memory=1 * Gi)],
            [],
            {"cpu": 300, "memory": 2 * Gi},
            id="app-containers-sum",
        ),
        pytest.param(
            # The example in the scheduler's computePodResourceRequest.
            [container(cpu=2000, memory=1 * Gi), container(cpu=1000, memory=1 * Gi)],
            [container(cpu=2000, memory=1 * Gi), container(cpu=2000, memory=3 * Gi)],
            {"cpu": 3000, "memory": 3 * Gi},
            id="cpu-from-app-sum-memory-from-largest-init",
        ),
        pytest.param(
            [container(cpu=100)],
            [container(cpu=4000)],
            {"cpu": 4000},
            id="init-container-dominates",
        ),
        pytest.param(
            [container(cpu=100)],
            [container(memory=1 * Gi)],
            {"cpu": 100, "memory": 1 * Gi},
            id="resource-only-an-init-container-requests",
        ),
        pytest.param(
            [container(cpu_limit=500, memory_limit=1 * Gi)],
            [],
            {"cpu": 500, "memory": 1 * Gi},
            id="limits-only-defaulted",
        ),
        pytest.param(
            [container(extra={"ephemeral-storage": 2 * Gi, "example.com/gpu": 1})],
            [],
            {"ephemeral-storage": 2 * Gi, "example.com/gpu": 1},
            id="every-resource-counts-not-only-compute",
        ),
    ],
)
def test_effective_requests(
    containers: list[ContainerResources], init_containers: list[ContainerResources], expected: dict[str, int]
) -> None:
    assert effective_requests(containers=containers, init_containers=init_containers) == expected


def test_container_resources_are_copied_and_read_only() -> None:
    requests = {"cpu": 100}
    resources = ContainerResources(requests=requests)
    requests["cpu"] = 999
    assert resources.requests == {"cpu": 100}
    with pytest.raises(TypeError):
        resources.requests["cpu"] = 1  # type: ignore[index]
