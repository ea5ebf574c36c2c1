#!/usr/bin/env python3
"""CPU of TAS placement alone, as the TAS replay drives it, without the rest of the controller.

Builds the 640 nodes of ``configs/tas`` (1 block x 10 racks x 64 nodes of 96
CPUs, labelled as the replay's fake nodes register) and the scheduler's
placement cache, then runs scheduling cycles: each places ``--per-cycle``
workloads of the replay's mix (its workloads in creation order: 2, 4 or 8
pods of 500m, 1250m or 2500m, rack required, preferred or balanced) with a
``CyclePlacer``, binds their pods to the nodes (a changed node gets a new view,
the others keep theirs, as the controller's node registry does), and releases
the workloads placed ``--hold`` cycles earlier.  Prints the process CPU spent
in the placement calls (placer construction included), per placement and per
cycle, the best of ``--repeat`` runs, and a digest of every pod's node.  Not a test: it prints figures.

``--src DIR`` imports sluicegate from another checkout (e.g. a ``git worktree``
of the base commit), so both sides run on one machine back to back::

    .venv/bin/python bench/kueue_scheduler/tas_placement.py
    .venv/bin/python bench/kueue_scheduler/tas_placement.py --src /work/wt/base
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cycles", type=int, default=2000)
    p.add_argument("--per-cycle", type=int, default=8, help="workloads placed per cycle (the replay: about 7)")
    p.add_argument("--hold", type=int, default=60, help="cycles a placed workload keeps its pods bound")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--src", type=Path, help="checkout whose sluicegate package to import")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    ns = _args(argv)
    sys.path.insert(0, str(ns.src.resolve() if ns.src else HERE.parents[1]))
    # Imported here so that --src decides which sluicegate is measured.
    from bench.kueue_scheduler.config import expand, load_config  # noqa: PLC0415
    from bench.kueue_scheduler.generator import topology_annotations  # noqa: PLC0415
    from sluicegate.controller.scheduling.placement import CyclePlacer, NodeView, PlacementCache  # noqa: PLC0415
    from sluicegate.model import FlavorName, ResourceFlavor  # noqa: PLC0415
    from sluicegate.model.topology import (  # noqa: PLC0415
        PREFERRED_TOPOLOGY_ANNOTATION,
        REQUIRED_TOPOLOGY_ANNOTATION,
        SLICE_REQUIRED_TOPOLOGY_ANNOTATION,
        SLICE_SIZE_ANNOTATION,
        Topology,
        TopologyRequest,
    )
    from sluicegate.model.workloads import PodSet  # noqa: PLC0415

    plan = expand(load_config(HERE / "configs" / "tas" / "generator.yaml"))
    assert plan.topology is not None and plan.flavor is not None
    topology = Topology(plan.topology.name, tuple(lv.node_label for lv in plan.topology.levels))
    flavor = FlavorName(plan.flavor.name)
    flavors = {flavor: ResourceFlavor(flavor, {plan.flavor.node_label: "tas"} if plan.flavor.node_label else {},
                                      topology_name=topology.name)}
    base = {n.name: NodeView(n.name, dict(n.labels), {"cpu": n.cpu_m, "memory": n.memory}) for n in plan.nodes}

    def request(annotations: dict[str, str]) -> TopologyRequest | None:
        if REQUIRED_TOPOLOGY_ANNOTATION in annotations:
            return TopologyRequest(required=annotations[REQUIRED_TOPOLOGY_ANNOTATION])
        if PREFERRED_TOPOLOGY_ANNOTATION in annotations:
            return TopologyRequest(preferred=annotations[PREFERRED_TOPOLOGY_ANNOTATION])
        if SLICE_REQUIRED_TOPOLOGY_ANNOTATION in annotations:
            return TopologyRequest(slice_required=annotations[SLICE_REQUIRED_TOPOLOGY_ANNOTATION],
                                   slice_size=int(annotations[SLICE_SIZE_ANNOTATION]))
        return None

    mix = [PodSet(name="main", count=w.pod_count, requests={"cpu": w.request_m},
                  topology_request=request(topology_annotations(w))) for w in plan.workloads]

    def one_run() -> dict[str, Any]:
        views = dict(base)
        requested: dict[str, dict[str, int]] = {}
        cache = PlacementCache.of([])
        held: deque[list[tuple[str, int]]] = deque()
        cpu = 0.0
        placed = failed = 0
        digest = hashlib.sha256()
        for cycle in range(ns.cycles):
            # The pods placed --hold cycles ago end: their nodes get new views.
            if len(held) >= ns.hold:
                for node, cpu_m in held.popleft():
                    requested[node]["cpu"] -= cpu_m
                    views[node] = NodeView(node, base[node].labels, base[node].allocatable, dict(requested[node]))
            nodes = tuple(views[name] for name in sorted(views))
            started = time.process_time()
            placer = CyclePlacer(nodes, flavors, {topology.name: topology}, cache)
            for i in range(ns.per_cycle):
                ps = mix[(cycle * ns.per_cycle + i) % len(mix)]
                if placer.place(f"w{cycle}-{i}", [(ps, ps.count, {"cpu": flavor})]) is None:
                    placed += 1
                else:
                    failed += 1
            cpu += time.process_time() - started
            bound: list[tuple[str, int]] = []
            for key, placements in placer.placements.items():
                digest.update(f"{key}:{','.join(p.node for p in placements)};".encode())
                for p in placements:
                    bucket = requested.setdefault(p.node, {"cpu": 0})
                    bucket["cpu"] += p.requests["cpu"]
                    bound.append((p.node, p.requests["cpu"]))
            for node in {n for n, _ in bound}:
                views[node] = NodeView(node, base[node].labels, base[node].allocatable, dict(requested[node]))
            held.append(bound)
        return {"cpu_s": cpu, "placed": placed, "failed": failed, "digest": digest.hexdigest()[:16]}

    runs = [one_run() for _ in range(ns.repeat)]
    best = min(runs, key=lambda r: r["cpu_s"])
    out = {
        "src": str(ns.src or HERE.parents[1]), "nodes": len(base), "cycles": ns.cycles, "perCycle": ns.per_cycle,
        "hold": ns.hold, "placed": best["placed"], "failed": best["failed"],
        # Equal on two checkouts: both chose the same nodes for every pod.
        "placementsDigest": best["digest"],
        "cpuSecondsPerRun": [round(r["cpu_s"], 3) for r in runs],
        "usPerPlacement": round(best["cpu_s"] / max(1, best["placed"] + best["failed"]) * 1e6, 1),
        "usPerCycle": round(best["cpu_s"] / ns.cycles * 1e6, 1),
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
