"""A store that cannot write: a real controller on a real 2 MiB tmpfs that fills up, twice.

The controller refuses writes with RESOURCE_EXHAUSTED naming SQLite's own error, answers /readyz with 503
and the cause, keeps serving reads, stays up (the same process throughout),
logs one ERROR per episode, and returns to ready on its own once writes
succeed again.  After a restart every acknowledged workload is there.

(Read-only is tested in tests/unit/controller/test_bad_input.py at the
connection: Linux refuses ``mount -o remount,ro`` while the controller holds
its database open for writing, "mount point is busy".)
"""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from sluicegate.client import Client, ClientError, Document

from .harness import Controller, get_json, sluicectl, wait_for

pytestmark = pytest.mark.integration

CALL_DEADLINE = 10.0


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs of the test's own (needs root, as mount does)."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to fill (needs root / CAP_SYS_ADMIN): {res.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def readyz(c: Controller) -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(f"http://{c.health}/readyz", timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def fill(directory: Path) -> Path:
    """Write a ballast file until the filesystem has no byte left."""
    ballast = directory / "ballast"
    chunk = b"\0" * 65536
    with open(ballast, "wb", buffering=0) as f:
        while True:
            try:
                f.write(chunk)
            except OSError:
                break
        while True:
            try:
                f.write(b"\0")
            except OSError:
                break
    return ballast


def body(name: str) -> str:
    return json.dumps({
        "apiVersion": "sluicegate.io/v1beta2", "kind": "Workload",
        "metadata": {"name": name, "namespace": "default", "annotations": {"pad": "x" * 4000}},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [
            {"name": "c", "command": ["true"], "resources": {"requests": {"cpu": "1"}}}]}}}]},
    })


async def create_until_refused(client: Client, prefix: str, acknowledged: list[str]) -> ClientError:
    # The WAL may still hold a few writes' worth of free pages: those are
    # acknowledged (and must survive); the first refusal is what this waits for.
    for i in range(500):
        name = f"{prefix}-{i}"
        try:
            _, created = await client.create_workload(Document(body(name), name))
        except ClientError as exc:
            return exc
        assert created
        acknowledged.append(name)
    raise AssertionError("the full filesystem accepted 500 writes")


async def test_a_full_store_degrades_and_recovers_without_a_restart(tmp_path: Path, disk: Path) -> None:
    c = Controller(tmp_path, extra=["--no-placement"])
    c.store = disk / "controller.db"
    c.start()
    assert c.proc is not None
    pid = c.proc.pid
    acknowledged: list[str] = []
    try:
        async with Client(c.address, timeout=CALL_DEADLINE) as client:
            for i in range(3):
                await client.create_workload(Document(body(f"before-{i}"), "before"))
                acknowledged.append(f"before-{i}")
            assert readyz(c)[0] == 200

            # Disk full: refused with the real cause, degraded, reads served, still up.
            ballast = fill(disk)
            refused = await create_until_refused(client, "full", acknowledged)
            assert refused.code is grpc.StatusCode.RESOURCE_EXHAUSTED, refused
            assert "database or disk is full" in refused.message and "rollback" not in refused.message
            status, doc = readyz(c)
            assert status == 503 and "database or disk is full" in str(doc["reason"]), doc
            listed = [w["metadata"]["name"] for w in await client.list_workloads()]
            assert sorted(listed) == sorted(acknowledged)
            with pytest.raises(ClientError) as again:
                await client.create_workload(Document(body("still-full"), "still-full"))
            assert again.value.code is grpc.StatusCode.RESOURCE_EXHAUSTED

            # Space returns: the timers' probe finds it, no restart involved.
            ballast.unlink()
            wait_for("/readyz 200 after space returned", lambda: readyz(c)[0] == 200)
            await client.create_workload(Document(body("after-full"), "after-full"))
            acknowledged.append("after-full")

            # A second episode: full again, refused again, logged again, back again.
            ballast = fill(disk)
            second = await create_until_refused(client, "full-again", acknowledged)
            assert second.code is grpc.StatusCode.RESOURCE_EXHAUSTED, second
            assert readyz(c)[0] == 503
            ballast.unlink()
            wait_for("/readyz 200 after space returned again", lambda: readyz(c)[0] == 200)
            await client.create_workload(Document(body("after-again"), "after-again"))
            acknowledged.append("after-again")
        assert c.proc.poll() is None and c.proc.pid == pid  # never exited
    finally:
        assert c.stop() == 0

    log = c.log.read_text()
    # One ERROR per episode, however often the probe found the store still failing.
    assert log.count("ERROR sluicegate.controller.commit: store writes fail") == 2, log[-3000:]

    c.start()
    try:
        async with Client(c.address, timeout=CALL_DEADLINE) as client:
            names = sorted(w["metadata"]["name"] for w in await client.list_workloads())
        assert names == sorted(acknowledged)
    finally:
        c.stop()


def test_sluicectl_reports_a_reused_name_with_another_spec_in_one_line(controller: Controller, tmp_path: Path) -> None:
    first, other = tmp_path / "first.json", tmp_path / "other.json"
    first.write_text(body("same-name"))
    doc = json.loads(body("same-name"))
    doc["spec"]["podSets"][0]["count"] = 2
    other.write_text(json.dumps(doc))
    assert "created" in sluicectl(controller.address, "create", "-f", str(first)).stdout
    assert "unchanged (already exists)" in sluicectl(controller.address, "create", "-f", str(first)).stdout
    res = sluicectl(controller.address, "create", "-f", str(other), check=False)
    assert res.returncode != 0
    assert res.stderr.count("\n") == 1 and res.stderr.startswith(
        "error: Workload default/same-name already exists with a different spec (spec.podSets differs)"), res.stderr
    (stored,) = get_json(controller.address, "workloads")["items"]
    assert stored["spec"]["podSets"][0]["count"] == 1
