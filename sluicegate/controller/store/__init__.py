"""Durable storage of every object, behind one small interface.

The controller writes before it acts: an admission, eviction or completion
is committed here before any agent hears of it, and after a crash the whole
state is rebuilt from what is stored.  ``open_store(url)`` picks the
backend: a path or ``sqlite:///path`` for the embedded default.
"""

from sluicegate.controller.store.base import (
    Change,
    Delete,
    Fenceable,
    Fenced,
    Put,
    Store,
    StoredObject,
    StoreError,
    StoreFull,
    open_store,
)

__all__ = [
    "Change", "Delete", "Fenceable", "Fenced", "Put", "Store", "StoreError", "StoreFull", "StoredObject", "open_store",
]
