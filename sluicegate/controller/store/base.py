"""The storage interface: load everything, write atomic batches."""

from __future__ import annotations

import re
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, runtime_checkable


class StoreError(Exception):
    """The store could not be opened or written (read-only, I/O error, ...): nothing was changed."""


class StoreFull(StoreError):
    """The store's disk is full: nothing was changed; writes succeed again once space returns."""


class Fenced(StoreError):
    """Another controller took the lead (the lease's epoch moved past ours): nothing was written, and no
    write of ours ever will be; the writes kept from failed group commits are dropped."""


@dataclass(frozen=True, slots=True)
class StoredObject:
    kind: str
    namespace: str
    name: str
    # The encoded object (JSON bytes), status included.
    body: bytes
    resource_version: int


# A change is a named tuple rather than a frozen dataclass: every write makes one per object (a workload
# is written about four times in its life), and a frozen dataclass's __init__ sets each field through
# object.__setattr__ (1.2 us a Put, against 0.25 for the tuple).
class Put(NamedTuple):
    kind: str
    namespace: str
    name: str
    body: bytes


class Delete(NamedTuple):
    kind: str
    namespace: str
    name: str


Change = Put | Delete


def check_changes(changes: Sequence[Change]) -> None:
    """Refuse what a store could not take, before anything is written (a group's commit must not fail on it)."""
    for ch in changes:
        # The common case in a few exact type tests (a write of a cycle's admissions checks a thousand);
        # anything else (subclasses included) takes the checks below, which name what is wrong.
        t = type(ch)
        if (t is Put and type(ch.body) is bytes) or t is Delete:  # type: ignore[union-attr]
            kind, namespace, name = ch.kind, ch.namespace, ch.name
            if (type(kind) is str and type(namespace) is str and type(name) is str
                    and "\x00" not in kind and "\x00" not in namespace and "\x00" not in name):
                continue
        _check_change(ch)


def _check_change(ch: Change) -> None:
    if not isinstance(ch, Put | Delete):
        raise StoreError(f"not a change: {ch!r}")
    for field, value in (("kind", ch.kind), ("namespace", ch.namespace), ("name", ch.name)):
        if not isinstance(value, str) or "\x00" in value:
            raise StoreError(f"{type(ch).__name__}.{field}: expected text without NUL, got {value!r}")
    if isinstance(ch, Put) and not isinstance(ch.body, bytes):
        got = type(ch.body).__name__
        raise StoreError(f"Put.body of {ch.kind} {ch.namespace}/{ch.name}: expected bytes, got {got}")


class Store(Protocol):
    def load(self) -> list[StoredObject]:
        """Every stored object, in insertion order."""
        ...

    def write(self, changes: Sequence[Change]) -> int:
        """Apply all changes atomically; return the new resource version.

        Durable against the process dying (kill -9) once this returns.
        """
        ...

    def group(self) -> AbstractContextManager[None]:
        """Writes made inside commit together when the outermost group ends.

        Each write still gets its own resource version, and a change the
        store could not take is refused at once; the store may apply the
        writes only at the group's end (both backends do, collapsed to each
        object's last state), so reads of the store inside a group need not
        see them.  The caller must not
        let anything that depends on those writes leave the process (a reply,
        a command to an agent, a watch event on the wire) before the group
        ends: in practice, no ``await`` inside a group.  If the body raises,
        what it wrote is still committed (the caller's memory already has
        it), then the exception goes on.  A failed commit raises StoreError;
        the store keeps the group's writes (memory already has them) and
        commits them first, in order, with their versions, at the next write
        or ``flush`` that succeeds.
        """
        ...

    def flush(self) -> None:
        """Commit writes kept from a failed group, or prove a write commits now; raises StoreError if not."""
        ...

    def get_meta(self, key: str) -> str | None: ...

    def set_meta(self, key: str, value: str) -> None: ...

    def close(self) -> None: ...


