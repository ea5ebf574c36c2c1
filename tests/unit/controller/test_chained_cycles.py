"""Admitting cycles chained in one write group (scheduler.CHAIN_SECONDS, MAX_CHAINED_CYCLES).

A cycle takes one head per ClusterQueue (Kueue), so freeing several slots of
one queue takes as many cycles.  They run back to back, as Kueue's do, and
share one store commit: the semantics are the cycles', only the number of
transactions changes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from sluicegate.controller import scheduler
from sluicegate.controller.manager import Manager, workload_state
from sluicegate.controller.scheduler import MAX_CHAINED_CYCLES
from sluicegate.controller.store import Change
from sluicegate.controller.store.sqlite import SqliteStore
from sluicegate.manifest.loader import parse_text

from .test_manager import workload
from .test_podgroups import QUEUES  # one ClusterQueue "cq" of %(cpu)s cpus, LocalQueue default/lq


class CountingStore(SqliteStore):
    """The real SQLite store, counting its transactions."""

    commits = 0

    def _commit(self, batches: Sequence[tuple[int, Sequence[Change]]], what: str, *, probe: bool = False) -> None:
        self.commits += 1
        super()._commit(batches, what, probe=probe)


async def admit_all(tmp_path: Path, count: int, cpu: str) -> tuple[Manager, CountingStore, int, int]:
    """``count`` one-CPU workloads on a queue with room for them all, admitted by the running scheduler.

    Returns the manager, the store, and the cycles and commits the admissions took.
    """
    store = CountingStore(str(tmp_path / "store.db"))
    m = Manager(store, clock=lambda: 1_000.0, placement=False)
    m.apply(parse_text(QUEUES % {"cpu": cpu}, "queues.yaml"))
    names = [f"w{i}" for i in range(count)]
    with m.write_group():
        for name in names:
            m.create_workload(workload(name, "1"))
    cycles, commits = m.cycle, store.commits
    task = asyncio.create_task(m.run_scheduler())
    try:
        m.wake()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10.0
        while any(workload_state(m.get_workload("default", n)) != "Admitted" for n in names):
            assert loop.time() < deadline, "not every workload was admitted within 10 s"
            await asyncio.sleep(0.005)
    finally:
        m.stop()
        m.wake()
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
    return m, store, m.cycle - cycles, store.commits - commits


async def test_cycles_that_keep_admitting_share_one_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scheduler, "CHAIN_SECONDS", 60.0)  # the count bound only: a loaded machine's cycle is slow
    m, store, cycles, commits = await admit_all(tmp_path, 4, "4")
    assert cycles == 4, "one head of the queue per cycle, as Kueue admits"
    assert commits == 1, f"{cycles} cycles committed {commits} times"
    # Stored as they were decided: a fresh store read from the file has every admission.
    fresh = Manager(SqliteStore(str(tmp_path / "store.db")), clock=lambda: 1_000.0, placement=False)
    fresh.load()
    assert {workload_state(fresh.get_workload("default", f"w{i}")) for i in range(4)} == {"Admitted"}
    fresh.commit.store.close()
    store.close()


async def test_a_chain_ends_after_its_count_and_commits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scheduler, "CHAIN_SECONDS", 60.0)
    count = MAX_CHAINED_CYCLES + 4
    _, store, cycles, commits = await admit_all(tmp_path, count, str(count))
    assert cycles == count
    assert commits == 2, "MAX_CHAINED_CYCLES cycles, their commit; then the other four, theirs"
    store.close()


async def test_a_chain_ends_after_its_time_and_commits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scheduler, "CHAIN_SECONDS", 0.0)  # every cycle is over the chain's time
    _, store, cycles, commits = await admit_all(tmp_path, 4, "4")
    assert (cycles, commits) == (4, 4)
    store.close()
