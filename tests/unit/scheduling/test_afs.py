"""Admission Fair Sharing arithmetic, from Kueue's pkg/util/admissionfairsharing/admission_fair_sharing_test.go
(TestCalculateEntryPenaltyWithLongHalfLife, TestCalculateDecayedConsumedAccumulatesSubMilli,
TestCalculateDecayedConsumedConvergesToUsage, TestCalculateUsageWithDRA) and the formulas of
admission_fair_sharing.go."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from sluicegate.controller.scheduling import afs
from sluicegate.model.config import AdmissionFairSharingConfig

WEEK = 168 * 3600.0
FIVE_MINUTES = 300.0


@pytest.mark.parametrize(("elapsed", "half_life", "expected"), [
    pytest.param(10, 10, 0.5, id="one half-life: half of the new sample"),
    pytest.param(20, 10, 0.75, id="two half-lives"),
    pytest.param(0, 10, 0.0, id="no time passed: nothing changes"),
    pytest.param(10, 0, 0.0, id="half-life 0: alpha is 0 (Kueue special-cases it)"),
])
def test_alpha(elapsed: float, half_life: float, expected: float) -> None:
    assert afs.alpha(elapsed, half_life) == pytest.approx(expected)


def test_decay_converges_to_current_usage_on_the_half_life_curve_and_never_exceeds_it() -> None:
    """TestCalculateDecayedConsumedConvergesToUsage: 1 - 0.5^n of the way after n half-lives (2016 samples each)."""
    usage = {"cpu": 2000.0}
    consumed: dict[str, float] = {}
    for half_lives, want in ((1, 1000.0), (2, 1500.0), (3, 1750.0)):
        for _ in range(2016):
            consumed = afs.decayed(consumed, usage, FIVE_MINUTES, WEEK)
        assert consumed["cpu"] == pytest.approx(want, abs=1.0), half_lives
        assert consumed["cpu"] <= usage["cpu"]


def test_small_contributions_accumulate() -> None:
    """TestCalculateDecayedConsumedAccumulatesSubMilli: a week's half-life sampled every 5m still grows."""
    consumed: dict[str, float] = {}
    previous = 0.0
    for _ in range(3):
        consumed = afs.decayed(consumed, {"cpu": 2000.0, "nvidia.com/gpu": 1.0}, FIVE_MINUTES, WEEK)
        assert consumed["cpu"] > previous and consumed["nvidia.com/gpu"] > 0
        previous = consumed["cpu"]


def test_a_sample_with_half_life_zero_resets_usage() -> None:
    """The LocalQueue reconciler's halfLifeTime == 0 branch: consumed resources become empty."""
    assert afs.sampled({"cpu": 5000.0}, {"cpu": 1000.0}, 60, 0) == {}


def test_entry_penalty_is_alpha_of_the_sampling_interval_times_the_requests() -> None:
    """TestCalculateEntryPenaltyWithLongHalfLife: positive even for a week's half-life; and exact when they match."""
    cfg = AdmissionFairSharingConfig(usage_half_life_seconds=WEEK, usage_sampling_interval_seconds=FIVE_MINUTES)
    penalty = afs.entry_penalty({"cpu": 2000.0, "nvidia.com/gpu": 1.0}, cfg)
    assert penalty["cpu"] > 0 and penalty["nvidia.com/gpu"] > 0
    same = AdmissionFairSharingConfig(usage_half_life_seconds=60, usage_sampling_interval_seconds=60)
    assert afs.entry_penalty({"cpu": 4000.0}, same) == {"cpu": pytest.approx(2000.0)}
    assert afs.entry_penalty({"cpu": 4000.0}, AdmissionFairSharingConfig()) == {"cpu": 0.0}


@pytest.mark.parametrize(("consumed", "weight", "resource_weights", "expected"), [
    pytest.param({"example.com/gpu": 2}, 1, {}, 2, id="unlisted resource weighs 1"),
    pytest.param({"example.com/gpu": 2}, 1, {"example.com/gpu": 3}, 6, id="explicit resource weight"),
    pytest.param({"cpu": 4, "example.com/gpu": 2}, 1, {"cpu": 1, "example.com/gpu": 5}, 14, id="mixed resources"),
    pytest.param({"example.com/gpu": 2}, 1, {"example.com/gpu": 0}, 0, id="resource weight 0 contributes nothing"),
    pytest.param({"example.com/gpu": 3}, 2, {"example.com/gpu": 4}, 6, id="divided by the LocalQueue weight"),
    pytest.param({"cpu": 0}, 0, {}, math.inf, id="weight 0 is +inf even with no usage (goes last)"),
    pytest.param({}, Fraction(1, 2), {}, 0, id="nothing consumed"),
])
def test_usage(consumed: dict[str, float], weight: float, resource_weights: dict[str, float],
               expected: float) -> None:
    """TestCalculateUsageWithDRA's table, plus the weight cases of CalculateUsage."""
    assert afs.usage(consumed, weight, resource_weights) == expected


def test_charge_decays_to_now_then_adds_the_penalty() -> None:
    """updateAfsConsumedUsage: decay (with the admitted usage) over the time since lastUpdate, plus the penalty."""
    got = afs.charged({"cpu": 1000.0}, {"cpu": 3000.0}, {"cpu": 500.0}, elapsed=10, half_life=10)
    assert got == {"cpu": pytest.approx(1000 * 0.5 + 3000 * 0.5 + 500)}
