"""Debug switches: where the controller's memory goes at its peak.

``SLUICEGATE_TRACEMALLOC=FILE``: the controller traces allocations
(tracemalloc, 4 frames; slow: a debugging aid, not for production) and, each
time the traced size grows past the largest seen by a fifth, writes that
heap's top allocation sites, grouped by traceback, to FILE (replacing the
last).

``SLUICEGATE_CENSUS=FILE``: no tracing; each time the resident set grows past
the largest seen by a fifth, FILE gets a census of the objects the garbage
collector tracks, by type: how many, and their own sizes (``sys.getsizeof``;
strings and numbers, which it does not track, show only through their holders'
counts).  Cheap enough to leave on for a whole bench run.

Unset, nothing is started.
"""

from __future__ import annotations

import atexit
import collections
import gc
import os
import resource
import sys
import threading
import tracemalloc
from collections.abc import Callable

ENV = "SLUICEGATE_TRACEMALLOC"
CENSUS_ENV = "SLUICEGATE_CENSUS"
_FRAMES = 4
_EVERY_S = 5.0
_TOP = 40


def _tracemalloc_report(path: str) -> Callable[[], None]:
    tracemalloc.start(_FRAMES)
    peak = [0]

    def sample() -> None:
        size = tracemalloc.get_traced_memory()[0]
        if size <= peak[0] * 1.2:
            return
        peak[0] = size
        stats = tracemalloc.take_snapshot().statistics("traceback")
        with open(path, "w", encoding="utf-8") as out:
            out.write(f"traced {size / 2**20:.1f} MiB; top {_TOP} allocation sites by size\n")
            for st in stats[:_TOP]:
                out.write(f"\n{st.size / 2**20:8.2f} MiB {st.count:9d} blocks\n")
                for line in st.traceback.format(most_recent_first=True):
                    out.write(f"    {line}\n")

    return sample


def _census_report(path: str) -> Callable[[], None]:
    peak = [0]

    def sample() -> None:
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB, the peak so far
        if rss <= peak[0] * 1.2:
            return
        peak[0] = rss
        counts: collections.Counter[str] = collections.Counter()
        sizes: collections.Counter[str] = collections.Counter()
        for obj in gc.get_objects():
            name = type(obj).__qualname__
            counts[name] += 1
            sizes[name] += sys.getsizeof(obj)
        with open(path, "w", encoding="utf-8") as out:
            total = sum(counts.values())
            out.write(f"peak RSS {rss / 1024:.0f} MiB; {total} tracked objects; top {_TOP} types by size\n")
            for name, size in sizes.most_common(_TOP):
                out.write(f"{size / 2**20:9.2f} MiB {counts[name]:9d}  {name}\n")

    return sample


def start_from_environment() -> bool:
    trace, census = os.environ.get(ENV, ""), os.environ.get(CENSUS_ENV, "")
    if not trace and not census:
        return False
    sample = _tracemalloc_report(trace) if trace else _census_report(census)
    done = threading.Event()

    def loop() -> None:
        for _ in range(10_000_000):  # bounded: ~580 days at one sample per 5 s
            if done.wait(_EVERY_S):
                return
            sample()

    threading.Thread(target=loop, name="memtrace", daemon=True).start()
    atexit.register(done.set)
    return True
