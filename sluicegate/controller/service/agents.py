"""AgentLink (one stream per node agent) and Nodes (list, logs) services."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Sequence

import grpc

from sluicegate.common.streams import drain_encoded, unbatched, varint
from sluicegate.controller.errors import InvalidArgument, Unauthenticated
from sluicegate.controller.fleet import Fleet
from sluicegate.controller.lifecycle import job_of
from sluicegate.controller.manager import Manager
from sluicegate.controller.nodes import (
    NO_REQUESTS,
    CancelLogsCommand,
    Command,
    ForgetPodCommand,
    LogRequestCommand,
    NodeUsage,
    ReportedPod,
    RunPodCommand,
    StopPodCommand,
)
from sluicegate.controller.service.errors import Context, handled, status_for
from sluicegate.controller.service.gate import Gate
from sluicegate.controller.service.rawwire import add_with_raw_responses
from sluicegate.controller.store import StoreError
from sluicegate.manifest.taints import read_taint_list
from sluicegate.model.pods import PodRecord
from sluicegate.model.workloads import Container, PodSet, SecurityContext, Workload
from sluicegate.security.identity import Authenticator, OpenAuthenticator
from sluicegate.v1 import agent_pb2, agent_pb2_grpc

log = logging.getLogger(__name__)

INT64_MAX = 2**63 - 1

# Outgoing messages buffered per agent before the stream is considered stuck.
SEND_BUFFER = 100_000
# Backpressure: a node whose stream has this many messages waiting (its agent
# reads them, or this controller's loop writes them, slower than they come)
# gets no new pods until they are down to SEND_LOW_WATER.  Its pods keep running and the commands for
# them (stops, forgets) still go; the workloads that would have gone there
# wait for another node or for this one to catch up.  Without it a busy
# cluster buffered up to SEND_BUFFER messages per slow node and then closed
# the stream, which made the node NotReady.
SEND_HIGH_WATER = 4_096
SEND_LOW_WATER = 1_024
# How long a refused agent stream waits for the agent's first message before its status goes out.
REFUSAL_READ_SECONDS = 5.0
# A ForgetPod (not a purge) waits up to this long to travel with the next
# message to the same agent.  Nothing waits on it: the pod's processes are
# gone, its quota is back and a finished pod holds nothing on its node.  Sent
# alone it would cost both ends a stream message per pod.
FORGET_DELAY = 0.05


def reported_pod(p: agent_pb2.PodStatus) -> ReportedPod:
    exit_code = None
    restarts = 0
    containers = p.containers
    if len(containers) == 1:
        # Most pods have one container: read by index, since iterating a repeated field of a message
        # just parsed first makes an iterator over it (0.25 of the 0.7 us the loop below takes).
        c = containers[0]
        restarts = c.restart_count
        if c.state == "Terminated":
            exit_code = c.exit_code
    else:
        for c in containers:
            restarts += c.restart_count
            if c.state == "Terminated" and (exit_code is None or c.exit_code != 0):
                exit_code = c.exit_code
    static = p.static
    # Made as the tuple it is, fields in order (the stream reader makes one per pod it is told of).  Only a
    # static pod's requests are read (the controller's own pods' are in their records): copied for it alone.
    return _new_tuple(ReportedPod, (
        p.uid, p.name, p.namespace, p.workload, p.phase, p.reason, p.message, exit_code, p.ready, restarts,
        p.started_at or None, p.finished_at or None, p.rss_bytes, p.cpu_seconds, static,
        dict(p.requests) if static else NO_REQUESTS, p.priority, p.qos_class,
    ))


_new_tuple = tuple.__new__


def _same_report(a: agent_pb2.PodStatus, b: agent_pb2.PodStatus) -> bool:
    """Whether two reports of a pod say the same of what the controller acts on (its usage figures, which
    change at every heartbeat, apart; a container's pid changes only with its restart count)."""
    return (a.phase == b.phase and a.ready == b.ready and a.reason == b.reason and a.message == b.message
            and a.started_at == b.started_at and a.finished_at == b.finished_at and a.qos_class == b.qos_class
            and a.static == b.static and a.priority == b.priority and a.name == b.name
            and a.namespace == b.namespace and a.workload == b.workload and a.containers == b.containers)


def _heartbeat_pods(fleet: Fleet, session: _StreamSession, pods: Sequence[agent_pb2.PodStatus]) -> list[ReportedPod]:
    """The pods of a heartbeat to handle: those that say something new, or whose workload changed since.

    A heartbeat reports every pod its node runs, every few seconds, nearly
    always as the last one did; a large cluster's heartbeats would keep the
    controller busy reading that nothing happened.  A pod whose report is the
    same as in the stream's last heartbeat, checked then against the same
    workload object (model objects are immutable: a change to the workload
    is a new object), would be found as recorded again, so it is skipped.
    Pods the controller does not own (unknown, static) are always handled.

    The last heartbeat's report itself is kept, and compared only when the
    workload is the same object: a pod whose workload changed since (most
    pods of a busy cluster are seen once or twice, each time after a change)
    costs no comparison at all.
    """
    before = session.steady
    now: dict[str, tuple[agent_pb2.PodStatus, object]] = {}
    out: list[ReportedPod] = []
    for p in pods:
        uid = p.uid
        owner = fleet.pod_owner_state(uid)
        if owner is not None:
            hit = before.get(uid)
            now[uid] = (p, owner)
            if hit is not None and hit[1] is owner and _same_report(hit[0], p):
                continue
        out.append(reported_pod(p))
    session.steady = now  # the pods of this heartbeat only: gone pods are dropped
    return out


def _container(c: Container, pod_sc: SecurityContext | None = None) -> agent_pb2.Container:
    out = agent_pb2.Container(
        name=c.name, command=list(c.command), args=list(c.args),
        env=[agent_pb2.EnvVar(name=k, value=v) for k, v in c.env], working_dir=c.working_dir,
        requests=dict(c.requests), limits=dict(c.limits),
    )
    # The effective securityContext: the container's fields over the pod's (Kubernetes' merge rule).
    for attr in ("run_as_user", "run_as_group", "run_as_non_root", "allow_privilege_escalation"):
        value = getattr(c.security_context, attr, None)
        if value is None:
            value = getattr(pod_sc, attr, None)
        if value is not None:
            setattr(out, attr, value)
    p = c.readiness_probe
    if p is not None:
        out.readiness_probe.CopyFrom(agent_pb2.Probe(
            exec=list(p.exec_command), tcp_port=p.tcp_port or 0, http_get_path=p.http_path or "",
            http_port=p.http_port or 0, initial_delay_seconds=p.initial_delay_seconds, period_seconds=p.period_seconds,
            timeout_seconds=p.timeout_seconds, success_threshold=p.success_threshold,
            failure_threshold=p.failure_threshold))
    return out


def _pod_set_template(ps: PodSet) -> agent_pb2.PodSpec:
    """What every RunPod of this pod set carries whatever its workload; filled in per workload and pod."""
    containers = [_container(c, ps.security_context) for c in ps.containers]
    # What the downward API would tell a Kubernetes pod about itself; the
    # container's own env comes later and wins.  The workload's entries
    # (_NAMESPACE_ENV, _WORKLOAD_ENV) are filled in per workload, the pod's
    # name and index (_POD_NAME_ENV, _POD_INDEX_ENV) per pod.
    identity = [
        agent_pb2.EnvVar(name="SLUICEGATE_NAMESPACE"),
        agent_pb2.EnvVar(name="SLUICEGATE_WORKLOAD"),
        agent_pb2.EnvVar(name="SLUICEGATE_POD_SET", value=ps.name),
        agent_pb2.EnvVar(name="SLUICEGATE_POD_NAME"),
        agent_pb2.EnvVar(name="SLUICEGATE_POD_INDEX"),
    ]
    for c in containers:
        own = list(c.env)
        del c.env[:]
        c.env.extend(identity)
        c.env.extend(own)
    return agent_pb2.PodSpec(
        pod_set=ps.name,
        containers=containers,
        init_containers=[_container(c, ps.security_context) for c in ps.init_containers],
        restart_policy=ps.restart_policy,
        termination_grace_seconds=float(ps.termination_grace_period_seconds),
    )


def _pod_spec_template(wl: Workload, ps: PodSet, pod_set_template: agent_pb2.PodSpec,
                       into: agent_pb2.PodSpec | None = None) -> agent_pb2.PodSpec:
    """What every RunPod of this pod set of ``wl`` carries (``pod_set_template`` is ``_pod_set_template(ps)``);
    the pod's own fields are set on a copy (see _Templates.spec), or on ``into`` itself."""
    spec = agent_pb2.PodSpec() if into is None else into
    spec.CopyFrom(pod_set_template)
    spec.namespace = wl.namespace
    spec.workload = wl.name
    spec.workload_uid = wl.uid
    spec.priority = wl.priority
    spec.priority_class = wl.priority_class[1] if wl.priority_class else ""
    spec.labels.update({"sluicegate.io/workload": wl.name, "sluicegate.io/pod-set": ps.name, **dict(wl.labels)})
    job = job_of(wl)
    indexed = job is not None and job.indexed
    for c in spec.containers:
        env = c.env
        env[_NAMESPACE_ENV].value = wl.namespace
        env[_WORKLOAD_ENV].value = wl.name
        if indexed:
            # Kubernetes tells an Indexed Job's pods which completion they are (the last entry, per pod).
            env.append(agent_pb2.EnvVar(name="JOB_COMPLETION_INDEX", value=""))
    return spec


_NAMESPACE_ENV, _WORKLOAD_ENV, _POD_NAME_ENV, _POD_INDEX_ENV = 0, 1, 3, 4
# Pod sets whose template is kept: workloads of one shape share their pod
# sets (decode_workload decodes each distinct podSets once).
POD_SET_TEMPLATES = 256


class _Templates:
    """The PodSpec template of the pod set whose RunPods are being sent.

    A settlement or an admission sends every pod of a workload in a row (a
    TAS workload's hundreds to as many nodes), all alike but for the pod's
    own fields; the template is built once for them.  Keyed by the workload
    object itself: model objects are immutable, so the same object means the
    same spec.  The part that depends on the pod set alone is kept per pod
    set, so one-pod workloads of one shape do not each build their containers.
    """

    def __init__(self) -> None:
        self._key: tuple[Workload, PodSet] | None = None
        self._template = agent_pb2.PodSpec()
        self._indexed = False
        # id(pod set) -> (the pod set, kept so the id stays its own; its template).
        self._pod_sets: dict[int, tuple[PodSet, agent_pb2.PodSpec]] = {}

    def _pod_set(self, ps: PodSet) -> agent_pb2.PodSpec:
        hit = self._pod_sets.get(id(ps))
        if hit is not None and hit[0] is ps:
            return hit[1]
        template = _pod_set_template(ps)
        if len(self._pod_sets) >= POD_SET_TEMPLATES:
            del self._pod_sets[next(iter(self._pod_sets))]
        self._pod_sets[id(ps)] = (ps, template)
        return template

    def spec(
        self, wl: Workload, ps: PodSet, pod: PodRecord, into: agent_pb2.PodSpec | None = None
    ) -> agent_pb2.PodSpec:
        """The pod's PodSpec, written ``into`` a message's field where given (no copy of it into the message)."""
        key = self._key
        spec = agent_pb2.PodSpec() if into is None else into
        if key is None or key[0] is not wl or key[1] is not ps:
            job = job_of(wl)
            self._indexed = job is not None and job.indexed
            if ps.count == 1:
                # The workload's one pod of this pod set (usually): built in place, no template kept.
                _pod_spec_template(wl, ps, self._pod_set(ps), into=spec)
                self._key = None
            else:
                self._template = _pod_spec_template(wl, ps, self._pod_set(ps))
                self._key = (wl, ps)
                spec.CopyFrom(self._template)
        else:
            spec.CopyFrom(self._template)
        spec.uid = pod.uid
        spec.name = pod.name
        spec.index = pod.index
        spec.requests.update(pod.requests)
        index = str(pod.index)
        for c in spec.containers:
            c.env[_POD_NAME_ENV].value = pod.name
            c.env[_POD_INDEX_ENV].value = index
            if self._indexed:
                c.env[len(c.env) - 1].value = index
        return spec


_templates = _Templates()


def command_to_proto(cmd: Command) -> agent_pb2.ControllerMessage:
    # By the command's exact type (the commands are final dataclasses), and filled in place: building
    # each part as a message of its own and passing it in copies it, three times the cost of a ForgetPod.
    msg = agent_pb2.ControllerMessage()
    if type(cmd) is ForgetPodCommand:
        forget = msg.forget_pod
        forget.uid = cmd.uid
        if cmd.purge:
            forget.purge = True
    elif type(cmd) is RunPodCommand:
        _templates.spec(cmd.workload, cmd.pod_set, cmd.pod, into=msg.run_pod.pod)
    elif type(cmd) is StopPodCommand:
        stop = msg.stop_pod
        stop.uid, stop.grace_seconds, stop.reason, stop.message = cmd.uid, cmd.grace_seconds, cmd.reason, cmd.message
    elif type(cmd) is LogRequestCommand:
        req = msg.log_request
        req.request_id, req.pod_uid, req.container, req.follow = cmd.request_id, cmd.pod_uid, cmd.container, cmd.follow
    elif type(cmd) is CancelLogsCommand:
        msg.cancel_logs.request_id = cmd.request_id
    else:
        raise TypeError(f"unknown command {cmd!r}")
    return msg


# ControllerMessage's keys: its batch (field 7, length-delimited) and its epoch (field 9, a varint).
# The epoch is the last field, so appending it to a message's bytes writes what the generated
# serializer would write for the message with its epoch set.
_BATCH_TAG = b"\x3a"
_EPOCH_TAG = b"\x48"


# ControllerMessage.forget_pod (field 6, length-delimited) and ForgetPod.uid (field 1, length-delimited).
_FORGET_POD_TAG = b"\x32"
_FORGET_UID_TAG = b"\x0a"


def forget_bytes(uid: str) -> bytes:
    """``command_to_proto(ForgetPodCommand(uid)).SerializeToString()``, written directly: one goes out for
    every pod that ends, and the generated message took 1.5 us to make and serialize, this 0.4."""
    raw = uid.encode()
    n = len(raw)
    inner = (_FORGET_UID_TAG + (_VARINTS[n] if n < 128 else varint(n)) + raw) if n else b""
    n = len(inner)
    return _FORGET_POD_TAG + (_VARINTS[n] if n < 128 else varint(n)) + inner


# The varints of the lengths under 128 (one byte each), looked up rather than encoded.
_VARINTS = [bytes((n,)) for n in range(128)]


def _epoch_suffix(epoch: int) -> bytes:
    """What a message's bytes end with for ``epoch`` (nothing for 0, proto3's default)."""
    return _EPOCH_TAG + varint(epoch) if epoch else b""


AGENT_LINK = "sluicegate.v1.AgentLink"


def add_agent_link_servicer(servicer: AgentLinkServicer, server: grpc.aio.Server) -> None:
    """Register the AgentLink service as the generated code does, except that Connect's messages
    are handed to the transport as the bytes the writer joined: each command is serialized once,
    when queued, and a batch is its messages' bytes framed (no ByteSize, copy into a batch message
    and serialization again per message)."""
    add_with_raw_responses(agent_pb2_grpc.add_AgentLinkServicer_to_server, servicer, server, AGENT_LINK, "Connect")
    servicer.raw = True


class _StreamSession:
    """Commands for one agent, queued (each serialized once, as it is queued) until the stream writer sends them."""

    def __init__(self, node: str) -> None:
        self.node = node
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize=SEND_BUFFER)
        self.broken = False
        # Set when the controller ends the stream on purpose (the node was revoked): the status the agent gets.
        self.ended: tuple[grpc.StatusCode, str] | None = None
        # ForgetPods held back (FORGET_DELAY), and the timer that sends them.
        self._later: list[bytes] = []
        self._later_timer: asyncio.TimerHandle | None = None
        # Backpressure (SEND_HIGH_WATER): whether the stream is behind, and who is told when that changes.
        self.behind = False
        self.on_behind: Callable[[bool], None] | None = None
        # Each pod of the last heartbeat: its report and the workload it was checked against (see _heartbeat_pods).
        self.steady: dict[str, tuple[agent_pb2.PodStatus, object]] = {}

    def send(self, command: Command) -> None:
        if self.broken:
            return
        if type(command) is ForgetPodCommand and not command.purge:
            self._later.append(forget_bytes(command.uid))
            if self._later_timer is None:
                self._later_timer = asyncio.get_running_loop().call_later(FORGET_DELAY, self.send_held)
            return
        msg = command_to_proto(command).SerializeToString()
        # Held messages go first: the agent sees commands in the order given.
        self.send_held()
        self._put(msg)

    def ack(self, seq: int) -> None:
        """The agent's heartbeat ``seq`` was processed: its self-fencing clock restarts from when it sent it."""
        self.send_held()
        self._put(agent_pb2.ControllerMessage(heartbeat_ack=agent_pb2.HeartbeatAck(seq=seq)).SerializeToString())

    def supersede(self, reason: str) -> None:
        self.end(grpc.StatusCode.ABORTED, reason)

    def send_held(self) -> None:
        """Queue the held-back ForgetPods now."""
        for msg in self._take_held():
            self._put(msg)

    def end(self, code: grpc.StatusCode, message: str) -> None:
        """End the stream from the controller's side with this status; nothing more is sent."""
        if self.ended is None:
            self.ended = (code, message)
            self._take_held()
            self.broken = True
            while not self.queue.empty():
                self.queue.get_nowait()
            self.queue.put_nowait(None)

    def step_down(self, message: str) -> None:
        """The controller no longer leads: the agent reconnects and finds the new leader."""
        self.end(grpc.StatusCode.UNAVAILABLE, message)

    def revoke(self, message: str) -> None:
        self.end(grpc.StatusCode.UNAUTHENTICATED, message)

    def close(self) -> None:
        """The stream is over: held messages are dropped with it."""
        self._take_held()

    def sent(self) -> None:
        """The stream took a message off the queue: a stream behind may have caught up."""
        if self.behind and self.queue.qsize() <= SEND_LOW_WATER:
            self._set_behind(False)

    def _set_behind(self, behind: bool) -> None:
        self.behind = behind
        if self.on_behind is not None:
            self.on_behind(behind)

    def _take_held(self) -> list[bytes]:
        if self._later_timer is not None:
            self._later_timer.cancel()
            self._later_timer = None
        held, self._later = self._later, []
        return held

    def _put(self, msg: bytes) -> None:
        if self.broken:
            return
        try:
            self.queue.put_nowait(msg)
            if not self.behind and self.queue.qsize() >= SEND_HIGH_WATER:
                self._set_behind(True)
        except asyncio.QueueFull:
            # The agent stopped reading: drop the stream; it reconnects and
            # re-registers, and the controller resends what it expects.
            log.error("node %s: %d messages unsent; closing its stream", self.node, SEND_BUFFER)
            self.broken = True
            while not self.queue.empty():
                self.queue.get_nowait()
            self.queue.put_nowait(None)


