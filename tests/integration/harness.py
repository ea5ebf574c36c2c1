"""Real processes on 127.0.0.1 for integration tests: controller (and agents), sluicectl.

Waiting is always on a condition with a deadline; polling intervals are
short and every loop is bounded by its deadline.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[2]


def wait_for(what: str, pred: Callable[[], T], *, timeout: float = 20.0, interval: float = 0.02) -> T:
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = pred()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last value: {last!r})")


class Controller:
    def __init__(self, workdir: Path, *, extra: list[str] | None = None) -> None:
        self.workdir = workdir
        self.store = workdir / "controller.db"
        self.ready_file = workdir / "controller.ready"
        self.log = workdir / "controller.log"
        self.extra = extra or []
        self.proc: subprocess.Popen[bytes] | None = None
        self.address = ""
        self.health = ""
        # With --pki-dir: the token port and the CA's hash.
        self.token_address = ""
        self.ca_hash = ""
        # The web dashboard's URL (https:// with --pki-dir).
        self.dashboard = ""

    def start(self) -> Controller:
        self.ready_file.unlink(missing_ok=True)
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "sluicegate.controller.server", "--store", str(self.store),
                 "--listen", "127.0.0.1:0", "--health-listen", "127.0.0.1:0", "--dashboard-listen", "127.0.0.1:0",
                 "--ready-file", str(self.ready_file), *self.extra],
                stdout=log, stderr=log, env=env, cwd=ROOT,
            )
        info = wait_for("controller ready file", self._ready)
        self.address, self.health = info["grpc"], info["health"]
        self.token_address, self.ca_hash = info.get("token", ""), info.get("caCertHash", "")
        self.dashboard = info.get("dashboard", "")
        return self

    def _ready(self) -> dict[str, Any] | None:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"controller exited with {self.proc.returncode}:\n{self.log.read_text()[-3000:]}")
        if self.ready_file.exists():
            return dict(json.loads(self.ready_file.read_text()))
        return None

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> int:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=30)


# Tests never read a developer's own client config: sluicectl looks for one under here only.
_NO_HOME_CONFIG = {"XDG_CONFIG_HOME": "/nonexistent/sluicegate-tests"}


def sluicectl(server: str, *args: str, check: bool = True, input: str | None = None,
              config: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SLUICEGATE_CONFIG", "SLUICEGATE_SERVER")}
    env.update(_NO_HOME_CONFIG)
    res = subprocess.run(
        [sys.executable, "-m", "sluicegate.cli.main", "--server", server,
         *(["--config", str(config)] if config else []), *args],
        capture_output=True, text=True, timeout=60, input=input, cwd=ROOT, env=env,
    )
    if check and res.returncode != 0:
        raise AssertionError(f"sluicectl {' '.join(args)} failed ({res.returncode}): {res.stderr}")
    return res


def get_json(server: str, *args: str) -> Any:
    return json.loads(sluicectl(server, "get", *args, "-o", "json").stdout)


def workload_states(server: str) -> dict[str, str]:
    items = get_json(server, "workloads", "-A")["items"]
    return {w["metadata"]["name"]: state_of(w) for w in items}


def state_of(w: dict[str, Any]) -> str:
    conds = {c["type"]: c["status"] for c in w.get("status", {}).get("conditions", [])}
    if conds.get("Finished") == "True":
        return "Finished"
    if w["spec"].get("active") is False:
        return "Inactive"
    if conds.get("Admitted") == "True":
        return "Admitted"
    return "Pending"


class Agent:
    def __init__(self, workdir: Path, controller: str, name: str, *, allocatable: str = "cpu=2,memory=2Gi",
                 labels: tuple[str, ...] = (), extra: list[str] | None = None) -> None:
        self.workdir = workdir
        self.controller = controller
        self.name = name
        self.allocatable = allocatable
        self.labels = labels
        # Further agent flags, e.g. ["--static-pod-dir", DIR, "--eviction-hard", "memory.available<1Gi"].
        self.extra = list(extra or [])
        # Each test agent owns its cgroup tree: an agent sweeps cgroups it does not
        # know at start-up, so agents sharing a base would kill each other's pods.
        # The base survives restarts of this Agent, so re-adoption sees its own pods.
        if "--cgroup-base" not in self.extra:
            self.cgroup_base = f"sgtest-{name}-{os.urandom(4).hex()}"
            self.extra += ["--cgroup-base", self.cgroup_base]
        else:
            self.cgroup_base = self.extra[self.extra.index("--cgroup-base") + 1]
        self.data_dir = workdir / f"agent-{name}"
        self.ready_file = workdir / f"agent-{name}.ready"
        self.log = workdir / f"agent-{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.health = ""

    def start(self) -> Agent:
        self.ready_file.unlink(missing_ok=True)
        args = [sys.executable, "-m", "sluicegate.agent.server", "--controller", self.controller, "--node-name", self.name,
                "--data-dir", str(self.data_dir), "--health-listen", "127.0.0.1:0", "--allocatable", self.allocatable,
                "--ready-file", str(self.ready_file)]
        for label in self.labels:
            args += ["--label", label]
        args += self.extra
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=log, env={**os.environ, "PYTHONUNBUFFERED": "1"}, cwd=ROOT)
        info = wait_for(f"agent {self.name} registered", self._ready)
        self.health = info["health"]
        return self

    def _ready(self) -> dict[str, Any] | None:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"agent {self.name} exited with {self.proc.returncode}:\n{self.log.read_text()[-3000:]}")
        if self.ready_file.exists():
            return dict(json.loads(self.ready_file.read_text()))
        return None

    def pods(self) -> list[dict[str, Any]]:
        import urllib.request

        with urllib.request.urlopen(f"http://{self.health}/pods", timeout=5) as r:
            return list(json.loads(r.read()))

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=60)
        # Pods outlive their agent by design; a test cluster must not.
        remove_cgroups(self.cgroup_base)


def kill_marked_processes(marker: str) -> None:
    """Tests that kill -9 an agent leave its pods running; remove them by a marker in their command."""
    import psutil

    for p in psutil.process_iter(["cmdline"]):
        try:
            if marker in " ".join(p.info["cmdline"] or []):
                p.kill()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue


def remove_cgroups(base: str, *, root: Path = Path("/sys/fs/cgroup"), timeout: float = 5.0) -> None:
    """Kill what is left in an agent's cgroup tree ``<root>/<hierarchy>/<base>``, then remove the tree.

    For agents given their own ``--cgroup-base``: every process in it is a pod
    of that agent, found exactly (a command marker is lost when ``sh -c``
    execs its last command).  A cgroup can only be removed once its processes
    are gone, so removal retries, bounded by ``timeout``.
    """
    if not base or "/" in base:
        raise ValueError(f"not a cgroup base name: {base!r}")
    deadline = time.monotonic() + timeout
    while True:
        tops = [*root.glob(f"*/{base}"), *root.glob(base)]
        for top in tops:
            for procs in top.rglob("cgroup.procs"):
                try:
                    pids = [int(line) for line in procs.read_text().split()]
                except (OSError, ValueError):
                    continue
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
        left = []
        for top in tops:
            dirs = sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True)
            for d in [*dirs, top]:
                try:
                    d.rmdir()
                except FileNotFoundError:
                    pass
                except OSError:
                    left.append(d)
        if not left or time.monotonic() >= deadline:
            return
        time.sleep(0.05)
