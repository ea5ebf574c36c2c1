"""The notify protocol against real AF_UNIX datagram sockets, path-bound and abstract."""

from __future__ import annotations

import asyncio
import logging
import os
import select
import socket
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sluicegate.common.sdnotify import (
    Notifier,
    NotifySocketError,
    WatchdogEnvironmentError,
    watchdog_interval,
    watchdog_task,
)

DEADLINE = 5.0  # seconds; only reached when something is broken


@dataclass(frozen=True, slots=True)
class Listener:
    """A bound datagram socket standing in for systemd's notify socket."""

    address: str  # as systemd writes it into NOTIFY_SOCKET
    sock: socket.socket

    def receive(self) -> bytes:
        readable, _, _ = select.select([self.sock], [], [], DEADLINE)
        assert readable, f"no datagram arrived within {DEADLINE}s"
        return self.sock.recv(65536)

    def pending(self) -> list[bytes]:
        received: list[bytes] = []
        for _ in range(1000):
            try:
                received.append(self.sock.recv(65536))
            except BlockingIOError:
                return received
        raise AssertionError("more than 1000 datagrams queued")


@pytest.fixture
def short_dir() -> Iterator[Path]:
    # sun_path holds 108 bytes; pytest's tmp_path can be longer than that.
    with tempfile.TemporaryDirectory(prefix="sg-", dir="/tmp") as path:
        yield Path(path)


def _bind(bind_to: str | bytes, address: str) -> Listener:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(bind_to)
    sock.setblocking(False)
    return Listener(address=address, sock=sock)


@pytest.fixture(params=["path", "abstract"])
def listener(request: pytest.FixtureRequest, short_dir: Path) -> Iterator[Listener]:
    if request.param == "path":
        path = str(short_dir / "notify.sock")
        bound = _bind(path, path)
    else:
        name = f"sluicegate-test-{uuid.uuid4().hex}"
        bound = _bind(b"\0" + name.encode(), "@" + name)
    try:
        yield bound
    finally:
        bound.sock.close()


@pytest.mark.parametrize(
    ("send", "expected"),
    [
        pytest.param(lambda n: n.ready(), b"READY=1", id="ready"),
        pytest.param(
            lambda n: n.ready(status="serving 3 queues"),
            b"READY=1\nSTATUS=serving 3 queues",
            id="ready-status",
        ),
        pytest.param(lambda n: n.status("loading store"), b"STATUS=loading store", id="status"),
        pytest.param(
            lambda n: n.status("line one\nline two"), b"STATUS=line one line two", id="status-newline"
        ),
        pytest.param(lambda n: n.stopping(), b"STOPPING=1", id="stopping"),
        pytest.param(
            lambda n: n.stopping(status="received SIGTERM"),
            b"STOPPING=1\nSTATUS=received SIGTERM",
            id="stopping-status",
        ),
        pytest.param(lambda n: n.watchdog(), b"WATCHDOG=1", id="watchdog"),
        pytest.param(
            lambda n: n.reloading(monotonic_usec=123456789),
            b"RELOADING=1\nMONOTONIC_USEC=123456789",
            id="reloading",
        ),
        pytest.param(
            lambda n: n.notify("EXTEND_TIMEOUT_USEC=5000000"), b"EXTEND_TIMEOUT_USEC=5000000", id="raw"
        ),
    ],
)
def test_sends_exact_datagram(listener: Listener, send: Callable[[Notifier], bool], expected: bytes) -> None:
    with Notifier.from_environment({"NOTIFY_SOCKET": listener.address}) as notifier:
        assert send(notifier) is True
    assert listener.receive() == expected
    assert listener.pending() == []


def test_one_datagram_per_call_in_order(listener: Listener) -> None:
    with Notifier(listener.address) as notifier:
        notifier.ready()
        notifier.watchdog()
        notifier.stopping()
    assert listener.pending() == [b"READY=1", b"WATCHDOG=1", b"STOPPING=1"]


def test_reloading_stamps_the_monotonic_clock(listener: Listener) -> None:
    before = time.monotonic_ns() // 1000
    with Notifier(listener.address) as notifier:
        notifier.reloading()
    after = time.monotonic_ns() // 1000
    first, second = listener.receive().split(b"\n")
    assert first == b"RELOADING=1"
    name, _, value = second.partition(b"=")
    assert name == b"MONOTONIC_USEC"
    assert before <= int(value) <= after


@pytest.mark.parametrize("environ", [{}, {"NOTIFY_SOCKET": ""}], ids=["unset", "empty"])
def test_without_notify_socket_every_call_is_a_no_op(environ: dict[str, str]) -> None:
    notifier = Notifier.from_environment(environ)
    assert notifier.enabled is False
    assert [notifier.ready(), notifier.status("x"), notifier.watchdog(), notifier.stopping()] == [
        False,
        False,
        False,
        False,
    ]


