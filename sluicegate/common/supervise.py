"""One supervisor for a daemon's long-lived tasks, its stop signals and its exit deadline.

A daemon is a handful of named root tasks (the gRPC server, the scheduling
loop, the agent link, the watchdog...) that should all run until it is told
to stop. If any one of them ends on its own -- returns, crashes or is
cancelled by someone else -- the daemon can no longer do its job, so the
supervisor stops the rest and reports the failure, and the process exits
non-zero for ``Restart=on-failure`` to act on.

How a daemon's ``main`` puts the pieces together::

    stop = new_stop_future()
    with stop_on_signals(stop):
        async with HealthServer(...) as health:
            notifier.ready()                      # ports are bound: say so

            def stopping(reason: str) -> None:    # shutdown order, step one
                health.mark_stopping(reason)
                notifier.stopping()
                arm_hard_deadline(DEFAULT_HARD_DEADLINE)

            await supervise({"grpc": serve(...), "scheduler": run(...)},
                            stop=stop, on_stopping=stopping)

Signals do nothing but resolve ``stop``; all the stopping happens here, in
ordinary code with ordinary ``finally`` blocks. A root task drains in its own
``finally`` when cancelled (the gRPC task calls ``server.stop(grace)``), and
must finish that within the supervisor's ``grace``.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import faulthandler
import logging
import signal
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from typing import Any, Final

__all__ = [
    "DEFAULT_GRACE",
    "DEFAULT_HARD_DEADLINE",
    "Outcome",
    "RootTaskExited",
    "arm_hard_deadline",
    "disarm_hard_deadline",
    "new_stop_future",
    "request_stop",
    "stop_on_signals",
    "supervise",
]

logger = logging.getLogger(__name__)

# The shutdown budget, in seconds, against the units' TimeoutStopSec=60:
# root tasks get DEFAULT_GRACE to drain after they are cancelled, and the whole
# process exits by itself at DEFAULT_HARD_DEADLINE after shutdown began. That
# leaves systemd's SIGKILL unused: our own exit comes with a stack dump
# saying what hung, and the 10 s margin covers the teardown after supervise()
# returns (closing the store, the health port, the interpreter).
DEFAULT_GRACE: Final = 20.0
DEFAULT_HARD_DEADLINE: Final = 50.0


class Outcome(enum.Enum):
    """How a root task ended when it should not have."""

    RETURNED = "returned"
    CANCELLED = "was cancelled"
    STUCK = "did not stop within the grace period"


class RootTaskExited(Exception):
    """A root task ended without raising (or did not end at all when told to)."""

    def __init__(self, *, task: str, outcome: Outcome) -> None:
        self.task = task
        self.outcome = outcome
        super().__init__(f"root task {task!r} {outcome.value}; the daemon stops and exits non-zero")


def new_stop_future() -> asyncio.Future[str]:
    """A future that resolves, with the reason, when the daemon should stop."""
    return asyncio.get_running_loop().create_future()


def request_stop(stop: asyncio.Future[str], reason: str) -> bool:
    """Resolve ``stop`` with ``reason``; False if a stop was already requested."""
    if stop.done():
        return False
    stop.set_result(reason)
    return True


def _stop_reason(stop: asyncio.Future[str]) -> str:
    if stop.cancelled():
        return "the stop future was cancelled"
    error = stop.exception()
    if error is not None:
        return f"the stop future failed: {error!r}"
    return stop.result()


def _on_signal(stop: asyncio.Future[str], signum: signal.Signals) -> None:
    if request_stop(stop, f"received {signum.name}"):
        logger.info("received %s; stopping", signum.name)
    else:
        logger.info(
            "received %s while already stopping (%s); shutdown continues", signum.name, _stop_reason(stop)
        )


@contextlib.contextmanager
def stop_on_signals(
    stop: asyncio.Future[str],
    *,
    signals: Sequence[signal.Signals] = (signal.SIGTERM, signal.SIGINT),
) -> Iterator[None]:
    """While inside, the given signals resolve ``stop`` and do nothing else.

    Must be entered from the main thread with the loop running. On exit the
    handlers are removed, and the signals regain their default behaviour.
    """
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []
    try:
        for signum in signals:
            loop.add_signal_handler(signum, _on_signal, stop, signum)
            installed.append(signum)
        yield
    finally:
        for signum in reversed(installed):
            loop.remove_signal_handler(signum)


def _report_exit(task: asyncio.Task[object], name: str) -> BaseException:
    """Log a root task that ended on its own; return the error it counts as."""
    if task.cancelled():
        logger.error("root task %r was cancelled unexpectedly; stopping the others", name)
        return RootTaskExited(task=name, outcome=Outcome.CANCELLED)
    error = task.exception()
    if error is None:
        logger.error("root task %r returned unexpectedly; stopping the others", name)
        return RootTaskExited(task=name, outcome=Outcome.RETURNED)
    logger.error("root task %r crashed; stopping the others", name, exc_info=error)
    error.add_note(f"raised by root task {name!r}")
    return error


async def _stop_tasks(running: Mapping[asyncio.Task[object], str], *, grace: float) -> list[BaseException]:
    """Cancel the tasks still running, wait up to ``grace``, and return what went wrong."""
    remaining = [task for task in running if not task.done()]
    for task in remaining:
        task.cancel()
    if not remaining:
        return []
    done, pending = await asyncio.wait(remaining, timeout=grace)
    failures: list[BaseException] = []
    for task in sorted(done, key=running.__getitem__):
        name = running[task]
        if task.cancelled():
            logger.debug("root task %r stopped", name)
            continue
        error = task.exception()
        if error is None:
            # It caught the CancelledError and returned. Shutdown still
            # proceeds, but the task would also ignore a cancellation meant to
            # interrupt one of its steps, which is the bug worth reporting.
            logger.warning("root task %r swallowed its cancellation and returned", name)
            continue
        logger.error("root task %r failed while stopping", name, exc_info=error)
        error.add_note(f"raised by root task {name!r} while stopping")
        failures.append(error)
    for task in sorted(pending, key=running.__getitem__):
        name = running[task]
        logger.error("root task %r did not stop within %gs of being cancelled", name, grace)
        failures.append(RootTaskExited(task=name, outcome=Outcome.STUCK))
    return failures


def _begin_stopping(reason: str, on_stopping: Callable[[str], None] | None) -> None:
    logger.info("stopping root tasks: %s", reason)
    if on_stopping is not None:
        try:
            on_stopping(reason)
        except Exception:
            # Shutdown must go on regardless; the hook's work is best effort.
            logger.exception("the on_stopping hook raised; continuing the shutdown")


async def supervise(
    tasks: Mapping[str, Coroutine[Any, Any, object]],
    *,
    stop: asyncio.Future[str],
    grace: float = DEFAULT_GRACE,
    on_stopping: Callable[[str], None] | None = None,
) -> str:
    """Run the named root tasks until ``stop`` resolves or any of them ends.

    Then: call ``on_stopping(reason)`` (mark health not ready, tell systemd,
    arm the hard deadline), cancel the tasks still running, and wait up to
    ``grace`` seconds for them. When a task ends on its own, ``stop`` is
    resolved with the reason too, so anything else waiting on it learns.

    Returns the stop reason when the stop was requested and every task
    stopped cleanly. Otherwise raises an exception group holding every
    failure: a crash (the task's own exception, with a note naming the task),
    or a ``RootTaskExited`` for a task that returned, was cancelled by
    someone else, or would not stop. Each failure has already been logged
    here with its task's name, so the caller only turns the group into a
    non-zero exit status. If ``supervise`` itself is cancelled it stops the
    tasks the same way (hook included) and lets the cancellation through.
    """
    if not tasks:
        raise ValueError("supervise() needs at least one root task")
    running: dict[asyncio.Task[object], str] = {
        asyncio.create_task(coro, name=name): name for name, coro in tasks.items()
    }
    try:
        watched: set[asyncio.Future[Any]] = {*running, stop}
        await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        # Cancelled from outside (the loop is being torn down): stop the tasks
        # all the same, but the cancellation is what the caller gets.
        _begin_stopping("the supervisor was cancelled", on_stopping)
        await _stop_tasks(running, grace=grace)
        raise

    ended = sorted((name, task) for task, name in running.items() if task.done())
    failures = [_report_exit(task, name) for name, task in ended]
    if ended:
        request_stop(stop, "root task ended: " + ", ".join(name for name, _ in ended))
    reason = _stop_reason(stop)
    _begin_stopping(reason, on_stopping)
    failures += await _stop_tasks(running, grace=grace)
    if failures:
        raise BaseExceptionGroup(f"{len(failures)} root task failure(s); {reason}", failures)
    logger.info("all root tasks stopped")
    return reason


def arm_hard_deadline(seconds: float) -> None:
    """Exit with status 1 after ``seconds`` unless ``disarm_hard_deadline`` runs first.

    Meant to be armed when shutdown begins, with a value below the unit's
    TimeoutStopSec. It runs in faulthandler's own thread, so it fires even
    when the event loop is wedged in a blocking call; before exiting it
    writes every thread's stack to the real stderr (fd 2, the journal under
    systemd), showing what held the shutdown up. There is one such timer per
    process; arming again restarts it.
    """
    logger.info("shutdown must finish within %gs, or the process exits with status 1", seconds)
    faulthandler.dump_traceback_later(seconds, exit=True, file=2)


def disarm_hard_deadline() -> None:
    faulthandler.cancel_dump_traceback_later()
