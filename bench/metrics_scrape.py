#!/usr/bin/env python3
"""What one ``/metrics`` scrape of the controller costs, at N ClusterQueues.

Builds the real controller Manager (in-memory store, quota-only) with N
ClusterQueues in cohorts, one LocalQueue each (namespace and name as Kueue's
performance generator makes them), three WorkloadPriorityClasses, and
``--workloads`` workloads per queue of which the scheduler admits what fits;
``--finished`` of the admitted ones per queue then finish. The same
:class:`~sluicegate.controller.metrics.ControllerMetrics` the controller runs
counts all of it. Then it renders the registry as a scrape does
(``--scrapes`` times; ``--http``: through the real health server over
loopback as well) and prints, per size: the exposition's CPU and wall time
(the first scrape, and the median of the later ones), its size, the number of series, and the largest families by series.

``--writes`` times the counting hook alone: every admitted workload's life
(created, admitted with its pods, all pods ready, finished, and one write
that changes no condition) is told to a fresh ControllerMetrics's
``workload_stored``, as the store's writes reach it in the controller (see
:func:`time_writes`), and it prints the time per write and what the first
scrape after them costs (with the queues' gauges: the controller's case at
the end of a large run, where every label set has changed since the last
scrape) and the next one, where nothing has.
Not a test: it prints figures.

    .venv/bin/python bench/metrics_scrape.py --cluster-queues 100,1000,2000
    .venv/bin/python bench/metrics_scrape.py --cluster-queues 1000 --workloads 20 --writes
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import math
import shutil
import statistics
import sys
import time
import urllib.request
from collections import Counter
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sluicegate.common.health import HealthServer  # noqa: E402
from sluicegate.common.metrics import render  # noqa: E402
from sluicegate.controller.lifecycle import Settlement  # noqa: E402
from sluicegate.controller.manager import Manager  # noqa: E402
from sluicegate.controller.metrics import ControllerMetrics  # noqa: E402
from sluicegate.controller.store.memory import MemoryStore  # noqa: E402
from sluicegate.manifest.loader import RawDocument  # noqa: E402
from sluicegate.model.conditions import set_condition  # noqa: E402
from sluicegate.model.pods import PodRecord  # noqa: E402
from sluicegate.model.workloads import Workload  # noqa: E402

API = "sluicegate.io/v1beta2"
CURL = shutil.which("curl")
PRIORITIES = {"small": 50, "medium": 100, "large": 200}


class Clock:
    def __init__(self) -> None:
        self.t = 1_000.0

    def __call__(self) -> float:
        return self.t


def queue_docs(n_cq: int, n_cohorts: int) -> list[RawDocument]:
    docs: list[dict[str, object]] = [{"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": "default"}}]
    for name, value in PRIORITIES.items():
        docs.append({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
                     "metadata": {"name": name}, "value": value})
    for i in range(n_cq):
        name = f"cq-{i}"
        docs.append({"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": {
            "cohortName": f"cohort-{i % n_cohorts}", "namespaceSelector": {},
            "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": [{"name": "default", "resources": [
                {"name": "cpu", "nominalQuota": "20", "borrowingLimit": "100"},
                {"name": "memory", "nominalQuota": "64Gi"}]}]}]}})
        docs.append({"apiVersion": API, "kind": "LocalQueue", "metadata": {"name": name, "namespace": name},
                     "spec": {"clusterQueue": name}})
    return [RawDocument(source=f"bench#{i}", body=d) for i, d in enumerate(docs)]


def workload_doc(cq: int, j: int) -> RawDocument:
    klass = ("small", "medium", "large")[j % 3]
    name = f"cq-{cq}"
    return RawDocument(source="bench", body={
        "apiVersion": API, "kind": "Workload", "metadata": {"name": f"wl-{j}", "namespace": name},
        "spec": {"queueName": name,
                 "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": klass},
                 "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [
                     {"name": "c", "command": ["true"], "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}}]},
    })


def build(n_cq: int, per_queue: int, finished: int) -> tuple[Manager, ControllerMetrics, dict[str, float]]:
    clock = Clock()
    metrics = ControllerMetrics()
    m = Manager(MemoryStore(), clock=clock, placement=False, observer=metrics)
    metrics.attach(m)
    m.apply(queue_docs(n_cq, max(1, n_cq // 100)))
    docs = [workload_doc(cq, j) for j in range(per_queue) for cq in range(n_cq)]
    for start in range(0, len(docs), 500):
        m.create_workloads(docs[start:start + 500])
    clock.t += 3
    cycles = 0
    while cycles < 100_000 and m.schedule_once().made_progress:  # bounded: each cycle admits or the loop ends
        cycles += 1
        clock.t += 0.01
    done = 0
    for cq in range(n_cq):
        for j in range(finished):
            wl = m.get_workload(f"cq-{cq}", f"wl-{j}")
            if not wl.is_admitted:
                continue
            conds = set_condition(wl.status.conditions, type_="Finished", status=True, reason="Succeeded",
                                  message="ok", now=clock.t)
            m.fleet.apply(Settlement(replace(wl, status=replace(wl.status, conditions=conds)), release=True))
            done += 1
    states = Counter("finished" if w.is_finished else "admitted" if w.is_admitted else "pending"
                     for w in m.cache.workloads.values())
    return m, metrics, {"cycles": cycles, "finished": done, **states}


def count_series(text: bytes) -> tuple[int, Counter[str]]:
    families: Counter[str] = Counter()
    current = ""
    for line in text.split(b"\n"):
        if line.startswith(b"# TYPE "):
            current = line.split(b" ")[2].decode()
        elif line and not line.startswith(b"#"):
            families[current] += 1
    return sum(families.values()), families


def time_render(metrics: ControllerMetrics, scrapes: int) -> tuple[list[float], list[float], bytes]:
    """CPU and wall seconds of each of ``scrapes`` renders, and the last body."""
    cpu: list[float] = []
    wall: list[float] = []
    body = b""
    for _ in range(scrapes):
        c0, w0 = time.process_time(), time.perf_counter()
        body = render(metrics.registry)
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return cpu, wall, body


def lives(m: Manager) -> list[tuple[Workload | None, Workload]]:
    """(old, new) for each write of each admitted workload's life: created, admitted (pods placed), ready,
    rewritten (a pod's status, no condition), finished."""
    admitted = [w for w in m.cache.workloads.values() if w.is_admitted and not w.is_finished]
    created = [replace(w, status=replace(w.status, admission=None, conditions=())) for w in admitted]
    writes: list[tuple[Workload | None, Workload]] = []
    for c, w in zip(created, admitted, strict=True):
        t = max(cond.last_transition_time for cond in w.status.conditions)
        pods = (PodRecord(uid=f"{w.name}-0", name=f"{w.name}-0", pod_set="main", index=0, node="node-0"),)
        placed = replace(w, status=replace(w.status, pods=pods))
        ready = replace(placed, status=replace(placed.status, conditions=set_condition(
            placed.status.conditions, type_="PodsReady", status=True, reason="PodsReady", message="", now=t + 2)))
        running = replace(ready, status=replace(ready.status, pods=(replace(pods[0], ready=True),)))
        done = replace(running, status=replace(running.status, conditions=set_condition(
            running.status.conditions, type_="Finished", status=True, reason="Succeeded", message="", now=t + 9)))
        writes += [(None, c), (c, placed), (placed, ready), (ready, running), (running, done)]
    return writes


def time_writes(m: Manager, rounds: int) -> tuple[int, float, float, float]:
    """The writes of :func:`lives`, their CPU time per write, and the least CPU seconds over ``rounds`` of the
    first and of a second render of a fresh ControllerMetrics that was told them and reads ``m``.

    The writes go to one ControllerMetrics in runs of a few workloads' lives,
    each run told ``rounds`` times and its least time kept (counting a life
    again counts it again, as another workload with the same queues would):
    the controller tells the hook of a state just after making it from the
    old one, so the hook finds both in the CPU's caches, and the least of a
    few tries leaves out the other processes sharing the machine.
    """
    writes = lives(m)
    gc.collect()
    gc.freeze()  # as the controller's heapgc does: the state is not walked again by each collection
    metrics = ControllerMetrics()
    stored = metrics.workload_stored
    total = 0.0
    run = 5 * 32
    for start in range(0, len(writes), run):
        part = writes[start:start + run]
        least = math.inf
        for _ in range(rounds):
            c0 = time.perf_counter()
            for old, new in part:
                stored(old, new)
            least = min(least, time.perf_counter() - c0)
        total += least
    first = second = math.inf
    for _ in range(min(rounds, 3)):
        metrics = ControllerMetrics()
        for old, new in writes:
            metrics.workload_stored(old, new)
        metrics.attach(m)
        c0 = time.process_time()
        render(metrics.registry)
        c1 = time.process_time()
        render(metrics.registry)
        first, second = min(first, c1 - c0), min(second, time.process_time() - c1)
    gc.unfreeze()
    return len(writes), total / len(writes), first, second


async def time_http(metrics: ControllerMetrics, scrapes: int) -> tuple[float, float]:
    """Median wall seconds of a GET /metrics through the real health server (a thread plays Prometheus), and
    the longest the event loop went without a turn meanwhile (what a scheduling cycle would have waited)."""
    async with HealthServer(registry=metrics.registry, readiness=lambda: (True, "ok")) as server:
        host, port = server.address
        stalls: list[float] = []
        done = asyncio.Event()

        async def ticker() -> None:
            last = time.perf_counter()
            for _ in range(10_000_000):  # bounded; ends when the scrapes are done
                if done.is_set():
                    return
                await asyncio.sleep(0.001)
                now = time.perf_counter()
                stalls.append(now - last - 0.001)
                last = now

        url = f"http://{host}:{port}/metrics"

        async def get() -> float:
            """One scrape by curl in its own process (a Python thread would compete for the GIL), else urllib."""
            t0 = time.perf_counter()
            if CURL is not None:
                proc = await asyncio.create_subprocess_exec(CURL, "-sf", "-o", "/dev/null", "--max-time", "120", url)
                if await proc.wait() != 0:
                    raise RuntimeError(f"curl {url} failed")
            else:
                await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=120).read())
            return time.perf_counter() - t0

        tick = asyncio.create_task(ticker())
        took = [await get() for _ in range(scrapes)]
        done.set()
        await tick
        return statistics.median(took), max(stalls, default=0.0)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cluster-queues", default="100,1000,2000", help="comma-separated sizes")
    p.add_argument("--workloads", type=int, default=30, help="workloads per ClusterQueue")
    p.add_argument("--finished", type=int, default=10, help="admitted workloads per ClusterQueue that then finish")
    p.add_argument("--scrapes", type=int, default=4)
    p.add_argument("--top", type=int, default=8, help="families to list by series count")
    p.add_argument("--http", action="store_true", help="also scrape through the health server")
    p.add_argument("--writes", action="store_true", help="also time the counting hook per workload write")
    p.add_argument("--rounds", type=int, default=10, help="tries of each run of --writes (the least is kept)")
    ns = p.parse_args()
    for n_cq in (int(x) for x in ns.cluster_queues.split(",")):
        t0 = time.perf_counter()
        m, metrics, states = build(n_cq, ns.workloads, ns.finished)
        setup = time.perf_counter() - t0
        cpu, wall, body = time_render(metrics, ns.scrapes)
        total, families = count_series(body)
        print(f"cluster_queues={n_cq} setup={setup:.1f}s workloads={dict(states)}")
        later = cpu[1:] or cpu
        print(f"  scrape: first cpu={cpu[0] * 1000:.1f} ms wall={wall[0] * 1000:.1f} ms; later (median of "
              f"{len(later)}) cpu={statistics.median(later) * 1000:.1f} ms wall="
              f"{statistics.median(wall[1:] or wall) * 1000:.1f} ms; bytes={len(body)} series={total} "
              f"families={len(families)}")
        if ns.http:
            took, stall = asyncio.run(time_http(metrics, ns.scrapes))
            print(f"  http GET /metrics: median {took * 1000:.1f} ms; longest event-loop stall {stall * 1000:.1f} ms")
        if ns.writes:
            n, per_write, first, second = time_writes(m, ns.rounds)
            print(f"  workload_stored: {n} writes, {per_write * 1e6:.2f} us per write (least of {ns.rounds}); "
                  f"then scrapes (least of {min(ns.rounds, 3)}): first cpu={first * 1000:.1f} ms, second "
                  f"cpu={second * 1000:.1f} ms")
        for name, n in families.most_common(ns.top):
            print(f"    {n:8d}  {name}")
        m.stop()


if __name__ == "__main__":
    main()
