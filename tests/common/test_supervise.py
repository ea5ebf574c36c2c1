"""The root-task supervisor, stop signals and the hard shutdown deadline."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import urllib.request
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from sluicegate.common.supervise import (
    Outcome,
    RootTaskExited,
    new_stop_future,
    request_stop,
    stop_on_signals,
    supervise,
)

DEADLINE = 5.0  # seconds; only reached when something is broken
REPO = Path(__file__).resolve().parents[2]


class Trace:
    """What the tasks and hooks did, in order, plus a way to wait for tasks to start."""

    def __init__(self, *names: str) -> None:
        self.events: list[str] = []
        self._started = {name: asyncio.Event() for name in names}

    async def forever(self, name: str) -> None:
        self._started[name].set()
        try:
            await asyncio.Event().wait()
        finally:
            self.events.append(f"stopped {name}")

    async def all_started(self) -> None:
        async with asyncio.timeout(DEADLINE):
            for started in self._started.values():
                await started.wait()

    def on_stopping(self, reason: str) -> None:
        self.events.append(f"on_stopping: {reason}")


async def test_stop_request_cancels_every_task_after_the_hook(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="sluicegate.common.supervise")
    trace = Trace("grpc", "scheduler")
    stop = new_stop_future()
    run = asyncio.create_task(
        supervise(
            {"grpc": trace.forever("grpc"), "scheduler": trace.forever("scheduler")},
            stop=stop,
            on_stopping=trace.on_stopping,
        )
    )
    await trace.all_started()
    assert request_stop(stop, "admin asked") is True
    assert await asyncio.wait_for(run, DEADLINE) == "admin asked"
    assert trace.events == ["on_stopping: admin asked", "stopped grpc", "stopped scheduler"]
    assert [r.getMessage() for r in caplog.records] == [
        "stopping root tasks: admin asked",
        "all root tasks stopped",
    ]


async def _crash(after: asyncio.Event) -> None:
    await after.wait()
    raise ValueError("store returned a row with no name")


async def test_a_crash_stops_the_others_and_surfaces(caplog: pytest.LogCaptureFixture) -> None:
    trace = Trace("link", "health")
    go = asyncio.Event()
    stop = new_stop_future()
    run = asyncio.create_task(
        supervise(
            {"link": trace.forever("link"), "scheduler": _crash(go), "health": trace.forever("health")},
            stop=stop,
            on_stopping=trace.on_stopping,
        )
    )
    await trace.all_started()
    go.set()
    with pytest.raises(BaseExceptionGroup) as caught:
        await asyncio.wait_for(run, DEADLINE)

    (error,) = caught.value.exceptions
    assert (type(error), str(error), error.__notes__) == (
        ValueError,
        "store returned a row with no name",
        ["raised by root task 'scheduler'"],
    )
    assert str(caught.value) == "1 root task failure(s); root task ended: scheduler (1 sub-exception)"
    assert stop.result() == "root task ended: scheduler"
    assert trace.events == ["on_stopping: root task ended: scheduler", "stopped link", "stopped health"]
    assert [(r.levelname, r.getMessage()) for r in caplog.records if r.levelno >= logging.ERROR] == [
        ("ERROR", "root task 'scheduler' crashed; stopping the others"),
    ]


async def _returns() -> None:
    return None


async def _cancelled_by_someone_else() -> None:
    raise asyncio.CancelledError


@pytest.mark.parametrize(
    ("coro_factory", "outcome", "logged"),
    [
        pytest.param(
            _returns,
            Outcome.RETURNED,
            "root task 'link' returned unexpectedly; stopping the others",
            id="returns",
        ),
        pytest.param(
            _cancelled_by_someone_else,
            Outcome.CANCELLED,
            "root task 'link' was cancelled unexpectedly; stopping the others",
            id="cancelled",
        ),
    ],
)
async def test_an_unexpected_end_is_a_failure(
    coro_factory: Callable[[], Coroutine[Any, Any, None]],
    outcome: Outcome,
    logged: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    trace = Trace("scheduler")
    with pytest.raises(BaseExceptionGroup) as caught:
        await asyncio.wait_for(
            supervise(
                {"link": coro_factory(), "scheduler": trace.forever("scheduler")}, stop=new_stop_future()
            ),
            DEADLINE,
        )
    (error,) = caught.value.exceptions
    assert isinstance(error, RootTaskExited)
    assert (error.task, error.outcome, str(error)) == (
        "link",
        outcome,
        f"root task 'link' {outcome.value}; the daemon stops and exits non-zero",
    )
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == [logged]


async def test_a_task_that_will_not_stop_is_reported(caplog: pytest.LogCaptureFixture) -> None:
    release = asyncio.Event()
    started = asyncio.Event()

    async def stubborn() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await release.wait()  # a drain that never finishes on its own
            raise

    stop = new_stop_future()
    run = asyncio.create_task(supervise({"grpc": stubborn()}, stop=stop, grace=0.05))
    await asyncio.wait_for(started.wait(), DEADLINE)
    request_stop(stop, "received SIGTERM")
    try:
        with pytest.raises(BaseExceptionGroup) as caught:
            await asyncio.wait_for(run, DEADLINE)
    finally:
        release.set()
        (leftover,) = [task for task in asyncio.all_tasks() if task.get_name() == "grpc"]
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(leftover, DEADLINE)
    (error,) = caught.value.exceptions
    assert isinstance(error, RootTaskExited)
    assert (error.task, error.outcome) == ("grpc", Outcome.STUCK)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == [
        "root task 'grpc' did not stop within 0.05s of being cancelled"
    ]


async def test_failures_while_stopping_surface_and_swallowed_cancellation_is_flagged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    started = {name: asyncio.Event() for name in ("store", "monitor")}

    async def fails_to_close() -> None:
        started["store"].set()
        try:
            await asyncio.Event().wait()
        finally:
            raise OSError("database is locked")

    async def swallows() -> None:
        started["monitor"].set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            return

    stop = new_stop_future()
    run = asyncio.create_task(supervise({"store": fails_to_close(), "monitor": swallows()}, stop=stop))
    for event in started.values():
        await asyncio.wait_for(event.wait(), DEADLINE)
    request_stop(stop, "received SIGINT")
    with pytest.raises(BaseExceptionGroup) as caught:
        await asyncio.wait_for(run, DEADLINE)
    (error,) = caught.value.exceptions
    assert (type(error), str(error), error.__notes__) == (
        OSError,
        "database is locked",
        ["raised by root task 'store' while stopping"],
    )
    assert [(r.levelname, r.getMessage()) for r in caplog.records if r.levelno >= logging.WARNING] == [
        ("WARNING", "root task 'monitor' swallowed its cancellation and returned"),
        ("ERROR", "root task 'store' failed while stopping"),
    ]


async def test_a_failing_hook_does_not_stop_the_shutdown(caplog: pytest.LogCaptureFixture) -> None:
    trace = Trace("grpc")

    def hook(reason: str) -> None:
        raise RuntimeError("notify socket gone")

    stop = new_stop_future()
    run = asyncio.create_task(supervise({"grpc": trace.forever("grpc")}, stop=stop, on_stopping=hook))
    await trace.all_started()
    request_stop(stop, "admin asked")
    assert await asyncio.wait_for(run, DEADLINE) == "admin asked"
    assert trace.events == ["stopped grpc"]
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == [
        "the on_stopping hook raised; continuing the shutdown"
    ]


async def test_cancelling_the_supervisor_stops_the_tasks_and_propagates() -> None:
    trace = Trace("grpc", "scheduler")
    run = asyncio.create_task(
        supervise(
            {"grpc": trace.forever("grpc"), "scheduler": trace.forever("scheduler")},
            stop=new_stop_future(),
            on_stopping=trace.on_stopping,
        )
    )
    await trace.all_started()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(run, DEADLINE)
    assert trace.events == [
        "on_stopping: the supervisor was cancelled",
        "stopped grpc",
        "stopped scheduler",
    ]


async def test_nothing_to_supervise_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least one root task"):
        await supervise({}, stop=new_stop_future())


async def test_request_stop_keeps_the_first_reason() -> None:
    stop = new_stop_future()
    assert [request_stop(stop, "received SIGTERM"), request_stop(stop, "received SIGINT")] == [True, False]
    assert stop.result() == "received SIGTERM"


class _LogWaiter(logging.Handler):
    """An event set when the supervisor logs a message containing ``text``."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self._text = text
        self._seen = asyncio.Event()
        self._logger = logging.getLogger("sluicegate.common.supervise")

    def emit(self, record: logging.LogRecord) -> None:
        if self._text in record.getMessage():
            self._seen.set()

    async def wait(self) -> None:
        await self._seen.wait()

    def __enter__(self) -> _LogWaiter:
        self._logger.addHandler(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._logger.removeHandler(self)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
async def test_signal_only_resolves_the_stop_future(
    signum: signal.Signals, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="sluicegate.common.supervise")
    loop = asyncio.get_running_loop()
    stop = new_stop_future()
    with stop_on_signals(stop):
        os.kill(os.getpid(), signum)
        assert await asyncio.wait_for(stop, DEADLINE) == f"received {signum.name}"
        # The second signal must arrive, be logged, and change nothing.
        with _LogWaiter("already stopping") as second_logged:
            os.kill(os.getpid(), signum)
            await asyncio.wait_for(second_logged.wait(), DEADLINE)
    assert stop.result() == f"received {signum.name}"
    assert [r.getMessage() for r in caplog.records] == [
        f"received {signum.name}; stopping",
        f"received {signum.name} while already stopping (received {signum.name}); shutdown continues",
    ]
    # The handlers are gone once the block is left.
    assert loop.remove_signal_handler(signum) is False


def _run_child(body: str) -> subprocess.CompletedProcess[str]:
    script = (
        "from sluicegate.common.supervise import arm_hard_deadline, disarm_hard_deadline\n"
        + textwrap.dedent(body)
    )
    return subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=30, check=False
    )


