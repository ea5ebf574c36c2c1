"""Start processes inside cgroup v1 hierarchies without a wrapper: fork from a thread that is already there.

On cgroup v1 a thread joins a cgroup alone (its TID written to the
cgroup's ``tasks`` file), and a process forked by a thread starts in that
thread's cgroups.  ``ThreadPlacer`` keeps one dedicated thread that, for
each start, writes its own TID into every leaf, forks the command, and
moves itself back to where it came from.  The command therefore starts
life inside its cgroups, with no shell exec'd before it (which costs more
CPU than ``true`` itself).

Why a dedicated thread and not the event loop's:

* memory is charged to the cgroup of the process's *owner* thread (the
  thread group leader, which runs the event loop): were that thread in a
  pod's memory cgroup, every allocation of the whole agent would count
  against the pod's limit meanwhile;
* the memory OOM killer picks among thread group leaders only, so a pod
  that hits its limit while our thread is in its cgroup cannot pick the
  agent (nor the child before its exec, which still shares the agent's
  memory: the kernel never picks a task in the middle of a vfork);
* nothing else runs on this thread, so nothing else the agent forks (probes,
  helpers) can land in a pod's cgroup.

The caller waits for the start (its thread blocks while ours forks): a
start stays one synchronous step for the runtime, and the thread never
competes with the event loop for the GIL.  The forked child is the
command itself (pid, start time and process group as with a wrapper that
execs).

Before the first start the driver checks that the thread can leave and
come back (``probe``); if it cannot (the agent's own cgroup is not writable,
as in some delegated setups), the driver keeps using the shell wrapper.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Generic, TypeVar, cast

__all__ = ["PlacementError", "ThreadPlacer", "IDLE_SECONDS"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")

# A placer thread that has had nothing to do for this long ends; the next
# start creates another (a thread costs ~0.1 ms to create, nothing to keep).
IDLE_SECONDS: Final = 60.0

PROC_THREAD_SELF_CGROUP: Final = Path("/proc/thread-self/cgroup")


class PlacementError(Exception):
    """The starter thread could not move to a cgroup; ``path`` is the ``tasks`` file (or what named it), ``detail`` why.

    Raised by ``ThreadPlacer.run`` only before anything was started.
    """

    def __init__(self, *, path: str, detail: str) -> None:
        self.path = path
        self.detail = detail
        super().__init__(f"the starter thread could not move to {path}: {detail}")


def _write_tid(tasks: str, tid: bytes) -> None:
    try:
        fd = os.open(tasks, os.O_WRONLY | os.O_CLOEXEC)
        try:
            os.write(fd, tid)
        finally:
            os.close(fd)
    except OSError as exc:
        raise PlacementError(path=tasks, detail=exc.strerror or str(exc)) from exc


def _open_home(paths: Sequence[str]) -> list[int]:
    # Kept open for the thread's life: the way back is taken after every
    # start, and looking the path up again costs as much as the move.
    fds: list[int] = []
    try:
        for path in paths:
            try:
                fds.append(os.open(path, os.O_WRONLY | os.O_CLOEXEC))
            except OSError as exc:
                raise PlacementError(path=path, detail=exc.strerror or str(exc)) from exc
    except PlacementError:
        for fd in fds:
            os.close(fd)
        raise
    return fds


def _own_paths(hierarchies: Sequence[tuple[str, Path]], cgroup_file: Path) -> tuple[str, ...]:
    """The calling thread's ``tasks`` file in each ``(controller, mount)`` hierarchy."""
    lines = cgroup_file.read_text().splitlines()
    found: list[str] = []
    for controller, mount in hierarchies:
        for line in lines:
            parts = line.split(":", 2)
            if len(parts) == 3 and controller in parts[1].split(","):
                found.append(str(mount / parts[2].lstrip("/") / "tasks"))
                break
        else:
            raise PlacementError(path=str(cgroup_file), detail=f"no line for the {controller} hierarchy")
    return tuple(found)


@dataclass(slots=True)
class _Job(Generic[_T]):
    enter: tuple[str, ...]
    start: Callable[[], _T]


@dataclass(slots=True)
class _Outcome:
    value: object = None
    error: BaseException | None = None


