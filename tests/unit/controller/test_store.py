"""The SQLite store: atomic batches, and resource versions that never go back, across a reopen."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from sluicegate.controller.store import Change, Delete, Put, StoredObject, StoreError, StoreFull
from sluicegate.controller.store.sqlite import SqliteStore


def put(name: str, body: bytes = b"{}") -> Put:
    return Put("Workload", "default", name, body)


def delete(name: str) -> Delete:
    return Delete("Workload", "default", name)


@pytest.mark.parametrize(
    ("batches", "version", "kept"),
    [
        pytest.param([[put("a")], [put("b")]], 2, {"a": 1, "b": 2}, id="puts"),
        pytest.param([[put("a")], [put("a", b'{"x":1}')]], 2, {"a": 2}, id="update"),
        # The newest row is gone: the version must come from somewhere else than the rows.
        pytest.param([[put("a")], [put("b")], [delete("b")]], 3, {"a": 1}, id="delete-of-the-newest"),
        pytest.param([[put("a")], [delete("a")]], 2, {}, id="everything-deleted"),
        pytest.param([[put("a")], [delete("a")], [put("b")], [delete("b")], [put("c")]], 5, {"c": 5}, id="mixed"),
        pytest.param([[put("a"), put("b")], [delete("a"), put("c")]], 2, {"b": 1, "c": 2}, id="mixed-batch"),
        pytest.param([[put("a")], []], 1, {"a": 1}, id="empty-batch-is-no-version"),
    ],
)
def test_versions_continue_after_a_reopen(tmp_path: Path, batches: list[list[Change]], version: int, kept: dict[str, int]) -> None:
    path = str(tmp_path / "store.db")
    store = SqliteStore(path)
    returned = [store.write(b) for b in batches]
    store.close()

    reopened = SqliteStore(path)
    try:
        assert returned[-1] == version
        assert {o.name: o.resource_version for o in reopened.load()} == kept
        # The next write gets a version no earlier write had.
        assert reopened.write([put("next")]) == version + 1
    finally:
        reopened.close()


def test_load_returns_bodies_in_write_order(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "store.db"))
    try:
        store.write([put("b", b'{"b":1}')])
        store.write([put("a", b'{"a":1}')])
        store.write([put("b", b'{"b":2}')])
        assert store.load() == [
            StoredObject("Workload", "default", "a", b'{"a":1}', 2),
            StoredObject("Workload", "default", "b", b'{"b":2}', 3),
        ]
    finally:
        store.close()


def stored(path: str) -> dict[str, int]:
    """name -> resource version, as a fresh reader (another connection) sees the file."""
    reader = SqliteStore(path)
    try:
        return {o.name: o.resource_version for o in reader.load()}
    finally:
        reader.close()


def test_a_write_group_commits_once_at_its_end_with_a_version_per_write(tmp_path: Path) -> None:
    path = str(tmp_path / "store.db")
    store = SqliteStore(path)
    with store.group():
        assert store.write([put("a")]) == 1
        with store.group():  # nested: still the outer group's commit
            assert store.write([put("b")]) == 2
        assert stored(path) == {}  # nothing committed yet
    assert stored(path) == {"a": 1, "b": 2}
    store.close()


def test_a_failed_write_inside_a_group_is_undone_alone(tmp_path: Path) -> None:
    path = str(tmp_path / "store.db")
    store = SqliteStore(path)
    with store.group():
        store.write([put("a")])
        # The second change is not a change the store can apply: the whole write goes, not the group.
        with pytest.raises(StoreError):
            store.write([put("b"), Put("Workload", "default", "c", None)])  # type: ignore[arg-type]
        store.write([put("d")])
    assert stored(path) == {"a": 1, "d": 2}
    store.close()


def test_what_a_group_wrote_is_committed_when_its_body_raises(tmp_path: Path) -> None:
    path = str(tmp_path / "store.db")
    store = SqliteStore(path)
    with pytest.raises(RuntimeError, match="after the write"):
        with store.group():
            store.write([put("a")])
            raise RuntimeError("after the write")
    assert stored(path) == {"a": 1}
    store.close()


class _Disk:
    """The store's connection, with a disk that can fill up: while full, COMMIT fails as SQLite's does."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self.full = False

    @property
    def in_transaction(self) -> bool:
        return self._db.in_transaction

    def execute(self, sql: str, *args: object) -> sqlite3.Cursor:
        if self.full and sql in ("COMMIT", "RELEASE write") or (self.full and sql.startswith("INSERT")):
            err = sqlite3.OperationalError("database or disk is full")
            err.sqlite_errorcode = 13  # type: ignore[attr-defined]
            err.sqlite_errorname = "SQLITE_FULL"  # type: ignore[attr-defined]
            raise err
        return self._db.execute(sql, *args)

    def close(self) -> None:
        self._db.close()


