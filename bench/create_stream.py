#!/usr/bin/env python3
"""Creation throughput through the client library's CreateStream: creations/s and CPU per creation.

Starts a controller (SQLite store in a temporary directory, no nodes), applies
the large-scale replay's queue objects with every ClusterQueue on
``stopPolicy: Hold`` (so no scheduling cycle admits anything and the
controller's CPU is the submission path's), then creates the replay's
workload documents as fast as the client lets it, ``--concurrency`` in
flight, through :meth:`sluicegate.client.Client.create_workloads`, which sends
them as typed items (``--documents``: as the documents; ``--one-by-one``:
``create_workload`` per document as sluicectl does).
Prints one JSON line: creations/s, controller and bench CPU per creation
(µs, from /proc via psutil), controller RSS before and after.  Not a test.

    .venv/bin/python bench/create_stream.py --workloads 10000
    .venv/bin/python bench/create_stream.py --workloads 10000 --controller-src /tmp/base   # another tree
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.kueue_scheduler import profiling  # noqa: E402
from bench.kueue_scheduler.config import expand, load_config, scaled  # noqa: E402
from bench.kueue_scheduler.generator import queue_documents, workload_document  # noqa: E402
from bench.kueue_scheduler.run import CONFIGS, spawn, stop  # noqa: E402
from sluicegate.client import Client, Document  # noqa: E402


def held(docs: list[dict[str, object]]) -> list[Document]:
    """The queue documents with every ClusterQueue held: nothing is admitted while the bench creates."""
    out = []
    for i, d in enumerate(docs):
        if d.get("kind") == "ClusterQueue":
            d = {**d, "spec": {**d["spec"], "stopPolicy": "Hold"}}  # type: ignore[dict-item]
        out.append(Document(json.dumps(d), f"bench#{i}"))
    return out


def _cpu(p: psutil.Process) -> float:
    t = p.cpu_times()
    return t.user + t.system


# As bench/kueue_scheduler/run.py looks for it: on PATH, else the venv its error message suggests.
PY_SPY = shutil.which("py-spy") or "/tmp/pyspy-venv/bin/py-spy"


def record(pid: int, out: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen([PY_SPY, "record", "--pid", str(pid), "--rate", "200", "--format", "raw", "--threads",
                             "--idle", "-o", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def finish(spies: list[subprocess.Popen[bytes]]) -> None:
    for spy in spies:
        spy.send_signal(signal.SIGINT)
    for spy in spies:
        try:
            spy.wait(timeout=60)
        except subprocess.TimeoutExpired:
            spy.kill()
            spy.wait(timeout=10)


async def drive(address: str, queues: list[Document], bodies: list[str], *, concurrency: int,
                one_by_one: bool, documents: bool, ctl: psutil.Process, profile: Path | None) -> dict[str, Any]:
    me = psutil.Process()
    async with Client(address, timeout=600) as client:
        await client.apply(queues)
        # Warm the stream (the first creation opens it) before the clock starts.
        await client.create_workload(Document(bodies[0], "bench"))
        rest = [Document(b, "bench") for b in bodies[1:]]
        rss0 = ctl.memory_info().rss
        spies: list[subprocess.Popen[bytes]] = []
        if profile is not None:
            profile.mkdir(parents=True, exist_ok=True)
            spies = [record(ctl.pid, profile / "controller.txt"), record(os.getpid(), profile / "bench.txt")]
            await asyncio.sleep(1.0)  # py-spy attaches: profiling tooling, not synchronisation
        c0, b0, t0 = _cpu(ctl), _cpu(me), time.monotonic()
        created = 0
        if one_by_one:
            slots = asyncio.Semaphore(concurrency)

            async def one(doc: Document) -> None:
                nonlocal created
                async with slots:
                    _, new = await client.create_workload(doc)
                    created += new

            await asyncio.gather(*(one(d) for d in rest))
        else:
            async for result in client.create_workloads(rest, window=concurrency, typed=not documents):
                if isinstance(result, Exception):
                    raise result
                created += result.created
        wall = time.monotonic() - t0
        c1, b1 = _cpu(ctl), _cpu(me)
        finish(spies)
    n = len(rest)
    return {"workloads": n, "created": created, "wallS": round(wall, 3), "creationsPerS": round(n / wall),
            "controllerCpuUsPerCreation": round((c1 - c0) / n * 1e6, 1),
            "benchCpuUsPerCreation": round((b1 - b0) / n * 1e6, 1),
            "controllerRssMiB": {"before": round(rss0 / 2**20, 1), "after": round(ctl.memory_info().rss / 2**20, 1)},
            "mode": "create_workload" if one_by_one else "create_workloads" + (" (documents)" if documents else ""),
            "concurrency": concurrency}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workloads", type=int, default=10_000, help="workloads to create (from the large-scale plan)")
    p.add_argument("--queue-scale", type=float, default=0.1, help="ClusterQueues x this (of the replay's 1,000)")
    p.add_argument("--concurrency", type=int, default=4096, help="creations in flight at once")
    p.add_argument("--one-by-one", action="store_true", help="one create_workload call per document")
    p.add_argument("--documents", action="store_true",
                   help="create_workloads sends the documents as they are (typed=False), not as typed items")
    p.add_argument("--profile", type=Path, help="py-spy both processes during the creations; raw files and top-10 here")
    p.add_argument("--controller-src", type=Path, default=ROOT, help="source tree the controller runs from")
    ns = p.parse_args(argv)
    base = load_config(CONFIGS["large-scale"])
    count_scale = 1.0
    plan = expand(scaled(base, queue_scale=ns.queue_scale))
    while len(plan.workloads) < ns.workloads and count_scale < 1e4:
        count_scale *= 2
        plan = expand(scaled(base, queue_scale=ns.queue_scale, count_scale=count_scale))
    bodies = [workload_document(w) for w in plan.workloads[:ns.workloads]]
    queues = held(queue_documents(plan))
    with tempfile.TemporaryDirectory(prefix="create-stream-") as tmp_s:
        tmp = Path(tmp_s)
        env = {**os.environ, "SLUICEGATE_LOG_LEVEL": "WARNING"}
        argv_c = [sys.executable, "-m", "sluicegate.controller.server", "--store", str(tmp / "c.db"),
                  "--listen", "127.0.0.1:0", "--health-listen", "127.0.0.1:0", "--dashboard-listen", "", "--log-level", "WARNING",
                  "--ready-file", str(tmp / "c.ready")]
        ctl = spawn("controller", argv_c, log=tmp / "controller.log", ready=tmp / "c.ready", env=env,
                    cwd=ns.controller_src)
        try:
            print(f"controller pid {ctl.popen.pid}; {len(plan.queues)} ClusterQueues, {len(bodies)} workloads",
                  file=sys.stderr, flush=True)
            result = asyncio.run(drive(ctl.info["grpc"], queues, bodies, concurrency=ns.concurrency,
                                       one_by_one=ns.one_by_one, documents=ns.documents,
                                       ctl=psutil.Process(ctl.popen.pid),
                                       profile=ns.profile))
        finally:
            stop(ctl, timeout=30)
    result["controllerSrc"] = str(ns.controller_src)
    result["load"] = os.getloadavg()[0]
    print(json.dumps(result))
    if ns.profile is not None:
        for who in ("controller", "bench"):
            top = profiling.pyspy_top(ns.profile / f"{who}.txt", limit=10)
            busy = top.samples - top.idle
            text = profiling.render(f"{who} main thread, {top.samples} samples at 200 Hz, "
                                    f"{100 * busy / max(1, top.samples):.0f} % busy; by self", top.by_self)
            (ns.profile / f"{who}-top.txt").write_text(text + "\n")
            print(text, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
