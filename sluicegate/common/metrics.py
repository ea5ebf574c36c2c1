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

The controller counts on its write path (four writes per workload), so
counting is kept to adding to numbers: a hook may hold a label set's numbers
(:meth:`HistogramFamily.child`, :meth:`CounterFamily.cell`) and add to them
directly, nothing marks a set as changed (a scrape compares each set's count
with the one it last wrote), and the text of label sets is kept per set of
label names, shared by the families that have them. A scrape is joined once,
from every set's lines: tens of megabytes at 1,000 ClusterQueues.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from bisect import bisect_left
from collections.abc import Awaitable, Callable, Iterable, Sequence
from itertools import accumulate, compress
from operator import itemgetter, ne
from typing import Final, TypeVar, cast

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
        self._texts: list[tuple[str, Callable[[], list[bytes]]]] = []
        self._text_names: set[str] = set()
        self._families: list[_Labelled] = []
        self._prepares: list[Callable[[float], Awaitable[None]]] = []

    def add_families(self, what: str, families: Sequence[_Labelled]) -> None:
        """Counter and histogram families to scrape, in this order (see :meth:`add_text`)."""
        families = list(families)
        def chunks() -> list[bytes]:
            out: list[bytes] = []
            for family in families:
                out += family.chunks()  # tens of thousands of pieces: extended in C, not one by one
            return out

        self._add(what, [f.name for f in families], chunks)
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
        deadline = time.perf_counter() + slice_seconds
        for family in self._families:
            # What changed during a turn given away below is written by the render that follows.
            changed = family.changed()
            for start in range(0, len(changed), _FLUSH_BATCH):
                family.write(changed[start:start + _FLUSH_BATCH])  # at least one batch a slice, however short
                if time.perf_counter() >= deadline:
                    await asyncio.sleep(0)
                    deadline = time.perf_counter() + slice_seconds

    def add_text(self, what: str, names: Iterable[str], source: Callable[[], bytes],
                 prepare: Callable[[float], Awaitable[None]] | None = None) -> None:
        """Append ``source()`` (exposition text of the families ``names``, UTF-8) to every scrape.

        ``prepare(slice_seconds)``, when given, is awaited by :meth:`flush`
        before a scrape served over HTTP: it may gather what ``source`` will
        need in slices, giving the event loop a turn between them.

        ``what`` names the source in the log when it fails; a name already
        added, or one a collector of the registry has, is refused.
        """
        self._add(what, list(names), lambda: [source()])
        if prepare is not None:
            self._prepares.append(prepare)

    def _add(self, what: str, names: list[str], chunks: Callable[[], list[bytes]]) -> None:
        taken = self._text_names.intersection(names) | {
            n for n in names if n in self._names_to_collectors or f"{n}_total" in self._names_to_collectors}
        if taken:
            raise ValueError(f"duplicate metric families {sorted(taken)} in {what}")
        self._text_names.update(names)
        self._texts.append((what, chunks))

    def texts(self) -> list[bytes]:
        """The text sources' output in pieces, for :func:`render` to join once (tens of megabytes at 1,000
        ClusterQueues); a failing source is logged and left out of this scrape."""
        out: list[bytes] = []
        for what, chunks in self._texts:
            try:
                out += chunks()
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
    """Label sets of one family written as the library writes them: names sorted, values escaped.

    Families with the same label names share one (see :func:`_label_text`),
    which keeps the text of the label sets it wrote: at 1,000 ClusterQueues
    a first scrape writes the same label set for a dozen families.
    """

    def __init__(self, labels: Sequence[str], extra: str = "", keep: bool = True) -> None:
        names = [*labels, extra] if extra else list(labels)
        self._keep = keep
        self.count = len(labels)
        self._order = sorted(range(len(names)), key=lambda i: names[i])
        self._names = names
        self._kept: dict[tuple[str, ...], str] = {}
        self._kept_around: dict[tuple[str, ...], tuple[bytes, bytes]] = {}
        self._kept_bytes: dict[tuple[str, ...], bytes] = {}

    def __call__(self, values: Sequence[str], extra: str = "") -> str:
        """``{a="x",b="y"}`` for ``values`` (and the extra label's value, when the family has one)."""
        if not self._names:
            return ""
        full: Sequence[str] = [*values, extra] if len(self._names) > len(values) else values
        if full is values and self._keep and isinstance(values, tuple):
            kept = self._kept.get(values)
            if kept is None:
                kept = "{" + ",".join([f'{self._names[i]}="{_escape(values[i])}"' for i in self._order]) + "}"
                _keep(self._kept, values, kept)
            return kept
        return "{" + ",".join([f'{self._names[i]}="{_escape(full[i])}"' for i in self._order]) + "}"

    def text_of(self, values: tuple[str, ...]) -> bytes:
        """:meth:`__call__` for ``values`` (no extra label), UTF-8."""
        kept = self._kept_bytes.get(values)
        if kept is None:
            kept = self(values).encode()
            _keep(self._kept_bytes, values, kept)
        return kept

    def around(self, values: tuple[str, ...]) -> tuple[bytes, bytes]:
        """For a family with an extra label: the text before its value (``{a="x",le="``) and after it up to the
        sample's number (``",b="y"} ``), UTF-8."""
        kept = self._kept_around.get(values)
        if kept is not None:
            return kept
        names, extra = self._names, len(self._names) - 1
        parts = [f'{names[i]}="{_escape(values[i])}"' for i in self._order if i != extra]
        at = self._order.index(extra)
        text = ("{" + "".join(p + "," for p in parts[:at]) + f'{names[extra]}="').encode(), ('"' + "".join(
            "," + p for p in parts[at:]) + "} ").encode()
        _keep(self._kept_around, values, text)
        return text

    def check(self, family: str, values: Sequence[str]) -> None:
        if len(values) != self.count or not all(isinstance(v, str) for v in values):
            raise ValueError(f"{family}: expected {self.count} string label values, got {values!r}")


