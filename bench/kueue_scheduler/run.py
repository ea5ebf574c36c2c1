#!/usr/bin/env python3
"""Replay Kueue's scheduler performance test against a real sluicegate controller.

Starts the controller process (SQLite store in a temporary directory), a
separate process of fake nodes speaking the real agent protocol, then
creates the generator configuration's ResourceFlavor, Cohorts,
WorkloadPriorityClasses, Namespaces, ClusterQueues and LocalQueues over
gRPC, and its workloads at their configured intervals.  A watch on
workloads, in an observer process of its own (watcher.py), feeds the
recorder until every workload has finished.  The fake nodes' and the
observer's processes start before the controller and are given its address
once it serves, so that their start-up is not part of the controller's wall.  Prints
Kueue's runner summary as JSON (stdout) and a table next to Kueue's
published figures and the ideal lower bound (stderr); with ``--output`` it
also writes Kueue's artifacts there (summary.yaml, controller.stats.yaml,
cqStates.csv, wlStates.csv).  Not a test: it prints figures.

    .venv/bin/python bench/kueue_scheduler/run.py --config baseline --scale 0.1 --time-scale 0.5
    .venv/bin/python bench/kueue_scheduler/run.py --config baseline
    .venv/bin/python bench/kueue_scheduler/run.py --config large-scale --profile py-spy --output /tmp/ls
    .venv/bin/python bench/kueue_scheduler/run.py --config tas --output /tmp/tasrun
    .venv/bin/python bench/kueue_scheduler/run.py --config tas --without-tas   # the same load, no constraints
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import dataclasses
import json
import math
import os
import platform
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import yaml

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.kueue_scheduler import profiling  # noqa: E402
from bench.kueue_scheduler.config import (  # noqa: E402
    ConfigError,
    GeneratorConfig,
    Plan,
    expand,
    ideal_bound,
    load_config,
    scaled,
    without_tas,
)
from bench.kueue_scheduler.generator import (  # noqa: E402
    CreationStats,
    create_queues,
    create_workloads,
    queue_apply_documents,
)
from bench.kueue_scheduler.recorder import TimelineBin  # noqa: E402
from bench.kueue_scheduler.watcher import Observer, WatchFailed  # noqa: E402
from sluicegate.client import CREATE_WINDOW, Client, Document  # noqa: E402

HERE = Path(__file__).resolve().parent
CONFIGS = {name: HERE / "configs" / name / "generator.yaml" for name in ("baseline", "large-scale", "tas")}

# Kueue's published means for the full-size configurations, seconds and percent: issue 7 for baseline and
# large-scale; the TAS file's from the comments of Kueue's configs/tas/rangespec.yaml (mean of 10 CI runs).
PUBLISHED: dict[str, dict[str, Any]] = {
    "baseline": {"wall_s": 351.0, "usage_pct": 55.9, "admission_s": {"large": 16.5, "medium": 76.8, "small": 215.0}},
    "large-scale": {"wall_s": 1179.0},
    "tas": {"wall_s": 401.472, "usage_pct": 62.41, "admission_s": {
        "large-balanced-rack": 37.862, "large-preferred-rack": 39.573, "large-required-rack": 39.625,
        "medium-balanced-rack": 106.303, "medium-preferred-rack": 106.324, "medium-required-rack": 107.071,
        "small-balanced-rack": 237.846, "small-preferred-rack": 246.090, "small-required-rack": 246.755}},
}
# Issue 18's TAS targets: wall within this factor of the ideal bound, and this many times faster than Kueue.
TAS_IDEAL_FACTOR = 1.3
TAS_SPEEDUP = 5.0
STARTUP_TIMEOUT = 60.0
# How often the bench looks for a ready file: the controller idles from writing it until the bench connects.
READY_POLL_S = 0.005


# ---------------------------------------------------------------- processes


@dataclass(slots=True)
class Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    started: float  # monotonic, just before the process was started
    info: dict[str, Any] = field(default_factory=dict)


def start(name: str, argv: list[str], *, log: Path, env: dict[str, str] | None = None, cwd: Path = ROOT,
          stdin: int | None = None) -> Proc:
    started = time.monotonic()
    with open(log, "wb") as f:
        popen = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, cwd=cwd, env=env, stdin=stdin)
    return Proc(name, popen, log, started)


def wait_ready(proc: Proc, ready: Path) -> dict[str, Any]:
    """Bounded poll for the file the process writes once it is ready; returns what it wrote."""
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if proc.popen.poll() is not None:
            raise SystemExit(f"{proc.name} exited with {proc.popen.returncode} before it was ready:\n"
                             f"{proc.log.read_text()[-3000:]}")
        if ready.exists():
            info: dict[str, Any] = json.loads(ready.read_text())
            return info
        time.sleep(READY_POLL_S)
    stop(proc, timeout=10)
    raise SystemExit(f"{proc.name} was not ready within {STARTUP_TIMEOUT:g}s; its log: {proc.log}")


def spawn(name: str, argv: list[str], *, log: Path, ready: Path, env: dict[str, str] | None = None,
          cwd: Path = ROOT) -> Proc:
    proc = start(name, argv, log=log, env=env, cwd=cwd)
    proc.info = wait_ready(proc, ready)
    return proc


def _wait_exit(popen: subprocess.Popen[bytes], timeout: float) -> bool:
    """Wait for the process to exit, woken the moment it does (a pidfd; Popen.wait with a timeout
    polls, up to 50 ms late); False if it is still running after ``timeout``."""
    try:
        fd = os.pidfd_open(popen.pid)
    except (AttributeError, OSError):
        try:
            popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        return True
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        if not poller.poll(timeout * 1000):
            return False
    finally:
        os.close(fd)
    popen.wait()
    return True


def stop(proc: Proc, *, timeout: float) -> float:
    """SIGTERM, wait (SIGKILL after ``timeout``); returns the monotonic time it exited."""
    if proc.popen.poll() is None:
        proc.popen.send_signal(signal.SIGTERM)
        if not _wait_exit(proc.popen, timeout):
            print(f"warning: {proc.name} (pid {proc.popen.pid}) ignored SIGTERM for {timeout:g}s; killing it", file=sys.stderr)
            proc.popen.kill()
            proc.popen.wait(timeout=10)
    return time.monotonic()


def scheduling_cycles(health: str) -> int | None:
    """The controller's sluicegate_scheduling_cycles_total counter, read from its /metrics."""
    try:
        with urllib.request.urlopen(f"http://{health}/metrics", timeout=10) as resp:
            for line in resp.read().decode().splitlines():
                if line.startswith("sluicegate_scheduling_cycles_total "):
                    return int(float(line.split()[1]))
    except (OSError, ValueError):
        pass
    return None


