"""Transitional: the old short names, for tests/unit/controller until it imports tests.builders.

Delete this module once nothing imports ``..scheduling.builders``.
"""

from __future__ import annotations

from tests.builders import cluster_queue as cq
from tests.builders import cohort, flavor, group
from tests.builders import pod_set as podset
from tests.builders import with_admission as admitted
from tests.builders import workload as wl

from .caches import build_cache

__all__ = ["admitted", "build_cache", "cohort", "cq", "flavor", "group", "podset", "wl"]
