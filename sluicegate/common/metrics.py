"""Prometheus plumbing shared by both daemons, on ``prometheus_client``.

Each daemon builds its own :class:`~prometheus_client.CollectorRegistry`
(never the library's global one), so several controllers or agents can live
in one test process. Counters and histograms are the library's own types,
updated where things happen; values that already live elsewhere (queue
lengths, quota, node usage) are read at scrape time by a
:class:`ScrapeCollector`, so they never go stale and cost nothing between
scrapes. Everything runs on the event loop, so nothing here locks.

Families with a series per ClusterQueue or LocalQueue (thousands of label
sets, each histogram 17 lines) do not go through the library's per-child
objects: a scrape would build a Sample for every line and format it again
each time, seconds of Python on the event loop at 1,000 queues.
:class:`CounterFamily` and :class:`HistogramFamily` keep plain numbers per
label set and the exposition lines of each set, rebuilt only for the sets
that changed since the last scrape; :class:`GaugeFamily` writes a scrape-time
gauge family straight to text. They are added to a :class:`Registry` with
:meth:`Registry.add_text`, and :func:`render` appends them to the library's
output in the same text format.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from bisect import bisect_left
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Final

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

__all__ = [
    "CONTENT_TYPE",
    "CounterFamily",
    "HistogramFamily",
    "GaugeFamily",
    "Registry",
    "ScrapeCollector",
    "gauge_family",
    "new_registry",
    "render",
]

logger = logging.getLogger(__name__)

FLUSH_SLICE_SECONDS: Final = 0.002
"""How long :meth:`Registry.flush` writes before giving the event loop a turn."""

_FLUSH_BATCH: Final = 32

# The library's number format (Go's: +Inf, NaN, 1e+06), which it leaves unannotated.
_number: Final[Callable[[float], str]] = floatToGoString

CONTENT_TYPE: Final = CONTENT_TYPE_LATEST
"""The Content-Type of :func:`render`'s output, as the library names it."""


class Registry(CollectorRegistry):
    """The library's registry plus text sources (:meth:`add_text`) that :func:`render` appends."""

    def __init__(self) -> None:
        super().__init__(auto_describe=True)
        self._texts: list[tuple[str, Callable[[], bytes]]] = []
        self._text_names: set[str] = set()
        self._families: list[_Labelled] = []
        self._prepares: list[Callable[[float], Awaitable[None]]] = []

    def add_families(self, what: str, families: Sequence[_Labelled]) -> None:
        """Counter and histogram families to scrape, in this order (see :meth:`add_text`)."""
        families = list(families)
        self.add_text(what, [f.name for f in families], lambda: b"".join([f.text() for f in families]))
        self._families += families

    async def flush(self, slice_seconds: float = FLUSH_SLICE_SECONDS) -> None:
        """Write the label sets that changed since the last scrape in slices of ``slice_seconds``, giving
        the event loop a turn between slices, so that a scrape after much change never holds it long.

        The render that follows writes whatever changed during the last turn.
        Then each text source's ``prepare`` runs (see :meth:`add_text`).
        """
        await self._flush_families(slice_seconds)
        for prepare in self._prepares:
            try:
                await prepare(slice_seconds)
            except Exception:
                logger.exception("preparing metrics failed; the scrape reads them in one go")

    async def _flush_families(self, slice_seconds: float) -> None:
        todo = sum(len(f.dirty) for f in self._families)
        for _ in range(todo // _FLUSH_BATCH + 2):  # bounded: each slice writes at least one batch
            families = [f for f in self._families if f.dirty]
            if not families:
                return
            deadline = time.perf_counter() + slice_seconds
            for family in families:
                family.write_some(_FLUSH_BATCH)  # at least one batch a slice, however short
                while family.dirty and time.perf_counter() < deadline:
                    family.write_some(_FLUSH_BATCH)
                if time.perf_counter() >= deadline:
                    break
            await asyncio.sleep(0)

    def add_text(self, what: str, names: Iterable[str], source: Callable[[], bytes],
                 prepare: Callable[[float], Awaitable[None]] | None = None) -> None:
        """Append ``source()`` (exposition text of the families ``names``, UTF-8) to every scrape.

        ``prepare(slice_seconds)``, when given, is awaited by :meth:`flush`
        before a scrape served over HTTP: it may gather what ``source`` will
        need in slices, giving the event loop a turn between them.

        ``what`` names the source in the log when it fails; a name already
        added, or one a collector of the registry has, is refused.
        """
        names = list(names)
        taken = self._text_names.intersection(names) | {
            n for n in names if n in self._names_to_collectors or f"{n}_total" in self._names_to_collectors}
        if taken:
            raise ValueError(f"duplicate metric families {sorted(taken)} in {what}")
        self._text_names.update(names)
        self._texts.append((what, source))
        if prepare is not None:
            self._prepares.append(prepare)

    def texts(self) -> list[bytes]:
        """Each text source's output; a failing one is logged and left out of this scrape."""
        out = []
        for what, source in self._texts:
            try:
                out.append(source())
            except Exception:
                logger.exception("collecting the %s metrics failed; they are left out of this scrape", what)
        return out


def new_registry() -> Registry:
    """A registry for one daemon, with the process_* and python_info series already in it."""
    # Kueue's and the kubelet's series have no *_created companions, and a
    # dashboard does not need them: one switch for the whole process.
    disable_created_metrics()  # type: ignore[no-untyped-call]  # the library leaves it unannotated
    registry = Registry()
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    return registry


def render(registry: CollectorRegistry) -> bytes:
    """The registry in the Prometheus text format (:data:`CONTENT_TYPE`), its text sources last."""
    head = generate_latest(registry)
    if not isinstance(registry, Registry):
        return head
    return b"".join([head, *registry.texts()])


def _escape(value: str) -> str:
    """A label value as the text format quotes it."""
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r'\"')


