"""The agent's stream to the controller: register, heartbeats, pod status, commands, logs.

One long-lived ``AgentLink.Connect`` stream.  When it breaks (controller
restart, network) the agent keeps its pods running and reconnects with
capped exponential backoff and full jitter, then registers again with every
pod it has, so the controller can reconcile.  Cut off for longer than the
node timeout, it stops them itself (:mod:`sluicegate.agent.fencing`): the
controller acknowledges each heartbeat, and the link tells the fencing clock
when the acknowledged heartbeat (or the Register) was sent.

With several controllers (``controller: a:7420,b:7420``) only the leader
accepts the stream; a follower's refusal names the leader, which the link
tries next.  The link remembers the highest leader epoch it has seen (in the
data directory, across restarts) and refuses a stream or a command from a
lower one: that controller lost its lease.  A leader that stops answering
heartbeats (paused, partitioned) is left after ``STALL_HEARTBEATS``
heartbeat intervals so the node reaches the new leader before it would fence.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import Any

import grpc

from sluicegate.agent import credentials as creds
from sluicegate.agent.fencing import Contract, SelfFencing
from sluicegate.agent.node import AgentNode, PodReport
from sluicegate.agent.pod import Container, Pod, RequestedSecurity, RestartPolicy
from sluicegate.agent.probes import ProbeSpec
from sluicegate.common.channels import open_channel
from sluicegate.common.leaders import Endpoints, leader_hint
from sluicegate.common.streams import STREAM_WINDOW_OPTIONS, coalesced, unbatched
from sluicegate.model.taints import Taint
from sluicegate.security import pki
from sluicegate.v1 import agent_pb2, agent_pb2_grpc, security_pb2, security_pb2_grpc

log = logging.getLogger(__name__)

AGENT_VERSION = "0.1.0"
LOG_CHUNK = 64 * 1024
# With several controllers: heartbeats unanswered for this many intervals,
# and for a quarter of the node timeout, end the stream to look for the
# leader; a quarter leaves the rest of the timeout to find it before the
# node would fence itself.
STALL_HEARTBEATS = 4
# How long a controller may take to answer Register: one alone gets long, as
# a controller loading a large store answers late; among several a silent one
# is passed over sooner (at most this, and a quarter of the node timeout).
REGISTER_TIMEOUT = 30.0
REGISTER_TIMEOUT_SEVERAL = 5.0
# How long a new pod's Running report waits: a pod that ends meanwhile is
# reported once, with its start and end (see forward_events).
RUNNING_REPORT_HOLD_SECONDS = 0.02
# The runtime's other status changes go out at most once per this many
# seconds, together (see forward_events): each write on the stream costs the
# agent a loopback TCP send, and the controller a read, whatever it carries.
# A change after a quiet spell goes at once.
REPORT_LINGER_SECONDS = 0.01


class StaleLeader(Exception):
    """The controller's epoch is lower than one this node has seen: it lost its lease."""


