"""Distinct names get distinct types, so a flavor name never stands in for a queue."""

from __future__ import annotations

from typing import NewType

ClusterQueueName = NewType("ClusterQueueName", str)
CohortName = NewType("CohortName", str)
FlavorName = NewType("FlavorName", str)
LocalQueueName = NewType("LocalQueueName", str)
# "namespace/name": the identity of a workload, stable across its whole life.
WorkloadKey = NewType("WorkloadKey", str)


def workload_key(namespace: str, name: str) -> WorkloadKey:
    return WorkloadKey(f"{namespace}/{name}")