def test_hard_deadline_exits_a_wedged_process_with_a_stack_dump() -> None:
    # The child blocks its only thread, as a wedged event loop would; the
    # deadline must still end it, long before the blocking call would return.
    child = _run_child(
        """
        import time
        arm_hard_deadline(0.2)
        time.sleep(25)
        print("not reached")
        """
    )
    assert child.returncode == 1
    assert child.stdout == ""
    assert "Timeout (0:00:00.200000)!" in child.stderr
    assert 'File "<string>", line 5 in <module>' in child.stderr


def test_disarmed_hard_deadline_does_nothing() -> None:
    child = _run_child(
        """
        import time
        arm_hard_deadline(0.2)
        disarm_hard_deadline()
        time.sleep(0.6)  # outlive the deadline it would have had
        print("finished")
        """
    )
    assert (child.returncode, child.stdout, child.stderr) == (0, "finished\n", "")


# The pattern from the supervise module docstring, as a whole daemon: it is
# run as a real process under a stand-in for systemd's notify socket.
_DAEMON = """
import asyncio, logging, sys
from sluicegate.common.health import HealthServer
from sluicegate.common.metrics import new_registry
from sluicegate.common.sdnotify import Notifier, watchdog_task
from sluicegate.common.supervise import (
    arm_hard_deadline, new_stop_future, stop_on_signals, supervise,
)

async def work(crash: bool) -> None:
    if crash:
        raise RuntimeError("lost the store")
    await asyncio.Event().wait()

async def amain(crash: bool) -> None:
    notifier = Notifier.from_environment()
    stop = new_stop_future()
    with stop_on_signals(stop):
        async with HealthServer(registry=new_registry(), readiness=lambda: (True, "up")) as health:
            def stopping(reason: str) -> None:
                health.mark_stopping(reason)
                notifier.stopping(status=reason)
                arm_hard_deadline(20)

            notifier.ready(status=f"health port {health.address[1]}")
            await supervise(
                {
                    "work": work(crash),
                    "watchdog": watchdog_task(notifier, period=0.05, healthy=lambda: True),
                },
                stop=stop,
                on_stopping=stopping,
            )

logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(message)s")
try:
    asyncio.run(amain(crash=sys.argv[1] == "crash"))
except BaseExceptionGroup:
    sys.exit(1)
"""


