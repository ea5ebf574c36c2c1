#!/usr/bin/env python3
"""CPU of ``encode_json`` per workload write, on the writes of a real run.

Runs ``bench/write_path.py``'s controller (``--workloads`` one-pod workloads
created, admitted, Running, Succeeded), keeps every object it writes, in
order, then encodes them again with the encoder's caches emptied before each
pass: the best of ``--repeat`` passes, in µs per write (all writes, and the
workload writes by their kind).  On a machine shared with other work prefer
the two figures that leave out the time other processes ran:
``*_min_us_per_write`` (each write's fastest pass, summed by kind) and
``all_cpu_us_per_write`` (a whole pass on the thread's CPU clock).  ``--src``
imports another checkout, for before/after figures on the very same writes
(run the two alternately).  Not a test: it prints figures.

    .venv/bin/python bench/encode_writes.py
    .venv/bin/python bench/encode_writes.py --src /work/wt/base8
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import json
import sys
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any


def _clear_caches(enc: Any) -> None:
    for value in vars(enc).values():
        if isinstance(value, OrderedDict):  # the caches (its constant mappings are plain dicts)
            value.clear()
    timefmt = importlib.import_module("sluicegate.manifest.timefmt")
    for mod in (enc, timefmt):
        for value in vars(mod).values():
            if hasattr(value, "cache_clear"):
                value.cache_clear()
    for name in ("_stamps", "_seconds"):  # format_rfc3339's memos since round eight (plain dicts)
        memo = getattr(timefmt, name, None)
        if memo is not None:
            memo.clear()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workloads", type=int, default=5000)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--src", type=Path, default=Path(__file__).resolve().parents[1], help="checkout to import")
    ns = p.parse_args(argv)
    sys.path.insert(0, str(ns.src))
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import write_path

    captured: list[Any] = []

    def keep(recorded: list[tuple[tuple[Any, ...], tuple[Any, ...]]], repeat: int) -> dict[str, float]:
        captured.extend(obj for puts, _ in recorded for obj in puts)
        return {}

    write_path._replay = keep  # type: ignore[assignment]
    wp = argparse.Namespace(workloads=ns.workloads, nodes=30, cluster_queues=100, per_turn=120, repeat=1, profile=0,
                            src=ns.src)
    asyncio.run(write_path._run(wp))
    enc = importlib.import_module("sluicegate.manifest.encode")  # (the package's "encode" is the function)
    from sluicegate.model.workloads import Workload

    def kind(obj: Any) -> str:
        if type(obj) is not Workload:
            return "other"
        st = obj.status
        if st.is_true("Finished"):
            return "finished"
        if st.pods:
            return "pods"
        if st.admission is not None:
            return "admitted"
        return "created"

    kinds = [kind(o) for o in captured]
    print(f"{len(captured)} writes", file=sys.stderr)
    best: dict[str, float] = {}
    best_cpu = float("inf")
    per_call: list[list[float]] = [[] for _ in captured]  # each write's time in every pass
    encode_json = enc.encode_json
    for _ in range(ns.repeat):
        # A pass timed whole on the thread's CPU clock: on a machine shared with other work the wall-clock
        # figures per kind below take in the time other processes ran; this one does not.
        _clear_caches(enc)
        gc.collect()
        gc.disable()
        t0 = time.thread_time()
        for obj in captured:
            encode_json(obj)
        best_cpu = min(best_cpu, time.thread_time() - t0)
        gc.enable()
        _clear_caches(enc)
        gc.collect()
        gc.disable()
        times: dict[str, float] = {}
        clock = time.perf_counter
        for obj, k, calls in zip(captured, kinds, per_call, strict=True):
            t0 = clock()
            encode_json(obj)
            t = clock() - t0
            times[k] = times.get(k, 0.0) + t
            calls.append(t)
        gc.enable()
        for k, t in times.items():
            best[k] = min(best.get(k, float("inf")), t)
    counts = {k: kinds.count(k) for k in best}
    out = {f"{k}_us_per_write": round(best[k] / counts[k] * 1e6, 2) for k in sorted(best)}
    wl = [k for k in best if k != "other"]
    out["workload_us_per_write"] = round(sum(best[k] for k in wl) / sum(counts[k] for k in wl) * 1e6, 2)
    out["all_cpu_us_per_write"] = round(best_cpu / len(captured) * 1e6, 2)
    # Each write's fastest pass, summed by kind: a write another process interrupted in one pass counts
    # with its time in another (the figure least moved by other work, per kind).
    fastest: dict[str, float] = {}
    for k, calls in zip(kinds, per_call, strict=True):
        fastest[k] = fastest.get(k, 0.0) + min(calls)
    out.update({f"{k}_min_us_per_write": round(fastest[k] / counts[k] * 1e6, 2) for k in sorted(fastest)})
    out["workload_min_us_per_write"] = round(sum(fastest[k] for k in wl) / sum(counts[k] for k in wl) * 1e6, 2)
    out.update({f"{k}_writes": counts[k] for k in sorted(counts)})
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
