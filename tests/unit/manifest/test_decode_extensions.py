"""ClusterQueue extensions (minAdmitDuration, queueingStrategy Backfill): read with
sluicegate.io/v1beta2 only, refused with a clear message under Kueue's apiVersions,
and written back by encode."""

from __future__ import annotations

from typing import Any

import pytest

from sluicegate.manifest import decode
from sluicegate.manifest.encode import encode
from sluicegate.model import ClusterQueueSpec, QueueingStrategy

from . import samples
from .samples import KUEUE, KUEUE_V1BETA1, OWN, errors_of, mutate


def _cq(api: str, **spec: Any) -> dict[str, Any]:
    doc = mutate(samples.cluster_queue(), "apiVersion", api)
    if api == KUEUE_V1BETA1:
        doc = mutate(doc, "spec.cohortName", samples.DELETE)
        doc = mutate(doc, "spec.cohort", "org")
    for key, value in spec.items():
        doc = mutate(doc, f"spec.{key}", value)
    return doc


def _decoded(doc: dict[str, Any]) -> ClusterQueueSpec:
    obj = decode(doc, source="test.yaml#1")
    assert isinstance(obj, ClusterQueueSpec)
    return obj


@pytest.mark.parametrize(("text", "seconds"), [("10m", 600.0), ("90s", 90.0), ("1h30m", 5400.0), ("0s", None)])
def test_min_admit_duration(text: str, seconds: float | None) -> None:
    spec = _decoded(_cq(OWN, minAdmitDuration=text))
    assert spec.min_admit_duration == seconds
    assert _decoded(_cq(OWN)).min_admit_duration is None


@pytest.mark.parametrize(("value", "fragment"), [
    ("-1m", "must be non-negative"),
    (600, 'must be a duration string such as "5m"'),
    ("ten minutes", ""),
])
def test_min_admit_duration_errors(value: object, fragment: str) -> None:
    (err,) = errors_of(_cq(OWN, minAdmitDuration=value))
    assert err.path == "spec.minAdmitDuration"
    assert fragment in err.message


@pytest.mark.parametrize("api", [KUEUE, KUEUE_V1BETA1])
def test_extensions_are_refused_under_kueue_api_versions(api: str) -> None:
    (err,) = errors_of(_cq(api, minAdmitDuration="5m"))
    assert (err.path, "only read with apiVersion sluicegate.io/v1beta2" in err.message) == (
        "spec.minAdmitDuration", True)
    (err,) = errors_of(_cq(api, queueingStrategy="Backfill"))
    assert err.path == "spec.queueingStrategy"
    assert "Backfill is a sluicegate extension" in err.message


def test_backfill_strategy_and_round_trip() -> None:
    spec = _decoded(_cq(OWN, queueingStrategy="Backfill", minAdmitDuration="2m"))
    assert spec.queueing_strategy is QueueingStrategy.BACKFILL
    doc = encode(spec)
    assert doc["apiVersion"] == OWN
    assert (doc["spec"]["queueingStrategy"], doc["spec"]["minAdmitDuration"]) == ("Backfill", "2m")
    assert _decoded(doc) == spec
