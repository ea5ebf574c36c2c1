"""Queue positions (Kueue's visibility API): the scheduler's order, global positions, filters, pages."""

from __future__ import annotations

import json
import random

import pytest

from sluicegate.controller.errors import InvalidArgument, NotFound
from sluicegate.controller.manager import Manager
from sluicegate.controller.queueing import pending_positions
from sluicegate.controller.scheduling.snapshot import queue_order_timestamp
from sluicegate.controller.store.memory import MemoryStore
from sluicegate.manifest.loader import parse_text
from tests.builders import container_doc, workload_doc

from .test_manager import QUEUES, Clock

SECOND_LQ = """
apiVersion: sluicegate.io/v1beta2
kind: LocalQueue
metadata: {name: lq2, namespace: default}
spec: {clusterQueue: cq}
---
apiVersion: sluicegate.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: team-b}
spec: {clusterQueue: cq}
"""


def manager() -> Manager:
    m = Manager(MemoryStore(), clock=Clock(), placement=False)
    m.apply(parse_text(QUEUES % {"strategy": "BestEffortFIFO"} + "---" + SECOND_LQ, "queues.yaml"))
    return m


def submit(m: Manager, name: str, *, queue: str = "lq", priority: int = 0, ns: str = "default",
           cpu: str = "1") -> None:
    body = workload_doc(name, container_doc(name="c", requests={"cpu": cpu}), queue=queue, priority=priority, ns=ns)
    m.create_workload(parse_text(json.dumps(body), name, fmt="json")[0])


def table(positions: list) -> list[tuple[str, int, int]]:  # type: ignore[type-arg]
    return [(p.workload.name, p.in_cluster_queue, p.in_local_queue) for p in positions]


def known_order(m: Manager) -> Manager:
    # Submission order a..e; priority puts c (10) and e (5) first; lq2 holds b and d.
    submit(m, "a")
    submit(m, "b", queue="lq2")
    submit(m, "c", priority=10)
    submit(m, "d", queue="lq2")
    submit(m, "e", priority=5)
    return m


def test_cluster_queue_order_is_priority_then_submission_with_positions_per_local_queue() -> None:
    m = known_order(manager())
    assert table(pending_positions(m.cache, cluster_queue="cq")) == [
        ("c", 0, 0), ("e", 1, 1), ("a", 2, 2), ("b", 3, 0), ("d", 4, 1)]


def test_local_queue_listing_keeps_cluster_queue_positions() -> None:
    m = known_order(manager())
    assert table(pending_positions(m.cache, namespace="default", local_queue="lq2")) == [("b", 3, 0), ("d", 4, 1)]
    assert table(pending_positions(m.cache, namespace="default", local_queue="lq")) == [
        ("c", 0, 0), ("e", 1, 1), ("a", 2, 2)]


def test_offset_and_limit_page_through_the_order() -> None:
    m = known_order(manager())
    assert table(pending_positions(m.cache, cluster_queue="cq", offset=1, limit=2)) == [("e", 1, 1), ("a", 2, 2)]
    assert table(pending_positions(m.cache, cluster_queue="cq", offset=5, limit=2)) == []


def test_a_viewer_sees_only_its_namespaces_at_their_global_positions() -> None:
    m = known_order(manager())
    submit(m, "x", ns="team-b", priority=7)
    assert table(pending_positions(m.cache, cluster_queue="cq", namespaces={"team-b"})) == [("x", 1, 0)]
    assert table(pending_positions(m.cache, cluster_queue="cq", namespaces={"default"})) == [
        ("c", 0, 0), ("e", 2, 1), ("a", 3, 2), ("b", 4, 0), ("d", 5, 1)]


def test_admitted_and_parked_workloads() -> None:
    # Quota is 4 cpu: c (3 cpu) is admitted; the others wait, some parked as inadmissible.
    m = manager()
    submit(m, "a", cpu="2")
    submit(m, "c", cpu="3", priority=10)
    submit(m, "b", cpu="2", queue="lq2")
    for _ in range(10):
        if not m.schedule_once().made_progress:
            break
    assert table(pending_positions(m.cache, cluster_queue="cq")) == [("a", 0, 0), ("b", 1, 0)]
    at = m.cache.queues.position(m.get_workload("default", "b").key)
    assert at is not None and (at.in_cluster_queue, at.in_local_queue) == (1, 0)
    assert m.cache.queues.position(m.get_workload("default", "c").key) is None


def test_one_workload_position() -> None:
    m = known_order(manager())
    at = m.cache.queues.position(m.get_workload("default", "d").key)
    assert at is not None and (at.workload.name, at.cluster_queue, at.in_cluster_queue, at.in_local_queue) == (
        "d", "cq", 4, 1)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_pages_match_a_full_sort(seed: int) -> None:
    rnd = random.Random(seed)
    m = manager()
    for i in range(150):
        submit(m, f"w{i}", priority=rnd.choice([0, 1, 5]), queue=rnd.choice(["lq", "lq2"]),
               ns=rnd.choice(["default", "default", "team-b"]))
    q = m.cache.queues.queues[next(iter(m.cache.queues.queues))]
    everything = sorted(q.pending_workloads(), key=lambda w: (-w.priority, queue_order_timestamp(w), w.uid, w.key))
    expected = []
    seen: dict[tuple[str, str], int] = {}
    for i, w in enumerate(everything):
        lq = (w.namespace, w.queue_name)
        expected.append((w.name, i, seen.get(lq, 0)))
        seen[lq] = seen.get(lq, 0) + 1
    for offset, limit in ((0, 5), (3, 10), (0, 1000), (140, 20)):
        assert table(pending_positions(m.cache, cluster_queue="cq", offset=offset, limit=limit)) == \
            expected[offset:offset + limit]
        mine = [e for e, w in zip(expected, everything, strict=True) if w.namespace == "team-b"]
        assert table(pending_positions(m.cache, cluster_queue="cq", offset=offset, limit=limit,
                                       namespaces={"team-b"})) == mine[offset:offset + limit]
        lq2 = [e for e, w in zip(expected, everything, strict=True) if (w.namespace, w.queue_name) == ("default", "lq2")]
        assert table(pending_positions(m.cache, namespace="default", local_queue="lq2", offset=offset,
                                       limit=limit)) == lq2[offset:offset + limit]


@pytest.mark.parametrize(
    ("kwargs", "error", "text"),
    [
        ({"cluster_queue": "nope"}, NotFound, "ClusterQueue nope not found"),
        ({"local_queue": "nope", "namespace": "default"}, NotFound, "LocalQueue default/nope not found"),
        ({}, InvalidArgument, "cluster_queue: name exactly one"),
        ({"cluster_queue": "cq", "local_queue": "lq"}, InvalidArgument, "cluster_queue: name exactly one"),
        ({"cluster_queue": "cq", "offset": -1}, InvalidArgument, "offset: must not be negative"),
        ({"cluster_queue": "cq", "limit": -1}, InvalidArgument, "limit: must be between"),
    ],
    ids=["no-cq", "no-lq", "neither", "both", "negative-offset", "negative-limit"],
)
def test_bad_requests(kwargs: dict, error: type[Exception], text: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(error, match=text):
        pending_positions(manager().cache, **kwargs)
