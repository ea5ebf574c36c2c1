"""The pause between two admitting cycles (scheduler.Pause): how long the loop's other work may run.

Kueue's scheduler runs its cycle in its own goroutine while the API server
takes creations concurrently (``pkg/scheduler/scheduler.go``, ``schedule``
under ``wait.UntilWithBackoff``); here both share one event loop, so after a
cycle the scheduler yields for up to the cycle's own time.  A gRPC stream's
next message reaches the loop from gRPC's poller thread, so a stream in full
flow shows the loop an idle turn between two busy ones: the pause must not
end at the first idle turn, only after a quiet window.
"""

from __future__ import annotations

from sluicegate.controller.scheduler import (
    IDLE_TURN_SECONDS,
    MAX_TURNS_BETWEEN_CYCLES,
    QUIET_SECONDS,
    QUIET_STEP_SECONDS,
    Pause,
)


def run(pause: Pause, start: float, work: list[float]) -> tuple[float, int]:
    """Drive the pause on a fake clock: each turn finds ``work[i]`` seconds of other work (0 once the list ends).

    Returns when the pause ended and how many turns it took.
    """
    now = start
    turns = 0
    while (wait := pause.next_wait(now)) is not None:
        took = wait + (work[turns] if turns < len(work) else 0.0)
        turns += 1
        now += took
        pause.turn_took(wait, took, now)
    return now, turns


def test_an_idle_turn_between_two_busy_ones_does_not_end_the_pause() -> None:
    # A 1 s cycle: a creation stream does 50 ms of work, its next message arrives a turn later.
    pause = Pause.after(1.0, 100.0)
    busy, idle = 0.05, 0.0
    end, turns = run(pause, 100.0, [busy, idle, busy, idle, busy])
    assert turns > 5, "every busy turn after an idle one was let in"
    # Once the work stopped, the pause lasted one quiet window more, in short waits, not until its deadline.
    worked_until = 100.0 + 3 * busy + QUIET_STEP_SECONDS  # the idle turn after the first busy one waited a step
    assert worked_until + QUIET_SECONDS <= end <= worked_until + QUIET_SECONDS + 2 * QUIET_STEP_SECONDS
    assert end < 101.0


def test_the_pause_ends_at_the_cycle_s_own_time_while_work_keeps_coming() -> None:
    pause = Pause.after(0.2, 0.0)
    end, turns = run(pause, 0.0, [0.03] * 100)
    assert 0.2 <= end < 0.2 + 0.03 + 1e-9
    assert turns == 7


def test_a_quiet_loop_ends_the_pause_after_a_short_window_in_proportion_to_the_cycle() -> None:
    # A long cycle: the quiet window is QUIET_SECONDS, waited in steps (the loop blocks, the poller hands over).
    pause = Pause.after(1.0, 0.0)
    end, turns = run(pause, 0.0, [])
    assert QUIET_SECONDS <= end <= QUIET_SECONDS + QUIET_STEP_SECONDS
    assert turns > 1
    # A short cycle (a few admissions at low load): one turn, as before, so latency does not grow.
    pause = Pause.after(0.001, 0.0)
    end, turns = run(pause, 0.0, [])
    assert (end, turns) == (0.0, 1)


def test_a_turn_under_the_idle_threshold_counts_as_quiet() -> None:
    pause = Pause.after(1.0, 0.0)
    small = IDLE_TURN_SECONDS / 2
    end, _ = run(pause, 0.0, [small] * 1000)
    assert end < 0.1, "slivers of work do not hold the pause open until its deadline"


def test_the_number_of_turns_is_bounded() -> None:
    pause = Pause.after(1e6, 0.0)
    _, turns = run(pause, 0.0, [IDLE_TURN_SECONDS] * (2 * MAX_TURNS_BETWEEN_CYCLES))
    assert turns == MAX_TURNS_BETWEEN_CYCLES

