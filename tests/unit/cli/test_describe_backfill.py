"""``sluicectl describe workload`` for Backfill queues: the head's expected start, and why others ran ahead."""

from __future__ import annotations

from sluicegate.cli.render import describe_workload


def _wl(**status: object) -> dict[str, object]:
    return {"metadata": {"name": "w", "namespace": "default"}, "spec": {"queueName": "lq"}, "status": status}


def test_blocked_head_shows_its_expected_start() -> None:
    msg = ("couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 6 more "
           "needed. reserved: expected to start at 2026-01-01T00:11:00Z, when admitted workloads reach their time "
           "limits")
    text = describe_workload(_wl(conditions=[{"type": "QuotaReserved", "status": "False", "reason": "Pending",
                                               "message": msg}]))
    assert "Expected start: 2026-01-01T00:11:00Z (reservation, from running workloads' time limits)" in text


def test_backfilled_workload_says_why_it_ran_ahead() -> None:
    why = ("backfilled: ends by 2026-01-01T00:10:00Z, before the reservation of default/wide (ClusterQueue cq) at "
           "2026-01-01T00:11:00Z")
    text = describe_workload(_wl(
        admission={"clusterQueue": "cq", "podSetAssignments": []},
        conditions=[{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                     "message": f"Quota reserved in ClusterQueue cq; {why}"}]))
    assert f"Backfilled:    {why.removeprefix('backfilled: ')}" in text
