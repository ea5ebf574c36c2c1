#!/usr/bin/env python3
"""Critical-pod admission latency on a full node: arrival to start, with grace period 0.

Drives the agent's own node code (AgentNode over the real PodRuntime, real
processes, real cgroups where this machine lets us write them) the way the
controller link or the static-pod sync does: a node whose allocatable is
taken by ``--fillers`` pods, each ``sleep`` with terminationGracePeriodSeconds
0, receives a system-node-critical pod that needs one filler's room.  The
agent chooses the victim (kubelet rule), stops it (SIGKILL at once: grace 0),
waits until its processes are gone, then starts the critical pod.

Per run it measures, from the moment the pod is handed to the agent:

* victim gone: the victim's recorded termination time;
* process started: the critical container's recorded start time;
* admitted and started: when the agent's run_pod call returned.

Prints median, p99 and max of each over ``--runs`` runs.  Not a test: it prints figures.

    .venv/bin/python bench/critical_pod.py --runs 20
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sluicegate.agent.cgroups import CgroupDriver, NoCgroups, detect  # noqa: E402
from sluicegate.agent.monitor import Monitor  # noqa: E402
from sluicegate.agent.node import AgentNode  # noqa: E402
from sluicegate.agent.pod import Container, Pod  # noqa: E402
from sluicegate.agent.policy import SYSTEM_NODE_CRITICAL  # noqa: E402
from sluicegate.agent.runtime import ContainerState, PodRuntime, RuntimeConfig  # noqa: E402

CPU_PER_POD = 1000


def wish(name: str, *, critical: bool) -> Pod:
    return Pod(
        uid=f"{name}-{uuid.uuid4().hex[:8]}", name=name, namespace="bench", workload="" if critical else name,
        pod_set="main", index=0, termination_grace_seconds=0.0,
        priority=SYSTEM_NODE_CRITICAL if critical else 0,
        priority_class="system-node-critical" if critical else "",
        containers=(Container(name="main", command=("sleep", "600"),
                              requests={"cpu": CPU_PER_POD, "memory": 16 << 20}),),
    )


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


async def clear(node: AgentNode) -> None:
    for st in node.runtime.pods():
        if not st.finished:
            await node.runtime.stop(st.uid, grace_seconds=0)
    for uid in list(node.meta):
        await node.remove(uid)


async def bench(*, runs: int, fillers: int, cgroups: bool) -> dict[str, list[float]]:
    data_dir = Path(tempfile.mkdtemp(prefix="sg-bench-critical-"))
    base = f"sg-bench-{uuid.uuid4().hex[:8]}"
    driver: CgroupDriver = detect(base=base) if cgroups else NoCgroups()
    print(f"cgroups: {driver.describe()}", file=sys.stderr)
    monitor = Monitor()
    runtime = PodRuntime(data_dir=data_dir, cgroups=driver, monitor=monitor,
                         config=RuntimeConfig(exit_poll_seconds=0.01, drain_poll_seconds=0.005))
    await runtime.adopt(None)
    allocatable = {"cpu": fillers * CPU_PER_POD, "memory": 64 << 30, "pods": 110}
    node = AgentNode(name="bench", data_dir=data_dir, runtime=runtime, monitor=monitor, capacity=allocatable,
                     allocatable=allocatable, clock=time.time)
    out: dict[str, list[float]] = {"victim gone": [], "process started": [], "admitted and started": []}
    try:
        for _ in range(runs):
            await clear(node)
            filler_wishes = [wish(f"filler-{i}", critical=False) for i in range(fillers)]
            for w in filler_wishes:
                await node.run_pod(w)
            crit = wish("critical", critical=True)
            t_wall, t0 = time.time(), time.perf_counter()
            await node.run_pod(crit)
            returned = time.perf_counter() - t0
            st = runtime.status(crit.uid)
            if st is None or st.containers[0].state is not ContainerState.RUNNING:
                raise RuntimeError(f"the critical pod did not start: {st}")
            victims = [w for w in filler_wishes if (s := runtime.status(w.uid)) is not None and s.finished]
            if len(victims) != 1:
                raise RuntimeError(f"expected one victim, got {len(victims)}")
            victim = runtime.status(victims[0].uid)
            assert victim is not None and victim.containers[0].terminated is not None
            started_at = st.containers[0].started_at or t_wall
            out["victim gone"].append(victim.containers[0].terminated.finished_at - t_wall)
            out["process started"].append(started_at - t_wall)
            out["admitted and started"].append(returned)
        await clear(node)
    finally:
        await runtime.close()
        await driver.sweep(keep=frozenset())
        await driver.remove_base()
        shutil.rmtree(data_dir, ignore_errors=True)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--fillers", type=int, default=2, help="pods filling the node (one is preempted per run)")
    p.add_argument("--no-cgroups", action="store_true", help="run pods without cgroups even where writable")
    ns = p.parse_args()
    # The agent logs every preemption as a warning; here that is the point, not news.
    logging.basicConfig(level=logging.ERROR, format="%(levelname)s %(name)s: %(message)s")
    results = asyncio.run(bench(runs=ns.runs, fillers=ns.fillers, cgroups=not ns.no_cgroups))
    print(f"critical pod on a full node ({ns.fillers} fillers, grace 0), {ns.runs} runs, from arrival:")
    for what, values in results.items():
        ms = [v * 1000 for v in values]
        print(f"  {what:22s} median {statistics.median(ms):7.1f} ms   p99 {pct(ms, 0.99):7.1f} ms   "
              f"max {max(ms):7.1f} ms")


if __name__ == "__main__":
    main()