def _datagrams_until(sock: socket.socket, wanted: bytes) -> list[bytes]:
    """Datagrams up to and including the first starting with ``wanted``, leaving out watchdog pings."""
    received: list[bytes] = []
    for _ in range(10_000):
        readable, _, _ = select.select([sock], [], [], DEADLINE)
        assert readable, f"no {wanted!r} within {DEADLINE}s; got {received}"
        datagram = sock.recv(65536)
        if datagram != b"WATCHDOG=1":
            received.append(datagram)
        if datagram.startswith(wanted):
            return received
    raise AssertionError(f"no {wanted!r} among 10000 datagrams")


@pytest.mark.parametrize(
    ("mode", "stopping", "exit_code", "logged"),
    [
        pytest.param(
            "sigterm", b"STOPPING=1\nSTATUS=received SIGTERM", 0, "INFO all root tasks stopped", id="sigterm"
        ),
        pytest.param(
            "crash",
            b"STOPPING=1\nSTATUS=root task ended: work",
            1,
            "ERROR root task 'work' crashed; stopping the others",
            id="crash",
        ),
    ],
)
def test_daemon_lifecycle_under_a_stand_in_systemd(
    mode: str, stopping: bytes, exit_code: int, logged: str
) -> None:
    with (
        tempfile.TemporaryDirectory(prefix="sg-", dir="/tmp") as scratch,
        socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as notify,
    ):
        address = f"{scratch}/notify.sock"
        notify.bind(address)
        env = {**os.environ, "NOTIFY_SOCKET": address}
        with subprocess.Popen(
            [sys.executable, "-c", _DAEMON, mode],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        ) as daemon:
            try:
                (ready,) = _datagrams_until(notify, b"READY=1")
                assert ready.startswith(b"READY=1\nSTATUS=health port ")
                if mode == "sigterm":
                    port = int(ready.rsplit(b" ", 1)[1])
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=DEADLINE) as reply:
                        assert (reply.status, json.load(reply)) == (200, {"ready": True, "reason": "up"})
                    daemon.send_signal(signal.SIGTERM)
                assert _datagrams_until(notify, b"STOPPING=1") == [stopping]
                _, stderr = daemon.communicate(timeout=DEADLINE * 4)
            finally:
                if daemon.poll() is None:
                    daemon.kill()
    assert daemon.returncode == exit_code, stderr
    assert logged in stderr.splitlines()
