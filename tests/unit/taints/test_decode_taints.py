"""Taints and tolerations in manifests and agent settings: validated as Kubernetes does.

Rules from Kubernetes' ``pkg/apis/core/validation/validation.go`` (validateNodeTaints,
ValidateTolerations) and Kueue's ResourceFlavor API (``apis/kueue/v1beta2/resourceflavor_types.go``:
at most 8 nodeTaints and 8 tolerations).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sluicegate.agent.settings import SettingsError, load_settings
from sluicegate.manifest import ManifestError, decode, encode
from sluicegate.model import FlavorName, ResourceFlavor, Workload
from sluicegate.model.taints import EQUAL, EXISTS, NO_EXECUTE, NO_SCHEDULE, PREFER_NO_SCHEDULE, Taint, Toleration
from tests.unit.manifest import samples

POD = "spec.podSets[0].template.spec"


def flavor(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": samples.KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "spot"}, "spec": spec}


def errors(doc: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ManifestError) as exc:
        decode(doc, source="test.yaml#1")
    return [(e.path, e.message) for e in exc.value.errors]


def test_flavor_taints_and_tolerations_decode_and_round_trip() -> None:
    doc = flavor(nodeTaints=[{"key": "instance", "value": "spot", "effect": "NoSchedule"},
                             {"key": "maint", "effect": "NoExecute"}],
                 tolerations=[{"key": "instance", "operator": "Equal", "value": "spot", "effect": "NoSchedule"},
                              {"operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}])
    rf = decode(doc)
    assert rf == ResourceFlavor(
        FlavorName("spot"),
        node_taints=(Taint("instance", NO_SCHEDULE, "spot"), Taint("maint", NO_EXECUTE)),
        tolerations=(Toleration("instance", EQUAL, "spot", NO_SCHEDULE),
                     Toleration("", EXISTS, effect=NO_EXECUTE, toleration_seconds=60)),
    )
    assert decode(encode(rf)) == rf


def test_pod_tolerations_decode_and_round_trip_for_workloads_and_jobs() -> None:
    doc = samples.workload()
    doc["spec"]["podSets"][0]["template"]["spec"]["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
    wl = decode(doc)
    assert isinstance(wl, Workload)
    assert wl.pod_sets[0].tolerations == (Toleration("dedicated", EXISTS),)
    assert decode(encode(wl)).pod_sets[0].tolerations == wl.pod_sets[0].tolerations
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "j", "namespace": "team-a", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
           "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "command": ["true"]}],
                                          "tolerations": [{"key": "a", "value": "b", "effect": "NoSchedule"}]}}}}
    decoded = decode(job)
    assert isinstance(decoded, Workload)
    assert decoded.pod_sets[0].tolerations == (Toleration("a", EQUAL, "b", NO_SCHEDULE),)


BAD_FLAVORS = [
    ("taint without key", {"nodeTaints": [{"effect": "NoSchedule"}]}, ("spec.nodeTaints[0].key", "required field is missing")),
    ("taint without effect", {"nodeTaints": [{"key": "a"}]}, ("spec.nodeTaints[0].effect", "required field is missing")),
    ("taint effect unknown", {"nodeTaints": [{"key": "a", "effect": "NoRun"}]},
     ("spec.nodeTaints[0].effect", 'must be one of NoSchedule, PreferNoSchedule, NoExecute, got "NoRun"')),
    ("taint key not a qualified name", {"nodeTaints": [{"key": "a b", "effect": "NoSchedule"}]},
     ("spec.nodeTaints[0].key", "must be a qualified name")),
    ("taint value not a label value", {"nodeTaints": [{"key": "a", "value": "x y", "effect": "NoSchedule"}]},
     ("spec.nodeTaints[0].value", "must be a label value")),
    ("taints unique by key and effect", {"nodeTaints": [{"key": "a", "effect": "NoSchedule"},
                                                        {"key": "a", "value": "v", "effect": "NoSchedule"}]},
     ("spec.nodeTaints[1]", "taints must be unique by key and effect pair")),
    ("taint timeAdded", {"nodeTaints": [{"key": "a", "effect": "NoExecute", "timeAdded": "2024-01-01T00:00:00Z"}]},
     ("spec.nodeTaints[0].timeAdded", "not supported")),
    ("more than 8 taints", {"nodeTaints": [{"key": f"k{i}", "effect": "NoSchedule"} for i in range(9)]},
     ("spec.nodeTaints", "must list at most 8 item(s), got 9")),
    ("toleration with empty key must be Exists", {"tolerations": [{"value": "x"}]},
     ("spec.tolerations[0].operator", "must be Exists when key is empty")),
    ("Exists takes no value", {"tolerations": [{"key": "a", "operator": "Exists", "value": "x"}]},
     ("spec.tolerations[0].value", 'must be empty when operator is Exists, got "x"')),
    ("operator unknown", {"tolerations": [{"key": "a", "operator": "Gt", "value": "1"}]},
     ("spec.tolerations[0].operator", 'must be one of Equal, Exists, got "Gt"')),
    ("tolerationSeconds only with NoExecute", {"tolerations": [{"key": "a", "operator": "Exists", "effect": "NoSchedule",
                                                                "tolerationSeconds": 5}]},
     ("spec.tolerations[0].effect", 'must be NoExecute when tolerationSeconds is set, got "NoSchedule"')),
    ("toleration effect unknown", {"tolerations": [{"key": "a", "operator": "Exists", "effect": "Never"}]},
     ("spec.tolerations[0].effect", "must be one of NoSchedule, PreferNoSchedule, NoExecute")),
    ("toleration field unknown", {"tolerations": [{"key": "a", "operator": "Exists", "seconds": 1}]},
     ("spec.tolerations[0].seconds", "unknown field")),
]


@pytest.mark.parametrize(("spec", "expected"), [c[1:] for c in BAD_FLAVORS], ids=[c[0] for c in BAD_FLAVORS])
def test_bad_flavor(spec: dict[str, Any], expected: tuple[str, str]) -> None:
    got = errors(flavor(**spec))
    assert len(got) == 1 and got[0][0] == expected[0] and expected[1] in got[0][1], got


def test_bad_pod_toleration_names_the_field() -> None:
    doc = samples.workload()
    doc["spec"]["podSets"][0]["template"]["spec"]["tolerations"] = [{"key": "a", "effect": "PreferNoSchedule",
                                                                     "tolerationSeconds": 1}]
    assert errors(doc) == [(f"{POD}.tolerations[0].effect",
                            'must be NoExecute when tolerationSeconds is set, got "PreferNoSchedule"')]


def test_agent_settings_taints(tmp_path: Path) -> None:
    f = tmp_path / "agent.yaml"
    f.write_text('taints: ["dedicated=gpu:NoSchedule", "maint:NoExecute", {key: soft, effect: PreferNoSchedule}]\n')
    assert load_settings(str(f), {}).taints == (
        Taint("dedicated", NO_SCHEDULE, "gpu"), Taint("maint", NO_EXECUTE), Taint("soft", PREFER_NO_SCHEDULE))


@pytest.mark.parametrize(("text", "message"), [
    ('taints: "a:NoSchedule"', "taints: expected a list of taints"),
    ('taints: ["a=b"]', "taints[0].effect: must be one of NoSchedule, PreferNoSchedule, NoExecute"),
    ('taints: ["a:NoSchedule", "a=x:NoSchedule"]', "taints[1]: taints must be unique by key and effect pair"),
    ('taints: ["=v:NoSchedule"]', "taints[0].key: required field is empty"),
])
def test_bad_agent_taints(tmp_path: Path, text: str, message: str) -> None:
    f = tmp_path / "agent.yaml"
    f.write_text(text + "\n")
    with pytest.raises(SettingsError) as exc:
        load_settings(str(f), {})
    assert message in str(exc.value)
