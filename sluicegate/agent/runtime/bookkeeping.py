"""The runtime's bookkeeping: pods by uid, snapshots, the batched checkpoint write, task supervision."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any

from sluicegate.agent import checkpoint as ckpt
from sluicegate.agent.cgroups import CgroupDriver
from sluicegate.agent.monitor import Monitor, read_boot_id
from sluicegate.agent.pod import RunAs
from sluicegate.agent.runtime.errors import (
    PodNotFoundError,
    PodRuntimeError,
    PodTaskCrashed,
    RuntimeClosedError,
)
from sluicegate.agent.runtime.process import (
    HOME_DIR,
    privilege_argv,
)
from sluicegate.agent.runtime.rules import pod_phase
from sluicegate.agent.runtime.spawning import Spawners
from sluicegate.agent.runtime.state import LivePod
from sluicegate.agent.runtime.values import (
    Clock,
    PodPhase,
    PodStatus,
    Reason,
    RuntimeConfig,
    SystemClock,
)

log = logging.getLogger("sluicegate.agent.runtime")


def _settle(waiters: list[asyncio.Future[None]], exc: BaseException | None) -> None:
    """Resolve each waiter not given up meanwhile: done, or with ``exc``."""
    for waiter in waiters:
        if not waiter.done():
            if exc is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(exc)


def _umask() -> int | None:
    """This process's umask, read without changing it (None when the kernel does not say)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return None


_UMASK = _umask()


def _make_dir(path: str, mode: int) -> None:
    """A directory with exactly ``mode``: made so when the umask keeps those bits, else set after."""
    try:
        os.mkdir(path, mode)
    except FileExistsError:
        if not os.path.isdir(path):
            raise
    else:
        if _UMASK is not None and not _UMASK & mode:
            return
    os.chmod(path, mode)


