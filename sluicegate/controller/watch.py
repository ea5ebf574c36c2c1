"""Watchers of workloads: who is watching what, and the events each is sent.

Events are published by :meth:`Watchers.publish`, which the committer calls
last, after the store, the cache and the agents: a watcher never hears of a
change that did not survive the store write.

All watchers read one shared, bounded log of events (as the Kubernetes API
server's watch cache serves every watcher from one ring of events): an event
is appended once whatever the number of watchers, each watcher keeps only
its position in the log, and the bytes a transport makes of an event are
made once and shared (:attr:`WatchEvent.wire`).  A watcher that falls more
than :data:`WATCH_BACKLOG` events behind while its transport has been
blocked sending to it for :data:`SEND_GRACE_S` or longer, or more than
:data:`HARD_BACKLOG` backlogs behind while sending at all, is ended with
:class:`WatchExpired` (Kubernetes ends a watch that cannot keep up, and its
client re-lists and watches again); it then holds nothing but the one batch
it may be blocked sending, and no one else waits for it.  A watcher behind
only because it is gathering a message or waiting for its turn on the loop
is not ended: its reader is keeping up.  The grace is there for a loop that
is saturated: a send then waits for the loop's next turns too, and a
scheduling burst can publish a backlog's worth of events meanwhile however
fast the reader reads (the large-scale replay re-listed its watch 4 to 8
times in half its runs, each re-list a listing of up to 50,000 workloads);
the apiserver's watch cache likewise gives a blocked watcher a time budget
before it ends it.
"""

from __future__ import annotations

import asyncio
import itertools
import time
import weakref
from collections.abc import AsyncGenerator, Callable, Collection, Iterable

from sluicegate.controller.errors import FailedPrecondition
from sluicegate.manifest.encode import EncodedObject
from sluicegate.model.workloads import Workload

# The most events the log keeps for the slowest watcher; one further behind is ended (see the docstring).
WATCH_BACKLOG = 10_000
# How long a watcher's transport must have held its message before being behind by the backlog ends it,
# and how many backlogs behind end it while it sends at all (what bounds the log meanwhile).
SEND_GRACE_S = 1.0
HARD_BACKLOG = 4
# How often (in events published) the log drops what every watcher has read.
_TRIM_EVERY = 256
# While events keep coming, a watcher is sent at most one message per this
# long (the first event after a quiet spell goes at once): a message costs
# the transport far more than the events in it, and 200 watchers each sent a
# message per event would spend the controller's CPU on framing alone.
WATCH_FLUSH_S = 0.05
# A watcher ended while its client reads nothing (the transport blocks its
# send) and that has no deadline to end its send (a consumer in this process,
# not a gRPC call: see Watcher.deadline) has its task cancelled after this
# long, so a dead reader holds nothing forever.
STALLED_GRACE_S = 30.0


class WatchExpired(FailedPrecondition):
    """The watcher fell too far behind; its client must start a new watch (re-listing)."""


class WatchEvent:
    """One change to one workload, as every watcher is sent it."""

    __slots__ = ("type", "workload", "resource_version", "encoded", "time", "wire")

    def __init__(self, type_: str, workload: Workload, resource_version: int, encoded: EncodedObject,
                 time_: float | None = None) -> None:
        self.type = type_  # ADDED | MODIFIED | DELETED
        self.workload = workload
        self.resource_version = resource_version
        # The workload as stored by the write this event reports (encoded once,
        # by that write): watchers send it without encoding the workload again.
        self.encoded = encoded
        # Wall clock when the event was made (published, or listed for a new watch).
        self.time = time.time() if time_ is None else time_
        # What a transport made of this event, made by the first watcher that
        # sends it and reused by the others (opaque here).
        self.wire: object = None

    def __repr__(self) -> str:
        return f"WatchEvent({self.type}, {self.workload.namespace}/{self.workload.name}, rv={self.resource_version})"


