"""RFC 3339 timestamps and Go durations, both directions."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sluicegate.manifest import timefmt
from sluicegate.manifest.timefmt import _format_exact, format_duration, format_rfc3339, parse_duration, parse_rfc3339


@pytest.mark.parametrize(
    ("text", "epoch"),
    [
        pytest.param("1970-01-01T00:00:00Z", 0.0, id="epoch"),
        pytest.param("2024-05-01T12:00:00Z", 1714564800.0, id="utc"),
        pytest.param("2024-05-01T12:00:00.5Z", 1714564800.5, id="fraction"),
        pytest.param("2024-05-01T12:00:00.123456789Z", 1714564800.123456789, id="nanoseconds"),
        pytest.param("2024-05-01T14:30:00+02:30", 1714564800.0, id="positive-offset"),
        pytest.param("2024-05-01T07:00:00-05:00", 1714564800.0, id="negative-offset"),
        pytest.param("2024-05-01t12:00:00z", 1714564800.0, id="lower-case-separators"),
        pytest.param("2024-02-29T00:00:00Z", 1709164800.0, id="leap-day"),
        pytest.param("1969-12-31T23:59:59Z", -1.0, id="before-epoch"),
    ],
)
def test_parse_rfc3339(text: str, epoch: float) -> None:
    assert parse_rfc3339(text) == epoch


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("2024-05-01 12:00:00Z", "is not an RFC 3339 timestamp", id="space-separator"),
        pytest.param("2024-05-01T12:00:00", "is not an RFC 3339 timestamp", id="no-zone"),
        pytest.param("2024-05-01", "is not an RFC 3339 timestamp", id="date-only"),
        pytest.param("2023-02-29T00:00:00Z", "is not a real calendar date", id="not-a-leap-year"),
        pytest.param("2024-05-01T24:00:00Z", "has a time of day out of range", id="hour-24"),
        pytest.param("2024-05-01T12:00:60Z", "has a time of day out of range", id="leap-second"),
        pytest.param("2024-05-01T12:00:00+25:00", "has a UTC offset out of range", id="offset-out-of-range"),
    ],
)
def test_parse_rfc3339_rejects(text: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_rfc3339(text)
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("epoch", "text"),
    [
        pytest.param(0.0, "1970-01-01T00:00:00Z", id="epoch"),
        pytest.param(1714564800.0, "2024-05-01T12:00:00Z", id="whole-seconds"),
        pytest.param(1714564800.5, "2024-05-01T12:00:00.5Z", id="half-second"),
        pytest.param(1714564800.25, "2024-05-01T12:00:00.25Z", id="quarter-second"),
        pytest.param(-1.5, "1969-12-31T23:59:58.5Z", id="before-epoch"),
    ],
)
def test_format_rfc3339(epoch: float, text: str) -> None:
    assert format_rfc3339(epoch) == text


@pytest.mark.parametrize("seed", range(5))
def test_rfc3339_round_trip_is_exact_for_any_float_timestamp(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(2000):
        epoch = rng.uniform(0, 4_102_444_800)  # up to 2100, like time.time() readings
        assert parse_rfc3339(format_rfc3339(epoch)) == epoch


@pytest.mark.parametrize(
    ("low", "high"),
    [
        pytest.param(1.0, 1_000.0, id="first-seconds"),
        pytest.param(1_600_000_000.0, 1_900_000_000.0, id="this-era"),
        pytest.param(1e11, 253_402_300_799.0, id="up-to-year-9999"),
    ],
)
def test_format_rfc3339_fast_path_writes_what_the_exact_conversion_writes(low: float, high: float) -> None:
    # The repr()-based path must pick the very digits of the Fraction-based reference.
    rng = random.Random(f"{low}-{high}")
    epochs = [rng.uniform(low, high) for _ in range(3000)] + [float(rng.randint(int(low), int(high))) + k / 8 for k in range(8)]
    assert [timefmt._format_rfc3339(e) for e in epochs] == [_format_exact(e) for e in epochs]


@pytest.mark.parametrize(
    ("epoch", "text"),
    [
        pytest.param(1714564800, "2024-05-01T12:00:00Z", id="int"),
        pytest.param(0.5, "1970-01-01T00:00:00.5Z", id="below-the-fast-path"),
        pytest.param(1e12, "33658-09-27T01:46:40Z", id="beyond-year-9999"),
    ],
)
def test_format_rfc3339_off_the_float_path_is_the_reference(epoch: float, text: str) -> None:
    # Only floats of this era take the shortcut; anything else goes the way it always went.
    if epoch >= 253_402_300_800:
        with pytest.raises(OverflowError):
            format_rfc3339(epoch)
        return
    assert format_rfc3339(epoch) == text == _format_exact(float(epoch))


def test_format_rfc3339_float_subclass_is_written_by_its_value() -> None:
    class Stamp(float):
        def __repr__(self) -> str:
            return "Stamp"

    assert format_rfc3339(Stamp(1714564800.25)) == "2024-05-01T12:00:00.25Z"


@given(st.floats(min_value=-1e12, max_value=1e12) | st.integers(-10**12, 10**12)
       | st.sampled_from([math.nan, math.inf, -math.inf]))
@settings(max_examples=500, deadline=None)
def test_format_rfc3339_memo_answers_what_the_conversion_answers(epoch: float) -> None:
    try:
        expected = _format_exact(float(epoch)) if math.isfinite(epoch) else None
    except (ValueError, OverflowError):
        expected = None
    if expected is None:
        with pytest.raises((ValueError, OverflowError)):
            format_rfc3339(epoch)
    else:
        assert format_rfc3339(epoch) == expected
        assert format_rfc3339(epoch) == expected  # the remembered text


def test_format_rfc3339_memo_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timefmt, "_STAMPS_SIZE", 8)
    monkeypatch.setattr(timefmt, "_stamps", {})
    for k in range(20):
        assert format_rfc3339(1714564800.0 + k / 4) == _format_exact(1714564800.0 + k / 4)
        assert len(timefmt._stamps) <= 8


@pytest.mark.parametrize(
    ("epoch", "error"),
    [
        pytest.param(float("nan"), ValueError, id="nan"),
        pytest.param(float("inf"), ValueError, id="infinity"),
        pytest.param(253_402_300_800.0, OverflowError, id="year-10000"),
    ],
)
def test_format_rfc3339_rejects_what_it_cannot_write(epoch: float, error: type[Exception]) -> None:
    with pytest.raises(error):
        format_rfc3339(epoch)


def test_format_rfc3339_rejects_non_finite() -> None:
    with pytest.raises(ValueError):
        format_rfc3339(float("nan"))


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        pytest.param("0", 0.0, id="bare-zero"),
        pytest.param("45s", 45.0, id="seconds"),
        pytest.param("5m", 300.0, id="minutes"),
        pytest.param("1h30m", 5400.0, id="hours-minutes"),
        pytest.param("1h30m15s", 5415.0, id="hours-minutes-seconds"),
        pytest.param("500ms", 0.5, id="milliseconds"),
        pytest.param("1.5h", 5400.0, id="fractional-hours"),
        pytest.param("2m3.5s", 123.5, id="fractional-seconds"),
        pytest.param("250us", 0.00025, id="microseconds"),
        pytest.param("250µs", 0.00025, id="micro-sign"),
        pytest.param("10ns", 1e-8, id="nanoseconds"),
        pytest.param("-30s", -30.0, id="negative"),
        pytest.param("+1m", 60.0, id="explicit-plus"),
        pytest.param(".5s", 0.5, id="leading-dot"),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "5", "5 m", "1d", "m", "1h30", "s5", "1..5s", "."])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_duration(text)
    assert "is not a duration" in str(info.value)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        pytest.param(0.0, "0s", id="zero"),
        pytest.param(45.0, "45s", id="seconds"),
        pytest.param(300.0, "5m", id="minutes"),
        pytest.param(5400.0, "1h30m", id="hours-minutes"),
        pytest.param(3661.0, "1h1m1s", id="all-units"),
        pytest.param(0.5, "0.5s", id="sub-second"),
        pytest.param(90.25, "1m30.25s", id="fractional-seconds"),
        pytest.param(-60.0, "-1m", id="negative"),
    ],
)
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize("seed", range(3))
def test_duration_round_trip_is_exact(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(2000):
        seconds = rng.choice([rng.uniform(0, 100_000), float(rng.randrange(0, 100_000)), rng.uniform(0, 1)])
        assert parse_duration(format_duration(seconds)) == seconds