def peak_rss_kib(pid: int) -> int:
    """VmHWM: the process's peak resident set, what getrusage's maxrss reports after exit."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return -1


# ------------------------------------------------------------------ the run


@dataclass(slots=True)
class RunResult:
    completed: bool
    queues_created_at: float
    first_created_at: float | None
    last_created_at: float | None
    # The watch's "every workload finished" time (None: the run did not complete; see Outcome).
    done_at: float | None
    creation: CreationStats
    # When the client connected, and when asyncio.run(drive()) returned.
    connected_at: float = 0.0
    returned_at: float = 0.0
    watch_error: str = ""


async def drive(address: str, plan: Plan, observer: Observer, *, concurrency: int, timeout: float,
                into: list[RunResult], queue_documents: list[Document] | None = None) -> None:
    """Create the queues and the workloads; wait until the observer has seen every workload finish.

    The result goes into ``into``, not out as the coroutine's: asyncio.run's clean-up may repr the
    finished main task, result included (50,000 creation lags), while the controller waits."""
    async with Client(address, timeout=120) as client:
        connected_at = time.monotonic()
        queues_at = await create_queues(client, plan, queue_documents)
        # Sent before the first creation: the observer records it before any workload's event.
        observer.queues_created(queues_at)
        creation = await create_workloads(client, plan, start=queues_at, concurrency=concurrency)
        remaining = timeout - (time.monotonic() - queues_at)
        try:
            await asyncio.wait_for(observer.finished(), timeout=max(1.0, remaining))
        except TimeoutError:
            pass
    into.append(RunResult(
        completed=observer.done_at is not None and not observer.error, queues_created_at=queues_at,
        first_created_at=creation.first_at, last_created_at=creation.last_at, done_at=observer.done_at,
        creation=creation, connected_at=connected_at, watch_error=observer.error,
    ))


def phases(*, spawned: float, ready: float, clients_ready: float, run: RunResult, last_finished_at: float | None,
           scraped: float, nodes_stopped: float, exited: float) -> dict[str, float]:
    """The controller's life (cmdStats.wallMs, spawn to exit) cut into consecutive phases, seconds; they
    add up to the wall.  ``run`` is runWallS (first creation answered to last workload seen finished)."""
    first = run.first_created_at or run.queues_created_at
    last = last_finished_at if last_finished_at is not None else run.returned_at
    marks = [("controllerStart", spawned, ready), ("clientsStart", ready, clients_ready),
             ("queues", clients_ready, run.queues_created_at), ("toFirstCreate", run.queues_created_at, first),
             ("run", first, last), ("runEnd", last, run.returned_at), ("metricsScrape", run.returned_at, scraped),
             ("fakeNodesStop", scraped, nodes_stopped), ("controllerStop", nodes_stopped, exited)]
    return {name: round(end - begin, 3) for name, begin, end in marks}


PHASE_LABELS = {"controllerStart": "start", "clientsStart": "nodes+watch", "queues": "queues",
                "toFirstCreate": "1st create", "run": "run", "runEnd": "run end", "metricsScrape": "/metrics",
                "fakeNodesStop": "nodes stop", "controllerStop": "stop"}


# ----------------------------------------------------------------- reporting


def _pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]


def targets(name: str | None, full_size: bool, result: dict[str, Any]) -> dict[str, Any]:
    """Issue 7's targets, checked only on the full-size named configurations."""
    if name is None or not full_size:
        return {}
    cmd = result["cmdStats"]
    wall_s = cmd["wallMs"] / 1000
    classes = result["summary"]["workloadClasses"]
    all_done = all(c["finished"] == c["planned"] for c in classes.values())
    if name == "baseline":
        ideal = result["ideal"]["wallS"]
        usage = result["summary"]["clusterQueueClasses"].get("cq", {}).get("usagePercent", 0.0)
        out: dict[str, Any] = {
            "wall <= 1.3 x ideal": {"limit_s": round(1.3 * ideal, 1), "measured_s": round(wall_s, 1), "met": wall_s <= 1.3 * ideal},
            "usage >= 80 %": {"measured": usage, "met": usage >= 80.0},
            "all workloads finished": {"met": all_done},
        }
        for cls, pub in PUBLISHED["baseline"]["admission_s"].items():
            c = classes.get(cls, {})
            got = c.get("averageTimeToAdmissionMs", 0) / 1000
            # Watch lag can shorten the event-based figure; the target must hold for the controller's own stamps too.
            stamped = (c.get("controllerAverageTimeToAdmissionMs") or 0) / 1000
            out[f"{cls} avg time to admission < Kueue/3"] = {
                "limit_s": round(pub / 3, 2), "measured_s": round(got, 2), "controller_stamped_s": round(stamped, 2),
                "met": max(got, stamped) < pub / 3}
        return out
    if name == "tas":
        ideal = result["ideal"]["wallS"]
        violations = sum(int(c["violations"]) for per_level in (result.get("placement") or {}).values()
                         for c in per_level.values())
        kueue_s = PUBLISHED["tas"]["wall_s"]
        return {
            f"wall <= {TAS_IDEAL_FACTOR:g} x ideal": {"limit_s": round(TAS_IDEAL_FACTOR * ideal, 1), "measured_s": round(wall_s, 1),
                                                     "met": wall_s <= TAS_IDEAL_FACTOR * ideal},
            f"wall <= Kueue / {TAS_SPEEDUP:g}": {"limit_s": round(kueue_s / TAS_SPEEDUP, 1), "measured_s": round(wall_s, 1),
                                                "speedup": round(kueue_s / wall_s, 2) if wall_s else None,
                                                "met": wall_s <= kueue_s / TAS_SPEEDUP},
            "all workloads finished": {"met": all_done},
            "topology constraints applied": {"met": not result["config"]["withoutTas"]},
            "no required/balanced placement broke its rack constraint": {
                "violations": violations, "met": not result["config"]["withoutTas"] and violations == 0},
        }
    if name == "large-scale":
        rss_mib = cmd["maxrss"] / 1024
        return {
            "wall <= 60 s": {"measured_s": round(wall_s, 1), "met": wall_s <= 60},
            "all workloads admitted and finished": {"met": all_done},
            "controller peak RSS <= 1 GiB": {"measured_mib": round(rss_mib, 1), "met": 0 <= rss_mib <= 1024},
        }
    return {}


