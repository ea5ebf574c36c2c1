"""Pod metadata (in the checkpoint): on disk before a pod starts, batched otherwise, read back by a restarted agent."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sluicegate.agent import checkpoint as ckpt
from sluicegate.agent.node import META_BATCH_SECONDS, AgentNode
from sluicegate.agent.pod import Container, Pod

from .conftest import MakeNode


def wish(uid: str, script: str) -> Pod:
    return Pod(
        uid=uid, name=uid, namespace="team-a", workload="wl-1", pod_set="main", index=0,
        containers=(Container(name="main", command=("sh", "-c", script), requests={"cpu": 100}),),
        termination_grace_seconds=0,
    )


def meta_records_on_disk(node: AgentNode) -> list[dict[str, Any]]:
    """The node's per-pod records in the checkpoint, as a restarted agent would read them."""
    pods: list[dict[str, Any]] = json.loads(ckpt.path_for(node.data_dir).read_text())["pods"]
    return [pod["node"] for pod in pods if "node" in pod]


def meta_on_disk(node: AgentNode) -> dict[str, str]:
    """uid -> workload, as a restarted agent would read it."""
    return {m["uid"]: m["workload"] for m in meta_records_on_disk(node)}


async def wait_until(predicate: Callable[[], bool], *, timeout: float) -> bool:
    """Poll until ``predicate`` holds; False after ``timeout`` (bounded in time and count)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    for _ in range(int(timeout / 0.01) + 1):
        if predicate():
            return True
        if loop.time() > deadline:
            break
        await asyncio.sleep(0.01)
    return bool(predicate())


async def test_metadata_is_on_disk_when_the_pod_starts_and_after_a_restart(make_node: MakeNode, tmp_path: Path) -> None:
    gate = tmp_path / "gate.fifo"
    os.mkfifo(gate)
    node = await make_node()
    assert await node.run_pod(wish("held", f"read line < {gate}")) is True
    # Read before yielding to the loop: nothing batched could have been written since.
    assert meta_on_disk(node) == {"held": "wl-1"}

    restarted = await make_node()
    assert (restarted.meta["held"], restarted.report("held") is not None) == (node.meta["held"], True)


async def test_a_forgotten_pod_leaves_the_file_within_the_batch_window(make_node: MakeNode) -> None:
    node = await make_node()
    assert await node.run_pod(wish("quick", "exit 0")) is True
    await node.runtime.wait("quick", timeout=10)
    await node.forget("quick")
    assert "quick" not in node.meta
    assert await wait_until(lambda: meta_on_disk(node) == {}, timeout=META_BATCH_SECONDS + 5)


async def test_pods_forgotten_together_share_one_checkpoint_write(make_node: MakeNode) -> None:
    """The ForgetPods of one controller message: each pod named goes (one named twice too), the
    unknown and the still running are left as forget() leaves them, and the runtime writes once."""
    node = await make_node()
    for uid in ("a", "b"):
        assert await node.run_pod(wish(uid, "exit 0")) is True
        await node.runtime.wait(uid, timeout=10)
    assert await node.run_pod(wish("running", "exec sleep 30")) is True
    assert await wait_until(lambda: node.runtime.status("running") is not None, timeout=10)
    writes = 0
    write = node.runtime._checkpoint_file.write

    def counting(**kwargs: Any) -> None:
        nonlocal writes
        writes += 1
        write(**kwargs)

    node.runtime._checkpoint_file.write = counting  # type: ignore[method-assign]
    await node.forget_all(["a", "b", "a", "never-seen", "running"])
    assert (sorted(node.meta), node.runtime.status("a"), node.runtime.status("b"), writes) == (
        ["running"], None, None, 1)
    assert not (node.runtime.home("a").exists() or node.runtime.home("b").exists())
    assert await wait_until(lambda: meta_on_disk(node) == {"running": "wl-1"}, timeout=META_BATCH_SECONDS + 5)
    await node.stop_pod("running", grace_seconds=0, reason="Killed", message="")


async def test_a_pod_that_does_not_fit_is_on_disk_as_rejected_before_it_is_reported(make_node: MakeNode) -> None:
    node = await make_node(allocatable={"cpu": 50, "memory": 1 << 30, "pods": 110})
    assert await node.run_pod(wish("too-big", "exit 0")) is False
    on_disk = {m["uid"]: (m["rejected"], m["reason"]) for m in meta_records_on_disk(node)}
    assert on_disk == {"too-big": (True, "OutOfcpu")}


async def test_a_pod_being_forgotten_holds_no_resources_while_its_checkpoint_is_written(make_node: MakeNode) -> None:
    node = await make_node(allocatable={"cpu": 100, "memory": 1 << 30, "pods": 110})
    assert await node.run_pod(wish("done", "exit 0")) is True
    await node.runtime.wait("done", timeout=10)
    forgetting = asyncio.ensure_future(node.forget("done"))
    # Step the loop until forget() waits on the runtime's checkpoint write: the
    # pod is out of the runtime already, its metadata not yet dropped.
    for _ in range(100):
        if node.runtime.status("done") is None:
            break
        await asyncio.sleep(0)
    assert (node.runtime.status("done"), forgetting.done(), "done" in node.meta) == (None, False, True)
    assert node.admitted_pods() == []
    # So the controller's next pod for that capacity is admitted, not rejected OutOfcpu.
    assert await node.run_pod(wish("next", "exit 0")) is True
    await forgetting


async def test_a_pod_that_ended_before_its_first_report_still_reports_when_it_started(make_node: MakeNode) -> None:
    node = await make_node()
    assert await node.run_pod(wish("brief", "exit 0")) is True
    await node.runtime.wait("brief", timeout=10)
    report = node.report("brief")
    assert report is not None and report.phase == "Succeeded"
    assert 0.0 < report.started_at <= report.finished_at


async def test_the_checkpoint_holds_one_record_per_pod(make_node: MakeNode) -> None:
    """A running pod's record holds the node's part and the runtime's; a rejected pod's, the node's alone."""
    node = await make_node(allocatable={"cpu": 100, "memory": 1 << 30, "pods": 110})
    assert await node.run_pod(wish("held", "sleep 60")) is True
    assert await node.run_pod(wish("no-room", "exit 0")) is False
    pods = json.loads(ckpt.path_for(node.data_dir).read_text())["pods"]
    assert [(sorted(p), p["node"]["uid"]) for p in pods] == [(["node", "runtime"], "held"), (["node"], "no-room")]
    assert pods[0]["runtime"]["uid"] == "held"

    restarted = await make_node(allocatable={"cpu": 100, "memory": 1 << 30, "pods": 110})
    report = restarted.report("no-room")
    assert report is not None and (report.phase, report.reason) == ("Failed", "OutOfcpu")
    assert restarted.meta["held"] == node.meta["held"]
