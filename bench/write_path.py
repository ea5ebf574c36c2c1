#!/usr/bin/env python3
"""What every store write costs the controller besides encoding: the store, metrics, versions, watch events.

Builds the real controller Manager on a real SQLite store with Prometheus
metrics attached (its ``observer``) and one watcher of every workload (as the
large-scale bench's recorder), and takes ``--workloads`` one-pod workloads
through the four writes each gets in a run: created (in batches of 500, as
CreateStream stores them), admitted (real scheduling cycles), its pod
Running, then Succeeded (reports handled ``--per-turn`` at a time, one write
group each, as the controller gathers the reports of one turn of its loop).
The watcher takes every event as the Watch RPC does (``batch_bytes``) once a
phase is done.

Prints, per write and phase, the time of the writes with their callers
(``*_us_per_write``, encoding taken out), the SQLite store's commits
(``*_store_us_per_write``; ``*_commits`` transactions of ``*_changes_per_commit`` changes
each) and the committer's write and publishing
(``*_path_us_per_write``); per event, the watcher's (``watch_us_per_event``).  All
in wall-clock time of the one thread that does everything (CPU clocks are
system calls, which would cost more than much of what they time): on a loaded
machine, compare runs made one after another and prefer the replay's figures.
Then the run's writes are replayed alone (``replay_*``, see ``_replay``): the
committer per write and, per event, publishing and sending it, without
encoding, the store's commits or the collector -- the steadiest figures on a
shared machine.  The best of ``--repeat`` runs.  Not a test: it prints figures.

    .venv/bin/python bench/write_path.py
    .venv/bin/python bench/write_path.py --src /work/wt/base7      # another checkout, same figures
    .venv/bin/python bench/write_path.py --profile 25
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workloads", type=int, default=5000)
    p.add_argument("--nodes", type=int, default=30)
    p.add_argument("--cluster-queues", type=int, default=100)
    p.add_argument("--per-turn", type=int, default=120, help="reports handled together")
    p.add_argument("--repeat", type=int, default=3, help="runs; the best of each figure is printed")
    p.add_argument("--profile", type=int, default=0, metavar="N", help="print cProfile's top N of the writes")
    p.add_argument("--src", type=Path, default=Path(__file__).resolve().parents[1], help="checkout to import")
    ns = p.parse_args(argv)
    sys.path.insert(0, str(ns.src))
    runs = [asyncio.run(_run(ns)) for _ in range(ns.repeat)]
    best = {k: (min(r[k] for r in runs) if isinstance(v, float) else v) for k, v in runs[0].items()}
    print(json.dumps(best))
    return 0


async def _run(ns: argparse.Namespace) -> dict[str, Any]:
    import sluicegate.controller.commit as commit_module
    from sluicegate.controller.manager import Manager
    from sluicegate.controller.metrics import ControllerMetrics
    from sluicegate.controller.nodes import ReportedPod, RunPodCommand
    from sluicegate.controller.service.watchwire import batch_bytes
    from sluicegate.controller.store import open_store
    from sluicegate.controller.store.sqlite import SqliteStore
    from sluicegate.manifest.loader import RawDocument

    class Recording:
        def __init__(self) -> None:
            self.runs: list[RunPodCommand] = []

        def send(self, command: object) -> None:
            if isinstance(command, RunPodCommand):
                self.runs.append(command)

        def supersede(self, reason: str) -> None:
            pass

    # Encoding is timed apart and taken out (it is not the write path's own cost).  Wall clock: the CPU
    # clocks are system calls, which would cost more than much of what they time.
    encode_s = [0.0]
    real_encode = commit_module.encode_json
    now = time.perf_counter

    # Encoding and the store's commits made inside Committer.write (taken out of the path's figure).
    inside = [0, 0.0]

    def timed_encode(obj: object) -> Any:
        t0 = now()
        try:
            return real_encode(obj)
        finally:
            spent = now() - t0
            encode_s[0] += spent
            if inside[0]:
                inside[1] += spent

    commit_module.encode_json = timed_encode  # type: ignore[assignment]
    # The SQLite store's own share (its write and group commit).
    store_s = [0.0]
    real_commit = SqliteStore._commit

    # Transactions and the changes they carried (a group's writes and those redone first): a commit's
    # fixed cost is worth cutting only where they are many and small.
    commits = [0, 0]

    def timed_commit(self: Any, *args: Any, **kwargs: Any) -> Any:
        commits[0] += 1
        commits[1] += sum(len(changes) for _, changes in args[0])
        t0 = now()
        try:
            return real_commit(self, *args, **kwargs)
        finally:
            spent = now() - t0
            store_s[0] += spent
            if inside[0]:
                inside[1] += spent

    SqliteStore._commit = timed_commit  # type: ignore[method-assign]
    # The write path itself: Committer.write (store, versions, remembered JSON, metrics) and the events' publishing.
    path_s = [0.0]
    committer = commit_module.Committer
    real_write = committer.write

    recorded: list[tuple[tuple[Any, ...], tuple[Any, ...]]] = []

    def timed_write(self: Any, puts: Any = (), deletes: Any = ()) -> Any:
        puts, deletes = tuple(puts), tuple(deletes)
        recorded.append((puts, deletes))  # replayed alone at the end (see _replay)
        t0 = now()
        inside[0] += 1
        try:
            return real_write(self, puts, deletes)
        finally:
            inside[0] -= 1
            path_s[0] += now() - t0

    watchers_class = sys.modules["sluicegate.controller.watch"].Watchers
    publishing = [0]

    def timing(real: Any) -> Any:
        def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
            if publishing[0]:
                return real(self, *args, **kwargs)
            t0 = now()
            publishing[0] += 1
            try:
                return real(self, *args, **kwargs)
            finally:
                publishing[0] -= 1
                path_s[0] += now() - t0
        return timed

    # Events are published by the watchers' publish (one event) or, where it exists, publish_all.
    real_publishes = {name: getattr(watchers_class, name) for name in ("publish", "publish_all")
                      if hasattr(watchers_class, name)}
    for name, real in real_publishes.items():
        setattr(watchers_class, name, timing(real))
    committer.write = timed_write  # type: ignore[method-assign]
    tmp = tempfile.TemporaryDirectory()
    t = [1_700_000_000.0]

    def clock() -> float:
        t[0] += 0.0001
        return t[0]

    from sluicegate.common.heapgc import HEAP_GC

    HEAP_GC.install()  # the controller's collector settings (server.py)
    metrics = ControllerMetrics()
    m = Manager(open_store(str(Path(tmp.name) / "bench.db")), clock=clock, observer=metrics)
    metrics.attach(m)
    docs: list[dict[str, Any]] = [{"apiVersion": "sluicegate.io/v1beta2", "kind": "ResourceFlavor",
                                   "metadata": {"name": "default"}}]
    for i in range(ns.cluster_queues):
        docs.append({"apiVersion": "sluicegate.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": f"cq-{i}"},
                     "spec": {"namespaceSelector": {}, "resourceGroups": [{
                         "coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [
                             {"name": "cpu", "nominalQuota": str(ns.workloads)}]}]}]}})
        docs.append({"apiVersion": "sluicegate.io/v1beta2", "kind": "LocalQueue",
                     "metadata": {"name": f"lq-{i}", "namespace": f"ns-{i % 10}"},
                     "spec": {"clusterQueue": f"cq-{i}"}})
    m.apply([RawDocument(source=f"bench#{i}", body=d) for i, d in enumerate(docs)])
    sessions = {}
    for n in range(ns.nodes):
        name = f"node-{n}"
        sessions[name] = Recording()
        cpu = (ns.workloads // ns.nodes + 2) * 1000
        m.fleet.register(name=name, labels={}, capacity={"cpu": cpu}, allocatable={"cpu": cpu}, boot_id="b",
                         agent_version="bench", health_address="", pods=[], session=sessions[name])

    events = [0]
    wire = [0]
    watch_ready = asyncio.Event()

    async def watch() -> None:
        batches = m.watch_batches("", "", False, max_batch=1000)
        first = asyncio.ensure_future(anext(batches))
        await asyncio.sleep(0)  # the watcher is registered once its generator started
        watch_ready.set()
        batch = await first
        while True:
            events[0] += len(batch)
            wire[0] += len(batch_bytes(batch))
            batch = await anext(batches)

    watcher = asyncio.create_task(watch())
    await watch_ready.wait()
    m.commit.watchers.flush_s = 0.0  # every batch as it comes: the count of messages does not depend on timing

    async def drain(expected: int) -> float:
        """CPU of streaming what the phase published (the writes themselves are done)."""
        c0 = now()
        deadline = time.monotonic() + 60
        while events[0] < expected:
            assert time.monotonic() < deadline, (events[0], expected)
            await asyncio.sleep(0)
        return now() - c0

    profiler = cProfile.Profile() if ns.profile else None
    out: dict[str, Any] = {"src": str(ns.src), "workloads": ns.workloads}
    writes = 0
    write_cpu = 0.0
    path_cpu = [0.0]
    store_cpu = [0.0]
    watch_cpu = 0.0

    def begin() -> float:
        encode_s[0] = store_s[0] = path_s[0] = inside[1] = 0.0
        commits[0] = commits[1] = 0
        if profiler is not None:
            profiler.enable()
        return now()

    def end(c0: float, phase: str) -> float:
        nonlocal write_cpu
        cpu = now() - c0
        if profiler is not None:
            profiler.disable()
        own = cpu - encode_s[0]
        out[f"{phase}_us_per_write"] = round(own / ns.workloads * 1e6, 2)
        out[f"{phase}_store_us_per_write"] = round(store_s[0] / ns.workloads * 1e6, 2)
        out[f"{phase}_path_us_per_write"] = round((path_s[0] - inside[1]) / ns.workloads * 1e6, 2)
        out[f"{phase}_commits"] = commits[0]
        out[f"{phase}_changes_per_commit"] = round(commits[1] / max(commits[0], 1), 1)
        write_cpu += own
        path_cpu[0] += path_s[0] - inside[1]
        store_cpu[0] += store_s[0]
        return cpu

    # 1. Created, 500 to a write.
    c0 = begin()
    for start in range(0, ns.workloads, 500):
        m.create_workloads([RawDocument(source="bench", body={
            "apiVersion": "sluicegate.io/v1beta2", "kind": "Workload",
            "metadata": {"name": f"wl-{i}", "namespace": f"ns-{i % ns.cluster_queues % 10}"},
            "spec": {"queueName": f"lq-{i % ns.cluster_queues}", "podSets": [{"name": "main", "count": 1,
                     "template": {"spec": {"containers": [{"name": "c", "command": ["true"],
                                                           "resources": {"requests": {"cpu": "1"}}}]}}}]},
        }) for i in range(start, min(ns.workloads, start + 500))])
    end(c0, "create")
    writes += ns.workloads
    watch_cpu += await drain(writes)

    # 2. Admitted by scheduling cycles (the cycle's own work is in this figure too: compare like with like).
    c0 = begin()
    for _ in range(ns.workloads + 10):
        if not m.schedule_once().made_progress:
            break
    end(c0, "admit")
    runs = [(node, c) for node, s in sessions.items() for c in s.runs]
    assert len(runs) == ns.workloads, (len(runs), ns.workloads)
    writes += ns.workloads
    watch_cpu += await drain(writes)

    def reports(phase: str) -> list[tuple[str, ReportedPod]]:
        now = clock()
        return [(node, ReportedPod(
            uid=c.pod.uid, name=c.pod.name, namespace=c.workload.namespace, workload=c.workload.name, phase=phase,
            exit_code=0 if phase == "Succeeded" else None, ready=phase == "Running", started_at=now,
            finished_at=now if phase == "Succeeded" else None, requests=dict(c.pod.requests), qos_class="Burstable",
        )) for node, c in runs]

    # 3. and 4. Running, then Succeeded.
    for phase in ("Running", "Succeeded"):
        batch = reports(phase)
        c0 = begin()
        for start in range(0, len(batch), ns.per_turn):
            for node, rp in batch[start:start + ns.per_turn]:
                m.fleet.report_pods(node, (rp,), periodic=False)
            m.fleet.flush_reports()
        end(c0, phase.lower())
        writes += ns.workloads
        watch_cpu += await drain(writes)

    finished = sum(1 for i in range(ns.workloads)
                   if m.get_workload(f"ns-{i % ns.cluster_queues % 10}", f"wl-{i}").is_finished)
    assert finished == ns.workloads, (finished, ns.workloads)
    watcher.cancel()
    out["events"] = events[0]
    out["wire_bytes"] = wire[0]
    out["watch_us_per_event"] = round(watch_cpu / events[0] * 1e6, 2)
    out["all_us_per_write_no_encode"] = round(write_cpu / writes * 1e6, 2)
    out["path_us_per_write"] = round(path_cpu[0] / writes * 1e6, 2)
    out["store_us_per_write"] = round(store_cpu[0] / writes * 1e6, 2)
    if profiler is not None:
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(ns.profile)
        print(text.getvalue(), file=sys.stderr)
    commit_module.encode_json = real_encode  # type: ignore[assignment]
    SqliteStore._commit = real_commit  # type: ignore[method-assign]
    committer.write = real_write  # type: ignore[method-assign]
    for name, real in real_publishes.items():
        setattr(watchers_class, name, real)
    out.update(_replay(recorded, ns.repeat))
    m.store.close()
    tmp.cleanup()
    return out


def _replay(recorded: list[tuple[tuple[Any, ...], tuple[Any, ...]]], repeat: int) -> dict[str, float]:
    """The run's writes again, alone, through Committer.commit (each Workload written reported MODIFIED to one
    watcher of everything, which reads each event as it comes), on a store that only checks and counts:
    the committer's own cost per write (versions, remembered JSON, metrics, the event), its encoding taken
    out (each object's JSON made beforehand), and then the watcher's (``batch_bytes``) per event."""
    import sluicegate.controller.commit as commit_module
    from sluicegate.controller.cache import Cache
    from sluicegate.controller.effects import Effects
    from sluicegate.controller.metrics import ControllerMetrics
    from sluicegate.controller.service.watchwire import batch_bytes
    from sluicegate.controller.store.base import check_changes
    from sluicegate.controller.watch import Watcher
    from sluicegate.model.workloads import Workload

    class CheckingStore:
        """What a store does with a write inside a group before its commit: check it and give it a version."""

        def __init__(self) -> None:
            self.version = 0

        def write(self, changes: Any) -> int:
            check_changes(changes)
            self.version += 1
            return self.version

    import gc

    encodings = {id(obj): commit_module.encode_json(obj) for puts, _ in recorded for obj in puts}
    real_encode = commit_module.encode_json
    commit_module.encode_json = lambda obj: encodings[id(obj)]  # type: ignore[assignment]
    best_write = best_watch = best_publish = float("inf")
    writes = sum(len(puts) + len(deletes) for puts, deletes in recorded)
    try:
        for _ in range(repeat):
            c = commit_module.Committer(CheckingStore(), Cache(), observer=ControllerMetrics())  # type: ignore[arg-type]
            w = Watcher("", "", None)
            c.watchers._all.append(w)
            c.watchers._everything += 1
            # Each write, then its events in a commit of their own: the write's cost and the events' apart.
            effects = [(Effects(puts=puts, deletes=deletes),
                        Effects(events=tuple(("MODIFIED", o) for o in puts if type(o) is Workload)))
                       for puts, deletes in recorded]
            known = c.cache.workloads
            batches = []
            spent = published = 0.0
            # Without the collector: where its pauses fall is chance, and would decide these figures.
            gc.collect()
            gc.disable()
            for write, told in effects:
                t0 = time.perf_counter()
                c.commit(write)
                t1 = time.perf_counter()
                if told.events:
                    c.commit(told)
                t2 = time.perf_counter()
                spent += t1 - t0
                published += t2 - t1
                log = c.watchers._log
                batches.append(log[w.cursor - c.watchers._first:])
                w.cursor = c.watchers._next  # read: the log keeps nothing for it
                for o in write.puts:
                    if type(o) is Workload:
                        known[o.key] = o  # as the cache holds it when the next write of it comes
            best_write = min(best_write, spent)
            best_publish = min(best_publish, published)
            gc.enable()
            events = sum(len(b) for b in batches)
            gc.disable()
            t0 = time.perf_counter()
            for b in batches:
                if b:
                    batch_bytes(b)
            best_watch = min(best_watch, time.perf_counter() - t0)
            gc.enable()
    finally:
        gc.enable()
        commit_module.encode_json = real_encode  # type: ignore[assignment]
    return {"replay_us_per_write": round(best_write / writes * 1e6, 3),
            "replay_publish_us_per_event": round(best_publish / events * 1e6, 3),
            "replay_watch_us_per_event": round(best_watch / events * 1e6, 3)}


if __name__ == "__main__":
    sys.exit(main())
