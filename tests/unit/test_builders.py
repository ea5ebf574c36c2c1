"""The shared builders agree with the decoder: a manifest from workload_doc decodes to what workload builds."""

from __future__ import annotations

from sluicegate.manifest import decode
from sluicegate.model import Workload
from tests.builders import (
    cluster_queue,
    container_doc,
    flavor,
    group,
    quota_group,
    resource_quota,
    workload,
    workload_doc,
)


def test_workload_doc_decodes_to_the_built_workload() -> None:
    doc = workload_doc("w", container_doc(requests={"cpu": "500m", "memory": "1Gi"}), ns="team", queue="q", count=3)
    got = decode(doc)
    assert isinstance(got, Workload)
    want = workload("w", ns="team", queue="q", count=3, requests={"cpu": "500m", "memory": "1Gi"})
    assert (got.namespace, got.name, got.queue_name) == (want.namespace, want.name, want.queue_name)
    assert [(p.name, p.count, dict(p.requests)) for p in got.pod_sets] == [
        (p.name, p.count, dict(p.requests)) for p in want.pod_sets
    ]


def test_quota_forms_agree() -> None:
    limited = resource_quota("cpu", ("10", None, "2"))
    assert limited.borrowing_limit is None
    assert limited.lending_limit == resource_quota("cpu", "2").nominal
    assert resource_quota("cpu", ("10",)) == resource_quota("cpu", "10")
    built = cluster_queue("a", group(flavor("spot", cpu=("10", "5"), memory="4Gi")))
    mapped = cluster_queue("a", quota={"spot": {"cpu": ("10", "5"), "memory": "4Gi"}})
    assert built == mapped
    assert quota_group({"x": {"cpu": 1}, "y": {"cpu": 2, "gpu": 1}}).covered_resources == ("cpu", "gpu")
