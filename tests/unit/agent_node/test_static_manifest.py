"""Static pod manifests: what is accepted, what each problem says, and how the uid is derived."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluicegate.agent.pod import Container, Pod, RequestedSecurity, RestartPolicy
from sluicegate.agent.policy import SYSTEM_CLUSTER_CRITICAL, SYSTEM_NODE_CRITICAL
from sluicegate.agent.static import StaticPodManifestError, parse_manifest, scan_directory, static_uid

Mi = 1 << 20

MINIMAL = b"""\
apiVersion: v1
kind: Pod
metadata:
  name: agent-sidecar
spec:
  containers:
  - name: main
    command: [sleep, "60"]
"""


def parse(text: str | bytes, *, file_name: str = "pod.yaml", node: str = "node-1") -> Pod:
    content = text.encode() if isinstance(text, str) else text
    return parse_manifest(file_name=file_name, content=content, node_name=node)


def test_a_minimal_manifest_gets_the_kubelet_defaults() -> None:
    wish = parse(MINIMAL)
    assert wish == Pod(
        uid=wish.uid, name="agent-sidecar-node-1", namespace="default", workload="", pod_set="", index=0,
        containers=(Container(name="main", command=("sleep", "60")),),
        restart_policy=RestartPolicy.ALWAYS, termination_grace_seconds=30.0, priority=0, priority_class="", static=True,
        source="pod.yaml",
    )
    assert wish.uid.startswith("static-")


def test_every_supported_field_is_read() -> None:
    wish = parse("""
apiVersion: v1
kind: Pod
metadata: {name: etcd, namespace: kube-system, labels: {tier: control-plane}, annotations: {note: x}}
spec:
  priorityClassName: system-node-critical
  restartPolicy: OnFailure
  terminationGracePeriodSeconds: 5
  containers:
  - name: server
    command: [/usr/bin/etcd]
    args: [--data-dir, /var/lib/etcd]
    env: [{name: GOMAXPROCS, value: "2"}]
    workingDir: /var/lib/etcd
    resources:
      requests: {cpu: 250m, memory: 64Mi}
      limits: {memory: 128Mi, example.com/dev: 1}
""", node="Worker-7")
    assert wish == Pod(
        uid=wish.uid, name="etcd-worker-7", namespace="kube-system", workload="", pod_set="", index=0,
        containers=(Container(
            name="server", command=("/usr/bin/etcd",), args=("--data-dir", "/var/lib/etcd"),
            env=(("GOMAXPROCS", "2"),), working_dir="/var/lib/etcd",
            requests={"cpu": 250, "memory": 64 * Mi, "example.com/dev": 1},
            limits={"memory": 128 * Mi, "example.com/dev": 1},
        ),),
        restart_policy=RestartPolicy.ON_FAILURE, termination_grace_seconds=5.0, priority=SYSTEM_NODE_CRITICAL,
        priority_class="system-node-critical", static=True, source="pod.yaml",
    )


@pytest.mark.parametrize(
    ("spec_lines", "priority", "priority_class"),
    [
        pytest.param("priorityClassName: system-cluster-critical", SYSTEM_CLUSTER_CRITICAL,
                     "system-cluster-critical", id="cluster-critical-class"),
        pytest.param("priority: 77", 77, "", id="explicit-priority"),
        pytest.param("priorityClassName: node-agents\n  priority: 5000", 5000, "node-agents",
                     id="unknown-class-with-explicit-priority"),
        pytest.param("priorityClassName: system-node-critical\n  priority: 2000001000", SYSTEM_NODE_CRITICAL,
                     "system-node-critical", id="class-and-matching-priority"),
    ],
)
def test_priority_comes_from_the_class_or_the_field(spec_lines: str, priority: int, priority_class: str) -> None:
    wish = parse(f"""
apiVersion: v1
kind: Pod
metadata: {{name: p}}
spec:
  {spec_lines}
  containers: [{{name: main, command: ["true"]}}]
