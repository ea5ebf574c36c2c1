"""Garbage collection for a daemon whose heap is its state.

CPython's cyclic collector runs a full collection whenever the objects that
survived the young generations have grown by a quarter since the last one,
and a full collection walks every tracked object.  The controller keeps every
workload, queue and node in memory, so while its state grows each full
collection walks all of it again: replaying Kueue's large-scale test (50,000
workloads) the controller spent 11.8 s of its 59 s of CPU in 29 full
collections, each pausing the event loop for about 0.4 s.

``install`` freezes the survivors of each full collection (``gc.freeze``):
later collections skip them, so the state is walked about once instead of
again at every quarter of growth.  A frozen object that dies is still freed
by reference counting; only a reference cycle among frozen objects would
outlive its use, so ``rescans`` unfreezes everything and collects once in a
while.  The young generation's threshold goes from 700 allocations to
10,000: a scheduling cycle allocates thousands of short-lived objects, and
each young collection walks every object allocated since the last.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from typing import Final

log = logging.getLogger(__name__)

YOUNG_THRESHOLD: Final = 10_000
# How often everything is unfrozen and collected (see the module docstring).
RESCAN_SECONDS: Final = 3600.0


class HeapGc:
    """The policy above, and what the full collections cost (for metrics)."""

    def __init__(self) -> None:
        self.installed = False
        self.full_collections = 0
        self.full_seconds = 0.0
        self._started = 0.0
        self._previous_threshold: tuple[int, int, int] | None = None

    def install(self) -> None:
        if self.installed:
            return
        self._previous_threshold = gc.get_threshold()
        gc.set_threshold(YOUNG_THRESHOLD, self._previous_threshold[1], self._previous_threshold[2])
        gc.callbacks.append(self._callback)
        self.installed = True

    def uninstall(self) -> None:
        """Back to CPython's defaults as they were; frozen objects are unfrozen."""
        if not self.installed:
            return
        gc.callbacks.remove(self._callback)
        if self._previous_threshold is not None:
            gc.set_threshold(*self._previous_threshold)
        gc.unfreeze()
        self.installed = False

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._started = time.perf_counter()
            return
        self.full_collections += 1
        self.full_seconds += time.perf_counter() - self._started
        # Only survivors are left in the collector's lists now.
        gc.freeze()

    def rescan(self) -> int:
        """Unfreeze everything and collect it once; the survivors are frozen again.  Returns what was freed."""
        gc.unfreeze()
        freed = gc.collect()
        log.debug("full rescan: %d unreachable objects freed, %d frozen", freed, gc.get_freeze_count())
        return freed

    async def rescans(self, *, interval: float = RESCAN_SECONDS) -> None:
        """Rescan every ``interval`` seconds while installed; runs until cancelled."""
        while True:
            await asyncio.sleep(interval)  # a period, not synchronisation
            if self.installed:
                self.rescan()


HEAP_GC: Final = HeapGc()
