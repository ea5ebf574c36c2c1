"""Leader election among controllers sharing one PostgreSQL store: a lease with a fencing epoch.

One row of ``sluicegate_lease`` says who leads (``holder``), where it serves
(``address``), until when (``expires_at``, the database's clock) and under
which ``epoch``.  Every takeover increments the epoch; the leader's store
writes are conditional on it (``PostgresStore.set_epoch``), and agents refuse
commands from an epoch lower than the highest they have seen, so a paused or
partitioned old leader can neither write nor command once another took over.

The elector runs in its own thread with its own connection, so a busy event
loop does not delay renewals.  The leader counts its lease from when it
*sent* the last successful renewal (monotonic clock), and holds itself to a
renew deadline shorter than the lease: past it, it stops acting even before
anyone else could take over.

An epoch is the larger of the last one plus one and the database's clock in
milliseconds: it still grows if the database fails over to a replica that
had not yet received the last takeover (asynchronous replication), so agents
that saw the lost epoch do not refuse every later leader.

A takeover happens when the lease has expired, or early when the holder's
lease connection is gone from ``pg_stat_activity`` (its process died: the
kernel closed the socket and PostgreSQL ended the session) and it has missed
a renewal.  The early path makes a crashed leader's replacement take over in
about one renew interval instead of a whole lease; a live leader whose lease
connection dropped reconnects within that interval.  The condition and the
epoch increment are one UPDATE, so two followers cannot both win.  All
controllers must use the same database role (or one allowed to read
``pg_stat_activity`` for the others); otherwise only expiry applies.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

APPLICATION_PREFIX = "sluicegate-lease:"


@dataclass(frozen=True, slots=True)
class LeaseTiming:
    """How long a lease lasts, how often it is renewed, how often followers try."""

    # Kubernetes' leader election uses 15 s / 10 s / 2 s; a crashed leader is
    # replaced faster here (see the module docstring), so these only bound a
    # hung or partitioned one.
    duration: float = 15.0
    renew_deadline: float = 10.0
    renew_interval: float = 2.0
    retry_interval: float = 0.5

    def check(self) -> None:
        if not 0 < self.renew_interval < self.renew_deadline < self.duration:
            raise ValueError(
                f"lease timing: need 0 < leaseRenewInterval ({self.renew_interval}) < leaseRenewDeadline "
                f"({self.renew_deadline}) < leaseDuration ({self.duration})"
            )
        if self.retry_interval <= 0:
            raise ValueError(f"leaseRetryInterval: must be positive, not {self.retry_interval}")


@dataclass(frozen=True, slots=True)
class LeaseView:
    """The lease as last read: who leads, where, under which epoch."""

    holder: str
    address: str
    epoch: int


def new_holder_id() -> str:
    """Unique per process start; short enough for application_name (63 bytes) with the prefix."""
    host = socket.gethostname().split(".")[0][:20]
    return f"{host}-{os.getpid()}-{secrets.token_hex(4)}"


_ACQUIRE = """
UPDATE sluicegate_lease
   SET holder = %(me)s, address = %(address)s,
       epoch = GREATEST(epoch + 1, (extract(epoch FROM clock_timestamp()) * 1000)::bigint),
       expires_at = now() + make_interval(secs => %(duration)s), renewed_at = now()
 WHERE name = 'leader' AND epoch = %(seen)s
   AND (holder = '' OR holder = %(me)s
        OR expires_at < now()
        OR (renewed_at < now() - make_interval(secs => %(missed)s)
            AND NOT EXISTS (SELECT 1 FROM pg_stat_activity
                             WHERE application_name = %(prefix)s || sluicegate_lease.holder)))
RETURNING epoch
"""

_RENEW = """
UPDATE sluicegate_lease
   SET expires_at = now() + make_interval(secs => %(duration)s), renewed_at = now(), address = %(address)s
 WHERE name = 'leader' AND holder = %(me)s AND epoch = %(epoch)s
RETURNING epoch
"""

_RELEASE = """
UPDATE sluicegate_lease SET holder = '', expires_at = 'epoch'
 WHERE name = 'leader' AND holder = %(me)s AND epoch = %(epoch)s
