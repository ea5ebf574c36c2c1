"""Watchers of workloads: who is watching what, and the events each is sent.

Events are queued by :meth:`Watchers.publish`, which the committer calls last,
after the store, the cache and the agents: a watcher never hears of a change
that did not survive the store write.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Collection, Iterable
from dataclasses import dataclass

from sluicegate.controller.errors import FailedPrecondition
from sluicegate.manifest.encode import EncodedObject
from sluicegate.model.workloads import Workload

# A watcher further behind than this is ended (it must start a new watch).
WATCH_QUEUE_SIZE = 100_000


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: str  # ADDED | MODIFIED | DELETED
    workload: Workload
    resource_version: int
    # The workload as stored by the write this event reports (encoded once, by
    # that write): watchers send it without encoding the workload again.
    encoded: EncodedObject


class Watcher:
    def __init__(self, namespace: str, name: str, namespaces: Collection[str] | None = None) -> None:
        self.namespace = namespace
        self.name = name
        # None: every namespace; else only these (what the watching caller may see).
        self.namespaces = namespaces
        self.queue: asyncio.Queue[WatchEvent | None] = asyncio.Queue(maxsize=WATCH_QUEUE_SIZE)
        self.overflowed = False

    def wants(self, wl: Workload) -> bool:
        return ((not self.namespace or wl.namespace == self.namespace) and (not self.name or wl.name == self.name)
                and (self.namespaces is None or wl.namespace in self.namespaces))


class Watchers:
    def __init__(self) -> None:
        self._all: list[Watcher] = []

    def __bool__(self) -> bool:
        return bool(self._all)

    def publish(self, type_: str, wl: Workload, event: Callable[[str, Workload], WatchEvent]) -> None:
        """Queue one event for every watcher that wants it (``event`` builds it once, only if one does)."""
        ev: WatchEvent | None = None
        for w in self._all:
            if w.overflowed or not w.wants(wl):
                continue
            if ev is None:
                ev = event(type_, wl)
            try:
                w.queue.put_nowait(ev)
            except asyncio.QueueFull:
                w.overflowed = True
                w.queue.get_nowait()
                w.queue.put_nowait(None)

    async def stream(
        self, w: Watcher, initial: Iterable[WatchEvent], *, max_batch: int,
    ) -> AsyncIterator[list[WatchEvent]]:
        """The watcher's events in order, as lists of up to ``max_batch``: whatever is waiting, never held back."""
        for ev in initial:
            w.queue.put_nowait(ev)
        self._all.append(w)
        try:
            while True:
                batch = [await w.queue.get()]
                while len(batch) < max_batch and not w.queue.empty():
                    batch.append(w.queue.get_nowait())
                events = [ev for ev in batch if ev is not None]
                if events:
                    yield events
                if len(events) < len(batch):
                    raise FailedPrecondition(
                        f"watch fell behind by more than {WATCH_QUEUE_SIZE} events; start a new watch")
        finally:
            self._all.remove(w)
