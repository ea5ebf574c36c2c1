"""Backfill with reservations (scheduling/backfill.py), checked against a plain discrete-time simulation.

The idea follows Slurm's backfill scheduler (sched/backfill, "backfill
scheduling" in slurm.conf(5)): a blocked head is promised the earliest time
enough resources free up, from the running jobs' time limits, and later jobs
start ahead only if that does not delay the promise.  The properties:

* the reservation start is the first integer moment at which the head's need
  fits for its whole duration, in a simulation that just adds up usage;
* whatever sequence of candidates the planner lets through, the head still
  fits from that moment on in the same simulation (it is never delayed);
* a candidate that ends before the reservation, or uses quota the head does
  not need, is let through.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from sluicegate.controller.scheduling.backfill import BackfillState, Planner
from sluicegate.controller.scheduling.cycle import EntryStatus, RequeueReason, run_cycle
from sluicegate.controller.scheduling.flavors import Mode
from sluicegate.controller.scheduling.preemption import Preemptor
from sluicegate.controller.scheduling.snapshot import AdmittedWorkload, Snapshot
from sluicegate.model import ClusterQueueName, FlavorName, FlavorResource, QueueingStrategy, Workload, WorkloadKey
from tests.builders import cluster_queue, workload
from tests.unit.scheduling_preemption.builders import admitted, head, snapshot

CPU = FlavorResource(FlavorName("default"), "cpu")
NOW = 100.0
M = 1000  # quota is kept in milli-cpus
A, B = ClusterQueueName("a"), ClusterQueueName("b")


def limited(wl: Workload, limit: int | None) -> Workload:
    return replace(wl, maximum_execution_time_seconds=limit)


def running(name: str, cq: str, cpu: int, *, started: float, limit: int | None) -> AdmittedWorkload:
    a = admitted(name, cq, {"cpu": cpu}, admitted_at=started)
    return replace(a, workload=limited(a.workload, limit))


def cohort_snapshot(nominal_a: int, nominal_b: int, run: list[AdmittedWorkload]) -> Snapshot:
    snap = snapshot(cqs=[
        cluster_queue("a", cohort="co", quota={"default": {"cpu": nominal_a}}, strategy=QueueingStrategy.BACKFILL),
        cluster_queue("b", cohort="co", quota={"default": {"cpu": nominal_b}}, strategy=QueueingStrategy.BACKFILL),
    ], admitted=run)
    snap.now = NOW
    return snap


def plain_earliest(capacity: int, holds: list[tuple[int, float, float]], need: int, duration: float,
                   horizon: int) -> float | None:
    """First integer moment t >= NOW with usage + need <= capacity over [t, t + duration)."""
    def used(t: float) -> int:
        return sum(cpu for cpu, start, end in holds if start <= t < end)

    for t in range(int(NOW), horizon):
        span = range(t, min(horizon, int(t + duration)) if duration != float("inf") else horizon)
        if all(used(x) + need <= capacity for x in span):
            return float(t)
    return None


running_st = st.lists(st.tuples(st.integers(1, 4), st.integers(0, 99), st.integers(1, 60)), max_size=6)
candidate_st = st.lists(
    st.tuples(st.sampled_from("ab"), st.integers(1, 4), st.one_of(st.none(), st.integers(1, 80))), max_size=10)


@settings(max_examples=300, deadline=None)
@given(nominal=st.tuples(st.integers(2, 6), st.integers(0, 6)), run=running_st, need=st.integers(1, 8),
       duration=st.integers(1, 50), candidates=candidate_st)
def test_backfilled_workloads_never_delay_the_reservation(
    nominal: tuple[int, int], run: list[tuple[int, int, int]], need: int, duration: int,
    candidates: list[tuple[str, int, int | None]],
) -> None:
    capacity = sum(nominal)
    # Running workloads: all still running now (started <= NOW < end), and fitting in the cohort together.
    holds: list[tuple[int, float, float]] = []
    admitted_now: list[AdmittedWorkload] = []
    for i, (cpu, started, limit) in enumerate(run):
        end = started + limit + NOW - 99  # some end soon, some later; all after NOW
        start = end - limit
        if sum(h[0] for h in holds) + cpu > capacity or end <= NOW:
            continue
        holds.append((cpu, start, end))
        admitted_now.append(running(f"r{i}", "a" if i % 2 else "b", cpu, started=start, limit=limit))
    snap = cohort_snapshot(nominal[0], nominal[1], admitted_now)
    if need > capacity:
        return
    horizon = int(NOW) + 300
    expected = plain_earliest(capacity, holds, need, duration, horizon)
    if expected == NOW:
        return  # it fits now: not blocked, nothing to reserve
    state = BackfillState()
    planner = Planner(snap, state)
    planner.blocked(limited(workload("head", requests={"cpu": need}), duration), A, {CPU: need * M})
    reservation = state.held_by(WorkloadKey("default/head"))
    assert reservation is not None
    assert reservation.start == expected

    let_through = 0
    for j, (cq, cpu, limit) in enumerate(candidates):
        wl = limited(workload(f"c{j}", requests={"cpu": cpu}, created=float(j + 1)), limit)
        node = snap.node(ClusterQueueName(cq))
        usage = {CPU: cpu * M}
        if not snap.view.fits(node, usage):
            continue
        verdict = planner.judge(wl, ClusterQueueName(cq), Mode.FIT, usage)
        end = NOW + limit if limit is not None else float("inf")
        ends_before = end <= reservation.start
        if not verdict.admit:
            assert not ends_before, "a candidate ending before the reservation must be let through"
            continue
        let_through += 1
        assert verdict.message.startswith("backfilled: ")
        snap.view.add_all(node, usage)
        planner.admitted(wl, ClusterQueueName(cq), usage)
        holds.append((cpu, NOW, end))
    # The plain simulation, with everything let through: the head still starts on time.
    assert plain_earliest(capacity, holds, need, duration, horizon) == reservation.start
    # Refused candidates hold reservations too: all of them can be kept at once, in precedence order.
    booked = list(holds)
    for r in state.reservations:
        cpu = r.need[CPU] // M
        assert plain_earliest(capacity, booked, cpu, r.duration, horizon) <= r.start
        span = range(int(r.start), int(min(r.start + r.duration, horizon)))
        assert all(sum(c for c, s0, e0 in booked if s0 <= t < e0) + cpu <= capacity for t in span)
        booked.append((cpu, r.start, r.start + r.duration))


def test_without_limits_nobody_runs_ahead_and_the_head_still_gets_an_honest_answer() -> None:
    snap = cohort_snapshot(4, 0, [running("forever", "a", 4, started=0.0, limit=None)])
    state = BackfillState()
    planner = Planner(snap, state)
    message = planner.blocked(limited(workload("head", requests={"cpu": 2}), 10), A, {CPU: 2 * M})
    assert state.reservations == []
    assert "no reservation" in message


def _cycle_snapshot() -> Snapshot:
    # 8 cpus; 6 held until t=160 (limit 60 from 100), 2 free now.
    snap = snapshot(
        cqs=[cluster_queue("a", quota={"default": {"cpu": 8}}, strategy=QueueingStrategy.BACKFILL)],
        admitted=[running("big", "a", 6, started=NOW, limit=60)],
    )
    snap.now = NOW
    return snap


def test_cycle_reserves_for_the_blocked_head_then_backfills_only_what_cannot_delay_it() -> None:
    state = BackfillState()
    wide = limited(workload("wide", requests={"cpu": 8}, created=1.0), 100)
    (e,) = run_cycle([head(wide, "a")], _cycle_snapshot(), preemptor=Preemptor(), backfill=state)
    assert (e.status, e.requeue_reason) == (EntryStatus.NOT_NOMINATED, RequeueReason.PREEMPTION_NO_CANDIDATES)
    assert "reserved: expected to start at 1970-01-01T00:02:40Z" in e.message
    assert [(r.workload, r.start) for r in state.reservations] == [("default/wide", 160.0)]

    # The next cycles pop later workloads (BestEffortFIFO popping): each is judged against the reservation.
    short = limited(workload("short", requests={"cpu": 2}, created=2.0), 60)
    (e,) = run_cycle([head(short, "a")], _cycle_snapshot(), preemptor=Preemptor(), backfill=state)
    assert e.status is EntryStatus.ASSUMED
    assert e.backfill_note == ("backfilled: ends by 1970-01-01T00:02:40Z, before the reservation of default/wide "
                               "(ClusterQueue a) at 1970-01-01T00:02:40Z")

    long = limited(workload("long", requests={"cpu": 2}, created=3.0), 61)
    (e,) = run_cycle([head(long, "a")], _cycle_snapshot(), preemptor=Preemptor(), backfill=state)
    assert (e.status, e.requeue_reason) == (EntryStatus.NOT_NOMINATED, RequeueReason.NO_FIT)
    assert e.message == ("waits behind the reservation of default/wide (ClusterQueue a, expected to start at "
                         "1970-01-01T00:02:40Z): admitted now it would end at 1970-01-01T00:02:41Z and needs quota the "
                         "reservation needs. reserved: expected to start at 1970-01-01T00:04:20Z, when admitted "
                         "workloads reach their time limits")
    # A refused later workload waits too, with a reservation of its own behind the head's.
    assert [r.workload for r in state.reservations] == ["default/wide", "default/long"]

    unlimited = workload("unlimited", requests={"cpu": 1}, created=4.0)
    (e,) = run_cycle([head(unlimited, "a")], _cycle_snapshot(), preemptor=Preemptor(), backfill=state)
    assert e.status is EntryStatus.NOT_NOMINATED
    assert "it has no time limit" in e.message

    # A higher-priority newcomer is a new head, not a backfill candidate; blocked, it takes the reservation.
    urgent = limited(workload("urgent", requests={"cpu": 4}, priority=5, created=5.0), 10)
    (e,) = run_cycle([head(urgent, "a")], _cycle_snapshot(), preemptor=Preemptor(), backfill=state)
    assert e.status is EntryStatus.NOT_NOMINATED
    assert state.reservations[0].workload == "default/urgent"

    # Once the head itself fits, it is admitted and the reservation goes.
    state = BackfillState()
    run_cycle([head(wide, "a")], _cycle_snapshot(), preemptor=Preemptor(), backfill=state)
    free = snapshot(cqs=[cluster_queue("a", quota={"default": {"cpu": 8}}, strategy=QueueingStrategy.BACKFILL)])
    free.now = 160.0
    (e,) = run_cycle([head(wide, "a")], free, preemptor=Preemptor(), backfill=state)
    assert e.status is EntryStatus.ASSUMED
    assert state.reservations == []
