"""The hand-kept counter, histogram and gauge families against prometheus_client's own exposition.

A scrape at 1,000 ClusterQueues rendered through the library's per-child
objects cost seconds on the event loop (issue 19); these families keep
plain numbers and their text per label set. What a scraper reads must not
change: the same lines, byte for byte, as the library writes for the same
observations (label names sorted, values escaped, Go number format).
"""

from __future__ import annotations

import asyncio
import logging

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics, generate_latest

from sluicegate.common.metrics import CounterFamily, GaugeFamily, HistogramFamily, new_registry, render

from .exposition import Scrape

ODD = 'quote " backslash \\ newline \n ünï'


def _library(build: object) -> str:
    """What prometheus_client writes, as the daemons configure it (no *_created series)."""
    disable_created_metrics()  # type: ignore[no-untyped-call]  # new_registry() does the same, process-wide
    registry = CollectorRegistry()
    assert callable(build)
    build(registry)
    return generate_latest(registry).decode("utf-8")


def test_counter_text_is_the_librarys() -> None:
    ours = CounterFamily("things_total", "Things.\nSecond line \\ here.", ["zone", "kind"])
    ours.inc(("a", ODD))
    ours.inc(("a", ODD), 2.5)
    ours.inc(("b", ""))

    def build(r: CollectorRegistry) -> None:
        c = Counter("things_total", "Things.\nSecond line \\ here.", ["zone", "kind"], registry=r)
        c.labels("a", ODD).inc()
        c.labels("a", ODD).inc(2.5)
        c.labels("b", "").inc()

    assert ours.text().decode("utf-8") == _library(build)


def test_unlabelled_counter_starts_at_zero_like_the_librarys() -> None:
    ours = CounterFamily("cycles", "Cycles.")
    assert ours.text().decode("utf-8") == _library(lambda r: Counter("cycles", "Cycles.", registry=r))
    ours.inc(())
    assert ours.value(()) == 1.0


@pytest.mark.parametrize("buckets", [[1.0, 2.5, 5.0, 1e6], Histogram.DEFAULT_BUCKETS])
def test_histogram_text_is_the_librarys(buckets: list[float]) -> None:
    observations = [(("q1", "urgent"), 0.3), (("q1", "urgent"), 2.5), (("q2", ODD), 7.0), (("q1", "urgent"), 5e6)]
    ours = HistogramFamily("wait_seconds", "Waits.", ["queue", "class"], buckets=buckets)
    for labels, value in observations:
        ours.observe(labels, value)

    def build(r: CollectorRegistry) -> None:
        h = Histogram("wait_seconds", "Waits.", ["queue", "class"], buckets=buckets, registry=r)
        for labels, value in observations:
            h.labels(*labels).observe(value)

    assert ours.text().decode("utf-8") == _library(build)


def test_gauge_text_is_the_librarys_and_forgets_label_sets_no_longer_read() -> None:
    ours = GaugeFamily("pending", "Pending.", ["cluster_queue", "status"])
    samples = [(("cq-1", "active"), 3.0), ((ODD, "inadmissible"), float("inf")), (("cq-2", "active"), 0.5)]

    def build(r: CollectorRegistry) -> None:
        g = Gauge("pending", "Pending.", ["cluster_queue", "status"], registry=r)
        for labels, value in samples:
            g.labels(*labels).set(value)

    assert ours.text(samples) == _library(build)
    assert ours.text(samples[:1]) == _library(lambda r: Gauge(
        "pending", "Pending.", ["cluster_queue", "status"], registry=r).labels("cq-1", "active").set(3.0))


@pytest.mark.parametrize("labels", [("only-one",), ("a", "b", "c"), ("a", 1)])
def test_wrong_label_values_are_refused_and_change_nothing(labels: tuple[object, ...]) -> None:
    counter = CounterFamily("things", "Things.", ["zone", "kind"])
    histogram = HistogramFamily("waits", "Waits.", ["zone", "kind"], buckets=[1.0])
    with pytest.raises(ValueError, match="things_total: expected 2 string label values"):
        counter.inc(labels)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="waits: expected 2 string label values"):
        histogram.observe(labels, 1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="only goes up"):
        counter.inc(("a", "b"), -1.0)
    assert b"things_total{" not in counter.text()
    assert b"waits_bucket" not in histogram.text()


def test_a_scrape_writes_only_the_label_sets_that_changed() -> None:
    family = HistogramFamily("waits", "Waits.", ["queue"], buckets=[1.0, 10.0])
    for i in range(100):
        family.observe((f"q{i}",), 0.5)
    first = family.text()
    assert family.written == 100
    assert family.text() is first  # nothing changed: the same text, not even joined again
    family.observe(("q7",), 5.0)
    family.observe(("q7",), 50.0)
    Scrape(family.text().decode("utf-8"))  # still parses
    assert family.written == 101
    assert Scrape(family.text().decode("utf-8")).value("waits_count", queue="q7") == 3.0


def test_registry_text_sources_join_the_scrape_and_names_stay_unique(caplog: pytest.LogCaptureFixture) -> None:
    registry = new_registry()
    counter = CounterFamily("things", "Things.", ["zone"])
    counter.inc(("a",))
    registry.add_text("things", [counter.name], counter.text)
    Counter("plain", "A library counter.", registry=registry)
    with pytest.raises(ValueError, match=r"duplicate metric families \['things_total'\]"):
        registry.add_text("again", ["things_total"], counter.text)
    with pytest.raises(ValueError, match=r"duplicate metric families \['plain'\]"):
        registry.add_text("clash", ["plain"], counter.text)

    def broken() -> bytes:
        raise RuntimeError("boom")

    registry.add_text("broken", ["broken_family"], broken)
    with caplog.at_level(logging.ERROR):
        scrape = Scrape.of(registry)
    assert scrape.value("things_total", zone="a") == 1.0
    assert scrape.value("plain_total") == 0.0
    assert "process_cpu_seconds_total" in scrape.names()
    assert "collecting the broken metrics failed" in caplog.text
    assert render(registry).count(b"# TYPE things_total counter") == 1


def test_flush_writes_a_big_change_in_slices_with_the_event_loop_running_between() -> None:
    registry = new_registry()
    family = HistogramFamily("waits", "Waits.", ["queue"], buckets=[1.0, 10.0])
    registry.add_families("waits", [family])
    for i in range(2_000):
        family.observe((f"q{i}",), 0.5)
    turns = 0

    async def scrape() -> bytes:
        nonlocal turns
        stop = asyncio.Event()

        async def other_work() -> None:  # what the loop does meanwhile (scheduling cycles, streams)
            nonlocal turns
            for _ in range(100_000):  # bounded
                if stop.is_set():
                    return
                turns += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(other_work())
        await asyncio.sleep(0)
        await registry.flush(slice_seconds=0.0)  # one batch of label sets a turn
        stop.set()
        await task
        return render(registry)

    body = asyncio.run(scrape())
    assert not family.changed() and family.written == 2_000
    assert turns > 2_000 // 64  # the loop ran between the slices
    assert Scrape(body.decode("utf-8")).value("waits_count", queue="q1999") == 1.0
