"""The leader lease on a real PostgreSQL (the session's private server): election, renewal, takeover, fencing."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from sluicegate.controller.leader import APPLICATION_PREFIX, Elector, LeaseTiming
from sluicegate.controller.mirror import Mirror
from sluicegate.controller.store import Delete, Fenced, Put
from sluicegate.controller.store.postgres import PostgresStore
from tests.pg import PostgresServer, wait_until

FAST = LeaseTiming(duration=1.5, renew_deadline=1.0, renew_interval=0.2, retry_interval=0.05)


class Campaign:
    """An Elector with its events recorded."""

    def __init__(self, store: PostgresStore, name: str, timing: LeaseTiming = FAST, **kw: Any) -> None:
        self.elected: list[int] = []
        self.lost: list[str] = []
        self.elector = Elector(store.lease_connection, address=f"{name}:7420", timing=timing, holder=name,
                               on_elected=self.elected.append, on_lost=self.lost.append, **kw)

    def start(self) -> Campaign:
        self.elector.start()
        return self


@pytest.fixture
def url(postgres: PostgresServer) -> str:
    return postgres.create_database()


@pytest.fixture
def stores(url: str) -> Iterator[list[PostgresStore]]:
    opened: list[PostgresStore] = []
    yield opened
    for s in opened:
        s.close()


def open_store(url: str, stores: list[PostgresStore]) -> PostgresStore:
    s = PostgresStore(url)
    stores.append(s)
    return s


def test_one_of_two_campaigners_leads(url: str, stores: list[PostgresStore]) -> None:
    a = Campaign(open_store(url, stores), "a").start()
    b = Campaign(open_store(url, stores), "b").start()
    try:
        wait_until(lambda: a.elected or b.elected, what="an election")
        # Several renewals later still exactly one leads, and nobody lost anything.
        wait_until(lambda: (a.elector.view or b.elector.view) is not None, what="the followers' view")
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            assert [a.elector.leading(), b.elector.leading()].count(True) == 1
            time.sleep(0.05)
        assert a.lost == [] and b.lost == []
        leader, follower = (a, b) if a.elector.leading() else (b, a)
        wait_until(lambda: follower.elector.view is not None and follower.elector.view.holder == leader.elector.holder,
                   what="the follower to see the leader")
        assert follower.elector.view is not None and follower.elector.view.address == leader.elector.address
    finally:
        a.elector.stop()
        b.elector.stop()


def test_a_released_lease_is_taken_over_at_once_with_a_higher_epoch(url: str, stores: list[PostgresStore]) -> None:
    slow = LeaseTiming(duration=30, renew_deadline=20, renew_interval=5, retry_interval=0.05)
    a = Campaign(open_store(url, stores), "a", slow).start()
    wait_until(lambda: a.elected, what="a leads")
    b = Campaign(open_store(url, stores), "b", slow).start()
    a.elector.stop(release=True)
    t0 = time.monotonic()
    wait_until(lambda: b.elected, what="b takes over", timeout=5)
    try:
        assert time.monotonic() - t0 < 2  # not the 30 s lease
        assert b.elected[0] > a.elected[0]
    finally:
        b.elector.stop()


def test_a_dead_leaders_session_lets_a_follower_take_over_before_expiry(url: str, stores: list[PostgresStore]) -> None:
    timing = LeaseTiming(duration=30, renew_deadline=20, renew_interval=0.3, retry_interval=0.05)
    a = Campaign(open_store(url, stores), "a", timing).start()
    wait_until(lambda: a.elected, what="a leads")
    b = Campaign(open_store(url, stores), "b", timing).start()
    # "Kill" a: its thread stops renewing and its lease connection closes, as a killed process's would.
    a.elector._stop.set()
    a.elector._thread.join(5)  # type: ignore[union-attr]
    a.elector._close()
    t0 = time.monotonic()
    wait_until(lambda: b.elected, what="b takes over", timeout=10)
    try:
        assert time.monotonic() - t0 < 5  # about 1.5 renew intervals, far below the 30 s lease
    finally:
        b.elector.stop()


def test_a_live_but_silent_leader_keeps_its_lease_until_it_expires(url: str, stores: list[PostgresStore]) -> None:
    timing = LeaseTiming(duration=1.5, renew_deadline=1.0, renew_interval=0.2, retry_interval=0.05)
    a = Campaign(open_store(url, stores), "a", timing).start()
    wait_until(lambda: a.elected, what="a leads")
    # Paused: no renewals, but its session stays open (as a SIGSTOPped process's does).
    conn = a.elector._connection()
    a.elector._stop.set()
    a.elector._thread.join(5)  # type: ignore[union-attr]
    assert not conn.closed
    stopped_at = time.monotonic()
    b = Campaign(open_store(url, stores), "b", timing).start()
    try:
        wait_until(lambda: b.elected, what="b takes over after expiry", timeout=10)
        assert time.monotonic() - stopped_at >= 1.0
        # a, meanwhile, knows by its own clock that it may no longer act.
        assert a.elector.epoch is None
    finally:
        b.elector.stop()
        a.elector._close()


def test_renewal_failure_past_the_deadline_reports_the_loss(url: str, stores: list[PostgresStore]) -> None:
    a = Campaign(open_store(url, stores), "a").start()
    wait_until(lambda: a.elected, what="a leads")
    # Another controller forces a takeover (as after a long pause).
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE sluicegate_lease SET holder = 'z', epoch = epoch + 1, expires_at = now() + interval '1 h'")
    wait_until(lambda: a.lost, what="a learns it lost the lease", timeout=5)
    assert "another controller" in a.lost[0]
    assert not a.elector.leading()
    a.elector.stop()


def test_writes_after_a_takeover_are_fenced(url: str, stores: list[PostgresStore]) -> None:
    old_store, new_store = open_store(url, stores), open_store(url, stores)
    a = Campaign(old_store, "a").start()
    wait_until(lambda: a.elected, what="a leads")
    old_store.set_epoch(a.elected[0])
    old_store.write([Put("Workload", "default", "w1", b"{}")])
    a.elector.stop(release=True)
    b = Campaign(new_store, "b").start()
    wait_until(lambda: b.elected, what="b leads")
    try:
        new_store.set_epoch(b.elected[0])
        with pytest.raises(Fenced):
            old_store.write([Put("Workload", "default", "w2", b"{}")])
        new_store.write([Put("Workload", "default", "w3", b"{}")])
        assert sorted(o.name for o in new_store.load()) == ["w1", "w3"]
    finally:
        b.elector.stop()


def test_lease_connections_are_named_for_liveness(url: str, stores: list[PostgresStore]) -> None:
    a = Campaign(open_store(url, stores), "a").start()
    wait_until(lambda: a.elected, what="a leads")
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                               (APPLICATION_PREFIX + "a",)).fetchone()
        assert row is not None and row[0] == 1
    finally:
        a.elector.stop()


def test_lease_timing_is_checked() -> None:
    with pytest.raises(ValueError, match="leaseRenewInterval"):
        LeaseTiming(duration=5, renew_deadline=6, renew_interval=1).check()
    with pytest.raises(ValueError, match="leaseRetryInterval"):
        LeaseTiming(retry_interval=0).check()


def test_the_mirror_follows_puts_and_deletes(url: str, stores: list[PostgresStore]) -> None:
    writer, reader = open_store(url, stores), open_store(url, stores)
    doc = (b'{"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "%s"}}')
    writer.write([Put("ResourceFlavor", "", "f1", doc % b"f1"), Put("ResourceFlavor", "", "f2", doc % b"f2")])
    m = Mirror()
    assert m.catch_up(reader) == 2
    writer.write([Delete("ResourceFlavor", "", "f1"), Put("ResourceFlavor", "", "f3", doc % b"f3")])
    assert m.catch_up(reader) == 2
    assert sorted(name for _, _, name in m.objects) == ["f2", "f3"]
    assert m.catch_up(reader) == 0
    taken = m.take()
    assert [type(obj).__name__ for obj, _ in taken] == ["ResourceFlavor", "ResourceFlavor"]
    assert m.objects == {} and not m.loaded


def test_two_electors_racing_many_times_never_share_an_epoch(url: str, stores: list[PostgresStore]) -> None:
    """Repeated releases with both campaigning: every epoch is won by one holder only."""
    won: dict[int, list[str]] = {}
    lock = threading.Lock()
    campaigns = []
    def recorder(name: str) -> Any:
        def record(epoch: int) -> None:
            with lock:
                won.setdefault(epoch, []).append(name)

        return record

    for name in ("a", "b", "c"):
        c = Campaign(open_store(url, stores), name)
        c.elector._on_elected = recorder(name)
        campaigns.append(c.start())
    try:
        for _ in range(10):
            wait_until(lambda: any(c.elector.leading() for c in campaigns), what="a leader")
            leader = next(c for c in campaigns if c.elector.leading())
            leader.elector.resign()
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("UPDATE sluicegate_lease SET holder = '' WHERE name = 'leader'")
        wait_until(lambda: len(won) >= 5, what="several elections")
        assert all(len(holders) == 1 for holders in won.values()), won
    finally:
        for c in campaigns:
            c.elector.stop()
