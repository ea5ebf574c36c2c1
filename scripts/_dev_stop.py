"""Stop the dev cluster's agent and then every pod it ran (scripts/dev-cluster's Ctrl-C).

Usage: python scripts/_dev_stop.py AGENT_PID CGROUP_BASE

An agent leaves its pods running when it stops: on a real node that is what
lets it be upgraded under running work. A single-machine dev cluster
should not leave work behind on Ctrl-C, so this finds the pods -- the
agent's descendants (each pod is a session of its own, out of reach of the
terminal's SIGINT) and every process in the agent's cgroups -- stops the
agent, then sends the pods SIGTERM, waits a bounded time and SIGKILLs what
is left. On the next start the agent finds them gone and reports them so.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import psutil

CGROUP_ROOT = Path("/sys/fs/cgroup")
AGENT_STOP_SECONDS = 60.0
POD_GRACE_SECONDS = 10.0


def cgroup_pids(base: str) -> set[int]:
    pids: set[int] = set()
    for top in [*CGROUP_ROOT.glob(f"*/{base}"), *CGROUP_ROOT.glob(base)]:
        for procs in top.rglob("cgroup.procs"):
            try:
                pids.update(int(line) for line in procs.read_text().split())
            except (OSError, ValueError):
                continue
    return pids


def _is_spawner(p: psutil.Process) -> bool:
    """The agent's own spawner processes (agent/runtime/zygote.py): they end with the agent and are no pods."""
    try:
        return any(part.endswith("zygote.py") for part in p.cmdline())
    except psutil.Error:
        return False


def pods_of(agent: psutil.Process | None, base: str) -> list[psutil.Process]:
    found: dict[int, psutil.Process] = {}
    if agent is not None:
        try:
            found.update((p.pid, p) for p in agent.children(recursive=True) if not _is_spawner(p))
        except psutil.NoSuchProcess:
            pass
    for pid in cgroup_pids(base) - {os.getpid()} - ({agent.pid} if agent else set()):
        try:
            found.setdefault(pid, psutil.Process(pid))
        except psutil.NoSuchProcess:
            continue
    return list(found.values())


def signal_all(procs: list[psutil.Process], sig: signal.Signals) -> None:
    for p in procs:
        try:
            p.send_signal(sig)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not argv[0].isdigit() or not argv[1] or "/" in argv[1]:
        print("usage: _dev_stop.py AGENT_PID CGROUP_BASE", file=sys.stderr)
        return 2
    base = argv[1]
    try:
        agent: psutil.Process | None = psutil.Process(int(argv[0]))
    except psutil.NoSuchProcess:
        agent = None
    pods = pods_of(agent, base)
    if agent is not None:
        signal_all([agent], signal.SIGTERM)
        try:
            agent.wait(timeout=AGENT_STOP_SECONDS)
        except psutil.TimeoutExpired:
            signal_all([agent], signal.SIGKILL)
    # Pods the agent started while it was stopping are in its cgroups.
    pods = list({p.pid: p for p in [*pods, *pods_of(None, base)]}.values())
    signal_all(pods, signal.SIGTERM)
    _, alive = psutil.wait_procs(pods, timeout=POD_GRACE_SECONDS)
    signal_all(alive, signal.SIGKILL)
    _, alive = psutil.wait_procs(alive, timeout=5)
    if pods:
        print(f"stopped {len(pods) - len(alive)} pod process(es)" + (f", {len(alive)} would not die" if alive else ""))
    return 1 if alive else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
