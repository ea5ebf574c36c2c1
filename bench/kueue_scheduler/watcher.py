"""The bench's observer: a process of its own that watches workloads and feeds the recorder.

A real observer of a cluster is a client apart from the one submitting to
it.  When one bench process did both, the creation burst (50,000 workloads
through the client library's stream) kept its event loop from reading the
watch, the controller's transport to it blocked, and the controller ended
the watch once it fell more than its backlog behind (``watch expired``);
every re-list then cost the controller a listing and encoding of every
workload, which the controller's figures then carried.  Here the watch and
the recorder live in a child process (``multiprocessing``, spawned), so the
operating system gives the reader its own share of the CPU whatever the
submitter does.  While the run goes the child only keeps each event's bytes
with its receipt time (a few µs an event: it keeps up, and takes little CPU
from the controller on a two-core machine); it decodes them into the
recorder once the controller has exited (about 25 µs an event, 10 of them
``json.loads``).  It sees the run's end from the bytes of the Finished
condition; the recorder's count decides whether the run completed.

Times: every ``at`` is ``time.monotonic()`` taken in this child when the
event is read; on Linux CLOCK_MONOTONIC is one clock for every process of
the machine, so they compare with the submitter's creation times as they
did when one process took both.

The conversation over the pipe (parent -> child, child -> parent)::

    child:  ("waiting",)           imported, recorder built; waits for the address
    parent: ("watch", address)
    child:  ("watching",)          its watch call is issued
    parent: ("queues", at)         the queues exist since ``at`` (recorder.queue_created); sent
                                   before the first creation, so it is in the pipe before any
                                   workload event can reach the child (which reads it first)
    child:  ("done", at) or ("failed", why)   every workload finished at ``at``, or the watch failed
    parent: ("stop",)              stop watching (also when the run timed out)
    parent: ("send",)              once the controller has exited
    child:  ("result", Outcome)    the recorder and the watch's counters; then it exits

The recorder is handed over only when asked for, after the controller's
exit, so that pickling it neither takes CPU from the controller nor
lengthens its wall.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import multiprocessing
import os
import sys
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import grpc

from bench.kueue_scheduler.config import Plan
from bench.kueue_scheduler.recorder import Observation, Recorder, condition_flags
from sluicegate.client import Client, ClientError

# How many times the bench's watch may expire (fall behind the controller's backlog) and re-list.
WATCH_RESTARTS = 20
# How long the parent waits for the child to start, to answer, and to hand its result over.
START_TIMEOUT = 60.0
ANSWER_TIMEOUT = 60.0
RESULT_TIMEOUT = 600.0
# How the controller's JSON says Finished is True (its encoder writes conditions in this key order).
# Only to see the run end while it goes: the recorder decodes every event after the run.
_FINISHED = b'"type":"Finished","status":"True"'


def _ts(text: str | None) -> float | None:
    if not text:
        return None
    return dt.datetime.fromisoformat(text).timestamp()


def observation(wl: dict[str, Any]) -> Observation:
    meta = wl.get("metadata", {})
    conds = {c["type"]: c for c in wl.get("status", {}).get("conditions", [])}
    reserved, admitted, evicted, finished = condition_flags({t: c["status"] for t, c in conds.items()})
    created = _ts(meta.get("creationTimestamp"))
    stamped_admit = stamped_finish = None
    if created is not None:
        if admitted and "QuotaReserved" in conds:
            t = _ts(conds["QuotaReserved"].get("lastTransitionTime"))
            stamped_admit = None if t is None else t - created
        if finished:
            t = _ts(conds["Finished"].get("lastTransitionTime"))
            stamped_finish = None if t is None else t - created
    dispatch = completion = None
    timeline: tuple[float, float, float, float] | None = None
    extra = wl.get("status", {}).get("extra", {})
    pods = extra.get("pods") or []
    if finished:
        pods = pods or extra.get("lastPods") or []
        started = [p["startedAt"] for p in pods if p.get("startedAt")]
        ended = [p["finishedAt"] for p in pods if p.get("finishedAt")]
        reserved_at = _ts(conds.get("QuotaReserved", {}).get("lastTransitionTime"))
        finished_at = _ts(conds["Finished"].get("lastTransitionTime"))
        if started and reserved_at is not None:
            dispatch = min(started) - reserved_at
        if ended and finished_at is not None:
            completion = finished_at - max(ended)
        if started and ended and reserved_at is not None and finished_at is not None:
            timeline = (reserved_at, min(started), max(ended), finished_at)
    return Observation(namespace=meta.get("namespace", ""), name=meta.get("name", ""), quota_reserved=reserved,
                       admitted=admitted, evicted=evicted, finished=finished, stamped_admit_s=stamped_admit,
                       stamped_finish_s=stamped_finish, dispatch_s=dispatch, completion_s=completion, timeline=timeline,
                       pending_message="" if reserved else conds.get("QuotaReserved", {}).get("message", ""),
                       pod_phases=tuple(p.get("phase", "") for p in pods),
                       pod_nodes=tuple(str(p.get("node", "")) for p in pods if not p.get("replaced")) if finished else ())


@dataclass(slots=True)
class Outcome:
    """What the observer saw: the recorder, and how its watch went."""

    recorder: Recorder
    # When the event that showed the last workload finished was read (None: not all finished).
    last_finished_at: float | None
    error: str
    restarts: int
    # Per watch message, seconds from the controller's publishing of its first event to its receipt here.
    lags: list[float]
    # The observer process's own CPU (user + system) until the watch stopped, seconds.
    cpu_s: float
    # The events as received, until replay() has decoded them into the recorder.
    received: list[tuple[float, bytes]]
    # CPU of that decoding (after the controller's exit), seconds.
    decode_cpu_s: float = 0.0


# ------------------------------------------------------------------ the child


def _child(conn: Connection, plan: Plan, progress_every: float) -> None:
    recorder = Recorder(plan)
    conn.send(("waiting",))
    try:
        msg = conn.recv()
    except EOFError:
        return
    if msg[0] != "watch":
        return
    held: list[Outcome] = []
    # Handed out through a list, not as the coroutine's result: asyncio.run's clean-up may repr the
    # finished main task, and the repr of a result holding 50,000 workload states takes seconds.
    asyncio.run(_observe(conn, msg[1], recorder, progress_every, held))
    outcome = held[0]
    try:
        while conn.recv()[0] != "send":
            pass
    except EOFError:
        return
    replay(outcome)
    conn.send(("result", outcome))
    conn.close()


async def _observe(conn: Connection, address: str, recorder: Recorder, progress_every: float,
                   into: list[Outcome]) -> None:
    loop = asyncio.get_running_loop()
    total = len(recorder.plan.workloads)
    stopping = asyncio.Event()
    error: list[str] = []
    lags: list[float] = []
    restarts = 0

    # Every event's body with its receipt time, decoded into the recorder once the controller has
    # exited (replay()): reading costs this process a few µs an event, so it keeps up with the
    # controller whatever the submitter does, and takes less CPU from it on a small machine.
    received: list[tuple[float, bytes]] = []
    planned = set(recorder._by_key)
    finished: set[tuple[str, str]] = set()

    def on_message() -> None:
        try:
            if not conn.poll():
                return
            msg = conn.recv()
        except EOFError:  # the parent is gone: nothing to report to
            loop.remove_reader(conn.fileno())
            stopping.set()
            return
        if msg[0] == "queues":
            for q in recorder.plan.queues:
                recorder.queue_created(q.name, msg[1])
        elif msg[0] == "stop":
            stopping.set()

    async def watch(client: Client) -> None:
        nonlocal restarts
        try:
            for attempt in range(WATCH_RESTARTS + 1):
                if attempt == 0:
                    # Runs once this task has suspended, and so has issued its watch call: the parent then
                    # creates the queues (one round trip) before any workload exists, as when one
                    # process did both.
                    loop.call_soon(conn.send, ("watching",))
                try:
                    # send_initial: a workload created before the watch registered still arrives (late, as
                    # ADDED); after an expiry the re-list repeats states the recorder has (it keeps the first).
                    async for batch in client.watch_workload_events(send_initial=True):
                        at = time.monotonic()
                        # How long the batch's oldest event waited after the controller published it
                        # (both wall clocks of this machine): how far behind this reader ran.
                        lags.append(time.time() - batch[0].time)
                        for ev in batch:
                            body = ev.workload.json
                            received.append((at, body))
                            if _FINISHED in body:
                                wl = ev.workload
                                key = (wl.namespace, wl.name)
                                if key in planned and key not in finished:
                                    finished.add(key)
                                    if len(finished) >= total:
                                        conn.send(("done", at))
                                        return
                    return
                except ClientError as exc:
                    # A reader slower than the controller is ended as Kubernetes ends a watch that fell
                    # behind; like an informer, re-list.
                    if exc.code != grpc.StatusCode.FAILED_PRECONDITION or "watch expired" not in str(exc):
                        raise
                    restarts += 1
            raise RuntimeError(f"the watch expired {WATCH_RESTARTS + 1} times")
        except Exception as exc:  # the run cannot finish without its watch: say why
            error.append(f"{type(exc).__name__}: {exc}")
            conn.send(("failed", error[0]))

    async def progress() -> None:
        t0 = time.monotonic()
        while True:
            await asyncio.sleep(progress_every)
            print(f"  {time.monotonic() - t0:6.0f}s: {len(received)} watch events, {len(finished)}/{total} finished",
                  file=sys.stderr, flush=True)

    loop.add_reader(conn.fileno(), on_message)
    async with Client(address, timeout=120) as client:
        watcher = asyncio.create_task(watch(client), name="watch")
        reporter = asyncio.create_task(progress(), name="progress") if progress_every > 0 else None
        try:
            await stopping.wait()
        finally:
            loop.remove_reader(conn.fileno())
            for t in (watcher, reporter):
                if t is not None:
                    t.cancel()
            await asyncio.gather(*(t for t in (watcher, reporter) if t is not None), return_exceptions=True)
    into.append(Outcome(recorder=recorder, last_finished_at=None, error=error[0] if error else "", restarts=restarts,
                        lags=lags, cpu_s=sum(os.times()[:2]), received=received))


def replay(outcome: Outcome) -> None:
    """Decode the received events into the recorder, in order, at their receipt times."""
    recorder = outcome.recorder
    started = sum(os.times()[:2])
    for at, body in outcome.received:
        before = recorder.finished
        recorder.observe(observation(json.loads(body)), at)
        if recorder.finished != before:
            outcome.last_finished_at = at
    outcome.received = []
    outcome.decode_cpu_s = sum(os.times()[:2]) - started


# ----------------------------------------------------------------- the parent


class WatchFailed(RuntimeError):
    pass


def _settle(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class Observer:
    """The parent's handle on the observer process."""

    def __init__(self, plan: Plan, *, progress_every: float) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_child, args=(child, plan, progress_every), name="bench-observer", daemon=True)
        self._proc.start()
        child.close()
        self.done_at: float | None = None
        self.error = ""

    def _expect(self, want: str, timeout: float) -> tuple[Any, ...]:
        try:
            if not self._conn.poll(timeout):
                raise WatchFailed(f"the observer process did not say {want!r} within {timeout:g}s")
            msg: tuple[Any, ...] = self._conn.recv()
        except EOFError:
            raise WatchFailed(f"the observer process exited with {self._proc.exitcode}") from None
        if msg[0] == "failed":
            self.error = msg[1]
            raise WatchFailed(msg[1])
        if msg[0] != want:
            raise WatchFailed(f"the observer process said {msg[0]!r} where {want!r} was expected")
        return msg

    def wait_started(self) -> None:
        """Until the child has imported what it needs and built its recorder (before the controller starts)."""
        self._expect("waiting", START_TIMEOUT)

    def watch(self, address: str) -> None:
        """Start watching; returns once the child has issued its watch call."""
        self._conn.send(("watch", address))
        self._expect("watching", ANSWER_TIMEOUT)

    def queues_created(self, at: float) -> None:
        """Have the queues' creation recorded (the child decodes workload events only after the run)."""
        self._conn.send(("queues", at))

    async def finished(self) -> None:
        """Until every workload has finished (``done_at``) or the watch failed (``error``)."""
        loop = asyncio.get_running_loop()
        while self.done_at is None and not self.error:
            if not self._conn.poll():
                readable: asyncio.Future[None] = loop.create_future()
                loop.add_reader(self._conn.fileno(), _settle, readable)
                try:
                    await readable
                finally:
                    loop.remove_reader(self._conn.fileno())
            try:
                msg = self._conn.recv()
            except EOFError:
                self.error = f"the observer process exited with {self._proc.exitcode}"
                return
            if msg[0] == "done":
                self.done_at = msg[1]
            elif msg[0] == "failed":
                self.error = msg[1]

    def stop_watching(self) -> None:
        """End the watch now (the run is over or timed out); the recorder stays in the child until outcome()."""
        self._conn.send(("stop",))

    def outcome(self) -> Outcome:
        """Take the recorder back (after stop_watching); the child then exits."""
        try:
            self._conn.send(("send",))
            while True:
                if not self._conn.poll(RESULT_TIMEOUT):
                    raise WatchFailed(f"the observer process sent no result within {RESULT_TIMEOUT:g}s")
                msg = self._conn.recv()
                if msg[0] == "result":
                    out: Outcome = msg[1]
                    return out
        finally:
            self.close()

    def close(self) -> None:
        """Let the child go (it exits at the end of its pipe) and reap it."""
        if not self._conn.closed:
            self._conn.close()
        self._proc.join(timeout=10)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join(timeout=10)
