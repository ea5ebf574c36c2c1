"""The agent's Prometheus metrics, in the kubelet's spirit.

Where the kubelet has a series for the same thing, it has the kubelet's
name, type and labels: ``kubelet_evictions``, ``kubelet_preemptions`` (as
counters they are exposed with the ``_total`` suffix prometheus_client always
gives counters, which is also what the kubelet's own counters are called
when scraped as OpenMetrics), ``kubelet_pod_start_duration_seconds``,
``kubelet_running_pods``, ``kubelet_running_containers``. The node's own
figures, which the kubelet leaves to cAdvisor and kube-state-metrics, are
``sluicegate_node_*`` in base units (cpu in cores, bytes). ``docs/metrics.md``
lists every series.

The counters are told by the :class:`~sluicegate.agent.node.AgentNode` as
things happen (it takes this object as its ``observer``); the gauges are
read from the node at scrape time.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final, Protocol

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import Metric

from sluicegate.agent.devices import GPU_RESOURCE
from sluicegate.agent.node import AgentNode
from sluicegate.agent.nvml import MIB
from sluicegate.common.metrics import ScrapeCollector, gauge_family, new_registry
from sluicegate.quantity import MILLI_RESOURCES

__all__ = ["POD_START_BUCKETS", "AgentMetrics"]

# The kubelet's pod start buckets (0.5s to an hour), below which a process
# agent needs finer ones: starting a process takes milliseconds, not an image pull.
POD_START_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                            0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600,
                            900, 1200, 1800, 2700, 3600)

# The kubelet's container_state values for our container states.
_CONTAINER_STATE: Final = {"Waiting": "created", "Running": "running", "Terminated": "exited"}

_PHASES: Final = ("Pending", "Running", "Succeeded", "Failed")
_CONDITIONS: Final = ("MemoryPressure", "DiskPressure")


class Link(Protocol):
    """What the metrics read of the link to the controller."""

    @property
    def connected(self) -> bool: ...


def _base_unit(resource: str, amount: int) -> float:
    return amount / 1000 if resource in MILLI_RESOURCES else float(amount)


class AgentMetrics:
    """The agent's registry; :meth:`attach` points its scrape-time gauges at the node and its link."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else new_registry()
        self._node: AgentNode | None = None
        self._link: Link | None = None
        r = self.registry
        self.evictions = Counter(
            "kubelet_evictions_total",
            "Pods evicted by this agent for node pressure, by the eviction signal (memory.available, "
            "nodefs.available).", ["eviction_signal"], registry=r)
        self.preemptions = Counter(
            "kubelet_preemptions_total",
            "Pods stopped to admit a critical pod, by the first resource the critical pod lacked.",
            ["preemption_signal"], registry=r)
        self.pod_start = Histogram(
            "kubelet_pod_start_duration_seconds",
            "Seconds from the agent receiving a pod to its processes having been started.",
            buckets=POD_START_BUCKETS, registry=r)
        r.register(ScrapeCollector("agent", self._collect, self._describe))

    def attach(self, node: AgentNode, link: Link) -> None:
        """Count what ``node`` reports and read the gauges from it and ``link`` from now on."""
        self._node = node
        self._link = link
        node.observer = self

    # ------------------------------------------------------------ hooks (the node's observer)

    def evicted(self, signal: str) -> None:
        self.evictions.labels(signal).inc()

    def preempted(self, signal: str) -> None:
        self.preemptions.labels(signal).inc()

    def pod_started(self, seconds: float) -> None:
        self.pod_start.observe(seconds)

    # ------------------------------------------------------------ scrape time

    def _describe(self) -> Iterator[Metric]:
        return self._families(None, None)

    def _collect(self) -> Iterator[Metric]:
        return self._families(self._node, self._link)

    def _families(self, node: AgentNode | None, link: Link | None) -> Iterator[Metric]:
        reports = node.reports() if node is not None else []
        phases = dict.fromkeys(_PHASES, 0)
        containers = dict.fromkeys(_CONTAINER_STATE.values(), 0)
        for report in reports:
            phases[report.phase] = phases.get(report.phase, 0) + 1
            if report.phase in ("Pending", "Running"):
                for c in report.containers:
                    state = _CONTAINER_STATE.get(c.state, "unknown")
                    containers[state] = containers.get(state, 0) + 1
        requested: dict[str, int] = {}
        if node is not None:
            for pod in node.admitted_pods():
                for resource, amount in pod.requests.items():
                    requested[resource] = requested.get(resource, 0) + amount
        yield gauge_family("kubelet_running_pods", "Pods with processes running (phase Running).", (),
                           [((), float(phases["Running"]))] if node is not None else [])
        yield gauge_family("kubelet_running_containers",
                           "Containers of pods that have not ended, by state (created, running, exited).",
                           ("container_state",),
                           [((state,), float(n)) for state, n in sorted(containers.items())] if node else [])
        yield gauge_family("sluicegate_agent_pods", "Pods on this node by phase.", ("phase",),
                           [((p,), float(n)) for p, n in sorted(phases.items())] if node is not None else [])
        for name, what, values in (
                ("sluicegate_node_capacity", "The node's capacity", node.capacity if node else {}),
                ("sluicegate_node_allocatable", "What pods may request: capacity less systemReserved",
                 node.allocatable if node else {}),
                ("sluicegate_node_requested", "What the admitted pods request", requested)):
            yield gauge_family(name, f"{what}, per resource (cpu in cores, memory and storage in bytes).",
                               ("resource",), [((r,), _base_unit(r, v)) for r, v in sorted(values.items())])
        reading = node.node_reading() if node is not None else None
        yield gauge_family("sluicegate_node_memory_available_bytes",
                           "The node's available memory (the memory.available eviction signal).", (),
                           [((), float(reading.memory_available_bytes))] if reading else [])
        yield gauge_family("sluicegate_node_cpu_usage_cores",
                           "Logical CPUs busy since the previous reading.", (),
                           [((), reading.cpu_busy_fraction * reading.logical_cpus)] if reading else [])
        yield gauge_family("sluicegate_node_fs_available_bytes",
                           "Free bytes on the filesystem of the agent's data directory (nodefs.available).", (),
                           [((), float(reading.disk_free_bytes))] if reading else [])
        yield gauge_family("sluicegate_node_condition",
                           "1 while the node reports the condition, 0 otherwise.", ("condition",),
                           [((c,), 1.0 if c in node.conditions else 0.0) for c in _CONDITIONS] if node else [])
        yield from _device_families(node)
        yield gauge_family("sluicegate_agent_controller_connected",
                           "1 while the agent's stream to the controller is up.", (),
                           [((), 1.0 if link.connected else 0.0)] if link is not None else [])


