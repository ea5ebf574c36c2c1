"""securityContext in pod templates: decoded, errors named by path, and encoded back unchanged."""

from __future__ import annotations

from typing import Any

import pytest

from sluicegate.manifest import decode, encode
from sluicegate.model import Workload
from sluicegate.model.workloads import SecurityContext

from . import samples
from .samples import errors_of, mutate

POD = "spec.podSets[0].template.spec"


def _decoded(doc: dict[str, Any]) -> Workload:
    wl = decode(doc)
    assert isinstance(wl, Workload)
    return wl


def test_pod_and_container_security_context_are_decoded_and_round_trip() -> None:
    doc = mutate(samples.workload(), f"{POD}.securityContext", {"runAsUser": 1000, "runAsGroup": 1001, "runAsNonRoot": True})
    doc = mutate(doc, f"{POD}.containers[0].securityContext", {"runAsUser": 1002, "allowPrivilegeEscalation": False})
    wl = _decoded(doc)
    ps = wl.pod_sets[0]
    assert ps.security_context == SecurityContext(run_as_user=1000, run_as_group=1001, run_as_non_root=True)
    assert ps.containers[0].security_context == SecurityContext(run_as_user=1002, allow_privilege_escalation=False)
    again = _decoded(encode(wl))
    assert again == wl
    assert encode(again)["spec"]["podSets"][0]["template"]["spec"]["securityContext"] == {
        "runAsUser": 1000, "runAsGroup": 1001, "runAsNonRoot": True}


def test_absent_security_context_stays_absent() -> None:
    wl = _decoded(samples.workload())
    assert wl.pod_sets[0].security_context is None
    assert all(c.security_context is None for c in wl.pod_sets[0].containers)
    assert "securityContext" not in encode(wl)["spec"]["podSets"][0]["template"]["spec"]


@pytest.mark.parametrize(
    ("path", "value", "fragment"),
    [
        (f"{POD}.securityContext.runAsUser", -1, "must be non-negative, got -1"),
        (f"{POD}.securityContext.runAsUser", "1000", "must be an integer"),
        (f"{POD}.securityContext.runAsGroup", 1.5, "must be an integer"),
        (f"{POD}.securityContext.runAsUser", 2**32 - 1, "must be at most"),
        (f"{POD}.securityContext.runAsNonRoot", "yes", "must be true or false"),
        (f"{POD}.securityContext.allowPrivilegeEscalation", False, "unknown field"),
        (f"{POD}.securityContext.fsGroup", 100, "no volumes"),
        (f"{POD}.securityContext.supplementalGroups", [100], "supplementary groups are dropped"),
        (f"{POD}.containers[0].securityContext.runAsUser", True, "must be an integer"),
        (f"{POD}.containers[0].securityContext.allowPrivilegeEscalation", "no", "must be true or false"),
        (f"{POD}.containers[0].securityContext.privileged", True, "privileged pods are not supported"),
        (f"{POD}.containers[0].securityContext.capabilities", {"add": ["NET_ADMIN"]}, "not granted"),
        (f"{POD}.containers[0].securityContext", "root", "must be a mapping"),
    ],
)
def test_bad_values_name_the_field(path: str, value: Any, fragment: str) -> None:
    got = errors_of(mutate(samples.workload(), path, value))
    assert len(got) == 1, [str(e) for e in got]
    expected_path = path if fragment not in ("must be a mapping",) else path
    assert got[0].path == expected_path, str(got[0])
    assert fragment in got[0].message, str(got[0])
