"""A small Prometheus registry: counters, gauges, and the text format 0.0.4.

Only what the daemons need: counters and gauges with labels, and gauges
whose values are computed when scraped (queue lengths, node usage) so they
never go stale. Everything runs on the event loop, so nothing here locks.

The rendering is deterministic -- families sorted by name, series by label
values -- so tests compare whole documents and scrapes diff cleanly.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Final

__all__ = [
    "CONTENT_TYPE",
    "CallbackGauge",
    "Counter",
    "CounterSeries",
    "Gauge",
    "GaugeSeries",
    "LabelValues",
    "MetricError",
    "Registry",
]

logger = logging.getLogger(__name__)

CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"

LabelValues = tuple[str, ...]
"""One series' label values, in the order of its family's label names."""

_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


class MetricError(Exception):
    """A metric was declared or updated in a way the exposition format cannot carry."""

    def __init__(self, *, metric: str, problem: str) -> None:
        self.metric = metric
        self.problem = problem
        super().__init__(f"metric {metric!r}: {problem}")


class _Family:
    """Name, help text and label names shared by every kind of metric."""

    kind: str = ""

    def __init__(self, name: str, description: str, labelnames: Sequence[str]) -> None:
        if not _METRIC_NAME.fullmatch(name):
            raise MetricError(metric=name, problem="the name must match [a-zA-Z_:][a-zA-Z0-9_:]*")
        for label in labelnames:
            if not _LABEL_NAME.fullmatch(label) or label.startswith("__"):
                raise MetricError(
                    metric=name,
                    problem=f"label name {label!r} must match [a-zA-Z_][a-zA-Z0-9_]* "
                    "and not start with '__' (reserved by Prometheus)",
                )
        if len(set(labelnames)) != len(labelnames):
            raise MetricError(metric=name, problem=f"label names repeat: {list(labelnames)}")
        self.name = name
        self.description = description
        self.labelnames: tuple[str, ...] = tuple(labelnames)

    def collect(self) -> Iterable[tuple[LabelValues, float]]:
        raise NotImplementedError


class _Stored(_Family):
    """A family whose values are kept here and updated by the code that observes them."""

    def __init__(self, name: str, description: str, labelnames: Sequence[str]) -> None:
        super().__init__(name, description, labelnames)
        self._values: dict[LabelValues, float] = {}
        if not self.labelnames:
            # An unlabelled metric is one series that exists from the start, so
            # a scrape shows 0 rather than nothing before the first event.
            self._values[()] = 0.0

    def _key(self, values: Mapping[str, str]) -> LabelValues:
        """The series key for these labels, validated; does not create the series."""
        if set(values) != set(self.labelnames):
            raise MetricError(
                metric=self.name,
                problem=f"wanted labels {sorted(self.labelnames)}, got {sorted(values)}",
            )
        for label, value in values.items():
            if not isinstance(value, str):
                raise MetricError(
                    metric=self.name,
                    problem=f"label {label!r} must be a string, got {type(value).__name__}",
                )
        return tuple(values[label] for label in self.labelnames)

    def _series(self, values: Mapping[str, str]) -> LabelValues:
        # Selecting a series makes it visible at 0, as the official clients do,
        # so a rate() over it starts from the moment it was first mentioned.
        key = self._key(values)
        self._values.setdefault(key, 0.0)
        return key

    def _unlabelled_key(self) -> LabelValues:
        if self.labelnames:
            raise MetricError(
                metric=self.name,
                problem=f"has labels {list(self.labelnames)}; select a series with .labels(...) first",
            )
        return ()

    def remove(self, **labels: str) -> None:
        """Drop one series, e.g. when the ClusterQueue it describes is deleted."""
        self._values.pop(self._key(labels), None)

    def clear(self) -> None:
        """Drop every labelled series."""
        if self.labelnames:
            self._values.clear()

    def value(self, **labels: str) -> float:
        """The current value of one series (0 for a series never touched)."""
        key = self._key(labels) if labels or self.labelnames else ()
        return self._values.get(key, 0.0)

    def collect(self) -> Iterable[tuple[LabelValues, float]]:
        return self._values.items()


def _check_amount(metric: str, amount: float) -> float:
    if isinstance(amount, bool) or not isinstance(amount, (int, float)):
        raise MetricError(metric=metric, problem=f"wanted a number, got {amount!r}")
    return float(amount)


class CounterSeries:
    """One labelled series of a counter."""

    __slots__ = ("_counter", "_key")

    def __init__(self, counter: Counter, key: LabelValues) -> None:
        self._counter = counter
        self._key = key

    def inc(self, amount: float = 1) -> None:
        self._counter._add(self._key, amount)


class Counter(_Stored):
    """A value that only goes up; by Prometheus convention its name ends in ``_total``."""

    kind = "counter"

    def labels(self, **labels: str) -> CounterSeries:
        return CounterSeries(self, self._series(labels))

    def inc(self, amount: float = 1) -> None:
        self._add(self._unlabelled_key(), amount)

    def _add(self, key: LabelValues, amount: float) -> None:
        delta = _check_amount(self.name, amount)
        if delta < 0:
            raise MetricError(metric=self.name, problem=f"a counter cannot decrease, got inc({amount!r})")
        # A series removed while a CounterSeries handle was held comes back at 0.
        self._values[key] = self._values.get(key, 0.0) + delta


class GaugeSeries:
    """One labelled series of a gauge."""

    __slots__ = ("_gauge", "_key")

    def __init__(self, gauge: Gauge, key: LabelValues) -> None:
        self._gauge = gauge
        self._key = key

    def set(self, value: float) -> None:
        self._gauge._set(self._key, value)

    def inc(self, amount: float = 1) -> None:
        self._gauge._add(self._key, amount)

    def dec(self, amount: float = 1) -> None:
        self._gauge._add(self._key, -_check_amount(self._gauge.name, amount))


class Gauge(_Stored):
    """A value that goes up and down."""

    kind = "gauge"

    def labels(self, **labels: str) -> GaugeSeries:
        return GaugeSeries(self, self._series(labels))

    def set(self, value: float) -> None:
        self._set(self._unlabelled_key(), value)

    def inc(self, amount: float = 1) -> None:
        self._add(self._unlabelled_key(), amount)

    def dec(self, amount: float = 1) -> None:
        self._add(self._unlabelled_key(), -_check_amount(self.name, amount))

    def _set(self, key: LabelValues, value: float) -> None:
        self._values[key] = _check_amount(self.name, value)

    def _add(self, key: LabelValues, amount: float) -> None:
        self._values[key] = self._values.get(key, 0.0) + _check_amount(self.name, amount)


class CallbackGauge(_Family):
    """A gauge computed at scrape time from state that already lives elsewhere.

    ``collect`` returns (label values, value) pairs, label values in
    ``labelnames`` order: ``some_dict.items()`` does, and an unlabelled gauge
    returns ``[((), value)]``. Pairs rather than a mapping because a mapping's
    key type is invariant, so a ``dict[tuple[str, str], int]`` would not
    type-check as one. It runs on the event loop during every scrape, so it
    must be a quick in-memory read.
    """

    kind = "gauge"

    def __init__(
        self,
        name: str,
        description: str,
        labelnames: Sequence[str],
        collect: Callable[[], Iterable[tuple[LabelValues, float]]],
    ) -> None:
        super().__init__(name, description, labelnames)
        self._collect = collect

    def collect(self) -> Iterable[tuple[LabelValues, float]]:
        samples = list(self._collect())
        for key, value in samples:
            if (
                not isinstance(key, tuple)
                or len(key) != len(self.labelnames)
                or not all(isinstance(part, str) for part in key)
            ):
                raise MetricError(
                    metric=self.name,
                    problem=f"collect returned key {key!r}; wanted a tuple of "
                    f"{len(self.labelnames)} strings for labels {list(self.labelnames)}",
                )
            _check_amount(self.name, value)
        return samples


class Registry:
    """The metrics one daemon exposes on ``/metrics``; names are unique within it."""

    def __init__(self) -> None:
        self._families: dict[str, _Family] = {}

    def _register(self, family: _Family) -> None:
        if family.name in self._families:
            raise MetricError(metric=family.name, problem="is already registered in this registry")
        self._families[family.name] = family

    def counter(self, name: str, description: str, *, labelnames: Sequence[str] = ()) -> Counter:
        counter = Counter(name, description, labelnames)
        self._register(counter)
        return counter

    def gauge(self, name: str, description: str, *, labelnames: Sequence[str] = ()) -> Gauge:
        gauge = Gauge(name, description, labelnames)
        self._register(gauge)
        return gauge

    def callback_gauge(
        self,
        name: str,
        description: str,
        *,
        collect: Callable[[], Iterable[tuple[LabelValues, float]]],
        labelnames: Sequence[str] = (),
    ) -> CallbackGauge:
        gauge = CallbackGauge(name, description, labelnames, collect)
        self._register(gauge)
        return gauge

    def render(self) -> str:
        """The whole registry in the Prometheus text exposition format 0.0.4."""
        return "".join(self._render_lines())

    def _render_lines(self) -> Iterator[str]:
        for name in sorted(self._families):
            family = self._families[name]
            yield f"# HELP {name} {_escape_help(family.description)}\n"
            yield f"# TYPE {name} {family.kind}\n"
            try:
                values = dict(family.collect())
            except Exception:
                # One broken callback should not cost operators every other
                # metric: the family is exposed without samples, and the log
                # says which one and why.
                logger.exception("collecting metric %r failed; its samples are left out of this scrape", name)
                continue
            for key in sorted(values):
                yield f"{name}{_render_labels(family.labelnames, key)} {_render_value(values[key])}\n"


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _escape_label_value(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _render_labels(names: tuple[str, ...], values: LabelValues) -> str:
    if not names:
        return ""
    pairs = ",".join(
        f'{name}="{_escape_label_value(value)}"' for name, value in zip(names, values, strict=True)
    )
    return "{" + pairs + "}"


def _render_value(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer() and abs(value) < 2**53:
        # Counts are the common case; "3" reads better than "3.0" and parses the same.
        return str(int(value))
    return repr(float(value))