_KEPT_LABEL_SETS: Final = 1 << 16
"""Label sets whose text one :class:`_LabelText` keeps (forgotten all at once beyond that, as label sets that
come and go would otherwise be kept for ever)."""

_V = TypeVar("_V")

_label_texts: dict[tuple[tuple[str, ...], str], _LabelText] = {}


def _label_text(labels: Sequence[str], extra: str = "") -> _LabelText:
    """The :class:`_LabelText` of every family with these label names (and extra label)."""
    key = (tuple(labels), extra)
    shared = _label_texts.get(key)
    if shared is None:
        shared = _label_texts[key] = _LabelText(labels, extra)
    return shared


def _keep(kept: dict[tuple[str, ...], _V], key: tuple[str, ...], value: _V) -> None:
    if len(kept) >= _KEPT_LABEL_SETS:
        kept.clear()
    kept[key] = value


class _Labelled:
    """Per label set: plain numbers, and their exposition lines kept until the set changes.

    Counting marks nothing: once per scrape a family finds the label sets that
    changed since they were last written by comparing each set's count (or
    value) with the one it wrote, so that the hooks on the write path do no
    more than add to numbers.
    """

    def __init__(self, name: str, documentation: str, labels: Sequence[str], kind: str) -> None:
        self.name = name
        self._header = _header(name, documentation, kind).encode("utf-8")
        # Each label set's lines, in the order the sets were first seen (b"" until first written).
        self._lines: dict[tuple[str, ...], bytes] = {}
        self._text: bytes | None = None
        # Label sets written to text since the family was made: what scrapes have cost it.
        self.written = 0

    def _render(self, key: tuple[str, ...]) -> bytes:
        raise NotImplementedError

    def changed(self) -> list[tuple[str, ...]]:
        """The label sets changed since they were last written, in the order first seen."""
        raise NotImplementedError

    def write(self, keys: Iterable[tuple[str, ...]]) -> None:
        """Write the lines of ``keys`` (the family's text is joined again when next asked for)."""
        lines, render = self._lines, self._render
        n = 0
        for key in keys:
            lines[key] = render(key)
            n += 1
        if n:
            self.written += n
            self._text = None

    def chunks(self) -> list[bytes]:
        """The family's exposition (UTF-8) in pieces, for one join of the whole scrape: only the label sets
        that changed since they were last written are written again.

        A family that changed is given in pieces (joined once, with the whole
        scrape); one unchanged since the last scrape is joined and kept, and
        given in one piece from then on while it stays so.
        """
        changed = self.changed()
        if changed:
            self.write(changed)
            return [self._header, *self._lines.values()]
        if self._text is None:
            self._text = b"".join([self._header, *self._lines.values()])
        return [self._text]

    def text(self) -> bytes:
        """The family's exposition (UTF-8); an unchanged family is not even joined again."""
        changed = self.changed()
        if changed:
            self.write(changed)
        if self._text is None:
            self._text = b"".join([self._header, *self._lines.values()])
        return self._text


