"""The agent's metrics over a real node (real processes, no cgroups) after starts, a pressure eviction and a
critical-pod preemption, parsed with prometheus_client's parser."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sluicegate.agent.metrics import POD_START_BUCKETS, AgentMetrics
from sluicegate.agent.pod import Container, Pod
from sluicegate.agent.policy import PodInfo, PodUsage, Signal, SignalObservation, parse_eviction_config
from sluicegate.agent.pressure import PressureLoop, Readings
from tests.unit.agent_node.conftest import MakeNode, make_node  # noqa: F401  (the fixture)

from .exposition import Scrape

Mi = 1 << 20
Gi = 1 << 30


@dataclass
class Link:
    connected: bool = True


def wish(uid: str, *, cpu: int = 100, memory: int = 64 * Mi, static: bool = False) -> Pod:
    return Pod(uid=uid, name=uid, namespace="default", workload=f"wl-{uid}", pod_set="main", index=0, static=static,
               termination_grace_seconds=1.0,
               containers=(Container(name="main", command=("sleep", "30"),
                                     requests={"cpu": cpu, "memory": memory}),))


class LowMemory:
    """Readings with the node short of memory and ``hog`` using the most above its request."""

    def __call__(self, pods: Sequence[PodInfo]) -> Readings:
        return Readings(
            at=1.0,
            observations={Signal.MEMORY_AVAILABLE: SignalObservation(available=512 * Mi, capacity=16 * Gi)},
            usages={p.uid: PodUsage(uid=p.uid, memory=900 * Mi if p.uid == "hog" else 0, disk=0) for p in pods},
        )


async def test_agent_counts_evictions_preemptions_and_starts(make_node: MakeNode) -> None:  # noqa: F811
    node = await make_node(allocatable={"cpu": 1000, "memory": 4 * Gi, "pods": 110})
    metrics = AgentMetrics()
    link = Link()
    metrics.attach(node, link)
    for pod in (wish("hog"), wish("steady"), wish("filler", cpu=700)):
        assert await node.run_pod(pod)
    s = Scrape.of(metrics.registry)
    assert s.type_of("kubelet_pod_start_duration_seconds") == "histogram"
    assert s.value("kubelet_pod_start_duration_seconds_count") == 3
    assert s.value("kubelet_pod_start_duration_seconds_bucket", le="+Inf") == 3
    assert s.value("kubelet_running_pods") == 3
    assert s.value("kubelet_running_containers", container_state="running") == 3
    assert s.value("sluicegate_node_allocatable", resource="cpu") == 1.0
    assert s.value("sluicegate_node_requested", resource="cpu") == 0.9
    assert s.value("sluicegate_node_requested", resource="memory") == 3 * 64 * Mi
    assert s.value("sluicegate_agent_controller_connected") == 1

    loop = PressureLoop(node=node, thresholds=parse_eviction_config(hard="memory.available<1Gi"),
                        interval=0.01, transition_seconds=0, readings=LowMemory())
    evicted = await loop.step()
    assert evicted is not None and evicted.uid == "hog"

    # A static pod is critical: 300m more than the 200m left stops a running pod to make room.
    assert await node.run_pod(wish("critical", cpu=300, static=True))
    link.connected = False
    s = Scrape.of(metrics.registry)
    assert s.type_of("kubelet_evictions") == "counter"
    assert s.series("kubelet_evictions_total") == {(("eviction_signal", "memory.available"),): 1.0}
    assert s.series("kubelet_preemptions_total") == {(("preemption_signal", "cpu"),): 1.0}
    assert s.value("kubelet_pod_start_duration_seconds_count") == 4
    assert s.value("sluicegate_node_condition", condition="MemoryPressure") == 1
    assert s.value("sluicegate_agent_pods", phase="Failed") == 2
    assert s.value("kubelet_running_pods") == 2
    assert s.value("sluicegate_agent_controller_connected") == 0
    assert s.type_of("process_resident_memory_bytes") == "gauge"


def test_agent_metrics_before_attach_show_only_process_series() -> None:
    s = Scrape.of(AgentMetrics().registry)
    assert s.value("kubelet_running_pods") is None
    assert s.series("kubelet_evictions_total") == {}
    assert s.value("kubelet_pod_start_duration_seconds_count") == 0
    assert list(POD_START_BUCKETS) == sorted(POD_START_BUCKETS)