class Watcher:
    __slots__ = ("namespace", "name", "namespaces", "everything", "cursor", "expired", "sending", "send_since",
                 "sent_at", "task", "cut", "deadline", "__weakref__")

    def __init__(self, namespace: str, name: str, namespaces: Collection[str] | None = None,
                 deadline: asyncio.Timeout | None = None) -> None:
        self.namespace = namespace
        self.name = name
        # None: every namespace; else only these (what the watching caller may see).
        self.namespaces = namespaces
        self.everything = not namespace and not name and namespaces is None
        # Sequence number of the next log event this watcher reads.
        self.cursor = 0
        self.expired = False
        # True while the consumer of the stream holds a batch (the transport sending it).
        self.sending = False
        # The watchers' clock when the transport took the message it holds (while sending).
        self.send_since = 0.0
        # Loop time when the last message was handed to the transport.
        self.sent_at = 0.0
        self.task: asyncio.Task[object] | None = None
        # The pending cancellation of a stalled watcher's call.
        self.cut: asyncio.TimerHandle | None = None
        # The consumer's deadline around its sends (a gRPC call's): an expired
        # watcher blocked sending has it brought to now, so the consumer stops
        # waiting on the send and ends the call with the expiry as its status,
        # which the client reads after what was in flight.  (Cancelling a gRPC
        # handler's task instead ends the call without a status: the client
        # would wait for one forever.)
        self.deadline = deadline

    def wants(self, wl: Workload) -> bool:
        return ((not self.namespace or wl.namespace == self.namespace) and (not self.name or wl.name == self.name)
                and (self.namespaces is None or wl.namespace in self.namespaces))


