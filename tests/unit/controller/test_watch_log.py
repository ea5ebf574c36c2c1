"""The shared watch log: one event for every watcher, bounded for the slowest, nothing kept without watchers.

Shape after the Kubernetes API server's watch cache (kubernetes/kubernetes
staging/src/k8s.io/apiserver/pkg/storage/cacher/watch_cache.go: one ring of
events that every watcher reads; a watcher too far behind is ended and must
list again).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sluicegate.controller.manager import Manager
from sluicegate.controller.store.memory import MemoryStore
from sluicegate.controller.watch import WatchEvent, WatchExpired
from sluicegate.manifest.loader import RawDocument
from tests.builders import workload_doc


def _create(m: Manager, name: str, ns: str = "default") -> None:
    m.create_workload(RawDocument(source="test", body=workload_doc(name, ns=ns)))


async def _take(agen: object, n: int) -> list[WatchEvent]:
    out: list[WatchEvent] = []
    async with asyncio.timeout(5):  # bounded: a lost event fails, not hangs
        while len(out) < n:
            out.extend(await anext(agen))  # type: ignore[call-overload]
    return out


async def test_every_watcher_reads_the_same_event_objects_and_filters_its_own() -> None:
    m = Manager(MemoryStore(), clock=time.time, placement=False)
    everything = m.watch_batches("", "", False, max_batch=100)
    other_ns = m.watch_batches("team-b", "", False, max_batch=100)
    named = m.watch_batches("default", "w-1", False, max_batch=1)
    # Each starts (and registers) on its first read; start them, then publish.
    firsts = [asyncio.ensure_future(anext(g)) for g in (everything, other_ns, named)]
    await asyncio.sleep(0)  # let each reach its wait
    assert len(m.commit.watchers) == 3
    for i in range(3):
        _create(m, f"w-{i}")
    _create(m, "b-0", ns="team-b")
    a = list(await firsts[0]) + await _take(everything, 4 - len(await firsts[0]))
    b = list(await firsts[1])
    c = list(await firsts[2])
    assert [e.workload.name for e in a] == ["w-0", "w-1", "w-2", "b-0"]
    assert [e.workload.name for e in b] == ["b-0"] and [e.workload.name for e in c] == ["w-1"]
    assert b[0] is a[3] and c[0] is a[1]  # one event object, shared (and so its encoded bytes)
    for g in (everything, other_ns, named):
        await g.aclose()  # type: ignore[attr-defined]
    assert (len(m.commit.watchers), m.commit.watchers.held, m.commit.watchers.alive) == (0, 0, 0)


async def test_a_watcher_too_far_behind_is_ended_and_the_log_stays_bounded() -> None:
    m = Manager(MemoryStore(), clock=time.time, placement=False)
    m.commit.watchers.backlog = 10
    m.commit.watchers.flush_s = 0.0
    m.commit.watchers.send_grace_s = 0.0  # its send counts as stalled at once (the grace: below)
    slow = m.watch_batches("", "", False, max_batch=5)
    fast = m.watch_batches("", "", False, max_batch=100)
    pending = [asyncio.ensure_future(anext(g)) for g in (slow, fast)]
    await asyncio.sleep(0)
    got = []
    for i in range(30):
        _create(m, f"w-{i:02d}")
        got.extend(await asyncio.wait_for(pending[1], 5) if i == 0 else await _take(fast, 1))
        assert m.commit.watchers.held <= 10
    assert [e.workload.name for e in got] == [f"w-{i:02d}" for i in range(30)]
    assert len(m.commit.watchers) == 1  # the slow one is no longer counted
    assert [e.workload.name for e in await asyncio.wait_for(pending[0], 5)] == ["w-00"]  # it had this in hand
    with pytest.raises(WatchExpired, match="watch expired: it fell more than 10 events behind.*re-list"):
        await _take(slow, 1)
    await fast.aclose()  # type: ignore[attr-defined]
    assert (len(m.commit.watchers), m.commit.watchers.held, m.commit.watchers.alive) == (0, 0, 0)


async def test_a_watcher_behind_only_while_gathering_or_waiting_for_the_loop_is_not_ended() -> None:
    # A reader that keeps up is not ended for the controller's own delays: the
    # events published while its next message gathers (here more than its
    # max_batch and than the backlog), or before the loop gives it a turn.
    m = Manager(MemoryStore(), clock=time.time, placement=False)
    m.commit.watchers.backlog = 8
    m.commit.watchers.flush_s = 0.2
    events = m.watch_batches("", "", False, max_batch=100)
    first = asyncio.ensure_future(anext(events))
    await asyncio.sleep(0)
    _create(m, "w-00")
    assert [e.workload.name for e in await asyncio.wait_for(first, 5)] == ["w-00"]
    gathering = asyncio.ensure_future(_take(events, 30))
    _create(m, "w-01")
    for _ in range(3):
        await asyncio.sleep(0)  # it wakes and, having just sent, waits to gather more
    for i in range(2, 31):
        _create(m, f"w-{i:02d}")  # no turn for the reader meanwhile: 30 behind, backlog 8
    assert len(m.commit.watchers) == 1
    got = await asyncio.wait_for(gathering, 5)
    assert [e.workload.name for e in got] == [f"w-{i:02d}" for i in range(1, 31)]
    _create(m, "w-31")
    assert m.commit.watchers.held <= 8  # caught up: the log is trimmed to the backlog again
    await events.aclose()
    assert (len(m.commit.watchers), m.commit.watchers.held, m.commit.watchers.alive) == (0, 0, 0)


async def test_a_send_younger_than_the_grace_is_not_ended_until_the_hard_backlog() -> None:
    # A saturated loop makes a send wait for its next turns, and a burst can publish a backlog's worth
    # meanwhile: a watcher is ended at the backlog only once its send has been held for the grace,
    # and at HARD_BACKLOG backlogs whatever the time.
    from sluicegate.controller import watch

    now = [100.0]
    m = Manager(MemoryStore(), clock=time.time, placement=False)
    ws = m.commit.watchers = watch.Watchers(backlog=10, flush_s=0.0, send_grace_s=1.0, clock=lambda: now[0])
    young = m.watch_batches("", "", False, max_batch=5)
    stalled = m.watch_batches("", "", False, max_batch=5)
    pending = [asyncio.ensure_future(anext(g)) for g in (young, stalled)]
    await asyncio.sleep(0)
    _create(m, "w-000")
    for p in pending:
        assert [e.workload.name for e in await asyncio.wait_for(p, 5)] == ["w-000"]  # both hold a message now
    for i in range(1, 25):
        _create(m, f"w-{i:03d}")  # 24 behind, past the backlog: both sends are younger than the grace
    assert (len(ws), ws.held) == (2, 24)
    now[0] += 1.0  # one of them is handed its next message and so is sending afresh; the other is not
    pending = [asyncio.ensure_future(anext(young))]
    await asyncio.sleep(0)
    assert [e.workload.name for e in await asyncio.wait_for(pending[0], 5)] == [f"w-{i:03d}" for i in range(1, 6)]
    _create(m, "w-025")
    for i in range(26, 256 + 1):
        _create(m, f"w-{i:03d}")  # trims at least once: the stalled one is ended, the young one is not yet
        if len(ws) == 1:
            break
    assert len(ws) == 1 and ws.expired_total == 1
    with pytest.raises(WatchExpired):
        await _take(stalled, 1)
    # The young one, still holding its message (a send younger than the grace: the clock stands
    # still), is ended once HARD_BACKLOG backlogs behind, not before.
    (left,) = ws._all
    behind = 0
    for i in range(1000):
        behind = ws._next - left.cursor
        _create(m, f"x-{i:03d}")
        if len(ws) == 0:
            break
    assert len(ws) == 0 and ws.held == 0
    assert behind >= watch.HARD_BACKLOG * ws.backlog
    with pytest.raises(WatchExpired):
        await _take(young, 1)


async def test_without_watchers_nothing_is_kept() -> None:
    m = Manager(MemoryStore(), clock=time.time, placement=False)
    for i in range(5):
        _create(m, f"w-{i}")
    assert (m.commit.watchers.held, m.commit.watchers.alive) == (0, 0)


async def test_a_reader_stuck_sending_has_its_call_cancelled_after_the_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    from contextlib import aclosing

    from sluicegate.controller import watch

    monkeypatch.setattr(watch, "STALLED_GRACE_S", 0.01)
    m = Manager(MemoryStore(), clock=time.time, placement=False)
    m.commit.watchers.backlog = 5
    m.commit.watchers.flush_s = 0.0
    m.commit.watchers.send_grace_s = 0.0
    holding = asyncio.Event()

    async def reader() -> None:
        async with aclosing(m.watch_batches("", "", False, max_batch=100)) as events:
            await anext(events)
            holding.set()
            await asyncio.Event().wait()  # a transport whose send never completes

    task = asyncio.create_task(reader())
    await asyncio.sleep(0)
    _create(m, "w-00")
    await asyncio.wait_for(holding.wait(), 5)
    for i in range(1, 12):
        _create(m, f"w-{i:02d}")
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    assert (len(m.commit.watchers), m.commit.watchers.held, m.commit.watchers.alive) == (0, 0, 0)


def _reference_publish(ws: object, type_: str, wl: object, event: object) -> None:
    """Watchers.publish as each event was published on its own before publish_all (the committer
    checked for watchers before each)."""
    from sluicegate.controller import watch

    w: Any = ws
    if not w._all:
        return
    if not w._everything and not any(x.wants(wl) for x in w._all):
        return
    w._log.append(event(type_, wl))  # type: ignore[operator]
    w._notify()
    if len(w._log) % watch._TRIM_EVERY == 0 or len(w._log) > w.backlog:
        w._trim()


@settings(max_examples=150, deadline=None)
@given(backlog=st.integers(2, 60),
       watchers=st.lists(st.tuples(st.sampled_from(["", "a", "b"]), st.integers(0, 8), st.booleans()),
                         min_size=1, max_size=4),
       changes=st.lists(st.sampled_from(["a", "b", "c"]), max_size=40))
def test_publishing_a_decisions_events_together_is_publishing_each(
        backlog: int, watchers: list[tuple[str, int, bool]], changes: list[str]) -> None:
    """publish_all leaves the log, its trims and the expired watchers as publishing each event did."""
    from unittest import mock

    from sluicegate.controller import watch
    from sluicegate.controller.watch import Watcher, Watchers
    from sluicegate.manifest.encode import EncodedObject
    from tests.builders import workload

    def event(type_: str, wl: Any) -> WatchEvent:
        return WatchEvent(type_, wl, 1, EncodedObject(b"", -1), 1.0)

    warm = [workload(f"w-{i}", ns="a") for i in range(8)]
    wls = [workload(f"x-{i}", ns=ns) for i, ns in enumerate(changes)]
    states = []
    with mock.patch.object(watch, "_TRIM_EVERY", 4):
        for together in (False, True):
            ws = Watchers(backlog=backlog)
            mine = []
            for ns, _, _ in watchers:
                w = Watcher(ns, "", None)
                ws._all.append(w)
                ws._everything += w.everything
                mine.append(w)
            for wl in warm:  # a log to be behind in
                _reference_publish(ws, "ADDED", wl, event)
            for w, (_, behind, sending) in zip(mine, watchers, strict=True):
                w.cursor = max(ws._first, ws._next - behind)
                w.sending = sending
            if together:
                ws.publish_all([("MODIFIED", wl) for wl in wls], event)
            else:
                for wl in wls:
                    _reference_publish(ws, "MODIFIED", wl, event)
            states.append((ws._first, [e.workload.name for e in ws._log], [w.expired for w in mine],
                           ws.expired_total, len(ws)))
    assert states[0] == states[1]
