"""Install as a person would: the wheel, deploy/install.sh, the example settings, the units.

The wheel is built from this checkout and installed, with its dependencies,
into a fresh virtualenv by ``deploy/install.sh`` staged under a temporary
root (SLUICEGATE_INSTALL_ROOT). The dependencies come from wheels that
``pip download`` fetched once for the session (no index is read while
installing), never from the project's own virtualenv. The controller and the
agent then run from the installed console scripts with the settings that
install.sh copied from ``deploy/settings/``, rewritten only for loopback
ports and a cgroup base of their own; the installed ``sluicectl`` runs a job
and reads its logs.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .harness import ROOT, remove_cgroups, wait_for

pytestmark = pytest.mark.integration

WHEEL_NAME = re.compile(r"sluicegate-[^-]+-py3-none-any\.whl")


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the wheel built from this checkout, a directory with every dependency's wheel).

    The dependencies are downloaded once into .venv/test-wheels/, keyed by
    pyproject.toml's dependency list, and reused while it is unchanged.
    """
    dist = tmp_path_factory.mktemp("dist")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    # The build backend from this virtualenv (setuptools, as pyproject.toml asks): an isolated build env
    # would reinstall it for every run.
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(dist), str(ROOT)], check=True,
                   timeout=300)
    (wheel,) = [p for p in dist.iterdir() if WHEEL_NAME.fullmatch(p.name)]
    with open(ROOT / "pyproject.toml", "rb") as f:
        requires = sorted(tomllib.load(f)["project"]["dependencies"])
    key = hashlib.sha256(json.dumps([sys.version_info[:2], requires]).encode()).hexdigest()[:16]
    deps = ROOT / ".venv" / "test-wheels" / key
    if not (deps / "complete").exists():
        subprocess.run([*pip, "download", "-d", str(deps), *requires], check=True, timeout=300)
        (deps / "complete").touch()
    return wheel, deps


