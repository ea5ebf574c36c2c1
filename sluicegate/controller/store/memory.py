"""An in-memory store: for ``sluicectl simulate`` and tests, never for a real controller."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from sluicegate.controller.store.base import Change, Delete, Put, StoredObject


class MemoryStore:
    def __init__(self) -> None:
        self._objects: dict[tuple[str, str, str], StoredObject] = {}
        self._meta: dict[str, str] = {}
        self._version = 0

    def load(self) -> list[StoredObject]:
        return sorted(self._objects.values(), key=lambda o: o.resource_version)

    def write(self, changes: Sequence[Change]) -> int:
        if not changes:
            return self._version
        self._version += 1
        for ch in changes:
            key = (ch.kind, ch.namespace, ch.name)
            if isinstance(ch, Put):
                self._objects[key] = StoredObject(ch.kind, ch.namespace, ch.name, ch.body, self._version)
            elif isinstance(ch, Delete):
                self._objects.pop(key, None)
        return self._version

    @contextmanager
    def group(self) -> Iterator[None]:
        # Every write is already final in memory.
        yield

    def flush(self) -> None:
        pass

    def get_meta(self, key: str) -> str | None:
        return self._meta.get(key)

    def set_meta(self, key: str, value: str) -> None:
        self._meta[key] = value

    def close(self) -> None:
        self._objects.clear()
