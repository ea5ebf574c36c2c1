"""The real controller process, driven with sluicectl over gRPC on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .harness import ROOT, Controller, get_json, sluicectl, wait_for, workload_states

pytestmark = pytest.mark.integration

EXAMPLES = str(ROOT / "tests" / "integration" / "queues.yaml")


def run(server: str, name: str, cpu: str, *, queue: str = "default", count: int = 1) -> None:
    sluicectl(server, "run", "--queue", queue, "--name", name, "--cpu", cpu, "--count", str(count), "--", "true")


def test_more_work_than_fits_is_admitted_in_order_and_the_rest_says_why(controller: Controller) -> None:
    s = controller.address
    out = sluicectl(s, "apply", "-f", EXAMPLES).stdout
    assert "clusterqueue/team-a created" in out
    # team-a: 2 cpu nominal; team-b lends 1 of its 2: team-a can reach 3.
    run(s, "big", "1", count=3)
    wait_for("big admitted", lambda: workload_states(s).get("big") == "Admitted")
    run(s, "small", "1")
    run(s, "b-two", "2", queue="team-b")
    wait_for("pending reasons", lambda: all(
        json.loads(sluicectl(s, "get", "workload", n, "-o", "json").stdout).get("status", {}).get("conditions")
        for n in ("small", "b-two")))
    assert workload_states(s) == {"big": "Admitted", "small": "Pending", "b-two": "Pending"}
    described = sluicectl(s, "describe", "workload", "small").stdout
    assert "insufficient unused quota for cpu in flavor default, 1 more needed" in described
    cq = get_json(s, "clusterqueue", "team-a")
    cpu = cq["status"]["flavorsReservation"][0]["resources"][0]
    assert (cq["status"]["reservingWorkloads"], cpu["total"], cpu["borrowed"]) == (1, "3", "1")

    sluicectl(s, "delete", "workload", "big")
    wait_for("the waiting workloads to be admitted",
             lambda: workload_states(s) == {"small": "Admitted", "b-two": "Admitted"})
    big_admission = get_json(s, "workload", "small")["status"]["admission"]
    assert big_admission == {
        "clusterQueue": "team-a",
        "podSetAssignments": [{"name": "main", "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "1"}, "count": 1}],
    }


CREATOR = textwrap.dedent(
    """
    import asyncio, json, sys
    from sluicegate.client import Client, ClientError, Document

    async def main(server, total, confirmed_path):
        async with Client(server, timeout=5) as c:
            with open(confirmed_path, "a") as out:
                for i in range(total):
                    body = {"apiVersion": "sluicegate.io/v1beta2", "kind": "Workload",
                            "metadata": {"name": f"wl-{i:03d}", "namespace": "default"},
                            "spec": {"queueName": "default", "podSets": [{"name": "main", "count": 1,
                                     "template": {"spec": {"containers": [{"name": "c", "command": ["true"],
                                     "resources": {"requests": {"cpu": "100m"}}}]}}}]}}
                    try:
                        wl, created = await c.create_workload(Document(json.dumps(body), "creator"))
                    except ClientError:
                        return
                    out.write(json.dumps([wl["metadata"]["name"], wl["metadata"]["uid"]]) + "\\n")
                    out.flush()

    asyncio.run(main(sys.argv[1], int(sys.argv[2]), sys.argv[3]))
    """
)


def test_kill_9_between_requests_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    c = Controller(tmp_path, extra=["--no-placement"]).start()
    try:
        sluicectl(c.address, "apply", "-f", EXAMPLES)
        confirmed = tmp_path / "confirmed.jsonl"
        creator = subprocess.Popen([sys.executable, "-c", CREATOR, c.address, "200", str(confirmed)], cwd=ROOT)
        wait_for("20 confirmed submissions", lambda: confirmed.exists() and len(confirmed.read_text().splitlines()) >= 20)
        c.kill9()
        creator.wait(timeout=30)
        acked = dict(json.loads(line) for line in confirmed.read_text().splitlines())

        c.start()
        after = {w["metadata"]["name"]: w for w in get_json(c.address, "workloads", "-A")["items"]}
        # Every acknowledged submission survived, with the identity it was given.
        assert {n: after[n]["metadata"]["uid"] for n in acked} == acked
        admitted_before_retry = {n for n, w in after.items() if w.get("status", {}).get("admission")}

        # Retrying the whole batch is idempotent: 200 workloads, no duplicates, old uids kept.
        confirmed.unlink()
        subprocess.run([sys.executable, "-c", CREATOR, c.address, "200", str(confirmed)], cwd=ROOT, check=True, timeout=120)
        final = {w["metadata"]["name"]: w for w in get_json(c.address, "workloads", "-A")["items"]}
        assert sorted(final) == [f"wl-{i:03d}" for i in range(200)]
        assert {n: final[n]["metadata"]["uid"] for n in acked} == acked
        assert len({w["metadata"]["uid"] for w in final.values()}) == 200
        # Quota accounting was rebuilt, not doubled: the workloads admitted
        # before the crash still hold it, and nothing exceeds the cohort's 3 cpus.
        assert admitted_before_retry <= {n for n, w in final.items() if w.get("status", {}).get("admission")}
        wait_for("admissions to settle", lambda: get_json(c.address, "clusterqueue", "team-a")["status"]["pendingWorkloads"] > 0)
        reserved = get_json(c.address, "clusterqueue", "team-a")["status"]["flavorsReservation"][0]["resources"][0]["total"]
        assert reserved == "3"
    finally:
        c.stop()


def test_bad_manifest_is_refused_whole_with_the_field_named(controller: Controller, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(textwrap.dedent("""
        apiVersion: sluicegate.io/v1beta2
        kind: ResourceFlavor
        metadata: {name: spot}
        ---
        apiVersion: sluicegate.io/v1beta2
        kind: ClusterQueue
        metadata: {name: broken}
        spec:
          resourceGroups:
          - coveredResources: [cpu]
            flavors:
            - name: spot
              resources:
              - {name: cpu, nominalQuota: "-2"}
        """))
    res = sluicectl(controller.address, "apply", "-f", str(bad), check=False)
    assert res.returncode == 1
    assert res.stderr.count("\n") == 1 and res.stderr.startswith("error: ")
    assert "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota" in res.stderr
    assert get_json(controller.address, "resourceflavors")["items"] == []


def test_unreachable_controller_is_a_clear_one_line_error() -> None:
    res = sluicectl("127.0.0.1:1", "--timeout", "2", "get", "clusterqueues", check=False)
    assert res.returncode == 3
    assert res.stderr.startswith("error: cannot reach the controller at 127.0.0.1:1")
    assert res.stderr.count("\n") == 1


async def test_watch_streams_the_admission(controller: Controller) -> None:
    from sluicegate.client import Client, Document

    sluicectl(controller.address, "apply", "-f", EXAMPLES)
    body = {"apiVersion": "sluicegate.io/v1beta2", "kind": "Workload", "metadata": {"name": "watched"},
            "spec": {"queueName": "default", "podSets": [{"count": 1, "template": {"spec": {"containers": [
                {"name": "c", "command": ["true"], "resources": {"requests": {"cpu": "1"}}}]}}}]}}
    async with Client(controller.address) as c:
        pre = json.loads(json.dumps(body))
        pre["metadata"]["name"] = "already-there"
        await c.create_workload(Document(json.dumps(pre), "test"))
        stream = c.watch_workloads(namespace="default", send_initial=True)
        # The initial listing proves the watch is registered before the next create.
        first = await anext(stream)
        assert (first[0], first[1]["metadata"]["name"]) == ("ADDED", "already-there")
        await c.create_workload(Document(json.dumps(body), "test"))
        seen: list[tuple[str, bool]] = []
        async with asyncio.timeout(30):  # bounded: a workload that is never admitted fails, not hangs
            async for etype, wl in stream:
                if wl["metadata"]["name"] != "watched":
                    continue
                conds = {x["type"]: x["status"] for x in wl.get("status", {}).get("conditions", [])}
                seen.append((etype, conds.get("Admitted") == "True"))
                if conds.get("Admitted") == "True" or len(seen) > 10:
                    break
        assert seen == [("ADDED", False), ("MODIFIED", True)]


async def test_grpc_health_and_http_health_endpoints(controller: Controller) -> None:
    import aiohttp
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    async with grpc.aio.insecure_channel(controller.address) as ch:
        resp = await health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
        assert resp.status == health_pb2.HealthCheckResponse.SERVING
    async with aiohttp.ClientSession() as s:
        for path, code in (("/livez", 200), ("/healthz", 200), ("/readyz", 200)):
            async with s.get(f"http://{controller.health}{path}") as r:
                assert r.status == code
        async with s.get(f"http://{controller.health}/metrics") as r:
            text = await r.text()
            assert "# TYPE kueue_pending_workloads gauge" in text
