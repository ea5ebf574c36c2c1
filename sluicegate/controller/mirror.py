"""A follower's warm copy of the store, so that a takeover does not reload from nothing.

A follower polls the store's change feed (objects and tombstones newer than
the version it has) and keeps every live object decoded, as the leader's
``Manager.load`` would.  On takeover the new leader catches up once more
(the last few changes) and builds its Manager from these objects: the cost
of a takeover is the change since the last poll plus building the queues,
not reading and decoding every stored object.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sluicegate.controller.objects import decode_stored
from sluicegate.controller.store import ChangeFeed, StoredObject

Ref = tuple[str, str, str]


class Mirror:
    """Decoded live objects with their resource versions, kept in step with a change feed."""

    def __init__(self) -> None:
        self.objects: dict[Ref, tuple[Any, int]] = {}
        self.version = 0
        self.loaded = False
        self.reloads = 0

    def catch_up(self, feed: ChangeFeed) -> int:
        """Apply what changed since the last call; returns how many objects changed."""
        if not self.loaded:
            return self._reload(feed)
        got = feed.changes_since(self.version)
        if got is None:  # tombstones we needed were pruned: start over
            return self._reload(feed)
        live, deleted, top = got
        for ref_kind, ns, name, rv in deleted:
            self.objects.pop((ref_kind, ns, name), None)
            self.version = max(self.version, rv)
        self._put(live)
        self.version = max(self.version, top)
        return len(live) + len(deleted)

    def _reload(self, feed: ChangeFeed) -> int:
        rows = feed.load()
        self.objects.clear()
        self._put(rows)
        self.version = max([self.version, *(r.resource_version for r in rows)])
        self.loaded = True
        self.reloads += 1
        return len(rows)

    def _put(self, rows: Sequence[StoredObject]) -> None:
        for stored in rows:
            ref = (stored.kind, stored.namespace, stored.name)
            obj = decode_stored(stored)
            if obj is None:
                self.objects.pop(ref, None)
                continue
            self.objects[ref] = (obj, stored.resource_version)
            self.version = max(self.version, stored.resource_version)

    def take(self) -> list[tuple[Any, int]]:
        """Hand the decoded objects over (the mirror forgets them: the Manager owns them now)."""
        out = sorted(self.objects.values(), key=lambda o: o[1])
        self.objects = {}
        self.loaded = False
        self.version = 0
        return out
