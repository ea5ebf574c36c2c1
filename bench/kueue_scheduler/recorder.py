"""What the run looked like, from workload events: Kueue's runner summary, computed the same way.

Kueue's recorder (``test/performance/scheduler/runner/recorder``) keeps, per
workload, the time of its first event, the time it last became Admitted
(re-admission after an eviction overwrites it), the time it became
Finished and how many times it became Evicted; per ClusterQueue, the CPU
in use integrated over time between its first and last status event.  The
summary groups both by class: per ClusterQueue class the sum of CPU used
(mCPU·ms), the sum of nominal quota, the monitored window (first event of
any queue of the class to the last), and their ratio as the usage %;
per workload class the count, the average times (ms) and the evictions.

sluicegate has no ClusterQueue status stream, so a queue's usage is rebuilt
from its workloads: a workload holds its request from the event that shows
it QuotaReserved until the event that shows it Finished or no longer
QuotaReserved (after an eviction, quota comes back only once its pods have
exited).  A workload created in a queue counts as a queue event, as its
pending count changes.

Pure: every time is passed in (seconds, one monotonic clock).
"""

from __future__ import annotations

import csv
import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from bench.kueue_scheduler.config import Plan, QueuePlan, WorkloadPlan


@dataclass(slots=True)
class QueueState:
    spec: QueuePlan
    first_event: float | None = None
    last_event: float | None = None
    usage_m: int = 0
    max_usage_m: int = 0
    # mCPU × ms, as Kueue sums it.
    cpu_used: float = 0.0
    # mCPU × ms of that held by runs that ended in an eviction instead of
    # finishing (their work is lost: a re-admitted workload starts over).
    cpu_evicted: float = 0.0

    def event(self, at: float, delta_m: int = 0) -> None:
        if self.first_event is None or self.last_event is None:
            self.first_event = self.last_event = at
        else:
            if self.usage_m > 0:
                self.cpu_used += self.usage_m * (at - self.last_event) * 1000
            self.last_event = max(self.last_event, at)
        self.usage_m += delta_m
        self.max_usage_m = max(self.max_usage_m, self.usage_m)


@dataclass(slots=True)
class WorkloadState:
    spec: WorkloadPlan
    first_event: float
    admitted: bool = False
    evicted: bool = False
    finished: bool = False
    holds_quota: bool = False
    held_since: float = 0.0
    admit_ms: float = 0.0
    finish_ms: float = 0.0
    evictions: int = 0
    # The same intervals, stamped by the controller (condition transition
    # times minus creationTimestamp): free of watch and bench-process lag.
    stamped_admit_ms: float | None = None
    stamped_finish_ms: float | None = None
    # Of the run that finished: admission → pod started on its node, and pod
    # ended on its node → Finished recorded (node and controller share a clock here).
    dispatch_ms: float | None = None
    completion_ms: float | None = None
    pending_message: str = ""
    pod_phases: tuple[str, ...] = ()
    # The nodes its pods ran on in the run that finished (one entry per pod).
    pod_nodes: tuple[str, ...] = ()
    # Of the run that finished, on the controller's and nodes' clock: quota reserved, first pod started,
    # last pod ended, Finished recorded (see Recorder.timeline).
    timeline: tuple[float, float, float, float] | None = None


@dataclass(frozen=True, slots=True)
class Observation:
    """A workload as one watch event showed it."""

    namespace: str
    name: str
    quota_reserved: bool
    admitted: bool
    evicted: bool
    finished: bool
    stamped_admit_s: float | None = None
    stamped_finish_s: float | None = None
    dispatch_s: float | None = None
    completion_s: float | None = None
    # Only to tell apart the events that change no condition status.
    pending_message: str = ""
    pod_phases: tuple[str, ...] = ()
    pod_nodes: tuple[str, ...] = ()
    timeline: tuple[float, float, float, float] | None = None


@dataclass(frozen=True, slots=True)
class TimelineBin:
    """CPU over one interval of the run, as shares of the whole nominal quota (100: all of it)."""

    start_s: float
    held_pct: float
    running_pct: float
    # Running, by workload size (the class name up to its first "-": large, medium, small).
    running_pct_by_size: dict[str, float]


