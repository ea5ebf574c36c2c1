"""Backfill through the controller (Manager, quota-only mode): reservations survive between
cycles, later workloads run ahead only where they cannot delay one, and the messages say so."""

from __future__ import annotations

import json

from sluicegate.controller.manager import Manager, workload_state
from sluicegate.controller.store.memory import MemoryStore
from sluicegate.manifest.loader import RawDocument, parse_text
from tests.builders import container_doc, workload_doc

from .test_manager import QUEUES, settle

EPOCH = 1_767_225_600.0  # 2026-01-01T00:00:00Z


def limited(name: str, cpu: str, limit: int | None) -> RawDocument:
    body = workload_doc(name, container_doc(name="c", requests={"cpu": cpu}))
    if limit is not None:
        body["spec"]["maximumExecutionTimeSeconds"] = limit
    return parse_text(json.dumps(body), name, fmt="json")[0]


def message(m: Manager, name: str) -> str:
    cond = m.get_workload("default", name).status.condition("QuotaReserved")
    return cond.message if cond is not None else ""


def test_backfill_in_the_controller() -> None:
    now = [EPOCH]
    m = Manager(MemoryStore(), clock=lambda: now[0], placement=False)
    m.apply(parse_text(QUEUES % {"strategy": "Backfill"}, "queues.yaml"))  # 4 cpus
    m.create_workload(limited("running", "3", 100))
    settle(m)
    for name, cpu, limit in [
        ("wide", "4", 100),  # fits at 00:01:40, when "running" reaches its limit
        ("short", "1", 60),  # would end by 00:01:10: ahead
        ("long", "1", 200),  # would end after 00:03:20: waits
        ("unlimited", "1", None),
    ]:
        now[0] += 1  # one second apart: FIFO order is creation order
        m.create_workload(limited(name, cpu, limit))
    now[0] = EPOCH + 10
    settle(m)
    names = ["running", "wide", "short", "long", "unlimited"]
    assert {n: workload_state(m.get_workload("default", n)) for n in names} == {
        "running": "Admitted", "wide": "Pending", "short": "Admitted", "long": "Pending", "unlimited": "Pending"}
    assert "reserved: expected to start at 2026-01-01T00:01:40Z" in message(m, "wide")
    assert message(m, "short") == (
        "Quota reserved in ClusterQueue cq; backfilled: ends by 2026-01-01T00:01:10Z, before the reservation of "
        "default/wide (ClusterQueue cq) at 2026-01-01T00:01:40Z")
    # No room left now: "long" waits with a reservation of its own, behind the head's.
    assert "reserved: expected to start at 2026-01-01T00:03:20Z" in message(m, "long")
    # No limit: it can only be promised a start once nothing ahead needs its quota again.
    assert "reserved: expected to start at 2026-01-01T00:03:20Z" in message(m, "unlimited")

    # "short" ends early: quota comes back, but nothing that would delay "wide" starts.
    now[0] += 20
    m.delete_workload("default", "short")
    settle(m)
    assert workload_state(m.get_workload("default", "long")) == "Pending"

    # "running" ends: the head starts at last, and the reservation goes with it.
    now[0] = EPOCH + 100
    m.delete_workload("default", "running")
    settle(m)
    assert workload_state(m.get_workload("default", "wide")) == "Admitted"
    assert [r.workload for r in m.scheduler.backfill.reservations] == ["default/long", "default/unlimited"]
