"""Quantities above Kubernetes' bound (a milli-value of 2^63-1) are refused, naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from sluicegate.agent.settings import SettingsError, _resources
from sluicegate.quantity import MAX_MILLI_VALUE, QuantityError, parse_canonical, parse_quantity

from . import samples
from .samples import errors_of, mutate

POD = "spec.podSets[0].template.spec"
MAIN = f"{POD}.containers[0]"
CPU0 = "spec.resourceGroups[0].flavors[0].resources[0]"
LARGEST = MAX_MILLI_VALUE // 1000  # whole units


@pytest.mark.parametrize("text", [
    "9223372036854775808m", f"{LARGEST + 1}", "8Ei", "9223372036854775807k", "1e19", "1e999999999",
    10**30, float("inf"), float("nan"), "1" + "0" * 5000,
])
def test_out_of_bound_quantities_are_refused_quickly(text: Any) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


@pytest.mark.parametrize(("text", "cpu", "memory"), [
    ("9223372036854775807m", MAX_MILLI_VALUE, LARGEST + 1),
    (str(LARGEST), LARGEST * 1000, LARGEST),
    ("8Pi", 8 * 2**50 * 1000, 8 * 2**50),
    ("1e-999999999", 1, 1),  # below every resolution: rounds up, as Kubernetes does
    ("0e999999999", 0, 0),
])
def test_quantities_at_the_bound_are_kept_exactly(text: str, cpu: int, memory: int) -> None:
    assert parse_canonical("cpu", text) == cpu <= 2**63 - 1
    assert parse_canonical("memory", text) == memory


@pytest.mark.parametrize(("base", "path", "where"), [
    (samples.workload, f"{MAIN}.resources.requests.memory", f"{MAIN}.resources.requests[memory]"),
    (samples.workload, f"{MAIN}.resources.limits.cpu", f"{MAIN}.resources.limits[cpu]"),
    (samples.cluster_queue, f"{CPU0}.nominalQuota", f"{CPU0}.nominalQuota"),
])
@pytest.mark.parametrize("value", ["8Ei", "1e30", 10**25])
def test_manifest_fields_refuse_out_of_bound_quantities_naming_the_field(base: Any, path: str, where: str, value: Any) -> None:
    errs = errors_of(mutate(base(), path, value))
    assert any(e.path == where and "out of range" in e.message for e in errs), [str(e) for e in errs]


def test_a_pods_summed_requests_must_stay_within_the_bound() -> None:
    doc = samples.workload()
    containers = doc["spec"]["podSets"][0]["template"]["spec"]["containers"]
    big = {"cpu": "9000000000000000"}
    containers[:] = [{"name": f"c{i}", "command": ["true"], "resources": {"requests": big}} for i in range(2)]
    errs = errors_of(doc)
    assert [(e.path, "add up to more than" in e.message) for e in errs] == [(f"{POD}.containers", True)], [str(e) for e in errs]


def test_agent_settings_refuse_out_of_bound_quantities_naming_the_flag() -> None:
    with pytest.raises(SettingsError, match=r"^systemReserved\.memory: .*out of range"):
        _resources({"memory": "9Ei"}, "systemReserved")
    assert _resources({"memory": "8Pi"}, "systemReserved") == {"memory": 8 * 2**50}
