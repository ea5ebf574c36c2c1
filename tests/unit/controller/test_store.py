"""The store contract, on both backends: atomic batches, write groups, resource versions that never go
back across a reopen, and a full disk that degrades without losing a write."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from sluicegate.controller.store import Change, Delete, Put, StoredObject, StoreError, StoreFull
from tests.conftest import StoreFactory
from tests.pg import PostgresServer


def put(name: str, body: bytes = b"{}") -> Put:
    return Put("Workload", "default", name, body)


def delete(name: str) -> Delete:
    return Delete("Workload", "default", name)


_VERSION_CASES = [
    pytest.param([[put("a")], [put("b")]], 2, {"a": 1, "b": 2}, id="puts"),
    pytest.param([[put("a")], [put("a", b'{"x":1}')]], 2, {"a": 2}, id="update"),
    # The newest row is gone: the version must come from somewhere else than the rows.
    pytest.param([[put("a")], [put("b")], [delete("b")]], 3, {"a": 1}, id="delete-of-the-newest"),
    pytest.param([[put("a")], [delete("a")]], 2, {}, id="everything-deleted"),
    pytest.param([[put("a")], [delete("a")], [put("b")], [delete("b")], [put("c")]], 5, {"c": 5}, id="mixed"),
    pytest.param([[put("a"), put("b")], [delete("a"), put("c")]], 2, {"b": 1, "c": 2}, id="mixed-batch"),
    pytest.param([[put("a")], []], 1, {"a": 1}, id="empty-batch-is-no-version"),
    # One batch naming an object twice (SQLite upserts a batch of puts in order, uncollapsed).
    pytest.param([[put("a"), put("b"), put("a", b'{"x":2}')]], 1, {"a": 1, "b": 1}, id="one-batch-twice"),
    pytest.param([[put("a"), delete("a"), put("b")]], 1, {"b": 1}, id="one-batch-put-then-delete"),
    # The newest write puts an object and deletes it: no row carries its version.
    pytest.param([[put("a")], [put("b"), delete("b")]], 2, {"a": 1}, id="newest-puts-then-deletes"),
]


@pytest.mark.parametrize("grouped", [False, True], ids=["each-committed", "one-group"])
@pytest.mark.parametrize(("batches", "version", "kept"), _VERSION_CASES)
def test_versions_continue_after_a_reopen(store_factory: StoreFactory, batches: list[list[Change]], version: int,
                                          kept: dict[str, int], grouped: bool) -> None:
    """Written one commit each, or in one group (collapsed to each object's last change, the newest version
    kept): the versions go on after a reopen."""
    store = store_factory()
    with store.group() if grouped else contextlib.nullcontext():
        returned = [store.write(b) for b in batches]
    store.close()

    reopened = store_factory()
    assert returned[-1] == version
    assert {o.name: o.resource_version for o in reopened.load()} == kept
    # The next write gets a version no earlier write had.
    assert reopened.write([put("next")]) == version + 1


def test_load_returns_bodies_in_write_order(store_factory: StoreFactory) -> None:
    store = store_factory()
    store.write([put("b", b'{"b":1}')])
    store.write([put("a", b'{"a":1}')])
    store.write([put("b", b'{"b":2}')])
    assert store.load() == [
        StoredObject("Workload", "default", "a", b'{"a":1}', 2),
        StoredObject("Workload", "default", "b", b'{"b":2}', 3),
    ]


def test_a_group_of_one_write_naming_an_object_twice_stores_its_last_put(store_factory: StoreFactory) -> None:
    """A group of one write of puts only (a scheduling cycle's) is upserted in order: the last put wins."""
    store = store_factory()
    with store.group():
        store.write([put("a", b"1"), put("b"), put("a", b"2")])
    assert {o.name: (o.body, o.resource_version) for o in store_factory().load()} == {"a": (b"2", 1), "b": (b"{}", 1)}


def test_a_write_group_commits_once_at_its_end_with_a_version_per_write(store_factory: StoreFactory) -> None:
    store = store_factory()
    with store.group():
        assert store.write([put("a")]) == 1
        with store.group():  # nested: still the outer group's commit
            assert store.write([put("b")]) == 2
        assert store_factory.stored() == {}  # nothing committed yet
    assert store_factory.stored() == {"a": 1, "b": 2}


def test_a_group_that_writes_an_object_twice_stores_its_last_state(store_factory: StoreFactory) -> None:
    store = store_factory()
    store.write([put("gone"), put("kept")])
    with store.group():
        store.write([put("a", b"1")])
        store.write([put("a", b"2"), delete("gone")])
        store.write([put("new"), put("kept", b"k")])
        store.write([delete("new")])
    assert {o.name: (o.body, o.resource_version) for o in store_factory().load()} == {"a": (b"2", 3), "kept": (b"k", 4)}
    assert store.write([put("next")]) == 6


def test_a_group_whose_last_write_deletes_keeps_its_version_across_a_restart(store_factory: StoreFactory) -> None:
    """A group is applied collapsed to each object's last state: the newest version, carried by no row
    when the group ends on a deletion, is still where a restarted store reads it back."""
    store = store_factory()
    with store.group():
        assert store.write([put("a")]) == 1
        assert store.write([put("b")]) == 2
        assert store.write([delete("b"), delete("never-stored")]) == 3
    assert store_factory.stored() == {"a": 1}
    store.close()
    assert store_factory().write([put("c")]) == 4


def test_a_failed_write_inside_a_group_is_undone_alone(store_factory: StoreFactory) -> None:
    store = store_factory()
    with store.group():
        store.write([put("a")])
        # The second change is not a change the store can apply: the whole write goes, not the group.
        with pytest.raises(StoreError):
            store.write([put("b"), Put("Workload", "default", "c", None)])  # type: ignore[arg-type]
        store.write([put("d")])
    assert store_factory.stored() == {"a": 1, "d": 2}


class _Text(str):
    pass


@pytest.mark.parametrize(("change", "message"), [
    (Put("Workload", "default", "a\x00b", b"{}"), r"Put\.name: expected text without NUL"),
    (Delete("Workload", "de\x00fault", "a"), r"Delete\.namespace: expected text without NUL"),
    (Put("Workload", "default", 7, b"{}"), r"Put\.name: expected text without NUL, got 7"),  # type: ignore[arg-type]
    (Put("Workload", "default", "a", "{}"), r"Put\.body of Workload default/a: expected bytes, got str"),  # type: ignore[arg-type]
    (("Workload", "default", "a"), r"not a change"),
])
def test_a_change_the_store_cannot_take_is_refused_naming_what_is_wrong(
        store_factory: StoreFactory, change: Any, message: str) -> None:
    store = store_factory()
    with pytest.raises(StoreError, match=message):
        store.write([put("a"), change])
    # Text and bytes of subclasses are taken, as before.
    store.write([Put("Workload", _Text("default"), _Text("b"), b"{}")])
    assert store_factory.stored() == {"b": 1}


def test_what_a_group_wrote_is_committed_when_its_body_raises(store_factory: StoreFactory) -> None:
    store = store_factory()
    with pytest.raises(RuntimeError, match="after the write"):
        with store.group():
            store.write([put("a")])
            raise RuntimeError("after the write")
    assert store_factory.stored() == {"a": 1}


def test_meta_entries_are_kept(store_factory: StoreFactory) -> None:
    store = store_factory()
    assert store.get_meta("cluster-id") is None
    store.set_meta("cluster-id", "c1")
    store.set_meta("cluster-id", "c2")
    assert store_factory().get_meta("cluster-id") == "c2"


class _Disk:
    """The SQLite store's connection, with a disk that can fill up: while full, COMMIT fails as SQLite's does."""

    message = r"database or disk is full \(SQLITE_FULL\)"

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self.full = False

    @property
    def in_transaction(self) -> bool:
        return self._db.in_transaction

    def _check(self, sql: str) -> None:
        if self.full and sql in ("COMMIT", "RELEASE write") or (self.full and sql.startswith("INSERT")):
            err = sqlite3.OperationalError("database or disk is full")
            err.sqlite_errorcode = 13  # type: ignore[attr-defined]
            err.sqlite_errorname = "SQLITE_FULL"  # type: ignore[attr-defined]
            raise err

    def execute(self, sql: str, *args: object) -> sqlite3.Cursor:
        self._check(sql)
        return self._db.execute(sql, *args)

    def executemany(self, sql: str, rows: list[tuple[object, ...]]) -> sqlite3.Cursor:
        self._check(sql)
        return self._db.executemany(sql, rows)

    def close(self) -> None:
        self._db.close()


class _PgDisk:
    """A PostgreSQL database whose disk can fill up: while full, every write and every COMMIT fails
    with SQLSTATE 53100 (disk_full), raised by the server itself (a deferred trigger fires at COMMIT)."""

    message = r"No space left on device \(SQLSTATE 53100\)"

    def __init__(self, server: PostgresServer, url: str) -> None:
        self._server, self._url = server, url
        for sql in (
            "CREATE TABLE test_disk (is_full boolean NOT NULL)",
            "INSERT INTO test_disk VALUES (false)",
            "CREATE FUNCTION test_disk_full() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "IF (SELECT is_full FROM test_disk) THEN "
            "RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full'; "
            "END IF; RETURN NULL; END $$",
            "CREATE CONSTRAINT TRIGGER full_at_commit AFTER INSERT OR UPDATE OR DELETE ON sluicegate_objects "
            "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION test_disk_full()",
            "CREATE CONSTRAINT TRIGGER full_at_commit AFTER INSERT OR UPDATE OR DELETE ON sluicegate_meta "
            "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION test_disk_full()",
        ):
            server.execute(url, sql)
        self._full = False

    @property
    def full(self) -> bool:
        return self._full

    @full.setter
    def full(self, value: bool) -> None:
        self._server.execute(self._url, "UPDATE test_disk SET is_full = %s", (value,))
        self._full = value


def disk(store_factory: StoreFactory, store: Any) -> Any:
    """A disk under ``store`` that the test can fill (``disk.full = True``) and free again."""
    if store_factory.backend == "sqlite":
        d = _Disk(store._db)
        store._db = d
        return d
    assert store_factory.server is not None
    return _PgDisk(store_factory.server, store_factory.url)


def test_a_failed_write_reports_its_own_cause_and_changes_nothing(store_factory: StoreFactory) -> None:
    store = store_factory()
    full = disk(store_factory, store)
    store.write([put("a")])
    full.full = True
    with pytest.raises(StoreFull, match=full.message) as info:
        store.write([put("b")])
    assert "rollback" not in str(info.value).lower()
    assert store_factory.stored() == {"a": 1}
    full.full = False
    assert store.write([put("b")]) == 2
    assert store_factory.stored() == {"a": 1, "b": 2}


def test_a_lost_group_commit_keeps_the_process_up_and_is_redone_on_recovery(store_factory: StoreFactory) -> None:
    from sluicegate.controller.manager import Manager

    store = store_factory()
    full = disk(store_factory, store)
    manager = Manager(store, clock=lambda: 0.0, placement=False)
    assert manager.readiness()[0]
    with pytest.raises(StoreFull, match="commit of a write group failed"):
        with manager.write_group():
            store.write([put("a")])
            store.write([put("b")])
            full.full = True  # the commit cannot happen
    # Memory may be ahead of the store: the store keeps the group's writes to redo them.
    assert store.pending == 2 and store_factory.stored() == {}
    ready, reason = manager.readiness()
    assert not ready and reason.startswith("store refuses writes") and ("53100" in reason or "SQLITE_FULL" in reason)
    assert not manager.check_store()  # still full: still degraded, nothing lost
    assert store.pending == 2 and not manager.readiness()[0]
    full.full = False
    assert manager.check_store()
    assert manager.readiness()[0] and store.pending == 0
    assert store_factory.stored() == {"a": 1, "b": 2}
    store.close()
    assert {o.name: o.resource_version for o in store_factory().load()} == {"a": 1, "b": 2}


def test_writes_after_a_lost_group_commit_store_the_group_first(store_factory: StoreFactory) -> None:
    store = store_factory()
    full = disk(store_factory, store)
    with pytest.raises(StoreFull):
        with store.group():
            store.write([put("a")])
            full.full = True
    full.full = False
    with store.group():
        store.write([put("c")])
    assert store_factory.stored() == {"a": 1, "c": 2} and store.pending == 0


def test_a_write_after_a_lost_group_commit_that_fails_too_keeps_the_group_and_drops_itself(store_factory: StoreFactory) -> None:
    store = store_factory()
    full = disk(store_factory, store)
    with pytest.raises(StoreFull):
        with store.group():
            store.write([put("a")])
            full.full = True
    with pytest.raises(StoreFull):
        store.write([put("b")])  # outside a group: its caller got the error, nothing of it is kept
    assert store.pending == 1
    full.full = False
    assert store.write([put("c")]) == 2
    assert store_factory.stored() == {"a": 1, "c": 2} and store.pending == 0


def test_a_scheduling_cycle_whose_commit_is_lost_is_stored_on_recovery_and_survives_a_restart(store_factory: StoreFactory) -> None:
    from sluicegate.controller.manager import Manager, workload_state
    from sluicegate.manifest.loader import parse_text

    from .test_manager import QUEUES, Clock, workload

    store = store_factory()
    full = disk(store_factory, store)
    m = Manager(store, clock=Clock(), placement=False)
    m.apply(parse_text(QUEUES % {"strategy": "BestEffortFIFO"}, "queues.yaml"))
    m.create_workload(workload("a", "1"))

    if store_factory.backend == "sqlite":
        class CommitFails(_Disk):
            def execute(self, sql: str, *args: object) -> sqlite3.Cursor:
                if sql == "COMMIT":  # the cycle's writes enter the transaction; only its commit fails
                    err = sqlite3.OperationalError("database or disk is full")
                    err.sqlite_errorcode = 13  # type: ignore[attr-defined]
                    err.sqlite_errorname = "SQLITE_FULL"  # type: ignore[attr-defined]
                    raise err
                return self._db.execute(sql, *args)

        store._db = CommitFails(full._db)
    else:
        full.full = True  # PostgreSQL: the group's statements run at its commit, and fail there
    with pytest.raises(StoreFull, match="commit of a write group failed"):
        m.schedule_once()
    # Memory admitted it (agents may have been told); the store keeps the write to redo it.
    assert workload_state(m.get_workload("default", "a")) == "Admitted"
    assert store.pending == 1 and not m.readiness()[0]
    m.tick()  # the probe cannot commit either: still degraded, still kept
    assert store.pending == 1 and not m.readiness()[0]
    if store_factory.backend == "sqlite":
        store._db = full
    else:
        full.full = False
    m.tick()
    assert m.readiness()[0] and store.pending == 0
    store.close()

    again = Manager(store_factory(), clock=Clock(), placement=False)
    again.load()
    assert workload_state(again.get_workload("default", "a")) == "Admitted"
    assert again.versions == m.versions


@pytest.mark.parametrize("form", ["{path}", "sqlite:{path}", "sqlite://{path}", "sqlite:///{abspath}"])
def test_open_store_reads_every_sqlite_url_form(tmp_path: Path, form: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from sluicegate.controller.store import open_store
    from sluicegate.controller.store.sqlite import SqliteStore

    monkeypatch.chdir(tmp_path)
    store = open_store(form.format(path="state.db", abspath=str(tmp_path / "state.db").lstrip("/")))
    try:
        assert isinstance(store, SqliteStore) and Path(store.path).resolve() == tmp_path / "state.db"
    finally:
        store.close()


def test_open_store_refuses_an_unknown_scheme_without_showing_a_password() -> None:
    from sluicegate.controller.store import open_store

    with pytest.raises(StoreError, match=r"'mysql://root:\*\*\*@db/x': unsupported scheme") as info:
        open_store("mysql://root:hunter2@db/x")
    assert "hunter2" not in str(info.value)
