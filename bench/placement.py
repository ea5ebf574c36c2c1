#!/usr/bin/env python3
"""Node placement cost against cluster size: microseconds per pod placed, and per scheduling cycle.

Builds ``--nodes`` node views (64 CPUs, 256 GiB, 110 pods each, partly
used, a tenth with a PreferNoSchedule taint) and places ``--pods`` one-pod
workloads (1 CPU, 1 GiB) in one scheduling cycle through the scheduler's
CyclePlacer, then prints the time per placement (``us_per_pod``).  Then
the real controller Manager (SQLite store) with as many registered nodes
admits ``--cycle-workloads`` one-pod workloads of one ClusterQueue, one per
cycle (a cycle takes one head per ClusterQueue), as a small cluster queue
does at a steady rate: ``us_per_cycle`` is what a cycle's node work adds
with the cluster's size.  ``--src`` imports another checkout, for
before/after figures on one machine.  Not a test: it prints figures.

    .venv/bin/python bench/placement.py --nodes 30 100 1000 3000
    .venv/bin/python bench/placement.py --src /work/wt/base
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, nargs="+", default=[30, 300, 1000, 3000])
    p.add_argument("--pods", type=int, default=2000, help="one-pod workloads placed per cluster size")
    p.add_argument("--cycle-workloads", type=int, default=2000)
    p.add_argument("--src", type=Path, default=Path(__file__).resolve().parents[1], help="checkout to import")
    ns = p.parse_args(argv)
    sys.path.insert(0, str(ns.src))
    from sluicegate.controller.scheduling.placement import CyclePlacer, NodeView, PlacementCache
    from sluicegate.model import FlavorName, ResourceFlavor
    from sluicegate.model.taints import PREFER_NO_SCHEDULE, Taint
    from sluicegate.model.workloads import PodSet

    flavors = {FlavorName("default"): ResourceFlavor(FlavorName("default"))}
    pod_set = PodSet(name="main", count=1, requests={"cpu": 1000, "memory": 1 << 30})
    assigned = {"cpu": FlavorName("default"), "memory": FlavorName("default")}
    out = []
    for n in ns.nodes:
        nodes = [NodeView(name=f"node-{i:05d}", labels={},
                          allocatable={"cpu": 64_000, "memory": 256 << 30, "pods": 110},
                          requested={"cpu": (i * 7919 % 48) * 1000, "memory": (i * 31 % 128) << 30},
                          taints=(Taint("soft", PREFER_NO_SCHEDULE),) if i % 10 == 0 else ())
                 for i in range(n)]
        placer = CyclePlacer(nodes, flavors, None, PlacementCache.of(nodes))
        pods = min(ns.pods, n * 16)  # each node holds at least 16 more pods
        t0 = time.perf_counter()
        for k in range(pods):
            failure = placer.place(f"w{k}", [(pod_set, 1, assigned)])
            assert failure is None, failure
        seconds = time.perf_counter() - t0
        out.append({"nodes": n, "pods": pods, "us_per_pod": round(seconds / pods * 1e6, 1),
                    "us_per_cycle": _cycles(n, ns.cycle_workloads)})
    print(json.dumps({"src": str(ns.src), "placements": out}))
    return 0


def _cycles(nodes: int, workloads: int) -> float:
    import tempfile

    from sluicegate.controller.manager import Manager
    from sluicegate.controller.store import open_store
    from sluicegate.manifest.loader import RawDocument

    class Unconnected:
        def send(self, command: object) -> None:
            pass

        def supersede(self, reason: str) -> None:
            pass

    with tempfile.TemporaryDirectory() as tmp:
        t = [1_700_000_000.0]

        def clock() -> float:
            t[0] += 0.0001
            return t[0]

        m = Manager(open_store(str(Path(tmp) / "bench.db")), clock=clock)
        docs = [{"apiVersion": "sluicegate.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default"}},
                {"apiVersion": "sluicegate.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
                 "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                     {"name": "default", "resources": [{"name": "cpu", "nominalQuota": str(workloads)}]}]}]}},
                {"apiVersion": "sluicegate.io/v1beta2", "kind": "LocalQueue",
                 "metadata": {"name": "lq", "namespace": "default"}, "spec": {"clusterQueue": "cq"}}]
        m.apply([RawDocument(source=f"bench#{i}", body=d) for i, d in enumerate(docs)])
        for i in range(nodes):
            m.fleet.register(name=f"node-{i:05d}", labels={}, capacity={"cpu": 64_000}, allocatable={"cpu": 64_000},
                             boot_id="b", agent_version="bench", health_address="", pods=[], session=Unconnected())
        m.create_workloads([RawDocument(source="bench", body={
            "apiVersion": "sluicegate.io/v1beta2", "kind": "Workload",
            "metadata": {"name": f"wl-{i}", "namespace": "default"},
            "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                "containers": [{"name": "c", "command": ["true"], "resources": {"requests": {"cpu": "1"}}}]}}}]},
        }) for i in range(workloads)])
        t0 = time.perf_counter()
        cycles = 0
        for _ in range(workloads + 10):
            cycles += 1
            if not m.schedule_once().made_progress:
                break
        seconds = time.perf_counter() - t0
        m.store.close()
    return round(seconds / cycles * 1e6, 1)


if __name__ == "__main__":
    sys.exit(main())
