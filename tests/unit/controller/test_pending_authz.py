"""The visibility calls pass List's gate: a namespace's user sees its entries, at their global positions."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sluicegate.v1 import workloads_pb2

from .test_authz import ALICE, ROOT, Api, denied, served, wl_doc


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Api]:
    async with served(tmp_path) as a:
        for ns, name in (("team-a", "a1"), ("team-b", "b1"), ("team-a", "a2")):
            await a.workloads.Create(workloads_pb2.CreateWorkloadRequest(document=wl_doc(name, ns)), metadata=ROOT)
        yield a


def seen(resp: workloads_pb2.PendingWorkloadsResponse) -> list[tuple[str, int, int]]:
    return [(f"{p.namespace}/{p.name}", p.position_in_cluster_queue, p.position_in_local_queue) for p in resp.items]


async def test_pending_positions_stay_global_for_a_namespace_user(api: Api) -> None:
    w = api.workloads
    everyone = await w.Pending(workloads_pb2.PendingWorkloadsRequest(cluster_queue="cq"), metadata=ROOT)
    assert seen(everyone) == [("team-a/a1", 0, 0), ("team-b/b1", 1, 0), ("team-a/a2", 2, 1)]
    alice = await w.Pending(workloads_pb2.PendingWorkloadsRequest(cluster_queue="cq"), metadata=ALICE)
    assert seen(alice) == [("team-a/a1", 0, 0), ("team-a/a2", 2, 1)]
    own = await w.Pending(workloads_pb2.PendingWorkloadsRequest(namespace="team-a", local_queue="lq"), metadata=ALICE)
    assert seen(own) == [("team-a/a1", 0, 0), ("team-a/a2", 2, 1)]
    msg = await denied(w.Pending(workloads_pb2.PendingWorkloadsRequest(namespace="team-b", local_queue="lq"),
                                 metadata=ALICE))
    assert msg == 'user "alice" (groups: dev) may not list Workload in namespace "team-b"'


async def test_position_of_one_workload_needs_get_on_it(api: Api) -> None:
    w = api.workloads
    got = await w.Position(workloads_pb2.WorkloadRef(namespace="team-a", name="a2"), metadata=ALICE)
    assert got.pending and (got.workload.position_in_cluster_queue, got.workload.position_in_local_queue) == (2, 1)
    await denied(w.Position(workloads_pb2.WorkloadRef(namespace="team-b", name="b1"), metadata=ALICE))