def _header(name: str, documentation: str, kind: str) -> str:
    doc = documentation.replace("\\", r"\\").replace("\n", r"\n")
    return f"# HELP {name} {doc}\n# TYPE {name} {kind}\n"


class _LabelText:
    """Label sets of one family written as the library writes them: names sorted, values escaped."""

    def __init__(self, labels: Sequence[str], extra: str = "") -> None:
        names = [*labels, extra] if extra else list(labels)
        self.count = len(labels)
        self._order = sorted(range(len(names)), key=lambda i: names[i])
        self._names = names

    def __call__(self, values: Sequence[str], extra: str = "") -> str:
        """``{a="x",b="y"}`` for ``values`` (and the extra label's value, when the family has one)."""
        if not self._names:
            return ""
        full = [*values, extra] if len(self._names) > len(values) else values
        parts = [f'{self._names[i]}="{_escape(full[i])}"' for i in self._order]
        return "{" + ",".join(parts) + "}"

    def around(self, values: Sequence[str]) -> tuple[str, str]:
        """For a family with an extra label: the text before its value (``{a="x",le="``) and after it."""
        names, extra = self._names, len(self._names) - 1
        parts = [f'{names[i]}="{_escape(values[i])}"' for i in self._order if i != extra]
        at = self._order.index(extra)
        return "{" + "".join(p + "," for p in parts[:at]) + f'{names[extra]}="', '"' + "".join(
            "," + p for p in parts[at:]) + "}"

    def check(self, family: str, values: Sequence[str]) -> None:
        if len(values) != self.count or not all(isinstance(v, str) for v in values):
            raise ValueError(f"{family}: expected {self.count} string label values, got {values!r}")


class _Labelled:
    """Per label set: plain numbers, and their exposition lines kept until the set changes."""

    def __init__(self, name: str, documentation: str, labels: Sequence[str], kind: str) -> None:
        self.name = name
        self._header = _header(name, documentation, kind)
        self._lines: dict[tuple[str, ...], bytes] = {}
        self._dirty: set[tuple[str, ...]] = set()
        self._text = b""
        # Label sets written to text since the family was made: what scrapes have cost it.
        self.written = 0

    def _render(self, key: tuple[str, ...]) -> str:
        raise NotImplementedError

    @property
    def dirty(self) -> set[tuple[str, ...]]:
        """The label sets changed since they were last written."""
        return self._dirty

    def write_some(self, limit: int) -> None:
        """Write up to ``limit`` changed label sets (the family's text is joined again at the next scrape)."""
        dirty, lines = self._dirty, self._lines
        for _ in range(min(limit, len(dirty))):
            key = dirty.pop()
            lines[key] = self._render(key).encode("utf-8")
            self.written += 1
        self._text = b""

    def text(self) -> bytes:
        """The family's exposition (UTF-8): only the label sets that changed since they were last written
        are written again, and an unchanged family is not even joined again."""
        if self._dirty:
            self.write_some(len(self._dirty))
        if not self._text:
            self._text = b"".join([self._header.encode("utf-8"), *self._lines.values()])
        return self._text


