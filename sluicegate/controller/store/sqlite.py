"""SQLite backend: one file, WAL journal.

With ``journal_mode=WAL`` and ``synchronous=NORMAL`` a committed transaction
survives the process being killed at any point (only a power loss may drop
the last transactions); ``synchronous=FULL`` makes it survive power loss
too, at the cost of an fsync per commit.

Checkpoints (copying the WAL's pages into the database file) run on a thread
of the store's own, never inside a commit: see ``CHECKPOINT_PAGES``.
"""

from __future__ import annotations

import logging
import mmap
import operator
import os
import sqlite3
import struct
import threading
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from sluicegate.controller.store.base import (
    INTERNAL_META,
    Change,
    Put,
    Snapshot,
    StoredObject,
    StoreError,
    StoreFull,
    check_changes,
)
from sluicegate.controller.store.migrations import SQLITE_STEPS, latest, to_apply

# The upsert, one row a step (executemany).  Measured against the alternatives on the writes of Kueue's
# large-scale test replayed (200,000 rows of 1.4 KiB on average, ~350 a transaction), in CPU per row,
# statement and commit: this one 4.1 + 2.6 us; UPDATE, then INSERT for new objects, 5.3 + 2.9; INSERT OR
# REPLACE 5.0 + 4.2 (a new rowid each time: the key's index entry moves); several rows a statement
# (multi-row VALUES) 5.5-6.1 + 2.6-3.1; UPDATE by a rowid kept in memory no better.  The table keeps its
# rowid: WITHOUT ROWID stores rows in an index b-tree, whose cells hold about 1 KiB of a 4 KiB page
# inline, so a workload's row spills onto overflow pages (16.7 + 14.4 us).  New files keep SQLite's 4 KiB
# pages: 16 KiB pages write fewer WAL frames when the rows a transaction touches lie together (5.9 us in
# all against 6.7 on that replay), but each row updated where they do not dirties a page four times the
# size (400 upserts at random among 50,000 rows: 28 us a row against 17).  secure_delete (on in Debian's
# build), mmap_size and a larger page cache changed nothing measurable on that replay.
_PUT = ("INSERT INTO objects(kind, namespace, name, body, resource_version) VALUES (?,?,?,?,?) "
        "ON CONFLICT(kind, namespace, name) DO UPDATE SET body=excluded.body, "
        "resource_version=excluded.resource_version")
_DELETE = "DELETE FROM objects WHERE kind=? AND namespace=? AND name=?"
# SQLite's page cache, in KiB (its default is 2 MiB).  A write group (a scheduling cycle's admissions,
# a batch of reports) updates rows spread over the whole table: with the default cache most of them
# miss and their pages are read back from the file, one system call each (1,000 upserts of 1 KiB rows
# at random in a 50,000-row table: 33 us of CPU per row with 2 MiB, 17 with 200 MiB).  Bounded, as it
# is the controller's memory: at most 32 MiB more.
PAGE_CACHE_KIB = 32_768
_VERSION_OF = operator.itemgetter(4)  # a row's resource_version in load()
_SET_META = "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value"

log = logging.getLogger(__name__)

# WAL checkpoints. Every commit appends its pages to the -wal file; a checkpoint copies them into the
# database file and syncs both, and the first commit after a checkpoint that copied everything starts the
# WAL over. SQLite's automatic checkpoint runs inside the COMMIT that takes the WAL past
# ``wal_autocheckpoint`` pages, on the committing thread: the controller's event loop, which then waits
# for the copy and two fsyncs. Instead a thread of the store's own runs PASSIVE checkpoints on a
# connection of its own: they neither wait for nor block the writer, and sqlite3 lets go of the GIL while
# SQLite works. After a commit that leaves CHECKPOINT_PAGES pages in the WAL that no checkpoint has copied
# (SQLite's default threshold is 1,000 pages), the writer wakes it (the count is read from the WAL-index
# header, see _map_wal_index, or else estimated from the rows changed); the thread follows a pass with
# others, more and more spaced, until one finds nothing appended since the one before (see
# _Checkpointer.FOLLOW_SECONDS). A commit is as durable as before: it is in the WAL (synced or not, per
# ``synchronous``) when COMMIT returns, and the checkpoints sync as SQLite's own do (the thread's
# connection has the same ``synchronous``). SQLite's automatic checkpoint stays as a backstop at
# BACKSTOP_PAGES: the WAL starts over only once a checkpoint has copied all of it, which the thread
# achieves in a pause of the writer longer than a pass (two fsyncs); under commits that never pause that
# long, or while the thread's checkpoints fail, SQLite's own copies the rest inside a commit once the WAL
# reaches BACKSTOP_PAGES, so the WAL stays bounded. A WAL left large by a burst is cut back to
# JOURNAL_SIZE_LIMIT bytes when it starts over.
CHECKPOINT_PAGES = 1_000
BACKSTOP_PAGES = 10_000
JOURNAL_SIZE_LIMIT = 64 * 1024 * 1024
_SQLITE_AUTOCHECKPOINT = 1_000  # SQLite's default, put back if the thread cannot be had


