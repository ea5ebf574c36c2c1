"""The shared Prometheus plumbing: per-daemon registries, scrape-time collectors, rendering."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from prometheus_client import Counter
from prometheus_client.core import Metric

from sluicegate.common.metrics import ScrapeCollector, gauge_family, new_registry
from tests.unit.metrics.exposition import Scrape


def _queue_lengths(lengths: dict[str, int]) -> Iterator[Metric]:
    yield gauge_family("demo_queue_length", "Items waiting.", ("queue",),
                       [((name,), float(n)) for name, n in sorted(lengths.items())])


def test_each_registry_is_its_own_and_has_the_process_series() -> None:
    first, second = new_registry(), new_registry()
    Counter("demo_things_total", "Things.", registry=first).inc(3)
    one, two = Scrape.of(first), Scrape.of(second)
    assert one.value("demo_things_total") == 3.0
    assert two.value("demo_things_total") is None
    for scrape in (one, two):
        assert scrape.type_of("process_cpu_seconds") == "counter"
        assert scrape.type_of("process_resident_memory_bytes") == "gauge"
        assert "python_info" in scrape.families


def test_counters_have_no_created_series() -> None:
    registry = new_registry()
    Counter("demo_things_total", "Things.", ["kind"], registry=registry).labels("a").inc()
    assert not [name for name in Scrape.of(registry).names() if name.endswith("_created")]


def test_a_scrape_collector_is_read_at_every_scrape() -> None:
    registry = new_registry()
    lengths = {"a": 1}
    registry.register(ScrapeCollector("demo", lambda: _queue_lengths(lengths), lambda: _queue_lengths({})))
    before = Scrape.of(registry).series("demo_queue_length")
    lengths.update(a=4, b=2)
    after = Scrape.of(registry).series("demo_queue_length")
    assert (before, after) == ({(("queue", "a"),): 1.0}, {(("queue", "a"),): 4.0, (("queue", "b"),): 2.0})


def test_a_failing_collector_costs_only_its_own_series(caplog: pytest.LogCaptureFixture) -> None:
    registry = new_registry()
    Counter("demo_things_total", "Things.", registry=registry).inc()

    def broken() -> Iterator[Metric]:
        raise KeyError("queue vanished")

    registry.register(ScrapeCollector("demo", broken, lambda: _queue_lengths({})))
    with caplog.at_level(logging.ERROR, logger="sluicegate.common.metrics"):
        scrape = Scrape.of(registry)
    assert scrape.value("demo_things_total") == 1.0
    assert "demo_queue_length" not in scrape.families
    assert "collecting the demo metrics failed" in caplog.text


def test_a_name_taken_twice_is_refused_at_registration() -> None:
    registry = new_registry()
    registry.register(ScrapeCollector("demo", lambda: _queue_lengths({}), lambda: _queue_lengths({})))
    with pytest.raises(ValueError, match="demo_queue_length"):
        registry.register(ScrapeCollector("again", lambda: _queue_lengths({}), lambda: _queue_lengths({})))