class RuntimeBase:
    """State shared by the runtime's layers, and the checkpoint and status bookkeeping."""

    def __init__(
        self,
        *,
        data_dir: Path,
        cgroups: CgroupDriver,
        monitor: Monitor | None = None,
        clock: Clock | None = None,
        config: RuntimeConfig | None = None,
    ) -> None:
        self._data_dir = Path(data_dir)
        self._cgroups = cgroups
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._monitor = monitor if monitor is not None else Monitor(clock=self._clock.now)
        self._config = config if config is not None else RuntimeConfig()
        self._checkpoint_path = ckpt.path_for(self._data_dir)
        self._pods_root = self._data_dir / "pods"
        self._checkpoint_file = ckpt.CheckpointFile(self._checkpoint_path)
        self._needs_adopt = self._checkpoint_path.exists()
        self._adopt_called = False
        self._boot_id = read_boot_id()
        self._found_commands: dict[tuple[str, str], str] = {}
        # The paths a spawner tries for a bare command name, by (name, PATH, where it was found).
        self._candidates_cache: dict[tuple[str, str, str | None], tuple[str, ...]] = {}
        self._spawners = Spawners()
        self._dirs_ready = False
        self._seq = 0
        self._pods: dict[str, LivePod] = {}
        # The checkpoint, kept encoded per pod: a write re-encodes only the
        # pods in ``_stale`` and copies the others (see ``_flush``).
        self._records: dict[str, str] = {}
        # Each pod's spec as JSON text: it never changes, so it is encoded once.
        self._spec_texts: dict[str, str] = {}
        self._stale: set[str] = set()
        self._file_stale = False
        self._unpublished: list[PodStatus] = []
        self._flush_handle: asyncio.TimerHandle | None = None
        # The delay _flush_handle was scheduled with (from a moment already past).
        self._flush_delay = 0.0
        # Each waiter's own future (so that one giving up cancels no one else's wait): the pods being
        # started, for the write before their spawn (see _start_written); _durable's, for the next flush.
        self._start_waiters: list[asyncio.Future[None]] = []
        self._flush_waiters: list[asyncio.Future[None]] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._changed = asyncio.Event()
        self._crashed = asyncio.Event()
        self._crash: PodTaskCrashed | None = None
        self._closed = False
        self.events: asyncio.Queue[PodStatus] = asyncio.Queue()
        # The agent node's per-pod records, written in the same file and the
        # same write as the runtime's own (see "Node records" below).
        self.adopted_node_records: tuple[ckpt.JSONObject, ...] | None = None
        self._node_json: dict[str, str] | None = None
        self._node_encoders: dict[str, Callable[[], str]] = {}
        # Each pod's one record in the file (its node and runtime parts
        # together), rebuilt only for the pods whose parts changed.
        self._entries: dict[str, str] = {}
        self._entries_stale: set[str] = set()
        self._entries_rebuild = True

    # -- internals: bookkeeping --

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeClosedError()

    def _get(self, uid: str) -> LivePod:
        pod = self._pods.get(uid)
        if pod is None:
            raise PodNotFoundError(uid=uid)
        return pod

    def _pod_dir(self, uid: str) -> Path:
        return self._pods_root / uid

    def home(self, uid: str) -> Path:
        """A pod's private HOME (and default working directory)."""
        return self._pod_dir(uid) / HOME_DIR

    def privilege_argv(self, uid: str) -> list[str]:
        """The prefix that runs a command as the pod's user (probes use it too); [] for an unknown pod."""
        pod = self._pods.get(uid)
        return privilege_argv(pod.spec.run_as) if pod is not None else []

    def _make_pod_dirs(self, directory: Path, run_as: RunAs | None) -> None:
        # The data dir, pods/ and the pod's dir can be passed through (0711)
        # but not listed or read: the pod's user reaches its HOME, and no one
        # else's logs (0600, root's) or files.
        if not self._dirs_ready:
            for d in (self._data_dir, self._data_dir / "pods"):
                d.mkdir(mode=0o711, parents=True, exist_ok=True)
                os.chmod(d, 0o711)
            self._dirs_ready = True
        pod_dir = str(directory)
        _make_dir(pod_dir, 0o711)
        home = f"{pod_dir}/{HOME_DIR}"
        _make_dir(home, 0o700)
        if run_as is not None:
            os.chown(home, run_as.uid, run_as.gid)

    def _snapshot(self, pod: LivePod) -> PodStatus:
        containers = tuple(container.status() for container in pod.containers)
        phase = pod_phase(containers, restart_policy=pod.spec.restart_policy, terminal=pod.finished)
        if pod.finished and pod.stop is not None and pod.stop.reason is Reason.EVICTED:
            phase = PodPhase.FAILED  # an evicted pod failed, whatever its containers did
        return PodStatus(
            uid=pod.uid,
            phase=phase,
            containers=containers,
            at=self._clock.now(),
            seq=self._seq,
            finished=pod.finished,
            reason=pod.reason,
            message=pod.message,
        )

    # Checkpoint writes and status publication.
    #
    # A status change marks its pod stale and schedules one flush, at most
    # ``checkpoint_batch_seconds`` later; every change made until then shares
    # its one write.  The flush writes the file and only then publishes the
    # statuses it covers (``status()``, ``events``, ``wait_for()``), so
    # nothing outside the runtime learns of a change before a restarted
    # agent would: the controller hears of pods only through what is
    # published, and run() and stop() return only after the flush.
    #
    # Deferring a write is safe only while nothing irreversible depends on
    # it.  Spawning a process is irreversible, so the "starting" mark is
    # written (``_flush(publish=False)``, which takes every other pending
    # change along) before every spawn: a restart's synchronously, the
    # starts of new pods once per turn of the loop (``_start_written``).
    # The pid that follows is written by the next flush; a crash before then leaves "starting",
    # which adoption reports as a lost start and whose cgroup it empties,
    # exactly as for a crash during the spawn itself.  run() returns only
    # once the pid is written, so whoever started a pod can count on its
    # re-adoption.

    def _start_written(self) -> asyncio.Future[None]:
        """A future (the caller's own) done once the pending changes (the "starting" marks above all) are written.

        The write runs in the loop's next turn, so every pod whose start
        began in this one shares it: a batch of starts costs one write, and
        no start waits for another's bookkeeping.  The future carries the
        write's CheckpointError, if any, to every start of the batch.
        """
        loop = asyncio.get_running_loop()
        if not self._start_waiters:
            loop.call_soon(self._write_starts)
        written: asyncio.Future[None] = loop.create_future()
        self._start_waiters.append(written)
        return written

    def _write_starts(self) -> None:
        waiters, self._start_waiters = self._start_waiters, []
        try:
            self._flush(publish=False)
        except ckpt.CheckpointError as exc:
            _settle(waiters, exc)
            return
        _settle(waiters, None)

    def _record_text(self, pod: LivePod, spec_text: str) -> str:
        """The pod's checkpoint record as ``encode_pod`` writes it, built from its live state (``spec_text``: its
        spec's ``encode_spec`` text)."""
        stop = pod.stop
        return ckpt.pod_text(
            uid=pod.uid,
            phase=str(pod.latest.phase if pod.latest is not None else PodPhase.PENDING),
            finished=pod.finished,
            reason=pod.reason,
            message=pod.message,
            stop=None if stop is None else {"deadline": stop.deadline, "message": stop.message,
                                            "reason": str(stop.reason)},
            containers=[container.record_json() for container in pod.containers],
            spec_text=spec_text,
        )

    # Node records.  The agent node keeps its own part of each pod's record
    # (what the controller asked for: workload, priority, admission, the
    # pod's user) in the checkpoint: the file holds one record per pod, the
    # node's part and the runtime's together (a pod with no processes, say
    # a rejected one, has only the node's part), written in one atomic
    # write, so the two never disagree after a crash and a change of both
    # costs one write.  The runtime does not read them; it keeps each part
    # encoded, encodes a changed node part (``encode``) only when it
    # writes, and joins a pod's two parts when either changes, not per
    # write.  Adoption keeps the node parts it read until the node hands
    # its own over.  Without any (a runtime on its own, or the oldest
    # files), the file is version 1, the runtime's records alone, so an
    # upgraded agent knows to import pods-meta.json.

    def set_node_records(self, records: Mapping[str, str], *, write: bool) -> None:
        """The node's records (JSON text by uid, in the node's order); ``write``: write the file at once."""
        self._node_json = dict(records)
        self._node_encoders.clear()
        self._entries_rebuild = True
        if write:
            self._file_stale = True
            self._flush(publish=False)

    def put_node_record(self, uid: str, encode: Callable[[], str], *, within: float) -> None:
        """The node's record of ``uid`` changed: ``encode()`` goes into the next write, within ``within`` s."""
        if self._node_json is None:
            self._node_json = {}
        self._node_json.setdefault(uid, "null")
        self._node_encoders[uid] = encode
        self._schedule_flush(within)

    def drop_node_record(self, uid: str, *, within: float) -> None:
        if self._node_json is not None and self._node_json.pop(uid, None) is not None:
            self._node_encoders.pop(uid, None)
            self._entries_stale.add(uid)
            self._file_stale = True
            self._schedule_flush(within)

    def _drop_record(self, uid: str) -> None:
        """The runtime no longer knows ``uid``: its record loses its runtime part with the next write."""
        self._records.pop(uid, None)
        self._spec_texts.pop(uid, None)
        self._entries_stale.add(uid)
        self._file_stale = True

    def _update_entries(self, node: dict[str, str]) -> None:
        """Bring the pods' records up to date with their parts: the node's pods in its order, then runtime-only ones."""
        records, entries = self._records, self._entries
        if self._entries_rebuild:
            entries.clear()
            for uid, text in node.items():
                entries[uid] = "".join(ckpt.entry_pieces(text, records.get(uid)))
            for uid, record in records.items():
                if uid not in node:
                    entries[uid] = "".join(ckpt.entry_pieces(None, record))
            self._entries_rebuild = False
        else:
            for uid in self._entries_stale:
                node_part, runtime_part = node.get(uid), records.get(uid)
                if node_part is None and runtime_part is None:
                    entries.pop(uid, None)
                else:
                    entries[uid] = "".join(ckpt.entry_pieces(node_part, runtime_part))
        self._entries_stale.clear()

    def write_now(self) -> None:
        """Write every pending change now (statuses are still published by the next scheduled write).

        Raises CheckpointError; the changes stay pending.
        """
        self._flush(publish=False)

    def _mark(self, pod: LivePod) -> None:
        """The pod's record changed: rewrite it with the next flush."""
        self._stale.add(pod.uid)
        self._schedule_flush(self._config.checkpoint_batch_seconds)

    def _schedule_flush(self, delay: float) -> None:
        """Make sure a flush runs within ``delay`` seconds."""
        if self._closed:
            return
        handle = self._flush_handle
        if handle is not None and self._flush_delay <= delay:
            return  # due sooner already: scheduled no later than ``delay`` from now
        loop = asyncio.get_running_loop()
        if handle is not None:
            if handle.when() <= loop.time() + delay:
                return
            handle.cancel()
        self._flush_handle = loop.call_later(delay, self._scheduled_flush)
        self._flush_delay = delay

    def _scheduled_flush(self) -> None:
        self._flush_handle = None
        try:
            self._flush(publish=True)
        except Exception as exc:
            # A CheckpointError (disk) or a bug.  Nothing covered by this write
            # is published; the runtime stops as it would for any supervision
            # failure, since it can no longer keep its record ahead of what it
            # reports, and whoever waits for the write gets the error.
            log.error("checkpoint write failed: %s", exc, exc_info=not isinstance(exc, ckpt.CheckpointError))
            self._fail_waiters(exc)
            if self._crash is None:
                self._crash = PodTaskCrashed(task="checkpoint", error=exc)
                self._crashed.set()

    def _flush(self, *, publish: bool) -> None:
        """Write pending changes now; with ``publish``, then publish the statuses the write covers.

        Raises CheckpointError with nothing published; the changes stay
        pending for the next attempt.
        """
        if self._stale or self._file_stale or self._node_encoders:
            for uid in self._stale:
                pod = self._pods.get(uid)
                if pod is not None:
                    spec_text = self._spec_texts.get(uid)
                    if spec_text is None:
                        spec_text = self._spec_texts[uid] = ckpt.encode_spec(pod.spec_json)
                    self._records[uid] = self._record_text(pod, spec_text)
            self._entries_stale |= self._stale
            self._stale.clear()
            node = self._node_json
            if node is not None:
                for uid, encode in self._node_encoders.items():
                    node[uid] = encode()
                self._entries_stale.update(self._node_encoders)
            self._node_encoders.clear()
            self._file_stale = True
            if node is None:
                # A runtime on its own (no node records yet): version 1, the runtime's records alone.
                self._entries_stale.clear()
                self._entries_rebuild = True
                self._checkpoint_file.write(boot_id=self._boot_id, seq=self._seq, written_at=self._clock.now(),
                                            pods=self._records.values(), version=1)
            else:
                self._update_entries(node)
                self._checkpoint_file.write(boot_id=self._boot_id, seq=self._seq, written_at=self._clock.now(),
                                            pods=self._entries.values())
            self._file_stale = False
        if not publish:
            return
        unpublished, self._unpublished = self._unpublished, []
        for status in unpublished:
            pod = self._pods.get(status.uid)
            if pod is not None:
                pod.status = status
            self.events.put_nowait(status)
        if unpublished:
            changed, self._changed = self._changed, asyncio.Event()
            changed.set()
        waiters, self._flush_waiters = self._flush_waiters, []
        _settle(waiters, None)

    def _fail_waiters(self, exc: BaseException) -> None:
        """The write failed: whoever waits for it gets the error."""
        waiters, self._flush_waiters = self._flush_waiters, []
        _settle(waiters, exc)

    async def _durable(self) -> None:
        """Return once every change made so far is written and published."""
        if self._closed or not (self._flush_handle or self._unpublished or self._stale or self._file_stale):
            return  # close() writes what is left
        self._schedule_flush(self._config.checkpoint_batch_seconds)
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._flush_waiters.append(waiter)
        await waiter

    def _emit(self, pod: LivePod) -> PodStatus:
        """A new status for the pod; written and published by the next flush."""
        self._seq += 1
        status = self._snapshot(pod)
        pod.latest = status
        self._unpublished.append(status)
        self._mark(pod)
        return status

    def _start_task(self, coro: Coroutine[Any, Any, None], *, name: str) -> None:
        task = asyncio.create_task(self._guarded(coro, name), name=name)
        self._tasks.add(task)

    async def _guarded(self, coro: Coroutine[Any, Any, None], name: str) -> None:
        """Run a task's coroutine and act on how it ended, in its own last step.

        A done callback would do the same a turn of the loop later, at the
        cost of one more callback per pod.
        """
        try:
            await coro
        except Exception as error:
            if isinstance(error, PodRuntimeError) and not isinstance(error, PodTaskCrashed):
                # A resumed stop that timed out: already explained by the error.
                log.error("%s: %s", name, error)
                return
            log.error("task %s crashed", name, exc_info=error)
            if self._crash is None:
                self._crash = PodTaskCrashed(task=name, error=error)
                self._crashed.set()
        finally:
            task = asyncio.current_task()
            if task is not None:
                self._tasks.discard(task)