_GPU_LABELS: Final = ("gpu", "UUID", "modelName", "Hostname", "namespace", "pod")


def _device_families(node: AgentNode | None) -> Iterator[Metric]:
    """Device health, and each GPU's use under DCGM exporter's names and labels (the pod holding it, if any)."""
    devices = node.devices if node is not None else None
    health: list[tuple[tuple[str, ...], float]] = []
    util: list[tuple[tuple[str, ...], float]] = []
    fb_used: list[tuple[tuple[str, ...], float]] = []
    if node is not None and devices is not None:
        holder = {(res, dev): node.meta[pod.uid] for pod in node.admitted_pods()
                  for res, ids in node.meta[pod.uid].devices.items() for dev in ids}
        for resource, devs in sorted(devices.by_resource.items()):
            for d in devs:
                health.append(((resource, d.id), 1.0 if d.healthy else 0.0))
        nvml = devices.nvml
        for uuid, gpu in sorted(devices.gpus.items(), key=lambda kv: kv[1].index):
            usage = nvml.usage(uuid) if nvml is not None else None
            if usage is None:
                continue
            m = holder.get((GPU_RESOURCE, uuid))
            labels = (str(gpu.index), uuid, gpu.product, node.name, m.namespace if m else "", m.name if m else "")
            util.append((labels, usage.utilization_percent))
            fb_used.append((labels, usage.memory_used_bytes / MIB))
    yield gauge_family("sluicegate_node_device_healthy",
                       "1 while a device (GPU UUID, device path) of a device resource is healthy, 0 otherwise.",
                       ("resource", "device"), health)
    yield gauge_family("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %), with the pod that holds the GPU.",
                       _GPU_LABELS, util)
    yield gauge_family("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB), with the pod that holds the GPU.",
                       _GPU_LABELS, fb_used)