class CounterFamily(_Labelled):
    """A counter with labels, the ``_total`` suffix added as the library adds it; zero-less unless unlabelled."""

    def __init__(self, name: str, documentation: str, labels: Sequence[str] = ()) -> None:
        super().__init__(f"{name.removesuffix('_total')}_total", documentation, labels, "counter")
        self._labels = _label_text(labels)
        # label set -> [value, ...]: a cell, which a hook may keep and add to without looking it up each time
        self._values: dict[tuple[str, ...], list[float]] = {}
        self._prefix: dict[tuple[str, ...], bytes] = {}
        if not labels:
            self.inc((), 0.0)

    def cell(self, labels: tuple[str, ...]) -> list[float]:
        """The label set's value as the first item of a list, made (at zero, and exported from then on) if
        new: adding to that item is :meth:`inc` without the check that the amount is not negative."""
        cell = self._values.get(labels)
        if cell is None:
            self._labels.check(self.name, labels)
            # [value, the value last written]: never written yet, and NaN equals nothing
            cell = self._values[labels] = [0.0, math.nan]
            self._lines[labels] = b""  # its place: label sets are written in the order first seen
        return cell

    def inc(self, labels: tuple[str, ...], amount: float = 1.0) -> None:
        if amount < 0:
            raise ValueError(f"{self.name}: a counter only goes up, got {amount!r}")
        cell = self._values.get(labels)
        if cell is None:
            cell = self.cell(labels)
        cell[0] += amount

    def value(self, labels: tuple[str, ...]) -> float:
        cell = self._values.get(labels)
        return cell[0] if cell is not None else 0.0

    def changed(self) -> list[tuple[str, ...]]:
        # A label set never written is written, zero or not (see cell); a NaN value is written at every scrape.
        # The comparisons run in C: this is every label set of the family, at every scrape.
        cells = self._values.values()
        return list(compress(self._values, map(ne, map(_FIRST, cells), map(_SECOND, cells))))

    def _render(self, key: tuple[str, ...]) -> bytes:
        cell = self._values[key]
        value = cell[1] = cell[0]
        prefix = self._prefix.get(key)
        if prefix is None:
            prefix = self._prefix[key] = f"{self.name}{self._labels(key)} ".encode()
        return b"%s%s\n" % (prefix, _number_text(value).encode("ascii"))


class HistogramFamily(_Labelled):
    """A histogram with labels: per label set one count per bucket, the sum and the count."""

    def __init__(self, name: str, documentation: str, labels: Sequence[str],
                 buckets: Sequence[float] = Histogram.DEFAULT_BUCKETS) -> None:
        super().__init__(name, documentation, labels, "histogram")
        bounds = sorted(float(b) for b in buckets)
        if not bounds or bounds[-1] != float("inf"):
            bounds.append(float("inf"))
        self.bounds: Final = bounds
        self._le = [_number(b).encode() for b in bounds]
        self._labels = _label_text(labels)
        self._bucket_labels = _label_text(labels, "le")
        # label set -> [count in each bucket (not cumulative)..., the count last written, sum, count]
        self._state: dict[tuple[str, ...], list[float]] = {}
        self._bucket_name, self._count_name, self._sum_name = (
            f"{name}_{suffix}".encode() for suffix in ("bucket", "count", "sum"))
        self._pieces: list[bytes] = [p for le in self._le for p in (self._bucket_name, b"", le, b"", b"")]

    def child(self, labels: tuple[str, ...]) -> list[float]:
        """The label set's numbers, made (and exported from then on) if new: ``[count in each bucket (not
        cumulative)..., the count last written, sum, count]``. Observing ``value`` is adding 1 to the item at
        ``bisect_left(bounds, value)`` and to the last one, and ``value`` to the one before the last."""
        state = self._state.get(labels)
        if state is None:
            self._labels.check(self.name, labels)
            # the count last written goes before the sum: -1 until first written, equal to no count
            state = self._state[labels] = [0] * len(self.bounds) + [-1, 0.0, 0]
            self._lines[labels] = b""  # its place: label sets are written in the order first seen
        return state

    def observe(self, labels: tuple[str, ...], value: float) -> None:
        state = self._state.get(labels)
        if state is None:
            state = self.child(labels)
        state[bisect_left(self.bounds, value)] += 1
        state[-2] += value
        state[-1] += 1

    def observe_counting(self, labels: tuple[str, ...], value: float, counter: CounterFamily) -> None:
        """:meth:`observe`, and ``counter.inc(labels)``: a counter of what this histogram observes (the
        controller counts each admission and observes its wait with the same labels) in one call."""
        self.observe(labels, value)
        counter.inc(labels)

    def changed(self) -> list[tuple[str, ...]]:
        # Each observation adds one to the count; a label set never written is written, empty or not. The
        # comparisons run in C: this is every label set of the family, at every scrape.
        states = self._state.values()
        return list(compress(self._state, map(ne, map(_LAST, states), map(_LAST_WRITTEN, states))))

    def _render(self, key: tuple[str, ...]) -> bytes:
        state = self._state[key]
        before, after = self._bucket_labels.around(key)
        plain = self._labels.text_of(key)
        total = state[-3] = cast(int, state[-1])  # the counts are whole (see child)
        buckets = cast("list[int]", state[:-3])
        if total < len(_COUNTS) or _grow_counts(total):
            numbers = list(map(_COUNTS.__getitem__, accumulate(buckets)))  # no running total exceeds the count
        else:
            numbers = [f"{_count(n)}\n".encode() for n in accumulate(buckets)]
        # Each bucket's line is five pieces (name, labels before le, le, labels after, count), set into a copy
        # of the family's by slices and joined in one go: a few lists a label set, as the label sets are many
        # and each object made here is one more for the garbage collector to count.
        pieces = self._pieces.copy()
        n = len(numbers)
        pieces[1::5] = [before] * n
        pieces[3::5] = [after] * n
        pieces[4::5] = numbers
        lines = b"".join(pieces)
        return b"%s%s%s %s%s%s %s\n" % (lines, self._count_name, plain, numbers[-1], self._sum_name, plain,
                                       _number_text(state[-2]).encode())


