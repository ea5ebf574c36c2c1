"""Monitor readings: node and process trees, timestamped from an injected clock."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

from agent_runtime_support import PYTHON, eventually, has_pid, read_pid

from sluicegate.agent.monitor import Monitor, group_members, live_pids, read_boot_id, read_stat


def test_node_reading(tmp_path: Path) -> None:
    monitor = Monitor(clock=lambda: 1234.5)
    first = monitor.node(disk_path=tmp_path)
    second = monitor.node(disk_path=tmp_path, at=99.0)
    assert (first.at, second.at) == (1234.5, 99.0)
    assert first.logical_cpus == os.cpu_count()
    assert 0 < first.memory_available_bytes <= first.memory_total_bytes
    assert 0 <= first.disk_free_bytes <= first.disk_total_bytes
    assert first.disk_path == str(tmp_path)
    assert 0.0 <= second.cpu_busy_fraction <= 1.0


def test_process_identity() -> None:
    me = read_stat(os.getpid())
    assert me is not None
    assert (me.pid, me.ppid, me.exited) == (os.getpid(), os.getppid(), False)
    assert read_stat(os.getpid()) == me  # start ticks are exact integers, stable across reads
    assert read_stat(2**22 + 12345) is None  # above pid_max: can never exist
    assert read_boot_id() != ""
    assert os.getpid() in group_members(os.getpgid(0))
    assert live_pids([os.getpid(), 2**22 + 12345]) == {os.getpid()}


async def test_process_tree_sums_the_family(tmp_path: Path) -> None:
    child_pid = tmp_path / "child.pid"
    grandchild = (
        "import os, time\n"
        "b = b'y' * (16 << 20)\n"
        f"open({str(child_pid)!r}, 'w').write(str(os.getpid()))\n"
        "time.sleep(1000)\n"
    )
    code = (
        "import subprocess, time\n"
        "block = b'x' * (32 << 20)\n"
        f"subprocess.Popen([{PYTHON!r}, '-c', {grandchild!r}])\n"
        "time.sleep(1000)\n"
    )
    proc = await asyncio.create_subprocess_exec(PYTHON, "-c", code, start_new_session=True)
    try:
        await eventually(lambda: has_pid(child_pid), what="the family started")
        monitor = Monitor(clock=lambda: 7.0)
        reading = monitor.process_tree(proc.pid, pgid=proc.pid)
        assert (reading.at, reading.pids) == (7.0, tuple(sorted((proc.pid, read_pid(child_pid)))))
        assert reading.rss_bytes >= (32 + 16) << 20
        assert reading.cpu_seconds > 0
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
