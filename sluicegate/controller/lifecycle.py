"""What a workload's pods mean for the workload: ready, finish, fail, retry, release, requeue.

Everything here is pure: given a workload (with its pod records), "now" and
the configuration, functions return the workload's next state and what the
caller must do — stop pods, start replacement pods, give back quota, queue
it again, or forget it.  Kueue's rules, in one place:

* PodsReady is True once every pod is ready (or has succeeded); with
  ``waitForPodsReady`` a workload that does not get there within the timeout
  (or the recovery timeout, after it was ready once) is evicted with reason
  PodsReadyTimeout and requeued with exponential backoff; past
  ``backoffLimitCount`` it is deactivated;
* time spent admitted accumulates across admit/evict cycles; past
  ``maximumExecutionTimeSeconds`` the workload is deactivated and the
  accumulated time reset;
* pods that succeed while others run become ``reclaimablePods``: their quota
  goes back at once (the count only grows while quota is held), and as in
  Kueue they stay reclaimable after an eviction: the workload asks for quota
  only for the rest, and the pods that completed are carried into its next
  admission (:func:`carried_over`) instead of being run again;
* a workload made from a Job retries failed pods up to ``backoffLimit`` and
  replaces succeeded ones until ``completions`` are done.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from sluicegate.controller.scheduling.placement import PodPlacement
from sluicegate.model.conditions import set_condition
from sluicegate.model.config import WaitForPodsReadyConfig
from sluicegate.model.copying import copy_with
from sluicegate.model.pods import FAILED, SUCCEEDED, PodRecord, with_conditions, with_pods, with_status
from sluicegate.model.slotinit import slot_init
from sluicegate.model.workloads import Condition, RequeueState, Workload

JOB_ANNOTATION = "sluicegate.io/job"


@dataclass(frozen=True, slots=True)
class JobSpec:
    completions: int
    parallelism: int
    indexed: bool = False
    backoff_limit: int = 6
    active_deadline_seconds: int | None = None

    def to_json(self) -> str:
        return json.dumps({"completions": self.completions, "parallelism": self.parallelism,
                           "completionMode": "Indexed" if self.indexed else "NonIndexed",
                           "backoffLimit": self.backoff_limit, "activeDeadlineSeconds": self.active_deadline_seconds},
                          sort_keys=True)


def job_of(wl: Workload) -> JobSpec | None:
    raw = wl.annotations.get(JOB_ANNOTATION)
    if not raw:
        return None
    d = json.loads(raw)
    return JobSpec(
        completions=int(d["completions"]), parallelism=int(d["parallelism"]),
        indexed=d.get("completionMode") == "Indexed", backoff_limit=int(d.get("backoffLimit", 6)),
        active_deadline_seconds=d.get("activeDeadlineSeconds"),
    )


@slot_init
@dataclass(frozen=True, slots=True)
class Settlement:
    workload: Workload
    # Pods to stop now (each asked once: their records are marked).
    stop: tuple[PodRecord, ...] = ()
    # New pods to start (Job retries and replacements), already in the records.
    launch: tuple[PodRecord, ...] = ()
    # Every pod has exited: quota and node resources go back.
    release: bool = False
    # After release, the workload waits for admission again.
    requeue: bool = False
    # After release, the workload is removed from the store (it was deleted).
    forget: bool = False
    # Reclaimable pods grew: the quota they held goes back now.
    reclaimed: bool = False


def _stop_all(pods: tuple[PodRecord, ...], reason: str) -> tuple[tuple[PodRecord, ...], tuple[PodRecord, ...]]:
    """Mark every running pod as asked to stop; returns (all pods, newly asked)."""
    out: list[PodRecord] = []
    asked: list[PodRecord] = []
    for p in pods:
        if not p.terminal and p.reason != "Stopping":
            p = copy_with(p, reason="Stopping", message=reason)
            asked.append(p)
        out.append(p)
    return tuple(out), tuple(asked)


def evict(wl: Workload, *, reason: str, message: str, now: float) -> Workload:
    """Set Evicted; the pods are stopped and the quota released by ``settle``."""
    conds = set_condition(wl.status.conditions, type_="Evicted", status=True, reason=reason, message=message, now=now)
    return copy_with(wl, status=copy_with(wl.status, conditions=conds))


def deactivate(wl: Workload, *, message: str, now: float) -> Workload:
    """spec.active=false plus the eviction that goes with it (no requeue)."""
    return evict(copy_with(wl, active=False), reason="InactiveWorkload", message=message, now=now)


def _current(pods: tuple[PodRecord, ...]) -> list[PodRecord]:
    """The pods that stand for the workload now (not the ones a Job retry replaced)."""
    return [p for p in pods if not p.replaced]


def settle(
    wl: Workload,
    now: float,
    *,
    wait_for_pods_ready: WaitForPodsReadyConfig | None = None,
    new_uid: Callable[[], str] | None = None,
    pods: tuple[PodRecord, ...] | None = None,
) -> Settlement:
    """What the workload's pods mean for it now (see the module's docstring).

    ``pods``: its pods as they are now, where a report changed them since
    ``wl`` was stored: ``settle(with_pods(wl, pods), ...)``, with the new
    pods, conditions and reclaimable counts copied into the workload at once
    (each copy of a workload and its status costs a pod report a few µs).
    """
    st = wl.status
    if pods is None or pods is st.pods:
        pods = st.pods
        given = False
    else:
        given = True
    if not pods:
        return Settlement(with_pods(wl, pods) if given else wl)
    # The conditions settling reads, in one pass (a pod report settles its workload every time).
    pods_ready = evicted_c = finished_c = None
    for c in st.conditions:
        t = c.type
        # The first of each type, as WorkloadStatus.condition finds it.
        if t == "PodsReady":
            if pods_ready is None:
                pods_ready = c
        elif t == "Evicted":
            if evicted_c is None:
                evicted_c = c
        elif t == "Finished" and finished_c is None:
            finished_c = c
    evicted = evicted_c is not None and evicted_c.status == "True"
    if finished_c is not None and finished_c.status == "True" and all(p.terminal for p in pods):
        return Settlement(with_pods(wl, pods) if given else wl)
    deleting = st.deleting
    terminate = st.terminate
    # job_of is None without its annotation: looked up here first, as nearly no workload has one.
    job = job_of(wl) if JOB_ANNOTATION in wl.annotations else None
    if given and (deleting or evicted or terminate is not None or job is not None):
        wl = with_pods(wl, pods)  # the rarer ways below read the pods from the workload
    if deleting or evicted:
        cond = wl.status.condition("Evicted")
        why = "the workload is being deleted" if deleting else (cond.message if cond else "the workload was evicted")
        pods, asked = _stop_all(pods, why)
        wl = with_pods(wl, pods)
        if not all(p.terminal for p in pods):
            return Settlement(wl, stop=asked)
        if not deleting and all(_completed_on_its_own(p) for p in _current(pods)) and job_of(wl) is None:
            # Every pod had already succeeded when the stop arrived: the work is
            # done, and running it again would do it twice.
            return Settlement(_finished(wl, "Succeeded", "Job finished successfully", now), release=True)
        wl = released(wl, now, wait_for_pods_ready or WaitForPodsReadyConfig())
        return Settlement(wl, release=True, requeue=not deleting and wl.active, forget=deleting)

    if terminate is not None:
        # A timer ended the workload (e.g. a Job's activeDeadlineSeconds): stop, then finish.
        pods, asked = _stop_all(pods, terminate[1])
        wl = with_pods(wl, pods)
        if not all(p.terminal for p in pods):
            return Settlement(wl, stop=asked)
        return Settlement(_finished(wl, terminate[0], terminate[1], now), release=True)
    if job is not None:
        return _settle_job(wl, job, pods, now, new_uid)

    # One pass over the pods for what the rest reads: which failed, how many succeeded, whether every
    # current one is ready (what _reclaimable and _pods_ready would each find again).
    failed: list[PodRecord] = []
    succeeded = 0
    current = False
    ready = True
    for p in pods:
        phase = p.phase
        if phase == SUCCEEDED:
            succeeded += 1
        elif phase == FAILED:
            failed.append(p)
        if not p.replaced:
            current = True
            if not (p.ready or phase == SUCCEEDED):
                ready = False
    if failed:
        first = min(failed, key=lambda p: (p.finished_at or now, p.name))
        pods, asked = _stop_all(pods, f"pod {first.name} of the workload failed")
        wl = with_pods(wl, pods)
        if not all(p.terminal for p in pods):
            return Settlement(wl, stop=asked)
        return Settlement(_finished(wl, "Failed", _failure(first), now), release=True)
    if succeeded == len(pods):
        done = set_condition(st.conditions, type_="Finished", status=True, reason="Succeeded",
                             message="Job finished successfully", now=now)
        return Settlement(with_status(wl, pods, done, st.reclaimable_pods), release=True)
    reclaimable = st.reclaimable_pods
    grew = False
    if succeeded or reclaimable:
        # With no pod succeeded and none reclaimable before, there is nothing to raise.
        raised = _raised(reclaimable, {ps.name: sum(1 for p in pods if p.pod_set == ps.name and p.phase == SUCCEEDED)
                                       for ps in wl.pod_sets})
        if raised is not None:
            reclaimable, grew = raised, True
    conds = _ready_conditions(st.conditions, current and ready, pods_ready, now)
    if conds is None and not grew and not given:
        return Settlement(wl)
    return Settlement(with_status(wl, pods, st.conditions if conds is None else conds, reclaimable), reclaimed=grew)


# Reasons an agent gives a pod it ended on request (stop, eviction, node preemption).
STOPPED_REASONS = frozenset({"Killed", "Evicted", "Preempting", "Stopping"})


def _completed_on_its_own(p: PodRecord) -> bool:
    return p.phase == SUCCEEDED and p.reason not in STOPPED_REASONS


def _failure(p: PodRecord) -> str:
    code = "" if p.exit_code is None else f" with exit code {p.exit_code}"
    why = f" ({p.reason})" if p.reason and p.reason != "Stopping" else ""
    return f"pod {p.name} failed{code}{why}" + (f": {p.message}" if p.message else "")


def _settle_job(
    wl: Workload, job: JobSpec, pods: tuple[PodRecord, ...], now: float, new_uid: Callable[[], str] | None
) -> Settlement:
    succeeded = [p for p in pods if p.phase == SUCCEEDED]
    failed = [p for p in pods if p.phase == FAILED and p.reason != "Stopping"]
    done_indexes = {p.index for p in succeeded}
    active = [p for p in pods if not p.terminal]
    if job.completions == 0:
        # No completions given (work-queue Job): done once a pod succeeded and none still runs.
        complete = bool(succeeded) and not active
    elif job.indexed:
        complete = len(done_indexes) >= job.completions
    else:
        complete = len(succeeded) >= job.completions
    outcome: tuple[str, str] | None = None
    if complete:
        outcome = ("Succeeded", f"Job finished successfully: {job.completions} completion(s)")
    elif len(failed) > job.backoff_limit:
        outcome = ("Failed", f"Job has reached the specified backoff limit ({job.backoff_limit}); last: "
                             f"{_failure(max(failed, key=lambda p: (p.finished_at or 0, p.name)))}")
    if outcome is not None:
        pods, asked = _stop_all(pods, f"the job has {outcome[0].lower()}")
        wl = with_pods(wl, pods)
        if not all(p.terminal for p in pods):
            return Settlement(wl, stop=asked)
        return Settlement(_finished(wl, outcome[0], outcome[1], now), release=True)

    # Keep `parallelism` pods running while completions remain, reusing the
    # node (and so the capacity) of pods that ended.
    if job.completions == 0:
        todo = [] if succeeded else list(range(job.parallelism - len(active)))
    elif job.indexed:
        busy = done_indexes | {p.index for p in active}
        todo = [i for i in range(job.completions) if i not in busy]
    else:
        todo = list(range(max(0, job.completions - len(succeeded) - len(active))))
    slots = min(job.parallelism, len(active) + len(todo)) - len(active)
    launch: list[PodRecord] = []
    out = list(pods)
    if slots > 0 and new_uid is not None:
        free = [p for p in out if p.terminal and not p.replaced]
        attempt = len(pods)
        for i, old in enumerate(free[:slots]):
            index = todo[i] if job.indexed else old.index
            fresh = PodRecord(uid=new_uid(), name=f"{wl.name}-{old.pod_set}-{index}-{attempt + i}", pod_set=old.pod_set,
                              index=index, node=old.node, requests=dict(old.requests))
            out[out.index(old)] = copy_with(old, replaced=True)
            out.append(fresh)
            launch.append(fresh)
    wl = with_pods(wl, tuple(out))
    if job.completions == 0:
        remaining = 0 if succeeded else job.parallelism
    else:
        remaining = job.completions - (len(done_indexes) if job.indexed else len(succeeded))
    count = next((ps.count for ps in wl.pod_sets), 0)
    wl, grew = _reclaimable(wl, {wl.pod_sets[0].name: max(0, count - min(count, remaining))})
    return Settlement(_pods_ready(wl, tuple(out), now), launch=tuple(launch), reclaimed=grew)


def carried_over(wl: Workload) -> tuple[PodRecord, ...]:
    """The pods of earlier admissions that completed on their own, kept for the next admission.

    Marked replaced, so they count as done (a Job's completions, a plain
    workload's succeeded pods) but are never current, reused or restarted.
    """
    return tuple(copy_with(p, replaced=True) for p in wl.status.last_pods if _completed_on_its_own(p))


def skip_done_indexes(carried: Sequence[PodRecord], placements: Sequence[PodPlacement]) -> list[PodPlacement]:
    """Give new pods the lowest indexes of their pod set that no carried pod completed."""
    done = {(p.pod_set, p.index) for p in carried}
    next_free: dict[str, int] = {}
    out: list[PodPlacement] = []
    for pl in placements:
        i = next_free.get(pl.pod_set, 0)
        while (pl.pod_set, i) in done:
            i += 1
        next_free[pl.pod_set] = i + 1
        out.append(copy_with(pl, index=i))
    return out


def _reclaimable(wl: Workload, counts: dict[str, int]) -> tuple[Workload, bool]:
    """Raise reclaimablePods to ``counts`` (never lower it while quota is held)."""
    new = _raised(wl.status.reclaimable_pods, counts)
    if new is None:
        return wl, False
    return copy_with(wl, status=copy_with(wl.status, reclaimable_pods=new)), True


def _raised(reclaimable: Mapping[str, int], counts: dict[str, int]) -> dict[str, int] | None:
    """reclaimablePods raised to ``counts`` (never lowered while quota is held); None: as it is."""
    old = dict(reclaimable)
    new = {k: max(v, old.get(k, 0)) for k, v in counts.items() if max(v, old.get(k, 0)) > 0}
    if new == {k: v for k, v in old.items() if v > 0}:
        return None
    return new


def _pods_ready(wl: Workload, pods: tuple[PodRecord, ...], now: float) -> Workload:
    current = _current(pods)
    ready = bool(current) and all(p.ready or p.phase == SUCCEEDED for p in current)
    conds = _ready_conditions(wl.status.conditions, ready, wl.status.condition("PodsReady"), now)
    return wl if conds is None else with_conditions(wl, conds)


def _ready_conditions(conditions: tuple[Condition, ...], ready: bool, cond: Condition | None,
                      now: float) -> tuple[Condition, ...] | None:
    """The conditions with PodsReady as ``ready`` says (``cond``: PodsReady among them now, if any); None
    where it says so already."""
    if ready:
        if cond is not None and cond.is_true:
            return None
        return set_condition(conditions, type_="PodsReady", status=True, reason="PodsReady",
                             message="All pods reached readiness and the workload is running", now=now)
    was_ready = cond is not None and (cond.is_true or cond.reason == "WaitForRecovery")
    reason = "WaitForRecovery" if was_ready else "WaitForStart"
    if cond is not None and not cond.is_true and cond.reason == reason:
        return None
    msg = ("At least one pod has failed, waiting for recovery" if was_ready
           else "Not all pods are ready or succeeded")
    return set_condition(conditions, type_="PodsReady", status=False, reason=reason, message=msg, now=now)


def _finished(wl: Workload, reason: str, message: str, now: float) -> Workload:
    conds = set_condition(wl.status.conditions, type_="Finished", status=True, reason=reason, message=message, now=now)
    return with_conditions(wl, conds)


def admitted_seconds(wl: Workload, now: float) -> float:
    """Time admitted in this admission (0 when not admitted)."""
    cond = wl.status.condition("Admitted")
    if cond is None or not cond.is_true:
        return 0.0
    return max(0.0, now - cond.last_transition_time)


def backoff_seconds(count: int, cfg: WaitForPodsReadyConfig, rng: random.Random | None = None) -> float:
    """Kueue's requeue backoff: base * 2^(count-1), capped, with a little jitter."""
    base = cfg.backoff_base_seconds * (2 ** max(0, count - 1))
    jitter = 1.0 + (rng or random).random() * 0.0001
    return float(min(base * jitter, cfg.backoff_max_seconds))


def released(wl: Workload, now: float, wfpr: WaitForPodsReadyConfig | None = None) -> Workload:
    """Quota given back after an eviction: pending again, backing off, or inactive."""
    wfpr = wfpr or WaitForPodsReadyConfig()
    evicted = wl.status.condition("Evicted")
    message = evicted.message if evicted is not None else "The workload was evicted"
    st = wl.status
    accumulated = st.accumulated_past_execution_time_seconds + int(admitted_seconds(wl, now))
    conds = set_condition(st.conditions, type_="QuotaReserved", status=False, reason="Pending", message=message,
                          now=now)
    conds = set_condition(conds, type_="Admitted", status=False, reason="NoReservation",
                          message="The workload has no reservation", now=now)
    requeue_state = st.requeue_state
    active = wl.active
    if evicted is not None and evicted.reason == "PodsReadyTimeout":
        count = (requeue_state.count if requeue_state else 0) + 1
        limit = wfpr.backoff_limit_count
        if limit is not None and count > limit:
            active = False
            requeue_state = RequeueState(count=count, requeue_at=None)
            conds = set_condition(conds, type_="Evicted", status=True, reason="InactiveWorkload",
                                  message="The workload is deactivated due to exceeding the maximum number of "
                                          f"re-queuing retries ({limit})", now=now)
        else:
            at = now + backoff_seconds(count, wfpr)
            requeue_state = RequeueState(count=count, requeue_at=at)
            conds = set_condition(conds, type_="Requeued", status=False, reason="BackoffStarted",
                                  message=f"The workload backoff was started (requeue #{count})", now=now)
    if not active and evicted is not None and evicted.reason == "InactiveWorkload" \
            and "execution time" in evicted.message:
        accumulated = 0
    status = copy_with(st, conditions=conds, admission=None, requeue_state=requeue_state,
                       accumulated_past_execution_time_seconds=accumulated, pods=(), last_pods=wl.status.pods or ())
    return copy_with(wl, active=active, status=status)


# ------------------------------------------------------------------ timers


def due_eviction(wl: Workload, now: float, wfpr: WaitForPodsReadyConfig) -> Workload | None:
    """The workload evicted or deactivated by a timer, or None if no timer fired."""
    if not wl.is_admitted or wl.is_finished or wl.status.is_true("Evicted"):
        return None
    if wl.maximum_execution_time_seconds is not None:
        used = wl.status.accumulated_past_execution_time_seconds + admitted_seconds(wl, now)
        if used >= wl.maximum_execution_time_seconds:
            return deactivate(wl, now=now, message=(
                f"The workload exceeded its maximum execution time ({wl.maximum_execution_time_seconds}s, "
                f"{used:.0f}s admitted in total)"))
    job = job_of(wl)
    if job is not None and job.active_deadline_seconds is not None:
        start = wl.status.condition("Admitted")
        if start is not None and now - start.last_transition_time >= job.active_deadline_seconds \
                and wl.status.terminate is None:
            # Like Kubernetes: the Job fails (it is not requeued).
            return copy_with(wl, status=copy_with(wl.status, terminate=("Failed", (
                f"DeadlineExceeded: Job was active longer than specified deadline ({job.active_deadline_seconds}s)"))))
    if wfpr.enabled and wl.status.pods:
        cond = wl.status.condition("PodsReady")
        if cond is not None and cond.is_true:
            return None
        if cond is not None and cond.reason == "WaitForRecovery":
            timeout = (wfpr.recovery_timeout_seconds if wfpr.recovery_timeout_seconds is not None
                       else wfpr.timeout_seconds)
            since = cond.last_transition_time
        else:
            timeout = wfpr.timeout_seconds
            admitted = wl.status.condition("Admitted")
            since = admitted.last_transition_time if admitted else now
        if now - since >= timeout:
            return evict(wl, reason="PodsReadyTimeout", now=now,
                         message=f"Exceeded the PodsReady timeout {wl.namespace}/{wl.name}")
    return None


PREEMPTION_WORDING = {
    "InClusterQueue": "prioritization in the ClusterQueue",
    "InCohortReclamation": "reclamation within the cohort",
    "InCohortFairSharing": "Fair Sharing within the cohort",
    "InCohortReclaimWhileBorrowing": "reclamation within the cohort while borrowing",
}


def preempted(wl: Workload, *, reason: str, preemptor: Workload, preemptor_cq: str, now: float) -> Workload:
    """Evicted (reason Preempted) plus Preempted (why), naming the preemptor's UID and ClusterQueue."""
    message = (
        f"Preempted to accommodate a workload (UID: {preemptor.uid}, ClusterQueue: {preemptor_cq}) "
        f"due to {PREEMPTION_WORDING.get(reason, reason)}"
    )
    wl = evict(wl, reason="Preempted", message=message, now=now)
    conds = set_condition(wl.status.conditions, type_="Preempted", status=True, reason=reason, message=message, now=now)
    return copy_with(wl, status=copy_with(wl.status, conditions=conds))