class AgentLinkServicer(agent_pb2_grpc.AgentLinkServicer):
    def __init__(
        self,
        manager: Manager,
        *,
        heartbeat_interval: float,
        authenticator: Authenticator | None = None,
        epoch: int = 0,
    ) -> None:
        self.m = manager
        # The leader's fencing epoch, stamped on every message (0: no leader election).
        self.epoch = epoch
        self.heartbeat_interval = heartbeat_interval
        self.auth: Authenticator = authenticator or OpenAuthenticator()
        # Set by add_agent_link_servicer: Connect yields bytes (else messages, for the generated serializer).
        self.raw = False

    def _node_identity(self, context: Context) -> tuple[str | None, tuple[grpc.StatusCode, str] | None]:
        """(the node the caller is, or None where authentication is off; or the status refusing it)."""
        try:
            p = self.auth.authenticate(context.auth_context(), tuple(context.invocation_metadata() or ()))
        except Unauthenticated as exc:
            return None, (grpc.StatusCode.UNAUTHENTICATED, str(exc))
        if p.method == "none":
            return None, None
        if p.node is None:
            return None, (
                grpc.StatusCode.PERMISSION_DENIED,
                f"user {p.user!r} is not a node: only an agent with a node certificate may connect "
                f"(join it with 'sluicegate-agent join')",
            )
        return p.node, None

    def _registered(self, name: str) -> agent_pb2.ControllerMessage:
        fleet = self.m.fleet
        return agent_pb2.ControllerMessage(
            registered=agent_pb2.Registered(
                node_name=name,
                heartbeat_interval_seconds=self.heartbeat_interval,
                node_timeout_seconds=fleet.node_timeout,
                fencing_grace_seconds=fleet.fencing_grace,
                self_fencing=fleet.self_fencing,
                epoch=self.epoch,
            ),
            epoch=self.epoch,
        )

    async def Connect(
        self, request_iterator: AsyncIterator[agent_pb2.AgentMessage], context: Context
    ) -> AsyncIterator[agent_pb2.ControllerMessage | bytes]:
        node, refused = self._node_identity(context)
        if refused is not None:
            log.warning("agent stream from %s refused: %s", context.peer(), refused[1])
            # Its Register is read first: a status sent while the client is still writing its first
            # message reaches grpc's asyncio client as INTERNAL instead of this status (grpc/grpc#36066),
            # and a revoked agent would not learn why.  Bounded, for a peer that sends nothing.
            try:
                async with asyncio.timeout(REFUSAL_READ_SECONDS):
                    await anext(aiter(request_iterator), None)
            except (TimeoutError, grpc.RpcError):
                pass
            await context.abort(*refused)
            return
        first = await anext(aiter(request_iterator), None)
        if first is None or first.WhichOneof("kind") != "register":
            code, msg = status_for(InvalidArgument("register", "the first message on an agent stream must be Register"))
            await context.abort(code, msg)
            return
        info = first.register.node
        if not info.name:
            code, msg = status_for(InvalidArgument("register.node.name", "must not be empty"))
            await context.abort(code, msg)
            return
        if node is not None and info.name != node:
            # The name comes from the certificate, never from what the agent claims.
            log.warning("node %s tried to register as node %s (peer %s); refused", node, info.name, context.peer())
            await context.abort(
                grpc.StatusCode.PERMISSION_DENIED,
                f"register.node.name: this agent's certificate is for node {node!r}; "
                f"it may not register as {info.name!r}",
            )
            return
        try:
            taints = read_taint_list([{"key": t.key, "value": t.value, "effect": t.effect} for t in info.taints],
                                     where="register.node.taints")
        except ValueError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
            return
        session = _StreamSession(info.name)
        fleet = self.m.fleet
        session.on_behind = lambda behind: fleet.stream_behind(info.name, session, behind, session.queue.qsize())
        # Registered before the agent hears so: whatever it does on hearing it (a client reading the
        # node list, its first reports) finds the node.  What registering queues for it (stops of
        # pods the controller does not know) follows the Registered message on the stream.
        self.m.fleet.register(
            name=info.name,
            labels=dict(info.labels),
            taints=taints,
            capacity=dict(info.capacity),
            allocatable=dict(info.allocatable),
            boot_id=info.boot_id,
            agent_version=info.agent_version,
            health_address=info.health_address,
            pods=[reported_pod(p) for p in first.register.pods],
            session=session,
        )
        registered = self._registered(info.name)
        yield registered.SerializeToString() if self.raw else registered

        async def reader() -> None:
            async for received in request_iterator:
                # A batch of reports is one commit: nothing they cause leaves the
                # process (commands, watch events are only queued) before it.
                try:
                    with self.m.write_group():
                        for msg in unbatched(received, lambda m: m.batch.messages):
                            handle(msg)
                except StoreError:
                    # The store refuses writes (logged once by the manager): the
                    # reports that were not stored changed nothing, and the
                    # agent's next heartbeat reports its pods again.
                    pass
            await session.queue.put(None)

        node_name = info.name

        def handle(msg: agent_pb2.AgentMessage) -> None:
            kind = msg.WhichOneof("kind")
            # Pod reports first: nearly every message is one.  A report on a stream that a newer one
            # took the node over from is stale (see Fleet.current).
            if kind == "pod_status":
                if fleet.current(node_name, session):
                    fleet.report_pods(node_name, (reported_pod(msg.pod_status),), periodic=False)
            elif kind == "heartbeat":
                if not fleet.current(node_name, session):
                    return
                hb = msg.heartbeat
                u = hb.usage
                fleet.heartbeat(
                    node_name,
                    NodeUsage(u.memory_total, u.memory_available, u.cpu_usage_cores, u.nodefs_available, u.observed_at),
                    list(u.conditions),
                    (),
                )
                # Acknowledged once its pods' reports are handled (with this turn's others).
                seq = hb.seq
                fleet.report_pods(node_name, _heartbeat_pods(fleet, session, hb.pods), lambda: session.ack(seq))
            elif kind == "log_chunk":
                ch = msg.log_chunk
                fleet.log_chunk(node_name, ch.request_id, ch.container, ch.data, ch.eof, ch.error)
            elif kind == "register":
                log.warning("node %s sent Register twice on one stream; ignoring the second", node_name)

        read_task = asyncio.create_task(reader(), name=f"agent-reader-{info.name}")
        try:
            # The queue drained in one synchronous step per message sent (see drain_encoded).
            suffix = _epoch_suffix(self.epoch)
            raw = self.raw
            queue = session.queue
            carried: bytes | None = None
            while True:
                head = carried if carried is not None else await queue.get()
                if head is None:
                    break
                out, carried, closing = drain_encoded(head, queue, batch_tag=_BATCH_TAG)
                if suffix:
                    out += suffix
                yield out if raw else agent_pb2.ControllerMessage.FromString(out)
                session.sent()
                if closing:
                    break
        finally:
            read_task.cancel()
            session.close()
            self.m.fleet.disconnected(info.name, session)
        if session.ended is not None:
            await context.abort(*session.ended)


