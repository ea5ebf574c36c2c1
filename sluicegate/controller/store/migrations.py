"""Versioned schema migrations for both backends.

Each backend has an ordered list of steps; step N takes a store at schema
version N-1 to version N.  A store records the version it is at (SQLite:
``PRAGMA user_version``; PostgreSQL: the meta entry ``schema_version``) and
opening it applies the steps it lacks, each in the same transaction as the
new version number, so a crash leaves it at a version it really has.  A
store at a version newer than the last step here was written by a newer
sluicegate: it is refused, never guessed at.

A future change of schema is one more ``Step`` at the end of a list (and,
where the other backend needs it too, one at the end of the other list).
Steps never change once released: a store in the field may sit at any of
them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sluicegate.controller.store.base import StoreError


@dataclass(frozen=True, slots=True)
class Step:
    """Schema version ``version - 1`` -> ``version``: ``statements`` run in order, in one transaction."""

    version: int
    why: str
    statements: tuple[str, ...]


SQLITE_STEPS: tuple[Step, ...] = (
    # The schema every store had before schema versions existed (user_version 0).
    Step(
        1,
        "objects and meta",
        (
            "CREATE TABLE IF NOT EXISTS objects (kind TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL, "
            "body BLOB NOT NULL, resource_version INTEGER NOT NULL, PRIMARY KEY (kind, namespace, name))",
            "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        ),
    ),
    Step(
        2,
        "load() reads in resource-version order and a migration copies by it: an index instead of a sort",
        ("CREATE INDEX IF NOT EXISTS objects_by_version ON objects (resource_version)",),
    ),
    Step(
        3,
        "that index cost every write an update of it (a fifth of a row's upsert, one more page in the WAL) "
        "to spare one sort at startup: load() sorts in memory instead",
        ("DROP INDEX IF EXISTS objects_by_version",),
    ),
)

POSTGRES_STEPS: tuple[Step, ...] = (
    Step(
        1,
        "objects with tombstones, meta, the leader lease",
        (
            "CREATE TABLE IF NOT EXISTS sluicegate_objects (kind text NOT NULL, namespace text NOT NULL, "
            "name text NOT NULL, body bytea NULL, resource_version bigint NOT NULL, deleted_at timestamptz NULL, "
            "PRIMARY KEY (kind, namespace, name))",
            "CREATE INDEX IF NOT EXISTS sluicegate_objects_by_version ON sluicegate_objects (resource_version)",
            # Pruning finds old tombstones without reading live rows.
            "CREATE INDEX IF NOT EXISTS sluicegate_objects_tombstones ON sluicegate_objects (deleted_at) "
            "WHERE body IS NULL",
            "CREATE TABLE IF NOT EXISTS sluicegate_meta (key text PRIMARY KEY, value text NOT NULL)",
            "CREATE TABLE IF NOT EXISTS sluicegate_lease (name text PRIMARY KEY, holder text NOT NULL DEFAULT '', "
            "address text NOT NULL DEFAULT '', epoch bigint NOT NULL DEFAULT 0, "
            "expires_at timestamptz NOT NULL DEFAULT 'epoch', renewed_at timestamptz NOT NULL DEFAULT 'epoch')",
            "INSERT INTO sluicegate_lease (name) VALUES ('leader') ON CONFLICT DO NOTHING",
        ),
    ),
)


def latest(steps: Sequence[Step]) -> int:
    return steps[-1].version if steps else 0


def to_apply(current: int, steps: Sequence[Step], *, where: str) -> Sequence[Step]:
    """The steps that take a store from ``current`` to the newest version, or StoreError if it is newer."""
    assert [s.version for s in steps] == list(range(1, len(steps) + 1)), "steps are numbered 1, 2, 3, ..."
    newest = latest(steps)
    if current > newest:
        raise StoreError(
            f"store {where}: schema version {current} is newer than this sluicegate (knows up to {newest}); "
            "upgrade sluicegate or restore a backup"
        )
    return steps[current:]
