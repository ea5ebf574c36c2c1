"""SQLite backend: one file, WAL journal.

With ``journal_mode=WAL`` and ``synchronous=NORMAL`` a committed transaction
survives the process being killed at any point (only a power loss may drop
the last transactions); ``synchronous=FULL`` makes it survive power loss
too, at the cost of an fsync per commit.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
import urllib.parse
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from sluicegate.controller.store.base import (
    INTERNAL_META,
    Change,
    Delete,
    Put,
    Snapshot,
    StoredObject,
    StoreError,
    StoreFull,
)
from sluicegate.controller.store.migrations import SQLITE_STEPS, latest, to_apply

_PUT = ("INSERT INTO objects(kind, namespace, name, body, resource_version) VALUES (?,?,?,?,?) "
        "ON CONFLICT(kind, namespace, name) DO UPDATE SET body=excluded.body, "
        "resource_version=excluded.resource_version")
_DELETE = "DELETE FROM objects WHERE kind=? AND namespace=? AND name=?"


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
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open store {path}: {exc}") from exc
        try:
            self._migrate()
        except (sqlite3.Error, StoreError) as exc:
            self._db.close()
            if isinstance(exc, StoreError):
                raise
            raise StoreError(f"cannot open store {path}: schema migration failed: {exc}") from exc
        row = self._db.execute("SELECT MAX(resource_version) FROM objects").fetchone()
        stored = self.get_meta("resource_version")
        self._version = max(int(row[0] or 0), int(stored or 0))
        # Nesting depth of write groups, and whether the group's transaction is open.
        self._group_depth = 0
        self._group_open = False
        # (version, changes) of each write in the open group's transaction.
        self._group_writes: list[tuple[int, Sequence[Change]]] = []
        # Writes whose group commit failed: memory holds them, so the next
        # transaction redoes them first, in order, with their own versions.
        self._pending: list[tuple[int, Sequence[Change]]] = []

    def _schema_version(self) -> int:
        version = int(self._db.execute("PRAGMA user_version").fetchone()[0])
        if version == 0 and self._db.execute("SELECT 1 FROM sqlite_master WHERE name='objects'").fetchone():
            return 1  # written before schema versions existed: that schema is version 1
        return version

    def _migrate(self) -> None:
        """Bring the file to the newest schema (see migrations.py); refuse one from a newer sluicegate."""
        if not to_apply(self._schema_version(), SQLITE_STEPS, where=self.path):
            return
        db = self._db
        db.execute("BEGIN IMMEDIATE")  # another process opening the file at once waits, then finds it done
        try:
            for step in to_apply(self._schema_version(), SQLITE_STEPS, where=self.path):
                for statement in step.statements:
                    db.execute(statement)
            db.execute(f"PRAGMA user_version={latest(SQLITE_STEPS)}")
            db.execute("COMMIT")
        except BaseException:
            self._rollback()
            raise

    def schema_version(self) -> int:
        return self._schema_version()

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
            if not grouped or not self._group_open:
                self._begin()
                if grouped:
                    self._group_open = True
                    self._group_writes = list(self._pending)
            if grouped:
                # Each write stays all-or-nothing inside the group's transaction.
                db.execute("SAVEPOINT write")
            try:
                self._apply(changes, version)
                if not grouped:
                    db.execute("COMMIT")
                    self._pending = []
                else:
                    db.execute("RELEASE write")
            except BaseException:
                self._undo(grouped)
                raise
        except sqlite3.Error as exc:
            raise _store_error(self.path, f"write of {len(changes)} change(s) failed", exc) from exc
        if grouped:
            self._group_writes.append((version, changes))
        self._version = version
        return version

    def _begin(self) -> None:
        """Open a transaction and redo the writes of a group whose commit failed (memory has them)."""
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            for version, changes in self._pending:
                self._apply(changes, version)
        except BaseException:
            self._rollback()
            raise

    def _undo(self, grouped: bool) -> None:
        """Take back the failed write only, without masking its error by a failed rollback."""
        db = self._db
        try:
            active = db.in_transaction
        except sqlite3.Error:
            active = False
        if not active:
            # SQLite rolled the whole transaction back itself (disk full, I/O
            # error): a group's earlier writes are gone from it too.  Memory
            # holds them, so they wait to be redone by the next transaction.
            if grouped and self._group_open:
                self._pending = self._group_writes
                self._group_writes = []
                self._group_open = False
            return
        try:
            if grouped:
                db.execute("ROLLBACK TO write")
                db.execute("RELEASE write")
            else:
                db.execute("ROLLBACK")
        except sqlite3.Error:
            self._rollback()
            if grouped:
                self._pending = self._group_writes
                self._group_writes = []
                self._group_open = False

    def _rollback(self) -> None:
        try:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
        except sqlite3.Error:
            pass  # the first error is the one that tells what happened

    @property
    def pending(self) -> int:
        """How many writes memory holds that no commit has stored yet (from failed group commits)."""
        return len(self._pending)

    def flush(self) -> None:
        if self._group_depth > 0:
            return
        db = self._db
        try:
            self._begin()
            try:
                # A real write, so success means the disk takes data again.
                db.execute(
                    "INSERT INTO meta(key, value) VALUES ('resource_version', ?) "
                    "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                    (str(self._version),),
                )
                db.execute("COMMIT")
            except BaseException:
                self._rollback()
                raise
        except sqlite3.Error as exc:
            raise _store_error(self.path, "probe write failed", exc) from exc
        self._pending = []

    def _apply(self, changes: Sequence[Change], version: int) -> None:
        db = self._db
        # Runs of puts and of deletes each go as one executemany (the rows are
        # bound in C), in the order given, so a put and a delete of one name keep theirs.
        for is_put, run in itertools.groupby(changes, key=lambda ch: isinstance(ch, Put)):
            if is_put:
                db.executemany(_PUT, [(ch.kind, ch.namespace, ch.name, ch.body, version)
                                      for ch in run if isinstance(ch, Put)])
            else:
                db.executemany(_DELETE, [(ch.kind, ch.namespace, ch.name) for ch in run if isinstance(ch, Delete)])
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
                    self._rollback()
                    # Memory already holds these writes: keep them to redo first.
                    self._pending, self._group_writes = self._group_writes, []
                    raise _store_error(self.path, "commit of a write group failed", exc) from exc
                self._pending, self._group_writes = [], []

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

    def snapshot(self) -> Snapshot:
        db = self._db
        try:
            db.execute("BEGIN")  # one read transaction: WAL readers see one commit, writers go on
            try:
                objects = self.load()
                meta = {str(k): str(v) for k, v in db.execute("SELECT key, value FROM meta")}
            finally:
                db.execute("COMMIT")
        except sqlite3.Error as exc:
            raise _store_error(self.path, "reading a snapshot failed", exc) from exc
        version = max([int(meta.get("resource_version") or 0)] + [o.resource_version for o in objects])
        return Snapshot(objects, {k: v for k, v in meta.items() if k not in INTERNAL_META}, version)

    def counts(self) -> dict[str, int]:
        out = {str(k): int(n) for k, n in self._db.execute("SELECT kind, COUNT(*) FROM objects GROUP BY kind")}
        keys = ",".join("?" * len(INTERNAL_META))
        sql = f"SELECT COUNT(*) FROM meta WHERE key NOT IN ({keys})"
        (meta,) = self._db.execute(sql, tuple(INTERNAL_META)).fetchone()
        if meta:
            out["(meta)"] = int(meta)
        return out

    def replace_all(self, snapshot: Snapshot) -> None:
        db = self._db
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute("DELETE FROM objects")
                db.execute("DELETE FROM meta")
                db.executemany(
                    "INSERT INTO objects(kind, namespace, name, body, resource_version) VALUES (?,?,?,?,?)",
                    ((o.kind, o.namespace, o.name, o.body, o.resource_version) for o in snapshot.objects),
                )
                meta = {k: v for k, v in snapshot.meta.items() if k not in INTERNAL_META}
                meta["resource_version"] = str(snapshot.version)
                db.executemany("INSERT INTO meta(key, value) VALUES (?, ?)", meta.items())
                db.execute("COMMIT")
            except BaseException:
                self._rollback()
                raise
        except sqlite3.Error as exc:
            raise _store_error(self.path, "replacing the content failed", exc) from exc
        self._version = snapshot.version
        self._pending = []


def backup_file(source: str, out: str) -> None:
    """Copy the SQLite store ``source`` into the new file ``out`` with SQLite's online backup.

    Consistent while a controller writes to ``source``: the copy is of one
    commit (SQLite restarts the copy if the file changes under a paged backup;
    one step copies everything under one read transaction).
    """
    if not os.path.exists(source):
        raise StoreError(f"store {source}: no such file")
    try:
        src = sqlite3.connect(f"file:{urllib.parse.quote(source)}?mode=ro", uri=True)
        try:
            os.close(os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
            dst = sqlite3.connect(out)
            try:
                src.backup(dst)
            finally:
                dst.close()
        finally:
            src.close()
    except (OSError, sqlite3.Error) as exc:
        raise StoreError(f"backup of {source} to {out} failed: {exc}") from exc


# SQLite's primary result codes that mean "no space" (the rest: read-only,
# I/O error, cannot open ... are the store being unavailable).
_SQLITE_FULL = 13


def _store_error(path: str, what: str, exc: sqlite3.Error) -> StoreError:
    code = getattr(exc, "sqlite_errorcode", None)
    name = getattr(exc, "sqlite_errorname", None)
    detail = f"{exc} ({name})" if name else str(exc)
    if code is not None and code & 0xFF == _SQLITE_FULL:
        return StoreFull(f"store {path}: {what}: {detail}")
    return StoreError(f"store {path}: {what}: {detail}")
