"""sluicectl get pending, describe's position, create with generateName, get -w, completion."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from pathlib import Path

import pytest

from sluicegate.manifest.loader import parse_text
from tests.unit.controller.served import Served

from .conftest import ctl
from .test_habits import submit

LQ2 = """
apiVersion: sluicegate.io/v1beta2
kind: LocalQueue
metadata: {name: lq2, namespace: default}
spec: {clusterQueue: cq}
"""
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
async def ordered(served: Served) -> Served:
    """Submitted a..e; c (priority 10) and e (5) go first; lq2 holds b and d."""
    served.manager.apply(parse_text(LQ2, "lq2.yaml"))
    submit(served.manager, "a")
    submit(served.manager, "b", queue="lq2")
    submit(served.manager, "c", priority=10)
    submit(served.manager, "d", queue="lq2")
    submit(served.manager, "e", priority=5)
    return served


def rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines()[1:]]


async def test_get_pending_of_a_cluster_queue(ordered: Served) -> None:
    r = await ctl(ordered, "get", "pending", "--cluster-queue", "cq")
    assert r.code == 0, r.err
    assert r.out.splitlines()[0].split() == ["NAMESPACE", "NAME", "LOCALQUEUE", "CLUSTERQUEUE", "PRIORITY",
                                            "POSITION", "IN", "CQ", "POSITION", "IN", "LQ", "AGE"]
    assert [(x[1], x[2], x[4], x[5], x[6]) for x in rows(r.out)] == [
        ("c", "lq", "10", "0", "0"), ("e", "lq", "5", "1", "1"), ("a", "lq", "0", "2", "2"),
        ("b", "lq2", "0", "3", "0"), ("d", "lq2", "0", "4", "1")]


async def test_get_pending_of_a_local_queue_with_a_page(ordered: Served) -> None:
    r = await ctl(ordered, "get", "pending", "-q", "lq2", "-n", "default", "-o", "json")
    items = json.loads(r.out)["items"]
    assert [(i["metadata"]["name"], i["positionInClusterQueue"], i["positionInLocalQueue"]) for i in items] == [
        ("b", 3, 0), ("d", 4, 1)]
    r = await ctl(ordered, "get", "pending", "--cluster-queue", "cq", "--offset", "1", "--limit", "2", "-o",
                  "jsonpath={range .items[*]}{.metadata.name}={.positionInClusterQueue} {end}")
    assert r.out.split() == ["e=1", "a=2"]


async def test_get_pending_refuses_a_missing_queue_and_no_queue(ordered: Served) -> None:
    r = await ctl(ordered, "get", "pending", "--cluster-queue", "nope")
    assert (r.code, r.err) == (1, "error: ClusterQueue nope not found\n")
    r = await ctl(ordered, "get", "pending")
    assert r.code == 2 and r.err.startswith("error: get pending needs exactly one of --cluster-queue")


async def test_the_reason_shows_in_wide_output(ordered: Served) -> None:
    # Quota is 4 cpu: after a cycle c, e, a, b are admitted (1 cpu each) and d waits for quota.
    for _ in range(10):
        if not ordered.manager.schedule_once().made_progress:
            break
    r = await ctl(ordered, "get", "pending", "--cluster-queue", "cq", "-o", "wide")
    (row,) = r.out.splitlines()[1:]
    assert row.split()[:2] == ["default", "d"] and "Pending: " in row


async def test_describe_shows_the_position(ordered: Served) -> None:
    r = await ctl(ordered, "describe", "workload", "d")
    assert "Position:      4 in ClusterQueue cq, 1 in LocalQueue default/lq2 (0 is next)" in r.out.splitlines()


async def test_create_draws_a_name_from_generate_name(served: Served, tmp_path: Path) -> None:
    doc = {"apiVersion": "sluicegate.io/v1beta2", "kind": "Workload",
           "metadata": {"generateName": "sample-", "namespace": "default"},
           "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
               "containers": [{"name": "c", "command": ["true"], "resources": {"requests": {"cpu": "1"}}}]}}}]}}
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"generateName": "sample-job-", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
           "spec": {"parallelism": 1, "template": {"spec": {"restartPolicy": "Never", "containers": [
               {"name": "c", "command": ["true"], "resources": {"requests": {"cpu": "1"}}}]}}}}
    path = tmp_path / "generated.yaml"
    path.write_text(json.dumps(doc) + "\n---\n" + json.dumps(doc) + "\n---\n" + json.dumps(job))
    r = await ctl(served, "create", "-f", str(path))
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert [re.fullmatch(r"workload/default/(sample-|sample-job-)[bcdfghjklmnpqrstvwxz2456789]{5} created", x)
            is not None for x in lines] == [True, True, True]
    assert len(set(lines)) == 3
    names = [x.split()[0].split("/")[2] for x in lines]
    assert sorted(w.name for w in served.manager.cache.workloads.values()) == sorted(names)
    r = await ctl(served, "apply", "-f", str(path))
    assert r.code == 1 and "metadata.generateName: not supported: only creation draws a name" in r.err


async def run_ctl(served: Served, *argv: str, env: dict[str, str] | None = None) -> asyncio.subprocess.Process:
    full = {k: v for k, v in os.environ.items() if k not in ("SLUICEGATE_CONFIG", "SLUICEGATE_SERVER")}
    full.update({"XDG_CONFIG_HOME": "/nonexistent/sluicegate-tests", **(env or {})})
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "sluicegate.cli.main", *argv, "--server", served.address,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT, env=full)


async def test_watch_prints_one_header_and_fixed_columns(ordered: Served) -> None:
    proc = await run_ctl(ordered, "get", "workloads", "-w")
    assert proc.stdout is not None
    try:
        lines = [(await asyncio.wait_for(proc.stdout.readline(), 20)).decode() for _ in range(6)]
        submit(ordered.manager, "a-much-longer-workload-name")
        lines.append((await asyncio.wait_for(proc.stdout.readline(), 20)).decode())
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 20)
    assert lines[0].split()[:3] == ["EVENT", "NAMESPACE", "NAME"]
    assert sum(1 for x in lines if x.startswith("EVENT")) == 1
    starts = {line.index("lq") for line in lines[1:]}
    assert len(starts) == 1, lines  # the QUEUE column starts at one place on every line
    assert lines[0].index("QUEUE") in starts


async def test_completion_of_kinds_and_workload_names(ordered: Served, tmp_path: Path) -> None:
    async def complete(line: str) -> list[str]:
        out = tmp_path / "completions"
        proc = await run_ctl(ordered, env={
            "_ARGCOMPLETE": "1", "_ARGCOMPLETE_SHELL": "bash", "COMP_LINE": line, "COMP_POINT": str(len(line)),
            "_ARGCOMPLETE_STDOUT_FILENAME": str(out), "_ARGCOMPLETE_IFS": "\n"})
        await asyncio.wait_for(proc.communicate(), 60)
        return sorted(x.strip() for x in out.read_text().split("\n") if x.strip())

    assert await complete("sluicectl get wor") == ["workloadpriorityclasses", "workloads"]
    assert await complete("sluicectl get clu") == ["clusterqueues"]
    assert await complete(f"sluicectl --server {ordered.address} describe workload ") == ["a", "b", "c", "d", "e"]
    assert await complete(f"sluicectl --server {ordered.address} get workloads -n default ") == [
        "a", "b", "c", "d", "e"]
