"""The static-pod sync against a real runtime: start, never twice, replace, remove, restart, preempt."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from sluicegate.agent.node import AgentNode
from sluicegate.agent.pod import Container, Pod
from sluicegate.agent.runtime import ContainerState, PodPhase
from sluicegate.agent.static import StaticPods, SyncResult

from .conftest import MakeNode

Mi = 1 << 20


def manifest(name: str, *, command: str = "sleep 30", cpu: str = "100m", extra_spec: str = "") -> str:
    return f"""\
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  {extra_spec or "restartPolicy: Always"}
  containers:
  - name: main
    command: [sh, -c, "{command}"]
    resources: {{requests: {{cpu: {cpu}, memory: 16Mi}}}}
"""


def running(node: AgentNode) -> dict[str, str]:
    """name -> uid of the static pods whose processes run."""
    out = {}
    for m in node.static_pods():
        st = node.runtime.status(m.uid)
        if st is not None and not st.finished and st.phase is PodPhase.RUNNING:
            out[m.name] = m.uid
    return out


def pid_of(node: AgentNode, uid: str) -> int | None:
    st = node.runtime.status(uid)
    assert st is not None
    return st.containers[0].pid


async def test_manifests_start_once_and_survive_an_agent_restart(make_node: MakeNode, tmp_path: Path) -> None:
    pods = tmp_path / "static"
    pods.mkdir()
    (pods / "a.yaml").write_text(manifest("alpha"))
    (pods / "b.yaml").write_text(manifest("beta"))
    node = await make_node()
    static = StaticPods(node=node, directory=pods)
    first = await static.sync()
    assert sorted(running(node)) == ["alpha-node-1", "beta-node-1"]
    assert sorted(first.started) == sorted(running(node).values())
    assert await static.sync() == SyncResult()
    pids = {uid: pid_of(node, uid) for uid in running(node).values()}
    reports = {r.name: (r.static, dict(r.requests)) for r in node.reports()}
    assert reports == {"alpha-node-1": (True, {"cpu": 100, "memory": 16 * Mi}),
                       "beta-node-1": (True, {"cpu": 100, "memory": 16 * Mi})}

    restarted = await make_node()
    again = StaticPods(node=restarted, directory=pods)
    assert await again.sync() == SyncResult()
    assert {uid: pid_of(restarted, uid) for uid in running(restarted).values()} == pids


async def test_a_changed_manifest_replaces_the_pod_and_a_removed_one_stops_it(
    make_node: MakeNode, tmp_path: Path
) -> None:
    pods = tmp_path / "static"
    pods.mkdir()
    (pods / "a.yaml").write_text(manifest("alpha"))
    (pods / "b.yaml").write_text(manifest("beta"))
    node = await make_node()
    static = StaticPods(node=node, directory=pods)
    await static.sync()
    old = running(node)

    (pods / "a.yaml").write_text(manifest("alpha", command="sleep 31"))
    (pods / "b.yaml").unlink()
    changed = await static.sync()
    now = running(node)
    assert list(now) == ["alpha-node-1"] and now["alpha-node-1"] != old["alpha-node-1"]
    assert (sorted(changed.stopped), changed.started, changed.removed) == (
        sorted([old["alpha-node-1"], old["beta-node-1"]]), (now["alpha-node-1"],), ())
    stopped = node.report(old["beta-node-1"])
    assert stopped is not None and stopped.phase in ("Failed", "Succeeded") and stopped.static
    assert "was removed or changed" in stopped.message

    # One pass later (their final status reported), the old pods are dropped entirely.
    cleaned = await static.sync()
    assert sorted(cleaned.removed) == sorted([old["alpha-node-1"], old["beta-node-1"]])
    assert sorted(m.name for m in node.static_pods()) == ["alpha-node-1"]

    # The same file coming back is the same pod again, and starts again.
    (pods / "b.yaml").write_text(manifest("beta"))
    back = await static.sync()
    assert back.started == (old["beta-node-1"],)


async def test_a_broken_edit_keeps_the_last_good_pod_and_is_logged_once(
    make_node: MakeNode, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pods = tmp_path / "static"
    pods.mkdir()
    (pods / "a.yaml").write_text(manifest("alpha"))
    node = await make_node()
    static = StaticPods(node=node, directory=pods)
    await static.sync()
    before = running(node)
    (pods / "a.yaml").write_text(manifest("alpha").replace("name: main", "name: main\n    image: busybox"))
    with caplog.at_level(logging.ERROR, logger="sluicegate.agent.static"):
        assert await static.sync() == SyncResult()
        assert await static.sync() == SyncResult()
    assert running(node) == before
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [f"static pod manifest {pods / 'a.yaml'}: spec.containers[0].image: not supported: "
                      "sluicegate runs processes, not container images; the file is skipped until it is fixed"]


async def test_an_exiting_static_pod_is_restarted(make_node: MakeNode, tmp_path: Path) -> None:
    pods = tmp_path / "static"
    pods.mkdir()
    (pods / "a.yaml").write_text(manifest("blinker", command="exit 0"))
    node = await make_node()
    result = await StaticPods(node=node, directory=pods).sync()
    status = await node.runtime.wait_for(
        result.started[0], lambda s: s.containers[0].restart_count >= 2, timeout=10)
    assert (status.phase, status.finished) == (PodPhase.RUNNING, False)


def worker(uid: str, *, cpu: int, memory: int = 0, limits: bool = False) -> Pod:
    requests = {"cpu": cpu, **({"memory": memory} if memory else {})}
    return Pod(uid=uid, name=uid, namespace="default", workload=f"wl-{uid}", pod_set="main", index=0,
                   termination_grace_seconds=0,
                   containers=(Container(name="main", command=("sleep", "30"), requests=requests,
                                             limits=requests if limits else {}),))


async def test_a_static_pod_on_a_full_node_preempts_by_the_kubelet_rule(make_node: MakeNode, tmp_path: Path) -> None:
    node = await make_node(allocatable={"cpu": 3000, "memory": 1 << 30, "pods": 110})
    # Guaranteed, and two Burstable pods of which the smaller memory request goes first.
    for wish in (worker("guaranteed", cpu=1000, memory=64 * Mi, limits=True),
                 worker("burstable-mem", cpu=1000, memory=32 * Mi), worker("burstable", cpu=1000)):
        await node.run_pod(wish)
    pods = tmp_path / "static"
    pods.mkdir()
    (pods / "crit.yaml").write_text(manifest("crit", cpu="1"))
    result = await StaticPods(node=node, directory=pods).sync()
    states = {}
    for uid in ("guaranteed", "burstable-mem", "burstable", result.started[0]):
        st = node.runtime.status(uid)
        assert st is not None
        states[uid] = st.containers[0].state
    assert states == {"guaranteed": ContainerState.RUNNING, "burstable-mem": ContainerState.RUNNING,
                      "burstable": ContainerState.TERMINATED, result.started[0]: ContainerState.RUNNING}
    victim = node.report("burstable")
    assert victim is not None
    assert (victim.phase, victim.reason, victim.message) == (
        "Failed", "Preempting", "Preempted in order to admit critical pod default/crit-node-1")
    assert node.evictions == 1


async def test_a_rejected_static_pod_is_retried_when_room_appears(make_node: MakeNode, tmp_path: Path) -> None:
    node = await make_node(allocatable={"cpu": 1000, "memory": 1 << 30, "pods": 110})
    pods = tmp_path / "static"
    pods.mkdir()
    (pods / "big.yaml").write_text(manifest("big", cpu="2"))
    static = StaticPods(node=node, directory=pods)
    first = await static.sync()
    rejected = node.report(first.started[0])
    assert rejected is not None
    assert (rejected.phase, rejected.reason) == ("Failed", "UnexpectedAdmissionError")
    assert running(node) == {}
    node.allocatable["cpu"] = 4000
    second = await static.sync()
    assert second.started == first.started
    assert list(running(node)) == ["big-node-1"]


async def test_a_missing_directory_changes_nothing(make_node: MakeNode, tmp_path: Path) -> None:
    node = await make_node()
    assert await StaticPods(node=node, directory=tmp_path / "absent").sync() == SyncResult()
