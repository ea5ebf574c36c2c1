"""The Prometheus registry, checked by its exact text output."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import pytest

from sluicegate.common.metrics import CONTENT_TYPE, Counter, Gauge, LabelValues, MetricError, Registry


def test_content_type_is_text_format_0_0_4() -> None:
    assert CONTENT_TYPE == "text/plain; version=0.0.4; charset=utf-8"


def test_empty_registry_renders_nothing() -> None:
    assert Registry().render() == ""


def test_whole_document_is_sorted_and_typed() -> None:
    registry = Registry()
    pending = {("team-b", "cq-b"): 4.0, ("team-a", "cq-a"): 2.0}
    # Registered out of order on purpose: output is sorted by name, then by label values.
    admitted = registry.counter(
        "sluicegate_admitted_workloads_total",
        "Workloads admitted, by ClusterQueue.",
        labelnames=["cluster_queue"],
    )
    registry.callback_gauge(
        "sluicegate_pending_workloads",
        "Workloads waiting for admission.",
        labelnames=("namespace", "cluster_queue"),
        collect=pending.items,
    )
    cycles = registry.counter("sluicegate_scheduling_cycles_total", "Scheduling cycles run.")
    usage = registry.gauge("sluicegate_node_usage", "Resource in use on this node.", labelnames=("resource",))
    registry.callback_gauge("sluicegate_build_info", "Always 1.", collect=lambda: [((), 1)])

    admitted.labels(cluster_queue="cq-b").inc()
    admitted.labels(cluster_queue="cq-a").inc(3)
    cycles.inc()
    cycles.inc()
    usage.labels(resource="memory").set(2147483648)
    usage.labels(resource="cpu").set(1.5)

    assert registry.render() == (
        "# HELP sluicegate_admitted_workloads_total Workloads admitted, by ClusterQueue.\n"
        "# TYPE sluicegate_admitted_workloads_total counter\n"
        'sluicegate_admitted_workloads_total{cluster_queue="cq-a"} 3\n'
        'sluicegate_admitted_workloads_total{cluster_queue="cq-b"} 1\n'
        "# HELP sluicegate_build_info Always 1.\n"
        "# TYPE sluicegate_build_info gauge\n"
        "sluicegate_build_info 1\n"
        "# HELP sluicegate_node_usage Resource in use on this node.\n"
        "# TYPE sluicegate_node_usage gauge\n"
        'sluicegate_node_usage{resource="cpu"} 1.5\n'
        'sluicegate_node_usage{resource="memory"} 2147483648\n'
        "# HELP sluicegate_pending_workloads Workloads waiting for admission.\n"
        "# TYPE sluicegate_pending_workloads gauge\n"
        'sluicegate_pending_workloads{namespace="team-a",cluster_queue="cq-a"} 2\n'
        'sluicegate_pending_workloads{namespace="team-b",cluster_queue="cq-b"} 4\n'
        "# HELP sluicegate_scheduling_cycles_total Scheduling cycles run.\n"
        "# TYPE sluicegate_scheduling_cycles_total counter\n"
        "sluicegate_scheduling_cycles_total 2\n"
    )


def test_callback_gauge_reads_state_at_scrape_time() -> None:
    registry = Registry()
    queue: list[str] = []
    registry.callback_gauge("queue_length", "Items queued.", collect=lambda: [((), len(queue))])
    first = registry.render()
    queue.extend(["a", "b"])
    assert (first.splitlines()[-1], registry.render().splitlines()[-1]) == (
        "queue_length 0",
        "queue_length 2",
    )


@pytest.mark.parametrize(
    ("value", "escaped"),
    [
        pytest.param("plain", "plain", id="plain"),
        pytest.param("back\\slash", "back\\\\slash", id="backslash"),
        pytest.param('say "hi"', 'say \\"hi\\"', id="quote"),
        pytest.param("two\nlines", "two\\nlines", id="newline"),
        pytest.param('\\"\n', '\\\\\\"\\n', id="all-three"),
        pytest.param("café ✓", "café ✓", id="unicode"),
    ],
)
def test_label_values_are_escaped(value: str, escaped: str) -> None:
    registry = Registry()
    registry.gauge("g", "h", labelnames=["v"]).labels(v=value).set(1)
    assert registry.render().splitlines()[-1] == f'g{{v="{escaped}"}} 1'


@pytest.mark.parametrize(
    ("description", "escaped"),
    [
        pytest.param("Pods by phase.", "Pods by phase.", id="plain"),
        pytest.param("path C:\\pods", "path C:\\\\pods", id="backslash"),
        pytest.param("first\nsecond", "first\\nsecond", id="newline"),
        pytest.param('a "quoted" word', 'a "quoted" word', id="quote-kept"),
    ],
)
def test_help_text_is_escaped(description: str, escaped: str) -> None:
    registry = Registry()
    registry.counter("c_total", description)
    assert registry.render().splitlines()[0] == f"# HELP c_total {escaped}"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        pytest.param(0, "0", id="zero"),
        pytest.param(7, "7", id="int"),
        pytest.param(-2.0, "-2", id="integral-float"),
        pytest.param(0.25, "0.25", id="fraction"),
        pytest.param(1e20, "1e+20", id="huge"),
        pytest.param(1e-9, "1e-09", id="tiny"),
        pytest.param(float("inf"), "+Inf", id="inf"),
        pytest.param(float("-inf"), "-Inf", id="minus-inf"),
        pytest.param(float("nan"), "NaN", id="nan"),
    ],
)
def test_sample_values(value: float, text: str) -> None:
    registry = Registry()
    registry.gauge("g", "h").set(value)
    assert registry.render().splitlines()[-1] == f"g {text}"


def test_series_lifecycle() -> None:
    registry = Registry()
    gauge = registry.gauge("running_pods", "Pods running.", labelnames=("node", "qos"))
    gauge.labels(node="n1", qos="Burstable").inc(2)
    gauge.labels(qos="Guaranteed", node="n1").set(5)
    gauge.labels(node="n1", qos="Burstable").dec()
    gauge.labels(node="n2", qos="BestEffort")  # selecting a series makes it visible at 0
    assert registry.render().splitlines()[2:] == [
        'running_pods{node="n1",qos="Burstable"} 1',
        'running_pods{node="n1",qos="Guaranteed"} 5',
        'running_pods{node="n2",qos="BestEffort"} 0',
    ]
    assert gauge.value(node="n1", qos="Guaranteed") == 5
    assert gauge.value(node="n9", qos="Guaranteed") == 0  # reading does not create a series
    gauge.remove(node="n1", qos="Guaranteed")
    gauge.remove(node="n9", qos="Guaranteed")  # removing a missing series is fine
    assert registry.render().splitlines()[2:] == [
        'running_pods{node="n1",qos="Burstable"} 1',
        'running_pods{node="n2",qos="BestEffort"} 0',
    ]
    gauge.clear()
    assert registry.render().splitlines()[2:] == []


def test_unlabelled_metrics_start_at_zero() -> None:
    registry = Registry()
    registry.counter("events_total", "Events.")
    registry.gauge("temperature", "Degrees.")
    assert registry.render() == (
        "# HELP events_total Events.\n"
        "# TYPE events_total counter\n"
        "events_total 0\n"
        "# HELP temperature Degrees.\n"
        "# TYPE temperature gauge\n"
        "temperature 0\n"
    )


@dataclass(frozen=True, slots=True)
class Declared:
    registry: Registry
    counter: Counter
    gauge: Gauge
    labelled: Gauge


def _declared() -> Declared:
    registry = Registry()
    return Declared(
        registry=registry,
        counter=registry.counter("existing_total", "x"),
        gauge=registry.gauge("plain", "x"),
        labelled=registry.gauge("labelled", "x", labelnames=("queue",)),
    )


@pytest.mark.parametrize(
    ("action", "metric", "problem"),
    [
        pytest.param(
            lambda d: d.registry.counter("1bad", "x"),
            "1bad",
            "the name must match [a-zA-Z_:][a-zA-Z0-9_:]*",
            id="bad-name",
        ),
        pytest.param(
            lambda d: d.registry.gauge("g", "x", labelnames=["bad-label"]),
            "g",
            "label name 'bad-label' must match [a-zA-Z_][a-zA-Z0-9_]* and not start with '__' "
            "(reserved by Prometheus)",
            id="bad-label",
        ),
        pytest.param(
            lambda d: d.registry.gauge("g", "x", labelnames=["__name"]),
            "g",
            "label name '__name' must match [a-zA-Z_][a-zA-Z0-9_]* and not start with '__' "
            "(reserved by Prometheus)",
            id="reserved-label",
        ),
        pytest.param(
            lambda d: d.registry.gauge("g", "x", labelnames=["a", "a"]),
            "g",
            "label names repeat: ['a', 'a']",
            id="repeated-label",
        ),
        pytest.param(
            lambda d: d.registry.gauge("existing_total", "x"),
            "existing_total",
            "is already registered in this registry",
            id="duplicate",
        ),
        pytest.param(
            lambda d: d.counter.inc(-1),
            "existing_total",
            "a counter cannot decrease, got inc(-1)",
            id="counter-decrease",
        ),
        pytest.param(lambda d: d.gauge.set(True), "plain", "wanted a number, got True", id="bool-value"),
        pytest.param(lambda d: d.gauge.inc("2"), "plain", "wanted a number, got '2'", id="str-amount"),
        pytest.param(
            lambda d: d.labelled.set(1),
            "labelled",
            "has labels ['queue']; select a series with .labels(...) first",
            id="labels-missing",
        ),
        pytest.param(
            lambda d: d.labelled.labels(queue="a", node="b"),
            "labelled",
            "wanted labels ['queue'], got ['node', 'queue']",
            id="labels-extra",
        ),
        pytest.param(
            lambda d: d.labelled.labels(queue=3),
            "labelled",
            "label 'queue' must be a string, got int",
            id="label-not-string",
        ),
    ],
)
def test_misuse_is_refused_and_changes_nothing(
    action: Callable[[Declared], object], metric: str, problem: str
) -> None:
    declared = _declared()
    before = declared.registry.render()
    with pytest.raises(MetricError) as caught:
        action(declared)
    assert (caught.value.metric, caught.value.problem) == (metric, problem)
    assert declared.registry.render() == before


def _boom() -> Iterable[tuple[LabelValues, float]]:
    raise RuntimeError("queue manager not started")


@pytest.mark.parametrize(
    ("collect", "logged"),
    [
        pytest.param(_boom, "RuntimeError: queue manager not started", id="raises"),
        pytest.param(
            lambda: [(("only-one",), 1.0)],
            "collect returned key ('only-one',); wanted a tuple of 2 strings for labels ['a', 'b']",
            id="wrong-arity",
        ),
        pytest.param(lambda: [(("x", "y"), "3")], "wanted a number, got '3'", id="not-a-number"),
        pytest.param(lambda: [("x", "y")], "wanted a tuple of 2 strings", id="not-pairs"),
    ],
)
def test_broken_callback_costs_only_its_own_samples(
    collect: Callable[[], Iterable[tuple[LabelValues, float]]], logged: str, caplog: pytest.LogCaptureFixture
) -> None:
    registry = Registry()
    registry.callback_gauge("broken", "Fails.", labelnames=("a", "b"), collect=collect)
    registry.counter("fine_total", "Works.").inc()
    with caplog.at_level(logging.ERROR, logger="sluicegate.common.metrics"):
        text = registry.render()
    assert text == (
        "# HELP broken Fails.\n"
        "# TYPE broken gauge\n"
        "# HELP fine_total Works.\n"
        "# TYPE fine_total counter\n"
        "fine_total 1\n"
    )
    assert [r.getMessage() for r in caplog.records] == [
        "collecting metric 'broken' failed; its samples are left out of this scrape"
    ]
    assert logged in caplog.text