@pytest.mark.parametrize("address", ["relative/notify.sock", "vsock:2:9999"], ids=["relative", "vsock"])
def test_unusable_address_is_rejected(address: str) -> None:
    with pytest.raises(NotifySocketError) as caught:
        Notifier(address)
    assert (caught.value.address, caught.value.problem) == (address, "unsupported address form")


@pytest.mark.parametrize("assignment", ["READY", "READY=1\nSTATUS=x"], ids=["no-equals", "newline"])
def test_malformed_assignment_is_refused(assignment: str) -> None:
    with pytest.raises(ValueError, match="one NAME=value line"):
        Notifier(None).notify(assignment)


def test_send_failure_is_logged_once_and_recovery_noted(
    short_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = str(short_dir / "late.sock")
    caplog.set_level(logging.DEBUG, logger="sluicegate.common.sdnotify")
    with Notifier(path) as notifier:
        assert [notifier.watchdog(), notifier.watchdog()] == [False, False]
        late = _bind(path, path)
        try:
            assert notifier.watchdog() is True
            assert late.receive() == b"WATCHDOG=1"
        finally:
            late.sock.close()
    assert [(r.levelno, r.getMessage().split(":")[0]) for r in caplog.records] == [
        (logging.WARNING, "could not send 'WATCHDOG=1' to the systemd notify socket"),
        (logging.DEBUG, "could not send 'WATCHDOG=1' to the systemd notify socket"),
        (logging.INFO, "systemd notify socket accepts messages again"),
    ]


@pytest.mark.parametrize(
    ("environ", "pid", "expected"),
    [
        pytest.param({}, None, None, id="unset"),
        pytest.param({"WATCHDOG_USEC": ""}, None, None, id="empty"),
        pytest.param({"WATCHDOG_USEC": "30000000"}, None, 15.0, id="30s-no-pid"),
        pytest.param({"WATCHDOG_USEC": "1000"}, None, 0.0005, id="1ms"),
        pytest.param({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "4242"}, 4242, 15.0, id="pid-matches"),
        pytest.param({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "4242"}, 4243, None, id="pid-differs"),
        pytest.param(
            {"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": str(os.getpid())}, None, 15.0, id="own-pid"
        ),
    ],
)
def test_watchdog_interval(environ: dict[str, str], pid: int | None, expected: float | None) -> None:
    assert watchdog_interval(environ, pid=pid) == expected


@pytest.mark.parametrize(
    ("environ", "variable", "problem"),
    [
        pytest.param({"WATCHDOG_USEC": "30s"}, "WATCHDOG_USEC", "not an integer", id="usec-text"),
        pytest.param({"WATCHDOG_USEC": "0"}, "WATCHDOG_USEC", "not positive", id="usec-zero"),
        pytest.param({"WATCHDOG_USEC": "-5"}, "WATCHDOG_USEC", "not positive", id="usec-negative"),
        pytest.param(
            {"WATCHDOG_USEC": "1", "WATCHDOG_PID": "me"}, "WATCHDOG_PID", "not an integer", id="pid-text"
        ),
    ],
)
def test_watchdog_interval_rejects_garbage(environ: dict[str, str], variable: str, problem: str) -> None:
    with pytest.raises(WatchdogEnvironmentError) as caught:
        watchdog_interval(environ, pid=1)
    assert (caught.value.variable, caught.value.value, caught.value.problem) == (
        variable,
        environ[variable],
        problem,
    )


def _failing_check() -> bool:
    raise RuntimeError("scheduler state unreadable")


@pytest.mark.parametrize("unhealthy", ["returns-false", "raises"])
async def test_watchdog_pings_only_while_healthy(
    listener: Listener, unhealthy: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="sluicegate.common.sdnotify")
    healthy = False
    checks = 0
    three_failed_checks = asyncio.Event()

    def check() -> bool:
        nonlocal checks
        checks += 1
        if not healthy and checks >= 3:
            three_failed_checks.set()
        if healthy:
            return True
        return False if unhealthy == "returns-false" else _failing_check()

    loop = asyncio.get_running_loop()
    with Notifier(listener.address) as notifier:
        task = asyncio.create_task(watchdog_task(notifier, period=0.001, healthy=check))
        try:
            await asyncio.wait_for(three_failed_checks.wait(), DEADLINE)
            # Each send lands in the receive queue synchronously, so an empty
            # queue after three checks means none of them sent anything.
            assert listener.pending() == []
            checks_while_unhealthy = checks
            healthy = True
            datagram = await asyncio.wait_for(loop.sock_recv(listener.sock, 65536), DEADLINE)
            assert datagram == b"WATCHDOG=1"
        finally:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
    messages = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    check_raised = "watchdog health check raised; treating the service as unhealthy"
    # A raising check is logged (with its traceback) every time; the change of
    # state only once each way.
    assert [m for m in messages if m != check_raised] == [
        "health check fails; withholding watchdog keep-alives, so systemd restarts the service "
        "unless it recovers within WatchdogSec",
        "health check passes again; resuming watchdog keep-alives",
    ]
    assert messages.count(check_raised) == (checks_while_unhealthy if unhealthy == "raises" else 0)
