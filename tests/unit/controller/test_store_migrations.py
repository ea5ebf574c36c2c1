"""Schema versions: a store written by the previous schema is migrated and served, a newer one is refused,
and a new step is one entry in a list, applied once, in one transaction with its version."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from sluicegate.controller.manager import Manager, workload_state
from sluicegate.controller.store import Put, StoreError
from sluicegate.controller.store import migrations as m
from sluicegate.controller.store.sqlite import SqliteStore
from tests.conftest import StoreFactory

from .test_manager import Clock

# Written by the SqliteStore of commit 15b2dae (before schema versions: user_version 0, no index on
# resource_version) through the real Manager: the queues of test_manager.QUEUES, a workload admitted by a
# scheduling cycle, one pending (too big), and one created then deleted (the version, 7, only in meta).
BEFORE_VERSIONS = Path(__file__).parent / "fixtures" / "store-before-schema-versions.db"


def user_version(path: Path) -> int:
    db = sqlite3.connect(path)
    try:
        return int(db.execute("PRAGMA user_version").fetchone()[0])
    finally:
        db.close()


def test_a_store_from_before_schema_versions_is_migrated_and_served(tmp_path: Path) -> None:
    path = tmp_path / "controller.db"
    shutil.copyfile(BEFORE_VERSIONS, path)
    assert user_version(path) == 0

    store = SqliteStore(str(path))
    try:
        assert store.schema_version() == m.latest(m.SQLITE_STEPS) == 3
        indexes = [r[0] for r in store._db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")]
        # Step 2 made it, step 3 dropped it: writes no longer keep it up to date, load() sorts instead.
        assert "objects_by_version" not in indexes
        manager = Manager(store, clock=Clock(), placement=False)
        assert manager.load() == 5
        assert workload_state(manager.get_workload("default", "admitted")) == "Admitted"
        assert workload_state(manager.get_workload("default", "pending")) == "Pending"
        # Versions go on after the deleted workload's, which only meta remembered.
        assert store.write([Put("Workload", "default", "next", b"{}")]) == 8
    finally:
        store.close()
    assert user_version(path) == 3
    # Opening it again changes nothing.
    SqliteStore(str(path)).close()
    assert user_version(path) == 3


def test_a_new_file_starts_at_the_newest_version(tmp_path: Path) -> None:
    SqliteStore(str(tmp_path / "new.db")).close()
    assert user_version(tmp_path / "new.db") == m.latest(m.SQLITE_STEPS)


def test_a_sqlite_store_from_a_newer_sluicegate_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "controller.db"
    SqliteStore(str(path)).close()
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = 5")
    db.close()
    with pytest.raises(
        StoreError,
        match=r"controller\.db: schema version 5 is newer than this sluicegate \(knows up to 3\); "
        r"upgrade sluicegate or restore a backup",
    ):
        SqliteStore(str(path))
    assert user_version(path) == 5


def test_the_steps_are_numbered_in_order() -> None:
    for steps in (m.SQLITE_STEPS, m.POSTGRES_STEPS):
        assert [s.version for s in steps] == list(range(1, len(steps) + 1))
        assert all(s.statements and s.why for s in steps)


def future_step(backend: str) -> m.Step:
    table = "labels" if backend == "sqlite" else "sluicegate_labels"
    return m.Step(99, "a future change", (f"CREATE TABLE {table} (name TEXT PRIMARY KEY)",))


def steps_module(backend: str) -> str:
    return f"sluicegate.controller.store.{'sqlite' if backend == 'sqlite' else 'postgres'}"


def test_a_future_step_is_one_entry_applied_once(store_factory: StoreFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    store_factory().write([Put("Workload", "default", "kept", b"{}")])
    name = "SQLITE_STEPS" if store_factory.backend == "sqlite" else "POSTGRES_STEPS"
    current: tuple[m.Step, ...] = getattr(m, name)
    step = future_step(store_factory.backend)
    monkeypatch.setattr(f"{steps_module(store_factory.backend)}.{name}", (*current, m.Step(len(current) + 1, step.why, step.statements)))

    store = store_factory()
    assert store.schema_version() == len(current) + 1
    assert [o.name for o in store.load()] == ["kept"]
    store_factory().close()  # at the newest version already: nothing to do, no error (the table exists once)


def test_a_step_that_fails_changes_nothing(store_factory: StoreFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    store_factory().close()
    name = "SQLITE_STEPS" if store_factory.backend == "sqlite" else "POSTGRES_STEPS"
    current: tuple[m.Step, ...] = getattr(m, name)
    step = future_step(store_factory.backend)
    broken = m.Step(len(current) + 1, "broken", (*step.statements, "CREATE TABLE broken (x NOSUCHTYPE[)"))
    monkeypatch.setattr(f"{steps_module(store_factory.backend)}.{name}", (*current, broken))
    with pytest.raises(StoreError):
        store_factory()
    monkeypatch.undo()
    store = store_factory()
    assert store.schema_version() == len(current)
    # The step's first statement was undone with it: applying the real step later works.
    monkeypatch.setattr(f"{steps_module(store_factory.backend)}.{name}", (*current, m.Step(len(current) + 1, step.why, step.statements)))
    assert store_factory().schema_version() == len(current) + 1
