#!/usr/bin/env python3
"""Watch fan-out: 200 watchers of every workload event during a 2,000-job run on real agents.

Starts a real controller and two real agents (as bench/e2e/run.py does), then:

1. runs N `true` jobs with no watcher and deletes them (the controller's own
   cost of the run, and its memory with nothing watching: the baseline);
2. opens W watches through the client library (``watch_workload_events``:
   the Watch RPC with batching) in a separate process, spread over C
   channels, runs N jobs again and deletes them;
3. closes every watch and reads the controller's memory and its watcher
   figures again.

Prints, per watcher, how many events were missing (against every event any
watcher received), duplicated or out of order; the event lag (receipt at the
watcher minus the controller's publish time carried by each event) p50, p99
and max; the controller's RSS before the watchers, at its peak and after
they closed, with its count of open watches and of Watcher objects not yet
freed (``sluicegate_watchers``, ``sluicegate_watchers_alive``) and events held
for watchers; and the controller CPU per event delivered (run 2's CPU minus
run 1's, over the deliveries).  Not a test: it prints figures.

    .venv/bin/python bench/watch_fanout.py                 # 200 watchers, 2,000 jobs
    .venv/bin/python bench/watch_fanout.py --watchers 20 --jobs 200
    sudo .venv/bin/python bench/watch_fanout.py --profile /tmp/ctl.txt   # py-spy on the controller, run 2
"""

from __future__ import annotations

import argparse
import array
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "e2e"))

from run import QUEUE, PeakRSS, default_agent_data_root, remove_cgroup_bases, start, workload  # noqa: E402

from sluicegate.client import Client, Document  # noqa: E402
from sluicegate.v1 import workloads_pb2  # noqa: E402

DELETED = workloads_pb2.WorkloadEvent.DELETED


def job(prefix: str, i: int) -> str:
    doc = json.loads(workload(i))
    doc["metadata"]["name"] = f"{prefix}-{i:05d}"
    return json.dumps(doc)


