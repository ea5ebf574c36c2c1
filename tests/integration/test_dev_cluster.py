"""The README's quick-start, run literally against scripts/dev-cluster in a state directory of its own.

It checks what the README promises on this machine (2 CPUs are enough),
that a restart keeps the user's edits instead of re-applying the examples,
and that Ctrl-C (SIGINT to the script's process group, as a terminal sends
it) stops the daemons and every pod the agent started.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from .harness import ROOT, wait_for

pytestmark = pytest.mark.integration

MARKER = "987.654"  # the long pod's sleep, to find its process


def readme_quickstart() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Using it"):]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "README.md: no ```sh block under 'Using it'"
    return [line for line in block[1].splitlines() if line.strip()]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class DevCluster:
    def __init__(self, work: Path) -> None:
        self.work = work
        self.state = work / ".state"
        self.log = work / "dev-cluster.log"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("SLUICEGATE_")}
        self.env.update({"SLUICEGATE_STATE": str(self.state), "PYTHONUNBUFFERED": "1",
                         "SLUICEGATE_LISTEN": f"127.0.0.1:{free_port()}",
                         "SLUICEGATE_TOKEN_LISTEN": f"127.0.0.1:{free_port()}",
                         "SLUICEGATE_HEALTH_LISTEN": "127.0.0.1:0", "SLUICEGATE_AGENT_HEALTH_LISTEN": "127.0.0.1:0",
                         "XDG_CONFIG_HOME": "/nonexistent/sluicegate-tests"})
        self.proc: subprocess.Popen[bytes] | None = None
        self.offset = 0

    def start(self) -> str:
        """Start it and wait until it says it is running; returns what it printed this time."""
        self.offset = self.log.stat().st_size if self.log.exists() else 0
        with open(self.log, "ab") as out:
            # A session of its own, like a shell job: SIGINT to its process group is Ctrl-C.
            self.proc = subprocess.Popen([str(ROOT / "scripts" / "dev-cluster")], stdout=out, stderr=out,
                                         env=self.env, cwd=self.work, start_new_session=True)

        def running() -> str | None:
            assert self.proc is not None
            out = self.output()
            if self.proc.poll() is not None:
                raise AssertionError(f"dev-cluster exited with {self.proc.returncode}:\n{out[-3000:]}")
            return out if "sluicegate is running" in out else None
        return wait_for("dev-cluster running", running, timeout=120, interval=0.1)

    def output(self) -> str:
        with open(self.log, "rb") as f:
            f.seek(self.offset)
            return f.read().decode(errors="replace")

    def ctrl_c(self) -> int:
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGINT)
        return self.proc.wait(timeout=90)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def cgroup_base(self) -> str:
        return "sluicegate-dev-" + hashlib.sha256(str(self.state).encode()).hexdigest()[:8]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[DevCluster]:
    work = tmp_path / "checkout"
    work.mkdir()
    # The README's commands name $PWD/.venv, $PWD/.state and examples/ of a checkout.
    (work / ".venv").symlink_to(ROOT / ".venv")
    (work / "examples").symlink_to(ROOT / "examples")
    c = DevCluster(work)
    try:
        yield c
    finally:
        c.kill()
        for p in marked_pods():
            p.kill()


def marked_pods() -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        if MARKER in " ".join(p.info["cmdline"] or []):
            found.append(p)
    return found


def cgroup_processes(base: str) -> list[int]:
    pids = []
    for procs in Path("/sys/fs/cgroup").glob(f"*/{base}/**/cgroup.procs"):
        try:
            pids += [int(x) for x in procs.read_text().split()]
        except (OSError, ValueError):
            continue
    return pids


def test_readme_quickstart_restart_and_ctrl_c(cluster: DevCluster) -> None:
    first = cluster.start()
    assert "clusterqueue/team-a created" in first

    lines = readme_quickstart()
    export = lines[0]
    assert export.startswith("export ") and "$PWD/.state/admin.conf" in export

    def sh(line: str, *, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", "-c", f"{export}\n{line}"], capture_output=True, text=True,
                              cwd=cluster.work, env=cluster.env, timeout=timeout)

    def ok(line: str) -> str:
        res = sh(line)
        assert res.returncode == 0, f"{line!r} failed ({res.returncode}):\n{res.stdout}\n{res.stderr}"
        return res.stdout

    def until(line: str, what: str, pred: Callable[[str], bool]) -> str:
        return wait_for(what, lambda: (lambda out: out if pred(out) else None)(ok(line)), timeout=30, interval=0.2)

    def states(out: str) -> dict[str, str]:
        # Columns by the header's positions: an empty RESERVED IN is blanks.
        header, *rows = out.splitlines() or [""]
        at = header.find("STATE")
        return {row.split()[1]: row[at:].split()[0] for row in rows if at >= 0 and len(row) > at}

    checked = set()
    for line in lines[1:]:
        cmd = line.split("#", 1)[0].strip()
        if cmd == "sluicectl get clusterqueues":
            out = ok(line)
            assert re.search(r"^team-a\s+research", out, re.M) and re.search(r"^team-b\s+research", out, re.M), out
        elif cmd == "sluicectl get workloads" and "big admitted" in line:
            until(line, "big admitted and small pending",
                  lambda out: states(out).get("big") == "Admitted" and states(out).get("small") == "Pending")
        elif cmd == "sluicectl describe workload small":
            assert "insufficient unused quota for cpu in flavor default, 500m more needed" in ok(line)
        elif cmd == "sluicectl stop workload big":
            ok(line)
            until("sluicectl get workloads", "big inactive, small admitted",
                  lambda out: states(out).get("big") == "Inactive"
                  and states(out).get("small") in ("Admitted", "Finished"))
        elif cmd == "sluicectl logs hello":
            until("sluicectl get workloads", "hello finished", lambda out: states(out).get("hello") == "Finished")
            out = ok(line)
            assert len(re.findall(r"^hello from \S+", out, re.M)) == 2, out
        elif cmd.startswith("sluicectl simulate"):
            json.loads(ok(line))
        elif cmd == "sluicectl get workloads -w":
            # It streams until interrupted: what it printed in a few seconds is every workload so far.
            with pytest.raises(subprocess.TimeoutExpired) as streamed:
                sh(line, timeout=5)
            out = streamed.value.stdout
            out = out.decode() if isinstance(out, bytes) else (out or "")
            assert all(re.search(rf"\b{name}\b", out) for name in ("big", "small", "hello")), out
        else:
            ok(line)
            checked.discard(cmd)
            continue
        checked.add(cmd)
    assert len(checked) == 7, f"the README's promised outcomes were not all checked: {sorted(checked)}"

    # The user's edit, and a pod that would run for a long time.
    edited = (ROOT / "examples" / "queues.yaml").read_text().replace("nominalQuota: \"1\"\n        lendingLimit: 500m",
                                                                       "nominalQuota: \"2\"\n        lendingLimit: 500m")
    (cluster.work / "mine.yaml").write_text(edited)
    ok("sluicectl apply -f mine.yaml")
    ok(f"sluicectl run --queue team-b --cpu 100m --name long -- sleep {MARKER}")
    wait_for("the long pod's process", marked_pods, timeout=30)

    cluster.ctrl_c()
    assert marked_pods() == [], "Ctrl-C left the long pod running"
    assert cgroup_processes(cluster.cgroup_base()) == []
    assert "stopped 1 pod process(es)" in cluster.output()

    second = cluster.start()
    assert "created" not in second and "was applied on the first start" in second, second[-2000:]

    def team_b_quota() -> Any:
        cq = json.loads(ok("sluicectl get clusterqueue team-b -o json"))
        return cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"]
    assert team_b_quota() == "2"
    cluster.ctrl_c()
    assert marked_pods() == []
