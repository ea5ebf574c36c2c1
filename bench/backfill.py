#!/usr/bin/env python3
"""Backfill against StrictFIFO and BestEffortFIFO: a mixed stream in simulated time.

One ClusterQueue (``--cpus`` of quota) receives a seeded stream of jobs, all
with time limits (``maximumExecutionTimeSeconds``): a few wide ones (most of
the quota) among many narrow ones.  The real controller (Manager on an
in-memory store, quota-only mode, every decision made by the real scheduling
cycle) runs it under each queueing strategy on a fake clock that jumps from
event to event: arrivals, and jobs ending (``--runtime-fraction`` of their
limit; 1.0 means every job runs to its limit).  Printed per strategy: the
quota usage up to the last job's end (and up to the last arrival), and the wide and narrow jobs' waits
(submission to admission).  Not a test: it prints figures.

    .venv/bin/python bench/backfill.py
    .venv/bin/python bench/backfill.py --runtime-fraction 0.5-1.0 --seed 2
"""

from __future__ import annotations

import argparse
import heapq
import json
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sluicegate.controller.manager import Manager  # noqa: E402
from sluicegate.controller.scheduling.cycle import EntryStatus  # noqa: E402
from sluicegate.controller.store.memory import MemoryStore  # noqa: E402
from sluicegate.manifest.loader import RawDocument  # noqa: E402

API = "sluicegate.io/v1beta2"
EPOCH = 1_700_000_000.0
STRATEGIES = ("StrictFIFO", "BestEffortFIFO", "Backfill")


@dataclass(frozen=True, slots=True)
class Job:
    name: str
    arrival: float
    cpus: int
    limit: int
    runtime: float
    wide: bool


