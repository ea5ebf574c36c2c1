"""Eviction thresholds, pressure with grace periods, and victim ranking (kubelet helpers.go)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction

import pytest

from sluicegate.agent.policy import (
    DEFAULT_EVICTION_HARD,
    NO_PRESSURE,
    SIGNAL_TO_RANK,
    SYSTEM_CLUSTER_CRITICAL,
    EvictionConfigError,
    PodInfo,
    PodUsage,
    PressureState,
    QOSClass,
    Signal,
    SignalObservation,
    Threshold,
    build_signal_to_rank,
    default_thresholds,
    evaluate_pressure,
    parse_duration,
    parse_eviction_config,
    parse_grace_periods,
    parse_threshold,
    rank_disk_pressure,
    rank_memory_pressure,
    select_eviction_victim,
    thresholds_met,
)

from ._builders import Gi, Mi, pod

MEM = Signal.MEMORY_AVAILABLE
NODEFS = Signal.NODEFS_AVAILABLE


# --- parsing ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("statement", "expected"),
    [
        pytest.param("memory.available<100Mi", Threshold(signal=MEM, quantity=100 * Mi), id="memory-binary-suffix"),
        pytest.param("memory.available<1Gi", Threshold(signal=MEM, quantity=1 * Gi), id="memory-gibibyte"),
        pytest.param("memory.available<500M", Threshold(signal=MEM, quantity=500_000_000), id="memory-decimal-suffix"),
        pytest.param("nodefs.available<10%", Threshold(signal=NODEFS, percentage=Fraction(1, 10)), id="percentage"),
        pytest.param(
            "nodefs.available<7.5%", Threshold(signal=NODEFS, percentage=Fraction(3, 40)), id="fractional-percentage"
        ),
        pytest.param("nodefs.available<2Gi", Threshold(signal=NODEFS, quantity=2 * Gi), id="nodefs-quantity"),
        pytest.param(
            "  memory.available<100Mi ", Threshold(signal=MEM, quantity=100 * Mi), id="surrounding-space-ignored"
        ),
        pytest.param("nodefs.available<0%", None, id="zero-percent-disables"),
        pytest.param("memory.available<100%", None, id="hundred-percent-disables"),
    ],
)
def test_parse_threshold(statement: str, expected: Threshold | None) -> None:
    assert parse_threshold(statement) == expected


@pytest.mark.parametrize(
    ("statement", "problem"),
    [
        pytest.param("memory.available>100Mi", "it is not <signal><<value>", id="wrong-operator"),
        pytest.param("memory.available", "it is not <signal><<value>", id="no-operator"),
        pytest.param("memory.available<", "it is not <signal><<value>", id="no-value"),
        pytest.param("<100Mi", "it is not <signal><<value>", id="no-signal"),
        pytest.param("memory.available<1Gi<2Gi", "it is not <signal><<value>", id="two-operators"),
        pytest.param(
            "imagefs.available<15%",
            "unsupported eviction signal 'imagefs.available' (supported: memory.available, nodefs.available)",
            id="unsupported-signal",
        ),
        pytest.param("memory.available<lots", "'lots' is neither a quantity nor a percentage", id="not-a-quantity"),
        pytest.param("memory.available<100MB", "'100MB' is neither a quantity nor a percentage", id="wrong-suffix"),
        pytest.param("memory.available<9Ei", "quantity '9Ei' is out of range: Kubernetes quantities are limited to 9223372036854775 units (a milli-value of 2^63-1)", id="above-kubernetes-bound"),
        pytest.param("memory.available<-1Gi", "threshold -1Gi must be positive", id="negative-quantity"),
        pytest.param("memory.available<0", "threshold 0 must be positive", id="zero-quantity"),
        pytest.param("nodefs.available<ten%", "'ten%' is not a percentage", id="not-a-percentage"),
        pytest.param("nodefs.available<-5%", "percentage -5% must be between 0% and 100%", id="negative-percentage"),
        pytest.param("nodefs.available<150%", "percentage 150% must be between 0% and 100%", id="over-hundred-percent"),
    ],
)
def test_parse_threshold_errors(statement: str, problem: str) -> None:
    with pytest.raises(EvictionConfigError) as caught:
        parse_threshold(statement)
    assert (caught.value.setting, caught.value.value, caught.value.problem) == ("eviction-hard", statement, problem)
    assert repr(statement) in str(caught.value)


def test_threshold_error_message_says_what_and_how() -> None:
    with pytest.raises(EvictionConfigError) as caught:
        parse_threshold("memory.available<lots")
    assert str(caught.value) == (
        "eviction-hard: 'memory.available<lots' is not valid: 'lots' is neither a quantity nor a percentage; "
        "expected <signal><<quantity or percentage>, e.g. memory.available<100Mi or nodefs.available<10%"
    )


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        pytest.param("90s", 90.0, id="seconds"),
        pytest.param("1m30s", 90.0, id="minutes-and-seconds"),
        pytest.param("1.5h", 5400.0, id="fractional-hours"),
        pytest.param("500ms", 0.5, id="milliseconds"),
        pytest.param("2h45m", 9900.0, id="hours-and-minutes"),
        pytest.param("0", 0.0, id="bare-zero"),
        pytest.param("0s", 0.0, id="zero-seconds"),
        pytest.param("+10s", 10.0, id="explicit-plus"),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("5", "'5' is not a duration such as 90s, 1m30s or 2h", id="missing-unit"),
        pytest.param("", "'' is not a duration such as 90s, 1m30s or 2h", id="empty"),
        pytest.param("1d", "'1d' is not a duration such as 90s, 1m30s or 2h", id="days-are-not-go"),
        pytest.param("m", "'m' is not a duration such as 90s, 1m30s or 2h", id="unit-without-number"),
        pytest.param("-1s", "duration '-1s' is negative", id="negative"),
    ],
)
def test_parse_duration_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_duration(text)
    assert str(caught.value) == message


def test_parse_grace_periods() -> None:
    assert parse_grace_periods("memory.available=1m30s, nodefs.available=5m") == {MEM: 90.0, NODEFS: 300.0}


@pytest.mark.parametrize(
    ("hard", "soft", "grace", "expected"),
    [
        pytest.param(
            DEFAULT_EVICTION_HARD,
            "",
            "",
            (Threshold(signal=MEM, quantity=100 * Mi), Threshold(signal=NODEFS, percentage=Fraction(1, 10))),
            id="kubelet-defaults",
        ),
        pytest.param("", "", "", (), id="nothing-configured"),
        pytest.param(
            "memory.available<200Mi,nodefs.available<0%",
            "",
            "",
            (Threshold(signal=MEM, quantity=200 * Mi),),
            id="zero-percent-switches-a-signal-off",
        ),
        pytest.param(
            "memory.available<100Mi",
            "memory.available<1Gi,nodefs.available<15%",
            "memory.available=1m30s,nodefs.available=2m",
            (
                Threshold(signal=MEM, quantity=100 * Mi),
                Threshold(signal=MEM, quantity=1 * Gi, grace_period=90.0),
                Threshold(signal=NODEFS, percentage=Fraction(3, 20), grace_period=120.0),
            ),
            id="hard-and-soft-for-one-signal",
        ),
    ],
)
def test_parse_eviction_config(hard: str, soft: str, grace: str, expected: tuple[Threshold, ...]) -> None:
    assert parse_eviction_config(hard=hard, soft=soft, soft_grace_periods=grace) == expected


def test_default_thresholds() -> None:
    assert (
        default_thresholds()
        == parse_eviction_config()
        == (
            Threshold(signal=MEM, quantity=100 * Mi),
            Threshold(signal=NODEFS, percentage=Fraction(1, 10)),
        )
    )


@pytest.mark.parametrize(
    ("hard", "soft", "grace", "setting", "value", "problem"),
    [
        pytest.param(
            "memory.available<100Mi,memory.available<200Mi",
            "",
            "",
            "eviction-hard",
            "memory.available<200Mi",
            "signal memory.available has more than one threshold",
            id="duplicate-hard-signal",
        ),
        pytest.param(
            "",
            "memory.available<1Gi",
            "",
            "eviction-soft",
            "memory.available<1Gi",
            "a soft threshold needs a grace period, and eviction-soft-grace-period has none for memory.available",
            id="soft-without-grace-period",
        ),
        pytest.param(
            "",
            "memory.available<1Gi",
            "memory.available=1m,nodefs.available=1m",
            "eviction-soft-grace-period",
            "nodefs.available",
            "there is no soft threshold for nodefs.available in eviction-soft",
            id="grace-period-without-soft-threshold",
        ),
        pytest.param(
            "",
            "memory.available<1Gi",
            "memory.available=soon",
            "eviction-soft-grace-period",
            "memory.available=soon",
            "'soon' is not a duration such as 90s, 1m30s or 2h",
            id="bad-grace-duration",
        ),
        pytest.param(
            "",
            "memory.available<1Gi",
            "memory.available:1m",
            "eviction-soft-grace-period",
            "memory.available:1m",
            "it is not <signal>=<duration>",
            id="grace-period-syntax",
        ),
        pytest.param(
            "",
            "memory.available<1Gi",
            "memory.available=1m,memory.available=2m",
            "eviction-soft-grace-period",
            "memory.available=2m",
            "signal memory.available has more than one grace period",
            id="duplicate-grace-period",
        ),
        pytest.param(
            "",
            "memory.available<1Gi",
            "memory.available=-1m",
            "eviction-soft-grace-period",
            "memory.available=-1m",
            "duration '-1m' is negative",
            id="negative-grace-period",
        ),
        pytest.param(
            "memory.available<100Mi,pid.available<10%",
            "",
            "",
            "eviction-hard",
            "pid.available<10%",
            "unsupported eviction signal 'pid.available' (supported: memory.available, nodefs.available)",
            id="unsupported-signal-in-list",
        ),
    ],
)
def test_parse_eviction_config_errors(hard: str, soft: str, grace: str, setting: str, value: str, problem: str) -> None:
    with pytest.raises(EvictionConfigError) as caught:
        parse_eviction_config(hard=hard, soft=soft, soft_grace_periods=grace)
    assert (caught.value.setting, caught.value.value, caught.value.problem) == (setting, value, problem)


@pytest.mark.parametrize(
    ("threshold", "capacity", "amount"),
    [
        pytest.param(Threshold(signal=MEM, quantity=100 * Mi), 8 * Gi, 100 * Mi, id="quantity-ignores-capacity"),
        pytest.param(Threshold(signal=NODEFS, percentage=Fraction(1, 10)), 1000, 100, id="percentage"),
        pytest.param(Threshold(signal=NODEFS, percentage=Fraction(1, 10)), 1009, 100, id="percentage-rounds-down"),
    ],
)
def test_threshold_amount(threshold: Threshold, capacity: int, amount: int) -> None:
    assert threshold.amount(capacity) == amount


def test_threshold_needs_exactly_one_value() -> None:
    with pytest.raises(ValueError):
        Threshold(signal=MEM)
    with pytest.raises(ValueError):
        Threshold(signal=MEM, quantity=1, percentage=Fraction(1, 2))


# --- pressure -----------------------------------------------------------------

HARD_MEM = Threshold(signal=MEM, quantity=100 * Mi)
SOFT_MEM = Threshold(signal=MEM, quantity=1 * Gi, grace_period=60.0)
HARD_DISK = Threshold(signal=NODEFS, percentage=Fraction(1, 10))


def _obs(memory: int | None = None, disk: int | None = None) -> dict[Signal, SignalObservation]:
    observations = {}
    if memory is not None:
        observations[MEM] = SignalObservation(available=memory, capacity=8 * Gi)
    if disk is not None:
        observations[NODEFS] = SignalObservation(available=disk, capacity=1000 * Gi)
    return observations


@pytest.mark.parametrize(
    ("thresholds", "observations", "expected"),
    [
        pytest.param([HARD_MEM], _obs(memory=99 * Mi), (HARD_MEM,), id="below-threshold"),
        pytest.param([HARD_MEM], _obs(memory=100 * Mi), (), id="exactly-at-threshold-is-not-pressure"),
        pytest.param([HARD_MEM], _obs(memory=4 * Gi), (), id="plenty-available"),
        pytest.param([HARD_DISK], _obs(disk=99 * Gi), (HARD_DISK,), id="below-percentage-of-capacity"),
        pytest.param([HARD_DISK], _obs(disk=100 * Gi), (), id="at-percentage-of-capacity"),
        pytest.param([HARD_MEM, HARD_DISK], _obs(disk=1 * Gi), (HARD_DISK,), id="missing-observation-not-met"),
        pytest.param(
            [HARD_DISK, HARD_MEM],
            _obs(memory=1 * Mi, disk=1 * Gi),
            (HARD_DISK, HARD_MEM),
            id="order-of-thresholds-kept",
        ),
    ],
)
def test_thresholds_met(
    thresholds: list[Threshold], observations: Mapping[Signal, SignalObservation], expected: tuple[Threshold, ...]
) -> None:
    assert thresholds_met(thresholds=thresholds, observations=observations) == expected


# Each step: (now, observations, thresholds acted on, signals under pressure).
Step = tuple[float, Mapping[Signal, SignalObservation], tuple[Threshold, ...], tuple[Signal, ...]]


@pytest.mark.parametrize(
    ("thresholds", "steps"),
    [
        pytest.param(
            [HARD_MEM],
            [
                (0.0, _obs(memory=50 * Mi), (HARD_MEM,), (MEM,)),
                (10.0, _obs(memory=500 * Mi), (), ()),
            ],
            id="hard-acts-at-once-and-clears-at-once",
        ),
        pytest.param(
            [SOFT_MEM],
            [
                (0.0, _obs(memory=512 * Mi), (), ()),
                (30.0, _obs(memory=512 * Mi), (), ()),
                (59.9, _obs(memory=512 * Mi), (), ()),
                (60.0, _obs(memory=512 * Mi), (SOFT_MEM,), (MEM,)),
                (75.0, _obs(memory=900 * Mi), (SOFT_MEM,), (MEM,)),
            ],
            id="soft-waits-for-its-grace-period",
        ),
        pytest.param(
            [SOFT_MEM],
            [
                (0.0, _obs(memory=512 * Mi), (), ()),
                (40.0, _obs(memory=2 * Gi), (), ()),
                (50.0, _obs(memory=512 * Mi), (), ()),
                (100.0, _obs(memory=512 * Mi), (), ()),
                (110.0, _obs(memory=512 * Mi), (SOFT_MEM,), (MEM,)),
            ],
            id="soft-grace-restarts-after-a-break",
        ),
        pytest.param(
            [SOFT_MEM],
            [
                (0.0, _obs(memory=512 * Mi), (), ()),
                (30.0, _obs(), (), ()),
                (60.0, _obs(memory=512 * Mi), (), ()),
            ],
            id="missing-reading-breaks-continuity",
        ),
        pytest.param(
            [HARD_MEM, SOFT_MEM],
            [
                (0.0, _obs(memory=512 * Mi), (), ()),
                (20.0, _obs(memory=50 * Mi), (HARD_MEM,), (MEM,)),
                (60.0, _obs(memory=50 * Mi), (HARD_MEM, SOFT_MEM), (MEM,)),
            ],
            id="hard-and-soft-on-one-signal",
        ),
        pytest.param(
            [HARD_DISK, HARD_MEM],
            [
                (0.0, _obs(memory=1 * Mi, disk=1 * Gi), (HARD_DISK, HARD_MEM), (MEM, NODEFS)),
                (5.0, _obs(memory=1 * Gi, disk=1 * Gi), (HARD_DISK,), (NODEFS,)),
            ],
            id="memory-listed-first-among-signals",
        ),
    ],
)
def test_evaluate_pressure_over_time(thresholds: list[Threshold], steps: Sequence[Step]) -> None:
    state = NO_PRESSURE
    seen: list[tuple[tuple[Threshold, ...], tuple[Signal, ...]]] = []
    for now, observations, _, _ in steps:
        state = evaluate_pressure(thresholds=thresholds, observations=observations, now=now, previous=state)
        seen.append((state.met, state.signals))
    assert seen == [(met, signals) for _, _, met, signals in steps]


def test_pressure_state_records_when_each_threshold_was_first_met() -> None:
    state = evaluate_pressure(thresholds=[HARD_MEM, SOFT_MEM], observations=_obs(memory=512 * Mi), now=5.0)
    state = evaluate_pressure(
        thresholds=[HARD_MEM, SOFT_MEM], observations=_obs(memory=50 * Mi), now=9.0, previous=state
    )
    assert state == PressureState(first_observed_at={SOFT_MEM: 5.0, HARD_MEM: 9.0}, met=(HARD_MEM,))


# --- ranking ------------------------------------------------------------------


def _usage(memory: Mapping[str, int]) -> dict[str, PodUsage]:
    """Memory readings by pod uid."""
    return {uid: PodUsage(uid=uid, memory=amount) for uid, amount in memory.items()}


@pytest.mark.parametrize(
    ("pods", "usages", "expected"),
    [
        pytest.param(
            [pod("under", memory=1 * Gi), pod("over", memory=100 * Mi, priority=1000)],
            _usage({"under": 900 * Mi, "over": 200 * Mi}),
            ["over", "under"],
            id="exceeding-request-first-even-with-higher-priority",
        ),
        pytest.param(
            [pod("high", memory=100 * Mi, priority=10), pod("low", memory=100 * Mi)],
            _usage({"high": 1 * Gi, "low": 200 * Mi}),
            ["low", "high"],
            id="then-lower-priority-first",
        ),
        pytest.param(
            [pod("a", memory=100 * Mi), pod("b", memory=100 * Mi)],
            _usage({"a": 150 * Mi, "b": 600 * Mi}),
            ["b", "a"],
            id="then-larger-usage-above-request-first",
        ),
        pytest.param(
            [pod("guaranteed", qos=QOSClass.GUARANTEED, memory=4 * Gi), pod("best-effort", qos=QOSClass.BESTEFFORT)],
            _usage({"guaranteed": 3 * Gi, "best-effort": 10 * Mi}),
            ["best-effort", "guaranteed"],
            id="best-effort-always-exceeds-its-zero-request",
        ),
        pytest.param(
            [pod("at", memory=100 * Mi, priority=0), pod("above", memory=100 * Mi, priority=5)],
            _usage({"at": 100 * Mi, "above": 100 * Mi + 1}),
            ["above", "at"],
            id="usage-equal-to-request-does-not-exceed",
        ),
        pytest.param(
            [pod("far-below", memory=1 * Gi), pod("near", memory=1 * Gi)],
            _usage({"far-below": 100 * Mi, "near": 1000 * Mi}),
            ["near", "far-below"],
            id="both-below-request-least-below-first",
        ),
        pytest.param(
            [pod("measured", priority=-10), pod("unmeasured", priority=100)],
            _usage({"measured": 5 * Gi}),
            ["unmeasured", "measured"],
            id="pod-without-reading-first",
        ),
        pytest.param(
            [pod("u-high", priority=5), pod("u-low", priority=1)],
            {},
            ["u-low", "u-high"],
            id="unmeasured-pods-by-priority",
        ),
        pytest.param(
            [pod("old", memory=1 * Gi, admitted_at=1.0), pod("new", memory=1 * Gi, admitted_at=2.0)],
            _usage({"old": 2 * Gi, "new": 2 * Gi}),
            ["new", "old"],
            id="tie-newest-first",
        ),
        pytest.param(
            [pod("b", memory=1 * Gi), pod("a", memory=1 * Gi)],
            _usage({"a": 2 * Gi, "b": 2 * Gi}),
            ["a", "b"],
            id="tie-then-uid",
        ),
        pytest.param(
            [
                pod("g-under", qos=QOSClass.GUARANTEED, memory=2 * Gi, priority=100),
                pod("bu-over-high", memory=512 * Mi, priority=100),
                pod("bu-over-low", memory=512 * Mi),
                pod("be", qos=QOSClass.BESTEFFORT),
                pod("bu-under", memory=1 * Gi),
            ],
            _usage(
                {
                    "g-under": 1 * Gi,
                    "bu-over-high": 3 * Gi,
                    "bu-over-low": 600 * Mi,
                    "be": 50 * Mi,
                    "bu-under": 800 * Mi,
                }
            ),
            ["bu-over-low", "be", "bu-over-high", "bu-under", "g-under"],
            id="mixed-node-usage-over-request-not-qos-decides",
        ),
    ],
)
def test_rank_memory_pressure(pods: list[PodInfo], usages: Mapping[str, PodUsage], expected: list[str]) -> None:
    assert [ranked.uid for ranked in rank_memory_pressure(pods, usages)] == expected


@pytest.mark.parametrize(
    ("pods", "usages", "expected"),
    [
        pytest.param(
            [
                pod("within", extra={"ephemeral-storage": 10 * Gi}),
                pod("over", extra={"ephemeral-storage": 1 * Gi}, priority=50),
            ],
            {"within": PodUsage(uid="within", disk=5 * Gi), "over": PodUsage(uid="over", disk=2 * Gi)},
            ["over", "within"],
            id="disk-exceeding-ephemeral-storage-request-first",
        ),
        pytest.param(
            [pod("small", memory=1), pod("big", memory=1)],
            {
                "small": PodUsage(uid="small", memory=50 * Gi, disk=1 * Gi),
                "big": PodUsage(uid="big", memory=1, disk=9 * Gi),
            },
            ["big", "small"],
            id="memory-ignored-for-disk",
        ),
        pytest.param(
            [pod("measured"), pod("no-disk-reading")],
            {
                "measured": PodUsage(uid="measured", disk=1 * Gi),
                "no-disk-reading": PodUsage(uid="no-disk-reading", memory=1),
            },
            ["no-disk-reading", "measured"],
            id="missing-disk-reading-first",
        ),
    ],
)
def test_rank_disk_pressure(pods: list[PodInfo], usages: Mapping[str, PodUsage], expected: list[str]) -> None:
    assert [ranked.uid for ranked in rank_disk_pressure(pods, usages)] == expected


def test_signal_to_rank_table() -> None:
    assert (
        dict(SIGNAL_TO_RANK)
        == build_signal_to_rank()
        == {
            MEM: rank_memory_pressure,
            NODEFS: rank_disk_pressure,
        }
    )
    # Plain signal names work as keys, since Signal is a str enum.
    assert SIGNAL_TO_RANK["memory.available"] is rank_memory_pressure  # type: ignore[index]


@pytest.mark.parametrize(
    ("signal", "pods", "usages", "expected"),
    [
        pytest.param(
            MEM,
            [
                pod("critical", priority=SYSTEM_CLUSTER_CRITICAL),
                pod("static", static=True),
                pod("worker", memory=1 * Gi),
            ],
            _usage({"critical": 9 * Gi, "static": 9 * Gi, "worker": 512 * Mi}),
            "worker",
            id="critical-and-static-pods-skipped",
        ),
        pytest.param(
            MEM,
            [pod("mirror", mirror=True), pod("critical", priority=SYSTEM_CLUSTER_CRITICAL)],
            _usage({"mirror": 1 * Gi, "critical": 1 * Gi}),
            None,
            id="only-critical-pods-nothing-to-evict",
        ),
        pytest.param(MEM, [], {}, None, id="no-pods"),
        pytest.param(
            NODEFS,
            [pod("writer"), pod("reader")],
            {"writer": PodUsage(uid="writer", disk=8 * Gi), "reader": PodUsage(uid="reader", disk=1 * Mi)},
            "writer",
            id="disk-signal-uses-disk-ranking",
        ),
    ],
)
def test_select_eviction_victim(
    signal: Signal, pods: list[PodInfo], usages: Mapping[str, PodUsage], expected: str | None
) -> None:
    victim = select_eviction_victim(signal=signal, pods=pods, usages=usages)
    assert (None if victim is None else victim.uid) == expected