_FIRST, _SECOND, _LAST, _LAST_WRITTEN = itemgetter(0), itemgetter(1), itemgetter(-1), itemgetter(-3)

_COUNTS_KEPT: Final = 1 << 16

_COUNTS: Final[list[bytes]] = [b"0.0\n"]
"""The text of each whole count below its length, and a newline (see :func:`_grow_counts`)."""


def _grow_counts(n: int) -> bool:
    """Make :data:`_COUNTS` reach ``n`` (at least doubling it), unless ``n`` is too large to keep texts up to."""
    if n >= _COUNTS_KEPT:
        return False
    size = min(_COUNTS_KEPT, max(2 * len(_COUNTS), n + 1))
    _COUNTS.extend([f"{_count(i)}\n".encode() for i in range(len(_COUNTS), size)])
    return True


_WHOLE_TEXTS: Final = [f"{i}.0" for i in range(1 << 12)]


def _number_text(value: float) -> str:
    """A value in the library's number format, whole numbers (most of them) without its detour, and the
    smallest (the most common: counts of queues and workloads, 0 and 1) already written."""
    try:
        whole = int(value)
    except (OverflowError, ValueError):  # infinite or NaN
        return _number(value)
    if whole == value:
        if 0 < whole < len(_WHOLE_TEXTS):
            return _WHOLE_TEXTS[whole]
        if -1_000_000 < whole < 1_000_000 and (whole or math.copysign(1.0, value) > 0):  # -0.0 is the library's
            return f"{whole}.0"
    return _number(value)


def _count(n: int) -> str:
    """A whole count in the library's number format (it writes 1e+06 from a million on)."""
    return f"{n}.0" if n < 1_000_000 else _number(float(n))


class GaugeFamily:
    """A gauge family whose samples are read at scrape time, written straight to exposition text.

    The line of each label set is kept from one scrape to the next, so a
    scrape writes only the lines whose value changed (most do not between two
    scrapes 15 s apart); label sets absent from a scrape are forgotten.
    """

    def __init__(self, name: str, documentation: str, labels: Sequence[str]) -> None:
        self.name = name
        self._header = _header(name, documentation, "gauge")
        self._labels = _LabelText(labels, keep=False)  # the lines below are what is kept
        # label set -> its line, and the value written there (two maps of strings and numbers, not one of
        # pairs: tens of thousands of pairs would be as many objects more for the garbage collector)
        self._lines: dict[tuple[str, ...], str] = {}
        self._values: dict[tuple[str, ...], float] = {}

    def text(self, samples: Iterable[tuple[Sequence[str], float]]) -> str:
        old_lines, old_values = self._lines, self._values
        lines: dict[tuple[str, ...], str] = {}
        values: dict[tuple[str, ...], float] = {}
        out = [self._header]
        for labels, value in samples:
            key = labels if type(labels) is tuple else tuple(labels)
            line = old_lines.get(key)
            if line is not None:
                was = old_values[key]
                # 0.0 equals -0.0, which the library writes with its sign: a zero's sign is compared too.
                if not (was == value and (value or math.copysign(1.0, value) == math.copysign(1.0, was))):
                    line = f"{line[:line.rindex(' ') + 1]}{_number_text(value)}\n"  # no number has a space
            else:
                self._labels.check(self.name, key)
                line = f"{self.name}{self._labels(key)} {_number_text(value)}\n"
            lines[key] = line
            values[key] = value
            out.append(line)
        self._lines, self._values = lines, values
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
