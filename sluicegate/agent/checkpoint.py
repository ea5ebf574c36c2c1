"""The agent's record of what it runs, kept in ``<data_dir>/checkpoint.json``.

Pods outlive the agent: a restarted agent (after a crash, kill -9 or an
upgrade) reads this file and re-adopts its pods instead of starting them
again.  The runtime rewrites the file on every change, and always before
the change becomes visible (before a process is spawned, before a status
is reported), so the file never knows less than the rest of the system.

Writes are atomic: the new content is written to a file in the same
directory that the checkpoint does not name, and renamed over it, so a
reader sees the old content or the new, never a torn file (see
``AtomicFile``, which reuses two such files instead of creating one per
write).  They are not fsynced: a power cut takes the pods with it, and a
checkpoint from an earlier boot is never adopted; an unreadable one after
a crash of the machine is set aside by the agent at start-up.

The file holds one record per pod (format version 2): ``{"node": ...,
"runtime": ...}``.  ``runtime`` is the runtime's record (spec, processes,
terminations); ``node`` is the agent node's (workload, priority,
admission, user; see sluicegate.agent.node), opaque here.  A pod the node
knows but the runtime does not -- rejected, admitted and waiting for its
victims, forgotten by the runtime and not yet by the node -- has a record
with no ``runtime`` part: no processes.  A runtime used without a node
writes records with no ``node`` part.

Older files stay readable: version 1 kept the runtime's records in
``pods`` and, from mid-November 2026, the node's in a separate ``node``
list; before that the node kept them in ``pods-meta.json`` (a version-1
file without ``node``, which loads with ``node_records`` None).

The runtime keeps each pod's parts encoded (``encode_pod``) and re-encodes
only the pods that changed; ``CheckpointFile.write`` joins the encoded
parts into one file (``entry_pieces``).  The result is the same document
``save`` writes.

This module owns the on-disk format only.  Pod specs travel as JSON
objects produced by the runtime's codec, so this module does not depend on
the runtime.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TypeAlias

__all__ = [
    "FORMAT_VERSION",
    "FILE_NAME",
    "JSONValue",
    "JSONObject",
    "CheckpointError",
    "FieldReader",
    "TerminationRecord",
    "ContainerRecord",
    "StopRecord",
    "PodRecord",
    "Checkpoint",
    "path_for",
    "AtomicFile",
    "CheckpointFile",
    "encode_pod",
    "encode_spec",
    "pod_text",
    "container_json",
    "termination_json",
    "entry_pieces",
    "save",
    "load",
    "encode",
    "decode",
]

FORMAT_VERSION: Final = 2
# Versions this agent reads (see the module docstring).
READABLE_VERSIONS: Final = (1, 2)
FILE_NAME: Final = "checkpoint.json"

JSONValue: TypeAlias = bool | int | float | str | list["JSONValue"] | dict[str, "JSONValue"] | None
JSONObject: TypeAlias = dict[str, JSONValue]


class CheckpointError(Exception):
    """The checkpoint could not be read or written.

    ``path`` is the file, ``detail`` what was wrong.  A checkpoint that
    cannot be read is never replaced silently: the agent must not start,
    because it could not tell which pods are already running.
    """

    def __init__(self, *, path: str, detail: str) -> None:
        self.path = path
        self.detail = detail
        super().__init__(
            f"checkpoint {path}: {detail}; the agent cannot tell which pods already run, "
            "so it will not start pods until the file is repaired or removed by an operator"
        )


@dataclass(frozen=True, slots=True)
class TerminationRecord:
    exit_code: int
    reason: str
    message: str
    started_at: float | None
    finished_at: float
    signal: int | None


@dataclass(frozen=True, slots=True)
class ContainerRecord:
    """One container.  ``pid`` with ``start_ticks`` identifies its main process.

    ``starting`` is true from just before a spawn until the spawned pid is
    recorded; an agent that finds it true after a restart knows the process
    may exist but cannot identify it.
    """

    name: str
    state: str
    pid: int | None
    start_ticks: int | None
    cgroup: tuple[tuple[str, str], ...]
    log_path: str
    restart_count: int
    backoff_index: int
    oom_kills_at_start: int
    started_at: float | None
    starting: bool
    waiting_reason: str | None
    terminated: TerminationRecord | None
    last_termination: TerminationRecord | None


@dataclass(frozen=True, slots=True)
class StopRecord:
    """A stop in progress; ``deadline`` is the wall-clock time its grace ends."""

    reason: str
    message: str
    deadline: float


@dataclass(frozen=True, slots=True)
class PodRecord:
    uid: str
    spec: JSONObject
    phase: str
    finished: bool
    reason: str | None
    message: str
    stop: StopRecord | None
    containers: tuple[ContainerRecord, ...]


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """Everything the agent runs.  ``boot_id`` scopes every ``start_ticks``."""

    boot_id: str
    seq: int
    written_at: float
    pods: tuple[PodRecord, ...]
    # The node part of each pod's record (see the module docstring), opaque
    # here, in file order.  None: a checkpoint from before they were kept
    # here (in pods-meta.json); such a checkpoint is also saved as version 1.
    node_records: tuple[JSONObject, ...] | None = None

    @property
    def version(self) -> int:
        """The format it is written in: 2, one record per pod; 1 without node records (the runtime's alone)."""
        return FORMAT_VERSION if self.node_records is not None else 1


def path_for(data_dir: Path) -> Path:
    return data_dir / FILE_NAME


# --- encoding ----------------------------------------------------------------


# The builders below put keys in sorted order, as ``_dumps`` writes them: what
# they build is encoded without sorting (``_dumps_built``) into the same text.


def termination_json(
    *, exit_code: int, reason: str, message: str, started_at: float | None, finished_at: float, signal: int | None
) -> JSONObject:
    """A termination's JSON (keys sorted)."""
    return {"exitCode": exit_code, "finishedAt": finished_at, "message": message, "reason": reason, "signal": signal,
            "startedAt": started_at}


def _termination_json(record: TerminationRecord | None) -> JSONValue:
    if record is None:
        return None
    return termination_json(exit_code=record.exit_code, reason=record.reason, message=record.message,
                            started_at=record.started_at, finished_at=record.finished_at, signal=record.signal)


def container_json(
    *, name: str, state: str, pid: int | None, start_ticks: int | None, cgroup: Iterable[tuple[str, str]],
    log_path: str, restart_count: int, backoff_index: int, oom_kills_at_start: int, started_at: float | None,
    starting: bool, waiting_reason: str | None, terminated: JSONValue, last_termination: JSONValue,
) -> JSONObject:
    """A container's JSON (keys sorted); ``terminated`` and ``last_termination`` as ``termination_json`` or None."""
    return {
        "backoffIndex": backoff_index,
        "cgroup": [[controller, directory] for controller, directory in cgroup],
        "lastTermination": last_termination,
        "logPath": log_path,
        "name": name,
        "oomKillsAtStart": oom_kills_at_start,
        "pid": pid,
        "restartCount": restart_count,
        "startTicks": start_ticks,
        "startedAt": started_at,
        "starting": starting,
        "state": state,
        "terminated": terminated,
        "waitingReason": waiting_reason,
    }


def _container_json(record: ContainerRecord) -> JSONObject:
    return container_json(
        name=record.name, state=record.state, pid=record.pid, start_ticks=record.start_ticks, cgroup=record.cgroup,
        log_path=record.log_path, restart_count=record.restart_count, backoff_index=record.backoff_index,
        oom_kills_at_start=record.oom_kills_at_start, started_at=record.started_at, starting=record.starting,
        waiting_reason=record.waiting_reason, terminated=_termination_json(record.terminated),
        last_termination=_termination_json(record.last_termination),
    )


def _stop_json(stop: StopRecord | None) -> JSONValue:
    return None if stop is None else {"deadline": stop.deadline, "message": stop.message, "reason": stop.reason}


def _pod_json(pod: PodRecord) -> JSONObject:
    return {
        "containers": [_container_json(container) for container in pod.containers],
        "finished": pod.finished,
        "message": pod.message,
        "phase": pod.phase,
        "reason": pod.reason,
        "spec": pod.spec,
        "stop": _stop_json(pod.stop),
        "uid": pod.uid,
    }


def encode(checkpoint: Checkpoint) -> JSONObject:
    """The file's document: version 2, one record per pod -- the node's records in order, then runtime-only pods.

    A checkpoint without node records (None) is the version-1 document.
    """
    out: JSONObject = {
        "version": checkpoint.version,
        "bootId": checkpoint.boot_id,
        "seq": checkpoint.seq,
        "writtenAt": checkpoint.written_at,
    }
    if checkpoint.node_records is None:
        out["pods"] = [_pod_json(pod) for pod in checkpoint.pods]
        return out
    runtime = {pod.uid: _pod_json(pod) for pod in checkpoint.pods}
    entries: list[JSONValue] = []
    for node in checkpoint.node_records:
        entry: JSONObject = {"node": node}
        uid = node.get("uid")
        if isinstance(uid, str) and uid in runtime:
            entry["runtime"] = runtime.pop(uid)
        entries.append(entry)
    entries.extend({"runtime": record} for record in runtime.values())
    out["pods"] = entries
    return out


def _dumps(value: JSONValue) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


# What _dumps writes for a value whose objects all have their keys in sorted
# order already (the builders above), without sorting them again.
_dumps_built = json.JSONEncoder(separators=(",", ":")).encode


def encode_spec(spec: JSONObject) -> str:
    """A pod spec as ``encode_pod`` writes it; the runtime encodes each pod's (unchanging) spec once."""
    return _dumps(spec)


def encode_pod(pod: PodRecord, *, spec_text: str | None = None) -> str:
    """The runtime part of one pod's record as JSON text (see ``entry_pieces``).

    With ``spec_text`` (``encode_spec(pod.spec)``), only what changes is
    encoded and the spec's text is spliced in (see ``pod_text``).
    """
    if spec_text is None:
        return _dumps(_pod_json(pod))
    return pod_text(uid=pod.uid, phase=pod.phase, finished=pod.finished, reason=pod.reason, message=pod.message,
                    stop=_stop_json(pod.stop), containers=[_container_json(c) for c in pod.containers],
                    spec_text=spec_text)


def pod_text(
    *, uid: str, phase: str, finished: bool, reason: str | None, message: str, stop: JSONValue,
    containers: list[JSONValue], spec_text: str,
) -> str:
    """``encode_pod``'s text from the record's values (``containers`` as ``container_json``; ``stop`` as a JSON
    object with keys deadline, message, reason, or None) and its spec's ``encode_spec`` text.

    The spec's text is spliced in: the same text, since keys are sorted and
    ``spec`` sorts just before ``stop``, the record's last key but ``uid``.
    (Inside JSON strings quotes are escaped, and no key inside ``stop`` or
    ``uid`` is called so: the last ``,"stop":`` is the key.)
    """
    text = _dumps_built({"containers": containers, "finished": finished, "message": message, "phase": phase,
                         "reason": reason, "stop": stop, "uid": uid})
    cut = text.rindex(',"stop":')
    return "".join((text[:cut], ',"spec":', spec_text, text[cut:]))


def entry_pieces(node: str | None, runtime: str | None) -> tuple[str, ...]:
    """One pod's record, version 2, as pieces of JSON text to join (keys sorted, as ``save`` writes them).

    ``node``: the node part as JSON text; ``runtime``: ``encode_pod``'s text;
    at least one of them.  The runtime joins them once per change of the
    pod, not per write.
    """
    if node is None:
        return ('{"runtime":', runtime or "null", "}")
    if runtime is None:
        return ('{"node":', node, "}")
    return ('{"node":', node, ',"runtime":', runtime, "}")


# --- decoding ----------------------------------------------------------------


class FieldReader:
    """Typed access to a decoded JSON object; every failure names the field and the file."""

    def __init__(self, obj: Mapping[str, JSONValue], *, path: str, where: str) -> None:
        self._obj = obj
        self._path = path
        self._where = where

    def _fail(self, key: str, wanted: str) -> CheckpointError:
        found = type(self._obj.get(key)).__name__ if key in self._obj else "nothing"
        return CheckpointError(path=self._path, detail=f"{self._where}.{key}: expected {wanted}, found {found}")

    def get_str(self, key: str) -> str:
        value = self._obj.get(key)
        if not isinstance(value, str):
            raise self._fail(key, "a string")
        return value

    def get_opt_str(self, key: str) -> str | None:
        value = self._obj.get(key)
        if value is not None and not isinstance(value, str):
            raise self._fail(key, "a string or null")
        return value

    def get_int(self, key: str) -> int:
        value = self._obj.get(key)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._fail(key, "an integer")
        return value

    def get_opt_int(self, key: str) -> int | None:
        value = self._obj.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._fail(key, "an integer or null")
        return value

    def get_float(self, key: str) -> float:
        value = self._obj.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self._fail(key, "a number")
        return float(value)

    def get_opt_float(self, key: str) -> float | None:
        if self._obj.get(key) is None:
            return None
        return self.get_float(key)

    def get_bool(self, key: str) -> bool:
        value = self._obj.get(key)
        if not isinstance(value, bool):
            raise self._fail(key, "true or false")
        return value

    def obj(self, key: str) -> FieldReader:
        value = self._obj.get(key)
        if not isinstance(value, dict):
            raise self._fail(key, "an object")
        return FieldReader(value, path=self._path, where=f"{self._where}.{key}")

    def opt_obj(self, key: str) -> FieldReader | None:
        if self._obj.get(key) is None:
            return None
        return self.obj(key)

    def raw_obj(self, key: str) -> JSONObject:
        value = self._obj.get(key)
        if not isinstance(value, dict):
            raise self._fail(key, "an object")
        return value

    def objs(self, key: str) -> list[FieldReader]:
        value = self._obj.get(key)
        if not isinstance(value, list):
            raise self._fail(key, "a list")
        readers: list[FieldReader] = []
        for index, item in enumerate(value):
            if not isinstance(item, dict):
                raise CheckpointError(path=self._path, detail=f"{self._where}.{key}[{index}]: expected an object")
            readers.append(FieldReader(item, path=self._path, where=f"{self._where}.{key}[{index}]"))
        return readers

    def get_str_list(self, key: str) -> tuple[str, ...]:
        value = self._obj.get(key)
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise self._fail(key, "a list of strings")
        return tuple(item for item in value if isinstance(item, str))

    def has(self, key: str) -> bool:
        return self._obj.get(key) is not None

    def pairs(self, key: str) -> tuple[tuple[str, str], ...]:
        value = self._obj.get(key)
        if not isinstance(value, list):
            raise self._fail(key, "a list of [controller, directory] pairs")
        pairs: list[tuple[str, str]] = []
        for item in value:
            if not (isinstance(item, list) and len(item) == 2 and all(isinstance(part, str) for part in item)):
                raise self._fail(key, "a list of [controller, directory] pairs")
            first, second = item
            assert isinstance(first, str) and isinstance(second, str)
            pairs.append((first, second))
        return tuple(pairs)


def _termination(reader: FieldReader | None) -> TerminationRecord | None:
    if reader is None:
        return None
    return TerminationRecord(
        exit_code=reader.get_int("exitCode"),
        reason=reader.get_str("reason"),
        message=reader.get_str("message"),
        started_at=reader.get_opt_float("startedAt"),
        finished_at=reader.get_float("finishedAt"),
        signal=reader.get_opt_int("signal"),
    )


def _container(reader: FieldReader) -> ContainerRecord:
    return ContainerRecord(
        name=reader.get_str("name"),
        state=reader.get_str("state"),
        pid=reader.get_opt_int("pid"),
        start_ticks=reader.get_opt_int("startTicks"),
        cgroup=reader.pairs("cgroup"),
        log_path=reader.get_str("logPath"),
        restart_count=reader.get_int("restartCount"),
        backoff_index=reader.get_int("backoffIndex"),
        oom_kills_at_start=reader.get_int("oomKillsAtStart"),
        started_at=reader.get_opt_float("startedAt"),
        starting=reader.get_bool("starting"),
        waiting_reason=reader.get_opt_str("waitingReason"),
        terminated=_termination(reader.opt_obj("terminated")),
        last_termination=_termination(reader.opt_obj("lastTermination")),
    )


def decode(obj: JSONValue, *, path: str) -> Checkpoint:
    if not isinstance(obj, dict):
        raise CheckpointError(path=path, detail="expected a JSON object at the top level")
    top = FieldReader(obj, path=path, where="checkpoint")
    version = top.get_int("version")
    if version not in READABLE_VERSIONS:
        readable = " or ".join(map(str, READABLE_VERSIONS))
        raise CheckpointError(path=path, detail=f"format version {version} is not {readable}")
    if version == 1:
        return _decode_v1(obj, top, path=path)
    pods: list[PodRecord] = []
    node_records: list[JSONObject] = []
    for entry in top.objs("pods"):
        runtime = entry.opt_obj("runtime")
        node = entry.raw_obj("node") if entry.has("node") else None
        if runtime is None and node is None:
            raise CheckpointError(path=path, detail="checkpoint.pods: a record with neither a node nor a runtime part")
        if runtime is not None:
            pods.append(_pod_record(runtime))
            if node is not None and node.get("uid") != pods[-1].uid:
                raise CheckpointError(path=path, detail=f"checkpoint.pods: the record of {pods[-1].uid!r} holds "
                                                        f"the node part of {node.get('uid')!r}")
        if node is not None:
            node_records.append(node)
    return Checkpoint(
        boot_id=top.get_str("bootId"),
        seq=top.get_int("seq"),
        written_at=top.get_float("writtenAt"),
        pods=tuple(pods),
        node_records=tuple(node_records),
    )


def _pod_record(pod: FieldReader) -> PodRecord:
    stop = pod.opt_obj("stop")
    return PodRecord(
        uid=pod.get_str("uid"),
        spec=pod.raw_obj("spec"),
        phase=pod.get_str("phase"),
        finished=pod.get_bool("finished"),
        reason=pod.get_opt_str("reason"),
        message=pod.get_str("message"),
        stop=None
        if stop is None
        else StopRecord(
            reason=stop.get_str("reason"), message=stop.get_str("message"), deadline=stop.get_float("deadline")
        ),
        containers=tuple(_container(container) for container in pod.objs("containers")),
    )


def _decode_v1(obj: JSONObject, top: FieldReader, *, path: str) -> Checkpoint:
    """Version 1: the runtime's records in ``pods``, the node's (if any yet) in a separate ``node`` list."""
    pods = [_pod_record(pod) for pod in top.objs("pods")]
    node_records: tuple[JSONObject, ...] | None = None
    if top.has("node"):
        raw = obj["node"]
        if not isinstance(raw, list) or not all(isinstance(item, dict) for item in raw):
            raise CheckpointError(path=path, detail="checkpoint.node: expected a list of objects")
        node_records = tuple(item for item in raw if isinstance(item, dict))
    return Checkpoint(
        boot_id=top.get_str("bootId"),
        seq=top.get_int("seq"),
        written_at=top.get_float("writtenAt"),
        pods=tuple(pods),
        node_records=node_records,
    )


# --- files -------------------------------------------------------------------


class AtomicFile:
    """A file replaced whole, atomically against the writer dying, many times a second.

    The usual way (write a new temporary file, rename it over the old one)
    creates an inode and frees one on every write, which costs a few hundred
    microseconds on ext4, more with online discard: too much at several
    writes per pod.  Instead two *slot* files live beside the target, and
    each write rewrites in place the slot the target does not name, then
    links it under a temporary name and renames that over the target.  The
    inodes are reused, and the target always names a completely written
    one: a writer killed mid-write leaves a torn slot the target does not
    name, which the next write simply overwrites.

    Not fsynced: the agent's files only have to outlive the agent *process*
    (see the module docstring).  A reader that keeps the file open while
    two further writes complete could see it change under it; the agent
    reads these files only at start-up, before it writes them.
    """

    def __init__(self, path: Path, *, mode: int = 0o600) -> None:
        self.path = path
        self._mode = mode
        self._slots = (path.parent / f".{path.name}.slot-a", path.parent / f".{path.name}.slot-b")
        self._link = path.parent / f".{path.name}.link"
        # The slot to write next; found out on the first write.
        self._next: int | None = None
        # Each slot's length as this object last left it (None: unknown, as
        # at start-up): a write no shorter than that needs no truncation.
        self._lengths: list[int | None] = [None, None]

    def replace(self, data: bytes) -> None:
        """Make the file hold ``data``.  Raises OSError, leaving the file as it was."""
        if self._next is None:
            self._next = self._free_slot()
        slot = self._slots[self._next]
        try:
            fd = os.open(slot, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, self._mode)
        except FileNotFoundError:
            # The directory is not checked on every write; create it when missing.
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(slot, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, self._mode)
        previous = self._lengths[self._next]
        self._lengths[self._next] = None  # unknown until this write is complete
        try:
            offset = 0
            view = memoryview(data)
            while offset < len(data):
                offset += os.pwrite(fd, view[offset:], offset)
            if previous is None or previous > len(data):
                os.ftruncate(fd, len(data))
            self._lengths[self._next] = len(data)
        finally:
            os.close(fd)
        try:
            os.link(slot, self._link)
        except FileExistsError:
            # Left by a writer that died between link and rename.
            os.unlink(self._link)
            os.link(slot, self._link)
        os.replace(self._link, self.path)
        self._next = 1 - self._next

    def _free_slot(self) -> int:
        """The slot the target does not name (either, when it names neither)."""
        try:
            target = os.stat(self.path)
        except FileNotFoundError:
            return 0
        for index, slot in enumerate(self._slots):
            try:
                info = os.stat(slot)
            except FileNotFoundError:
                continue
            if (info.st_dev, info.st_ino) == (target.st_dev, target.st_ino):
                return 1 - index
        return 0


class CheckpointFile:
    """Writes the checkpoint file, again and again (see ``AtomicFile``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = AtomicFile(path, mode=0o600)

    def write(
        self, *, boot_id: str, seq: int, written_at: float, pods: Iterable[str], version: int = FORMAT_VERSION
    ) -> None:
        """Replace the file; ``pods``: each pod's record as JSON text: ``entry_pieces`` joined (version 2), or
        ``encode_pod``'s text (version 1: the runtime's records alone, what a runtime without a node writes).
        """
        # Byte for byte what save() writes (keys sorted), assembled from
        # pre-encoded records so an unchanged pod costs a string copy.
        head = _dumps({"bootId": boot_id})
        tail = _dumps({"seq": seq, "version": version, "writtenAt": written_at})
        data = "".join((head[:-1], ',"pods":[', ",".join(pods), "],", tail[1:], "\n")).encode()
        try:
            self._file.replace(data)
        except OSError as exc:
            raise CheckpointError(path=str(self.path), detail=f"could not write: {exc.strerror or exc}") from exc


def save(path: Path, checkpoint: Checkpoint) -> None:
    """Replace ``path`` atomically with ``checkpoint``, once (the runtime uses ``CheckpointFile``).

    A temporary file renamed over the old one: atomic, not fsynced (see
    ``AtomicFile``), and nothing is left beside the file.
    """
    data = _dumps(encode(checkpoint)).encode() + b"\n"
    temporary = path.parent / f".{path.name}.{os.getpid()}.tmp"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
        finally:
            os.close(fd)
        os.replace(temporary, path)
    except OSError as exc:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise CheckpointError(path=str(path), detail=f"could not write: {exc.strerror or exc}") from exc


def load(path: Path) -> Checkpoint | None:
    """Read ``path``; None when there is no checkpoint (a node that never ran pods)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CheckpointError(path=str(path), detail=f"could not read: {exc.strerror or exc}") from exc
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CheckpointError(path=str(path), detail=f"not valid JSON ({exc.msg} at line {exc.lineno})") from exc
    return decode(obj, path=str(path))