def stream(n: int, cpus: int, wide_share: float, load: float, fraction: tuple[float, float], seed: int) -> list[Job]:
    """Poisson arrivals at the rate that offers ``load`` times the quota in limit-seconds."""
    rng = random.Random(seed)
    jobs: list[tuple[int, int, bool]] = []
    for _ in range(n):
        if rng.random() < wide_share:
            jobs.append((rng.randint(cpus * 3 // 4, cpus), rng.randint(600, 1800), True))
        else:
            jobs.append((rng.randint(1, max(1, cpus // 8)), rng.randint(60, 1200), False))
    mean_work = statistics.fmean(c * lim * (fraction[0] + fraction[1]) / 2 for c, lim, _ in jobs)
    rate = load * cpus / mean_work
    t, out = 0.0, []
    for i, (c, lim, wide) in enumerate(jobs):
        t += rng.expovariate(rate)
        out.append(Job(f"{'wide' if wide else 'narrow'}-{i:04d}", round(t, 3), c, lim,
                       round(lim * rng.uniform(*fraction), 3), wide))
    return out


def queue_docs(strategy: str, cpus: int) -> list[RawDocument]:
    docs = [
        {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": "default"}},
        {"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": "cq"},
         "spec": {"namespaceSelector": {}, "queueingStrategy": strategy,
                  "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                      {"name": "default", "resources": [{"name": "cpu", "nominalQuota": str(cpus)}]}]}]}},
        {"apiVersion": API, "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": "default"},
         "spec": {"clusterQueue": "cq"}},
    ]
    return [RawDocument(source=f"bench#{i}", body=d) for i, d in enumerate(docs)]


def job_doc(job: Job) -> RawDocument:
    return RawDocument(source="bench", body={
        "apiVersion": API, "kind": "Workload", "metadata": {"name": job.name, "namespace": "default"},
        "spec": {"queueName": "lq", "maximumExecutionTimeSeconds": job.limit, "podSets": [{
            "name": "main", "count": 1, "template": {"spec": {"containers": [{
                "name": "c", "command": ["true"], "resources": {"requests": {"cpu": str(job.cpus)}}}]}}}]},
    })


def run(strategy: str, jobs: list[Job], cpus: int) -> dict[str, object]:
    now = [EPOCH]
    m = Manager(MemoryStore(), clock=lambda: now[0], placement=False)
    m.apply(queue_docs(strategy, cpus))
    by_name = {j.name: j for j in jobs}
    arrivals = sorted(jobs, key=lambda j: j.arrival)
    ends: list[tuple[float, str]] = []
    started: dict[str, float] = {}
    i, cycles, wall0 = 0, 0, time.perf_counter()
    while i < len(arrivals) or ends:
        t = min(arrivals[i].arrival if i < len(arrivals) else float("inf"), ends[0][0] if ends else float("inf"))
        now[0] = EPOCH + t
        while ends and ends[0][0] <= t:
            _, name = heapq.heappop(ends)
            m.delete_workload("default", name)
        batch = []
        while i < len(arrivals) and arrivals[i].arrival <= t:
            batch.append(job_doc(arrivals[i]))
            i += 1
        if batch:
            m.create_workloads(batch)
        for _ in range(len(jobs) + 1):  # each cycle admits at most one head: bounded by the jobs
            if not m.cache.queues.has_heads():
                break
            stats = m.schedule_once()
            cycles += 1
            for e in stats.entries:
                if e.status is EntryStatus.ASSUMED:
                    job = by_name[e.workload.name]
                    started[job.name] = t
                    heapq.heappush(ends, (t + job.runtime, job.name))
            if not stats.made_progress:
                break
        if not ends and i >= len(arrivals):
            break
    missing = [j.name for j in jobs if j.name not in started]
    if missing:
        raise SystemExit(f"{strategy}: {len(missing)} jobs never admitted, e.g. {missing[:3]}")
    makespan = max(started[j.name] + j.runtime for j in jobs)
    busy = sum(j.cpus * j.runtime for j in jobs)
    # Also over the arrival period only, where the tail of a starved wide job does not count.
    last = arrivals[-1].arrival
    busy_open = sum(j.cpus * max(0.0, min(last, started[j.name] + j.runtime) - started[j.name]) for j in jobs)

    def waits(wide: bool) -> dict[str, float]:
        w = sorted(started[j.name] - j.arrival for j in jobs if j.wide is wide)
        return {"count": len(w), "mean_s": round(statistics.fmean(w), 1), "p50_s": round(w[len(w) // 2], 1),
                "max_s": round(w[-1], 1)}

    return {"strategy": strategy, "usage_pct": round(100 * busy / (cpus * makespan), 1),
            "usage_while_arriving_pct": round(100 * busy_open / (cpus * last), 1),
            "makespan_s": round(makespan), "wide_wait": waits(True), "narrow_wait": waits(False),
            "wide_waits_by_job": {j.name: round(started[j.name] - j.arrival, 1) for j in jobs if j.wide},
            "cycles": cycles, "wall_s": round(time.perf_counter() - wall0, 1)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jobs", type=int, default=600)
    p.add_argument("--cpus", type=int, default=64, help="quota of the ClusterQueue")
    p.add_argument("--wide-share", type=float, default=0.04, help="fraction of wide jobs (75-100%% of the quota)")
    p.add_argument("--load", type=float, default=0.95, help="offered load, as a fraction of the quota")
    p.add_argument("--runtime-fraction", default="1.0",
                   help="a job runs this fraction of its limit: a number, or LO-HI drawn uniformly")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", action="store_true", help="print the full results as JSON")
    ns = p.parse_args()
    lo, _, hi = ns.runtime_fraction.partition("-")
    fraction = (float(lo), float(hi or lo))
    jobs = stream(ns.jobs, ns.cpus, ns.wide_share, ns.load, fraction, ns.seed)
    results = {s: run(s, jobs, ns.cpus) for s in STRATEGIES}
    if ns.json:
        print(json.dumps(results, indent=2))
    wide = sum(j.wide for j in jobs)
    print(f"{len(jobs)} jobs ({wide} wide, {len(jobs) - wide} narrow) on {ns.cpus} cpus, offered load {ns.load}, "
          f"runtime fraction {ns.runtime_fraction}, seed {ns.seed}")
    print(f"{'strategy':<15} {'usage %':>8} {'arriving %':>10} {'makespan s':>11} {'wide wait mean/p50/max s':>28} "
          f"{'narrow wait mean/p50/max s':>28} {'cycles':>7} {'wall s':>7}")
    for s, r in results.items():
        w, n = r["wide_wait"], r["narrow_wait"]
        assert isinstance(w, dict) and isinstance(n, dict)
        print(f"{s:<15} {r['usage_pct']:>8} {r['usage_while_arriving_pct']:>10} {r['makespan_s']:>11} "
              f"{w['mean_s']:>10}/{w['p50_s']}/{w['max_s']:<8} {n['mean_s']:>10}/{n['p50_s']}/{n['max_s']:<8} "
              f"{r['cycles']:>7} {r['wall_s']:>7}")
    strict, best, back = (results[s] for s in STRATEGIES)
    strict_w, back_w = strict["wide_waits_by_job"], back["wide_waits_by_job"]
    assert isinstance(strict_w, dict) and isinstance(back_w, dict)
    longer = {k: (back_w[k], strict_w[k]) for k in back_w if back_w[k] > strict_w[k] + 1e-6}
    gap = float(best["usage_pct"]) - float(back["usage_pct"])  # type: ignore[arg-type]
    print(f"backfill usage vs BestEffortFIFO: {-gap:+.1f} points (target: within 5); wide jobs waiting longer "
          f"than under StrictFIFO: {len(longer)} of {len(back_w)}" + (f" {longer}" if longer else ""))


if __name__ == "__main__":
    main()
