"""The counter and histogram families give the library's text after any sequence of counts and scrapes.

Counting only adds to numbers (nothing marks a label set as changed: a
scrape compares each set's count with the one it last wrote), a histogram's
lines are joined from pieces kept per set of label names, and the controller's
hook adds to the numbers it holds (``HistogramFamily.child``,
``CounterFamily.cell``). Each scrape in a random sequence of counts must read,
byte for byte, what prometheus_client writes after the same counts.
"""

from __future__ import annotations

import asyncio
import math
from bisect import bisect_left

from hypothesis import example, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics, generate_latest
from prometheus_client.utils import floatToGoString

from sluicegate.common.metrics import CounterFamily, GaugeFamily, HistogramFamily, _number_text, new_registry, render

BUCKETS = [0.5, 1.0, 2.5, 1e6]
# Label values the text format escapes (and a % that a format string would take for its own).
VALUES = ("a", "b", 'quo"te', "back\\slash", "new\nline", "50%s ünï", "")
labels = st.tuples(st.sampled_from(VALUES), st.sampled_from(VALUES[:3]))
amounts = st.one_of(st.sampled_from([0.0, 1.0, 2.5, 1e6, 1e-9]), st.floats(0, 1e12, allow_nan=False))
values = st.one_of(st.sampled_from([0.0, 0.5, 1.0, 2.5, 1e6, 2e6, -1.0, float("inf")]),
                   st.floats(-10, 1e7, allow_nan=False))
steps = st.lists(st.one_of(
    st.tuples(st.just("inc"), labels, amounts),
    st.tuples(st.just("observe"), labels, values),
    st.tuples(st.just("observe_counting"), labels, values),
    st.tuples(st.just("child"), labels, values),  # the hook's way: adding to the numbers it holds
    st.tuples(st.just("scrape"), labels, values)), max_size=40)


class Library:
    """The same counts told to prometheus_client, as the daemons configure it (no *_created series)."""

    def __init__(self) -> None:
        disable_created_metrics()  # type: ignore[no-untyped-call]  # new_registry() does the same, process-wide
        self.registry = CollectorRegistry()
        self.counter = Counter("things_total", "Things.", ["zone", "kind"], registry=self.registry)
        self.histogram = Histogram("waits", "Waits.", ["zone", "kind"], buckets=BUCKETS, registry=self.registry)

    def text(self) -> bytes:
        return generate_latest(self.registry)


def _tell(step: tuple[str, tuple[str, str], float], counter: CounterFamily, histogram: HistogramFamily,
          library: Library) -> None:
    what, key, x = step
    if what == "inc":
        counter.inc(key, x)
        library.counter.labels(*key).inc(x)
    elif what in ("observe", "observe_counting", "child"):
        if what == "observe":
            histogram.observe(key, x)
        elif what == "observe_counting":
            histogram.observe_counting(key, x, counter)
            library.counter.labels(*key).inc()
        else:
            state = histogram.child(key)
            state[bisect_left(histogram.bounds, x)] += 1
            state[-2] += x
            state[-1] += 1
        library.histogram.labels(*key).observe(x)


@settings(max_examples=200, deadline=None)
@given(steps)
def test_every_scrape_reads_what_the_library_writes(sequence: list[tuple[str, tuple[str, str], float]]) -> None:
    counter = CounterFamily("things_total", "Things.", ["zone", "kind"])
    histogram = HistogramFamily("waits", "Waits.", ["zone", "kind"], buckets=BUCKETS)
    library = Library()
    for step in [*sequence, ("scrape", ("a", "a"), 0.0)]:
        if step[0] == "scrape":
            assert counter.text() + histogram.text() == library.text()
            assert b"".join([*counter.chunks(), *histogram.chunks()]) == library.text()
        else:
            _tell(step, counter, histogram, library)


def test_counts_past_the_kept_texts_and_past_a_million_read_as_the_librarys() -> None:
    histogram = HistogramFamily("waits", "Waits.", ["zone", "kind"], buckets=BUCKETS)
    library = Library()
    histogram.text()
    for n in (70_000, 1_000_000):  # past the counts whose text is kept, then where Go writes 1e+06
        state = histogram.child(("a", "b"))
        state[0] += n
        state[-2] += 0.25 * n
        state[-1] += n
        child = library.histogram.labels("a", "b")
        child._buckets[0].inc(n)  # type: ignore[attr-defined]  # n observations of 0.25, in one go
        child._sum.inc(0.25 * n)  # type: ignore[attr-defined]
        assert histogram.text() == b"# HELP waits" + library.text().split(b"# HELP waits")[1]


def test_a_flush_in_slices_with_counting_between_reads_the_same_as_one_render() -> None:
    """Label sets counted while a flush gives the loop its turns are written by the flush (if not yet reached)
    or by the render after it: the scrape reads every count made before the render."""
    registry = new_registry()
    histogram = HistogramFamily("waits", "Waits.", ["zone", "kind"], buckets=BUCKETS)
    counter = CounterFamily("things_total", "Things.", ["zone", "kind"])
    registry.add_families("test", [counter, histogram])
    library = Library()
    keys = [(f"z{i}", "k") for i in range(300)]
    for i, key in enumerate(keys):
        _tell(("observe_counting", key, i / 100), counter, histogram, library)

    async def scrape() -> bytes:
        stop = asyncio.Event()

        async def counting() -> None:  # the write path, between the flush's slices
            for i in range(100_000):  # bounded
                if stop.is_set():
                    return
                _tell(("observe_counting", keys[(i * 37) % len(keys)], i / 7), counter, histogram, library)
                await asyncio.sleep(0)

        task = asyncio.create_task(counting())
        await asyncio.sleep(0)
        await registry.flush(slice_seconds=0.0)
        stop.set()
        await task
        return render(registry)

    body = asyncio.run(scrape())
    assert body.endswith(library.text())


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.floats(), st.integers(-2_000_000, 2_000_000), st.sampled_from(
    [0.0, -0.0, 1.0, 4095.0, 4096.0, 999_999.0, 1e6, -999_999.0, -1e6, float("inf"), float("-inf"), float("nan")])))
def test_numbers_are_written_as_the_library_writes_them(value: float) -> None:
    """Whole numbers skip the library's formatting (the smallest are written once); every value reads the same."""
    assert _number_text(value) == floatToGoString(value)


gauge_values = st.one_of(st.sampled_from([0.0, -0.0, 1.0, 1.0, 2.0, 0.5, float("inf"), float("nan"), 7e6]),
                         st.floats(-1e7, 1e7))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.dictionaries(labels, gauge_values, max_size=6), max_size=6))
@example([{("a", "a"): 0.0}, {("a", "a"): -0.0}, {("a", "a"): 0.0}, {("a", "a"): math.nan}, {("a", "a"): math.nan}])
def test_a_gauge_family_reads_as_the_librarys_scrape_after_scrape(scrapes: list[dict[tuple[str, str], float]]) -> None:
    """Lines kept from the last scrape are reused only for the same value (a zero of the same sign)."""
    ours = GaugeFamily("pending", "Pending.", ["zone", "kind"])
    for samples in scrapes:
        disable_created_metrics()  # type: ignore[no-untyped-call]
        registry = CollectorRegistry()
        gauge = Gauge("pending", "Pending.", ["zone", "kind"], registry=registry)
        for key, value in samples.items():
            gauge.labels(*key).set(value)
        assert ours.text(list(samples.items())) == generate_latest(registry).decode("utf-8")