class CounterFamily(_Labelled):
    """A counter with labels, the ``_total`` suffix added as the library adds it; zero-less unless unlabelled."""

    def __init__(self, name: str, documentation: str, labels: Sequence[str] = ()) -> None:
        super().__init__(f"{name.removesuffix('_total')}_total", documentation, labels, "counter")
        self._labels = _LabelText(labels)
        self._values: dict[tuple[str, ...], float] = {}
        if not labels:
            self.inc((), 0.0)

    def inc(self, labels: tuple[str, ...], amount: float = 1.0) -> None:
        if amount < 0:
            raise ValueError(f"{self.name}: a counter only goes up, got {amount!r}")
        values = self._values
        if labels not in values:
            self._labels.check(self.name, labels)
            values[labels] = 0.0
            self._lines[labels] = b""  # its place: label sets are written in the order first seen
        values[labels] += amount
        self._dirty.add(labels)

    def value(self, labels: tuple[str, ...]) -> float:
        return self._values.get(labels, 0.0)

    def _render(self, key: tuple[str, ...]) -> str:
        return f"{self.name}{self._labels(key)} {_number(self._values[key])}\n"


class HistogramFamily(_Labelled):
    """A histogram with labels: per label set one count per bucket and the sum."""

    def __init__(self, name: str, documentation: str, labels: Sequence[str],
                 buckets: Sequence[float] = Histogram.DEFAULT_BUCKETS) -> None:
        super().__init__(name, documentation, labels, "histogram")
        bounds = sorted(float(b) for b in buckets)
        if not bounds or bounds[-1] != float("inf"):
            bounds.append(float("inf"))
        self._bounds = bounds
        self._le = [_number(b) for b in bounds]
        self._labels = _LabelText(labels)
        self._bucket_labels = _LabelText(labels, "le")
        # label set -> [count in each bucket (not cumulative)..., sum]
        self._state: dict[tuple[str, ...], list[float]] = {}

    def observe(self, labels: tuple[str, ...], value: float) -> None:
        state = self._state.get(labels)
        if state is None:
            self._labels.check(self.name, labels)
            state = self._state[labels] = [0.0] * (len(self._bounds) + 1)
            self._lines[labels] = b""  # its place: label sets are written in the order first seen
        state[bisect_left(self._bounds, value)] += 1
        state[-1] += value
        self._dirty.add(labels)

    def observe_counting(self, labels: tuple[str, ...], value: float, counter: CounterFamily) -> None:
        """:meth:`observe`, and ``counter.inc(labels)``: a counter of what this histogram observes (the
        controller counts each admission and observes its wait with the same labels) in one call."""
        state = self._state.get(labels)
        if state is None:
            self.observe(labels, value)
        else:  # observe's body, without a second call
            state[bisect_left(self._bounds, value)] += 1
            state[-1] += value
            self._dirty.add(labels)
        values = counter._values
        if labels in values:
            values[labels] += 1.0
            counter._dirty.add(labels)
        else:
            counter.inc(labels)

    def _render(self, key: tuple[str, ...]) -> str:
        state = self._state[key]
        before, after = self._bucket_labels.around(key)
        bucket = f"{self.name}_bucket{before}"
        out = []
        total = 0
        for le, n in zip(self._le, state, strict=False):
            total += int(n)
            out.append(f'{bucket}{le}{after} {_count(total)}\n')
        plain = self._labels(key)
        out.append(f"{self.name}_count{plain} {_count(total)}\n{self.name}_sum{plain} {_number(state[-1])}\n")
        return "".join(out)


def _gauge_number(value: float) -> str:
    """A gauge's value in the library's number format, whole numbers (most of them) without its detour."""
    value = float(value)
    if value.is_integer() and -1_000_000 < value < 1_000_000 and (value or math.copysign(1.0, value) > 0):
        return f"{int(value)}.0"
    return _number(value)


def _count(n: int) -> str:
    """A whole count in the library's number format (it writes 1e+06 from a million on)."""
    return f"{n}.0" if n < 1_000_000 else _number(float(n))


class GaugeFamily:
    """A gauge family whose samples are read at scrape time, written straight to exposition text.

    The line prefix (name and label text) of each label set is kept from one
    scrape to the next, so a scrape formats only the numbers; label sets
    absent from a scrape are forgotten.
    """

    def __init__(self, name: str, documentation: str, labels: Sequence[str]) -> None:
        self.name = name
        self._header = _header(name, documentation, "gauge")
        self._labels = _LabelText(labels)
        self._prefix: dict[tuple[str, ...], str] = {}

    def text(self, samples: Iterable[tuple[Sequence[str], float]]) -> str:
        old = self._prefix
        new: dict[tuple[str, ...], str] = {}
        out = [self._header]
        for values, value in samples:
            key = tuple(values)
            prefix = old.get(key)
            if prefix is None:
                self._labels.check(self.name, key)
                prefix = f"{self.name}{self._labels(key)} "
            new[key] = prefix
            out.append(f"{prefix}{_gauge_number(value)}\n")
        self._prefix = new
        return "".join(out)


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
