"""Prometheus plumbing shared by both daemons, on ``prometheus_client``.

Each daemon builds its own :class:`~prometheus_client.CollectorRegistry`
(never the library's global one), so several controllers or agents can live
in one test process. Counters and histograms are the library's own types,
updated where things happen; values that already live elsewhere (queue
lengths, quota, node usage) are read at scrape time by a
:class:`ScrapeCollector`, so they never go stale and cost nothing between
scrapes. Everything runs on the event loop, so nothing here locks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Final

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = [
    "CONTENT_TYPE",
    "ScrapeCollector",
    "gauge_family",
    "new_registry",
    "render",
]

logger = logging.getLogger(__name__)

CONTENT_TYPE: Final = CONTENT_TYPE_LATEST
"""The Content-Type of :func:`render`'s output, as the library names it."""


def new_registry() -> CollectorRegistry:
    """A registry for one daemon, with the process_* and python_info series already in it."""
    # Kueue's and the kubelet's series have no *_created companions, and a
    # dashboard does not need them: one switch for the whole process.
    disable_created_metrics()  # type: ignore[no-untyped-call]  # the library leaves it unannotated
    registry = CollectorRegistry(auto_describe=True)
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    return registry


def render(registry: CollectorRegistry) -> bytes:
    """The registry in the Prometheus text format (:data:`CONTENT_TYPE`)."""
    return generate_latest(registry)


def gauge_family(
    name: str, documentation: str, labels: Sequence[str], samples: Iterable[tuple[Sequence[str], float]]
) -> GaugeMetricFamily:
    """A gauge family holding ``samples``: (label values in ``labels`` order, value) pairs."""
    family = GaugeMetricFamily(name, documentation, labels=list(labels))
    for values, value in samples:
        family.add_metric(list(values), float(value))
    return family


class ScrapeCollector(Collector):
    """Families computed at scrape time by ``collect``.

    ``describe`` returns the same families without samples, so the registry
    knows their names at registration (and refuses a duplicate) without
    calling ``collect`` then. One failing read should not cost operators
    every other series: it is logged with its name and the scrape goes on
    without it.
    """

    def __init__(self, name: str, collect: Callable[[], Iterable[Metric]], describe: Callable[[], Iterable[Metric]]):
        self._name = name
        self._collect = collect
        self._describe = describe

    def describe(self) -> Iterable[Metric]:
        return list(self._describe())

    def collect(self) -> Iterable[Metric]:
        try:
            return list(self._collect())
        except Exception:
            logger.exception("collecting the %s metrics failed; they are left out of this scrape", self._name)
            return []