""")
    assert (wish.priority, wish.priority_class) == (priority, priority_class)


def problems_of(text: str) -> list[str]:
    with pytest.raises(StaticPodManifestError) as info:
        parse(text)
    assert info.value.file == "pod.yaml"
    assert str(info.value).startswith("static pod manifest pod.yaml: ")
    assert str(info.value).endswith("; the file is skipped until it is fixed")
    return [str(e) for e in info.value.errors]


POD = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("a: [", ["not valid YAML or JSON"], id="not-yaml"),
        pytest.param("", ["must hold exactly one Pod document, found 0"], id="empty-file"),
        pytest.param(POD + "spec: {containers: [{name: a, command: [x]}]}\n---\n" + POD,
                     ["must hold exactly one Pod document, found 2"], id="two-documents"),
        pytest.param("- a\n", ["must be a mapping, got a list"], id="not-a-mapping"),
        pytest.param("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: p}\n"
                     "spec: {containers: [{name: a, command: [x]}]}",
                     ['apiVersion: must be "v1" for a static pod, got "apps/v1"',
                      'kind: must be "Pod" for a static pod, got "Deployment"'], id="wrong-kind"),
        pytest.param("kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: a, command: [x]}]}",
                     ["apiVersion: required field is missing"], id="no-api-version"),
        pytest.param("apiVersion: v1\nkind: Pod\nspec: {containers: [{name: a, command: [x]}]}",
                     ["metadata: required field is missing"], id="no-metadata"),
        pytest.param("apiVersion: v1\nkind: Pod\nmetadata: {name: P_1}\nspec: {containers: [{name: a, command: [x]}]}",
                     ["metadata.name: must be a DNS-1123 subdomain"], id="bad-name"),
        pytest.param("apiVersion: v1\nkind: Pod\nmetadata: {name: p, uid: abc}\n"
                     "spec: {containers: [{name: a, command: [x]}]}",
                     ["metadata.uid: not supported: a static pod's uid is derived"], id="uid-given"),
        pytest.param(POD + "spec: {containers: []}", ["spec.containers: must list at least 1 item(s), got 0"],
                     id="no-containers"),
        pytest.param(POD + "spec: {containers: [{name: a}]}",
                     ["spec.containers[0].command: required: there is no container image"], id="no-command"),
        pytest.param(POD + "spec: {containers: [{name: a, image: busybox, command: [x]}]}",
                     ["spec.containers[0].image: not supported: sluicegate runs processes"], id="image"),
        pytest.param(POD + "spec: {containers: [{name: a, command: [x]}, {name: a, command: [y]}]}",
                     ["spec.containers[1].name: duplicate: spec.containers[0] already uses the name"],
                     id="duplicate-container"),
        pytest.param(POD + "spec: {containers: [{name: a, command: [x], resources: {requests: {cpu: 2}, "
                     "limits: {cpu: 1}}}]}",
                     ["spec.containers[0].resources.requests[cpu]: must not exceed the limit"],
                     id="request-above-limit"),
        pytest.param(POD + "spec: {containers: [{name: a, command: [x], resources: {requests: {cpu: lots}}}]}",
                     ['spec.containers[0].resources.requests[cpu]: not a valid quantity: "lots"'],
                     id="bad-quantity"),
        pytest.param(POD + "spec: {containers: [{name: a, command: [x], resources: {requests: {memory: -1Mi}}}]}",
                     ['spec.containers[0].resources.requests[memory]: must be non-negative, got "-1Mi"'],
                     id="negative-quantity"),
        pytest.param(POD + "spec: {containers: [{name: a, command: [x], resources: {requests: {pods: 1}}}]}",
                     ["spec.containers[0].resources.requests[pods]: the resource name pods is reserved"],
                     id="pods-resource"),
        pytest.param(POD + "spec: {restartPolicy: Sometimes, containers: [{name: a, command: [x]}]}",
                     ['spec.restartPolicy: must be one of Always, OnFailure, Never, got "Sometimes"'],
                     id="bad-restart-policy"),
        pytest.param(POD + "spec: {terminationGracePeriodSeconds: -1, containers: [{name: a, command: [x]}]}",
                     ["spec.terminationGracePeriodSeconds: must be non-negative, got -1"], id="negative-grace"),
        pytest.param(POD + "spec: {priorityClassName: high, containers: [{name: a, command: [x]}]}",
                     ['spec.priorityClassName: "high" is not known on the node'], id="unknown-priority-class"),
        pytest.param(POD + "spec: {priorityClassName: system-node-critical, priority: 5, "
                     "containers: [{name: a, command: [x]}]}",
                     ["spec.priority: must be 2000001000 (the value of system-node-critical) or absent, got 5"],
                     id="priority-contradicts-class"),
        pytest.param(POD + "spec: {nodeSelector: {a: b}, containers: [{name: a, command: [x]}]}",
                     ["spec.nodeSelector: not supported: a static pod runs on the node whose directory"],
                     id="node-selector"),
        pytest.param(POD + "spec: {volumes: [], containers: [{name: a, command: [x]}]}",
                     ["spec.volumes: not supported: pods are processes on the node"], id="volumes"),
        pytest.param(POD + "spec: {contianers: [{name: a, command: [x]}]}",
                     ['spec.contianers: unknown field; did you mean "containers"?',
                      "spec.containers: required field is missing"], id="typo"),
        pytest.param(POD + "spec: {containers: [{name: a, command: [x], readinessProbe: {exec: {command: [y]}}}]}",
                     ["spec.containers[0].readinessProbe: not supported: readiness probes are not supported for "
                      "static pods"], id="readiness-probe"),
        pytest.param(POD + "spec: {containers: [{name: a, command: [x], env: [{name: A, valueFrom: {}}]}]}",
                     ["spec.containers[0].env[0].valueFrom: not supported"], id="env-value-from"),
    ],
)
def test_each_problem_names_the_file_and_the_field(text: str, expected: list[str]) -> None:
    found = problems_of(text)
    assert len(found) == len(expected), found
    for got, want in zip(found, expected, strict=True):
        assert got.startswith(want), (got, want)


BASE = MINIMAL.decode()


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        pytest.param(("pod.yaml", BASE, "n1"), ("pod.yaml", BASE, "n1"), True, id="identical"),
        pytest.param(("pod.yaml", BASE, "n1"),
                     ("pod.yaml", "# a comment\napiVersion: v1\nkind: Pod\nmetadata: {name: agent-sidecar}\n"
                      "spec:\n    containers: [{command: [sleep, '60'], name: main}]  # flow style\n", "n1"),
                     True, id="comments-and-layout-do-not-count"),
        pytest.param(("pod.yaml", BASE, "n1"),
                     ("pod.yaml", '{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "agent-sidecar"}, '
                      '"spec": {"containers": [{"name": "main", "command": ["sleep", "60"]}]}}', "n1"),
                     True, id="json-spelling-of-the-same-pod"),
        pytest.param(("pod.yaml", BASE, "n1"), ("pod.yaml", BASE.replace('"60"', '"61"'), "n1"), False,
                     id="changed-content"),
        pytest.param(("pod.yaml", BASE, "n1"), ("other.yaml", BASE, "n1"), False, id="other-file"),
        pytest.param(("pod.yaml", BASE, "n1"), ("pod.yaml", BASE, "n2"), False, id="other-node"),
    ],
)
def test_the_uid_follows_node_file_and_content(a: tuple[str, str, str], b: tuple[str, str, str], same: bool) -> None:
    ua = parse(a[1], file_name=a[0], node=a[2]).uid
    ub = parse(b[1], file_name=b[0], node=b[2]).uid
    assert (ua == ub) is same


def test_static_uid_is_a_valid_runtime_uid_and_stable_across_processes() -> None:
    # A fixed value: a change here would restart every static pod on upgrade.
    assert static_uid(node_name="n", file_name="f", document={"a": 1}) == static_uid(
        node_name="n", file_name="f", document={"a": 1})
    assert len(static_uid(node_name="n", file_name="f", document={})) == len("static-") + 32


def test_scanning_a_directory_skips_hidden_files_and_reports_bad_and_duplicate_ones(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_bytes(MINIMAL)
    (tmp_path / "b.yaml").write_bytes(MINIMAL.replace(b"sleep", b"sleeper"))  # same pod name as a.yaml
    (tmp_path / "c.yaml").write_text("kind: Pod")
    (tmp_path / ".a.yaml.swp").write_text("garbage")
    (tmp_path / "subdir").mkdir()
    scan = scan_directory(tmp_path, node_name="node-1")
    assert sorted(scan.wishes) == ["a.yaml"]
    assert sorted(scan.errors) == ["b.yaml", "c.yaml"]
    assert [str(e) for e in scan.errors["b.yaml"].errors] == [
        "metadata.name: pod default/agent-sidecar-node-1 is already defined by a.yaml"]
    assert scan.errors["c.yaml"].file == str(tmp_path / "c.yaml")


def test_a_static_containers_security_context_is_read_for_the_agents_own_check() -> None:
    wish = parse(MINIMAL + b"    securityContext: {runAsUser: 1000, runAsNonRoot: true, allowPrivilegeEscalation: false}\n")
    assert wish.containers[0].security == RequestedSecurity(run_as_user=1000, run_as_non_root=True,
                                                             allow_privilege_escalation=False)
    assert parse(MINIMAL).containers[0].security is None
    assert problems_of(POD + "spec:\n  securityContext: {runAsUser: 1}\n  containers: [{name: a, command: [x]}]\n") == [
        "spec.securityContext: not supported: set securityContext on each container of a static pod"]
    assert problems_of(POD + "spec:\n  containers: [{name: a, command: [x], securityContext: {runAsUser: -1}}]\n") == [
        "spec.containers[0].securityContext.runAsUser: must be non-negative, got -1"]
