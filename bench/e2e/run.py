#!/usr/bin/env python3
"""End to end with real processes: N one-CPU jobs running `true` through two local agents.

Starts a real controller (SQLite store) and two real agents on 127.0.0.1
(allocatable overridden to 16 CPUs each), applies one ClusterQueue with 32
CPUs, submits N one-CPU workloads through sluicectl's client library, and
waits until all have finished.  Prints jobs/s from first submit to last
completion, submit-to-running latency p50/p99 (process start as measured by
the agent minus the moment the job was submitted), and the controller's and
agents' peak RSS.  Not a test: it prints figures.

The bench learns that everything finished by polling the ClusterQueue's
counts, and reads each workload's timestamps (controller- and
agent-stamped) once at the end, so it does not load the system it measures
with a stream of every workload event; ``--observe watch`` watches instead,
as a dashboard would.

All at once (the default), the latency is mostly queue wait: 2,000 jobs on 32
slots.  With ``--rate R`` jobs are submitted open-loop at R jobs/s, which
shows whether the cluster sustains that rate and the latency a job then sees.

    .venv/bin/python bench/e2e/run.py --jobs 2000
    .venv/bin/python bench/e2e/run.py --jobs 2000 --rate 200
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from sluicegate import clientconfig  # noqa: E402
from sluicegate.client import Client, Document  # noqa: E402

QUEUE = """
apiVersion: sluicegate.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: sluicegate.io/v1beta2
kind: ClusterQueue
metadata: {name: bench}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: "32"}
      - {name: memory, nominalQuota: 64Gi}
---
apiVersion: sluicegate.io/v1beta2
kind: LocalQueue
metadata: {name: bench, namespace: default}
spec: {clusterQueue: bench}
"""


def start(args: list[str], log: Path, ready: Path, timeout: float = 30.0) -> tuple[subprocess.Popen[bytes], dict]:
    cmd = [sys.executable, "-m", *args, "--ready-file", str(ready)]
    profile_dir = os.environ.get("SLUICEGATE_PROFILE_DIR")
    if profile_dir:
        # py-spy (installed separately) samples the process for its whole life.
        cmd = [os.environ.get("PY_SPY", "py-spy"), "record", "-f", "raw", "-r", "200",
               "-o", str(Path(profile_dir) / f"{ready.stem}.txt"), "--", *cmd]
    with open(log, "wb") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=f, cwd=ROOT, env={**os.environ, "SLUICEGATE_LOG_LEVEL": os.environ.get("BENCH_LOG_LEVEL", "WARNING")})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{args[0]} exited: {log.read_text()[-2000:]}")
        if ready.exists():
            return proc, json.loads(ready.read_text())
        time.sleep(0.05)
    raise SystemExit(f"{args[0]} not ready in {timeout}s")


def remove_cgroup_bases(suffix: str, root: Path = Path("/sys/fs/cgroup"), *, deadline_s: float = 5.0) -> None:
    """Remove the cgroup trees the bench's agents created, deepest first.

    Pods outlive an agent that exits (a restarted agent adopts them), so a
    pod still running at the end -- its stop was not through when the agents
    were told to exit -- is killed here: these trees belong to this run only.
    The kernel frees a cgroup a moment after its last process is reaped
    (rmdir says EBUSY until then), so removal is retried until the deadline.
    """
    deadline = time.monotonic() + deadline_s
    for _ in range(int(deadline_s / 0.05) + 1):  # bounded in count and time
        bases = sorted(root.glob(f"*/sg-bench-*-{suffix}")) + sorted(root.glob(f"sg-bench-*-{suffix}"))
        left = False
        for base in bases:
            dirs = sorted((p for p in base.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True)
            for d in dirs:
                try:
                    pids = [int(x) for x in (d / "cgroup.procs").read_text().split()]
                except (OSError, ValueError):
                    pids = []
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            for d in [*dirs, base]:
                try:
                    d.rmdir()
                except FileNotFoundError:
                    pass
                except OSError:
                    left = True
        if not left or time.monotonic() >= deadline:
            return
        time.sleep(0.05)  # waiting for the kernel to free a cgroup, bounded above


class PeakRSS:
    def __init__(self, pids: dict[str, int]) -> None:
        self.procs = {k: psutil.Process(p) for k, p in pids.items()}
        self.peak = {k: 0 for k in pids}
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            for k, p in self.procs.items():
                try:
                    self.peak[k] = max(self.peak[k], p.memory_info().rss)
                except psutil.Error:
                    pass

    def __enter__(self) -> PeakRSS:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.thread.join()


def default_agent_data_root() -> str | None:
    # Each pod costs its agent a directory and a log file.  On this project's
    # CI machines the root filesystem is ext4 without a journal, where
    # creating an inode scans past every inode its block group freed in the
    # last minutes; /tmp, where every test run and bench deletes thousands of
    # files, made that 0.3-1.1 ms per creation and ~1.5 ms of agent CPU per
    # pod.  A node keeps its agent's data in /var/lib/sluicegate on a
    # journaled filesystem, which has no such scan; tmpfs is the stable
    # stand-in.  The output names the filesystem used.
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


def filesystem_of(path: Path) -> str:
    best = ""
    fstype = "unknown"
    for part in psutil.disk_partitions(all=True):
        mount = part.mountpoint
        if str(path).startswith(mount.rstrip("/") + "/") or str(path) == mount:
            if len(mount) > len(best):
                best, fstype = mount, part.fstype
    return fstype


def workload(i: int) -> str:
    return json.dumps({
        "apiVersion": "sluicegate.io/v1beta2", "kind": "Workload",
        "metadata": {"name": f"job-{i:05d}", "namespace": "default"},
        "spec": {"queueName": "bench", "podSets": [{"name": "main", "count": 1, "template": {"spec": {
            "containers": [{"name": "main", "command": ["true"], "resources": {"requests": {"cpu": "1"}}}],
            "terminationGracePeriodSeconds": 0}}}]},
    })


def init_tls(tmp: Path) -> tuple[list[str], Path]:
    """A cluster PKI and admin credential in tmp (as 'sluicegate-controller init'); the controller's TLS flags."""
    admin = tmp / "admin.conf"
    subprocess.run([sys.executable, "-m", "sluicegate.controller.server", "init", "--data-dir", str(tmp),
                    "--admin-config", str(admin)], check=True, capture_output=True, cwd=ROOT)
    return ["--pki-dir", str(tmp / "pki"), "--token-listen", "127.0.0.1:0"], admin


