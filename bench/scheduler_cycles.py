#!/usr/bin/env python3
"""Scheduling-cycle throughput: N ClusterQueues in cohorts, M pending workloads.

Builds the real controller Manager on a real store (SQLite by default, or
``--store postgresql``: a private server with fsync on, writes fenced by the
lease epoch as a leader's are; every admission is committed before it
counts), submits M one-CPU workloads spread over the queues (in batches of
500, one transaction each, as CreateStream stores them), then runs scheduling cycles until nothing more fits and prints:
admissions per second, cycles, per-cycle time (median/p99) and the process's
peak RSS.  Not a test: it prints figures.

    .venv/bin/python bench/scheduler_cycles.py --cluster-queues 1000 --workloads 50000
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sluicegate.common.heapgc import HEAP_GC  # noqa: E402
from sluicegate.controller.manager import Manager  # noqa: E402
from sluicegate.controller.store import open_store  # noqa: E402
from sluicegate.controller.store.memory import MemoryStore  # noqa: E402
from sluicegate.manifest.loader import RawDocument  # noqa: E402
from sluicegate.model.config import AdmissionFairSharingConfig, ControllerConfig  # noqa: E402


def queues(n_cq: int, n_cohorts: int, nominal: int, afs_lqs: int = 0) -> list[RawDocument]:
    """``afs_lqs`` > 0: every ClusterQueue uses Admission Fair Sharing, with that many LocalQueues (weights 1..k)."""
    docs = [{"apiVersion": "sluicegate.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default"}}]
    for i in range(n_cq):
        spec = {"cohortName": f"cohort-{i % n_cohorts}", "namespaceSelector": {},
                "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                    {"name": "default", "resources": [{"name": "cpu", "nominalQuota": str(nominal)}]}]}]}
        if afs_lqs:
            spec["admissionScope"] = {"admissionMode": "UsageBasedAdmissionFairSharing"}
        docs.append({"apiVersion": "sluicegate.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": f"cq-{i}"},
                     "spec": spec})
        for j in range(max(1, afs_lqs)):
            lq_spec: dict[str, object] = {"clusterQueue": f"cq-{i}"}
            if afs_lqs:
                lq_spec["fairSharing"] = {"weight": str(j + 1)}
            docs.append({"apiVersion": "sluicegate.io/v1beta2", "kind": "LocalQueue",
                         "metadata": {"name": _lq(i, j, afs_lqs), "namespace": "default"}, "spec": lq_spec})
    return [RawDocument(source=f"bench#{i}", body=d) for i, d in enumerate(docs)]


def _lq(cq: int, j: int, afs_lqs: int) -> str:
    return f"lq-{cq}-{j}" if afs_lqs else f"lq-{cq}"


def workload(i: int, n_cq: int, afs_lqs: int = 0) -> RawDocument:
    return RawDocument(source="bench", body={
        "apiVersion": "sluicegate.io/v1beta2", "kind": "Workload",
        "metadata": {"name": f"wl-{i}", "namespace": "default"},
        "spec": {"queueName": _lq(i % n_cq, (i // n_cq) % max(1, afs_lqs), afs_lqs), "priority": i % 3, "podSets": [{"name": "main", "count": 1, "template": {"spec": {
            "containers": [{"name": "c", "command": ["true"], "resources": {"requests": {"cpu": "1"}}}]}}}]},
    })


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cluster-queues", type=int, default=1000)
    p.add_argument("--cohorts", type=int, default=10)
    p.add_argument("--workloads", type=int, default=50_000)
    p.add_argument("--nominal", type=int, default=20, help="cpus of nominal quota per ClusterQueue")
    p.add_argument("--store", choices=["sqlite", "memory", "postgresql"], default="sqlite",
                   help="postgresql: a private server (tests/pg.py, fsync on, TCP on 127.0.0.1), writes fenced")
    p.add_argument("--admission-fair-sharing", type=int, default=0, metavar="LQS",
                   help="every ClusterQueue orders by Admission Fair Sharing over LQS LocalQueues (0: off)")
    ns = p.parse_args()
    # The collector policy the controller process runs with.
    HEAP_GC.install()

    tmp = tempfile.TemporaryDirectory()
    pg = None
    if ns.store == "postgresql":
        from tests.pg import PostgresServer  # noqa: PLC0415

        pg = PostgresServer(fsync=True)
        store = open_store(pg.create_database())
        # As a leader writes: every transaction checks the lease's epoch first.
        store.set_epoch(0)  # type: ignore[attr-defined]
    else:
        store = open_store(str(Path(tmp.name) / "bench.db")) if ns.store == "sqlite" else MemoryStore()
    clock_t = [0.0]

    def clock() -> float:
        clock_t[0] += 0.001
        return 1_700_000_000.0 + clock_t[0]

    afs_lqs = ns.admission_fair_sharing
    config = ControllerConfig(admission_fair_sharing=AdmissionFairSharingConfig(
        usage_half_life_seconds=3600.0, usage_sampling_interval_seconds=60.0)) if afs_lqs else None
    m = Manager(store, clock=clock, placement=False, config=config)
    t0 = time.perf_counter()
    m.apply(queues(ns.cluster_queues, ns.cohorts, ns.nominal, afs_lqs))
    t_apply = time.perf_counter() - t0

    t0 = time.perf_counter()
    # In batches, one transaction each, as the server stores what a CreateStream brings in.
    for start in range(0, ns.workloads, 500):
        m.create_workloads([workload(i, ns.cluster_queues, afs_lqs) for i in range(start, min(start + 500, ns.workloads))])
    t_submit = time.perf_counter() - t0

    cycle_times: list[float] = []
    admitted = 0
    # CPU of the cycles that admitted, and of the others (the heads that no longer fit, the parking of
    # their scheduling shapes): what a larger pending population adds shows in the second.
    cpu_admitting = cpu_other = 0.0
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    for _ in range(ns.workloads + 10):
        c0 = time.perf_counter()
        p0 = time.process_time()
        stats = m.schedule_once()
        cycle_times.append(time.perf_counter() - c0)
        if stats.admitted:
            cpu_admitting += time.process_time() - p0
        else:
            cpu_other += time.process_time() - p0
        admitted += stats.admitted
        if not stats.made_progress:
            break
    t_sched = time.perf_counter() - t0
    cpu_sched = time.process_time() - cpu0
    memo = getattr(getattr(m, "scheduler", None), "memo", None)
    peak_rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    cycle_times.sort()
    result = {
        "cluster_queues": ns.cluster_queues,
        "cohorts": ns.cohorts,
        "workloads": ns.workloads,
        "store": ns.store,
        "admission_fair_sharing_local_queues": afs_lqs,
        "apply_seconds": round(t_apply, 3),
        "submit_seconds": round(t_submit, 3),
        "submits_per_second": round(ns.workloads / t_submit),
        "admitted": admitted,
        "still_pending": ns.workloads - admitted,
        "scheduling_seconds": round(t_sched, 3),
        "admissions_per_second": round(admitted / t_sched) if t_sched else None,
        # What a shared machine's load does not change: the process's CPU for the scheduling phase.
        "scheduling_cpu_seconds": round(cpu_sched, 3),
        "admissions_per_cpu_second": round(admitted / cpu_sched) if cpu_sched else None,
        "cpu_seconds_admitting_cycles": round(cpu_admitting, 3),
        "cpu_seconds_other_cycles": round(cpu_other, 3),
        # Heads answered from an earlier cycle's NoFit (their quota path unchanged).
        "remembered_answers": memo.hits if memo is not None else None,
        "cycles": len(cycle_times),
        "cycle_ms_median": round(statistics.median(cycle_times) * 1000, 2),
        "cycle_ms_p99": round(cycle_times[int(len(cycle_times) * 0.99) - 1] * 1000, 2),
        "peak_rss_mib": round(peak_rss_mib, 1),
    }
    print(json.dumps(result, indent=2))
    store.close()
    tmp.cleanup()
    if pg is not None:
        pg.close()


if __name__ == "__main__":
    main()
