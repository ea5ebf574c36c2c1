"""Durable storage of every object, behind one small interface.

The controller writes before it acts: an admission, eviction or completion
is committed here before any agent hears of it, and after a crash the whole
state is rebuilt from what is stored.  ``open_store(url)`` picks the
backend: a path, ``sqlite:PATH`` or ``sqlite:///path`` for the embedded
default; ``postgresql://...`` for PostgreSQL (``postgres.py``), which
several controllers may share: its writes are fenced by the leader lease's
epoch (``Fenceable``) and followers read its changes (``ChangeFeed``).
Both backends create and migrate their schema themselves (``migrations.py``).
"""

from sluicegate.controller.store.base import (
    Change,
    ChangeFeed,
    Delete,
    Fenceable,
    Fenced,
    Portable,
    Put,
    Shared,
    Snapshot,
    Store,
    StoredObject,
    StoreError,
    StoreFull,
    open_store,
)

__all__ = [
    "Change",
    "ChangeFeed",
    "Delete",
    "Fenceable",
    "Fenced",
    "Portable",
    "Put",
    "Shared",
    "Snapshot",
    "Store",
    "StoreError",
    "StoreFull",
    "StoredObject",
    "open_store",
]
