"""Distinct names get distinct types, so a flavor name never stands in for a queue."""

from __future__ import annotations

import sys
from typing import NewType

ClusterQueueName = NewType("ClusterQueueName", str)
CohortName = NewType("CohortName", str)
FlavorName = NewType("FlavorName", str)
LocalQueueName = NewType("LocalQueueName", str)
# "namespace/name": the identity of a workload, stable across its whole life.
WorkloadKey = NewType("WorkloadKey", str)


def workload_key(namespace: str, name: str) -> WorkloadKey:
    # Interned: a workload's key is held by the cache, its queue, the heap and
    # the timers; computed afresh each time it would be one copy per holder.
    return WorkloadKey(sys.intern(f"{namespace}/{name}"))