def _install_env(root: Path, deps: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLUICEGATE_", "VIRTUAL_ENV"))}
    env.update({"SLUICEGATE_INSTALL_ROOT": str(root), "SLUICEGATE_INSTALL_USER": getpass.getuser(),
                "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(deps), "XDG_CONFIG_HOME": "/nonexistent/sluicegate-tests"})
    env["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    return env


def _install(root: Path, deps: Path, *args: str, server: str = "") -> str:
    env = _install_env(root, deps)
    if server:
        env["SLUICEGATE_SERVER"] = server
    res = subprocess.run([str(ROOT / "deploy" / "install.sh"), *args], capture_output=True, text=True,
                         env=env, timeout=300)
    assert res.returncode == 0, f"install.sh {' '.join(args)} failed ({res.returncode}):\n{res.stdout}\n{res.stderr}"
    return res.stdout + res.stderr


def _set(path: Path, key: str, value: str) -> None:
    """Rewrite one top-level setting of an installed settings file (ports, paths only)."""
    text = path.read_text()
    line = re.compile(rf"^#? ?{re.escape(key)}: .*$", re.M)
    assert line.search(text), f"{path.name} has no {key} setting to rewrite"
    path.write_text(line.sub(f"{key}: {value}", text, count=1))


class Daemon:
    def __init__(self, args: list[str], ready: Path, log: Path) -> None:
        self.ready, self.log = ready, log
        with open(log, "ab") as out:
            self.proc = subprocess.Popen([*args, "--ready-file", str(ready)], stdout=out, stderr=out,
                                         env={**os.environ, "PYTHONUNBUFFERED": "1"}, cwd="/")

    def info(self) -> dict[str, Any]:
        def ready() -> dict[str, Any] | None:
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.log.name}: exited with {self.proc.returncode}:\n{self.log.read_text()[-3000:]}")
            return dict(json.loads(self.ready.read_text())) if self.ready.exists() else None
        return wait_for(f"{self.ready.name}", ready, timeout=30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=60)


@pytest.fixture
def staged(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "root"
    root.mkdir()
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_wheel_install_script_and_example_settings_run_a_job(staged: Path, wheels: tuple[Path, Path]) -> None:
    wheel, deps = wheels
    root = staged
    bin_ = root / "opt/sluicegate/venv/bin"
    etc = root / "etc/sluicegate"

    # The controller host.
    (root / "etc/logrotate.d").mkdir(parents=True)
    t0 = time.monotonic()
    out = _install(root, deps, "controller", "--wheel", str(wheel), "--address", "127.0.0.1")
    install_seconds = time.monotonic() - t0
    assert "creating the cluster CA" in out
    assert (root / "etc/systemd/system/sluicegate-controller.service").is_file()
    assert (root / "etc/logrotate.d/sluicegate").read_text() == (ROOT / "deploy/logrotate/sluicegate").read_text()
    assert os.readlink(root / "usr/local/bin/sluicectl") == str(bin_ / "sluicectl")
    assert (etc / "admin.conf").stat().st_mode & 0o777 == 0o600
    # The installed package is the wheel, not this checkout.
    where = subprocess.run([str(bin_ / "python"), "-c", "import sluicegate; print(sluicegate.__file__)"],
                           capture_output=True, text=True, check=True, cwd="/").stdout
    assert where.startswith(str(root / "opt/sluicegate/venv/lib/")), where

    ctl_settings = etc / "controller.yaml"
    assert "pkiDir: " + str(root / "var/lib/sluicegate/pki") in ctl_settings.read_text()
    for key in ("listen", "tokenListen", "healthListen"):
        _set(ctl_settings, key, "127.0.0.1:0")
    controller = Daemon([str(bin_ / "sluicegate-controller"), "--config", str(ctl_settings)],
                        root / "controller.ready", root / "controller.log")
    agent: Daemon | None = None
    cgroup_base = f"sgtest-install-{os.urandom(4).hex()}"
    try:
        info = controller.info()
        grpc_addr, token_addr, ca_hash = info["grpc"], info["token"], info["caCertHash"]

        def ctl(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
            env = {k: v for k, v in os.environ.items() if not k.startswith("SLUICEGATE_")}
            env["XDG_CONFIG_HOME"] = "/nonexistent/sluicegate-tests"
            res = subprocess.run([str(root / "usr/local/bin/sluicectl"), "--config", str(etc / "admin.conf"),
                                  "--server", grpc_addr, *args], capture_output=True, text=True, timeout=60, env=env)
            assert not check or res.returncode == 0, f"sluicectl {' '.join(args)}: {res.stderr}"
            return res

        join = ctl("token", "create", "--print-join-command", "--join-address", token_addr).stdout.split()
        assert join[join.index("--ca-cert-hash") + 1] == ca_hash

        # An agent on the controller's host: install.sh makes its token with
        # admin.conf (whose server address is rewritten like the ports).
        api_port = grpc_addr.rsplit(":", 1)[1]
        out = _install(root, deps, "agent", "--wheel", str(wheel), "--controller", token_addr,
                       "--node-name", "node-1", "--api-port", api_port, server=grpc_addr)
        assert "node node-1 joined" in out, out
        agent_settings = etc / "agent.yaml"
        text = agent_settings.read_text()
        assert f"controller: 127.0.0.1:{api_port}" in text and f"dataDir: {root}/var/lib/sluicegate-agent" in text
        _set(agent_settings, "healthListen", "127.0.0.1:0")
        _set(agent_settings, "cgroupBase", cgroup_base)
        agent = Daemon([str(bin_ / "sluicegate-agent"), "--config", str(agent_settings)],
                       root / "agent.ready", root / "agent.log")
        assert agent.info()["node"] == "node-1"

        ctl("apply", "-f", str(ROOT / "examples" / "queues.yaml"))
        ctl("run", "--queue", "default", "--cpu", "100m", "--memory", "32Mi", "--name", "hello",
            "--", "sh", "-c", "echo hello from the installed wheel")

        def finished() -> bool:
            w = json.loads(ctl("get", "workload", "hello", "-o", "json").stdout)
            conds = {c["type"]: c for c in w.get("status", {}).get("conditions", [])}
            return conds.get("Finished", {}).get("status") == "True"
        wait_for("workload hello finished", finished, timeout=30, interval=0.2)
        assert "hello from the installed wheel" in ctl("logs", "hello").stdout

        # Running it again is an upgrade: the package is reinstalled, the
        # settings, the CA and the node's credentials are kept.
        ca = (root / "var/lib/sluicegate/pki/ca.crt").read_bytes()
        settings_before = ctl_settings.read_text()
        again = _install(root, deps, "controller", "--wheel", str(wheel), "--address", "127.0.0.1")
        assert "keeping" in again and "creating the cluster CA" not in again
        assert (root / "var/lib/sluicegate/pki/ca.crt").read_bytes() == ca
        assert ctl_settings.read_text() == settings_before
        again = _install(root, deps, "agent", "--wheel", str(wheel), "--controller", token_addr)
        assert "already joined" in again
    finally:
        if agent is not None:
            agent.stop()
        controller.stop()
        remove_cgroups(cgroup_base)
    print(f"install.sh controller (fresh venv, wheel + dependencies): {install_seconds:.1f}s")


def test_install_script_refuses_bad_arguments(tmp_path: Path) -> None:
    env = _install_env(tmp_path, tmp_path)
    script = str(ROOT / "deploy" / "install.sh")
    for args, message in [
        ([], "usage"),
        (["worker"], "first argument: expected controller or agent, got 'worker'"),
        (["agent"], "--controller: the controller's token port HOST:7423 is required"),
        (["agent", "--controller", "ctl"], "--controller: expected HOST:PORT, got 'ctl'"),
        (["controller", "--frobnicate"], "unknown option '--frobnicate'"),
    ]:
        res = subprocess.run([script, *args], capture_output=True, text=True, env=env, timeout=30)
        assert res.returncode == 2 and message in (res.stdout + res.stderr), (args, res.stdout, res.stderr)
    assert not any(tmp_path.iterdir()), "a refused invocation must change nothing"


def test_unit_files_verify() -> None:
    """systemd-analyze verify on the shipped units, with ExecStart= pointing at this checkout's console scripts."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (Debian package systemd); the unit files were not verified")
    installed = Path(sys.executable).parent
    units = ROOT / "deploy" / "systemd"
    tmp = Path(os.environ.get("TMPDIR", "/tmp"))
    work = tmp / f"sg-units-{os.getpid()}"
    work.mkdir()
    try:
        for unit in sorted(units.glob("*.service")):
            text = unit.read_text()
            assert "/opt/sluicegate/venv/bin/" in text, unit.name
            (work / unit.name).write_text(text.replace("/opt/sluicegate/venv/bin/", f"{installed}/"))
        res = subprocess.run([analyze, "verify", *sorted(str(p) for p in work.iterdir())],
                             capture_output=True, text=True, timeout=60)
        assert res.returncode == 0 and not res.stderr.strip(), res.stderr
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_units_settings_and_install_script_agree() -> None:
    """The paths the units, the example settings and install.sh name are the same ones."""
    from sluicegate.agent.settings import load_settings as load_agent
    from sluicegate.controller.settings import load_settings as load_controller

    units = ROOT / "deploy" / "systemd"
    script = (ROOT / "deploy" / "install.sh").read_text()

    def directives(name: str) -> dict[str, str]:
        lines = (units / name).read_text().splitlines()
        return dict(line.split("=", 1) for line in lines if re.match(r"^[A-Z]\w*=", line))

    ctl, agent = directives("sluicegate-controller.service"), directives("sluicegate-agent.service")
    assert 'PREFIX="$R/opt/sluicegate"' in script and 'VENV="$PREFIX/venv"' in script
    assert ctl["ExecStart"].split()[:3] == ["/opt/sluicegate/venv/bin/sluicegate-controller", "--config",
                                            "/etc/sluicegate/controller.yaml"]
    assert agent["ExecStart"].split()[:3] == ["/opt/sluicegate/venv/bin/sluicegate-agent", "--config",
                                              "/etc/sluicegate/agent.yaml"]
    # The controller runs unprivileged in its state directory; the agent as root in its own.
    assert (ctl["User"], ctl["StateDirectory"], "User" in agent, agent["StateDirectory"]) == \
        ("sluicegate", "sluicegate", False, "sluicegate-agent")
    c = load_controller(str(ROOT / "deploy/settings/controller.yaml"), {})
    a = load_agent(str(ROOT / "deploy/settings/agent.yaml"), {})
    assert Path(c.store).parent == Path(c.pki_dir).parent == Path("/var/lib") / ctl["StateDirectory"]
    assert Path(a.data_dir) == Path(a.pki_path).parent == Path("/var/lib") / agent["StateDirectory"]
    assert 'CTL_STATE="$R/var/lib/sluicegate"' in script and 'AGENT_STATE="$R/var/lib/sluicegate-agent"' in script
