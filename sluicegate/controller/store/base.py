"""The storage interface: load everything, write atomic batches."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable


class StoreError(Exception):
    """The store could not be opened or written (read-only, I/O error, ...): nothing was changed."""


class Fenced(StoreError):
    """Another controller took the leader lease over: this one's writes are refused for good."""


class StoreFull(StoreError):
    """The store's disk is full: nothing was changed; writes succeed again once space returns."""


@dataclass(frozen=True, slots=True)
class StoredObject:
    kind: str
    namespace: str
    name: str
    # The encoded object (JSON bytes), status included.
    body: bytes
    resource_version: int


@dataclass(frozen=True, slots=True)
class Put:
    kind: str
    namespace: str
    name: str
    body: bytes


@dataclass(frozen=True, slots=True)
class Delete:
    kind: str
    namespace: str
    name: str


Change = Put | Delete


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

        Each write still gets its own resource version and is visible to
        later reads at once; only the commit is shared.  The caller must not
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


@runtime_checkable
class Fenceable(Protocol):
    """A store several controllers share: leader lease, fenced writes, a change feed for followers."""

    def set_epoch(self, epoch: int | None) -> None: ...

    def lease_connection(self, application_name: str) -> Any:
        """A new autocommit connection for the leader lease (see controller/leader.py)."""
        ...

    def load(self) -> list[StoredObject]: ...

    def changes_since(
        self, rv: int
    ) -> tuple[list[StoredObject], list[tuple[str, str, str, int]], int] | None: ...


def open_store(url: str, *, synchronous: str = "NORMAL") -> Store:
    """Open the store named by ``url``: ``sqlite:///path``, or a plain path."""
    from sluicegate.controller.store.sqlite import SqliteStore

    if url.startswith("sqlite:///"):
        return SqliteStore(url[len("sqlite:///") - 1 :], synchronous=synchronous)
    if url.startswith("sqlite://"):
        return SqliteStore(url[len("sqlite://") :], synchronous=synchronous)
    if "://" in url:
        raise StoreError(f"store url {url!r}: unsupported scheme (supported: sqlite:///PATH or a plain path)")
    return SqliteStore(url, synchronous=synchronous)