def test_a_failed_write_reports_its_own_cause_and_changes_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "store.db")
    store = SqliteStore(path)
    disk = _Disk(store._db)
    store._db = disk  # type: ignore[assignment]
    store.write([put("a")])
    disk.full = True
    with pytest.raises(StoreFull, match=r"database or disk is full \(SQLITE_FULL\)") as info:
        store.write([put("b")])
    assert "rollback" not in str(info.value)
    assert stored(path) == {"a": 1}
    disk.full = False
    assert store.write([put("b")]) == 2
    assert stored(path) == {"a": 1, "b": 2}
    store.close()


def test_a_lost_group_commit_keeps_the_process_up_and_is_redone_on_recovery(tmp_path: Path) -> None:
    from sluicegate.controller.manager import Manager

    path = str(tmp_path / "store.db")
    store = SqliteStore(path)
    disk = _Disk(store._db)
    store._db = disk  # type: ignore[assignment]
    manager = Manager(store, clock=lambda: 0.0, placement=False)
    assert manager.readiness()[0]
    with pytest.raises(StoreFull, match="commit of a write group failed"):
        with manager.write_group():
            store.write([put("a")])
            store.write([put("b")])
            disk.full = True  # the commit cannot happen
    # Memory may be ahead of the store: the store keeps the group's writes to redo them.
    assert store.pending == 2 and stored(path) == {}
    ready, reason = manager.readiness()
    assert not ready and "database or disk is full" in reason
    assert not manager.check_store()  # still full: still degraded, nothing lost
    assert store.pending == 2 and not manager.readiness()[0]
    disk.full = False
    assert manager.check_store()
    assert manager.readiness()[0] and store.pending == 0
    assert stored(path) == {"a": 1, "b": 2}
    store.close()
    assert {o.name: o.resource_version for o in SqliteStore(path).load()} == {"a": 1, "b": 2}


def test_writes_after_a_lost_group_commit_store_the_group_first(tmp_path: Path) -> None:
    path = str(tmp_path / "store.db")
    store = SqliteStore(path)
    disk = _Disk(store._db)
    store._db = disk  # type: ignore[assignment]
    with pytest.raises(StoreFull):
        with store.group():
            store.write([put("a")])
            disk.full = True
    disk.full = False
    with store.group():
        store.write([put("c")])
    assert stored(path) == {"a": 1, "c": 2} and store.pending == 0
    store.close()


def test_a_scheduling_cycle_whose_commit_is_lost_is_stored_on_recovery_and_survives_a_restart(tmp_path: Path) -> None:
    from sluicegate.controller.manager import Manager, workload_state
    from sluicegate.manifest.loader import parse_text

    from .test_manager import QUEUES, Clock, workload

    path = str(tmp_path / "store.db")
    store = SqliteStore(path)
    disk = _Disk(store._db)
    store._db = disk  # type: ignore[assignment]
    m = Manager(store, clock=Clock(), placement=False)
    m.apply(parse_text(QUEUES % {"strategy": "BestEffortFIFO"}, "queues.yaml"))
    m.create_workload(workload("a", "1"))

    class CommitFails(_Disk):
        def execute(self, sql: str, *args: object) -> sqlite3.Cursor:
            if sql == "COMMIT":  # the cycle's writes enter the transaction; only its commit fails
                err = sqlite3.OperationalError("database or disk is full")
                err.sqlite_errorcode = 13  # type: ignore[attr-defined]
                err.sqlite_errorname = "SQLITE_FULL"  # type: ignore[attr-defined]
                raise err
            return self._db.execute(sql, *args)

    store._db = CommitFails(disk._db)  # type: ignore[assignment]
    with pytest.raises(StoreFull, match="commit of a write group failed"):
        m.schedule_once()
    # Memory admitted it (agents may have been told); the store keeps the write to redo it.
    assert workload_state(m.get_workload("default", "a")) == "Admitted"
    assert store.pending == 1 and not m.readiness()[0]
    m.tick()  # the probe cannot commit either: still degraded, still kept
    assert store.pending == 1 and not m.readiness()[0]
    store._db = disk  # type: ignore[assignment]
    m.tick()
    assert m.readiness()[0] and store.pending == 0
    store.close()

    again = Manager(SqliteStore(path), clock=Clock(), placement=False)
    again.load()
    assert workload_state(again.get_workload("default", "a")) == "Admitted"
    assert again.versions == m.versions
