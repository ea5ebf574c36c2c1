"""Node-pressure eviction: thresholds, pressure detection, and victim ranking.

This is the pure half of the kubelet's eviction manager
(``pkg/kubelet/eviction/helpers.go``).  The agent's monitor measures the node
and each pod; this module decides

* which eviction thresholds are configured (:func:`parse_eviction_config`,
  in the kubelet's ``--eviction-hard`` / ``--eviction-soft`` /
  ``--eviction-soft-grace-period`` syntax, defaults
  ``memory.available<100Mi,nodefs.available<10%``);
* which signals are under pressure now (:func:`evaluate_pressure`); a soft
  threshold only counts once it has been met *continuously* for its grace
  period, so the function takes the previous :class:`PressureState` and
  returns the next one, and the caller keeps it;
* which pod to evict for a signal (:data:`SIGNAL_TO_RANK`,
  :func:`select_eviction_victim`).

Times are seconds on the caller's (monotonic) clock; this module never reads
a clock.  Byte amounts are plain integers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction
from types import MappingProxyType

from sluicegate.agent.policy.admission import PodInfo, is_critical
from sluicegate.durations import parse_duration as _parse_duration
from sluicegate.quantity import QuantityError, format_canonical, parse_canonical

__all__ = [
    "Signal",
    "DEFAULT_EVICTION_HARD",
    "Threshold",
    "EvictionConfigError",
    "parse_threshold",
    "parse_thresholds",
    "parse_duration",
    "parse_grace_periods",
    "parse_eviction_config",
    "default_thresholds",
    "SignalObservation",
    "thresholds_met",
    "thresholds_first_observed_at",
    "thresholds_met_grace_period",
    "PressureState",
    "NO_PRESSURE",
    "evaluate_pressure",
    "PodUsage",
    "RankFunc",
    "rank_memory_pressure",
    "rank_disk_pressure",
    "build_signal_to_rank",
    "SIGNAL_TO_RANK",
    "select_eviction_victim",
]


class Signal(StrEnum):
    """Eviction signals the agent understands (kubelet names).

    ``memory.available`` is the node's available memory; ``nodefs.available``
    is free bytes on the filesystem that holds pod working directories and
    logs.  ``imagefs`` has no meaning without container images.
    """

    MEMORY_AVAILABLE = "memory.available"
    NODEFS_AVAILABLE = "nodefs.available"


# The resource a signal's quantities are written in (for parsing "100Mi") and
# the pod request its ranking compares usage against.
_SIGNAL_RESOURCE: Mapping[Signal, str] = MappingProxyType(
    {Signal.MEMORY_AVAILABLE: "memory", Signal.NODEFS_AVAILABLE: "ephemeral-storage"}
)

# The kubelet relieves memory before anything else (byEvictionPriority).
_SIGNAL_ORDER = (Signal.MEMORY_AVAILABLE, Signal.NODEFS_AVAILABLE)

# The kubelet's Linux defaults for the signals we support.  100Mi leaves the
# kernel room to reclaim before the OOM killer acts; 10% of the root disk
# keeps logs and working directories writable.
DEFAULT_EVICTION_HARD = "memory.available<100Mi,nodefs.available<10%"

_HINT = "expected <signal><<quantity or percentage>, e.g. memory.available<100Mi or nodefs.available<10%"


class EvictionConfigError(ValueError):
    """An eviction setting could not be parsed.

    ``setting`` names the setting (``eviction-hard``, ``eviction-soft``,
    ``eviction-soft-grace-period``), ``value`` is the offending statement and
    ``problem`` what is wrong with it.  Nothing is applied: the caller should
    refuse the configuration.
    """

    def __init__(self, *, setting: str, value: str, problem: str, hint: str = _HINT) -> None:
        self.setting = setting
        self.value = value
        self.problem = problem
        super().__init__(f"{setting}: {value!r} is not valid: {problem}; {hint}")


@dataclass(frozen=True, slots=True)
class Threshold:
    """One eviction threshold: the signal is under pressure when available < the amount.

    Exactly one of ``quantity`` (bytes) and ``percentage`` (a fraction of the
    signal's capacity, strictly between 0 and 1) is set.  ``grace_period`` is
    in seconds; 0 makes the threshold hard, as in the kubelet, where a soft
    threshold with a zero grace period behaves exactly like a hard one.
    """

    signal: Signal
    quantity: int | None = None
    percentage: Fraction | None = None
    grace_period: float = 0.0

    def __post_init__(self) -> None:
        if (self.quantity is None) == (self.percentage is None):
            raise ValueError(f"threshold for {self.signal} needs exactly one of quantity and percentage")

    @property
    def is_hard(self) -> bool:
        """Hard thresholds act as soon as they are met."""
        return self.grace_period == 0

    def amount(self, capacity: int) -> int:
        """The threshold in bytes for a signal whose capacity is ``capacity``.

        Percentages are rounded down, like the kubelet's
        ``GetThresholdQuantity``, but computed exactly rather than through a
        float32.
        """
        if self.quantity is not None:
            return self.quantity
        assert self.percentage is not None
        return (capacity * self.percentage.numerator) // self.percentage.denominator

    def __str__(self) -> str:
        if self.quantity is not None:
            value = format_canonical(_SIGNAL_RESOURCE[self.signal], self.quantity)
        else:
            assert self.percentage is not None
            value = f"{float(self.percentage * 100):g}%"
        text = f"{self.signal}<{value}"
        return text if self.is_hard else f"{text} (grace {self.grace_period:g}s)"


def _parse_signal(setting: str, statement: str, name: str) -> Signal:
    try:
        return Signal(name)
    except ValueError:
        supported = ", ".join(signal.value for signal in Signal)
        raise EvictionConfigError(
            setting=setting, value=statement, problem=f"unsupported eviction signal {name!r} (supported: {supported})"
        ) from None


def _split_statement(setting: str, statement: str) -> tuple[Signal, str]:
    parts = statement.strip().split("<")
    if len(parts) != 2 or not parts[0] or not parts[1]:
        raise EvictionConfigError(setting=setting, value=statement, problem="it is not <signal><<value>")
    return _parse_signal(setting, statement, parts[0]), parts[1]


def _threshold_from_value(
    *, setting: str, statement: str, signal: Signal, value: str, grace_period: float
) -> Threshold | None:
    if value.endswith("%"):
        try:
            percent = Fraction(value[:-1])
        except (ValueError, ZeroDivisionError):
            raise EvictionConfigError(
                setting=setting, value=statement, problem=f"{value!r} is not a percentage"
            ) from None
        if percent < 0 or percent > 100:
            raise EvictionConfigError(
                setting=setting, value=statement, problem=f"percentage {value} must be between 0% and 100%"
            )
        if percent in (0, 100):
            return None
        return Threshold(signal=signal, percentage=percent / 100, grace_period=grace_period)
    try:
        quantity = parse_canonical(_SIGNAL_RESOURCE[signal], value)
    except QuantityError as exc:
        problem = str(exc) if "out of range" in str(exc) else f"{value!r} is neither a quantity nor a percentage"
        raise EvictionConfigError(setting=setting, value=statement, problem=problem) from None
    if quantity <= 0:
        raise EvictionConfigError(setting=setting, value=statement, problem=f"threshold {value} must be positive")
    return Threshold(signal=signal, quantity=quantity, grace_period=grace_period)


def parse_threshold(statement: str, *, setting: str = "eviction-hard", grace_period: float = 0.0) -> Threshold | None:
    """Parse one ``<signal><<value>`` statement, e.g. ``memory.available<100Mi``.

    The value is a quantity (``100Mi``, ``1Gi``, ``500M``), which must be
    positive, or a percentage of capacity (``10%``, ``7.5%``) between 0% and
    100%.  As in the current kubelet, ``0%`` and ``100%`` switch the signal's
    threshold off, and this returns None for them.
    """
    signal, value = _split_statement(setting, statement)
    return _threshold_from_value(
        setting=setting, statement=statement, signal=signal, value=value, grace_period=grace_period
    )


def _statements(expr: str) -> list[str]:
    return [part for part in (piece.strip() for piece in expr.split(",")) if part]


def parse_thresholds(
    expr: str, *, setting: str = "eviction-hard", grace_periods: Mapping[Signal, float] | None = None
) -> tuple[Threshold, ...]:
    """Parse a comma-separated list of threshold statements; each signal at most once.

    With ``grace_periods`` (soft thresholds) every signal listed must have
    one.  Disabled statements (``0%``/``100%``) are dropped.
    """
    results: list[Threshold] = []
    seen: set[Signal] = set()
    for statement in _statements(expr):
        signal, value = _split_statement(setting, statement)
        if signal in seen:
            raise EvictionConfigError(
                setting=setting, value=statement, problem=f"signal {signal} has more than one threshold"
            )
        seen.add(signal)
        grace = 0.0
        if grace_periods is not None:
            if signal not in grace_periods:
                raise EvictionConfigError(
                    setting=setting,
                    value=statement,
                    problem=(
                        f"a soft threshold needs a grace period, and eviction-soft-grace-period has none for {signal}"
                    ),
                    hint=f"add e.g. eviction-soft-grace-period={signal}=1m30s",
                )
            grace = grace_periods[signal]
        threshold = _threshold_from_value(
            setting=setting, statement=statement, signal=signal, value=value, grace_period=grace
        )
        if threshold is not None:
            results.append(threshold)
    return tuple(results)


def parse_duration(text: str) -> float:
    """Parse a Go duration (``90s``, ``1m30s``, ``1.5h``, ``0``) into seconds; negatives are errors."""
    return _parse_duration(text, allow_negative=False)


def parse_grace_periods(expr: str) -> dict[Signal, float]:
    """Parse ``<signal>=<duration>`` statements, e.g. ``memory.available=1m30s``."""
    setting = "eviction-soft-grace-period"
    hint = "expected <signal>=<duration>, e.g. memory.available=1m30s"
    results: dict[Signal, float] = {}
    for statement in _statements(expr):
        parts = statement.split("=")
        if len(parts) != 2:
            raise EvictionConfigError(
                setting=setting, value=statement, problem="it is not <signal>=<duration>", hint=hint
            )
        signal = _parse_signal(setting, statement, parts[0].strip())
        try:
            seconds = parse_duration(parts[1])
        except ValueError as err:
            raise EvictionConfigError(setting=setting, value=statement, problem=str(err), hint=hint) from None
        if signal in results:
            raise EvictionConfigError(
                setting=setting, value=statement, problem=f"signal {signal} has more than one grace period", hint=hint
            )
        results[signal] = seconds
    return results


def parse_eviction_config(
    *, hard: str = DEFAULT_EVICTION_HARD, soft: str = "", soft_grace_periods: str = ""
) -> tuple[Threshold, ...]:
    """Parse the three eviction settings into thresholds: hard ones first, then soft.

    A signal may have both a hard and a soft threshold.  Unlike the kubelet,
    a grace period for a signal with no soft threshold is an error rather
    than silently ignored: it is almost always a typo.
    """
    hard_thresholds = parse_thresholds(hard, setting="eviction-hard")
    graces = parse_grace_periods(soft_grace_periods)
    soft_thresholds = parse_thresholds(soft, setting="eviction-soft", grace_periods=graces)
    soft_signals = {_split_statement("eviction-soft", statement)[0] for statement in _statements(soft)}
    for signal in graces:
        if signal not in soft_signals:
            raise EvictionConfigError(
                setting="eviction-soft-grace-period",
                value=f"{signal}",
                problem=f"there is no soft threshold for {signal} in eviction-soft",
                hint="remove the grace period or add e.g. eviction-soft=memory.available<500Mi",
            )
    return hard_thresholds + soft_thresholds


def default_thresholds() -> tuple[Threshold, ...]:
    """The kubelet's default hard thresholds, for the signals we support."""
    return parse_thresholds(DEFAULT_EVICTION_HARD)


# --- pressure ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SignalObservation:
    """One reading of a signal: bytes available now, out of ``capacity``."""

    available: int
    capacity: int


def thresholds_met(
    *, thresholds: Sequence[Threshold], observations: Mapping[Signal, SignalObservation]
) -> tuple[Threshold, ...]:
    """The thresholds whose signal is strictly below them now, ignoring grace periods.

    A threshold whose signal has no observation is not met: the kubelet
    skips it too (and logs).  Order follows ``thresholds``.
    """
    met: list[Threshold] = []
    for threshold in thresholds:
        observed = observations.get(threshold.signal)
        if observed is not None and observed.available < threshold.amount(observed.capacity):
            met.append(threshold)
    return tuple(met)


def thresholds_first_observed_at(
    *, met: Sequence[Threshold], previous: Mapping[Threshold, float], now: float
) -> dict[Threshold, float]:
    """When each threshold in ``met`` was first seen met without a break.

    A threshold met last time keeps its earlier time; a newly met one starts
    at ``now``.  Thresholds no longer met are dropped, which restarts their
    grace period if they come back.
    """
    return {threshold: previous.get(threshold, now) for threshold in met}


def thresholds_met_grace_period(*, first_observed_at: Mapping[Threshold, float], now: float) -> tuple[Threshold, ...]:
    """The thresholds met for at least their grace period (hard ones at once)."""
    return tuple(threshold for threshold, since in first_observed_at.items() if now - since >= threshold.grace_period)


@dataclass(frozen=True, slots=True)
class PressureState:
    """What :func:`evaluate_pressure` learned; pass it back in on the next call.

    ``first_observed_at`` holds every threshold currently met (grace period
    or not) and when it started being met; ``met`` holds those past their
    grace period, which are the ones to act on.
    """

    first_observed_at: Mapping[Threshold, float] = field(default_factory=dict, hash=False)
    met: tuple[Threshold, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "first_observed_at", MappingProxyType(dict(self.first_observed_at)))

    @property
    def signals(self) -> tuple[Signal, ...]:
        """Signals under pressure, memory first: evict for ``signals[0]``."""
        under = {threshold.signal for threshold in self.met}
        return tuple(signal for signal in _SIGNAL_ORDER if signal in under)


NO_PRESSURE = PressureState()


def evaluate_pressure(
    *,
    thresholds: Sequence[Threshold],
    observations: Mapping[Signal, SignalObservation],
    now: float,
    previous: PressureState = NO_PRESSURE,
) -> PressureState:
    """Which thresholds are met now, and which of them have outlasted their grace period.

    The kubelet's synchronize step: thresholdsMet, then
    thresholdsFirstObservedAt against the previous state, then
    thresholdsMetGracePeriod.  The kubelet's minimum-reclaim and
    pressure-transition-period refinements are not modelled.
    """
    met_now = thresholds_met(thresholds=thresholds, observations=observations)
    first = thresholds_first_observed_at(met=met_now, previous=previous.first_observed_at, now=now)
    return PressureState(first_observed_at=first, met=thresholds_met_grace_period(first_observed_at=first, now=now))


# --- ranking ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PodUsage:
    """One pod's measured usage; None where the monitor has no reading.

    ``memory`` is the working set in bytes, ``disk`` the bytes the pod uses on
    nodefs (working directory and logs).
    """

    uid: str
    memory: int | None = None
    disk: int | None = None


RankFunc = Callable[[Sequence[PodInfo], Mapping[str, PodUsage]], list[PodInfo]]


def _usage_key(pod: PodInfo, usage: int | None, request: int) -> tuple[int, int, int, int, float, str]:
    """Eviction sort key; the pod to evict first sorts first.

    Criteria, in order:

    1. pods with no reading first (we cannot tell they are harmless);
    2. usage above the pod's request first;
    3. lower priority first;
    4. larger usage above (or least below) the request first;
    5. most recently admitted first (loses the least work);
    6. uid.

    (1)-(4) are the kubelet's comparators (exceedMemoryRequests / priority /
    memory, or their disk twins); the kubelet's sort is not stable, so it has
    no (5)-(6) and ties come out in any order.
    """
    if usage is None:
        return (0, 0, pod.priority, 0, -pod.admitted_at, pod.uid)
    return (1, 0 if usage > request else 1, pod.priority, request - usage, -pod.admitted_at, pod.uid)


def _rank(
    pods: Sequence[PodInfo],
    usages: Mapping[str, PodUsage],
    *,
    resource: str,
    reading: Callable[[PodUsage], int | None],
) -> list[PodInfo]:
    def key(pod: PodInfo) -> tuple[int, int, int, int, float, str]:
        found = usages.get(pod.uid)
        return _usage_key(pod, None if found is None else reading(found), pod.requests.get(resource, 0))

    return sorted(pods, key=key)


def rank_memory_pressure(pods: Sequence[PodInfo], usages: Mapping[str, PodUsage]) -> list[PodInfo]:
    """Order pods for eviction under memory pressure (kubelet rankMemoryPressure).

    Working set against the memory request; criteria in :func:`_usage_key`.
    """
    return _rank(pods, usages, resource="memory", reading=lambda usage: usage.memory)


def rank_disk_pressure(pods: Sequence[PodInfo], usages: Mapping[str, PodUsage]) -> list[PodInfo]:
    """Order pods for eviction under nodefs pressure (kubelet rankDiskPressureFunc).

    Disk usage against the ephemeral-storage request; criteria in :func:`_usage_key`.
    """
    return _rank(pods, usages, resource="ephemeral-storage", reading=lambda usage: usage.disk)


def build_signal_to_rank() -> dict[Signal, RankFunc]:
    """The rank function for each signal (kubelet buildSignalToRankFunc)."""
    return {Signal.MEMORY_AVAILABLE: rank_memory_pressure, Signal.NODEFS_AVAILABLE: rank_disk_pressure}


SIGNAL_TO_RANK: Mapping[Signal, RankFunc] = MappingProxyType(build_signal_to_rank())


def select_eviction_victim(
    *, signal: Signal, pods: Sequence[PodInfo], usages: Mapping[str, PodUsage]
) -> PodInfo | None:
    """The one pod to evict this round for ``signal``, or None when none may be evicted.

    Ranks with :data:`SIGNAL_TO_RANK` and skips critical pods, as the
    kubelet's evictPod refuses them (a static pod would never come back).
    The kubelet evicts at most one pod per round and re-measures before the
    next; the caller should do the same.
    """
    for pod in SIGNAL_TO_RANK[signal](pods, usages):
        if not is_critical(pod):
            return pod
    return None
