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

A scheduling cycle runs with the collector off, and what is alive when it
ends is almost all state: the workloads it admitted, their records and
encodings.  ``after_burst`` freezes it there, so young and middle
collections no longer walk and promote it (the large-scale replay: 1.6-1.7 s
of the loop's ~21 s in about 265 collections, the longest 381 ms, before;
0.10-0.16 s, the longest 26 ms, after).  The
cost is the same as for the survivors of a full collection, only sooner: a
reference cycle that dies while frozen waits for a rescan.  The controller
makes very few: over that whole replay (50,000 workloads) its collections
found 1,990 objects in unreachable cycles.  A rescan runs every hour, and
sooner when the frozen heap has grown by more than it held after the last
rescan and by at least ``RESCAN_GROWTH`` objects (checked every
``GROWTH_CHECK_SECONDS``): garbage the controller did not expect to make
can then at most double the heap before it is found.
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
# How often the frozen heap's size is read (a walk of its list: milliseconds at a million objects), and
# the least growth since the last rescan that brings the next one forward.
GROWTH_CHECK_SECONDS: Final = 60.0
RESCAN_GROWTH: Final = 1_000_000


class HeapGc:
    """The policy above, and what the full collections cost (for metrics)."""

    def __init__(self) -> None:
        self.installed = False
        self.full_collections = 0
        self.full_seconds = 0.0
        self._started = 0.0
        self._previous_threshold: tuple[int, int, int] | None = None
        # Objects frozen after the last rescan (or install), the base of the growth that brings one forward.
        self.frozen_at_rescan = 0
        self.rescans_total = 0

    def install(self) -> None:
        if self.installed:
            return
        self._previous_threshold = gc.get_threshold()
        gc.set_threshold(YOUNG_THRESHOLD, self._previous_threshold[1], self._previous_threshold[2])
        gc.callbacks.append(self._callback)
        self.frozen_at_rescan = gc.get_freeze_count()
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

    def after_burst(self) -> None:
        """A burst of work that ran with the collector off (a scheduling cycle) has ended: what it left
        alive is state, frozen here rather than walked by the next collections (see the module docstring)."""
        if self.installed:
            gc.freeze()

    def grown(self) -> bool:
        """Whether the frozen heap has grown enough since the last rescan to rescan now."""
        frozen = gc.get_freeze_count()
        return frozen - self.frozen_at_rescan > max(RESCAN_GROWTH, self.frozen_at_rescan)

    def rescan(self) -> int:
        """Unfreeze everything and collect it once; the survivors are frozen again.  Returns what was freed."""
        gc.unfreeze()
        freed = gc.collect()
        self.frozen_at_rescan = gc.get_freeze_count()
        self.rescans_total += 1
        log.debug("full rescan: %d unreachable objects freed, %d frozen", freed, gc.get_freeze_count())
        return freed

    async def rescans(self, *, interval: float = RESCAN_SECONDS, check: float = GROWTH_CHECK_SECONDS) -> None:
        """Rescan every ``interval`` seconds while installed, or at a growth check (every ``check``
        seconds) that finds the frozen heap grown enough; runs until cancelled."""
        loop = asyncio.get_running_loop()
        due = loop.time() + interval
        while True:
            await asyncio.sleep(max(0.0, min(check, due - loop.time())))  # a period, not synchronisation
            if not self.installed:
                continue
            if loop.time() >= due or self.grown():
                self.rescan()
                due = loop.time() + interval


HEAP_GC: Final = HeapGc()