"""

_READ = "SELECT holder, address, epoch FROM sluicegate_lease WHERE name = 'leader'"


class Elector:
    """Campaigns for the lease in a thread; reports becoming and ceasing to be leader.

    ``on_elected(epoch)`` and ``on_lost(reason)`` are called from the elector
    thread: wrap them with ``loop.call_soon_threadsafe`` to reach asyncio code.
    """

    def __init__(
        self,
        connect: Callable[[str], Any],
        *,
        address: str,
        timing: LeaseTiming = LeaseTiming(),
        holder: str | None = None,
        on_elected: Callable[[int], None],
        on_lost: Callable[[str], None],
        on_observed: Callable[[LeaseView], None] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        timing.check()
        self._connect = connect
        self.address = address
        self.timing = timing
        self.holder = holder or new_holder_id()
        self._on_elected = on_elected
        self._on_lost = on_lost
        self._on_observed = on_observed
        self._monotonic = monotonic
        self._conn: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        # Our epoch while we lead (None otherwise), and when the renewal that
        # last succeeded was sent (monotonic).
        self._epoch: int | None = None
        self._renewed_at = 0.0
        self.view: LeaseView | None = None
        self.last_error = ""

    # ----------------------------------------------------------- state

    @property
    def epoch(self) -> int | None:
        """Our epoch while we hold a lease we may still act on, else None."""
        with self._lock:
            if self._epoch is None or self._monotonic() - self._renewed_at >= self.timing.renew_deadline:
                return None
            return self._epoch

    def leading(self) -> bool:
        return self.epoch is not None

    # ----------------------------------------------------------- thread

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="lease", daemon=True)
        self._thread.start()

    def stop(self, *, release: bool = True, timeout: float = 5.0) -> None:
        """Stop campaigning; a leader gives its lease up so a follower takes over at once."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        with self._lock:
            epoch, self._epoch = self._epoch, None
        if release and epoch is not None:
            try:
                conn = self._connection()
                conn.execute(_RELEASE, {"me": self.holder, "epoch": epoch})
                log.info("gave up the leader lease (epoch %d)", epoch)
            except Exception as exc:  # the lease expires by itself
                log.warning("could not release the leader lease (%s); it expires by itself", exc)
        self._close()

    def resign(self) -> None:
        """Stop leading (the caller stepped down for its own reasons); campaign again from the next turn.

        Our own lease may be taken back at once, under a new epoch."""
        with self._lock:
            self._epoch = None

    def _run(self) -> None:
        while not self._stop.is_set():
            started = self._monotonic()
            try:
                if self._epoch is None:
                    self._campaign(started)
                else:
                    self._renew(started)
                self.last_error = ""
            except Exception as exc:
                self.last_error = f"{type(exc).__name__}: {exc}".strip()
                log.warning("leader lease: %s", self.last_error)
                self._close()
                self._check_deadline()
            wait = self.timing.renew_interval if self._epoch is not None else self.timing.retry_interval
            # The next renewal goes out one interval after this one was sent.
            self._stop.wait(max(0.0, wait - (self._monotonic() - started)))

    def _connection(self) -> Any:
        if self._conn is None or self._conn.closed:
            self._conn = self._connect(APPLICATION_PREFIX + self.holder)
        return self._conn

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass

    def _campaign(self, started: float) -> None:
        conn = self._connection()
        row = conn.execute(_READ).fetchone()
        if row is None:
            raise RuntimeError("sluicegate_lease has no 'leader' row (store schema not migrated?)")
        view = LeaseView(holder=row[0], address=row[1], epoch=int(row[2]))
        got = conn.execute(
            _ACQUIRE,
            {
                "me": self.holder,
                "address": self.address,
                "duration": self.timing.duration,
                "seen": view.epoch,
                "missed": self.timing.renew_interval * 1.5,
                "prefix": APPLICATION_PREFIX,
            },
        ).fetchone()
        if got is None:
            self._observed(view)
            return
        epoch = int(got[0])
        with self._lock:
            self._epoch = epoch
            self._renewed_at = started
        self._observed(LeaseView(self.holder, self.address, epoch))
        log.info("elected leader (epoch %d, previous holder %r)", epoch, view.holder or "none")
        self._on_elected(epoch)

    def _renew(self, started: float) -> None:
        conn = self._connection()
        got = conn.execute(
            _RENEW,
            {"me": self.holder, "epoch": self._epoch, "duration": self.timing.duration, "address": self.address},
        ).fetchone()
        if got is None:
            self._lose("another controller took the lease over")
            return
        with self._lock:
            self._renewed_at = started

    def _check_deadline(self) -> None:
        if self._epoch is not None and self._monotonic() - self._renewed_at >= self.timing.renew_deadline:
            self._lose(f"could not renew the lease within {self.timing.renew_deadline:g}s ({self.last_error})")

    def _lose(self, reason: str) -> None:
        with self._lock:
            epoch, self._epoch = self._epoch, None
        log.warning("lost the leader lease (epoch %s): %s", epoch, reason)
        self._on_lost(reason)

    def _observed(self, view: LeaseView) -> None:
        self.view = view
        if self._on_observed is not None:
            self._on_observed(view)