class Fenceable(Protocol):
    """A store shared by several controllers, whose writes are conditional on the leader lease's epoch."""

    def set_epoch(self, epoch: int | None) -> None:
        """Write only while the lease's epoch is ``epoch`` (None: unconditionally); re-reads the version."""
        ...

    def epoch(self) -> int | None: ...


class ChangeFeed(Protocol):
    """What a follower reads to keep its cache warm: every change after a resource version."""

    def changes_since(self, rv: int) -> tuple[list[StoredObject], list[tuple[str, str, str, int]], int] | None:
        """(live objects, tombstones (kind, namespace, name, rv), highest version seen) after ``rv``, in
        resource-version order; None when tombstones after ``rv`` were pruned (reload with ``load()``)."""
        ...

    def max_version(self) -> int: ...

    def load(self) -> list[StoredObject]: ...


@runtime_checkable
class Shared(Fenceable, ChangeFeed, Protocol):
    """A store several controllers share: fenced writes, a change feed, and the leader lease's connections."""

    def lease_connection(self, application_name: str) -> Any:
        """A new autocommit connection for the leader lease (controller/leader.py), with the store's settings."""
        ...


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A store's whole content at one instant: live objects, meta entries, and the version it reached."""

    objects: list[StoredObject]
    meta: dict[str, str]
    version: int


@runtime_checkable
class Portable(Protocol):
    """A store whose whole content can be read and replaced (``sluicegate-controller migrate``/``backup``)."""

    def snapshot(self) -> Snapshot:
        """Everything, read in one consistent transaction (writers may go on meanwhile)."""
        ...

    def counts(self) -> dict[str, int]:
        """Live objects per kind, and meta entries under the key ``"(meta)"`` when there are any."""
        ...

    def replace_all(self, snapshot: Snapshot) -> None:
        """Make the store hold exactly ``snapshot`` (bodies and versions as they are), in one transaction."""
        ...

    def close(self) -> None: ...


# Meta entries a store keeps about itself: never copied from one store to another.
INTERNAL_META = frozenset({"schema_version", "tombstones_pruned_to", "resource_version"})

POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def sqlite_path(url: str) -> str | None:
    """The file of a SQLite store url (``sqlite:///abs``, ``sqlite://rel``, ``sqlite:PATH``, a plain path), or None."""
    for prefix, keep in (("sqlite:///", 1), ("sqlite://", 0), ("sqlite:", 0)):
        if url.startswith(prefix):
            return url[len(prefix) - keep :]
    return None if "://" in url else url


def open_store(url: str, *, synchronous: str = "NORMAL", password_file: str | None = None) -> Store:
    """Open the store named by ``url``: ``postgresql://...`` (libpq's URL, TLS and all), or SQLite:
    ``sqlite:///path``, ``sqlite:PATH`` or a plain path.  ``password_file`` (the setting
    ``storePasswordFile``) holds PostgreSQL's password, readable by its owner only."""
    if url.startswith(POSTGRES_SCHEMES):
        try:
            from sluicegate.controller.store.postgres import PostgresStore
        except ImportError as exc:
            raise StoreError(
                f"store {redact(url)}: PostgreSQL needs psycopg ({exc}): pip install 'sluicegate[postgresql]'"
            ) from exc
        return PostgresStore(url, synchronous=synchronous, password_file=password_file)
    path = sqlite_path(url)
    if path is None:
        raise StoreError(
            f"store url {redact(url)!r}: unsupported scheme "
            "(supported: postgresql://..., sqlite:///PATH, sqlite:PATH or a plain path)"
        )
    from sluicegate.controller.store.sqlite import SqliteStore

    return SqliteStore(path, synchronous=synchronous)


def redact(url: str) -> str:
    """``url`` without the password it may carry (``user:PASSWORD@`` or ``password=``), for messages and logs."""
    url = re.sub(r"(?<=://)([^/@:?]*):[^/@?]*@", r"\1:***@", url)
    return re.sub(r"(?i)(\bpassword=)[^&\s]*", r"\1***", url)