# The WAL-index header (SQLite's file format, https://www.sqlite.org/walformat.html, 4.1 and 4.2): at the
# start of the -shm file, native byte order, mxFrame (the WAL's last committed frame) at byte 16, and the
# checkpoint's nBackfill (frames already copied into the database) at byte 96.  Read without a lock: a
# torn or stale read only moves a wake by a commit.
_U32 = struct.Struct("=I")
_MX_FRAME = 16
_N_BACKFILL = 96
_WAL_INDEX_HEADER = 136


def _map_wal_index(path: str) -> mmap.mmap | None:
    """The -shm file's header, mapped read-only; None where there is none to map (then pages are estimated)."""
    try:
        fd = os.open(f"{path}-shm", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if os.fstat(fd).st_size < _WAL_INDEX_HEADER:
            return None
        return mmap.mmap(fd, _WAL_INDEX_HEADER, mmap.MAP_SHARED, mmap.PROT_READ)
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)


class _Checkpointer:
    """The store's WAL checkpoints, on a thread and a connection of their own (see CHECKPOINT_PAGES)."""

    # After a pass that left frames uncopied or found new ones, another pass this many seconds later (the
    # wait doubling up to FOLLOW_MAX while they keep finding new frames), until one finds nothing appended
    # since the pass before: the WAL is then wholly copied and the next commit starts it over.  One pass
    # per wake otherwise: each pass that copies costs two fsyncs, as SQLite's own checkpoint does.
    FOLLOW_SECONDS = 0.1
    FOLLOW_MAX = 1.6

    def __init__(self, path: str, synchronous: str) -> None:
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        try:
            self._db.execute(f"PRAGMA synchronous={synchronous}")
        except BaseException:
            self._db.close()
            raise
        self._wake = threading.Event()
        self._stopping = False
        # While a pass runs (the writer does not wake it meanwhile: the pass copies what is there).
        self.in_pass = False
        # What the last pass did: (busy, pages in the WAL, pages copied so far), as PRAGMA wal_checkpoint says.
        self.last: tuple[int, int, int] | None = None
        # The most pages a pass found in the WAL.
        self.most = 0
        # Passes made, and the number of the last one that found the WAL wholly copied with nothing new.
        self.passes = 0
        self.caught_up = 0
        # The threads the passes ran on (one: this one's), for tests.
        self.ran_on: set[int] = set()
        # The error of the last pass, while passes fail (logged once per run of failures).
        self.failure: str | None = None
        # Notified after every pass (see wait_for).
        self._done = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="sqlite-checkpoint", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def wait_for(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Wait until ``predicate()`` holds after a pass (or now), at most ``timeout`` seconds."""
        with self._done:
            return self._done.wait_for(predicate, timeout)

    def stop(self, timeout: float = 30.0) -> None:
        """Let a pass under way finish, then end the thread (which closes its connection)."""
        self._stopping = True
        self._wake.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        follow: float | None = None
        copied_to = -1  # the WAL's size when the last pass had copied all of it (-1: it had not)
        try:
            while True:
                woken = self._wake.wait(follow)
                self._wake.clear()
                if self._stopping:
                    return
                self.in_pass = True
                try:
                    last = self._pass()
                finally:
                    self.in_pass = False
                if last is None:
                    done = False
                else:
                    busy, pages, copied = last
                    done = pages <= 0 or (not busy and copied == pages == copied_to)
                    copied_to = pages if not busy and copied == pages else -1
                if done:
                    follow = None
                elif woken or follow is None:
                    follow = self.FOLLOW_SECONDS
                else:
                    follow = min(follow * 2, self.FOLLOW_MAX)
                with self._done:
                    self.passes += 1
                    if done:
                        self.caught_up = self.passes
                    self._done.notify_all()
        finally:
            self._db.close()

    def _pass(self) -> tuple[int, int, int] | None:
        """One PASSIVE checkpoint: (busy, pages in the WAL, pages copied), or None if it failed."""
        try:
            row = self._db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except sqlite3.Error as exc:
            if self.failure is None:
                log.warning("sqlite checkpoint failed (retried; SQLite's backstop bounds the WAL): %s", exc)
            self.failure = str(exc)
            return None
        if self.failure is not None:
            log.warning("sqlite checkpoints succeed again (was: %s)", self.failure)
            self.failure = None
        busy, pages, copied = (int(v) for v in row)
        self.last = (busy, pages, copied)
        self.most = max(self.most, pages)
        self.ran_on.add(threading.get_ident())
        return busy, pages, copied


class SqliteStore:
    def __init__(self, path: str, *, synchronous: str = "NORMAL", checkpoint_pages: int = CHECKPOINT_PAGES,
                 backstop_pages: int = BACKSTOP_PAGES) -> None:
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
            mode = self._db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            self._db.execute(f"PRAGMA synchronous={synchronous}")
            self._db.execute("PRAGMA busy_timeout=5000")
            self._db.execute(f"PRAGMA cache_size=-{PAGE_CACHE_KIB}")
            # Checkpoints by the store's thread (see CHECKPOINT_PAGES); SQLite's own only as a backstop.
            self._wal = str(mode).lower() == "wal"
            if self._wal:
                self._db.execute(f"PRAGMA wal_autocheckpoint={backstop_pages}")
                self._db.execute(f"PRAGMA journal_size_limit={JOURNAL_SIZE_LIMIT}")
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
        # Nesting depth of write groups.
        self._group_depth = 0
        # (version, changes) of each write of the open group, applied at its end.
        self._group_writes: list[tuple[int, Sequence[Change]]] = []
        # Writes whose group commit failed: memory holds them, so the next
        # transaction redoes them first, in order, with their own versions.
        self._pending: list[tuple[int, Sequence[Change]]] = []
        self._synchronous = synchronous
        self._checkpoint_pages = checkpoint_pages
        # Pages the commits wrote to the WAL since the checkpointer was last woken (an estimate).
        self._wal_pages = 0
        # Started at the first wake: a store that writes little (a command, a test) has no thread.
        self._checkpointer: _Checkpointer | None = None
        # The WAL-index (-shm) header, mapped read-only once the first commit made it (see _map_wal_index).
        self._shm: mmap.mmap | None = None
        self._shm_tried = False

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
        # In table order, sorted here: an index kept for this order cost every write (schema step 3).
        rows = self._db.execute("SELECT kind, namespace, name, body, resource_version FROM objects").fetchall()
        rows.sort(key=_VERSION_OF)
        return [StoredObject(k, ns, n, bytes(b), rv) for k, ns, n, b, rv in rows]

    def write(self, changes: Sequence[Change]) -> int:
        if not changes:
            return self._version
        check_changes(changes)
        version = self._version + 1
        if self._group_depth > 0:
            # Applied at the group's end, in its one transaction (see group).
            self._group_writes.append((version, changes))
        else:
            self._commit([*self._pending, (version, changes)], f"write of {len(changes)} change(s)")
            self._pending = []
        self._version = version
        return version

    def _commit(self, batches: Sequence[tuple[int, Sequence[Change]]], what: str, *, probe: bool = False) -> None:
        """One transaction for ``batches`` (the writes a failed group left to redo come first); all or nothing."""
        db = self._db
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                self._apply(batches)
                if probe:
                    # A real write, so success means the disk takes data again.
                    db.execute(_SET_META, ("resource_version", str(self._version)))
                db.execute("COMMIT")
            except BaseException:
                self._rollback()
                raise
        except sqlite3.Error as exc:
            raise _store_error(self.path, f"{what} failed", exc) from exc
        if self._wal:
            self._wrote(sum(len(changes) for _, changes in batches))

    def _wrote(self, rows: int) -> None:
        """After a commit: wake the checkpointer once the WAL holds ``checkpoint_pages`` pages no checkpoint
        copied yet (read from the WAL-index, or estimated from ``rows`` where it cannot be read)."""
        shm = self._shm
        if shm is None and not self._shm_tried:
            self._shm_tried = True
            shm = self._shm = _map_wal_index(self.path)
        if shm is not None:
            if _U32.unpack_from(shm, _MX_FRAME)[0] - _U32.unpack_from(shm, _N_BACKFILL)[0] < self._checkpoint_pages:
                return
        else:
            self._wal_pages += rows + 2
            if self._wal_pages < self._checkpoint_pages:
                return
            self._wal_pages = 0
        cp = self._checkpointer
        if cp is None:
            try:
                cp = self._checkpointer = _Checkpointer(self.path, self._synchronous)
            except (sqlite3.Error, RuntimeError) as exc:
                # No thread to be had: SQLite checkpoints inside commits again, as it does by default.
                log.warning("store %s: no checkpoint thread (%s); SQLite checkpoints in its commits", self.path, exc)
                self._wal = False
                try:
                    self._db.execute(f"PRAGMA wal_autocheckpoint={_SQLITE_AUTOCHECKPOINT}")
                except sqlite3.Error:
                    pass  # the backstop stays: the WAL is bounded anyway
                return
        if not cp.in_pass:  # a pass under way copies what is there; the next commit after it wakes it again
            cp.wake()

    @property
    def checkpointer(self) -> _Checkpointer | None:
        """The checkpoint thread, once a commit woke it (None before, and without WAL)."""
        return self._checkpointer

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
        self._commit(self._pending, "probe write", probe=True)
        self._pending = []

    def _apply(self, batches: Sequence[tuple[int, Sequence[Change]]]) -> None:
        if not batches:
            return
        db = self._db
        if len(batches) == 1 and len(batches[0][1]) == 1:
            # The common lone write: no collapsing to do.
            version, (ch,) = batches[0]
            if isinstance(ch, Put):
                db.execute(_PUT, (ch.kind, ch.namespace, ch.name, ch.body, version))
                return
            db.execute(_DELETE, (ch.kind, ch.namespace, ch.name))
            db.execute(_SET_META, ("resource_version", str(version)))
            return
        # Puts only (a scheduling cycle's writes, a batch of pod reports): upserted in write order, each
        # row with its own write's version.  An object put twice ends as its last put with that put's
        # version, which is what collapsing keeps; and the newest write's puts are their objects' last
        # changes, so a row carries the newest version.  Writes of a group name each object about once
        # (a workload is written once per turn), so collapsing them would only cost a dict entry a row.
        rows = [ch + (version,) for version, changes in batches for ch in changes if type(ch) is Put]
        if len(rows) == sum([len(changes) for _, changes in batches]) and batches[-1][1]:
            db.executemany(_PUT, rows)
            return
        # Rows hold only an object's latest state, so the batches collapse to
        # the last change of each object: one row per object, puts and deletes
        # each as one executemany (the rows are bound in C).  A change is a
        # tuple (kind, namespace, name[, body]): its first three are its key,
        # and a put's row is the put and its version.
        last: dict[tuple[str, ...], tuple[int, Change]] = {}
        for version, changes in batches:
            for ch in changes:
                last[ch[:3]] = (version, ch)
        rows = [ch + (v,) for v, ch in last.values() if isinstance(ch, Put)]
        deletes = [k for k, (_, ch) in last.items() if not isinstance(ch, Put)]
        if rows:
            db.executemany(_PUT, rows)
        if deletes:
            db.executemany(_DELETE, deletes)
        newest, newest_changes = batches[-1]
        # A row carries the newest version only if a put of the newest write is its object's last change.
        if not any(isinstance(ch, Put) and last[ch[:3]][1] is ch for ch in newest_changes):
            # Only a version no row carries (the newest write deleted, or
            # deleted what was never stored) is recorded on the side: the
            # version is read back as the larger of MAX(resource_version) and this.
            db.execute(_SET_META, ("resource_version", str(newest)))

    @contextmanager
    def group(self) -> Iterator[None]:
        """One commit for every write inside (see ``Store.group``): a batch of
        agent reports costs one transaction instead of one per report.

        A write inside only takes its version and is checked; the group's
        writes are applied together, collapsed to each object's last state,
        in one transaction at the outermost group's end.
        """
        self._group_depth += 1
        try:
            yield
        finally:
            self._group_depth -= 1
            if self._group_depth == 0 and self._group_writes:
                batches = [*self._pending, *self._group_writes]
                self._group_writes = []
                try:
                    self._commit(batches, "commit of a write group")
                except StoreError:
                    # Memory already holds these writes: keep them to redo first.
                    self._pending = batches
                    raise
                self._pending = []

    def get_meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        self._db.execute(_SET_META, (key, value))

    def close(self) -> None:
        cp, self._checkpointer = self._checkpointer, None
        shm, self._shm = self._shm, None
        self._wal = False
        if cp is not None:
            cp.stop()
        if shm is not None:
            shm.close()
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
        if self._wal:
            self._wrote(len(snapshot.objects) + len(snapshot.meta))
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
