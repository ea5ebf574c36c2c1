"""Checks of the bench's own arithmetic (config expansion, ideal bound, Kueue's summary maths).

Not part of the suite (tests/ is); run explicitly:

    .venv/bin/pytest bench/kueue_scheduler/test_bench.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.kueue_scheduler.config import ConfigError, expand, ideal_bound, load_config, parse_config, scaled  # noqa: E402
from bench.kueue_scheduler.recorder import Observation, Recorder  # noqa: E402

HERE = Path(__file__).resolve().parent


def one_queue(*, count: int = 1, runtime_ms: int = 1000, request: object = 1) -> dict[str, object]:
    return {"cohorts": [{"className": "cohort", "count": 1, "queuesSets": [{
        "className": "cq", "count": 1, "nominalQuota": 20, "borrowingLimit": 100,
        "reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority",
        "workloadsSets": [{"count": count, "creationIntervalMs": 100, "workloads": [
            {"className": "small", "runtimeMs": runtime_ms, "priority": 50, "request": request}]}],
    }]}]}


@pytest.mark.parametrize(
    ("name", "queues", "workloads", "ideal_s", "work_s", "creation_s"),
    [
        # 6 CQs x (350x1x0.2 + 100x5x0.5 + 50x20x1) = 7,920 CPU-s on 120 CPUs; last large at 60 s + 1 s.
        ("baseline", 30, 15_000, 66.0, 66.0, 61.0),
        # 100 CQs x (35x1x0.15 + 11x5x0.35 + 4x20x0.7) = 8,050 CPU-s on 2,000 CPUs; last medium at 3.3 s + 0.35 s.
        ("large-scale", 1_000, 50_000, 4.025, 4.025, 3.65),
    ],
    ids=["baseline", "large-scale"],
)
def test_shipped_configs_expand_like_kueue(name: str, queues: int, workloads: int, ideal_s: float, work_s: float,
                                           creation_s: float) -> None:
    plan = expand(load_config(HERE / "configs" / name / "generator.yaml"))
    bound = ideal_bound(plan)
    assert (len(plan.queues), len(plan.workloads)) == (queues, workloads)
    assert (round(bound.wall_s, 3), round(bound.work_s, 3), round(bound.creation_s, 3)) == (ideal_s, work_s, creation_s)
    assert plan.queues[0].name == "cq-0-0-cohort-0"
    assert (plan.workloads[0].namespace, plan.workloads[0].name, plan.workloads[0].due) == ("cq-0-0-cohort-0", "small-0-0-0", 0.06 if name == "large-scale" else 0.1)


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ({"cohorts": [{"className": "c", "count": 1, "queuesSets": [], "lendingLimit": 1}]}, "cohorts[0].lendingLimit"),
        (one_queue(request="lots"), "cohorts[0].queuesSets[0].workloadsSets[0].workloads[0].request"),
        (one_queue(count=-1), "cohorts[0].queuesSets[0].workloadsSets[0].count"),
        ({}, "$.cohorts"),
    ],
    ids=["unknown-field", "bad-quantity", "negative-count", "no-cohorts"],
)
def test_bad_config_names_the_field(raw: object, key: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(raw, source="test.yaml")
    assert err.value.key == key


def test_scaling_divides_counts_and_multiplies_times() -> None:
    cfg = scaled(parse_config(one_queue(count=350, runtime_ms=200), source="t"), count_scale=0.1, time_scale=0.5)
    plan = expand(cfg)
    assert [(w.name, w.due, w.runtime_ms) for w in plan.workloads[:2]] == [("small-0-0-0", 0.05, 100), ("small-0-1-0", 0.1, 100)]
    assert len(plan.workloads) == 35


def ob(name: str, *, reserved: bool = False, admitted: bool = False, evicted: bool = False, finished: bool = False) -> Observation:
    return Observation(namespace="cq-0-0-cohort-0", name=name, quota_reserved=reserved, admitted=admitted, evicted=evicted,
                       finished=finished)


ADMIT = {"reserved": True, "admitted": True}


@pytest.mark.parametrize(
    ("events", "cq", "small"),
    [
        (
            # Created at 0, admitted at 1, finished at 3: 1 CPU for 2 s of a 3 s window on 20 CPUs.
            [(0.0, ob("small-0-0-0")), (1.0, ob("small-0-0-0", **ADMIT)), (3.0, ob("small-0-0-0", **ADMIT, finished=True))],
            {"cpuUsed": 2_000_000, "cpuAverageUsage": 666, "nominalQuota": 20_000, "usagePercent": 3.33, "maxUsage": 1000},
            {"count": 1, "totalEvictions": 0, "averageTimeToAdmissionMs": 1000, "averageTimeToFinishMs": 3000, "finished": 1},
        ),
        (
            # Evicted at 2 but holding quota until its pod exits at 2.5; admitted again at 4 (Kueue keeps the
            # last admission), finished at 5.  Quota held 1-2.5 and 4-5.
            [(0.0, ob("small-0-0-0")), (1.0, ob("small-0-0-0", **ADMIT)), (2.0, ob("small-0-0-0", **ADMIT, evicted=True)),
             (2.5, ob("small-0-0-0", evicted=True)), (4.0, ob("small-0-0-0", **ADMIT)),
             (5.0, ob("small-0-0-0", **ADMIT, finished=True))],
            {"cpuUsed": 2_500_000, "cpuAverageUsage": 500, "nominalQuota": 20_000, "usagePercent": 2.5, "maxUsage": 1000},
            {"count": 1, "totalEvictions": 1, "averageTimeToAdmissionMs": 4000, "averageTimeToFinishMs": 5000, "finished": 1},
        ),
        (
            # One workload finished, one never admitted: Kueue averages over both (0 for the second).
            [(0.0, ob("small-0-0-0")), (0.0, ob("small-0-1-0")), (2.0, ob("small-0-0-0", **ADMIT)),
             (4.0, ob("small-0-0-0", **ADMIT, finished=True)), (4.0, ob("unknown"))],
            {"cpuUsed": 2_000_000, "cpuAverageUsage": 500, "nominalQuota": 20_000, "usagePercent": 2.5, "maxUsage": 1000},
            {"count": 2, "totalEvictions": 0, "averageTimeToAdmissionMs": 1000, "averageTimeToFinishMs": 2000, "finished": 1},
        ),
    ],
    ids=["admit-finish", "evict-readmit", "never-admitted-counts-as-zero"],
)
def test_summary_matches_kueue_recorder(events: list[tuple[float, Observation]], cq: dict[str, object],
                                        small: dict[str, object]) -> None:
    plan = expand(parse_config(one_queue(count=2), source="t"))
    rec = Recorder(plan)
    rec.queue_created("cq-0-0-cohort-0", 0.0)
    for at, o in events:
        rec.observe(o, at)
    summary = rec.summary(epoch_offset=0.0)
    got_cq = {k: v for k, v in summary["clusterQueueClasses"]["cq"].items() if k in cq}  # type: ignore[index]
    got_small = {k: v for k, v in summary["workloadClasses"]["small"].items() if k in small}  # type: ignore[index]
    assert (got_cq, got_small) == (cq, small)