class Watchers:
    def __init__(self, backlog: int = WATCH_BACKLOG, flush_s: float = WATCH_FLUSH_S, *,
                 send_grace_s: float = SEND_GRACE_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.backlog = backlog
        self.flush_s = flush_s
        self.send_grace_s = send_grace_s
        self._clock = clock
        self._all: list[Watcher] = []
        # Watchers that want every event (no filter): their number.
        self._everything = 0
        # The shared log: _log[i] has sequence number _first + i.
        self._log: list[WatchEvent] = []
        self._first = 0
        self._wake = asyncio.Event()
        self._sleeping = False
        # Every Watcher not yet freed (a leak shows here after its watch ended).
        self._alive: weakref.WeakSet[Watcher] = weakref.WeakSet()
        self.expired_total = 0

    def __bool__(self) -> bool:
        return bool(self._all)

    def __len__(self) -> int:
        return len(self._all)

    @property
    def alive(self) -> int:
        """Watcher objects not yet freed (open watches, and ended ones still being torn down)."""
        return len(self._alive)

    @property
    def held(self) -> int:
        """Events the log holds for watchers that have not read them yet."""
        return len(self._log)

    @property
    def _next(self) -> int:
        return self._first + len(self._log)

    def publish(self, type_: str, wl: Workload, event: Callable[[str, Workload], WatchEvent]) -> None:
        """Append one event for the watchers that want it (``event`` builds it once, only if one does)."""
        self.publish_all(((type_, wl),), event)

    def publish_all(self, changes: Iterable[tuple[str, Workload]],
                    event: Callable[[str, Workload], WatchEvent]) -> None:
        """:meth:`publish` for each of ``changes`` in order (a decision's events: one call for all of them)."""
        everyone, log, backlog = self._all, self._log, self.backlog
        appended = False
        for type_, wl in changes:
            if not everyone:
                break  # the last watcher went (expired by a trim below): nobody to tell
            if not self._everything and not any(w.wants(wl) for w in everyone):
                continue
            log.append(event(type_, wl))
            appended = True
            n = len(log)
            if n % _TRIM_EVERY == 0 or n > backlog:
                self._notify()  # before a trim, as when each event was published on its own
                self._trim()
        if appended:
            self._notify()

    def _notify(self) -> None:
        """Wake every watcher waiting for an event (once per wait, however many events follow)."""
        if self._sleeping:
            self._sleeping = False
            wake, self._wake = self._wake, asyncio.Event()
            wake.set()

    def _trim(self) -> None:
        """Drop what every watcher has read; end the watchers too far behind to keep."""
        if not self._all:
            self._first = self._next
            self._log.clear()
            return
        floor = self._next - self.backlog
        hard = self._next - HARD_BACKLOG * self.backlog
        # Only a reader that is not reading is ended: one gathering or waiting for the loop moves on by itself,
        # and one whose send is young may only be waiting for the loop's next turns.
        stalled = self._clock() - self.send_grace_s
        slow = [w for w in self._all
                if w.sending and (w.cursor < hard or (w.cursor < floor and w.send_since <= stalled))]
        for w in slow:
            self._expire(w)
        oldest = min((w.cursor for w in self._all), default=self._next)
        del self._log[:oldest - self._first]
        self._first = oldest

    def _expire(self, w: Watcher) -> None:
        w.expired = True
        self.expired_total += 1
        self._remove(w)
        if w.sending and w.deadline is not None:
            # Its reader is not reading: stop waiting on the send it is blocked in.
            w.deadline.reschedule(asyncio.get_running_loop().time())
        elif w.sending and w.task is not None:
            # The send it is blocked in may never end.
            w.cut = asyncio.get_running_loop().call_later(STALLED_GRACE_S, w.task.cancel)
        else:
            self._notify()  # a waiting one learns at once that it has ended

    def _remove(self, w: Watcher) -> None:
        if w in self._all:
            self._all.remove(w)
            if w.everything:
                self._everything -= 1
        if not self._all:
            self._first = self._next
            self._log.clear()

    async def stream(
        self, w: Watcher, initial: Iterable[WatchEvent], *, max_batch: int,
    ) -> AsyncGenerator[list[WatchEvent], None]:
        """The watcher's events in order, as lists of up to ``max_batch``.

        Whatever is waiting goes at once after a quiet spell; while events keep
        coming, one list per ``flush_s`` gathers what came meanwhile.
        """
        w.cursor = self._next
        w.task = asyncio.current_task()
        self._all.append(w)
        self._alive.add(w)
        if w.everything:
            self._everything += 1
        loop = asyncio.get_running_loop()
        # Gathering stops short of the backlog, so a watcher never waits its way out of the log.
        gather = max(1, min(max_batch, self.backlog // 4))
        try:
            # Taken a batch at a time: a lazy ``initial`` makes each batch's events only as it goes.
            pending = iter(initial)
            while first := list(itertools.islice(pending, max_batch)):
                w.sending = True
                w.send_since = self._clock()
                yield first
                w.sending = False
            del first, pending
            log = self._log
            while True:
                if w.expired:
                    raise WatchExpired(
                        f"watch expired: it fell more than {self.backlog} events behind; "
                        "start a new watch with its initial events (re-list)")
                if w.cursor >= self._next:
                    self._sleeping = True
                    await self._wake.wait()
                    continue
                wait = w.sent_at + self.flush_s - loop.time()
                if wait > 0 and self._next - w.cursor < gather:
                    # Busy: let this watcher's next message gather what comes meanwhile.
                    await asyncio.sleep(wait)
                    continue
                start = w.cursor - self._first
                end = min(len(log), start + max_batch)
                if w.everything:
                    batch = log[start:end]
                    w.cursor += end - start
                else:
                    batch = []
                    # Bounded scan: at most 8 batches' worth of other workloads' events per wake.
                    end = min(len(log), start + 8 * max_batch)
                    i = start
                    while i < end and len(batch) < max_batch:
                        if w.wants(log[i].workload):
                            batch.append(log[i])
                        i += 1
                    w.cursor += i - start
                if batch:
                    w.sending = True
                    w.send_since = self._clock()
                    yield batch
                    w.sending = False
                    w.sent_at = loop.time()
                    del batch
        finally:
            w.sending = False
            w.task = None
            w.deadline = None
            if w.cut is not None:
                w.cut.cancel()  # drops its reference to the task (and, through it, to this watcher)
                w.cut = None
            self._remove(w)
