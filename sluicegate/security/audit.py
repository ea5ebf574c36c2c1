"""The audit log: one JSON line per mutating request (and per denied read).

Each line::

    {"time": "2026-11-24T22:41:07.123Z", "user": "alice", "groups": ["dev"],
     "verb": "create", "kind": "Workload", "namespace": "team-a", "name": "train-1",
     "outcome": "allowed", "source": "ipv4:127.0.0.1:50522"}

``outcome`` is ``allowed`` (done), ``denied`` (PERMISSION_DENIED) or
``error`` (authorized but failed); the last two carry ``code``, the gRPC
status name, and ``message``.  ``detail`` says what an allowed request did
where that is not obvious (apply: created/configured/unchanged; create:
created/existing).

The file is opened with O_APPEND and mode 0600 (its directory is created,
mode 0700, when missing) and every record is one write(2) of whole lines:
lines from concurrent writers never interleave, a crash loses at most the
record being written, and nothing is buffered in the process.  A write is
a few microseconds (the file lives on local disk; the kernel's page cache
absorbs it).  :meth:`AuditLog.reopen` (on SIGHUP) follows a rotated file.
A failing write is logged, at most once a minute, and does not fail the
request: the store, not the audit log, decides what happened.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple

from sluicegate.security.identity import Principal

log = logging.getLogger(__name__)

ALLOWED, DENIED, ERROR = "allowed", "denied", "error"
_ERROR_LOG_INTERVAL = 60.0


def rfc3339(t: float) -> str:
    ms = int(t * 1000) % 1000
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{ms:03d}Z"


class AuditRecord(NamedTuple):
    """One line to be (a tuple: a bulk creation makes one per workload, and a tuple costs a third of a
    frozen dataclass to make)."""

    principal: Principal
    verb: str
    kind: str
    namespace: str
    name: str
    outcome: str
    source: str = ""
    code: str = ""
    message: str = ""
    detail: str = ""

    def line(self, t: float, *, stamp: str = "") -> str:
        """The record as one JSON line at time ``t`` (``stamp``: ``rfc3339(t)`` when the caller has it).

        Byte for byte ``json.dumps`` of the record (compact, ``ensure_ascii=False``), written from its
        strings: a bulk creation writes a line per workload, and the encoder's set-up per line cost
        more than the line.
        """
        s = _json_str
        parts = ['{"time":', s(stamp or rfc3339(t)), _who(self.principal), ',"verb":', s(self.verb),
                 ',"kind":', s(self.kind), ',"namespace":', s(self.namespace), ',"name":', s(self.name),
                 ',"outcome":', s(self.outcome)]
        if self.code:
            parts += [',"code":', s(self.code)]
        if self.message:
            parts += [',"message":', s(self.message)]
        if self.detail:
            parts += [',"detail":', s(self.detail)]
        parts += [',"source":', s(self.source), "}\n"]
        return "".join(parts)


# What json.dumps(ensure_ascii=False) writes for a str.
_json_str: Callable[[str], str] = json.encoder.encode_basestring


@functools.lru_cache(maxsize=1024)
def _who(p: Principal) -> str:
    """``,"user":...,"groups":[...]`` of a line: the same few callers write most lines."""
    groups = json.dumps(sorted(p.groups), separators=(",", ":"), ensure_ascii=False)
    return f',"user":{_json_str(p.user)},"groups":{groups}'


class AuditLog:
    def __init__(self, path: str, *, clock: object = time.time) -> None:
        self.path = path
        self._clock = clock
        self._fd = -1
        self._last_error = 0.0
        self._open()

    def _open(self) -> None:
        d = Path(self.path).parent
        if not d.exists():
            d.mkdir(parents=True, mode=0o700, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        old, self._fd = self._fd, fd
        if old >= 0:
            os.close(old)

    def reopen(self) -> None:
        """Follow a rotated file (logrotate moved it away): SIGHUP calls this."""
        try:
            self._open()
        except OSError as exc:
            log.error("audit log %s: cannot reopen, still writing the old file: %s", self.path, exc)

    def write(self, records: Iterable[AuditRecord]) -> None:
        now = self._clock()  # type: ignore[operator]
        stamp = rfc3339(now)  # once for a batch: its records share the moment they were written
        data = "".join(r.line(now, stamp=stamp) for r in records).encode()
        if not data or self._fd < 0:
            return
        try:
            n = os.write(self._fd, data)
            while n < len(data):  # only on a full disk or a signal; never split a line silently
                n += os.write(self._fd, data[n:])
        except OSError as exc:
            mono = time.monotonic()
            if mono - self._last_error >= _ERROR_LOG_INTERVAL:
                self._last_error = mono
                log.error("audit log %s: write failed, records lost: %s", self.path, exc)

    def record(self, rec: AuditRecord) -> None:
        self.write((rec,))

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
