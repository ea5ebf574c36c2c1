"""``sluicectl simulate``: one scheduling cycle of the real scheduler over YAML files.

The documents are loaded through the same path a restarting controller
uses (an in-memory store, then :meth:`Manager.load`), so workloads that
carry ``status.admission`` and a true QuotaReserved condition hold quota,
and everything else waits in its queue.  Then exactly one cycle runs; the
reservations Backfill queues hold after it are listed too.

Without ``v1`` Node documents the cycle is quota-only.  With them, pods are
placed on those nodes (their labels, taints and allocatable; admitted
workloads' recorded pods use them) and pod sets on a TAS flavor get a topology
assignment, listed with the decision.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from sluicegate.controller.errors import InvalidArgument
from sluicegate.controller.manager import KIND_OF, Manager, ref_of
from sluicegate.controller.nodes import NodeState
from sluicegate.controller.podgroups import GroupProblem, queues_as_cluster_queues, resolve
from sluicegate.controller.scheduling.cycle import EntryStatus
from sluicegate.controller.store import Put
from sluicegate.controller.store.memory import MemoryStore
from sluicegate.manifest.decode import decode
from sluicegate.manifest.encode import encode, topology_assignment_doc
from sluicegate.manifest.errors import ManifestError
from sluicegate.manifest.loader import RawDocument
from sluicegate.manifest.timefmt import format_rfc3339
from sluicegate.model.config import ControllerConfig
from sluicegate.model.objects import SimulatedNode
from sluicegate.model.podgroups import PodGroup
from sluicegate.model.workloads import Workload
from sluicegate.quantity import format_canonical

_RESULT = {
    EntryStatus.ASSUMED: "Admitted",
    EntryStatus.PREEMPTING: "Preempting",
}


def simulate(docs: Sequence[RawDocument]) -> dict[str, Any]:
    config = ControllerConfig()
    objs: list[Any] = []
    errors: list[str] = []
    for doc in docs:
        try:
            obj = decode(doc, source=doc.source)
        except ManifestError as exc:
            errors.append(str(exc))
            continue
        if isinstance(obj, ControllerConfig):
            config = obj
            continue
        objs.append(obj)
    if errors:
        raise InvalidArgument("", "\n".join(errors))
    # kube-batch Queues become ClusterQueues, and Jobs join their PodGroups, as on a controller.
    try:
        objs = queues_as_cluster_queues(objs, {}, fair_sharing=config.fair_sharing.enabled)
    except GroupProblem as exc:
        raise InvalidArgument(exc.field, str(exc)) from None
    groups = {(o.namespace, o.name): o for o in objs if isinstance(o, PodGroup)}

    nodes = [o for o in objs if isinstance(o, SimulatedNode)]
    objs = [o for o in objs if not isinstance(o, SimulatedNode)]
    store = MemoryStore()
    manager = Manager(store, clock=lambda: 0.0, config=config, placement=bool(nodes))
    for n in nodes:
        manager.fleet.registry.nodes[n.name] = NodeState(n.name, dict(n.labels), dict(n.allocatable),
                                                         dict(n.allocatable), taints=n.taints)
    # Classes first, so workload priorities resolve as the controller would.
    for obj in objs:
        if KIND_OF[type(obj)] in ("WorkloadPriorityClass", "PriorityClass"):
            manager.apply_to_cache(obj)
    puts: list[Put] = []
    for order, obj in enumerate(objs):
        if isinstance(obj, Workload):
            # Missing identity: document order stands in for creation order.
            obj = replace(
                obj,
                uid=obj.uid or f"simulate-{order:06d}",
                creation_timestamp=obj.creation_timestamp or float(order),
            )
            obj = manager.resolve_priority(resolve(groups, obj))
        kind, ns, name = ref_of(obj)
        puts.append(Put(kind, ns, name, json.dumps(encode(obj)).encode()))
    store.write(puts)
    manager.load()
    stats = manager.schedule_once()
    decisions: list[dict[str, Any]] = []
    for e in stats.entries:
        decision: dict[str, Any] = {}
        admitted = manager.cache.workloads.get(e.key)
        admission = admitted.status.admission if admitted is not None else None
        if e.status is EntryStatus.ASSUMED and admission is not None:
            topology = {psa.name: topology_assignment_doc(psa.topology_assignment)
                        for psa in admission.pod_set_assignments if psa.topology_assignment is not None}
            if topology:
                decision["topologyAssignments"] = topology
        decisions.append(
            {
                "workload": e.key,
                "clusterQueue": e.cluster_queue,
                "result": _RESULT.get(e.status, "Pending"),
                "flavors": e.flavors(),
                "preempted": [{"workload": t.victim.key, "reason": t.reason} for t in e.targets]
                if e.status is EntryStatus.PREEMPTING
                else [],
                "message": e.message,
                **decision,
            }
        )
    decisions.sort(key=lambda d: d["workload"])
    out: dict[str, Any] = {"decisions": decisions}
    reservations = manager.scheduler.backfill.reservations
    if reservations:
        # Backfill queues: what each blocked workload was promised, and when (in precedence order).
        out["reservations"] = [
            {
                "clusterQueue": r.cq,
                "workload": r.workload,
                "start": format_rfc3339(r.start),
                "durationSeconds": None if r.duration == float("inf") else r.duration,
                "quota": {f"{fr.flavor}/{fr.resource}": format_canonical(fr.resource, v) for fr, v in r.need.items()},
            }
            for r in reservations
        ]
    return out