def table(result: dict[str, Any]) -> str:
    name = result["config"]["name"]
    full = result["config"]["fullSize"]
    pub = PUBLISHED.get(name or "", {}) if full else {}
    ideal = result["ideal"]
    cmd = result["cmdStats"]
    rows: list[tuple[str, str, str, str]] = []

    def kueue(v: float | None, fmt: str) -> str:
        if v is None:
            return "-" if full else "n/a (scaled)"
        return fmt.format(v)

    wall = cmd["wallMs"] / 1000
    rows.append(("wall time, command (s)", f"{wall:.1f}", kueue(pub.get("wall_s"), "{:.0f}"),
                 f"ideal {ideal['wallS']:.1f} ({wall / ideal['wallS']:.2f}x)" if ideal["wallS"] else "-"))
    rows.append(("wall time, first create to last finish (s)", f"{result['run']['runWallS']:.1f}", "-", "-"))
    n_wl = result["config"]["workloads"]
    rows.append(("throughput (workloads / command wall s)", f"{n_wl / wall:.1f}" if wall else "-",
                 kueue(n_wl / pub["wall_s"] if pub.get("wall_s") else None, "{:.1f}"),
                 f"ideal {n_wl / ideal['wallS']:.1f}" if ideal["wallS"] else "-"))
    for cls, s in result["summary"]["clusterQueueClasses"].items():
        rows.append((f"CPU usage, ClusterQueue class {cls} (%)", f"{s['usagePercent']:.1f}",
                     kueue(pub.get("usage_pct") if cls == "cq" else None, "{:.1f}"),
                     f"{ideal['usagePct']:.1f} if the wall were ideal"))
        if s.get("cpuUsedByEvictedRuns"):
            # Evicted runs' quota-time is work done again: the ideal bound plus that work spread
            # over the whole nominal quota is about the best wall those evictions leave.
            lost_s = s["cpuUsedByEvictedRuns"] / 1e6
            nominal_cpu = s["nominalQuota"] / 1000
            rows.append((f"held by runs later evicted, class {cls} (CPU-s)", f"{lost_s:.0f}", "-",
                         f"usage without them {s['usefulUsagePercent']:.1f} %; ideal + lost work "
                         f"≈ {ideal['wallS'] + lost_s / nominal_cpu:.1f} s" if nominal_cpu else "-"))
    for cls, s in sorted(result["summary"]["workloadClasses"].items(), key=lambda kv: -kv[1]["count"]):
        a = s["averageTimeToAdmissionMs"] / 1000
        ctl = s["controllerAverageTimeToAdmissionMs"]
        # Beside the evictions of the class: a workload evicted (preempted) waits for admission again.
        stamped = f"controller-stamped {ctl / 1000:.2f}; " if ctl is not None else ""
        rows.append((f"avg time to admission, {cls} (s)", f"{a:.2f}", kueue(pub.get("admission_s", {}).get(cls), "{:.1f}"),
                     f"{stamped}{s['totalEvictions']} evictions of this class"))
    for cls, s in sorted(result["summary"]["workloadClasses"].items(), key=lambda kv: -kv[1]["count"]):
        rows.append((f"avg time to finish, {cls} (s)", f"{s['averageTimeToFinishMs'] / 1000:.2f}", "-",
                     f"{s['finished']}/{s['planned']} finished, {s['totalEvictions']} evictions"))
    held = sum(s.get("cpuHeldWithoutPods", 0) for s in result["summary"]["workloadClasses"].values()) / 1e6
    nominal_cpu = sum(s["nominalQuota"] for s in result["summary"]["clusterQueueClasses"].values()) / 1000
    if held and nominal_cpu:
        rows.append(("quota held with no pod running, all classes (CPU-s)", f"{held:.0f}", "-",
                     f"admitted->started + ended->Finished; ≈ {held / nominal_cpu:.1f} s of the whole quota"))
    for cls, s in sorted(result["summary"]["workloadClasses"].items(), key=lambda kv: -kv[1]["count"]):
        d, c = s.get("controllerAverageDispatchMs"), s.get("controllerAverageCompletionMs")
        if d is not None and c is not None:
            rows.append((f"avg admitted->pod started / pod ended->Finished, {cls} (s)", f"{d / 1000:.2f} / {c / 1000:.2f}",
                         "-", "controller-stamped; ideal 0 / 0"))
    for level, per_class in (result.get("placement") or {}).items():
        short = level.rsplit("/", 1)[-1]
        for cls, c in per_class.items():
            if c["checked"]:
                rows.append((f"{short} domains per workload, {cls} (avg / max)", f"{c['averageDomains']:.2f} / {c['maxDomains']}",
                             "-", f"{c['violations']} violations of {c['constraint']} in {c['checked']}"
                             + (f" ({c['podListMismatch']} not judged: pod list != pod count)" if c["podListMismatch"] else "")))
    if result["config"].get("topology"):
        rows.append(("topology", result["config"]["topology"], "-",
                     "constraints off (--without-tas)" if result["config"]["withoutTas"] else "-"))
    if result["config"].get("minAdmitDurationS") is not None:
        rows.append(("ClusterQueue minAdmitDuration (s)", f"{result['config']['minAdmitDurationS']:g}", "-",
                     "reclaim waits for it; compare the medium class's time to admission"))
    rows.append(("controller CPU (user+sys s) / peak RSS (MiB)",
                 f"{(cmd['userMs'] + cmd['sysMs']) / 1000:.1f} / {cmd['maxrss'] / 1024:.0f}", "-", "-"))
    head = ("metric", "sluicegate", "Kueue published", "ideal / note")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(4)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(head, widths, strict=True)), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    if result.get("phasesS"):
        lines.append("")
        lines.append("command wall by phase (s; controller spawn to exit): "
                     + ", ".join(f"{PHASE_LABELS.get(k, k)} {v:.2f}" for k, v in result["phasesS"].items()))
    t = result.get("targets") or {}
    if t:
        lines.append("")
        lines.append(f"issue {18 if name == 'tas' else 7} targets:")
        for k, v in t.items():
            detail = ", ".join(f"{a}={b}" for a, b in v.items() if a != "met")
            lines.append(f"  [{'met' if v['met'] else 'MISSED'}] {k}" + (f" ({detail})" if detail else ""))
    return "\n".join(lines)


