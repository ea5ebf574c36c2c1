"""Pods of an admitted workload: where each runs and how it is doing.

Kept in the workload's status (``WorkloadStatus.pods``, stored as the
document's ``status.extra.pods``) so they are stored with it (written before
any agent is told) and survive a controller restart.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sluicegate.model.copying import copier
from sluicegate.model.slotinit import slot_init

if TYPE_CHECKING:
    from sluicegate.model.workloads import Condition, Workload

PENDING, RUNNING, SUCCEEDED, FAILED = "Pending", "Running", "Succeeded", "Failed"
TERMINAL = frozenset({SUCCEEDED, FAILED})


@slot_init
@dataclass(frozen=True, slots=True)
class PodRecord:
    uid: str
    name: str
    pod_set: str
    index: int
    node: str
    requests: Mapping[str, int] = field(default_factory=dict)
    phase: str = PENDING
    reason: str = ""
    message: str = ""
    exit_code: int | None = None
    ready: bool = False
    restarts: int = 0
    started_at: float | None = None
    finished_at: float | None = None
    # The agent confirmed every process of the pod is gone (or the node is lost for good).
    exited: bool = False
    # A Job retry or replacement took this pod's place (it no longer counts as current).
    replaced: bool = False
    # Kubernetes QoS class, as the node computed it.
    qos_class: str = ""

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL

    def to_json(self) -> dict[str, Any]:
        # Written at every store of its workload: plain tests, keys in a fixed order, defaults left out.
        d: dict[str, Any] = {
            "uid": self.uid, "name": self.name, "podSet": self.pod_set, "index": self.index, "node": self.node,
            "requests": dict(self.requests), "phase": self.phase,
        }
        if self.reason:
            d["reason"] = self.reason
        if self.message:
            d["message"] = self.message
        if self.exit_code is not None:
            d["exitCode"] = self.exit_code
        if self.ready:
            d["ready"] = True
        if self.restarts:
            d["restarts"] = self.restarts
        if self.started_at is not None:
            d["startedAt"] = self.started_at
        if self.finished_at is not None:
            d["finishedAt"] = self.finished_at
        if self.exited:
            d["exited"] = True
        if self.replaced:
            d["replaced"] = True
        if self.qos_class:
            d["qosClass"] = self.qos_class
        return d

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> PodRecord:
        return PodRecord(
            uid=str(d["uid"]), name=str(d["name"]), pod_set=str(d["podSet"]), index=int(d["index"]),
            node=str(d["node"]), requests={str(k): int(v) for k, v in dict(d.get("requests", {})).items()},
            phase=str(d.get("phase", PENDING)), reason=str(d.get("reason", "")), message=str(d.get("message", "")),
            exit_code=None if d.get("exitCode") is None else int(d["exitCode"]), ready=bool(d.get("ready", False)),
            restarts=int(d.get("restarts", 0)), started_at=d.get("startedAt"), finished_at=d.get("finishedAt"),
            exited=bool(d.get("exited", False)), replaced=bool(d.get("replaced", False)),
            qos_class=str(d.get("qosClass", "")),
        )


# ``copy_with(rec, phase=..., ..., qos_class=...)``: the record as a report of its node leaves it
# (Fleet.pod_status), made without copy_with's keyword handling; the arguments in this order.
as_reported: Callable[..., PodRecord] = copier(
    PodRecord, ("phase", "reason", "message", "exit_code", "ready", "restarts", "started_at", "finished_at",
                "qos_class"))


def pods_or_last(wl: Workload) -> tuple[PodRecord, ...]:
    """The current pods, or those of the last admission if it was given back (their logs remain)."""
    return wl.status.pods or wl.status.last_pods


# Copiers (see copying.copier) for the two changes every pod report makes to its workload: made at
# first use, since the workload model imports this module.
_copiers: dict[str, Callable[..., Any]] = {}


def _copier(name: str) -> Callable[..., Any]:
    from sluicegate.model.workloads import Workload, WorkloadStatus

    _copiers.update(status=copier(Workload, ("status",)), pods=copier(WorkloadStatus, ("pods",)),
                    conditions=copier(WorkloadStatus, ("conditions",)),
                    settled=copier(WorkloadStatus, ("pods", "conditions", "reclaimable_pods")))
    return _copiers[name]


def with_pods(wl: Workload, pods: Sequence[PodRecord]) -> Workload:
    """``wl`` with these pods in its status (``copy_with`` of its status and of it, made cheaper)."""
    set_status = _copiers.get("status") or _copier("status")
    return set_status(wl, _copiers["pods"](wl.status, pods if type(pods) is tuple else tuple(pods)))  # type: ignore[no-any-return]


def with_conditions(wl: Workload, conditions: tuple[Condition, ...]) -> Workload:
    """``wl`` with these status conditions (``copy_with`` of its status and of it, made cheaper)."""
    set_status = _copiers.get("status") or _copier("status")
    return set_status(wl, _copiers["conditions"](wl.status, conditions))  # type: ignore[no-any-return]


def with_status(wl: Workload, pods: tuple[PodRecord, ...], conditions: tuple[Condition, ...],
                reclaimable_pods: Mapping[str, int]) -> Workload:
    """``wl`` with these pods, conditions and reclaimable counts in its status (what settling a report
    changes), in one copy of the status and one of the workload."""
    set_status = _copiers.get("status") or _copier("status")
    return set_status(wl, _copiers["settled"](wl.status, pods, conditions, reclaimable_pods))  # type: ignore[no-any-return]