class NodesServicer(agent_pb2_grpc.NodesServicer):
    def __init__(self, manager: Manager, gate: Gate | None = None) -> None:
        self.m = manager
        self.gate = gate or Gate()

    @handled
    async def List(self, request: agent_pb2.ListNodesRequest, context: Context) -> agent_pb2.ListNodesResponse:
        self.gate.authorize(self.gate.authenticate(context), "list", "Node", "", "", context)
        out = []
        for n in sorted(self.m.fleet.registry.nodes.values(), key=lambda n: n.name):
            u = n.usage
            out.append(
                agent_pb2.NodeObject(
                    node=agent_pb2.NodeInfo(
                        name=n.name,
                        labels=n.labels,
                        taints=[agent_pb2.Taint(key=t.key, value=t.value, effect=t.effect) for t in n.taints],
                        capacity=n.capacity,
                        allocatable=n.allocatable,
                        agent_version=n.agent_version,
                        boot_id=n.boot_id,
                        health_address=n.health_address,
                    ),
                    ready=n.ready,
                    not_ready_reason=n.not_ready_reason,
                    last_heartbeat=n.last_heartbeat,
                    # Each pod's requests are within Kubernetes' bound; their sum must still fit int64.
                    requested={r: min(q, INT64_MAX) for r, q in n.requested().items()},
                    usage=agent_pb2.NodeUsage(
                        memory_total=u.memory_total,
                        memory_available=u.memory_available,
                        cpu_usage_cores=u.cpu_usage_cores,
                        nodefs_available=u.nodefs_available,
                        conditions=list(n.shown_conditions),
                        observed_at=u.observed_at,
                    ),
                    pods=len(n.pods) + len(n.static_pods),
                )
            )
        return agent_pb2.ListNodesResponse(nodes=out)

    async def Logs(self, request: agent_pb2.LogsRequest, context: Context) -> AsyncIterator[agent_pb2.LogLine]:
        try:
            ns = request.namespace or "default"
            p = self.gate.authenticate(context)
            self.gate.authorize(p, "logs", "Workload", ns, request.workload, context)
            authorizer = self.gate.authorizer
            policy = authorizer.policy
            async for pod, container, data in self.m.fleet.logs(
                ns, request.workload, request.pod, request.container, request.follow
            ):
                if authorizer.policy is not policy:  # reloaded while following: ask again
                    policy = authorizer.policy
                    self.gate.authorize(p, "logs", "Workload", ns, request.workload, context)
                yield agent_pb2.LogLine(pod=pod, container=container, data=data)
        except Exception as exc:  # mapped once, here
            if isinstance(exc, asyncio.CancelledError):
                raise
            code, msg = status_for(exc)
            await context.abort(code, msg)
