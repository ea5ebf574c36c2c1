"""An upgraded agent re-adopts the pods an older agent left running, from the older agent's files.

``data/checkpoint-2026-11.json`` and ``data/pods-meta-2026-11.json`` are
what the agent wrote in November 2026 for one running pod (captured from a
real run); only the process identity (pid, start ticks, boot id) and the
data directory are filled in here, for a process this test starts.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from sluicegate.agent.monitor import read_boot_id, read_stat

from .conftest import MakeNode

DATA = Path(__file__).parent / "data"


def install_todays_files(directory: Path, *, pid: int, start_ticks: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "pods" / "pod-a" / "home").mkdir(parents=True)
    text = (DATA / "checkpoint-2026-11.json").read_text()
    text = (text.replace('"@PID@"', str(pid)).replace('"@START_TICKS@"', str(start_ticks))
            .replace("@BOOT_ID@", read_boot_id()).replace("@DATA_DIR@", str(directory)))
    (directory / "checkpoint.json").write_text(text)
    (directory / "pods-meta.json").write_text((DATA / "pods-meta-2026-11.json").read_text())


async def test_a_pod_running_under_todays_checkpoint_is_adopted_with_its_metadata(
    make_node: MakeNode, tmp_path: Path
) -> None:
    proc = subprocess.Popen(["sleep", "600"], start_new_session=True)
    try:
        stat = read_stat(proc.pid)
        assert stat is not None
        install_todays_files(tmp_path / "agent", pid=proc.pid, start_ticks=stat.start_ticks)

        node = await make_node()
        report = node.report("pod-a")
        assert report is not None
        assert (report.phase, report.workload, report.namespace, report.name) == ("Running", "wl-1", "team-a", "train-0")
        assert (report.priority, report.qos_class, dict(report.requests)) == (7, "Burstable", {"cpu": 100, "memory": 1 << 20})
        assert [(c.name, c.pid, c.state) for c in report.containers] == [("main", proc.pid, "Running")]
        assert node.meta["pod-a"].run_as_uid == 65534
        assert node.meta["pod-a"].probes["main"]["exec"] == ["true"]
        assert node.container_names("pod-a") == ("main",)
        if shutil.which("setpriv"):
            # The pod's user comes back too: a probe or a restart would run as it.
            assert node.runtime.privilege_argv("pod-a")[1:4] == ["--reuid=65534", "--regid=65534", "--clear-groups"]

        # The metadata now lives in the checkpoint, one file: the old file is gone
        # and the next agent reads the same from the checkpoint alone.
        assert not (tmp_path / "agent" / "pods-meta.json").exists()
        before = node.meta["pod-a"]
        again = await make_node()
        assert again.meta["pod-a"] == before
        again_report = again.report("pod-a")
        assert again_report is not None and again_report.workload == "wl-1"
    finally:
        proc.kill()
        proc.wait()


def install_intermediate_files(directory: Path, *, pid: int, start_ticks: int) -> None:
    """What agents wrote between the two layouts: one checkpoint, version 1, the node's records in a "node" list."""
    install_todays_files(directory, pid=pid, start_ticks=start_ticks)
    document = json.loads((directory / "checkpoint.json").read_text())
    document["node"] = json.loads((directory / "pods-meta.json").read_text())
    (directory / "checkpoint.json").write_text(json.dumps(document, separators=(",", ":"), sort_keys=True))
    (directory / "pods-meta.json").unlink()


async def test_a_pod_running_under_the_intermediate_checkpoint_is_adopted_with_its_metadata(
    make_node: MakeNode, tmp_path: Path
) -> None:
    proc = subprocess.Popen(["sleep", "600"], start_new_session=True)
    try:
        stat = read_stat(proc.pid)
        assert stat is not None
        install_intermediate_files(tmp_path / "agent", pid=proc.pid, start_ticks=stat.start_ticks)

        node = await make_node()
        report = node.report("pod-a")
        assert report is not None
        assert (report.phase, report.workload, report.namespace, report.name) == ("Running", "wl-1", "team-a", "train-0")
        assert (report.priority, report.qos_class, dict(report.requests)) == (7, "Burstable", {"cpu": 100, "memory": 1 << 20})
        assert [(c.name, c.pid, c.state) for c in report.containers] == [("main", proc.pid, "Running")]
        assert node.meta["pod-a"].run_as_uid == 65534

        # Rewritten as one record per pod by adoption's own write, and read back the same by the next agent.
        document = json.loads((tmp_path / "agent" / "checkpoint.json").read_text())
        assert (document["version"], "node" in document) == (2, False)
        assert [(p["node"]["uid"], p["runtime"]["uid"]) for p in document["pods"]] == [("pod-a", "pod-a")]
        before = node.meta["pod-a"]
        again = await make_node()
        assert again.meta["pod-a"] == before
        again_report = again.report("pod-a")
        assert again_report is not None and (again_report.workload, again_report.phase) == ("wl-1", "Running")
    finally:
        proc.kill()
        proc.wait()
