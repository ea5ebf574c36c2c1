"""The controller's Prometheus metrics: what /metrics on the health port exposes."""

from __future__ import annotations

from sluicegate.common.heapgc import HEAP_GC
from sluicegate.common.metrics import Registry
from sluicegate.controller.manager import Manager


def controller_metrics(manager: Manager) -> Registry:
    reg = Registry()
    cache = manager.cache

    def pending() -> list[tuple[tuple[str, ...], float]]:
        return [((cq,), float(cache.queues.pending_count(cq))) for cq in sorted(cache.cluster_queues)]

    def reserving() -> list[tuple[tuple[str, ...], float]]:
        return [((cq,), float(len(cache.admitted.get(cq, {})))) for cq in sorted(cache.cluster_queues)]

    reg.callback_gauge("sluicegate_pending_workloads", "Workloads waiting in each ClusterQueue.",
                       collect=pending, labelnames=("cluster_queue",))
    reg.callback_gauge("sluicegate_reserving_workloads", "Workloads holding quota in each ClusterQueue.",
                       collect=reserving, labelnames=("cluster_queue",))
    reg.callback_gauge("sluicegate_scheduling_cycles", "Scheduling cycles run since start.",
                       collect=lambda: [((), float(manager.cycle))])
    reg.callback_gauge("sluicegate_admission_attempts", "Scheduling cycles since start, by result: success when "
                       "the cycle admitted a workload, inadmissible otherwise.",
                       collect=lambda: [(("success",), float(manager.cycles_admitting)),
                                        (("inadmissible",), float(manager.cycle - manager.cycles_admitting))],
                       labelnames=("result",))
    reg.callback_gauge("sluicegate_workloads", "Workloads known to the controller.",
                       collect=lambda: [((), float(len(cache.workloads)))])
    reg.callback_gauge("sluicegate_gc_full_collections", "Full garbage collections since start (see common/heapgc.py).",
                       collect=lambda: [((), float(HEAP_GC.full_collections))])
    reg.callback_gauge(
        "sluicegate_gc_full_collection_seconds",
        "Seconds spent in full garbage collections since start.",
        collect=lambda: [((), HEAP_GC.full_seconds)],
    )
    return reg
