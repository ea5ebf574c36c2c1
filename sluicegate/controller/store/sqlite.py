"""SQLite backend: one file, WAL journal.

With ``journal_mode=WAL`` and ``synchronous=NORMAL`` a committed transaction
survives the process being killed at any point (only a power loss may drop
the last transactions); ``synchronous=FULL`` makes it survive power loss
too, at the cost of an fsync per commit.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from sluicegate.controller.store.base import Change, Delete, Put, StoredObject, StoreError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS objects (
    kind TEXT NOT NULL,
    namespace TEXT NOT NULL,
    name TEXT NOT NULL,
    body BLOB NOT NULL,
    resource_version INTEGER NOT NULL,
    PRIMARY KEY (kind, namespace, name)
);
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
"""


class SqliteStore:
    def __init__(self, path: str, *, synchronous: str = "NORMAL") -> None:
        if synchronous not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise StoreError(f"sqlite synchronous={synchronous!r}: expected NORMAL, FULL, EXTRA or OFF")
        self.path = path
        parent = os.path.dirname(os.path.abspath(path))
        try:
            # Readable by its owner only: the store holds every tenant's
            # objects, and pods run on the same machines.  A directory made
            # here is private too (an existing one is left as it is: it may
            # hold other things).  SQLite gives -wal and -shm the file's mode.
            os.makedirs(parent, mode=0o700, exist_ok=True)
            if path != ":memory:":
                os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600))
                os.chmod(path, 0o600)
            self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={synchronous}")
            self._db.execute("PRAGMA busy_timeout=5000")
            self._db.executescript(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open store {path}: {exc}") from exc
        row = self._db.execute("SELECT MAX(resource_version) FROM objects").fetchone()
        stored = self.get_meta("resource_version")
        self._version = max(int(row[0] or 0), int(stored or 0))
        # Nesting depth of write groups, and whether the group's transaction is open.
        self._group_depth = 0
        self._group_open = False

    def load(self) -> list[StoredObject]:
        rows = self._db.execute(
            "SELECT kind, namespace, name, body, resource_version FROM objects ORDER BY resource_version"
        ).fetchall()
        return [StoredObject(k, ns, n, bytes(b), rv) for k, ns, n, b, rv in rows]

    def write(self, changes: Sequence[Change]) -> int:
        if not changes:
            return self._version
        version = self._version + 1
        db = self._db
        grouped = self._group_depth > 0
        try:
            if not grouped:
                db.execute("BEGIN IMMEDIATE")
            elif not self._group_open:
                db.execute("BEGIN IMMEDIATE")
                self._group_open = True
            if grouped:
                # Each write stays all-or-nothing inside the group's transaction.
                db.execute("SAVEPOINT write")
            try:
                self._apply(changes, version)
                db.execute("RELEASE write" if grouped else "COMMIT")
            except BaseException:
                if grouped:
                    db.execute("ROLLBACK TO write")
                    db.execute("RELEASE write")
                else:
                    db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise StoreError(f"store {self.path}: write of {len(changes)} change(s) failed: {exc}") from exc
        self._version = version
        return version

    def _apply(self, changes: Sequence[Change], version: int) -> None:
        db = self._db
        for ch in changes:
            if isinstance(ch, Put):
                db.execute(
                    "INSERT INTO objects(kind, namespace, name, body, resource_version) VALUES (?,?,?,?,?) "
                    "ON CONFLICT(kind, namespace, name) DO UPDATE SET body=excluded.body, "
                    "resource_version=excluded.resource_version",
                    (ch.kind, ch.namespace, ch.name, ch.body, version),
                )
            elif isinstance(ch, Delete):
                db.execute(
                    "DELETE FROM objects WHERE kind=? AND namespace=? AND name=?",
                    (ch.kind, ch.namespace, ch.name),
                )
        if not any(isinstance(ch, Put) for ch in changes):
            # Only a batch of deletes must record the version on the side: a
            # batch with a put leaves a row carrying it, and the version is
            # read back as the larger of MAX(resource_version) and this.
            db.execute(
                "INSERT INTO meta(key, value) VALUES ('resource_version', ?) "
                "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                (str(version),),
            )

    @contextmanager
    def group(self) -> Iterator[None]:
        """One commit for every write inside (see ``Store.group``): a batch of
        agent reports costs one commit instead of one per report."""
        self._group_depth += 1
        try:
            yield
        finally:
            self._group_depth -= 1
            if self._group_depth == 0 and self._group_open:
                self._group_open = False
                try:
                    self._db.execute("COMMIT")
                except sqlite3.Error as exc:
                    try:
                        self._db.execute("ROLLBACK")
                    except sqlite3.Error:
                        pass
                    raise StoreError(f"store {self.path}: commit of a write group failed: {exc}") from exc

    def get_meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        self._db.execute(
            "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
            (key, value),
        )

    def close(self) -> None:
        self._db.close()