@dataclass(slots=True)
class Recorder:
    plan: Plan
    queues: dict[str, QueueState] = field(default_factory=dict)
    workloads: dict[tuple[str, str], WorkloadState] = field(default_factory=dict)
    unknown_events: int = 0
    events: int = 0
    # Events that changed none of QuotaReserved/Admitted/Evicted/Finished, by what did change:
    # the pending QuotaReserved message, the pods' phases, or something else.
    quiet_events: dict[str, int] = field(default_factory=lambda: {"pendingMessage": 0, "podPhases": 0, "other": 0})
    finished: int = 0
    _by_key: dict[tuple[str, str], WorkloadPlan] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.queues = {q.name: QueueState(q) for q in self.plan.queues}
        self._by_key = {(w.namespace, w.name): w for w in self.plan.workloads}

    def queue_created(self, name: str, at: float) -> None:
        self.queues[name].event(at)

    def observe(self, ob: Observation, at: float) -> None:
        self.events += 1
        key = (ob.namespace, ob.name)
        st = self.workloads.get(key)
        first = st is None
        if st is None:
            spec = self._by_key.get(key)
            if spec is None:
                self.unknown_events += 1
                return
            st = self.workloads[key] = WorkloadState(spec=spec, first_event=at)
            self.queues[spec.cluster_queue].event(at)
        if ob.admitted and not st.admitted:
            st.admit_ms = (at - st.first_event) * 1000
            if ob.stamped_admit_s is not None:
                st.stamped_admit_ms = ob.stamped_admit_s * 1000
        if ob.evicted and not st.evicted:
            st.evictions += 1
        if ob.finished and not st.finished:
            st.finish_ms = (at - st.first_event) * 1000
            if ob.stamped_finish_s is not None:
                st.stamped_finish_ms = ob.stamped_finish_s * 1000
            if ob.dispatch_s is not None:
                st.dispatch_ms = ob.dispatch_s * 1000
            if ob.completion_s is not None:
                st.completion_ms = ob.completion_s * 1000
            st.pod_nodes = ob.pod_nodes
            st.timeline = ob.timeline
            self.finished += 1
        holds = ob.quota_reserved and not ob.finished
        if not first and (ob.admitted, ob.evicted, ob.finished, holds) == (st.admitted, st.evicted, st.finished, st.holds_quota):
            what = ("pendingMessage" if ob.pending_message != st.pending_message
                    else "podPhases" if ob.pod_phases != st.pod_phases else "other")
            self.quiet_events[what] += 1
        st.pending_message, st.pod_phases = ob.pending_message, ob.pod_phases
        if holds != st.holds_quota:
            queue = self.queues[st.spec.cluster_queue]
            queue.event(at, st.spec.total_request_m if holds else -st.spec.total_request_m)
            if holds:
                st.held_since = at
            elif not ob.finished:
                queue.cpu_evicted += st.spec.total_request_m * (at - st.held_since) * 1000
        st.admitted, st.evicted, st.finished, st.holds_quota = ob.admitted, ob.evicted, ob.finished, holds

    def timeline(self, bin_s: float) -> list[TimelineBin]:
        """Where the quota went over the run, bin by bin, from the finished workloads' final runs: held
        (quota reserved until Finished) and running (first pod started until the last ended), as shares of
        the total nominal quota.  The gap between the two is quota held with no pod running; the gap to
        100 is quota free.  A run that phases by priority (large, then medium, then small) shows which
        phase lost the time.  Runs later evicted are not counted (see cpu_evicted)."""
        runs = [(st.spec, st.timeline) for st in self.workloads.values() if st.finished and st.timeline is not None]
        capacity_m = sum(q.spec.nominal_m for q in self.queues.values())
        if not runs or capacity_m <= 0 or bin_s <= 0:
            return []
        t0 = min(t[0] for _, t in runs)
        count = int((max(t[3] for _, t in runs) - t0) // bin_s) + 1
        held = [0.0] * count
        running: dict[str, list[float]] = {}

        def add(into: list[float], start: float, end: float, cpu_m: int) -> None:
            start, end = start - t0, end - t0
            first, last = max(0, int(start // bin_s)), min(count - 1, int(end // bin_s))
            for b in range(first, last + 1):
                overlap = min(end, (b + 1) * bin_s) - max(start, b * bin_s)
                if overlap > 0:
                    into[b] += cpu_m * overlap

        for spec, (reserved, started, ended, finished) in runs:
            add(held, reserved, finished, spec.total_request_m)
            add(running.setdefault(spec.class_name.split("-")[0], [0.0] * count), started, ended, spec.total_request_m)
        full = capacity_m * bin_s / 100
        return [TimelineBin(start_s=round(b * bin_s, 3), held_pct=round(held[b] / full, 1),
                            running_pct=round(sum(r[b] for r in running.values()) / full, 1),
                            running_pct_by_size={size: round(r[b] / full, 1) for size, r in sorted(running.items())})
                for b in range(count)]

    def placement(self, domain_of: Mapping[str, str]) -> dict[str, dict[str, object]]:
        """Per TAS workload class, where the finished workloads' pods ran, in the domains of the class's
        level (``domain_of``: node name -> its value of that level): how many domains a workload spanned,
        and how many broke the constraint.  required: more than one domain; balanced: a domain holding
        a count of pods that is not whole slices (a slice split across domains); preferred has no
        violation, only spread."""
        out: dict[str, dict[str, object]] = {}
        for cls in sorted({w.class_name for w in self.plan.workloads if w.tas_constraint is not None}):
            states = [s for s in self.workloads.values() if s.spec.class_name == cls and s.finished and s.pod_nodes]
            spans: list[int] = []
            violations = unknown = mismatched = 0
            for st in states:
                if len(st.pod_nodes) != st.spec.pod_count:
                    # Not one pod per member of the pod set: nothing to judge the slices by.
                    mismatched += 1
                    continue
                per_domain: dict[str, int] = {}
                for node in st.pod_nodes:
                    domain = domain_of.get(node)
                    if domain is None:
                        unknown += 1
                        continue
                    per_domain[domain] = per_domain.get(domain, 0) + 1
                spans.append(len(per_domain))
                if st.spec.tas_constraint == "required" and len(per_domain) > 1:
                    violations += 1
                size = st.spec.slice_size or 1
                if st.spec.tas_constraint == "balanced" and any(n % size for n in per_domain.values()):
                    violations += 1
            out[cls] = {
                "constraint": states[0].spec.tas_constraint if states else None,
                "checked": len(states) - mismatched,
                "podListMismatch": mismatched,
                "averageDomains": round(sum(spans) / len(spans), 3) if spans else None,
                "maxDomains": max(spans, default=0),
                "violations": violations,
                "podsOnUnknownNodes": unknown,
            }
        return out

    # ------------------------------------------------------------- summary

    def summary(self, *, epoch_offset: float) -> dict[str, object]:
        """Kueue's summary.yaml shape, plus the usage % its checker derives and our extra columns.

        ``epoch_offset`` turns the recorder's monotonic seconds into Unix time.
        """
        def stamp(t: float) -> str:
            return dt.datetime.fromtimestamp(t + epoch_offset, dt.UTC).isoformat().replace("+00:00", "Z")

        cq_classes: dict[str, dict[str, object]] = {}
        for cls in sorted({q.spec.class_name for q in self.queues.values()}):
            members = [q for q in self.queues.values() if q.spec.class_name == cls and q.first_event is not None]
            if not members:
                continue
            first = min(q.first_event for q in members if q.first_event is not None)
            last = max(q.last_event for q in members if q.last_event is not None)
            used = sum(q.cpu_used for q in members)
            evicted = sum(q.cpu_evicted for q in members)
            nominal = sum(q.spec.nominal_m for q in members)
            window_ms = (last - first) * 1000
            cq_classes[cls] = {
                "cpuUsed": int(used),
                "cpuAverageUsage": int(used / window_ms) if window_ms > 0 else 0,
                "nominalQuota": nominal,
                "firstEventTime": stamp(first),
                "lastEventTime": stamp(last),
                "usagePercent": round(used * 100 / (nominal * window_ms), 2) if nominal and window_ms > 0 else 0.0,
                "maxUsage": max(q.max_usage_m for q in members),
                # Ours: the part of cpuUsed held by runs that were evicted, and the usage % without it.
                "cpuUsedByEvictedRuns": int(evicted),
                "usefulUsagePercent": (round((used - evicted) * 100 / (nominal * window_ms), 2)
                                       if nominal and window_ms > 0 else 0.0),
            }
        wl_classes: dict[str, dict[str, object]] = {}
        for cls in sorted({w.class_name for w in self.plan.workloads}):
            states = [s for s in self.workloads.values() if s.spec.class_name == cls]
            n = len(states)
            stamped_admit = [s.stamped_admit_ms for s in states if s.stamped_admit_ms is not None]
            stamped_finish = [s.stamped_finish_ms for s in states if s.stamped_finish_ms is not None]
            dispatch = [s.dispatch_ms for s in states if s.dispatch_ms is not None]
            completion = [s.completion_ms for s in states if s.completion_ms is not None]
            wl_classes[cls] = {
                "count": n,
                "totalEvictions": sum(s.evictions for s in states),
                # Kueue averages over every workload of the class, 0 for one never admitted/finished.
                "averageTimeToAdmissionMs": int(sum(s.admit_ms for s in states) / n) if n else 0,
                "averageTimeToFinishMs": int(sum(s.finish_ms for s in states) / n) if n else 0,
                "planned": sum(1 for w in self.plan.workloads if w.class_name == cls),
                "admitted": sum(1 for s in states if s.admitted or s.finished),
                "finished": sum(1 for s in states if s.finished),
                "controllerAverageTimeToAdmissionMs": int(sum(stamped_admit) / len(stamped_admit)) if stamped_admit else None,
                "controllerAverageTimeToFinishMs": int(sum(stamped_finish) / len(stamped_finish)) if stamped_finish else None,
                "maxTimeToAdmissionMs": int(max((s.admit_ms for s in states), default=0)),
                "controllerAverageDispatchMs": int(sum(dispatch) / len(dispatch)) if dispatch else None,
                "controllerAverageCompletionMs": int(sum(completion) / len(completion)) if completion else None,
                # Ours: quota-time (mCPU·ms) the finished runs held while none of their pods ran:
                # admission to first pod start, plus last pod end to Finished.
                "cpuHeldWithoutPods": int(sum(s.spec.total_request_m * ((s.dispatch_ms or 0.0) + (s.completion_ms or 0.0))
                                              for s in states if s.finished)),
            }
        return {"clusterQueueClasses": cq_classes, "workloadClasses": wl_classes}

    # ----------------------------------------------------------------- csv

    def write_csv(self, directory: Path) -> None:
        """cqStates.csv and wlStates.csv with Kueue's columns."""
        with open(directory / "cqStates.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["name", "cohort", "class name", "CPU quota (mCPU)", "CPU used (mCPU * ms)", "CPU max usage (mCPU)",
                        "monitor time (ms)"])
            for q in self.queues.values():
                span = (q.last_event - q.first_event) * 1000 if q.first_event is not None and q.last_event is not None else 0
                w.writerow([q.spec.name, q.spec.cohort, q.spec.class_name, q.spec.nominal_m, int(q.cpu_used), q.max_usage_m,
                            int(span)])
        with open(directory / "wlStates.csv", "w", newline="") as f:
            w = csv.writer(f)
            # Kueue's columns, then the controller-stamped intervals (empty when not seen).
            w.writerow(["id", "class name", "namespace", "name", "ms to admitted", "ms to finish", "num evictions",
                        "controller ms to admitted", "controller ms to finish", "controller ms admitted to pod started",
                        "controller ms pod ended to finished"])
            for i, s in enumerate(self.workloads.values()):
                w.writerow([i, s.spec.class_name, s.spec.namespace, s.spec.name, int(s.admit_ms), int(s.finish_ms), s.evictions,
                            "" if s.stamped_admit_ms is None else int(s.stamped_admit_ms),
                            "" if s.stamped_finish_ms is None else int(s.stamped_finish_ms),
                            "" if s.dispatch_ms is None else int(s.dispatch_ms),
                            "" if s.completion_ms is None else int(s.completion_ms)])


def condition_flags(conditions: Mapping[str, str]) -> tuple[bool, bool, bool, bool]:
    """(QuotaReserved, Admitted, Evicted, Finished) from a condition type → status map."""
    return (conditions.get("QuotaReserved") == "True", conditions.get("Admitted") == "True",
            conditions.get("Evicted") == "True", conditions.get("Finished") == "True")