def metrics(health: str) -> dict[str, float]:
    out: dict[str, float] = {}
    with urllib.request.urlopen(f"http://{health}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(("sluicegate_watch", "process_resident_memory_bytes ")):
                k, v = line.rsplit(" ", 1)
                out[k] = float(v)
    return out


def wait_metric(health: str, key: str, want: float, deadline_s: float) -> dict[str, float]:
    deadline = time.monotonic() + deadline_s
    while True:
        m = metrics(health)
        if m.get(key) == want or time.monotonic() > deadline:
            return m
        time.sleep(0.05)  # polling the controller's figure, bounded by the deadline


async def run_jobs(server: str, prefix: str, jobs: int, concurrency: int) -> float:
    """Submit N jobs, wait until all finished, delete them; the seconds from first submit to last deletion."""
    async with Client(server, timeout=60) as c:
        t0 = time.time()
        todo = list(range(jobs))

        async def submitter() -> None:
            while todo:
                await c.create_workload(Document(job(prefix, todo.pop()), "bench"))

        await asyncio.gather(*(submitter() for _ in range(concurrency)))
        deadline = time.monotonic() + max(120, jobs / 10)
        while time.monotonic() < deadline:
            await asyncio.sleep(0.1)  # polling interval, bounded by the deadline
            st = (await c.get("ClusterQueue", "bench")).get("status", {})
            if not st.get("pendingWorkloads", 0) and not st.get("reservingWorkloads", 0):
                break
        else:
            raise SystemExit(f"{prefix}: jobs still pending or running after the deadline")
        names = [w["metadata"]["name"] for w in await c.list_workloads(namespace="default")
                 if w["metadata"]["name"].startswith(prefix + "-")]

        async def deleter() -> None:
            while names:
                await c.delete_workload(names.pop())

        await asyncio.gather(*(deleter() for _ in range(concurrency)))
        return time.time() - t0


# ------------------------------------------------------------------ the watchers' process

class Seen:
    __slots__ = ("last", "count", "dups", "disorder", "deleted")

    def __init__(self) -> None:
        self.last: dict[str, int] = {}
        self.count: dict[str, int] = {}
        self.dups = 0
        self.disorder = 0
        self.deleted = 0


async def child(server: str, watchers: int, channels: int, jobs: int, deadline_s: float) -> dict:
    seen = [Seen() for _ in range(watchers)]
    union: dict[str, set[int]] = {}
    lags = array.array("d")
    done = asyncio.Event()
    finished = [0]
    messages = [0]
    clients = [Client(server, timeout=60) for _ in range(channels)]
    for c in clients:
        await c.__aenter__()

    async def watch(i: int) -> None:
        s = seen[i]
        last, count = s.last, s.count
        async for batch in clients[i % channels].watch_workload_events(namespace="default", send_initial=False):
            now = time.time()
            messages[0] += 1
            for ev in batch:
                o = ev.workload
                name, rv = o.name, o.resource_version
                lags.append(now - ev.time)
                prev = last.get(name, 0)
                if rv == prev:
                    s.dups += 1
                    continue
                if rv < prev:
                    s.disorder += 1
                last[name] = rv
                count[name] = count.get(name, 0) + 1
                union.setdefault(name, set()).add(rv)
                if ev.type == DELETED:
                    s.deleted += 1
            if s.deleted >= jobs:
                finished[0] += 1
                if finished[0] == watchers:
                    done.set()
                return

    tasks = [asyncio.create_task(watch(i)) for i in range(watchers)]
    if not watchers:
        done.set()  # the same runs with nothing watching: the controller's own memory from run to run
    try:
        await asyncio.wait_for(done.wait(), deadline_s)
    except TimeoutError:
        pass
    for t in tasks:
        t.cancel()
    errors = [repr(t.exception()) for t in tasks if t.done() and not t.cancelled() and t.exception()]
    for c in clients:
        await c.__aexit__(None, None, None)
    expected = sum(len(v) for v in union.values())
    missing = [sum(len(union[n]) - s.count.get(n, 0) for n in union) for s in seen]
    lag = sorted(lags)

    def q(p: float) -> float:
        return round(lag[min(len(lag) - 1, int(len(lag) * p))] * 1000, 1) if lag else float("nan")

    return {
        "watchers": watchers, "channels": channels,
        "events_per_watcher": expected,
        "deliveries": len(lags),
        "messages": messages[0],
        "watchers_complete": finished[0],
        "watchers_missing_events": sum(1 for m in missing if m),
        "missing_events_total": sum(missing),
        "duplicate_events_total": sum(s.dups for s in seen),
        "out_of_order_events_total": sum(s.disorder for s in seen),
        "watch_errors": errors[:3],
        "lag_ms_p50": q(0.5), "lag_ms_p99": q(0.99), "lag_ms_max": round(lag[-1] * 1000, 1) if lag else None,
        "lag_ms_mean": round(statistics.fmean(lag) * 1000, 1) if lag else None,
        "watcher_process_cpu_s": round(sum(psutil.Process().cpu_times()[:2]), 2),
    }


# ------------------------------------------------------------------ the bench

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--watchers", type=int, default=200)
    ap.add_argument("--channels", type=int, default=10, help="client connections the watches are spread over")
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=16, help="parallel submitters")
    ap.add_argument("--rounds", type=int, default=2,
                    help="watched runs, each with its own watchers: memory after the second shows whether the "
                         "first left anything behind or the allocator only kept its pages")
    ap.add_argument("--profile", metavar="FILE", help="py-spy record (raw) the controller during the first watched run")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ns = ap.parse_args()
    if ns.child:
        print(json.dumps(asyncio.run(child(ns.child, ns.watchers, ns.channels, ns.jobs, max(120.0, ns.jobs / 10)))),
              flush=True)
        return
    with tempfile.TemporaryDirectory() as d, tempfile.TemporaryDirectory(dir=default_agent_data_root()) as agents:
        tmp = Path(d)
        procs: list[subprocess.Popen[bytes]] = []
        try:
            ctl, info = start(["sluicegate.controller.server", "--store", str(tmp / "c.db"), "--listen", "127.0.0.1:0",
                               "--health-listen", "127.0.0.1:0", "--agent-heartbeat-interval", "1"],
                              tmp / "controller.log", tmp / "c.ready")
            procs.append(ctl)
            for name in ("fan-a", "fan-b"):
                a, _ = start(["sluicegate.agent.server", "--controller", info["grpc"], "--node-name", name,
                              "--data-dir", str(Path(agents) / name), "--health-listen", "127.0.0.1:0",
                              "--allocatable", "cpu=16,memory=32Gi", "--cgroup-base", f"sg-bench-{name}-{os.getpid()}"],
                             tmp / f"{name}.log", tmp / f"{name}.ready")
                procs.append(a)
            server, health = info["grpc"], info["health"]
            cp = psutil.Process(ctl.pid)

            async def apply() -> None:
                async with Client(server, timeout=60) as c:
                    await c.apply([Document(QUEUE, "bench-queue")])

            asyncio.run(apply())
            cpu0 = sum(cp.cpu_times()[:2])
            wall1 = asyncio.run(run_jobs(server, "plain", ns.jobs, ns.concurrency))
            cpu1 = sum(cp.cpu_times()[:2])
            time.sleep(1.0)  # let the deletions' aftermath settle before the baseline
            base = metrics(health)
            rss0 = cp.memory_info().rss

            rounds = []
            peak_rss = 0
            for r in range(ns.rounds):
                kid = subprocess.Popen([sys.executable, __file__, "--child", server, "--watchers", str(ns.watchers),
                                        "--channels", str(ns.channels), "--jobs", str(ns.jobs)],
                                       stdout=subprocess.PIPE, cwd=ROOT)
                opened = wait_metric(health, "sluicegate_watchers", float(ns.watchers), 60)
                rss_open = cp.memory_info().rss
                spy = None
                if ns.profile and r == 0:
                    spy = subprocess.Popen([os.environ.get("PY_SPY", "py-spy"), "record", "--format",
                                            "raw", "-r", "100", "-o", ns.profile, "--pid", str(ctl.pid)],
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    time.sleep(1.0)  # py-spy attaches
                cpu2 = sum(cp.cpu_times()[:2])
                with PeakRSS({"controller": ctl.pid}) as peak:
                    wall2 = asyncio.run(run_jobs(server, f"watched{r}", ns.jobs, ns.concurrency))
                    out, _ = kid.communicate(timeout=max(180, ns.jobs / 5))
                cpu3 = sum(cp.cpu_times()[:2])
                if spy is not None:
                    spy.send_signal(signal.SIGINT)
                    spy.wait(timeout=60)
                watched = json.loads(out.decode().splitlines()[-1])
                closed = wait_metric(health, "sluicegate_watchers_alive", 0.0, 30)
                time.sleep(1.0)
                after = metrics(health)
                peak_rss = max(peak_rss, peak.peak["controller"], rss_open)
                deliveries = watched["deliveries"]
                extra = (cpu3 - cpu2) - (cpu1 - cpu0)
                rounds.append({
                    **watched,
                    "run_seconds": round(wall2, 2),
                    "controller_watchers_open_then_after": [opened.get("sluicegate_watchers"),
                                                            after.get("sluicegate_watchers")],
                    "controller_watchers_alive_after": closed.get("sluicegate_watchers_alive"),
                    "controller_watch_events_held_after": after.get("sluicegate_watch_events_held"),
                    "controller_rss_mib_open_peak_after": [round(rss_open / 2**20, 1),
                                                           round(max(peak.peak["controller"], rss_open) / 2**20, 1),
                                                           round(cp.memory_info().rss / 2**20, 1)],
                    "controller_cpu_s": round(cpu3 - cpu2, 2),
                    "controller_cpu_us_per_delivery": round(extra * 1e6 / deliveries, 2) if deliveries else None,
                    "controller_cpu_us_per_delivery_all_in":
                        round((cpu3 - cpu2) * 1e6 / deliveries, 2) if deliveries else None,
                })
            result = {
                "jobs": ns.jobs,
                "unwatched_run": {"run_seconds": round(wall1, 2), "controller_cpu_s": round(cpu1 - cpu0, 2)},
                "controller_rss_mib": {
                    "before_watchers": round(rss0 / 2**20, 1),
                    "peak": round(peak_rss / 2**20, 1),
                    "after_watchers_closed": round(cp.memory_info().rss / 2**20, 1),
                },
                "watched_rounds": rounds,
                "baseline_metrics": {k: v for k, v in base.items() if k.startswith("sluicegate")},
                "load": os.getloadavg(),
            }
            print(json.dumps(result, indent=2))
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                p.wait(timeout=60)
            remove_cgroup_bases(str(os.getpid()))


if __name__ == "__main__":
    main()
