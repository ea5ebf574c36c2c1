"""A scrape's cost follows the queues, not the workloads that came and went (issue 19).

The large-scale replay's scrape held the controller for 16 s: every scrape
walked every labelled child of every per-queue histogram and formatted each
line again. Here an in-process Manager admits and finishes workloads in
rounds; between scrapes only the label sets a round touched are written
again, and the series (names and labels) stay the same however many
workloads have finished. Kueue's families are per ClusterQueue (and per
LocalQueue behind its LocalQueueMetrics gate), never per workload:
kubernetes-sigs/kueue pkg/metrics/metrics.go.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

from sluicegate.common.metrics import CounterFamily, HistogramFamily
from sluicegate.controller.lifecycle import Settlement
from sluicegate.controller.manager import Manager
from sluicegate.controller.metrics import ControllerMetrics
from sluicegate.model.conditions import set_condition

from .exposition import Scrape
from .test_controller_metrics import Clock, build, settle, workload


def _finish(m: Manager, name: str, clock: Clock) -> None:
    wl = m.get_workload("default", name)
    assert wl.is_admitted, name
    conditions = set_condition(wl.status.conditions, type_="Finished", status=True, reason="Succeeded",
                               message="ok", now=clock.t)
    m.fleet.apply(Settlement(replace(wl, status=replace(wl.status, conditions=conditions)), release=True))


def _written(metrics: ControllerMetrics) -> int:
    return sum(f.written for f in vars(metrics).values() if isinstance(f, CounterFamily | HistogramFamily))


def _shape(scrape: Scrape) -> set[tuple[str, tuple[tuple[str, str], ...]]]:
    """Every series' name and labels (not values), less the process's own."""
    return {(s.name, tuple(sorted(s.labels.items()))) for s in scrape.samples
            if not s.name.startswith(("process_", "python_", "sluicegate_gc_"))}


def test_series_and_scrape_work_do_not_grow_with_finished_workloads() -> None:
    metrics, clock = ControllerMetrics(), Clock()
    m = build(metrics, clock)
    shapes = []
    written = []
    for round_ in range(6):
        names = [f"r{round_}-{i}" for i in range(4)]
        for name in names:
            m.create_workload(workload(name, "1"))
        clock.t += 2
        settle(m, clock)
        for name in names:
            _finish(m, name, clock)
        before = _written(metrics)
        scrape = Scrape.of(metrics.registry)
        written.append(_written(metrics) - before)
        shapes.append(_shape(scrape))
        assert scrape.value("kueue_finished_workloads_total", cluster_queue="team-a", priority_class="",
                            replica_role="standalone") == 4 * (round_ + 1)
        assert scrape.value("sluicegate_workloads") == 4 * (round_ + 1)
    assert all(shape == shapes[0] for shape in shapes[1:])
    # Each round touches the same label sets (team-a and lq, no priority class): after the first scrape
    # wrote them all, every later one writes those again and nothing else.
    assert written[1:] == [written[1]] * 5
    assert 0 < written[1] <= written[0]
    assert _written(metrics) - sum(written) == 0  # nothing is written outside a scrape
    # A scrape with nothing new writes nothing.
    before = _written(metrics)
    Scrape.of(metrics.registry)
    assert _written(metrics) == before


def _values(scrape: Scrape) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for s in scrape.samples
            if not s.name.startswith(("process_", "python_", "sluicegate_gc_"))}


def test_a_scrape_served_over_http_counts_the_queues_in_slices_and_reads_the_same() -> None:
    """The HTTP path (Registry.flush, then render) counts each ClusterQueue between loop turns; what it
    exports is what a scrape in one go exports, and a Manager swapped meanwhile is not read."""
    metrics, clock = ControllerMetrics(), Clock()
    m = build(metrics, clock)
    for i in range(3):
        m.create_workload(workload(f"fits-{i}", "1"))
    m.create_workload(workload("big", "10"))
    clock.t += 2
    settle(m, clock)
    m.create_workload(workload("waiting", "1"))
    in_one_go = _values(Scrape.of(metrics.registry))
    assert in_one_go[("kueue_pending_workloads", (("cluster_queue", "team-a"), ("replica_role", "standalone"),
                                                  ("status", "active")))] == 1.0
    asyncio.run(metrics.registry.flush(slice_seconds=0.0))
    assert _values(Scrape.of(metrics.registry)) == in_one_go
    asyncio.run(metrics.registry.flush(slice_seconds=0.0))
    metrics.attach(None)  # a follower now: what was counted for the old Manager is dropped
    assert ("kueue_pending_workloads", (("cluster_queue", "team-a"), ("replica_role", "standalone"),
                                        ("status", "active"))) not in _values(Scrape.of(metrics.registry))