class EpochMemory:
    """The highest leader epoch this node has seen, kept in a file across restarts."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.highest = 0
        if path is not None:
            try:
                self.highest = int(path.read_text().strip() or 0)
            except FileNotFoundError:
                pass
            except (OSError, ValueError) as exc:
                log.warning("cannot read %s (%s); starting from epoch 0", path, exc)

    def accepts(self, epoch: int) -> bool:
        """An epoch of 0 comes from a controller without leader election and is always accepted."""
        return epoch == 0 or epoch >= self.highest

    def observe(self, epoch: int) -> None:
        if epoch <= self.highest:
            return
        self.highest = epoch
        if self.path is not None:
            tmp = self.path.with_suffix(".tmp")
            try:
                tmp.write_text(f"{epoch}\n")
                tmp.replace(self.path)
            except OSError as exc:
                log.warning("cannot record leader epoch %d in %s: %s", epoch, self.path, exc)


def _agent_batch(messages: list[agent_pb2.AgentMessage]) -> agent_pb2.AgentMessage:
    return agent_pb2.AgentMessage(batch=agent_pb2.AgentBatch(messages=messages))


def _is_register(msg: agent_pb2.AgentMessage) -> bool:
    # The controller reads the stream's first message by itself as the registration.
    kind: str | None = msg.WhichOneof("kind")
    return kind == "register"


def report_to_proto(r: PodReport) -> agent_pb2.PodStatus:
    return agent_pb2.PodStatus(
        uid=r.uid, name=r.name, namespace=r.namespace, workload=r.workload, phase=r.phase, reason=r.reason,
        message=r.message, ready=r.ready, started_at=r.started_at, finished_at=r.finished_at, rss_bytes=r.rss_bytes,
        cpu_seconds=r.cpu_seconds, static=r.static, requests=dict(r.requests), priority=r.priority,
        qos_class=r.qos_class, gpu_memory_bytes=r.gpu_memory_bytes, gpu_utilization_percent=r.gpu_utilization_percent,
        containers=[agent_pb2.ContainerStatus(name=c.name, state=c.state, exit_code=c.exit_code, reason=c.reason,
                                              restart_count=c.restart_count, pid=c.pid, ready=c.ready)
                    for c in r.containers],
    )


def pod_from_proto(p: agent_pb2.PodSpec) -> Pod:
    """The agent's pod from the controller's RunPod message: the one conversion it gets before the checkpoint."""
    return Pod(
        uid=p.uid, name=p.name, namespace=p.namespace, workload=p.workload, pod_set=p.pod_set, index=p.index,
        containers=tuple(
            Container(name=c.name, command=tuple(c.command), args=tuple(c.args),
                      env=tuple((e.name, e.value) for e in c.env), working_dir=c.working_dir or None,
                      requests=dict(c.requests), limits=dict(c.limits),
                      readiness_probe=(probe_from_proto(c.readiness_probe)
                                       if c.HasField("readiness_probe") else None),
                      security=_security_from_proto(c))
            for c in p.containers
        ),
        restart_policy=RestartPolicy(p.restart_policy or "Never"),
        termination_grace_seconds=p.termination_grace_seconds,
        priority=p.priority, priority_class=p.priority_class,
    )


def _security_from_proto(c: agent_pb2.Container) -> RequestedSecurity | None:
    fields = {a: getattr(c, a) for a in ("run_as_user", "run_as_group", "run_as_non_root", "allow_privilege_escalation")
              if c.HasField(a)}
    return RequestedSecurity(**fields) if fields else None


def probe_from_proto(p: agent_pb2.Probe) -> ProbeSpec:
    return ProbeSpec(
        exec_command=tuple(p.exec), tcp_port=p.tcp_port, http_path=p.http_get_path, http_port=p.http_port,
        initial_delay_seconds=p.initial_delay_seconds, period_seconds=p.period_seconds or 10.0,
        timeout_seconds=p.timeout_seconds or 1.0, success_threshold=p.success_threshold or 1,
        failure_threshold=p.failure_threshold or 3,
    )


class Backoff:
    """Capped exponential backoff with full jitter (delay drawn from [0, min(cap, base*2^n)])."""

    def __init__(self, base: float, cap: float, rng: random.Random | None = None) -> None:
        self.base, self.cap = base, cap
        self.attempt = 0
        self.rng = rng or random.Random()

    def next(self) -> float:
        ceiling = min(self.cap, self.base * (2 ** self.attempt))
        self.attempt = min(self.attempt + 1, 30)
        return self.rng.uniform(self.base / 2, ceiling) if ceiling > self.base / 2 else ceiling

    def reset(self) -> None:
        self.attempt = 0


class ControllerLink:
    def __init__(
        self,
        *,
        address: str,
        node: AgentNode,
        labels: dict[str, str],
        boot_id: str,
        taints: Sequence[Taint] = (),
        health_address: str,
        backoff: Backoff,
        pki_dir: Path | None = None,
        fencing: SelfFencing | None = None,
        epoch_file: Path | None = None,
    ) -> None:
        self.endpoints = Endpoints(address)
        self.epochs = EpochMemory(epoch_file)
        # Commands refused because they came from a lower epoch than one seen.
        self.refused_stale = 0
        # The controllers' node timeout as the last Registered said (the default until then).
        self.node_timeout = 40.0
        # Where the node's credentials live (None: plaintext, authentication off).
        self.pki_dir = pki_dir
        self.node = node
        self.labels = labels
        self.taints = tuple(taints)
        self.boot_id = boot_id
        self.health_address = health_address
        self.backoff = backoff
        self.connected = False
        self.registered_once = False
        self.last_error = "not connected yet"
        self.heartbeat_interval = 2.0
        self._out: asyncio.Queue[agent_pb2.AgentMessage | None] | None = None
        self._log_tasks: dict[str, asyncio.Task[None]] = {}
        self._command_tasks: set[asyncio.Task[None]] = set()
        self.fencing = fencing
        # Heartbeats sent on this stream and not acknowledged yet: seq -> when (the fencing clock).
        self._unacked: dict[int, float] = {}
        # New pods whose first Running report waits (see forward_events), with when it goes, in order.
        self._held: dict[str, float] = {}
        # Pods whose report goes with the next send of reports (see forward_events), in order.
        self._due: dict[str, None] = {}
        # The one timer that sends the due reports and the held ones that are due, and when it fires.
        self._report_timer: asyncio.TimerHandle | None = None
        self._report_at = 0.0
        # When reports last went out (loop time).
        self._reports_sent_at = float("-inf")
        # ForgetPods received and not yet taken by their task (which is not done until it took them), by purge.
        self._forgets: dict[bool, tuple[list[str], asyncio.Task[None]]] = {}
        self._seq = 0
        # Set when the node's allocatable or labels changed (a device's health): the
        # session ends and the next one registers them, as every registration does.
        self._register_again = asyncio.Event()
        node.on_readiness = self._readiness_changed
        # Static pods are admitted without a command from us: report each admission as it happens.
        node.on_admitted = self.send_pod

    @property
    def address(self) -> str:
        """The controller this link talks to now (or tries next)."""
        return self.endpoints.current

    def register_again(self) -> None:
        """The node's allocatable or labels changed: register them anew (at once, without backoff)."""
        self._register_again.set()

    def _readiness_changed(self, uid: str) -> None:
        if self.connected:
            self.send_pod(uid)

    # -------------------------------------------------------------- sending

    def _send(self, msg: agent_pb2.AgentMessage) -> None:
        if self._out is not None:
            self._out.put_nowait(msg)

    def send_pod(self, uid: str) -> None:
        r = self.node.report(uid)
        if r is not None:
            self._send(agent_pb2.AgentMessage(pod_status=report_to_proto(r)))

    async def forward_events(self) -> None:
        """Relay the runtime's status changes (dropped while disconnected: Register resends all).

        Each event is a whole snapshot, so of the events waiting together
        only one report per pod is sent, built from the pod's newest state
        when it goes out: a pod that started (Pending, then Running) since
        we last looked is reported once.  A new pod whose first start is
        still under way is not reported: the controller sent it as Pending,
        and the status after its spawn (Running, or the start's failure)
        always follows, so a pod costs the controller one report less.

        A new pod's first Running report is held for
        ``RUNNING_REPORT_HOLD_SECONDS``: a short pod that ends meanwhile is
        reported once, with when it started and ended (the controller
        stores one change instead of two).  Every other change goes at once
        when no reports went out in the last ``REPORT_LINGER_SECONDS``, else
        when that much has passed, together with the others of that moment
        and the held reports that would be due before the next send: one
        write on the stream for all of them (see ``_send_reports``).
        """
        events = self.node.runtime.events
        runtime = self.node.runtime
        loop = asyncio.get_running_loop()
        while True:
            batch = [await events.get()]
            while not events.empty():
                batch.append(events.get_nowait())
            uids: dict[str, None] = {}
            for st in batch:
                if st.finished:
                    self.node.probes.stop(st.uid)
                uids[st.uid] = None
            if not self.connected:
                continue
            now = loop.time()
            held = self._held
            for uid in uids:
                current = runtime.status(uid)
                if current is not None and current.creating:
                    continue
                if current is not None and current.first_run and uid not in held:
                    held[uid] = now + RUNNING_REPORT_HOLD_SECONDS
                    continue
                held.pop(uid, None)
                self._due[uid] = None
            if self._due:
                when = self._reports_sent_at + REPORT_LINGER_SECONDS
                if when <= now:
                    self._send_reports()
                else:
                    self._reports_at(when, loop)
            elif held:
                self._reports_at(next(iter(held.values())), loop)

    def _reports_at(self, when: float, loop: asyncio.AbstractEventLoop) -> None:
        """Make sure the reports are sent no later than ``when`` (loop time)."""
        timer = self._report_timer
        if timer is not None:
            if self._report_at <= when:
                return
            timer.cancel()
        self._report_at = when
        self._report_timer = loop.call_at(when, self._send_reports)

    def _send_reports(self) -> None:
        """Send the due reports, and the held ones due before the next send could come; one write for all."""
        if self._report_timer is not None:
            self._report_timer.cancel()  # called before it was due (see forward_events)
            self._report_timer = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        held, due = self._held, self._due
        if held:
            # Held in order, so each one's release is no earlier than the one before's.
            ripe = now + REPORT_LINGER_SECONDS
            for uid, when in list(held.items()):
                if when > ripe:
                    break
                del held[uid]
                due[uid] = None
        self._due = {}
        if self.connected and due:
            self._reports_sent_at = now
            for uid in due:
                self.send_pod(uid)
        if held:
            self._reports_at(next(iter(held.values())), loop)

    def _register(self) -> agent_pb2.AgentMessage:
        n = self.node
        return agent_pb2.AgentMessage(register=agent_pb2.Register(
            node=agent_pb2.NodeInfo(name=n.name, labels=self.labels, capacity=n.capacity, allocatable=n.allocatable,
                                    agent_version=AGENT_VERSION, boot_id=self.boot_id,
                                    health_address=self.health_address,
                                    taints=[agent_pb2.Taint(key=t.key, value=t.value, effect=t.effect)
                                            for t in self.taints]),
            pods=[report_to_proto(r) for r in n.reports()],
        ))

    def _heartbeat(self, seq: int = 0) -> agent_pb2.AgentMessage:
        reading = self.node.node_reading()
        usage = agent_pb2.NodeUsage(
            memory_total=reading.memory_total_bytes, memory_available=reading.memory_available_bytes,
            cpu_usage_cores=reading.cpu_busy_fraction * reading.logical_cpus, nodefs_available=reading.disk_free_bytes,
            conditions=list(self.node.conditions), observed_at=reading.at,
        )
        return agent_pb2.AgentMessage(heartbeat=agent_pb2.Heartbeat(
            usage=usage, pods=[report_to_proto(r) for r in self.node.reports(with_usage=True)], seq=seq))

    # ---------------------------------------------------------------- loop

    async def run(self) -> None:
        """Stay connected for as long as the agent runs."""
        while True:
            renewed = False
            redirected = False
            try:
                renewed = await self._session()
                self.last_error = "the controller closed the stream"
            except grpc.aio.AioRpcError as exc:
                self.last_error = f"{exc.code().name}: {exc.details()}"
                hint = leader_hint(exc)
                if hint is not None and hint != self.address:
                    log.info("controller %s does not lead; the leader is %s", self.address, hint)
                    self.endpoints.redirect(hint)
                    redirected = True
                if exc.code() == grpc.StatusCode.ABORTED and "superseded" in (exc.details() or ""):
                    # Another stream registered this node: a stale one of ours, or a second agent
                    # with the same node name (misconfigured), which we would keep taking over.
                    log.error("the controller closed our stream: %s; is another agent running as node %s?",
                              exc.details(), self.node.name)
                    self.backoff.attempt = 30  # the next delay is drawn up to the cap
            except StaleLeader as exc:
                self.last_error = str(exc)
                log.warning("%s", exc)
            except (TimeoutError, OSError, ConnectionError) as exc:
                self.last_error = str(exc) or type(exc).__name__
            except Exception as exc:
                # A bug must not take the node down with it: pods keep running,
                # the error is logged with its traceback, and we reconnect.
                log.exception("controller link failed unexpectedly")
                self.last_error = f"{type(exc).__name__}: {exc}"
            finally:
                self.connected = False
                self._out = None
                for t in self._log_tasks.values():
                    t.cancel()
                self._log_tasks.clear()
            if renewed or redirected:
                continue
            tried = self.address
            if self.endpoints.several and not self.endpoints.failed():
                # Another controller may lead: try it before backing off.
                log.info("controller %s unavailable (%s); trying %s", tried, self.last_error, self.address)
                await asyncio.sleep(0.05)
                continue
            delay = self.backoff.next()
            log.warning("controller %s unreachable (%s); reconnecting in %.1fs; pods keep running",
                        tried, self.last_error, delay)
            await asyncio.sleep(delay)

    def _channel(self) -> tuple[grpc.aio.Channel, creds.NodeCredentials | None]:
        # Read for every session: a renewed certificate is used from the next connection on.
        node_creds = creds.load(self.pki_dir) if self.pki_dir is not None else None
        if node_creds is None:
            return open_channel(self.address, options=STREAM_WINDOW_OPTIONS), None
        return open_channel(self.address, ca=node_creds.ca, cert=node_creds.cert, key=node_creds.key,
                            options=STREAM_WINDOW_OPTIONS), node_creds

    async def _renew_when_due(self, channel: grpc.aio.Channel, node_creds: creds.NodeCredentials) -> None:
        """Renew the node certificate once it is due; then end the session so the next one uses it."""
        delay = node_creds.renew_at - time.time()
        if delay > 0:
            await asyncio.sleep(delay)
        key = pki.new_key()
        stub = security_pb2_grpc.SecurityStub(channel)
        resp = await stub.Renew(security_pb2.RenewRequest(csr=pki.make_csr(key, f"system:node:{node_creds.node}")),
                                timeout=30)
        assert self.pki_dir is not None
        creds.save(self.pki_dir, ca=node_creds.ca, key=pki.key_pem(key), cert=resp.certificate)
        log.info("renewed the node certificate (valid until %s); reconnecting with it",
                 time.strftime("%Y-%m-%d", time.gmtime(pki.info(pki.load_cert(resp.certificate)).not_after)))

    async def _session(self) -> bool:
        """One stream, until it ends; True when it ended to reconnect with a renewed certificate."""
        channel, node_creds = self._channel()
        async with channel:
            stub = agent_pb2_grpc.AgentLinkStub(channel)
            out: asyncio.Queue[agent_pb2.AgentMessage | None] = asyncio.Queue()
            self._register_again.clear()
            out.put_nowait(self._register())
            sent_at = self.fencing.clock() if self.fencing is not None else 0.0
            self._unacked.clear()

            call = stub.Connect(coalesced(out, batch=_agent_batch, alone=_is_register))
            timeout = (max(1.0, min(REGISTER_TIMEOUT_SEVERAL, self.node_timeout / 4)) if self.endpoints.several
                       else REGISTER_TIMEOUT)
            try:
                first = await asyncio.wait_for(call.read(), timeout=timeout)
            except TimeoutError:
                call.cancel()
                raise TimeoutError(f"the controller did not answer Register within {timeout:g}s") from None
            if first is grpc.aio.EOF or first.WhichOneof("kind") != "registered":
                raise ConnectionError("the controller did not acknowledge the registration")
            reg = first.registered
            if not self.epochs.accepts(reg.epoch):
                call.cancel()
                raise StaleLeader(f"controller {self.address} leads with epoch {reg.epoch}, but this node has seen "
                                  f"epoch {self.epochs.highest}: it lost its lease; refusing its stream")
            self.epochs.observe(reg.epoch)
            self.endpoints.succeeded()
            if reg.node_timeout_seconds > 0:
                self.node_timeout = reg.node_timeout_seconds
            self.heartbeat_interval = reg.heartbeat_interval_seconds or self.heartbeat_interval
            if self.fencing is not None and reg.node_timeout_seconds > 0:
                self.fencing.registered(Contract(reg.node_timeout_seconds, reg.fencing_grace_seconds, reg.self_fencing),
                                        sent_at=sent_at)
            self._out = out
            self.connected = True
            self.registered_once = True
            self.backoff.reset()
            log.info("registered with controller %s as node %s%s", self.address, self.node.name,
                     f" (leader epoch {reg.epoch})" if reg.epoch else "")
            epoch = reg.epoch
            beat = asyncio.create_task(self._beat(out), name="heartbeat")
            renew = (asyncio.create_task(self._renew_when_due(channel, node_creds), name="renew-certificate")
                     if node_creds is not None else None)
            stall = asyncio.create_task(self._stalled(), name="stall-watch") if self.endpoints.several else None
            # Only a node with devices changes its resources (reading through asyncio.wait costs each message).
            again = (asyncio.create_task(self._register_again.wait(), name="register-again")
                     if self.node.devices is not None else None)
            enders = {t for t in (renew, stall, again) if t is not None}
            try:
                while True:
                    if not enders:
                        msg = await call.read()
                    else:
                        read = asyncio.ensure_future(call.read())
                        await asyncio.wait({read, *enders}, return_when=asyncio.FIRST_COMPLETED)
                        if not read.done():
                            read.cancel()
                            call.cancel()
                            if stall is not None and stall.done():
                                raise ConnectionError(stall.result())
                            if again is not None and again.done():
                                log.info("node resources changed (allocatable %s); registering again",
                                         self.node.allocatable)
                                return True
                            assert renew is not None
                            renew.result()  # a failed renewal is this session's error; the next one retries
                            return True
                        msg = read.result()
                    if msg is grpc.aio.EOF:
                        break
                    if msg.epoch != epoch and not self.epochs.accepts(msg.epoch):
                        self.refused_stale += 1
                        log.warning("refused a command from epoch %d (this node has seen %d)", msg.epoch,
                                    self.epochs.highest)
                        continue
                    for one in unbatched(msg, lambda m: m.batch.messages):
                        self._handle(one)
            finally:
                beat.cancel()
                for t in enders:
                    t.cancel()
                out.put_nowait(None)
        return False

    async def _stalled(self) -> str:
        """Return (a reason) once heartbeats have gone unanswered too long: the leader may be paused or cut off."""
        limit = max(STALL_HEARTBEATS * self.heartbeat_interval, self.node_timeout / 4)
        clock = self.fencing.clock if self.fencing is not None else time.monotonic
        while True:
            await asyncio.sleep(min(1.0, limit / 4))
            oldest = min(self._unacked.values(), default=None)
            if oldest is not None and clock() - oldest > limit:
                return f"controller {self.address} left heartbeats unanswered for {limit:g}s"

    async def _beat(self, out: asyncio.Queue[agent_pb2.AgentMessage | None]) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_interval)
            self._seq += 1
            if self.fencing is not None or self.endpoints.several:
                clock = self.fencing.clock if self.fencing is not None else time.monotonic
                self._unacked[self._seq] = clock()
                if len(self._unacked) > 1000:  # never acknowledged (an old controller): bounded
                    self._unacked.pop(next(iter(self._unacked)))
            out.put_nowait(self._heartbeat(self._seq))

    def _acked(self, seq: int) -> None:
        sent_at = self._unacked.pop(seq, None)
        if sent_at is None:
            return
        for older in [s for s in self._unacked if s < seq]:
            del self._unacked[older]
        if self.fencing is not None:
            self.fencing.heard(sent_at)

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        task = asyncio.create_task(self._command(coro, name), name=name)
        self._command_tasks.add(task)
        return task

    async def _command(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        # A command's task logs its own failure and leaves the set in its last
        # step: a done callback would cost every pod one more loop callback.
        try:
            await coro
        except Exception:
            log.exception("%s failed", name)
        finally:
            task = asyncio.current_task()
            if task is not None:
                self._command_tasks.discard(task)

    def _handle(self, msg: agent_pb2.ControllerMessage) -> None:
        kind = msg.WhichOneof("kind")
        if kind == "heartbeat_ack":
            self._acked(msg.heartbeat_ack.seq)
        elif kind == "run_pod":
            self._spawn(self._run(msg.run_pod.pod), f"run-{msg.run_pod.pod.name}")
        elif kind == "stop_pod":
            s = msg.stop_pod
            self._spawn(self.node.stop_pod(s.uid, grace_seconds=s.grace_seconds, reason=s.reason, message=s.message),
                        f"stop-{s.uid}")
        elif kind == "forget_pod":
            f = msg.forget_pod
            waiting = self._forgets.get(f.purge)
            if waiting is not None and not waiting[1].done():
                waiting[0].append(f.uid)
            else:
                uids = [f.uid]
                self._forgets[f.purge] = (uids, self._spawn(self._forget(uids, f.purge), f"forget-{f.uid}"))
        elif kind == "log_request":
            r = msg.log_request
            self._log_tasks[r.request_id] = asyncio.create_task(
                self._stream_logs(r.request_id, r.pod_uid, r.container, r.follow), name=f"logs-{r.request_id}")
        elif kind == "cancel_logs":
            t = self._log_tasks.pop(msg.cancel_logs.request_id, None)
            if t is not None:
                t.cancel()

    async def _forget(self, uids: list[str], purge: bool) -> None:
        # The ForgetPods handled before this task's first step (those of one
        # message) join ``uids``: one task and one checkpoint write for them.
        del self._forgets[purge]
        await self.node.forget_all(uids, purge=purge)

    async def _run(self, message: agent_pb2.PodSpec) -> None:
        # Decoded in the task, so a pod the agent cannot read fails its task, not the stream.
        pod = pod_from_proto(message)
        # A pod the runtime took is reported by its events; rejections, start
        # failures and pods already known never reach them: report those here.
        if not await self.node.run_pod(pod):
            self.send_pod(pod.uid)

    async def _stream_logs(self, request_id: str, uid: str, container: str, follow: bool) -> None:
        def chunk(data: bytes = b"", *, eof: bool = False, error: str = "", name: str = "") -> None:
            self._send(agent_pb2.AgentMessage(log_chunk=agent_pb2.LogChunk(
                request_id=request_id, data=data, eof=eof, error=error, container=name)))

        try:
            meta = self.node.meta.get(uid)
            all_names = self.node.container_names(uid)
            if not all_names or (meta is not None and meta.rejected):
                why = f": {meta.message}" if meta else ""
                chunk(eof=True, error=f"the pod never started on node {self.node.name}{why}")
                return
            names = [n for n in all_names if not container or n == container]
            if not names:
                chunk(eof=True, error=f"no container {container!r} in the pod")
                return
            for name in names:
                path: Path = self.node.runtime.log_path(uid, name)
                offset = 0
                # Bounded by the pod's life: following stops once the pod has
                # finished and the file is read to its end.
                while True:
                    data = b""
                    if path.exists():
                        with open(path, "rb") as f:
                            f.seek(offset)
                            data = f.read(LOG_CHUNK)
                    if data:
                        offset += len(data)
                        chunk(data, name=name)
                        continue
                    cur = self.node.runtime.status(uid)
                    if not follow or cur is None or cur.finished or len(names) > 1:
                        break
                    await asyncio.sleep(0.2)
            chunk(eof=True)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            chunk(eof=True, error=str(exc))
        finally:
            self._log_tasks.pop(request_id, None)


async def join(
    *, address: str, token: str, ca_hash: str, node_name: str, pki_dir: Path, timeout: float = 30.0
) -> creds.NodeCredentials:
    """Join the cluster: pin the CA by hash, trade the bootstrap token and a CSR for a node certificate.

    ``address`` may name any controller's token port: a follower's refusal
    names the leader's, which is tried next (its CA is the same pinned one)."""
    ca = await asyncio.to_thread(creds.fetch_ca, address, ca_hash, timeout=timeout)
    key = pki.new_key()
    csr = pki.make_csr(key, f"system:node:{node_name}")
    request = security_pb2.JoinRequest(token=token, node_name=node_name, csr=csr)
    for _ in range(3):
        async with open_channel(address, ca=ca) as channel:
            stub = security_pb2_grpc.SecurityStub(channel)
            try:
                resp = await stub.Join(request, timeout=timeout)
                break
            except grpc.aio.AioRpcError as exc:
                hint = leader_hint(exc, token=True)
                if hint is None or hint == address:
                    raise
                log.info("controller %s does not lead; joining through the leader at %s", address, hint)
                address = hint
    else:
        raise ConnectionError("no controller accepted the join")
    cert = pki.load_cert(resp.certificate)
    if not pki.signed_by(cert, pki.load_cert(ca)):
        raise creds.CredentialsError("the controller returned a certificate the pinned CA did not sign")
    creds.save(pki_dir, ca=ca, key=pki.key_pem(key), cert=resp.certificate)
    loaded = creds.load(pki_dir)
    assert loaded is not None
    return loaded
