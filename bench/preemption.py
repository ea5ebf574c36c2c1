#!/usr/bin/env python3
"""Preemption: decision time over ~1,000 admitted candidates, and end-to-end latency on real agents.

Part 1 (decision): a cohort of 50 ClusterQueues holding 1,000 admitted
one-CPU workloads (49 queues borrowing from the first); a high-priority
workload in the first queue must reclaim 30 CPUs.  Times the real
scheduling cycle (nomination + candidate search + minimisation) on the
controller's own snapshot, repeatedly, and prints median and p99.

Part 2 (end to end, --e2e): a real controller and two real agents
(60 CPUs each) full of 120 one-CPU low-priority pods; then a 20-CPU
high-priority workload (20 pods).  Prints the time from its submission to
all of its pods running, with the victims' grace period 0.

    .venv/bin/python bench/preemption.py [--e2e]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sluicegate.controller.manager import Manager  # noqa: E402
from sluicegate.controller.scheduling.cycle import EntryStatus, run_cycle  # noqa: E402
from sluicegate.controller.scheduling.fairsharing import order_for  # noqa: E402
from sluicegate.controller.store.memory import MemoryStore  # noqa: E402
from sluicegate.manifest.loader import RawDocument  # noqa: E402


def cq_doc(name: str, nominal: int) -> dict:
    return {"apiVersion": "sluicegate.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": {"cohortName": "big", "namespaceSelector": {},
                     "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
                     "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                         {"name": "default", "resources": [{"name": "cpu", "nominalQuota": str(nominal)}]}]}]}}


def wl_doc(name: str, queue: str, cpu: str, priority: int, count: int = 1, grace: int | None = None,
           command: list[str] | None = None) -> dict:
    spec: dict = {"containers": [{"name": "main", "command": command or ["true"], "resources": {"requests": {"cpu": cpu}}}]}
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    return {"apiVersion": "sluicegate.io/v1beta2", "kind": "Workload", "metadata": {"name": name, "namespace": "default"},
            "spec": {"queueName": queue, "priority": priority,
                     "podSets": [{"name": "main", "count": count, "template": {"spec": spec}}]}}


def decision_bench(repeats: int) -> dict:
    t = [0.0]

    def clock() -> float:
        t[0] += 0.001
        return 1_700_000_000 + t[0]

    m = Manager(MemoryStore(), clock=clock, placement=False)
    docs = [{"apiVersion": "sluicegate.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default"}}]
    docs.append(cq_doc("cq-0", 70))
    docs += [cq_doc(f"cq-{i}", 19) for i in range(1, 50)]
    docs += [{"apiVersion": "sluicegate.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": f"lq-{i}", "namespace": "default"},
              "spec": {"clusterQueue": f"cq-{i}"}} for i in range(50)]
    m.apply([RawDocument(source="bench", body=d) for d in docs])
    for i in range(50):
        for j in range(20):
            m.create_workload(RawDocument(source="bench", body=wl_doc(f"w-{i}-{j}", f"lq-{i}", "1", priority=j % 5)))
            for _ in range(3):
                if not m.schedule_once().made_progress:
                    break
    candidates = sum(len(v) for v in m.cache.admitted.values())
    m.create_workload(RawDocument(source="bench", body=wl_doc("urgent", "lq-0", "30", priority=1000)))
    heads = m.cache.queues.heads()
    times: list[float] = []
    targets = 0
    for _ in range(repeats):
        snap = m.cache.snapshot(clock())
        t0 = time.perf_counter()
        entries = run_cycle(heads, snap, preemptor=m.scheduler.preemptor, ordering=order_for(snap))
        times.append(time.perf_counter() - t0)
        e = entries[0]
        assert e.status is EntryStatus.PREEMPTING, (e.status, e.message)
        targets = len(e.targets)
    times.sort()
    return {
        "cluster_queues": 50,
        "admitted_candidates": candidates,
        "victims_chosen": targets,
        "decision_ms_median": round(statistics.median(times) * 1000, 3),
        "decision_ms_p99": round(times[int(len(times) * 0.99) - 1] * 1000, 3),
        "repeats": repeats,
    }


def _when(wl: dict, cond: str, status: str = "True") -> float | None:
    for c in wl.get("status", {}).get("conditions", []):
        if c["type"] == cond and c["status"] == status:
            return dt.datetime.fromisoformat(c["lastTransitionTime"]).timestamp()
    return None


def preemption_legs(t0: float, acked: float, urgent: dict, low: list[dict]) -> dict:
    """Where the time from submission to the preemptor's pods running went, leg by leg (ms from submission).

    Controller-stamped: the victims' Evicted condition (preemption decided,
    stop commands queued to the agents in the same commit), their
    QuotaReserved=False (quota freed, once the agents reported the pods
    gone), the preemptor's QuotaReserved and Admitted.  Agent-stamped: the
    victims' pods' exit and the preemptor's pods' start.  One machine, one clock.
    """
    victims = [w for w in low if _when(w, "Evicted") is not None]
    decided = [t for w in victims if (t := _when(w, "Evicted")) is not None]
    freed = [t for w in victims if (t := _when(w, "QuotaReserved", "False")) is not None]
    gone = [float(p["finishedAt"]) for w in victims
            for p in (w.get("status", {}).get("extra", {}).get("lastPods")
                      or w.get("status", {}).get("extra", {}).get("pods") or []) if p.get("finishedAt")]
    pods = urgent.get("status", {}).get("extra", {}).get("pods", [])
    started = [float(p["startedAt"]) for p in pods if p.get("startedAt")]

    def ms(t: float | None) -> float | None:
        return None if t is None else round((t - t0) * 1000, 1)

    return {
        "victims": len(victims),
        "create_acknowledged": ms(acked),
        "preemption_decided_first_last": [ms(min(decided, default=None)), ms(max(decided, default=None))],
        "victim_pods_exited_first_last": [ms(min(gone, default=None)), ms(max(gone, default=None))],
        "victim_quota_freed_first_last": [ms(min(freed, default=None)), ms(max(freed, default=None))],
        "preemptor_quota_reserved": ms(_when(urgent, "QuotaReserved")),
        "preemptor_admitted": ms(_when(urgent, "Admitted")),
        "preemptor_pods_started_first_last": [ms(min(started, default=None)), ms(max(started, default=None))],
    }


async def e2e() -> dict:
    import tempfile

    from sluicegate.client import Client, Document

    sys.path.insert(0, str(ROOT / "bench" / "e2e"))
    from run import remove_cgroup_bases, start  # type: ignore[import-not-found]

    with tempfile.TemporaryDirectory() as d:
        tmp = Path(os.environ.get("BENCH_KEEP_DIR") or d)
        tmp.mkdir(parents=True, exist_ok=True)
        procs = []
        try:
            ctl, info = start(["sluicegate.controller.server", "--store", str(tmp / "c.db"), "--listen", "127.0.0.1:0",
                               "--health-listen", "127.0.0.1:0", "--agent-heartbeat-interval", "1"],
                              tmp / "controller.log", tmp / "c.ready")
            procs.append(ctl)
            for name in ("pre-a", "pre-b"):
                a, _ = start(["sluicegate.agent.server", "--controller", info["grpc"], "--node-name", name,
                              "--data-dir", str(tmp / name), "--health-listen", "127.0.0.1:0",
                              "--allocatable", "cpu=60,memory=64Gi",
                              # Its own cgroup tree: an agent removes cgroups it does not know at start-up,
                              # which must never be another agent's running pods.
                              "--cgroup-base", f"sg-bench-{name}-{os.getpid()}"],
                             tmp / f"{name}.log", tmp / f"{name}.ready")
                procs.append(a)
            queue = [{"apiVersion": "sluicegate.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default"}},
                     cq_doc("cq", 120),
                     {"apiVersion": "sluicegate.io/v1beta2", "kind": "LocalQueue",
                      "metadata": {"name": "lq", "namespace": "default"}, "spec": {"clusterQueue": "cq"}}]
            async with Client(info["grpc"], timeout=60) as c:
                await c.apply([Document(json.dumps(q), "bench") for q in queue])
                for i in range(120):
                    await c.create_workload(Document(json.dumps(
                        wl_doc(f"low-{i:03d}", "lq", "1", 1, grace=0, command=["sleep", "600"])), "bench"))
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline:
                    wls = await c.list_workloads(namespace="default", state="Admitted")
                    running = sum(1 for w in wls for p in w.get("status", {}).get("extra", {}).get("pods", [])
                                  if p.get("phase") == "Running")
                    if running == 120:
                        break
                    await asyncio.sleep(0.2)
                t0 = time.time()
                await c.create_workload(Document(json.dumps(wl_doc("urgent", "lq", "1", 1000, count=20, grace=0,
                                                                   command=["sleep", "600"])), "bench"))
                acked = time.time()
                while time.monotonic() < deadline + 60:
                    w = await c.get_workload("urgent")
                    pods = w.get("status", {}).get("extra", {}).get("pods", [])
                    if len(pods) == 20 and all(p.get("phase") == "Running" for p in pods):
                        latency = max(p["startedAt"] for p in pods) - t0
                        break
                    await asyncio.sleep(0.01)
                else:
                    raise SystemExit("urgent workload never ran")
                legs = preemption_legs(t0, acked, w, [x for x in await c.list_workloads(namespace="default")
                                                      if x["metadata"]["name"].startswith("low-")])
                for w in await c.list_workloads(namespace="default"):
                    await c.delete_workload(w["metadata"]["name"])
            return {"low_priority_pods": 120, "preemptor_pods": 20, "submit_to_all_running_s": round(latency, 3),
                    "legs_ms": legs}
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                p.wait(timeout=60)
            remove_cgroup_bases(str(os.getpid()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--e2e", action="store_true")
    ns = ap.parse_args()
    result = {"decision": decision_bench(ns.repeats)}
    if ns.e2e:
        result["end_to_end"] = asyncio.run(e2e())
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
