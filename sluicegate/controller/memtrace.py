"""Debug switch: where the controller's memory goes at its peak (``SLUICEGATE_TRACEMALLOC=FILE``).

With the variable set, the controller traces allocations (tracemalloc, 4
frames; slow: a debugging aid, not for production) and, each time the traced
size grows past the largest seen by a fifth, writes that heap's top
allocation sites, grouped by traceback, to FILE (replacing the last).  Unset,
nothing is started.
"""

from __future__ import annotations

import atexit
import os
import threading
import tracemalloc

ENV = "SLUICEGATE_TRACEMALLOC"
_FRAMES = 4
_EVERY_S = 5.0
_TOP = 40


def start_from_environment() -> bool:
    path = os.environ.get(ENV, "")
    if not path:
        return False
    tracemalloc.start(_FRAMES)
    peak = [0]
    done = threading.Event()

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

    def loop() -> None:
        for _ in range(10_000_000):  # bounded: ~580 days at one sample per 5 s
            if done.wait(_EVERY_S):
                return
            sample()

    threading.Thread(target=loop, name="memtrace", daemon=True).start()
    atexit.register(done.set)
    return True
