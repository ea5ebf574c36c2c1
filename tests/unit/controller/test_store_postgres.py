"""What only the PostgreSQL store does: fencing by the lease's epoch, tombstones and the change feed,
pruning, connection settings and passwords, and surviving a server restart."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from sluicegate.controller.store import Delete, Fenced, Put, StoredObject, StoreError, open_store
from sluicegate.controller.store.postgres import PostgresStore
from tests.pg import PostgresServer, wait_until


def put(name: str, body: bytes = b"{}") -> Put:
    return Put("Workload", "default", name, body)


def delete(name: str) -> Delete:
    return Delete("Workload", "default", name)


@pytest.fixture
def db(postgres: PostgresServer) -> str:
    return postgres.create_database()


@pytest.fixture
def opened() -> Any:
    stores: list[PostgresStore] = []

    def open_(url: str, **options: Any) -> PostgresStore:
        store = PostgresStore(url, **options)
        stores.append(store)
        return store

    yield open_
    for store in stores:
        store.close()


def bump_epoch(postgres: PostgresServer, url: str) -> int:
    (row,) = postgres.execute(url, "UPDATE sluicegate_lease SET epoch = epoch + 1 WHERE name = 'leader' RETURNING epoch")
    return int(str(row[0]))


# -- fencing ---------------------------------------------------------------------------------------


def test_a_store_whose_epoch_is_past_writes_nothing(postgres: PostgresServer, db: str, opened: Any) -> None:
    old, new = opened(db), opened(db)
    old.set_epoch(0)
    assert old.epoch() == 0
    assert old.write([put("a")]) == 1
    epoch = bump_epoch(postgres, db)  # another controller took over
    new.set_epoch(epoch)

    with pytest.raises(Fenced, match=r"another controller leads now \(epoch 1, ours 0\): nothing written"):
        old.write([put("b")])
    with pytest.raises(Fenced):
        with old.group():
            old.write([put("c")])
            old.write([delete("a")])
    assert old.pending == 0  # can never be written: not kept
    with pytest.raises(Fenced):
        old.set_meta("k", "v")
    with pytest.raises(Fenced):
        old.flush()

    # The new leader sees only what the old one wrote before the takeover, and continues its versions.
    assert [(o.name, o.resource_version) for o in new.load()] == [("a", 1)]
    assert new.get_meta("k") is None
    assert new.write([put("d")]) > 1
    assert [o.name for o in opened(db).load()] == ["a", "d"]


def test_a_takeover_drops_the_writes_kept_from_a_failed_group_commit(postgres: PostgresServer, db: str, opened: Any) -> None:
    store = opened(db)
    store.set_epoch(0)
    # A group whose commit is lost (the connection is killed under it) keeps its writes to redo them ...
    with pytest.raises(StoreError):
        with store.group():
            store.write([put("a")])
            postgres.execute(db, "SELECT pg_terminate_backend(%s)", (store._conn.info.backend_pid,))
    assert store.pending == 1
    bump_epoch(postgres, db)
    # ... but once another controller leads, they can never be written.
    with pytest.raises(Fenced):
        store.flush()
    assert store.pending == 0
    assert opened(db).load() == []


def test_a_new_epoch_forgets_the_writes_kept_under_the_old_one(postgres: PostgresServer, db: str, opened: Any) -> None:
    store = opened(db)
    store.set_epoch(0)
    with pytest.raises(StoreError):
        with store.group():
            store.write([put("a")])
            postgres.execute(db, "SELECT pg_terminate_backend(%s)", (store._conn.info.backend_pid,))
    store.set_epoch(0)  # the same term: still ours to redo, with the versions memory gave them
    assert store.pending == 1 and store.write([put("b")]) == 2
    with pytest.raises(StoreError):
        with store.group():
            store.write([put("c")])
            postgres.execute(db, "SELECT pg_terminate_backend(%s)", (store._conn.info.backend_pid,))
    store.set_epoch(bump_epoch(postgres, db))  # lost the lead and won it back: another may have written
    assert store.pending == 0
    assert store.write([put("d")]) == 3
    assert [o.name for o in opened(db).load()] == ["a", "b", "d"]


def test_set_epoch_reads_the_version_another_leader_reached(db: str, opened: Any) -> None:
    first = opened(db)
    first.set_epoch(0)
    assert first.write([put("a")]) == 1
    second = opened(db)
    assert second.write([put("b")]) == 2
    assert second.write([delete("b")]) == 3  # the newest version is on a tombstone
    first.set_epoch(0)
    assert first.write([put("c")]) == 4
    first.set_epoch(None)  # unfenced again: writes whatever the lease says
    assert first.epoch() is None


def _waiting_on_a_lock(postgres: PostgresServer, url: str, pid: int) -> bool:
    rows = postgres.execute(url, "SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,))
    return bool(rows) and rows[0][0] == "Lock"


def test_a_takeover_waits_for_a_write_in_flight_to_commit(postgres: PostgresServer, db: str, opened: Any) -> None:
    store = opened(db)
    store.set_epoch(0)
    store.write([put("a", b"old")])
    store_pid = store._conn.info.backend_pid

    with psycopg.connect(db, autocommit=True) as holder, psycopg.connect(db, autocommit=True) as taker:
        # Someone else holds the row the write will update: the write passes its lease check
        # (FOR SHARE on the lease row) and then waits here, in flight.
        holder.execute("BEGIN")
        holder.execute("SELECT 1 FROM sluicegate_objects WHERE name = 'a' FOR UPDATE")
        result: dict[str, Any] = {}
        writer = threading.Thread(target=lambda: result.update(version=store.write([put("a", b"new")])))
        writer.start()
        wait_until(lambda: _waiting_on_a_lock(postgres, db, store_pid), what="the write to wait on the row lock")

        # A takeover bumps the epoch: it must wait for the write in flight.
        taker_pid = taker.info.backend_pid
        bumped: dict[str, Any] = {}

        def take_over() -> None:
            row = taker.execute("UPDATE sluicegate_lease SET epoch = 1 WHERE name = 'leader' RETURNING epoch").fetchone()
            bumped.update(epoch=row[0] if row else None, at=time.monotonic())

        bumper = threading.Thread(target=take_over)
        bumper.start()
        wait_until(lambda: _waiting_on_a_lock(postgres, db, taker_pid), what="the takeover to wait for the write")
        assert not bumped

        released = time.monotonic()
        holder.execute("COMMIT")
        writer.join(10)
        bumper.join(10)
        assert not writer.is_alive() and not bumper.is_alive()

    # The write was checked against the old epoch and committed before the takeover did.
    assert result == {"version": 2}
    assert bumped["epoch"] == 1 and bumped["at"] >= released
    assert opened(db).load() == [StoredObject("Workload", "default", "a", b"new", 2)]
    with pytest.raises(Fenced):
        store.write([put("b")])


# -- tombstones and the change feed ------------------------------------------------------------


def test_deletes_leave_tombstones_that_the_change_feed_reports_in_order(db: str, opened: Any) -> None:
    store = opened(db)
    store.write([put("a"), put("b")])  # 1
    store.write([put("c", b'{"c":1}')])  # 2
    store.write([delete("a")])  # 3
    store.write([delete("never-stored")])  # 4: nothing to tombstone, the version is kept aside
    assert store.max_version() == 4
    with store.group():
        store.write([put("a", b"again")])  # 5: a re-created object is live again
        store.write([delete("b")])  # 6

    assert [o.name for o in store.load()] == ["c", "a"]
    assert store.changes_since(0) == (
        [StoredObject("Workload", "default", "c", b'{"c":1}', 2), StoredObject("Workload", "default", "a", b"again", 5)],
        [("Workload", "default", "b", 6)],
        6,
    )
    assert store.changes_since(2) == (
        [StoredObject("Workload", "default", "a", b"again", 5)],
        [("Workload", "default", "b", 6)],
        6,
    )
    assert store.changes_since(6) == ([], [], 6)  # nothing changed
    reader = opened(db)
    assert reader.max_version() == 6 and reader.write([put("d")]) == 7


def test_old_tombstones_are_pruned_at_most_once_an_interval_and_a_reader_behind_them_reloads(
    db: str, opened: Any
) -> None:
    now = [1000.0]
    store = opened(db, tombstone_retention=0.0, prune_interval=60.0, monotonic=lambda: now[0])
    store.write([put("a"), put("b"), put("c")])  # 1 (prunes nothing; the next prune is due in a minute)
    store.write([delete("a")])  # 2
    store.write([delete("b")])  # 3
    now[0] += 30
    store.write([put("d")])  # 4: not yet
    assert [t[2] for t in store.changes_since(1)[1]] == ["a", "b"]
    now[0] += 31
    store.write([put("e")])  # 5: prunes the tombstones of a and b
    assert store.get_meta("tombstones_pruned_to") == "3"
    assert store.changes_since(0) is None and store.changes_since(2) is None  # behind the pruned deletions
    assert store.changes_since(3) == (
        [StoredObject("Workload", "default", "d", b"{}", 4), StoredObject("Workload", "default", "e", b"{}", 5)],
        [],
        5,
    )
    # Everything pruned: the version still never goes back.
    store.write([delete("c"), delete("d"), delete("e")])  # 6
    now[0] += 61
    store.write([put("f")])  # 7
    store.write([delete("f")])  # 8
    now[0] += 61
    store.write([delete("nothing")])  # 9, prunes 6 and 8
    assert store.get_meta("tombstones_pruned_to") == "8"
    assert opened(db).write([put("g")]) == 10


def test_the_change_feed_is_one_indexed_query(postgres: PostgresServer, db: str, opened: Any) -> None:
    from sluicegate.controller.store.postgres import _CHANGES

    store = opened(db)
    for i in range(30):
        store.write([put(f"w{j}-{i}") for j in range(100)])
    postgres.execute(db, "ANALYZE sluicegate_objects")
    with psycopg.connect(db, autocommit=True) as conn, psycopg.ClientCursor(conn) as cur:
        plan = "\n".join(str(r[0]) for r in cur.execute(("EXPLAIN " + _CHANGES).encode(), (30,)).fetchall())
    assert "Index Scan using sluicegate_objects_by_version" in plan and "Seq Scan on sluicegate_objects" not in plan


# -- schema ----------------------------------------------------------------------------------------


def test_the_schema_is_created_with_the_leader_lease_row(postgres: PostgresServer, db: str, opened: Any) -> None:
    store = opened(db)
    assert store.schema_version() == 1
    assert postgres.execute(db, "SELECT name, holder, address, epoch FROM sluicegate_lease") == [("leader", "", "", 0)]


def test_controllers_starting_together_create_the_schema_once(postgres: PostgresServer, db: str) -> None:
    start = threading.Barrier(4)
    opened: list[PostgresStore] = []
    errors: list[BaseException] = []

    def open_() -> None:
        start.wait(10)
        try:
            opened.append(PostgresStore(db))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    try:
        assert errors == [] and len(opened) == 4
        assert {s.schema_version() for s in opened} == {1}
        assert postgres.execute(db, "SELECT count(*) FROM sluicegate_lease") == [(1,)]
    finally:
        for s in opened:
            s.close()


def test_a_database_from_a_newer_sluicegate_is_refused(postgres: PostgresServer, db: str, opened: Any) -> None:
    opened(db)
    postgres.execute(db, "UPDATE sluicegate_meta SET value = '5' WHERE key = 'schema_version'")
    with pytest.raises(
        StoreError,
        match=r"schema version 5 is newer than this sluicegate \(knows up to 1\); upgrade sluicegate or restore a backup",
    ):
        PostgresStore(db)


# -- connecting ------------------------------------------------------------------------------------


def test_open_store_picks_postgres_with_its_connection_settings(postgres: PostgresServer, db: str) -> None:
    for url in (db, db.replace("postgresql://", "postgres://")):
        store = open_store(url)
        try:
            assert isinstance(store, PostgresStore)
            params = store._conn.info.get_parameters()
            assert (params["connect_timeout"], params["tcp_user_timeout"], params["keepalives"]) == ("3", "9000", "1")
            assert store._conn.execute("SHOW application_name").fetchone() == ("sluicegate-controller",)
        finally:
            store.close()
    # Whatever libpq accepts in the URL wins over the defaults (here: the Unix socket, a timeout).
    name = db.rsplit("/", 1)[1]
    store = PostgresStore(postgres.socket_url(name) + "&connect_timeout=7&application_name=ctl-2")
    try:
        assert store._conn.info.get_parameters()["connect_timeout"] == "7"
        assert store._conn.execute("SHOW application_name").fetchone() == ("ctl-2",)
        assert store._conn.info.host == str(postgres.sockets)
    finally:
        store.close()


def test_the_password_file_must_be_private(tmp_path: Path, db: str, opened: Any) -> None:
    secret = tmp_path / "db-password"
    secret.write_text("s3cret\n")
    secret.chmod(0o640)
    with pytest.raises(StoreError, match=r"storePasswordFile .*db-password: readable by group or others .*chmod 600"):
        open_store(db, password_file=str(secret))
    with pytest.raises(StoreError, match=r"storePasswordFile .*missing: No such file"):
        open_store(db, password_file=str(tmp_path / "missing"))
    secret.chmod(0o600)
    store = open_store(db, password_file=str(secret))
    try:
        assert isinstance(store, PostgresStore) and store._conn.info.password == "s3cret"
    finally:
        store.close()


def test_a_password_in_the_url_never_appears_in_errors(postgres: PostgresServer) -> None:
    with pytest.raises(StoreError) as info:
        open_store(f"postgresql://postgres:hunter2@127.0.0.1:{postgres.port}/no_such_database")
    assert "hunter2" not in str(info.value) and ":***@" in str(info.value)


def test_without_psycopg_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)
    monkeypatch.delitem(sys.modules, "sluicegate.controller.store.postgres")
    with pytest.raises(StoreError, match=r"pip install 'sluicegate\[postgresql\]'"):
        open_store("postgresql://db.example.org/sluicegate")


def test_an_unreachable_server_fails_in_seconds(postgres: PostgresServer) -> None:
    # 192.0.2.0/24 is TEST-NET-1: nothing answers, so only connect_timeout ends the wait.
    t0 = time.monotonic()
    with pytest.raises(StoreError, match="connecting failed"):
        PostgresStore("postgresql://postgres@192.0.2.1:5432/x?connect_timeout=1")
    assert time.monotonic() - t0 < 5


# -- a server restart ------------------------------------------------------------------------------


def test_a_server_restart_fails_writes_until_it_is_back_and_loses_nothing(postgres: PostgresServer, db: str, opened: Any) -> None:
    store = opened(db)
    store.write([put("before")])  # 1
    try:
        postgres.stop("fast")
        t0 = time.monotonic()
        with pytest.raises(StoreError):
            store.write([put("during")])  # 2 is never used again: its COMMIT might have landed
        assert time.monotonic() - t0 < 5
        with pytest.raises(StoreError):
            with store.group():
                store.write([put("in-a-group")])  # 3: memory has it, the store keeps it to redo
        assert store.pending == 1
        with pytest.raises(StoreError):
            store.flush()
    finally:
        if not postgres.running:
            postgres.start()
    store.flush()  # reconnects, and stores the kept group first
    assert store.pending == 0
    assert store.write([put("after")]) == 4
    assert [(o.name, o.resource_version) for o in opened(db).load()] == [("before", 1), ("in-a-group", 3), ("after", 4)]


def test_after_a_restart_between_writes_the_stale_connection_fails_one_call_and_the_next_reconnects(postgres: PostgresServer, db: str, opened: Any) -> None:
    store = opened(db)
    store.write([put("a")])
    postgres.restart()
    # The old connection was closed by the server: this write finds out and fails (and its version,
    # 2, is skipped: whether a COMMIT sent on a lost connection landed is unknown) ...
    with pytest.raises(StoreError):
        store.write([put("b")])
    # ... and the next one connects again.
    assert store.write([put("b")]) == 3
    assert [o.name for o in store.load()] == ["a", "b"]
