"""The agent's view of its node: what runs here, node admission, and status reports.

Sits between the controller link and the process runtime.  The controller's
pod metadata (workload, priority, requests) is kept in the runtime's
checkpoint, as the node's part of the pod's one record there (the runtime's
part beside it, in the same writes; a rejected pod's record has the node's
part alone), and is on disk before a pod starts, so a restarted agent
reports its pods exactly as before.

Node admission follows the kubelet: a pod must fit the node's allocatable
minus the requests of pods already admitted; a critical pod that does not
fit makes room by stopping the pods :mod:`sluicegate.agent.policy` chooses.

Before admission, the pod's user is resolved from the agent's own
``podUsers`` policy (:mod:`sluicegate.security.podsecurity`); a pod whose
securityContext breaks it is Failed with reason CreateContainerConfigError
and a message naming the field, and nothing of it starts.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Protocol

from sluicegate.agent.checkpoint import CheckpointError
from sluicegate.agent.devices import GPU_RESOURCE, Devices, DeviceShortage
from sluicegate.agent.monitor import Monitor, NodeReading
from sluicegate.agent.pod import DEFAULT_POD_GRACE_SECONDS, Pod
from sluicegate.agent.policy import (
    ContainerResources,
    PodInfo,
    QOSClass,
    admit_pod,
    effective_requests,
    fit,
    pod_qos,
)
from sluicegate.agent.probes import ProbeSpec, ReadinessProbes
from sluicegate.agent.runtime import (
    DEFAULT_PATH,
    PodNotFoundError,
    PodPhase,
    PodRuntime,
    PodRuntimeError,
    PodStatus,
    Reason,
    RunAs,
)
from sluicegate.security.podsecurity import PodSecurityError, PodUserPolicies, resolve_pod_user

log = logging.getLogger(__name__)

# Where agents before November 2026 kept the metadata; read once by an
# upgraded agent (then written into the checkpoint and removed).
META_FILE = "pods-meta.json"
# How long a metadata change nothing waits for (a forgotten pod, a reason
# set before a stop) may stay unwritten; see "Metadata writes are batched".
META_BATCH_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class PodMeta:
    uid: str
    name: str
    namespace: str
    workload: str
    pod_set: str
    index: int
    priority: int
    priority_class: str
    requests: Mapping[str, int]
    qos: str
    static: bool
    admitted_at: float
    grace_seconds: float
    # Set when the agent itself ended the pod (rejected, preempted, evicted).
    reason: str = ""
    message: str = ""
    rejected: bool = False
    containers: tuple[str, ...] = ()
    # The controller has recorded the pod's end; only its logs are kept.
    forgotten: bool = False
    # Static pods: the manifest file the pod came from (see sluicegate.agent.static).
    source: str = ""
    # Readiness probes by container name (ProbeSpec.to_json), restarted after an agent restart.
    probes: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # The user the pod runs as (None: the agent's own); held until the pod is forgotten.
    run_as_uid: int | None = None
    # The devices the pod holds, by resource (GPU UUIDs, device paths); see sluicegate.agent.devices.
    devices: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ContainerReport:
    name: str
    state: str
    exit_code: int
    reason: str
    restart_count: int
    pid: int
    ready: bool


@dataclass(frozen=True, slots=True)
class PodReport:
    uid: str
    name: str
    namespace: str
    workload: str
    phase: str
    reason: str
    message: str
    containers: tuple[ContainerReport, ...]
    ready: bool
    started_at: float
    finished_at: float
    rss_bytes: int
    cpu_seconds: float
    static: bool
    requests: Mapping[str, int]
    priority: int
    qos_class: str
    devices: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # The pod's GPUs now (it holds them alone): framebuffer bytes in use, mean busy percent.
    gpu_memory_bytes: int = 0
    gpu_utilization_percent: float = 0.0


_META_FIELDS = tuple(f.name for f in fields(PodMeta))


def _encode_meta(m: PodMeta) -> str:
    # The same JSON asdict() gives (tuples become lists), without its deep copies.
    return json.dumps({name: getattr(m, name) for name in _META_FIELDS}, default=dict)


def _qos_and_requests(pod: Pod) -> tuple[QOSClass, dict[str, int]]:
    containers = [ContainerResources(requests=dict(c.requests), limits=dict(c.limits)) for c in pod.containers]
    return pod_qos(containers=containers), effective_requests(containers=containers)


# The kubelet's reason for a pod whose security settings cannot be honoured.
SECURITY_REJECTED = "CreateContainerConfigError"
# The kubelet's reason for a pod its device manager cannot give devices to.
DEVICES_REJECTED = "UnexpectedAdmissionError"


class NodeObserver(Protocol):
    """Told of evictions, critical-pod preemptions and pod starts (the agent's metrics count them)."""

    def evicted(self, signal: str) -> None: ...

    def preempted(self, signal: str) -> None: ...

    def pod_started(self, seconds: float) -> None: ...


class AgentNode:
    def __init__(
        self,
        *,
        name: str,
        data_dir: Path,
        runtime: PodRuntime,
        monitor: Monitor,
        capacity: Mapping[str, int],
        allocatable: Mapping[str, int],
        clock: Any,
        pod_users: PodUserPolicies | None = None,
        devices: Devices | None = None,
    ) -> None:
        self.name = name
        # GPUs and declared devices (None: none); their resources are in capacity and allocatable.
        self.devices = devices
        # Who pods run as, by namespace (the agent's own check; the controller checks its policy at creation).
        self.pod_users = pod_users if pod_users is not None else PodUserPolicies()
        # Per-pod uid ranges: where the next search starts (see _free_uid).
        self._uid_cursor: dict[tuple[int, int], int] = {}
        self.data_dir = Path(data_dir)
        self.runtime = runtime
        self.monitor = monitor
        self.capacity = dict(capacity)
        self.allocatable = dict(allocatable)
        self.clock = clock
        self.meta: dict[str, PodMeta] = {}
        # Each record's PodInfo, while the record is current (see _pod_info).
        self._infos: dict[str, tuple[PodMeta, PodInfo]] = {}
        self.conditions: tuple[str, ...] = ()
        self.evictions = 0
        # Told of evictions, preemptions and pod starts (metrics); None for none.
        self.observer: NodeObserver | None = None
        # Called with a pod's uid when it is admitted with victims to stop,
        # before any of them is stopped: the link reports the pod at once, so
        # the controller counts a critical pod's requests before it learns
        # that its victims ended, and does not place them straight back into
        # the room just made.  A pod admitted without victims starts at once
        # and is reported by the runtime's events.
        self.on_admitted: Callable[[str], None] | None = None
        # Called with a pod's uid when a container's readiness changes.
        self.on_readiness: Callable[[str], None] | None = None
        self.probes = ReadinessProbes(self._readiness_changed)
        self._lock = asyncio.Lock()
        # Finished pods the runtime is dropping right now (see forget).
        self._forgetting: set[str] = set()
        # Pods found in our cgroups with no checkpoint record (killed at start-up), reported
        # Failed/Orphaned until the controller forgets them.  Kept in memory only: after
        # another restart the controller finds them missing, which it treats the same way.
        self.orphans: dict[str, PodReport] = {}
        self._load_meta()

    def _readiness_changed(self, uid: str) -> None:
        if self.on_readiness is not None:
            self.on_readiness(uid)

    def start_probes(self, uid: str) -> None:
        """(Re)start the readiness probes of a running pod (after start, or after adoption)."""
        m = self.meta.get(uid)
        st = self.runtime.status(uid)
        if m is None or not m.probes or st is None or st.finished:
            return
        # Exec probes run as the pod's user, from its HOME.
        prefix = self.runtime.privilege_argv(uid)
        home = str(self.runtime.home(uid))
        for container, spec in m.probes.items():
            self.probes.start(uid, container, ProbeSpec.from_json(spec), prefix=prefix, cwd=home,
                              env={"PATH": DEFAULT_PATH, "HOME": home})

    # ------------------------------------------------------------ metadata

    def _load_meta(self) -> None:
        """Read the metadata from the adopted checkpoint, or once from an older agent's pods-meta.json."""
        records: list[Any] | tuple[Any, ...] | None = self.runtime.adopted_node_records
        legacy = self.data_dir / META_FILE
        imported = records is None and legacy.exists()
        try:
            if imported:
                records = json.loads(legacy.read_text())
            if records:
                self.meta = {m["uid"]: PodMeta(**{
                    **m, "containers": tuple(m.get("containers", ())),
                    "devices": {r: tuple(ids) for r, ids in m.get("devices", {}).items()}}) for m in records}
        except (OSError, ValueError, TypeError, KeyError) as exc:
            log.error("cannot read %s (%s); pods will be reported without controller metadata",
                      legacy if imported else self.runtime.checkpoint_path, exc)
            self.meta = {}
        encoded = {uid: _encode_meta(m) for uid, m in self.meta.items()}
        if not imported:
            self.runtime.set_node_records(encoded, write=False)
            return
        try:
            self.runtime.set_node_records(encoded, write=True)
            legacy.unlink()
        except (CheckpointError, OSError) as exc:
            log.error("cannot move %s into the checkpoint (%s); it is read again at the next start", legacy, exc)

    # Metadata writes are batched with the runtime's checkpoint writes.  A
    # change hands the runtime the pod's record (encoded only when written);
    # it is written with the runtime's next write, so it is never behind
    # the checkpoint, a status the runtime publishes (an eviction reason, a
    # finished pod) is covered by the same write, and a pod's process is
    # never spawned before its metadata is on disk (the runtime writes
    # before every spawn).  Where a report follows in the same step -- a
    # rejection, a critical pod's admission -- it is written at once
    # (_flush_meta).  Changes nothing waits for (forgotten pods) are written
    # within META_BATCH_SECONDS if no other write comes first.

    def _put_meta(self, m: PodMeta) -> None:
        self.meta[m.uid] = m
        self.runtime.put_node_record(m.uid, lambda: _encode_meta(m), within=META_BATCH_SECONDS)

    def _drop_meta(self, uid: str) -> PodMeta | None:
        m = self.meta.pop(uid, None)
        self._infos.pop(uid, None)
        if m is not None:
            self.runtime.drop_node_record(uid, within=META_BATCH_SECONDS)
        return m

    def _flush_meta(self) -> None:
        """Write pending metadata (and the runtime's pending changes) now: atomic, not fsynced, like the checkpoint."""
        self.runtime.write_now()

    def set_reason(self, uid: str, reason: str, message: str) -> None:
        m = self.meta.get(uid)
        if m is not None:
            self._put_meta(replace(m, reason=reason, message=message))

    # ------------------------------------------------------------ admission

    def _run_as(self, wish: Pod) -> RunAs | None:
        """The pod's user by this agent's policy; PodSecurityError naming the field otherwise."""
        policy = self.pod_users.for_namespace(wish.namespace)
        user = resolve_pod_user(
            namespace=wish.namespace, policy=policy, pod_context=None, pod_path="spec.securityContext",
            containers=[(f"spec.containers[{i}].securityContext", c.security) for i, c in enumerate(wish.containers)],
        )
        if os.geteuid() != 0:
            # An unprivileged agent cannot switch users: its pods run as it does.
            return None
        uid = user.uid
        if user.allocate and policy.uid_range is not None:
            uid = self._free_uid(policy.uid_range, wish.namespace)
        return RunAs(uid=uid, gid=user.gid, no_new_privs=user.no_new_privs)

    def _free_uid(self, uid_range: tuple[int, int], namespace: str) -> int:
        """A uid of the range no pod here holds (a pod holds its uid until it is forgotten: its HOME is there).

        Taken round-robin from after the last one given, so a uid is reused as late as the range allows.
        """
        held = {m.run_as_uid for m in self.meta.values() if m.run_as_uid is not None and not m.forgotten}
        low, high = uid_range
        start = self._uid_cursor.get(uid_range, low)
        size = high - low + 1
        for step in range(size):
            uid = low + (start - low + step) % size
            if uid not in held:
                self._uid_cursor[uid_range] = uid + 1 if uid < high else low
                return uid
        raise PodSecurityError("spec.securityContext.runAsUser", f"every uid of namespace {namespace}'s uidRange "
                                                                 f"{low}-{high} is held by a pod on this node")

    def admitted_pods(self) -> list[PodInfo]:
        """Pods that hold node resources: everything not finished."""
        out = []
        for m in self.meta.values():
            if m.rejected or m.forgotten or m.uid in self._forgetting:
                continue
            st = self.runtime.status(m.uid)
            if st is not None and st.finished:
                continue
            out.append(self._pod_info(m))
        return out

    def held_devices(self, *, besides: frozenset[str] = frozenset()) -> dict[str, set[str]]:
        """The device ids admitted pods hold, by resource (``besides``: pods not to count)."""
        held: dict[str, set[str]] = {}
        for pod in self.admitted_pods():
            m = self.meta[pod.uid]
            if pod.uid in besides:
                continue
            for resource, ids in m.devices.items():
                held.setdefault(resource, set()).update(ids)
        return held

    def devices_changed(self) -> None:
        """Device health changed: allocatable counts the healthy devices now (the caller reports it)."""
        if self.devices is None:
            return
        self.capacity.update(self.devices.capacity())
        self.allocatable.update(self.devices.allocatable())

    def _pod_info(self, m: PodMeta) -> PodInfo:
        # Kept per record: every admission reads every admitted pod's, and a record never changes in place.
        cached = self._infos.get(m.uid)
        if cached is not None and cached[0] is m:
            return cached[1]
        info = PodInfo(
            uid=m.uid, namespace=m.namespace, name=m.name, priority=m.priority, qos=QOSClass(m.qos),
            requests=m.requests, is_static=m.static, is_mirror=False, admitted_at=m.admitted_at,
        )
        if m.uid in self.meta:
            self._infos[m.uid] = (m, info)
        return info

    def _reject(self, meta: PodMeta, reason: str, message: str) -> bool:
        """Record the pod rejected (holding no user) and write it at once: it is reported as soon as we return."""
        self._put_meta(replace(meta, reason=reason, message=message, rejected=True, run_as_uid=None))
        self._flush_meta()
        return False

    async def run_pod(self, wish: Pod) -> bool:
        """Admit and start a pod; a pod that does not fit is reported Failed with the kubelet's reason.

        True when the runtime took the pod: its statuses then arrive on the
        runtime's events.  False when the caller must report the outcome
        itself: rejected, failed to start, or already known here.
        """
        received = time.monotonic()
        async with self._lock:
            if wish.uid in self.meta:
                log.info("pod %s (%s) is already known here; not starting it again", wish.name, wish.uid)
                return False
            qos, requests = _qos_and_requests(wish)
            # A pod that names no grace gets the API's default (the controller always names one).
            grace = (wish.termination_grace_seconds if wish.termination_grace_seconds is not None
                     else DEFAULT_POD_GRACE_SECONDS)
            refused: PodSecurityError | None = None
            try:
                run_as = self._run_as(wish)
            except PodSecurityError as exc:
                run_as, refused = None, exc
            # The record as admitted (a rejected pod's holds no user: see the rejections below).
            meta = PodMeta(
                uid=wish.uid, name=wish.name, namespace=wish.namespace, workload=wish.workload, pod_set=wish.pod_set,
                index=wish.index, priority=wish.priority, priority_class=wish.priority_class, requests=requests,
                qos=qos.value, static=wish.static, admitted_at=self.clock(), grace_seconds=grace,
                containers=tuple(c.name for c in wish.containers), source=wish.source,
                run_as_uid=run_as.uid if run_as is not None else None,
            )
            if refused is not None:
                log.warning("pod %s/%s refused: %s", wish.namespace, wish.name, refused)
                return self._reject(meta, SECURITY_REJECTED, str(refused))
            running = self.admitted_pods()
            decision = admit_pod(pod=self._pod_info(meta), allocatable=self.allocatable, running=running)
            # The kubelet labels each preemption with the first resource the critical pod lacked.
            short = fit(allocatable=self.allocatable, admitted=running, pod=self._pod_info(meta)) \
                if decision.victims else []
            if not decision.admitted:
                log.warning("pod %s rejected: %s: %s", wish.name, decision.reason, decision.message)
                return self._reject(meta, decision.reason, decision.message)
            victims = list(decision.victims)
            assigned: dict[str, tuple[str, ...]] = {}
            if self.devices is not None:
                try:
                    assigned = self.devices.assign(
                        requests, self.held_devices(besides=frozenset(v.uid for v in victims)))
                except DeviceShortage as exc:
                    log.warning("pod %s rejected: %s: %s", wish.name, DEVICES_REJECTED, exc)
                    return self._reject(meta, DEVICES_REJECTED, str(exc))
            self._put_meta(replace(meta, devices=assigned) if assigned else meta)
        if victims:
            self._flush_meta()  # reported at once, next
            if self.on_admitted is not None:
                self.on_admitted(wish.uid)
            log.warning("critical pod %s/%s does not fit: stopping %s", wish.namespace, wish.name,
                        ", ".join(v.key for v in victims))
        for v in victims:
            vm = self.meta.get(v.uid)
            msg = f"Preempted in order to admit critical pod {wish.namespace}/{wish.name}"
            log.warning("stopping pod %s/%s to admit critical pod %s", v.namespace, v.name, wish.name)
            self.set_reason(v.uid, "Preempting", msg)
            self.evictions += 1
            if self.observer is not None:
                self.observer.preempted(short[0].resource if short else "")
            try:
                await self.runtime.stop(v.uid, grace_seconds=vm.grace_seconds if vm else None,
                                        reason=Reason.EVICTED, message=msg)
            except PodRuntimeError as exc:
                log.error("could not stop %s to admit %s: %s", v.name, wish.name, exc)
        # The one copy a pod gets on its way to the runtime: the user it runs as, the grace it was admitted with.
        runnable = replace(wish, run_as=run_as, termination_grace_seconds=grace)
        if self.devices is not None:
            # Every pod of a node with devices is denied the device files it was not given (cgroup v1).
            extra = self.devices.env(assigned)
            deny = self.devices.deny_rules(assigned)
            if extra or deny:
                runnable = replace(runnable, containers=tuple(replace(c, env=c.env + extra, device_deny=deny)
                                                              for c in wish.containers))
        probes = {c.name: c.readiness_probe.to_json() for c in wish.containers if c.readiness_probe is not None}
        if probes:
            self._put_meta(replace(self.meta[wish.uid], probes=probes))
        # The runtime writes the checkpoint, this metadata included, before it
        # spawns anything: a restarted agent reports the pod exactly as we would.
        try:
            await self.runtime.run(runnable)
        except PodRuntimeError as exc:
            log.error("pod %s could not start: %s", wish.name, exc)
            self._put_meta(replace(self.meta[wish.uid], reason="StartError", message=str(exc), rejected=True))
            self._flush_meta()  # reported as soon as we return
            return False
        if self.observer is not None:
            self.observer.pod_started(time.monotonic() - received)
        self.start_probes(wish.uid)
        return True

    def count_eviction(self, signal: str) -> None:
        """A pod was evicted for node pressure on ``signal`` (memory.available, nodefs.available)."""
        self.evictions += 1
        if self.observer is not None:
            self.observer.evicted(signal)

    async def stop_pod(self, uid: str, *, grace_seconds: float | None, reason: str, message: str) -> None:
        st = self.runtime.status(uid)
        if st is None or st.finished:
            return
        if reason in ("Evicted", "Preempting", "NodeFenced"):
            self.set_reason(uid, reason, message)
        try:
            await self.runtime.stop(uid, grace_seconds=grace_seconds,
                                    reason=Reason.EVICTED if reason == "Evicted" else Reason.KILLED, message=message)
        except PodRuntimeError as exc:
            log.error("stopping pod %s: %s", uid, exc)

    def add_orphan(self, uid: str, message: str) -> None:
        """A pod whose processes ran in our cgroups without a checkpoint record, and were killed."""
        now = self.clock()
        # Metadata without a runtime record would read as admitted and not started yet.
        m = self._drop_meta(uid)
        self.orphans[uid] = PodReport(uid, m.name if m else "", m.namespace if m else "", m.workload if m else "",
                                      "Failed", "Orphaned", message, (), False, 0.0, now, 0, 0.0, False, {}, 0, "")

    def running_controller_pods(self) -> list[str]:
        """The controller's pods that have not finished (what self-fencing stops; static pods are not)."""
        out = []
        for st in self.runtime.pods():
            m = self.meta.get(st.uid)
            if not st.finished and not (m is not None and m.static):
                out.append(st.uid)
        return out

    async def forget(self, uid: str, *, purge: bool = False) -> None:
        """The controller has the pod's result; with ``purge`` its logs go too (retention)."""
        await self.forget_all((uid,), purge=purge)

    async def forget_all(self, uids: Sequence[str], *, purge: bool = False) -> None:
        """:meth:`forget` for several pods (one controller message's): the runtime drops them in one write."""
        dropping: list[str] = []
        for uid in dict.fromkeys(uids):  # a pod named twice is forgotten once
            if self.orphans.pop(uid, None) is not None:
                continue
            if purge:
                self._drop_meta(uid)
                if self.runtime.status(uid) is None:
                    shutil.rmtree(self.data_dir / "pods" / uid, ignore_errors=True)
                    continue
            st = self.runtime.status(uid)
            if st is not None:
                if not st.finished:
                    continue
                dropping.append(uid)
            else:
                self._forgotten(uid, purge=purge)
        if not dropping:
            return
        # While the runtime drops the pods (it waits for its checkpoint write), a pod is neither in
        # the runtime nor gone from the metadata, which admission would read as admitted and not
        # started yet: holding resources the controller already gave to another pod.
        self._forgetting.update(dropping)
        try:
            failed = await self.runtime.forget_all(dropping)
        except PodRuntimeError as exc:
            log.warning("forgetting pods %s: %s", ", ".join(dropping), exc)
            return
        finally:
            self._forgetting.difference_update(dropping)
        for uid in dropping:
            refused = failed.get(uid)
            if refused is not None and not isinstance(refused, PodNotFoundError):
                log.warning("forgetting pod %s: %s", uid, refused)
            else:
                self._forgotten(uid, purge=purge)

    def _forgotten(self, uid: str, *, purge: bool) -> None:
        """The runtime no longer has the pod: what remains of it here goes (its logs stay unless ``purge``)."""
        if purge:
            shutil.rmtree(self.data_dir / "pods" / uid, ignore_errors=True)
            return
        # The pod's HOME is scratch: it goes with the pod (one rmdir when the pod left it empty).
        home = self.runtime.home(uid)
        try:
            os.rmdir(home)
        except OSError:
            shutil.rmtree(home, ignore_errors=True)
        # Only the logs stay (their directory tells the container names); keeping
        # the metadata would make every later save grow with every pod ever run.
        self._drop_meta(uid)

    async def remove(self, uid: str) -> None:
        """Drop a finished pod entirely: runtime record and metadata (static pods the controller never forgets).

        Unlike :meth:`forget`, nothing is kept, so a static pod whose manifest
        comes back unchanged (same uid) is admitted and started again.
        """
        st = self.runtime.status(uid)
        if st is not None:
            if not st.finished:
                raise PodRuntimeError(f"pod {uid} is still running; stop it before removing it")
            await self.runtime.forget(uid)
        self._drop_meta(uid)

    def static_pods(self) -> list[PodMeta]:
        """Metadata of the static pods this agent knows, running or not."""
        return [m for m in self.meta.values() if m.static and not m.forgotten]

    # ------------------------------------------------------------ reports

    def report(self, uid: str, *, with_usage: bool = False) -> PodReport | None:
        m = self.meta.get(uid)
        st = self.runtime.status(uid)
        if m is None and st is None and uid in self.orphans:
            return self.orphans[uid]
        if (m is None and st is None) or (m is not None and m.forgotten and st is None):
            return None
        if m is not None and m.rejected and st is None:
            return PodReport(uid, m.name, m.namespace, m.workload, "Failed", m.reason, m.message, (), False,
                             0.0, m.admitted_at, 0, 0.0, m.static, dict(m.requests), m.priority, m.qos)
        if m is not None and st is None:
            # Admitted, not started yet (a critical pod waits for its victims to stop).
            return PodReport(uid, m.name, m.namespace, m.workload, "Pending", "", "", (), False,
                             0.0, 0.0, 0, 0.0, m.static, dict(m.requests), m.priority, m.qos)
        assert st is not None
        return self._report_from(st, m, with_usage=with_usage)

    def _report_from(self, st: PodStatus, m: PodMeta | None, *, with_usage: bool) -> PodReport:
        containers = []
        # A container that already ended keeps its start in its termination: a
        # pod that started and ended between two reports still says when it ran.
        started = [
            t for c in st.containers
            if (t := c.started_at or (c.terminated.started_at if c.terminated is not None else None))
        ]
        finished_at = 0.0
        for c in st.containers:
            term = c.terminated
            containers.append(ContainerReport(
                name=c.name, state=str(c.state.value if hasattr(c.state, "value") else c.state),
                exit_code=term.exit_code if term else 0, reason=str(term.reason.value) if term else "",
                restart_count=c.restart_count, pid=c.pid or 0,
                ready=str(c.state) == "Running" and (not self.probes.has_probe(st.uid, c.name)
                                                      or self.probes.ready(st.uid, c.name)),
            ))
            if term is not None:
                finished_at = max(finished_at, term.finished_at)
        rss, cpu = 0, 0.0
        gpu_memory, gpu_busy = 0, 0.0
        if with_usage and not st.finished:
            try:
                reading = self.runtime.usage(st.uid)
                rss, cpu = reading.working_set_bytes, reading.cpu_seconds
            except PodRuntimeError:
                pass
            gpu_memory, gpu_busy = self._gpu_usage(m)
        phase = str(st.phase.value if hasattr(st.phase, "value") else st.phase)
        reason = st.reason or ""
        message = st.message or ""
        if m is not None and m.reason and st.finished:
            reason, message = m.reason, m.message
            phase = "Failed"
        elif st.finished and phase == "Failed" and not reason:
            # Kubernetes leaves the pod reason empty and puts the why on the
            # container; report the failing container's reason at pod level too.
            failing = next((c for c in containers if c.reason == "OOMKilled"), None) or next(
                (c for c in containers if c.exit_code != 0), None)
            if failing is not None:
                reason = failing.reason
        return PodReport(
            uid=st.uid, name=m.name if m else "", namespace=m.namespace if m else "", workload=m.workload if m else "",
            phase=phase, reason=reason, message=message, containers=tuple(containers),
            ready=phase == PodPhase.RUNNING.value and all(c.ready for c in containers),
            started_at=min(started) if started else 0.0, finished_at=finished_at if st.finished else 0.0,
            rss_bytes=rss, cpu_seconds=cpu, static=m.static if m else False,
            requests=dict(m.requests) if m else {}, priority=m.priority if m else 0, qos_class=m.qos if m else "",
            devices=dict(m.devices) if m else {}, gpu_memory_bytes=gpu_memory, gpu_utilization_percent=gpu_busy,
        )

    def _gpu_usage(self, m: PodMeta | None) -> tuple[int, float]:
        """(framebuffer bytes in use, mean busy percent) of the pod's GPUs: it holds them alone, so theirs is its."""
        uuids = m.devices.get(GPU_RESOURCE, ()) if m is not None else ()
        nvml = self.devices.nvml if self.devices is not None else None
        if not uuids or nvml is None:
            return 0, 0.0
        readings = [u for uuid in uuids if (u := nvml.usage(uuid)) is not None]
        if not readings:
            return 0, 0.0
        return (sum(u.memory_used_bytes for u in readings),
                sum(u.utilization_percent for u in readings) / len(readings))

    def reports(self, *, with_usage: bool = False) -> list[PodReport]:
        out = []
        for uid in sorted({u for u, m in self.meta.items() if not m.forgotten} | {s.uid for s in self.runtime.pods()}
                          | set(self.orphans)):
            r = self.report(uid, with_usage=with_usage)
            if r is not None:
                out.append(r)
        return out

    def container_names(self, uid: str) -> tuple[str, ...]:
        st = self.runtime.status(uid)
        if st is not None:
            return tuple(c.name for c in st.containers)
        m = self.meta.get(uid)
        if m is not None and m.containers:
            return m.containers
        # A forgotten pod: its log files are all that is left.
        return tuple(sorted(p.stem for p in (self.data_dir / "pods" / uid).glob("*.log")))

    def node_reading(self) -> NodeReading:
        return self.monitor.node(disk_path=self.data_dir)

    def pods_json(self) -> list[dict[str, Any]]:
        """The agent's /pods endpoint."""
        return [
            {"uid": r.uid, "name": r.name, "namespace": r.namespace, "workload": r.workload, "phase": r.phase,
             "reason": r.reason, "message": r.message, "qosClass": r.qos_class, "priority": r.priority,
             "static": r.static, "requests": dict(r.requests), "rssBytes": r.rss_bytes, "cpuSeconds": r.cpu_seconds,
             "containers": [asdict(c) for c in r.containers],
             "devices": {res: list(ids) for res, ids in r.devices.items()},
             **({"gpuMemoryUsedBytes": r.gpu_memory_bytes, "gpuUtilizationPercent": r.gpu_utilization_percent}
                if GPU_RESOURCE in r.devices else {})}
            for r in self.reports(with_usage=True)
        ]