class _Worker:
    """One placer thread.  It retires (ends) when idle, or when it could not get back home."""

    def __init__(self, placer: ThreadPlacer) -> None:
        self._placer = placer
        self.jobs: queue.SimpleQueue[_Job[object]] = queue.SimpleQueue()
        self.outcomes: queue.SimpleQueue[_Outcome] = queue.SimpleQueue()
        self.retired = False
        self.home: tuple[str, ...] = ()
        self._home_fds: list[int] = []
        self.thread = threading.Thread(target=self._main, name="cgroup-placer", daemon=True)
        self.thread.start()

    def _main(self) -> None:
        tid = str(threading.get_native_id()).encode()
        try:
            # Home is where the thread was created: the cgroups of the thread
            # that asked for it (the event loop's, i.e. the agent's).
            self.home = _own_paths(self._placer.hierarchies, self._placer.cgroup_file)
            self._home_fds = _open_home(self.home)
        except OSError as exc:
            self._retire_at_start(PlacementError(path=str(self._placer.cgroup_file), detail=exc.strerror or str(exc)))
            return
        except PlacementError as exc:
            self._retire_at_start(exc)
            return
        self.outcomes.put(_Outcome())  # ready
        try:
            self._serve(tid)
        finally:
            for fd in self._home_fds:
                os.close(fd)

    def _retire_at_start(self, error: PlacementError) -> None:
        self.retired = True
        self.outcomes.put(_Outcome(error=error))

    def _serve(self, tid: bytes) -> None:
        while not self.retired:
            try:
                job = self.jobs.get(timeout=self._placer.idle_seconds)
            except queue.Empty:
                # Retire only if no caller is between handing a job over and
                # reading its outcome (callers hold the lock for that span).
                if self._placer.lock.acquire(blocking=False):
                    try:
                        if self.jobs.empty():
                            self.retired = True
                    finally:
                        self._placer.lock.release()
                continue
            try:
                outcome = self._run(job, tid)
            except BaseException as exc:  # the caller waits for an outcome, whatever happens
                self.retired = True
                outcome = _Outcome(error=exc)
            self.outcomes.put(outcome)

    def _run(self, job: _Job[object], tid: bytes) -> _Outcome:
        outcome = _Outcome()
        entered = False
        try:
            for tasks in job.enter:
                entered = True
                _write_tid(tasks, tid)
            outcome.value = job.start()
        except BaseException as exc:  # handed to the caller, who re-raises it
            outcome.error = exc
        finally:
            if entered:
                try:
                    for path, fd in zip(self.home, self._home_fds, strict=False):
                        try:
                            os.write(fd, tid)
                        except OSError as exc:
                            raise PlacementError(path=path, detail=exc.strerror or str(exc)) from exc
                except PlacementError as exc:
                    # Stuck in a pod's cgroup: end the thread (which leaves
                    # it); the next start gets a new one.  What was started
                    # stands: it was placed.
                    log.error("%s; the starter thread ends and a new one takes over", exc)
                    self.retired = True
        return outcome


class ThreadPlacer:
    """Runs ``start`` on a thread that has entered the given cgroups (see the module docstring).

    ``hierarchies`` are ``(controller, mount point)`` pairs, one per
    hierarchy the leaves live in, used to find the thread's way back.
    Thread-safe: callers are served one at a time.
    """

    def __init__(
        self,
        *,
        hierarchies: Sequence[tuple[str, Path]],
        idle_seconds: float = IDLE_SECONDS,
        cgroup_file: Path = PROC_THREAD_SELF_CGROUP,
    ) -> None:
        self.hierarchies = tuple(hierarchies)
        self.idle_seconds = idle_seconds
        self.cgroup_file = cgroup_file
        self.lock = threading.Lock()
        self._worker: _Worker | None = None

    def run(self, enter: Sequence[str], start: Callable[[], _T]) -> _T:
        """Enter each ``tasks`` file in ``enter`` (in order), call ``start``, come back; return its result.

        Raises PlacementError, without calling ``start``, when a cgroup
        cannot be entered; re-raises whatever ``start`` raises.
        """
        with self.lock:
            worker = self._worker
            if worker is None or worker.retired:
                worker = self._worker = _Worker(self)
                ready = worker.outcomes.get()
                if ready.error is not None:
                    self._worker = None
                    raise ready.error
            worker.jobs.put(_Job(enter=tuple(enter), start=start))
            try:
                outcome = worker.outcomes.get()
            except BaseException:
                # Interrupted while waiting: the outcome would reach the next
                # caller, so that thread serves nobody else (it ends after this job).
                worker.retired = True
                self._worker = None
                raise
        if outcome.error is not None:
            raise outcome.error
        return cast(_T, outcome.value)

    def probe(self, enter: Sequence[str]) -> None:
        """Enter ``enter`` and come back once, starting nothing; raises PlacementError if either fails."""
        self.run(enter, lambda: None)
        worker = self._worker
        if worker is not None and worker.retired:
            raise PlacementError(path=" ".join(worker.home), detail="the thread could not return to its own cgroups")

    def thread_ids(self) -> tuple[int, ...]:
        """Native ids of the live placer thread, if any (for tests and diagnostics)."""
        worker = self._worker
        if worker is None or worker.retired or worker.thread.native_id is None:
            return ()
        return (worker.thread.native_id,)