def join(info: dict, admin: Path, name: str, data_dir: Path) -> None:
    """Join an agent as a real node would: a bootstrap token, the CA pinned by hash."""
    async def token() -> str:
        async with Client(info["grpc"], config=clientconfig.load(str(admin))) as c:
            return str((await c.create_token(description=name))["token"])

    subprocess.run([sys.executable, "-m", "sluicegate.agent.server", "join", "--controller", info["token"],
                    "--token", asyncio.run(token()), "--ca-cert-hash", info["caCertHash"], "--node-name", name,
                    "--data-dir", str(data_dir)], check=True, capture_output=True, cwd=ROOT)


async def drive(server: str, jobs: int, concurrency: int, rate: float, observe: str, config: Path | None = None) -> dict:
    submitted: dict[str, float] = {}
    acknowledged: dict[str, float] = {}
    reserved: dict[str, float] = {}
    ran: dict[str, tuple[float, float]] = {}  # (process start to end, end to Finished recorded)
    started: dict[str, float] = {}
    finished: dict[str, float] = {}
    done = asyncio.Event()
    async with Client(server, timeout=60, config=clientconfig.load(str(config)) if config else None) as c:
        await c.apply([Document(QUEUE, "bench-queue")])

        def record(wl: dict) -> None:
            name = wl["metadata"]["name"]
            extra = wl.get("status", {}).get("extra", {})
            # A finished workload may keep its pods as lastPods only.
            pods = extra.get("pods") or extra.get("lastPods") or []
            for p in pods:
                if p.get("startedAt") and name not in started:
                    started[name] = float(p["startedAt"])
            raw = {x["type"]: x for x in wl.get("status", {}).get("conditions", [])}
            conds = {t: x["status"] for t, x in raw.items()}
            if conds.get("QuotaReserved") == "True" and name not in reserved:
                reserved[name] = dt.datetime.fromisoformat(raw["QuotaReserved"]["lastTransitionTime"]).timestamp()
            if conds.get("Finished") == "True" and name not in finished:
                recorded = dt.datetime.fromisoformat(raw["Finished"]["lastTransitionTime"]).timestamp()
                ends = [float(p["finishedAt"]) for p in pods if p.get("finishedAt")]
                if ends:
                    ran[name] = (max(ends) - started.get(name, max(ends)), recorded - max(ends))
                finished[name] = recorded

        async def watch() -> None:
            async for _, wl in c.watch_workloads(namespace="default", send_initial=False):
                record(wl)
                if len(finished) == jobs:
                    done.set()
                    return

        async def poll() -> None:
            # Ask the ClusterQueue how much is left (a cheap Get); read every
            # workload's timestamps once, at the end.
            deadline = time.monotonic() + max(120, jobs)
            while time.monotonic() < deadline:
                await asyncio.sleep(0.1)  # polling interval, bounded by the deadline
                if len(submitted) < jobs:
                    continue
                st = (await c.get("ClusterQueue", "bench")).get("status", {})
                if st.get("pendingWorkloads", 0) or st.get("reservingWorkloads", 0):
                    continue
                for wl in await c.list_workloads(namespace="default"):
                    record(wl)
                if len(finished) == jobs:
                    done.set()
                    return

        watcher = asyncio.create_task(watch() if observe == "watch" else poll())
        await asyncio.sleep(0.2)  # let the watch register before the first submission
        queue: asyncio.Queue[int] = asyncio.Queue()
        for i in range(jobs):
            queue.put_nowait(i)
        t0 = time.time()
        late: list[float] = []

        async def submitter() -> None:
            while not queue.empty():
                i = queue.get_nowait()
                if rate > 0:
                    # Open loop: job i is due at t0 + i/rate whatever happened to the others.
                    due = t0 + i / rate
                    if (wait := due - time.time()) > 0:
                        await asyncio.sleep(wait)
                    else:
                        late.append(-wait)
                name = f"job-{i:05d}"
                # The user's clock starts when they submit, not when the controller answers.
                submitted[name] = time.time()
                await c.create_workload(Document(workload(i), "bench"))
                acknowledged[name] = time.time()

        await asyncio.gather(*(submitter() for _ in range(concurrency)))
        t_submitted = time.time()
        await asyncio.wait_for(done.wait(), timeout=max(120, jobs))
        t_end = max(finished.values())
        watcher.cancel()
    lat = sorted(max(0.0, started[n] - submitted[n]) for n in submitted if n in started)
    ack = sorted(acknowledged[n] - submitted[n] for n in acknowledged)
    # The same interval in two legs, as the controller stamped the admission.
    to_admit = sorted(reserved[n] - submitted[n] for n in submitted if n in reserved)
    to_start = sorted(started[n] - reserved[n] for n in submitted if n in reserved and n in started)

    def pct(xs: list[float], q: float) -> float:
        return round(xs[max(0, int(len(xs) * q) - 1)] * 1000, 1) if xs else float("nan")

    return {
        "jobs": jobs,
        "offered_rate": rate or "all at once",
        "submissions_behind_schedule": len(late),
        "submit_seconds": round(t_submitted - t0, 3),
        "submit_ack_ms_p50": round(statistics.median(ack) * 1000, 1),
        "wall_seconds": round(t_end - t0, 3),
        "jobs_per_second": round(jobs / (t_end - t0), 1),
        "submit_to_running_ms_p50": round(statistics.median(lat) * 1000, 1),
        "submit_to_running_ms_p99": round(lat[max(0, int(len(lat) * 0.99) - 1)] * 1000, 1),
        "started_observed": len(lat),
        "submit_to_admitted_ms_p50_p99": [pct(to_admit, 0.5), pct(to_admit, 0.99)],
        "admitted_to_running_ms_p50_p99": [pct(to_start, 0.5), pct(to_start, 0.99)],
        "running_to_ended_ms_p50_p99": [pct(sorted(r[0] for r in ran.values()), 0.5), pct(sorted(r[0] for r in ran.values()), 0.99)],
        "ended_to_finished_ms_p50_p99": [pct(sorted(r[1] for r in ran.values()), 0.5), pct(sorted(r[1] for r in ran.values()), 0.99)],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=16, help="parallel submitters")
    ap.add_argument("--rate", type=float, default=0.0,
                    help="submit at this many jobs/s (open loop: job i at i/rate s) instead of all at once; "
                         "shows the latency a job sees when the cluster keeps up with the offered load")
    ap.add_argument("--observe", choices=("poll", "watch"), default="poll",
                    help="how the bench learns of completions: poll the ClusterQueue's counts and read the "
                         "workloads once at the end (default), or watch every workload event as it happens")
    ap.add_argument("--keep", metavar="DIR", help="keep the store, logs and agents' data in DIR (created)")
    ap.add_argument("--agent-data-root", metavar="DIR", default=default_agent_data_root(),
                    help="where the agents' data directories go (default: /dev/shm when writable, else the "
                         "temporary directory); ignored with --keep")
    ap.add_argument("--tls", action="store_true",
                    help="a secure cluster: mutual TLS for the client and the agents, which join with bootstrap tokens")
    ns = ap.parse_args()
    with tempfile.TemporaryDirectory() as d, tempfile.TemporaryDirectory(dir=ns.agent_data_root) as agent_root:
        tmp = Path(ns.keep or d)
        tmp.mkdir(parents=True, exist_ok=True)
        agents_dir = tmp if ns.keep else Path(agent_root)
        procs = []
        try:
            tls_flags, admin = init_tls(tmp) if ns.tls else ([], None)
            ctl, info = start(["sluicegate.controller.server", "--store", str(tmp / "c.db"), "--listen", "127.0.0.1:0",
                               "--health-listen", "127.0.0.1:0", "--dashboard-listen", "", "--agent-heartbeat-interval", "1", *tls_flags],
                              tmp / "controller.log", tmp / "c.ready")
            procs.append(ctl)
            pids = {"controller": ctl.pid}
            for name in ("bench-a", "bench-b"):
                if admin is not None:
                    join(info, admin, name, agents_dir / name)
                a, _ = start(["sluicegate.agent.server", "--controller", info["grpc"], "--node-name", name,
                              "--data-dir", str(agents_dir / name), "--health-listen", "127.0.0.1:0",
                              "--allocatable", "cpu=16,memory=32Gi",
                              # Its own cgroup tree: an agent removes cgroups it does not know at start-up,
                              # which must never be another agent's running pods.
                              "--cgroup-base", f"sg-bench-{name}-{os.getpid()}"],
                             tmp / f"{name}.log", tmp / f"{name}.ready")
                procs.append(a)
                pids[name] = a.pid
            with PeakRSS(pids) as rss:
                result = asyncio.run(drive(info["grpc"], ns.jobs, ns.concurrency, ns.rate, ns.observe, admin))
            result["tls"] = bool(ns.tls)
            import urllib.request

            with urllib.request.urlopen(f"http://{info['health']}/metrics", timeout=5) as r:
                for line in r.read().decode().splitlines():
                    if line.startswith("sluicegate_scheduling_cycles_total "):
                        result["controller_scheduling_cycles"] = int(float(line.split()[1]))
                    elif line.startswith("kueue_admission_attempts_total{") and 'result="success"' in line:
                        result["controller_cycles_admitting"] = int(float(line.split()[1]))
            result["peak_rss_mib"] = {k: round(v / 2**20, 1) for k, v in rss.peak.items()}
            # CPU (user+sys) each process spent, per job: where the two cores went.
            result["cpu_ms_per_job"] = {k: round(sum(p.cpu_times()[:2]) * 1000 / ns.jobs, 2) for k, p in rss.procs.items()}
            # What the pods' processes (and any wrapper exec'd before them) used,
            # as the kernel charged it to the agent that reaped them.
            for k, p in rss.procs.items():
                if k != "controller":
                    t = p.cpu_times()
                    result["cpu_ms_per_job"][f"{k}-pods"] = round((t.children_user + t.children_system) * 1000 / ns.jobs, 2)
            bench_cpu = psutil.Process().cpu_times()
            result["cpu_ms_per_job"]["bench"] = round((bench_cpu.user + bench_cpu.system) * 1000 / ns.jobs, 2)
            result["machine"] = f"{os.cpu_count()} cpus, {round(psutil.virtual_memory().total / 2**30)} GiB"
            result["agent_data"] = f"{agents_dir} ({filesystem_of(agents_dir)})"
            print(json.dumps(result, indent=2))
        finally:
            # Under py-spy, SIGINT makes it stop its child and write the profile.
            sig = signal.SIGINT if os.environ.get("SLUICEGATE_PROFILE_DIR") else signal.SIGTERM
            for p in procs:
                p.send_signal(sig)
            for p in procs:
                p.wait(timeout=60)
            remove_cgroup_bases(str(os.getpid()))


if __name__ == "__main__":
    main()
