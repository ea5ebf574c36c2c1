"""The controller's side of running pods: agents, bindings, pod status, node loss.

Owned by the :class:`~sluicegate.controller.manager.Manager` and called on
the same coroutine, so it never races a scheduling cycle.  It carries out
its decisions through the committer (store first, watchers last) and the
cache, never through the manager.  Every decision
is stored before an agent hears of it: a binding is written with the
workload before RunPod is sent; a pod's end is written before the agent is
told it may forget the pod.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Callable, Sequence

from sluicegate.controller.cache import Cache
from sluicegate.controller.commit import Committer
from sluicegate.controller.decide_api import new_uid
from sluicegate.controller.decide_pods import settlement_effects
from sluicegate.controller.decide_taints import TAINT_EVICTION_REASON, PodTolerations, TaintEviction, taint_evictions
from sluicegate.controller.errors import FailedPrecondition, NotFound
from sluicegate.controller.lifecycle import Settlement, evict, settle
from sluicegate.controller.nodes import (
    CancelLogsCommand,
    Command,
    ForgetPodCommand,
    LogRequestCommand,
    NodeRegistry,
    NodeState,
    NodeUsage,
    ReportedPod,
    RunPodCommand,
    Session,
    StopPodCommand,
)
from sluicegate.controller.scheduling.placement import PodPlacement, tolerations_of
from sluicegate.controller.store import StoreError
from sluicegate.model.copying import copy_with
from sluicegate.model.names import WorkloadKey, workload_key
from sluicegate.model.pods import FAILED, PENDING, RUNNING, TERMINAL, PodRecord, as_reported, pods_or_last
from sluicegate.model.taints import NO_EXECUTE, Taint
from sluicegate.model.workloads import Workload

log = logging.getLogger(__name__)

# Added to the longest termination grace of a lost node's pods: the agent
# notices its silence within a check period (at most a second), sends SIGKILL
# when the grace ends and waits for the processes to vanish.
FENCING_MARGIN = 2.0


class Fleet:
    def __init__(self, cache: Cache, commit: Committer, *, clock: Callable[[], float],
                 enqueue: Callable[[Workload], None], deadlines: Callable[[Workload], None], node_timeout: float,
                 fencing_grace: float = 45.0,
                 self_fencing: bool = True, monotonic: Callable[[], float] | None = None) -> None:
        self.cache = cache
        self.commit = commit
        self.clock = clock
        # Queue a workload that holds no quota, if it may wait (the manager's queueing policy).
        self.enqueue = enqueue
        # Arm the workload's timers for the state it was stored in.
        self.deadlines = deadlines
        # Node timeouts count on this clock (the wall clock when none is given: tests).
        self.monotonic = monotonic or clock
        self.registry = NodeRegistry()
        self.node_timeout = node_timeout
        self.fencing_grace = fencing_grace
        self.self_fencing = self_fencing
        self.pod_owner: dict[str, WorkloadKey] = {}
        # NoExecute evictions scheduled, by node and pod uid; only nodes with a NoExecute taint are listed.
        self._taint_evictions: dict[str, dict[str, TaintEviction]] = {}
        # Of those, the nodes that got a pod since they were last looked at: node -> pod uid -> when bound.
        self._taint_dirty: dict[str, dict[str, float]] = {}
        # Log requests in flight: the node asked, and where its chunks go.
        self._log_routes: dict[str, tuple[str, asyncio.Queue[tuple[str, bytes, bool, str]]]] = {}
        # Pod reports received this turn of the event loop (see report_pods), what runs once
        # they are stored, and the callback that handles them.
        # Each as (node, report, periodic): see pod_status.
        self._reports: list[tuple[str, ReportedPod, bool]] = []
        self._after_reports: list[Callable[[], None]] = []
        self._flush: asyncio.Handle | None = None
        # Set once this controller stopped leading (end_all_streams): why, told to any stream that registers after.
        self._streams_ended: str | None = None
        # While reports are handled: the settlements that only store a workload, by workload,
        # written once at the end (the last one holds every earlier one's changes).
        self._batch: dict[WorkloadKey, Settlement] | None = None

    # ------------------------------------------------------------ bindings

    def pod_records(self, wl: Workload, placements: Sequence[PodPlacement]) -> list[PodRecord]:
        # PodRecord(uid, name, pod_set, index, node, requests), by position: one per pod admitted.
        return [PodRecord(new_uid(), f"{wl.name}-{p.pod_set}-{p.index}", p.pod_set, p.index, p.node, dict(p.requests))
                for p in placements]

    def track(self, wl: Workload) -> None:
        """Index a stored workload's pods (at load, or after an admission was written)."""
        now = self.clock()
        for p in wl.status.pods:
            self.pod_owner[p.uid] = wl.key
            if not p.terminal:
                self.registry.bind(p.node, p.uid, p.requests, now=now, heard_at=self.monotonic())
                self._bound_to_tainted(p)

    # -------------------------------------------------------------- agents

    def register(
        self,
        *,
        name: str,
        labels: dict[str, str],
        capacity: dict[str, int],
        taints: tuple[Taint, ...] = (),
        allocatable: dict[str, int],
        boot_id: str,
        agent_version: str,
        health_address: str,
        pods: Sequence[ReportedPod],
        session: Session,
    ) -> None:
        if self._streams_ended is not None:
            # A Register that arrives as this controller steps down (say, read in the same turn as the
            # lost lease) is not taken: its stream ends too, and the agent looks for the leader.
            step_down = getattr(session, "step_down", None)
            if step_down is not None:
                step_down(self._streams_ended)
            log.info("node %s registered after this controller stopped leading; its stream is ended", name)
            return
        if self._reports:
            # Reports still gathered (an older stream's among them) come before what the node says now.
            self.flush_reports()
        now = self.clock()
        node = self.registry.nodes.get(name)
        if node is None:
            node = NodeState(name, labels, capacity, allocatable)
            self.registry.nodes[name] = node
        old_session = node.session
        node.labels, node.capacity, node.allocatable = dict(labels), dict(capacity), dict(allocatable)
        if node.taints != taints:
            log.info("node %s taints: %s", name, ", ".join(str(t) for t in taints) or "none")
        node.taints = taints
        if any(t.effect == NO_EXECUTE for t in taints):
            self._taint_evictions.setdefault(name, {})
        else:
            self._taint_evictions.pop(name, None)
            self._taint_dirty.pop(name, None)
        node.boot_id, node.agent_version, node.health_address = boot_id, agent_version, health_address
        node.ready, node.not_ready_reason, node.last_heartbeat = True, "", now
        node.heard_at = self.monotonic()
        node.session = session
        node.stream_behind = False
        if old_session is not None and old_session is not session:
            # One stream per node: the older one ends (its agent, if it still
            # runs, reconnects), and nothing it still sends acts on the node.
            log.warning("node %s registered on a new stream; closing the older one", name)
            old_session.supersede(f"superseded by a newer stream for node {name}")
        log.info("node %s registered: %d pod(s) reported, allocatable %s", name, len(pods), allocatable)
        node.static_pods = {p.uid: p for p in pods if p.static and p.phase in (RUNNING, PENDING)}
        reported = {p.uid for p in pods}
        for p in pods:
            if not p.static:
                self.pod_status(name, p)
        # Expected here but not reported: resend what may never have arrived,
        # and fail what the agent no longer has.
        for uid in list(node.pods):
            if uid in reported:
                continue
            key = self.pod_owner.get(uid)
            wl = self.cache.workloads.get(key) if key else None
            rec = next((r for r in wl.status.pods if r.uid == uid), None) if wl else None
            if wl is None or rec is None or rec.terminal:
                node.remove_pod(uid)
                continue
            if rec.phase == PENDING and rec.reason != "Stopping":
                pod_set = next(ps for ps in wl.pod_sets if ps.name == rec.pod_set)
                node.session.send(RunPodCommand(pod=rec, workload=wl, pod_set=pod_set))
            else:
                # Not the workload's fault: it goes back to its queue.
                msg = (f"node {name} no longer runs pod {rec.name} (its agent restarted without a record of it: "
                       "checkpoint lost)")
                self._lose_pod(wl, rec, reason="PodLost", message=msg)
        self._check_taints(name)
        self.cache.queues.node_capacity_freed()
        self.commit.wake()

    def _lose_pod(self, wl: Workload, rec: PodRecord, *, reason: str, message: str) -> None:
        """A pod ended through a fault of its node: evict and requeue the workload (never Failed)."""
        now = self.clock()
        if not wl.is_finished and not wl.status.is_true("Evicted"):
            log.warning("workload %s evicted: %s", wl.key, message)
            wl = evict(wl, reason=reason, message=message, now=now)
        self._update_pod(wl, copy_with(rec, phase=FAILED, reason=reason, message=message, finished_at=now))

    def disconnected(self, name: str, session: Session) -> None:
        node = self.registry.nodes.get(name)
        if node is not None and node.session is session:
            node.session = None
            node.stream_behind = False
            log.info("node %s disconnected; it stays Ready until its heartbeats are %gs late", name, self.node_timeout)

    def stream_behind(self, name: str, session: Session, behind: bool, waiting: int) -> None:
        """The node's stream fell behind (``waiting`` messages unsent) or caught up again.

        While behind, the node shows the StreamBehind condition and placement
        puts nothing new there; its pods keep running.  Caught up, workloads
        parked for want of a node are tried again.
        """
        node = self.registry.nodes.get(name)
        if node is None or node.session is not session or node.stream_behind == behind:
            return
        node.stream_behind = behind
        if behind:
            log.warning("node %s: %d messages waiting to go out on its stream (its agent reads them, or this "
                        "controller sends them, slower than they come): no new pods are placed there until they "
                        "have gone", name, waiting)
            return
        log.info("node %s: its stream caught up (%d messages waiting); new pods may be placed there again",
                 name, waiting)
        self.cache.queues.node_capacity_freed()
        self.commit.wake()

    def current(self, name: str, session: Session) -> bool:
        """Whether ``session`` is the node's stream now (a superseded stream acts on nothing)."""
        node = self.registry.nodes.get(name)
        return node is not None and node.session is session

    def heartbeat(self, name: str, usage: NodeUsage, conditions: Sequence[str], pods: Sequence[ReportedPod]) -> None:
        node = self.registry.nodes.get(name)
        if node is None:
            return
        node.last_heartbeat = self.clock()
        node.heard_at = self.monotonic()
        if not node.ready and node.session is not None:
            # Silent for the timeout (a stalled controller or network), then heard again on its live stream.
            log.info("node %s is Ready again: heartbeats resumed", name)
            node.ready, node.not_ready_reason = True, ""
            self.cache.queues.node_capacity_freed()
            self.commit.wake()
        node.usage = usage
        before = node.conditions
        node.conditions = tuple(sorted(conditions))
        if before and not node.conditions:
            log.info("node %s: %s cleared", name, ", ".join(before))
            self.cache.queues.node_capacity_freed()
            self.commit.wake()
        elif node.conditions != before:
            log.warning("node %s reports %s: nothing new is placed there", name, ", ".join(node.conditions))
        for p in pods:
            self.pod_status(name, p)

    def report_pods(self, node_name: str, pods: Sequence[ReportedPod],
                    after: Callable[[], None] | None = None, *, periodic: bool = True) -> None:
        """Pod reports from a node's stream, handled with every stream's reports of this turn of the loop.

        The agents' streams deliver a message each per turn of the event
        loop; the pods of one workload run on many nodes and report on many
        streams.  Handled one by one, each report stored the whole workload
        again (O(pods) per report, O(pods^2) per workload).  Gathered until the
        loop's next turn, a workload's reports are applied in arrival order
        and stored once, in one transaction with all the others; as the
        kubelet's status manager does, only the latest state of a pod is
        written.  ``after`` runs once they are stored (a heartbeat's ack).
        ``periodic``: the node's regular report of every pod it runs (a
        heartbeat), not a report of a change (see pod_status).
        """
        reports = self._reports
        for p in pods:
            reports.append((node_name, p, periodic))
        if after is not None:
            self._after_reports.append(after)
        if self._flush is None:
            self._flush = asyncio.get_running_loop().call_soon(self.flush_reports)

    def flush_reports(self) -> None:
        """Handle the gathered pod reports now: one settlement and one write per workload that changed."""
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        reports, self._reports = self._reports, []
        after, self._after_reports = self._after_reports, []
        try:
            with self.commit.write_group():
                self._batch = {}
                try:
                    for node_name, rp, periodic in reports:
                        self.pod_status(node_name, rp, periodic=periodic)
                    batch = self._batch
                finally:
                    self._batch = None
                for settlement in batch.values():
                    self.apply(settlement)
        except StoreError:
            # The store refuses writes (logged by the committer): the reports
            # not stored changed nothing, and each agent's next heartbeat
            # reports its pods again.
            return
        for f in after:
            f()

    def pod_owner_state(self, uid: str) -> Workload | None:
        """The workload a pod of the controller's belongs to, as it is now (None: not one of its pods)."""
        return self._workload(self.pod_owner.get(uid))

    def _workload(self, key: WorkloadKey | None) -> Workload | None:
        """The workload as reports handled so far left it (a batched settlement not yet stored), else the cache's."""
        if key is None:
            return None
        batch = self._batch
        if batch is not None:
            pending = batch.get(key)
            if pending is not None:
                return pending.workload
        return self.cache.workloads.get(key)

    def pod_status(self, node_name: str, rp: ReportedPod, *, periodic: bool = True) -> None:
        """Record what a node reports of a pod, and act on it (settle its workload).

        A change report (``periodic`` false) of a pending pod that tells
        nothing new but its QoS class is not stored by itself: the class
        comes with the pod's next change (its start, its end), or at the
        latest with the node's next heartbeat, which reports every pod.  The
        agent tells it as it accepts the pod, so storing it then cost every
        pod one more write of its workload, before the write of its start.
        """
        if rp.static:
            node = self.registry.nodes.get(node_name)
            if node is not None:
                if rp.phase in (RUNNING, PENDING):
                    node.set_static_pod(rp)
                elif node.drop_static_pod(rp.uid):
                    # The node has room again: workloads parked for lack of it may fit.
                    self.cache.queues.node_capacity_freed()
                    self.commit.wake()
            return
        uid = rp.uid
        # The workload as reports handled so far left it (see _workload), looked up here: every report does.
        key = self.pod_owner.get(uid)
        wl = rec = None
        if key is not None:
            batch = self._batch
            pending = batch.get(key) if batch is not None else None
            wl = pending.workload if pending is not None else self.cache.workloads.get(key)
            if wl is not None:
                for r in wl.status.pods:
                    if r.uid == uid:
                        rec = r
                        break
        if wl is None or rec is None:
            if rp.phase in (FAILED, "Succeeded"):
                # Ended: its processes are gone, so there is nothing to stop (an agent ignores a stop of a
                # finished pod).  Mostly a pod whose workload was just released, reported again by a
                # heartbeat before the ForgetPod that release sent has reached its agent.
                self._tell(node_name, ForgetPodCommand(rp.uid))
            else:
                self._tell(node_name, StopPodCommand(rp.uid, 0.0, "Unknown", "the controller does not know this pod"))
            return
        if rec.node != node_name:
            # A node reports only its own pods: another node's pod is not its to end or mark.
            log.warning("node %s reported pod %s, which is bound to node %s; ignored", node_name, rec.name, rec.node)
            return
        if rec.phase in TERMINAL:
            if rp.phase in (FAILED, "Succeeded"):
                self._tell(node_name, ForgetPodCommand(rp.uid))
            else:
                self._tell(node_name, StopPodCommand(rp.uid, 0.0, rec.reason or "NotExpected",
                                                     "the controller no longer expects this pod"))
            return
        phase = rp.phase
        node_eviction = _node_eviction(node_name, rec, rp) if phase == FAILED else None
        if node_eviction is not None and not wl.status.is_true("Evicted") and not wl.is_finished:
            # The node ended the pod on its own (rejected at admission, preempted for a
            # critical pod, evicted under pressure): the workload goes back to its queue.
            reason, message = node_eviction
            log.warning("workload %s evicted by node %s: %s", wl.key, node_name, message)
            wl = evict(wl, reason=reason, message=message, now=self.clock())
        reason = rec.reason if rec.reason == "Stopping" and phase not in (FAILED, "Succeeded") else rp.reason
        message = rp.message or rec.message
        started_at = rp.started_at or rec.started_at
        qos_class = rp.qos_class or rec.qos_class
        if (phase == rec.phase and reason == rec.reason and message == rec.message and rp.exit_code == rec.exit_code
                and rp.ready == rec.ready and rp.restarts == rec.restarts and started_at == rec.started_at
                and rp.finished_at == rec.finished_at):
            if qos_class == rec.qos_class:
                return  # as recorded (a heartbeat repeats every pod it runs)
            if not periodic and phase == PENDING and not rec.qos_class:
                return  # only its QoS class is new: stored with its next change or heartbeat (see above)
        self._update_pod(wl, as_reported(rec, phase, reason, message, rp.exit_code, rp.ready, rp.restarts, started_at,
                                         rp.finished_at, qos_class))

    def settle(self, wl: Workload, pods: tuple[PodRecord, ...] | None = None) -> Settlement:
        """Settle the workload; ``pods``: its pods as a report changed them (see lifecycle.settle)."""
        return settle(wl, self.clock(), wait_for_pods_ready=self.cache.config.wait_for_pods_ready,
                      new_uid=new_uid, pods=pods)

    def _update_pod(self, wl: Workload, rec: PodRecord) -> None:
        cache = self.cache
        if rec.phase in TERMINAL:
            # Its processes are gone: the node's capacity is free again now.
            self.registry.unbind(rec.node, rec.uid)
            if cache.queues.node_capacity_freed():
                self.commit.wake()
        uid = rec.uid
        pods = wl.status.pods
        # Fleet.settle, called directly (every report that changes a pod comes here); a one-pod
        # workload's pods are the report's pod alone.
        settlement = settle(wl, self.clock(), wait_for_pods_ready=cache.config.wait_for_pods_ready, new_uid=new_uid,
                            pods=(rec,) if len(pods) == 1 and pods[0].uid == uid
                            else tuple([rec if p.uid == uid else p for p in pods]))
        batch = self._batch
        if batch is not None:
            if not (settlement.stop or settlement.launch or settlement.release or settlement.requeue
                    or settlement.forget):
                # Only a new state to store (and reclaimable pods' quota to give back, which the
                # last state holds too): a later report of the same workload may follow.
                earlier = batch.get(wl.key)
                if earlier is not None and earlier.reclaimed and not settlement.reclaimed:
                    settlement = copy_with(settlement, reclaimed=True)
                batch[wl.key] = settlement
                return
            # Acted on now; this settlement's workload holds what the batched one had.
            earlier = batch.pop(wl.key, None)
            if earlier is not None and earlier.reclaimed and not settlement.reclaimed:
                settlement = copy_with(settlement, reclaimed=True)
        self.apply(settlement)

    # ------------------------------------------------------------ settling

    def apply(self, s: Settlement) -> None:
        """Store a settlement, then act on it: stop pods, release, requeue, forget (see decide_pods)."""
        now = self.clock() if s.launch else 0.0
        self.commit.commit(settlement_effects(s, self.cache, now=now,
                                              block_admission=self.cache.config.wait_for_pods_ready.block_admission))

    # The committer carries out pod effects through these.

    def bind(self, key: WorkloadKey, pod: PodRecord, now: float) -> None:
        """The pod runs (or is to run) on its node: its requests count there."""
        self.pod_owner[pod.uid] = key
        self.registry.bind(pod.node, pod.uid, pod.requests, now=now, heard_at=self.monotonic())
        self._bound_to_tainted(pod)

    def _bound_to_tainted(self, pod: PodRecord) -> None:
        """A pod bound to a node with a NoExecute taint: its eviction time, if any, counts from now."""
        if pod.node in self._taint_evictions:
            self._taint_dirty.setdefault(pod.node, {}).setdefault(pod.uid, self.monotonic())

    def unbind(self, pod: PodRecord) -> None:
        """The pod's processes are gone: its node's capacity is free again, and it has no owner."""
        self.registry.unbind(pod.node, pod.uid)
        self.pod_owner.pop(pod.uid, None)

    def disown(self, uid: str) -> None:
        """The pod belongs to no workload any more (its workload is gone for good)."""
        self.pod_owner.pop(uid, None)

    def send(self, node_name: str, command: Command) -> None:
        """A command to a node's agent, if it is connected now."""
        node = self.registry.nodes.get(node_name)
        if node is not None and node.session is not None:
            node.session.send(command)

    def _tell(self, node_name: str, command: StopPodCommand | ForgetPodCommand) -> None:
        node = self.registry.nodes.get(node_name)
        if node is not None and node.session is not None:
            node.session.send(command)

    def stop_workload(self, wl: Workload, *, reason: str, message: str) -> None:
        """Evict a running workload: stop its pods, release its quota once they exit."""
        now = self.clock()
        self.apply(self.settle(evict(wl, reason=reason, message=message, now=now)))

    def node_connected(self, name: str) -> bool:
        node = self.registry.nodes.get(name)
        return node is not None and node.session is not None

    def node_revoked(self, name: str) -> None:
        """The node's certificates were revoked: end its stream; it cannot come back on them."""
        node = self.registry.nodes.get(name)
        if node is not None and node.session is not None:
            revoke = getattr(node.session, "revoke", None)
            if revoke is not None:
                revoke(f"node {name} has been revoked")

    def end_all_streams(self, message: str) -> None:
        """This controller stops leading: end every agent's stream now, dropping what is queued on it, and
        every stream that registers from now on."""
        self._streams_ended = message
        for node in self.registry.nodes.values():
            if node.session is not None:
                step_down = getattr(node.session, "step_down", None)
                if step_down is not None:
                    step_down(message)

    # ---------------------------------------------------------- node loss

    def fencing_grace_for(self, node: NodeState) -> float:
        """How long after the node timeout its workloads are requeued: the agent has stopped them by then.

        At least ``fencing_grace``, and never less than the longest
        termination grace of the node's pods plus FENCING_MARGIN.
        """
        longest = 0.0
        for uid in node.pods:
            key = self.pod_owner.get(uid)
            wl = self.cache.workloads.get(key) if key else None
            rec = next((r for r in wl.status.pods if r.uid == uid), None) if wl else None
            if wl is None or rec is None:
                continue
            grace = next((ps.termination_grace_period_seconds for ps in wl.pod_sets if ps.name == rec.pod_set), 30)
            longest = max(longest, float(grace))
        return max(self.fencing_grace, longest + FENCING_MARGIN)

    def check_nodes(self) -> None:
        """NotReady at the node timeout; its workloads are requeued only after the fencing grace too.

        Between the two the node's pods keep their records and their quota:
        its agent, if alive but cut off, is stopping them (self-fencing), and
        a node that comes back reports them as usual.  Without self-fencing a
        lost node's workloads stay until it returns: nobody could tell that
        its pods stopped.
        """
        if self._reports:
            self.flush_reports()  # a node's loss is judged on every report received
        now = self.monotonic()
        for node in list(self.registry.nodes.values()):
            silent = now - node.heard_at
            if node.ready and silent > self.node_timeout:
                node.ready = False
                node.not_ready_reason = f"no heartbeat for {silent:.0f}s (timeout {self.node_timeout:g}s)"
                log.warning("node %s is NotReady: %s; its workloads are requeued %s", node.name, node.not_ready_reason,
                            f"if it stays silent for {self.fencing_grace_for(node):g}s more"
                            if self.self_fencing else "only when it returns (selfFencing is off)")
            if node.ready or not node.pods or not self.self_fencing:
                continue
            grace = self.fencing_grace_for(node)
            if silent <= self.node_timeout + grace:
                continue
            msg = (f"node {node.name} stopped responding: no heartbeat for {silent:.0f}s "
                   f"(timeout {self.node_timeout:g}s "
                   f"+ fencing grace {grace:g}s, within which its agent stops its pods by itself)")
            for uid in list(node.pods):
                key = self.pod_owner.get(uid)
                wl = self.cache.workloads.get(key) if key else None
                rec = next((r for r in wl.status.pods if r.uid == uid), None) if wl else None
                if wl is None or rec is None or rec.terminal:
                    node.remove_pod(uid)
                    continue
                self._lose_pod(wl, rec, reason="NodeLost", message=msg)
        # Like the taint eviction controller, act on events (a pod bound) and on due times only.
        now = self.monotonic()
        for name, scheduled in list(self._taint_evictions.items()):
            if name in self._taint_dirty or any(e.due <= now for e in scheduled.values()):
                self._check_taints(name)

    # ------------------------------------------------------ NoExecute taints

    def _pod_tolerations(self, uid: str) -> tuple[Workload, PodTolerations] | None:
        """A running pod's tolerations (its own plus its admitted flavors'), with its workload."""
        key = self.pod_owner.get(uid)
        wl = self.cache.workloads.get(key) if key else None
        rec = next((r for r in wl.status.pods if r.uid == uid), None) if wl else None
        if wl is None or rec is None or rec.terminal or wl.is_finished or wl.status.is_true("Evicted"):
            return None
        pod_set = next((ps for ps in wl.pod_sets if ps.name == rec.pod_set), None)
        if pod_set is None:
            return None
        admission = wl.status.admission
        psa = next((a for a in admission.pod_set_assignments if a.name == rec.pod_set), None) if admission else None
        tolerations = tolerations_of(pod_set, psa.flavors if psa else {}, self.cache.flavors)
        return wl, PodTolerations(uid, rec.name, tolerations)

    def _check_taints(self, name: str) -> None:
        """Evict the pods on the node whose NoExecute taints they no longer tolerate (see decide_taints)."""
        node = self.registry.nodes.get(name)
        scheduled = self._taint_evictions.get(name)
        if node is None or scheduled is None:
            return
        owners: dict[str, Workload] = {}
        pods: list[PodTolerations] = []
        for uid in node.pods:
            found = self._pod_tolerations(uid)
            if found is not None:
                owners[uid], pod = found
                pods.append(pod)
        now = self.monotonic()
        decided = taint_evictions(node=name, taints=node.taints, pods=pods, scheduled=scheduled, now=now,
                                  bound_at=self._taint_dirty.pop(name, None))
        # Due ones stay listed until their workload is seen evicted (a refused store write is retried).
        self._taint_evictions[name] = decided
        for uid, eviction in decided.items():
            if eviction.due > now:
                continue
            wl = self.cache.workloads.get(owners[uid].key)
            if wl is None or wl.is_finished or wl.status.is_true("Evicted"):
                continue  # another of its pods already had it evicted
            log.warning("workload %s evicted: %s", wl.key, eviction.message)
            self.stop_workload(wl, reason=TAINT_EVICTION_REASON, message=eviction.message)

    # ---------------------------------------------------------------- logs

    async def logs(
        self, namespace: str, workload: str, pod: str, container: str, follow: bool
    ) -> AsyncIterator[tuple[str, str, bytes]]:
        wl = self.cache.workloads.get(workload_key(namespace, workload))
        if wl is None:
            raise NotFound("Workload", namespace, workload)
        records = list(pods_or_last(wl))
        if pod:
            records = [r for r in records if r.name == pod or str(r.index) == pod or r.name.endswith(f"-{pod}")]
        if not records:
            raise FailedPrecondition(
                f"workload {namespace}/{workload} has no pods{' named ' + pod if pod else ''} (not admitted yet?)")
        for rec in records:
            node = self.registry.nodes.get(rec.node)
            if node is None or node.session is None:
                raise FailedPrecondition(f"pod {rec.name} ran on node {rec.node}, whose agent is not connected now")
            request_id = str(uuid.uuid4())
            queue: asyncio.Queue[tuple[str, bytes, bool, str]] = asyncio.Queue()
            self._log_routes[request_id] = (rec.node, queue)
            node.session.send(LogRequestCommand(request_id, rec.uid, container, follow))
            try:
                while True:
                    cont, data, eof, error = await queue.get()
                    if error:
                        raise FailedPrecondition(f"logs of pod {rec.name}: {error}")
                    if data:
                        yield rec.name, cont, data
                    if eof:
                        break
            finally:
                self._log_routes.pop(request_id, None)
                if node.session is not None:
                    node.session.send(CancelLogsCommand(request_id))

    def log_chunk(self, node_name: str, request_id: str, container: str, data: bytes, eof: bool, error: str) -> None:
        route = self._log_routes.get(request_id)
        # Only the node that was asked may answer: another cannot inject lines into someone's logs.
        if route is not None and route[0] == node_name:
            route[1].put_nowait((container, data, eof, error))


# Pod reasons with which an agent ends a pod by itself, and the workload's Evicted reason for each.
NODE_EVICTION_REASONS = {
    "Preempting": "PreemptedOnNode",
    "Evicted": "NodePressure",
    "UnexpectedAdmissionError": "NodeRejected",
    # Cut off from the controller for the node timeout: the agent stopped it (self-fencing).
    "NodeFenced": "NodeLost",
    # Found running in the agent's cgroups with no checkpoint record: killed.
    "Orphaned": "PodLost",
    # The machine rebooted under the pod.
    "NodeRebooted": "NodeLost",
}


def _node_eviction(node: str, rec: PodRecord, rp: ReportedPod) -> tuple[str, str] | None:
    if rp.phase != FAILED or rec.reason == "Stopping":
        return None
    reason = NODE_EVICTION_REASONS.get(rp.reason)
    if reason is None and rp.reason.startswith("OutOf"):
        reason = "NodeRejected"
    if reason is None:
        return None
    what = {"PreemptedOnNode": "was preempted", "NodePressure": "was evicted", "NodeRejected": "was rejected",
            "NodeLost": "was ended", "PodLost": "was killed"}[reason]
    return reason, f"pod {rec.name} {what} by node {node}: {rp.reason}: {rp.message}"
