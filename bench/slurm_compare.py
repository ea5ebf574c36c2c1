#!/usr/bin/env python3
"""Slurm on the same machine, for the figures issue 19 compares against.

Starts a private Slurm (Debian's slurmctld and slurmd 22.05; as root) on
loopback in a temporary directory and runs the Slurm equivalents of two
sluicegate benches:

- throughput (default): N `true` jobs submitted at once to one node with
  32 CPUs (the e2e bench's two agents have 16 each), as one job array
  (Slurm's cheapest submission) or one `sbatch` per job (``--submit each``).
  Prints jobs/s from the first submission until the queue is empty, and
  the CPU per job of slurmctld and slurmd (their pods' processes included).
- ``--preempt``: the preemption bench's shape: 120 one-CPU low-priority jobs
  fill a 120-CPU node, then a 20-job high-priority array in a higher-tier
  partition preempts (PreemptMode=CANCEL, the equivalent of grace 0) with
  one 20-CPU job. Prints the time from its submission until it runs.

The scheduler is tuned as Slurm's high-throughput guide suggests for this
kind of load (``sched_interval=1`` is the shortest main-scheduler period;
no submission or batch delay), so the figure is Slurm at its best here, not
at its defaults (which start 32 jobs every 3 s here).

Install once: ``apt-get install slurmctld slurmd slurm-client``.

    .venv/bin/python bench/slurm_compare.py --jobs 2000
    .venv/bin/python bench/slurm_compare.py --preempt
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil

SCHEDULER = "sched_min_interval=0,batch_sched_delay=0,sched_interval=1,bf_interval=1,default_queue_depth=100000"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def config(root: Path, cpus: int, preempt: bool) -> str:
    ctl, slurmd = free_port(), free_port()
    lines = [
        "ClusterName=bench",
        "SlurmctldHost=localhost(127.0.0.1)",
        f"SlurmctldPort={ctl}",
        f"SlurmdPort={slurmd}",
        "AuthType=auth/none",
        "CredType=cred/none",
        "SlurmUser=root",
        "SlurmdUser=root",
        f"StateSaveLocation={root}/state",
        f"SlurmdSpoolDir={root}/spool",
        f"SlurmctldPidFile={root}/slurmctld.pid",
        f"SlurmdPidFile={root}/slurmd.pid",
        f"SlurmctldLogFile={root}/slurmctld.log",
        f"SlurmdLogFile={root}/slurmd.log",
        "SlurmctldDebug=error",
        "SlurmdDebug=error",
        "ProctrackType=proctrack/pgid",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        "SchedulerType=sched/backfill",
        f"SchedulerParameters={SCHEDULER}",
        "SwitchType=switch/none",
        "MpiDefault=none",
        "ReturnToService=2",
        "SlurmdParameters=config_overrides",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "MaxJobCount=200000",
        "MaxArraySize=100001",
        "KillWait=0",
        f"NodeName=localhost NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=16000 State=UNKNOWN",
    ]
    if preempt:
        lines += [
            "PreemptType=preempt/partition_prio",
            "PreemptMode=CANCEL",
            "PartitionName=low Nodes=localhost Default=YES MaxTime=INFINITE State=UP PriorityTier=1",
            "PartitionName=high Nodes=localhost MaxTime=INFINITE State=UP PriorityTier=2",
        ]
    else:
        lines.append("PartitionName=batch Nodes=localhost Default=YES MaxTime=INFINITE State=UP")
    return "\n".join(lines) + "\n"


def wait_for(what: str, check: Callable[[], bool], timeout: float, interval: float = 0.02) -> float:
    """Poll `check` until it is true; returns the moment it was; bounded by `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return time.monotonic()
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


class Slurm:
    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.root, self.env = root, env
        self.procs: dict[str, psutil.Process] = {}

    def run(self, *argv: str) -> str:
        return subprocess.run(argv, env=self.env, check=True, capture_output=True, text=True).stdout

    def count(self, *states: str) -> int:
        argv = ["squeue", "-h", "-r", "-o", "%i"]
        if states:
            argv += ["-t", ",".join(states)]
        return len(self.run(*argv).split())

    def cpu_seconds(self) -> dict[str, float]:
        out = {}
        for name, p in self.procs.items():
            t = p.cpu_times()
            out[name] = t.user + t.system + t.children_user + t.children_system
        return out


@contextmanager
def slurm(cpus: int, preempt: bool) -> Iterator[Slurm]:
    for tool in ("slurmctld", "slurmd", "sbatch", "squeue"):
        if shutil.which(tool) is None:
            sys.exit(f"{tool} not found: apt-get install slurmctld slurmd slurm-client")
    if os.geteuid() != 0:
        sys.exit("run as root: slurmd must start jobs as their user")
    base = Path("/dev/shm") if Path("/dev/shm").is_dir() else None
    with tempfile.TemporaryDirectory(prefix="slurm-bench-", dir=base) as d:
        root = Path(d)
        (root / "state").mkdir()
        (root / "spool").mkdir()
        (root / "slurm.conf").write_text(config(root, cpus, preempt))
        env = dict(os.environ, SLURM_CONF=str(root / "slurm.conf"))
        s = Slurm(root, env)
        started: list[subprocess.Popen[bytes]] = []
        try:
            started.append(subprocess.Popen(["slurmctld", "-D", "-i"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            s.procs["slurmctld"] = psutil.Process(started[-1].pid)
            wait_for("slurmctld", lambda: _ok(s, "sinfo"), 30, 0.1)
            started.append(subprocess.Popen(["slurmd", "-D", "-N", "localhost"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            s.procs["slurmd"] = psutil.Process(started[-1].pid)
            wait_for("the node to be idle", lambda: "idle" in s.run("sinfo", "-h", "-o", "%T"), 30, 0.1)
            yield s
        finally:
            # Cancel every job and let slurmd end their steps before it stops:
            # a slurmd stopped first leaves its slurmstepd processes behind.
            subprocess.run(["scancel", "--quiet", "--full", "-u", "root"], env=env, check=False)
            try:
                wait_for("the jobs to end", lambda: s.count() == 0, 60, 0.1)
            except (TimeoutError, subprocess.CalledProcessError):
                pass
            for p in reversed(started):
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


def _ok(s: Slurm, *argv: str) -> bool:
    try:
        s.run(*argv)
        return True
    except subprocess.CalledProcessError:
        return False


def throughput(jobs: int, submit: str) -> dict[str, object]:
    with slurm(32, preempt=False) as s:
        before = s.cpu_seconds()
        t0 = time.monotonic()
        if submit == "array":
            s.run("sbatch", "-Q", f"--array=0-{jobs - 1}", "-o", "/dev/null", "--wrap", "true")
        else:
            for _ in range(jobs):
                s.run("sbatch", "-Q", "-o", "/dev/null", "--wrap", "true")
        submitted = time.monotonic() - t0
        end = wait_for("the queue to empty", lambda: s.count() == 0, 60 + jobs, 0.05)
        after = s.cpu_seconds()
        wall = end - t0
        return {"jobs": jobs, "submit": submit, "submit_s": round(submitted, 2), "wall_s": round(wall, 2),
                "jobs_per_s": round(jobs / wall, 1),
                "cpu_ms_per_job": {k: round((after[k] - before[k]) * 1000 / jobs, 2) for k in after}}


def preemption() -> dict[str, object]:
    with slurm(120, preempt=True) as s:
        s.run("sbatch", "-Q", "-p", "low", "--array=0-119", "-o", "/dev/null", "--wrap", "sleep 3600")
        wait_for("120 low-priority jobs running", lambda: s.count("R") == 120, 120, 0.05)
        t0 = time.monotonic()
        # One 20-CPU job: Slurm preempts for all of it at once (an array of 20
        # is preempted for one task at a time, ~3.5 s apiece here).
        s.run("sbatch", "-Q", "-p", "high", "-n", "20", "-o", "/dev/null", "--wrap", "sleep 3600")
        end = wait_for("the 20-CPU high-priority job running",
                       lambda: len(s.run("squeue", "-h", "-p", "high", "-t", "R", "-o", "%i").split()) == 1,
                       120, 0.01)
        return {"low_priority_jobs": 120, "preemptor_cpus": 20, "submit_to_running_s": round(end - t0, 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--submit", choices=("array", "each"), default="array")
    ap.add_argument("--preempt", action="store_true")
    ns = ap.parse_args()
    version = subprocess.run(["slurmctld", "-V"], capture_output=True, text=True).stdout.strip()
    result: dict[str, object] = {"slurm": version, "load_average": [round(x, 2) for x in os.getloadavg()],
                                 "spool": "/dev/shm (tmpfs)" if Path("/dev/shm").is_dir() else tempfile.gettempdir()}
    result["preemption" if ns.preempt else "throughput"] = preemption() if ns.preempt else throughput(ns.jobs, ns.submit)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