# ---------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default="baseline", help="baseline, large-scale, or a path to a generator YAML")
    p.add_argument("--scale", type=float, default=1.0, help="multiply every workload set's count (0.1: a tenth)")
    p.add_argument("--queue-scale", type=float, default=1.0, help="multiply every queue set's count")
    p.add_argument("--time-scale", type=float, default=1.0, help="multiply runtimes and creation intervals")
    p.add_argument("--min-admit-duration", type=float, default=None, metavar="SECONDS",
                   help="give every ClusterQueue this minAdmitDuration (minimum runtime before reclaim or "
                        "fair-sharing preemption; scaled by --time-scale)")
    p.add_argument("--nodes", type=int, default=0, help="fake nodes (0: enough for 1.5x the total nominal quota, at least 4; "
                                                         "a file with a topology brings its own nodes)")
    p.add_argument("--node-cpu", type=int, default=1000, help="allocatable CPUs per fake node (not with a topology)")
    p.add_argument("--without-tas", action="store_true",
                   help="drop the topology constraints (flavor without topologyName, no podset annotations) but keep "
                        "the labelled nodes: the same load without TAS")
    p.add_argument("--concurrency", type=int, default=0,
                   help=f"workload creations sent and not yet answered at most (0: the client library's "
                        f"default, {CREATE_WINDOW})")
    p.add_argument("--heartbeat-interval", type=float, default=1.0, help="controller's --agent-heartbeat-interval (s)")
    p.add_argument("--timeline-bin", type=float, default=5.0, metavar="SECONDS",
                   help="width of the bins of the quota timeline printed after the table")
    p.add_argument("--timeout", type=float, default=1800.0, help="give up this many seconds after the queues exist")
    p.add_argument("--output", type=Path, help="write summary.yaml, controller.stats.yaml, CSVs, logs and profiles here")
    p.add_argument("--profile", choices=("none", "py-spy", "cprofile"), default="none",
                   help="profile the controller (py-spy samples at 100 Hz; cProfile slows it down noticeably)")
    p.add_argument("--py-spy", default=shutil.which("py-spy") or "/tmp/pyspy-venv/bin/py-spy", help="py-spy executable")
    p.add_argument("--progress", type=float, default=10.0, help="print progress to stderr every N seconds (0: never)")
    p.add_argument("--controller-log-level", default="WARNING")
    p.add_argument("--store", choices=("sqlite", "postgresql"), default="sqlite",
                   help="postgresql: a private server (tests/pg.py, fsync on, TCP on 127.0.0.1); the controller "
                        "campaigns for the lease and writes fenced, as in an HA deployment")
    p.add_argument("--controller-src", type=Path, default=ROOT,
                   help="source tree the controller runs from (default: this checkout); e.g. an export of one "
                        "commit (git archive HEAD | tar -x -C DIR) to measure it while the checkout changes")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    ns = parse_args(argv)
    name = ns.config if ns.config in CONFIGS else None
    path = CONFIGS.get(ns.config, Path(ns.config))
    try:
        base: GeneratorConfig = load_config(path)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    full_size = ns.scale == 1 and ns.queue_scale == 1 and ns.time_scale == 1
    cfg = scaled(base, count_scale=ns.scale, queue_scale=ns.queue_scale, time_scale=ns.time_scale)
    if ns.without_tas:
        cfg = without_tas(cfg)
    plan = expand(cfg)
    if ns.min_admit_duration is not None:
        guard = ns.min_admit_duration * ns.time_scale
        plan = dataclasses.replace(plan, queues=tuple(dataclasses.replace(q, min_admit_duration_s=guard)
                                                      for q in plan.queues))
    bound = ideal_bound(plan)
    concurrency = ns.concurrency or CREATE_WINDOW
    topology_nodes = plan.nodes
    if topology_nodes and ns.nodes:
        print("error: --nodes: the generator file's topology sets the nodes", file=sys.stderr)
        return 2
    nodes = len(topology_nodes) or ns.nodes or max(4, math.ceil(plan.total_nominal_m * 1.5 / (ns.node_cpu * 1000)))
    node_cpu = topology_nodes[0].cpu_m / 1000 if topology_nodes else ns.node_cpu
    if ns.nodes == 0 and nodes * node_cpu * 1000 < plan.total_nominal_m:
        raise SystemExit("internal: too few nodes for the quota")
    topology_text = ""
    if plan.topology is not None:
        topology_text = " x ".join(f"{lv.count} {lv.name}" for lv in plan.topology.levels) + f" ({plan.topology.name})"
    print(f"{path.name} ({name or 'custom'}): {len(plan.queues)} ClusterQueues, {len(plan.workloads)} workloads, "
          f"ideal wall {bound.wall_s:.1f}s; {nodes} fake nodes x {node_cpu:g} CPUs"
          + (f"; topology {topology_text}" + (" (constraints off)" if ns.without_tas else "") if topology_text else ""),
          file=sys.stderr)

    with tempfile.TemporaryDirectory(prefix="kueue-sched-") as tmp_s:
        tmp = Path(tmp_s)
        out = ns.output or tmp
        out.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "SLUICEGATE_LOG_LEVEL": ns.controller_log_level}
        ctl_argv = [sys.executable]
        if ns.profile == "cprofile":
            ctl_argv += ["-m", "cProfile", "-o", str(out / "controller.cprofile")]
        store_url = str(tmp / "c.db")
        if ns.store == "postgresql":
            from tests.pg import PostgresServer  # noqa: PLC0415

            pg = PostgresServer(fsync=True)
            atexit.register(pg.close)
            store_url = pg.create_database()
        ctl_argv += ["-m", "sluicegate.controller.server", "--store", store_url, "--listen", "127.0.0.1:0",
                     "--health-listen", "127.0.0.1:0", "--dashboard-listen", "",
                     "--agent-heartbeat-interval", str(ns.heartbeat_interval),
                     "--log-level", ns.controller_log_level, "--ready-file", str(tmp / "c.ready")]
        procs: list[Proc] = []
        spy: subprocess.Popen[bytes] | None = None
        # The observer and the fake nodes start first and wait for the controller's address: their
        # Python start-up is then neither in the controller's wall nor competing with its start-up.
        observer = Observer(plan, progress_every=ns.progress)
        try:
            node_argv = ["--nodes", str(nodes), "--node-cpu", str(ns.node_cpu)]
            if topology_nodes:
                (tmp / "nodes.json").write_text(json.dumps([
                    {"name": n.name, "labels": dict(n.labels), "allocatable": {"cpu": n.cpu_m, "memory": n.memory}}
                    for n in topology_nodes]))
                node_argv = ["--node-file", str(tmp / "nodes.json")]
            nodes_proc = start("fake nodes", [sys.executable, str(HERE / "fakenode.py"), "--controller", "-", *node_argv,
                                              "--waiting-file", str(tmp / "n.waiting"), "--ready-file", str(tmp / "n.ready"),
                                              "--stats-file", str(out / "fakenodes.json")],
                               log=out / "fakenodes.log", stdin=subprocess.PIPE)
            procs.append(nodes_proc)
            queue_docs = queue_apply_documents(plan)
            wait_ready(nodes_proc, tmp / "n.waiting")
            observer.wait_started()
            ctl = spawn("controller", ctl_argv, log=out / "controller.log", ready=tmp / "c.ready", env=env,
                        cwd=ns.controller_src)
            ready_at = time.monotonic()
            procs.append(ctl)
            ctl_ps = psutil.Process(ctl.popen.pid)
            # The controller's CPU (user + system s) at the phases' boundaries: which phases cost it CPU.
            cpu_at = {"ready": sum(ctl_ps.cpu_times()[:2])}
            address = ctl.info["grpc"]
            if ns.profile == "py-spy":
                if not Path(ns.py_spy).exists():
                    raise SystemExit(f"py-spy not found at {ns.py_spy}: python3 -m venv /tmp/pyspy-venv && "
                                     "/tmp/pyspy-venv/bin/pip install py-spy, or pass --py-spy PATH")
                with open(out / "py-spy.log", "wb") as spy_log:
                    spy = subprocess.Popen([ns.py_spy, "record", "--pid", str(ctl.popen.pid), "--rate", "100", "--format",
                                            "raw", "--threads", "--idle", "-o", str(out / "controller.pyspy.txt")],
                                           stdout=subprocess.DEVNULL, stderr=spy_log)
            assert nodes_proc.popen.stdin is not None
            nodes_proc.popen.stdin.write(f"{address}\n".encode())
            nodes_proc.popen.stdin.close()
            observer.watch(address)
            nodes_proc.info = wait_ready(nodes_proc, tmp / "n.ready")
            clients_ready = time.monotonic()
            cpu_at["clientsReady"] = sum(ctl_ps.cpu_times()[:2])
            epoch_offset = time.time() - time.monotonic()
            driven: list[RunResult] = []
            asyncio.run(drive(address, plan, observer, concurrency=concurrency, timeout=ns.timeout, into=driven,
                              queue_documents=queue_docs))
            run = driven[0]
            run.returned_at = time.monotonic()
            observer.stop_watching()
            cpu_at["runEnded"] = sum(ctl_ps.cpu_times()[:2])
            maxrss = peak_rss_kib(ctl.popen.pid)
            cycles = scheduling_cycles(ctl.info["health"])
            nodes_cpu = sum(psutil.Process(nodes_proc.popen.pid).cpu_times()[:2])
            scraped = time.monotonic()
            cpu_at["scraped"] = sum(ctl_ps.cpu_times()[:2])
            # The fake nodes leave first so the controller has no open streams to drain.
            nodes_stopped = stop(nodes_proc, timeout=30)
            cpu = ctl_ps.cpu_times()
            exited = stop(ctl, timeout=60)
            # After the controller's exit: handing the recorder over is outside its wall.
            seen = observer.outcome()
        except WatchFailed as exc:
            raise SystemExit(f"error: the bench's observer process: {exc}") from None
        finally:
            for p in procs:  # the fake nodes first, as above
                stop(p, timeout=30)
            observer.close()
            if spy is not None:
                try:
                    spy.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    spy.send_signal(signal.SIGINT)
                    spy.wait(timeout=30)

        recorder = seen.recorder
        # The observer saw the end from the Finished conditions' bytes; its recorder, decoding every event, decides.
        run.completed = run.completed and recorder.finished >= len(plan.workloads)
        summary = recorder.summary(epoch_offset=epoch_offset)
        cmd_stats = {"wallMs": int((exited - ctl.started) * 1000), "userMs": int(cpu.user * 1000),
                     "sysMs": int(cpu.system * 1000), "maxrss": maxrss}
        cpu_phases = {"controllerStart": cpu_at["ready"], "clientsStart": cpu_at["clientsReady"] - cpu_at["ready"],
                      "queuesToRunEnd": cpu_at["runEnded"] - cpu_at["clientsReady"],
                      "metricsScrape": cpu_at["scraped"] - cpu_at["runEnded"],
                      "fakeNodesStop": cpu.user + cpu.system - cpu_at["scraped"]}
        phases_s = phases(spawned=ctl.started, ready=ready_at, clients_ready=clients_ready, run=run,
                          last_finished_at=seen.last_finished_at, scraped=scraped, nodes_stopped=nodes_stopped,
                          exited=exited)
        lag = run.creation.lag
        result: dict[str, Any] = {
            "controller": {"source": str(ns.controller_src), "revision": _revision(ns.controller_src)},
            "config": {"name": name, "path": str(path), "scale": ns.scale, "queueScale": ns.queue_scale,
                       "timeScale": ns.time_scale, "fullSize": full_size, "clusterQueues": len(plan.queues),
                       "workloads": len(plan.workloads), "fakeNodes": nodes, "nodeCpu": node_cpu,
                       "createConcurrency": concurrency, "minAdmitDurationS": ns.min_admit_duration,
                       "topology": topology_text or None, "withoutTas": ns.without_tas},
            "machine": {"cpus": os.cpu_count(), "memoryGiB": round(psutil.virtual_memory().total / 2**30),
                        "cpuModel": _cpu_model(), "python": platform.python_version(), "kernel": platform.release()},
            "cmdStats": cmd_stats,
            "phasesS": phases_s,
            # cmdStats' userMs + sysMs (read before the controller is stopped) by phase, seconds.
            "controllerCpuByPhaseS": {k: round(v, 2) for k, v in cpu_phases.items()},
            "summary": summary,
            "ideal": {"wallS": round(bound.wall_s, 2), "workS": round(bound.work_s, 2), "busiestCohort": bound.busiest_cohort,
                      "creationS": round(bound.creation_s, 2), "usagePct": round(bound.usage_pct, 1)},
            "run": {
                "completed": run.completed,
                "watchError": run.watch_error or seen.error,
                "watchRestarts": seen.restarts,
                "runWallS": round((seen.last_finished_at or time.monotonic()) - (run.first_created_at or run.queues_created_at), 2),
                "creationSpanS": round((run.last_created_at or 0) - run.queues_created_at, 2),
                "plannedCreationSpanS": round(max((w.due for w in plan.workloads), default=0.0), 2),
                "creationLagP50S": round(_pct(lag, 0.5), 3),
                "creationLagMaxS": round(max(lag, default=0.0), 3),
                "watchEvents": recorder.events,
                # How far behind the controller the bench's watch ran: per message, receipt minus the
                # controller's publishing of its oldest event.
                "watchLagP50S": round(_pct(seen.lags, 0.5), 3),
                "watchLagMaxS": round(max(seen.lags, default=0.0), 3),
                "watchEventsWithoutConditionChange": recorder.quiet_events,
                "schedulingCycles": cycles,
                # Whether the bench itself could have been the bottleneck (2 cores: controller + these):
                # its submitting process and its observer process together, then each.
                "benchProcessCpuS": round(sum(os.times()[:2]) + seen.cpu_s, 1),
                "submitterProcessCpuS": round(sum(os.times()[:2]), 1),
                "observerProcessCpuS": round(seen.cpu_s, 1),
                # Decoding the events into the recorder, after the controller's exit (not in the above).
                "observerDecodeCpuS": round(seen.decode_cpu_s, 1),
                "fakeNodesProcessCpuS": round(nodes_cpu, 1),
            },
            "kueuePublished": PUBLISHED.get(name or "") if full_size else None,
        }
        if topology_nodes and plan.topology is not None:
            levels = {w.tas_level for w in plan.workloads if w.tas_level is not None} or {plan.topology.node_labels[-2]}
            result["placement"] = {level: recorder.placement({n.name: n.labels[level] for n in topology_nodes})
                                   for level in sorted(levels)}
        stats_file = out / "fakenodes.json"
        if stats_file.exists():
            result["fakeNodes"] = json.loads(stats_file.read_text())
        result["targets"] = targets(name, full_size, result)
        bins = recorder.timeline(ns.timeline_bin)
        result["timeline"] = {"binS": ns.timeline_bin, "bins": [
            {"startS": b.start_s, "heldPct": b.held_pct, "runningPct": b.running_pct,
             "runningPctBySize": b.running_pct_by_size} for b in bins]}
        profile_text = ""
        if ns.profile == "py-spy" and (out / "controller.pyspy.txt").exists():
            top = profiling.pyspy_top(out / "controller.pyspy.txt")
            idle_pct = 100 * top.idle / top.samples if top.samples else 0.0
            result["profile"] = {"tool": "py-spy", "loopSamples": top.samples, "loopIdlePercent": round(idle_pct, 1),
                                 "file": str(out / "controller.pyspy.txt")}
            head = f"controller event-loop thread (py-spy, {top.samples} samples at 100 Hz, {idle_pct:.1f} % idle)"
            profile_text = "\n\n".join([profiling.render(f"{head}, by self", top.by_self),
                                        profiling.render("by total (inclusive)", top.by_total)])
        elif ns.profile == "cprofile" and (out / "controller.cprofile").exists():
            total, by_self, by_total = profiling.cprofile_top(out / "controller.cprofile")
            result["profile"] = {"tool": "cProfile", "seconds": round(total, 1), "file": str(out / "controller.cprofile")}
            profile_text = "\n\n".join([profiling.render(f"controller profile (cProfile, {total:.1f}s), by tottime", by_self),
                                        profiling.render("by cumtime", by_total)])
        (out / "summary.yaml").write_text(yaml.safe_dump({k: summary[k] for k in ("clusterQueueClasses", "workloadClasses")},
                                                          sort_keys=True))
        (out / "controller.stats.yaml").write_text(yaml.safe_dump(cmd_stats, sort_keys=True))
        recorder.write_csv(out)
        if profile_text:
            (out / "profile-top.txt").write_text(profile_text + "\n")
        print(json.dumps(result, indent=2))
        print(table(result), file=sys.stderr)
        if bins:
            print("\n" + timeline_table(bins), file=sys.stderr)
        if profile_text:
            print("\n" + profile_text, file=sys.stderr)
        if not run.completed:
            print(f"error: the run did not complete: {recorder.finished}/{len(plan.workloads)} workloads finished"
                  + (f"; watch failed: {run.watch_error}" if run.watch_error else "")
                  + f"; controller log: {out / 'controller.log' if ns.output else '(pass --output to keep it)'}", file=sys.stderr)
            return 1
    return 0


def timeline_table(bins: list[TimelineBin]) -> str:
    """The run's quota, bin by bin: held, running, and running by workload size (see Recorder.timeline)."""
    sizes = sorted({size for b in bins for size in b.running_pct_by_size})
    lines = ["quota over the run (% of all nominal quota; finished runs only): held = reserved until Finished, "
             "running = first pod start to last pod end",
             "  from (s)  held  running  " + "  ".join(f"{s:>7}" for s in sizes)]
    for b in bins:
        lines.append(f"  {b.start_s:8.1f} {b.held_pct:5.1f}  {b.running_pct:7.1f}  "
                     + "  ".join(f"{b.running_pct_by_size.get(s, 0.0):7.1f}" for s in sizes))
    return "\n".join(lines)


def _revision(src: Path) -> str:
    """The checkout's commit (+dirty), or what an exported tree says about itself (REVISION file), or unknown."""
    if (src / "REVISION").exists():
        return (src / "REVISION").read_text().strip()
    try:
        head = subprocess.run(["git", "-C", str(src), "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(src), "status", "--porcelain", "--", "sluicegate"], capture_output=True,
                               text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+uncommitted changes" if dirty else "")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


if __name__ == "__main__":
    sys.exit(main())
