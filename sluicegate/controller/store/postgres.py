"""PostgreSQL backend (psycopg 3, synchronous: the Store interface is called from the event loop's thread).

Several controllers may share one database; one leads (the lease row in
``sluicegate_lease``, kept by ``controller/leader.py``) and the others
follow its writes through ``changes_since``.  Two things make that safe:

- **Fencing.** With an epoch set (``set_epoch``), every write transaction
  first takes the lease row ``FOR SHARE`` and compares its epoch with ours.
  A takeover must update that row, so it waits for a write already past the
  check to commit, and every write after it sees the new epoch and is
  refused (``Fenced``): a paused or partitioned old leader can never write
  after a new one took over.
- **Tombstones.** A delete leaves its row with no body and the delete's
  resource version, so a follower reading "everything after version N"
  sees deletions too.  Tombstones are pruned after ``tombstone_retention``
  (inside a normal write, at most once per ``prune_interval``); the highest
  pruned version is kept in meta ``tombstones_pruned_to``, and a follower
  that is further behind than that reloads everything.

Writes are batched as SQLite's are: inside ``group()`` they are kept in
memory (each with its own version) and committed in one transaction at the
end of the outermost group, one multi-row statement per kind of change.
A connection that breaks (server restart, network) fails the call with
StoreError and is opened again by the next call.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext

import psycopg
from psycopg import conninfo, pq

from sluicegate.controller.store.base import (
    INTERNAL_META,
    Change,
    Fenced,
    Put,
    Snapshot,
    StoredObject,
    StoreError,
    StoreFull,
    check_changes,
    redact,
)
from sluicegate.controller.store.migrations import POSTGRES_STEPS, latest, to_apply

# Connection parameters the URL may override.  A dead database (host gone,
# network cut) must fail a call in seconds, not after the kernel's default
# of about 15 minutes of TCP retransmissions: the controller then degrades
# (readyz 503) and a follower can take over.
CONNECT_DEFAULTS = {
    "connect_timeout": "3",
    "keepalives": "1",
    "keepalives_idle": "5",
    "keepalives_interval": "2",
    "keepalives_count": "3",
    # Milliseconds unacknowledged data may wait: a write to a vanished server fails after this.
    "tcp_user_timeout": "9000",
    "application_name": "sluicegate-controller",
}

# SQLite's settings mapped onto PostgreSQL's commit durability.  PostgreSQL's
# own default (on: a commit is flushed to the server's WAL) already survives
# what NORMAL, FULL and EXTRA promise; OFF lets the server acknowledge before
# its WAL flush (a server crash may lose the last moments; the controller's
# crash loses nothing).
SYNCHRONOUS_COMMIT = {"OFF": "off", "NORMAL": "on", "FULL": "on", "EXTRA": "on"}

# Tombstones are kept this long (seconds), so that followers polling every
# second or so see every deletion; one that falls further behind reloads.
TOMBSTONE_RETENTION = 15 * 60.0
PRUNE_INTERVAL = 60.0

# pg_advisory_xact_lock key under which the schema is created and migrated.
SCHEMA_LOCK = 0x5119_CE6A_7E00_0001

_UPSERT_PUTS = (
    "INSERT INTO sluicegate_objects AS o (kind, namespace, name, body, resource_version, deleted_at) "
    "SELECT k, ns, n, b, rv, NULL FROM unnest(%s::text[], %s::text[], %s::text[], %b::bytea[], %s::bigint[]) "
    "AS u(k, ns, n, b, rv) "
    "ON CONFLICT (kind, namespace, name) DO UPDATE "
    "SET body = excluded.body, resource_version = excluded.resource_version, deleted_at = NULL"
)
# A delete turns a live row into a tombstone; an object that was never
# stored (or is already deleted) needs none.
_TOMBSTONE = (
    "UPDATE sluicegate_objects AS o SET body = NULL, resource_version = u.rv, deleted_at = now() "
    "FROM unnest(%s::text[], %s::text[], %s::text[], %s::bigint[]) AS u(k, ns, n, rv) "
    "WHERE o.kind = u.k AND o.namespace = u.ns AND o.name = u.n AND o.body IS NOT NULL"
)
_SET_META = (
    "INSERT INTO sluicegate_meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)
_VERSION = (
    "SELECT GREATEST((SELECT COALESCE(MAX(resource_version), 0) FROM sluicegate_objects), "
    "(SELECT COALESCE(MAX(value::bigint), 0) FROM sluicegate_meta "
    "WHERE key IN ('resource_version', 'tombstones_pruned_to')))"
)
_CHANGES = (
    "SELECT p.pruned, o.kind, o.namespace, o.name, o.body, o.resource_version "
    "FROM (SELECT COALESCE(MAX(value::bigint), 0) AS pruned FROM sluicegate_meta "
    "WHERE key = 'tombstones_pruned_to') AS p "
    "LEFT JOIN LATERAL (SELECT kind, namespace, name, body, resource_version FROM sluicegate_objects "
    "WHERE resource_version > %s) AS o ON true ORDER BY o.resource_version"
)
# Deletes the old tombstones and remembers the highest version among them, in one statement.
_PRUNE = (
    "WITH gone AS (DELETE FROM sluicegate_objects WHERE body IS NULL "
    "AND deleted_at < now() - make_interval(secs => %s) RETURNING resource_version) "
    "INSERT INTO sluicegate_meta (key, value) SELECT 'tombstones_pruned_to', MAX(resource_version)::text FROM gone "
    "HAVING MAX(resource_version) IS NOT NULL ON CONFLICT (key) DO UPDATE "
    "SET value = GREATEST(sluicegate_meta.value::bigint, excluded.value::bigint)::text"
)

# SQLSTATE classes after which the connection is not to be trusted: opened again by the next call.
_RECONNECT_CLASSES = ("08", "57")  # connection exceptions; operator intervention (shutdown, crash)
_READ_ONLY = "25006"  # a standby (after a failover the URL may name another server now)
_DISK_FULL = "53100"


def read_password_file(path: str) -> str:
    """The password in ``path`` (setting ``storePasswordFile``), stripped; refused if others may read it."""
    try:
        st = os.stat(path)
        if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise StoreError(
                f"storePasswordFile {path}: readable by group or others (mode {stat.filemode(st.st_mode)}); "
                f"it holds the database password: chmod 600 {path}"
            )
        with open(path, encoding="utf-8") as f:
            password = f.read().strip()
    except OSError as exc:
        raise StoreError(f"storePasswordFile {path}: {exc.strerror or exc}") from exc
    if not password:
        raise StoreError(f"storePasswordFile {path}: empty")
    return password


class PostgresStore:
    def __init__(
        self,
        url: str,
        *,
        synchronous: str = "NORMAL",
        password_file: str | None = None,
        tombstone_retention: float = TOMBSTONE_RETENTION,
        prune_interval: float = PRUNE_INTERVAL,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if synchronous not in SYNCHRONOUS_COMMIT:
            raise StoreError(f"storeSynchronous={synchronous!r}: expected NORMAL, FULL, EXTRA or OFF")
        self.where = redact(url)
        try:
            params = conninfo.conninfo_to_dict(url)
        except psycopg.Error as exc:
            raise StoreError(f"store {self.where}: not a PostgreSQL URL: {exc}") from exc
        for key, value in CONNECT_DEFAULTS.items():
            params.setdefault(key, value)
        if password_file:
            params["password"] = read_password_file(password_file)
        self._conninfo = conninfo.make_conninfo("", **params)
        self._synchronous_commit = SYNCHRONOUS_COMMIT[synchronous]
        self.tombstone_retention = tombstone_retention
        self.prune_interval = prune_interval
        self._monotonic = monotonic
        self._next_prune = 0.0
        self._conn: psycopg.Connection[tuple[object, ...]] | None = None
        self._epoch: int | None = None
        self._group_depth = 0
        # (version, changes) of each write of the open group, committed at its end.
        self._group_writes: list[tuple[int, Sequence[Change]]] = []
        # Writes whose group commit failed: memory holds them, so the next
        # transaction redoes them first, with their own versions.
        self._pending: list[tuple[int, Sequence[Change]]] = []
        try:
            self._migrate()
            self._version = self.max_version()
        except BaseException:
            self.close()
            raise

    # -- connection and transactions ------------------------------------------------------------

    def _connection(self) -> psycopg.Connection[tuple[object, ...]]:
        conn = self._conn
        if conn is not None and not conn.closed:
            return conn
        self._conn = None
        try:
            conn = psycopg.connect(self._conninfo, autocommit=True)
            if self._synchronous_commit != "on":
                conn.execute(b"SET synchronous_commit = off")
        except psycopg.Error as exc:
            raise self._error("connecting", exc) from exc
        self._conn = conn
        return conn

    def lease_connection(self, application_name: str) -> psycopg.Connection[tuple[object, ...]]:
        """A separate autocommit connection for the leader lease (controller/leader.py), named so that
        followers can see in pg_stat_activity whether the lease holder's process is still there."""
        params = conninfo.conninfo_to_dict(self._conninfo)
        params["application_name"] = application_name
        conn = psycopg.connect(conninfo.make_conninfo("", **params), autocommit=True)
        conn.execute(b"SET statement_timeout = '5s'")
        return conn

    def _error(self, what: str, exc: psycopg.Error) -> StoreError:
        state = exc.sqlstate or ""
        conn = self._conn
        if conn is not None and (conn.broken or state.startswith(_RECONNECT_CLASSES) or state == _READ_ONLY):
            conn.close()  # the next call connects again
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if state:
            detail = f"{detail} (SQLSTATE {state})"
        message = f"store {self.where}: {what} failed: {detail}"
        return StoreFull(message) if state == _DISK_FULL else StoreError(message)

    @contextmanager
    def _transaction(
        self, what: str, *, begin: bytes = b"BEGIN", fenced: bool = True, pipeline: bool = False
    ) -> Iterator[psycopg.Cursor[tuple[object, ...]]]:
        """One transaction on the connection (opened again if it broke); fenced when an epoch is set.

        With ``pipeline`` the statements travel together (psycopg's pipeline
        mode): the lease check, the writes and the COMMIT cost two round trips
        instead of one each; the check's answer is read before COMMIT is sent.
        """
        conn = self._connection()
        epoch = self._epoch if fenced else None
        try:
            try:
                with conn.pipeline() if pipeline else nullcontext():
                    cur = conn.cursor()
                    cur.execute(begin)
                    check = None
                    if epoch is not None:
                        # FOR SHARE: a takeover (an UPDATE of this row) waits until this transaction ends.
                        check = conn.cursor()
                        check.execute(b"SELECT epoch FROM sluicegate_lease WHERE name = 'leader' FOR SHARE")
                    yield cur
                    if check is not None and epoch is not None:
                        row = check.fetchone()
                        self._check_epoch(None if row is None else row[0], epoch)
                    cur.execute(b"COMMIT")
            except BaseException:
                self._rollback(conn)
                raise
        except psycopg.Error as exc:
            raise self._error(what, exc) from exc

    @staticmethod
    def _rollback(conn: psycopg.Connection[tuple[object, ...]]) -> None:
        try:
            if not conn.closed and conn.info.transaction_status != pq.TransactionStatus.IDLE:
                conn.execute(b"ROLLBACK")
        except psycopg.Error:
            pass  # the first error is the one that tells what happened

    def _check_epoch(self, current: object, ours: int) -> None:
        if current != ours:
            raise Fenced(
                f"store {self.where}: another controller leads now (epoch {current}, ours {ours}): nothing written"
            )

    def _migrate(self) -> None:
        """Create or upgrade the schema (migrations.py), one controller at a time."""
        with self._transaction("creating or migrating the schema", fenced=False) as cur:
            cur.execute(b"SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
            current = 0
            row = cur.execute(b"SELECT to_regclass('sluicegate_meta') IS NOT NULL").fetchone()
            if row is not None and row[0]:
                found = cur.execute(b"SELECT value FROM sluicegate_meta WHERE key = 'schema_version'").fetchone()
                current = _int(found[0]) if found else 0
            steps = to_apply(current, POSTGRES_STEPS, where=self.where)
            for step in steps:
                for statement in step.statements:
                    cur.execute(statement.encode())
            if steps:
                cur.execute(_SET_META.encode(), ("schema_version", str(latest(POSTGRES_STEPS))))

    def schema_version(self) -> int:
        return int(self.get_meta("schema_version") or 0)

    # -- reads --------------------------------------------------------------------------------

    def _query(self, what: str, sql: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
        conn = self._connection()
        try:
            # Binary results: bodies arrive as bytes without hex decoding.
            return conn.cursor(binary=True).execute(sql.encode(), params).fetchall()
        except psycopg.Error as exc:
            self._rollback(conn)
            raise self._error(what, exc) from exc

    def load(self) -> list[StoredObject]:
        rows = self._query(
            "load",
            "SELECT kind, namespace, name, body, resource_version FROM sluicegate_objects "
            "WHERE body IS NOT NULL ORDER BY resource_version",
        )
        return [_stored(row) for row in rows]

    def max_version(self) -> int:
        (row,) = self._query("reading the resource version", _VERSION)
        return _int(row[0])

    def changes_since(self, rv: int) -> tuple[list[StoredObject], list[tuple[str, str, str, int]], int] | None:
        # One statement, so the pruning mark and the rows come from one snapshot.
        rows = self._query("reading changes", _CHANGES, (rv,))
        if _int(rows[0][0]) > rv:
            return None  # tombstones after rv are gone: the caller reloads
        live: list[StoredObject] = []
        tombstones: list[tuple[str, str, str, int]] = []
        highest = rv
        for row in rows:
            if row[5] is None:
                continue  # nothing changed (the outer join's empty row)
            _, kind, namespace, name, body, version = row
            highest = _int(version)
            if body is None:
                tombstones.append((str(kind), str(namespace), str(name), highest))
            else:
                live.append(_stored(row[1:]))
        return live, tombstones, highest

    def get_meta(self, key: str) -> str | None:
        rows = self._query("reading meta", "SELECT value FROM sluicegate_meta WHERE key = %s", (key,))
        return None if not rows else str(rows[0][0])

    # -- fencing ------------------------------------------------------------------------------

    def set_epoch(self, epoch: int | None) -> None:
        """Write only while the lease row's epoch is ``epoch`` (None: always).  Re-reads the resource
        version: another leader may have advanced it.  Writes kept from a failed group commit under
        another epoch are dropped: another leader may have written since, and they were never acknowledged."""
        version = self.max_version()
        if epoch != self._epoch:
            self._pending = []
        self._epoch = epoch
        # Our own pending writes (same epoch) hold versions the database has not seen yet.
        self._version = max(version, self._pending[-1][0]) if self._pending else version

    def epoch(self) -> int | None:
        return self._epoch

    # -- writes -------------------------------------------------------------------------------

    def write(self, changes: Sequence[Change]) -> int:
        if not changes:
            return self._version
        check_changes(changes)
        version = self._version + 1
        if self._group_depth > 0:
            self._group_writes.append((version, changes))
        else:
            try:
                self._commit([*self._pending, (version, changes)], f"write of {len(changes)} change(s)")
            except StoreError:
                if self._conn is None or self._conn.closed:
                    # The connection went while the write was under way: its COMMIT may have
                    # reached the server.  Never give that version to another write.
                    self._version = version
                raise
            self._pending = []
        self._version = version
        return version

    def _commit(self, batches: Sequence[tuple[int, Sequence[Change]]], what: str, *, probe: bool = False) -> None:
        try:
            with self._transaction(what, pipeline=True) as cur:
                self._apply(cur, batches)
                if probe:
                    # A real write, so success means the database takes data again.
                    cur.execute(_SET_META.encode(), ("resource_version", str(self._version)))
                self._prune(cur)
        except Fenced:
            self._pending = []  # they can never be written
            raise

    def _apply(self, cur: psycopg.Cursor[tuple[object, ...]], batches: Sequence[tuple[int, Sequence[Change]]]) -> None:
        if not batches:
            return
        # Rows hold only an object's latest state, so the batches collapse to
        # the last change of each object: one row per object per statement.
        last: dict[tuple[str, str, str], tuple[int, bytes | None]] = {}
        for version, changes in batches:
            for ch in changes:
                last[(ch.kind, ch.namespace, ch.name)] = (version, ch.body if isinstance(ch, Put) else None)
        puts = [(k, v, b) for k, (v, b) in last.items() if b is not None]
        deletes = [(k, v) for k, (v, b) in last.items() if b is None]
        if puts:
            cur.execute(
                _UPSERT_PUTS.encode(),
                (
                    [k[0] for k, _, _ in puts],
                    [k[1] for k, _, _ in puts],
                    [k[2] for k, _, _ in puts],
                    [b for _, _, b in puts],
                    [v for _, v, _ in puts],
                ),
            )
        if deletes:
            cur.execute(
                _TOMBSTONE.encode(),
                (
                    [k[0] for k, _ in deletes],
                    [k[1] for k, _ in deletes],
                    [k[2] for k, _ in deletes],
                    [v for _, v in deletes],
                ),
            )
        newest = batches[-1][0]
        if not any(v == newest for _, v, _ in puts):
            # The newest version may be on no row (deletes of objects never
            # stored): keep it on the side, as SQLite does for delete batches.
            cur.execute(_SET_META.encode(), ("resource_version", str(newest)))

    def _prune(self, cur: psycopg.Cursor[tuple[object, ...]]) -> None:
        now = self._monotonic()
        if now < self._next_prune:
            return
        self._next_prune = now + self.prune_interval
        cur.execute(_PRUNE.encode(), (self.tombstone_retention,))

    @property
    def pending(self) -> int:
        """How many writes memory holds that no commit has stored yet (from failed group commits)."""
        return len(self._pending)

    @contextmanager
    def group(self) -> Iterator[None]:
        """One transaction for every write inside (see ``Store.group``)."""
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
                except Fenced:
                    raise
                except StoreError:
                    self._pending = batches  # memory already holds these writes: redo them first
                    raise
                self._pending = []

    def flush(self) -> None:
        if self._group_depth > 0:
            return
        self._commit(self._pending, "probe write", probe=True)
        self._pending = []

    def set_meta(self, key: str, value: str) -> None:
        with self._transaction(f"setting meta {key}", pipeline=True) as cur:
            cur.execute(_SET_META.encode(), (key, value))

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # -- moving data (sluicegate-controller migrate / backup) ------------------------------------

    def snapshot(self) -> Snapshot:
        with self._transaction(
            "reading a snapshot", begin=b"BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY", fenced=False
        ) as cur:
            cur = cur.connection.cursor(binary=True)
            rows = cur.execute(
                b"SELECT kind, namespace, name, body, resource_version FROM sluicegate_objects "
                b"WHERE body IS NOT NULL ORDER BY resource_version"
            ).fetchall()
            meta = {str(k): str(v) for k, v in cur.execute(b"SELECT key, value FROM sluicegate_meta").fetchall()}
            (version,) = cur.execute(_VERSION.encode()).fetchall()[0]
        return Snapshot(
            [_stored(row) for row in rows],
            {k: v for k, v in meta.items() if k not in INTERNAL_META},
            _int(version),
        )

    def counts(self) -> dict[str, int]:
        out = {
            str(k): _int(n)
            for k, n in self._query(
                "counting", "SELECT kind, COUNT(*) FROM sluicegate_objects WHERE body IS NOT NULL GROUP BY kind"
            )
        }
        (meta,) = self._query(
            "counting", "SELECT COUNT(*) FROM sluicegate_meta WHERE NOT (key = ANY(%s))", (list(INTERNAL_META),)
        )
        if _int(meta[0]):
            out["(meta)"] = _int(meta[0])
        return out

    def replace_all(self, snapshot: Snapshot) -> None:
        with self._transaction("replacing the content") as cur:
            cur.execute(b"DELETE FROM sluicegate_objects")
            cur.execute(b"DELETE FROM sluicegate_meta WHERE key <> 'schema_version'")
            with cur.copy(
                b"COPY sluicegate_objects (kind, namespace, name, body, resource_version) FROM STDIN"
            ) as copy:
                for o in snapshot.objects:
                    copy.write_row((o.kind, o.namespace, o.name, o.body, o.resource_version))
            meta = {k: v for k, v in snapshot.meta.items() if k not in INTERNAL_META}
            meta["resource_version"] = str(snapshot.version)
            # Whatever a follower had read before belongs to another history: make it reload.
            meta["tombstones_pruned_to"] = str(snapshot.version)
            cur.executemany(_SET_META.encode(), list(meta.items()))
        self._version = snapshot.version
        self._pending = []


def _stored(row: Sequence[object]) -> StoredObject:
    kind, namespace, name, body, version = row
    assert isinstance(body, bytes | memoryview)
    return StoredObject(str(kind), str(namespace), str(name), bytes(body), _int(version))


def _int(value: object) -> int:
    return value if isinstance(value, int) else int(str(value))
